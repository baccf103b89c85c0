"""The private directories of `codexr codex` (`proxy-*`: its socket and the app-server's log), and the removal of
those a killed run left: each is held by its process for that process's whole life (a flock on `owner.lock`,
which the kernel releases however the process ends), so a directory whose lock can be taken has no owner left.

Removed only: directories (never through a symlink) of this user, named `proxy-*`, directly in the base directory
the proxy uses, whose lock this process took and in which no socket listens. A directory made before these locks
existed (an older codexr) has no `owner.lock`: it goes only when its socket listens no more (`/proc/net/unix`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "proxy-"
LOCK = "owner.lock"
SOCKET = "app-server.sock"  # the name app/cmds/proxy_cmds.py binds in the directory
ACCEPTING = 0x10000  # __SO_ACCEPTCON in /proc/net/unix's Flags: a listening socket
CLAIM_TRIES = 50  # new directories tried before giving up (each lost only to a sweep that took it first)

_held: list[int] = []  # this process's locks: kept open until it ends (never inherited: O_CLOEXEC)


def claim(base: str) -> Path:
    """A new `proxy-*` directory (0700) in `base`, held by this process until it ends."""
    for _ in range(CLAIM_TRIES):
        path = tempfile.mkdtemp(prefix=PREFIX, dir=base)
        lock = os.path.join(path, LOCK)
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        except FileNotFoundError:
            continue  # a sweep removed it before the lock was made: take another
        fcntl.flock(fd, fcntl.LOCK_EX)  # a sweep that took it first removes it, then releases
        held = os.fstat(fd)
        try:
            now = os.stat(lock, follow_symlinks=False)
        except FileNotFoundError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            _held.append(fd)
            return Path(path)
        os.close(fd)  # it went with its directory: take another
    raise OSError(f"could not make a private directory in {base}")


def sweep(base: str) -> list[str]:
    """Remove the `proxy-*` directories in `base` that no live process holds; the names removed."""
    try:
        base_fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    removed = []
    try:
        names = [name for name in sorted(os.listdir(base_fd)) if name.startswith(PREFIX)]
        listening = _listening() if names else None
        for name in names:
            if _remove_if_stale(base_fd, name, os.path.join(base, name, SOCKET), listening):
                removed.append(name)
    finally:
        os.close(base_fd)
    return removed


def _remove_if_stale(base_fd: int, name: str, socket_path: str, listening: set[str] | None) -> bool:
    """Remove `name` (in `base_fd`) if it is this user's directory, its lock is free and nothing listens in it
    (`listening` None: unknown, so a directory that had no lock stays)."""
    try:
        dir_fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=base_fd)
    except OSError:
        return False  # a symlink, a file, gone
    try:
        st = os.fstat(dir_fd)
        if st.st_uid != os.getuid():
            return False
        made = False
        try:
            lock = os.open(LOCK, os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW, dir_fd=dir_fd)
        except FileNotFoundError:  # an older codexr's directory, or one being made this instant
            try:
                lock = os.open(LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
            except OSError:
                return False
            made = True
        except OSError:
            return False  # a symlink or a directory in the lock's place: not ours to judge
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return False  # held: its `codexr codex` runs
            if (listening is None and made) or (listening is not None and socket_path in listening):
                if made:  # kept: the next sweep must not take the lock made here for a sign of a killed owner
                    with contextlib.suppress(OSError):
                        os.unlink(LOCK, dir_fd=dir_fd)
                return False
            try:
                now = os.stat(name, dir_fd=base_fd, follow_symlinks=False)
            except OSError:
                return False
            if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
                return False
            shutil.rmtree(name, ignore_errors=True, dir_fd=base_fd)  # its lock held while it goes
            return True
        finally:
            os.close(lock)
    finally:
        os.close(dir_fd)


def _listening() -> set[str] | None:
    """The paths of the unix sockets listening now, from this network namespace's /proc/net/unix (None: unknown)."""
    out: set[str] = set()
    try:
        with open("/proc/net/unix", "rb") as f:
            lines = f.read().splitlines()[1:]
    except OSError:
        return None
    for line in lines:
        fields = line.split(None, 7)
        if len(fields) == 8 and int(fields[3], 16) & ACCEPTING:
            out.add(os.fsdecode(fields[7]))
    return out
