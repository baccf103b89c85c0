"""This user's private runtime directory and the lock files in it: where the change monitor's socket lies, and the
app's resident server's (app/server/runtime.py builds on these; the store never imports the app).

Imports: `os` and `sys` only, both loaded before any script runs (app/launch.py pays for what it imports in every
one-shot command).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not `typing`'s: importing typing costs ~15 ms (it imports re); mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

#: The longest socket path AF_UNIX takes: sun_path is 108 bytes with its NUL on Linux, 104 on Darwin and the BSDs.
SOCKET_MAX = 107 if sys.platform.startswith("linux") else 103


def runtime_base() -> str | None:
    """Where this user's runtime directory is to be, not checked or made: `CODEXR_RUNTIME_DIR`, else
    `$XDG_RUNTIME_DIR/codexr`, else — no XDG_RUNTIME_DIR, as in containers, ssh and su sessions and on every Mac —
    `codexr/run-HOST` in the user's cache directory (`$XDG_CACHE_HOME`, else `~/.cache`; the host's name keeps two
    machines sharing a home apart). None: not even a home directory to put it in."""
    base = os.environ.get("CODEXR_RUNTIME_DIR")
    if base:
        return base
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "codexr")
    cache = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(cache):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        cache = os.path.join(home, ".cache")
    return os.path.join(cache, "codexr", f"run-{os.uname().nodename or 'host'}")


def runtime_dir(create: bool = True) -> str | None:
    """This user's private directory for sockets, the resident server's and the change monitors' (None when there is
    none: then neither runs), at `runtime_base()`.

    Never below `/tmp` (the old `/tmp/codexr-UID` was writable by every process of the user's that Codex sandboxes,
    issue 17). Used only where no other process can replace the socket: the directory is this user's, mode 700, not
    below `/tmp` or `$TMPDIR` (which Codex's sandbox lets a command write), and each directory above it belongs to
    root or this user and is writable by no one else, as OpenSSH requires of the files it trusts. (A cache directory
    inside a workspace a sandboxed command may write is covered by the other end: a client uses a server or a
    monitor only if it runs confined exactly as the client, snapshot_store/confinement.py.) The fallback's own
    `codexr` directory in the cache directory is made mode 700 when the cache directory above it passes that test.
    """
    base = runtime_base()
    if base is None:
        return None
    parent = os.path.realpath(os.path.dirname(os.path.abspath(base)))
    if create and is_fallback() and not os.path.isdir(parent):
        cache = os.path.dirname(parent)
        if not _made(cache) or not safe_parents(os.path.realpath(cache)) or not _made(parent):
            return None
    if not safe_parents(parent):
        return None
    base = os.path.join(parent, os.path.basename(os.path.abspath(base)))
    if create:
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        st = os.lstat(base)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return base


def is_fallback() -> bool:
    """Whether `runtime_base()` is the cache directory's (neither variable names a runtime directory)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR") or ""
    return not os.environ.get("CODEXR_RUNTIME_DIR") and not os.path.isabs(xdg)


def checked_parent(base: str) -> str:
    """The directory whose chain the ownership rule is checked on before the runtime directory exists: its parent,
    or for the cache directory's fallback (whose `codexr/` and even the cache directory are made on first use) the
    nearest of those that exists."""
    parent = os.path.realpath(os.path.dirname(os.path.abspath(base)))
    if is_fallback():
        for _ in range(2):
            if os.path.isdir(parent):
                break
            parent = os.path.dirname(parent)
    return parent


def _made(path: str) -> bool:
    """`path` is a directory (made mode 700 when missing and its parent is a directory: `~/.cache` on a new
    account)."""
    if os.path.isdir(path):
        return True
    if not os.path.isdir(os.path.dirname(path)):
        return False
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError:
        return False
    return os.path.isdir(path)


def safe_parents(real: str) -> bool:
    """Whether `real` (a resolved path) and every directory above it belong to root or this user, are writable by
    no one else, and are not a temporary directory a sandboxed command may write."""
    temps = []
    for tmp in ("/tmp", "/var/tmp", "/dev/shm", os.environ.get("TMPDIR") or "/tmp"):
        try:
            st = os.stat(tmp)
        except OSError:
            continue
        temps.append((st.st_dev, st.st_ino))
    uid = os.getuid()
    path = real
    while True:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if st.st_uid not in (0, uid) or st.st_mode & 0o022 or (st.st_dev, st.st_ino) in temps:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


def hasher() -> Any:
    """blake2b from its C module (hashlib's import loads OpenSSL: ~5 ms)."""
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    return blake2b(digest_size=12)


def take_lock(lock: str) -> int | None:
    """The fd holding `lock` (a server's or a monitor's `<socket>.lock`, a monitor slot's) exclusively, or None when
    someone holds it (its process, for its whole life, or one starting) or it cannot be opened (never through a
    symlink)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def lock_names(lock: str, pid: int) -> bool:
    """Whether `lock` (a server's or a monitor's `<socket>.lock`, which its holder writes its pid into) is this
    user's and names `pid`: the peer on the socket is the process that holds it."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        named = os.read(fd, 32).strip()
        owner = os.fstat(fd).st_uid
    finally:
        os.close(fd)
    return owner == os.getuid() and named.isdigit() and int(named) == pid
