"""Codex's managed app-server daemon, in which the official TUI runs its threads (CODEX_FACTS §11): where its control
socket is, whether codexr may work through it, and who holds a thread when codexr's own app-server may not have it.

Why: the daemon outlives the TUI and keeps each thread it loaded as that thread's only writer, so codexr's own
app-server cannot resume it ("already has an active writer"; 0.163.0 kept an idle thread for minutes). codexr then
becomes one more client of the daemon, as the TUI is, but only through a socket no other user can have put there,
and only when the daemon runs confined exactly as this codexr does (never more than the caller).
"""

from __future__ import annotations

import os
import socket
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

#: How Codex words a resume refused because another app-server holds the thread (0.163.0 and 0.171.0).
HELD = "already has an active writer"
#: Where the managed daemon's control socket is linked from, below CODEX_HOME.
CONTROL = ("app-server-control", "app-server-control.sock")
#: The command that stops the daemon (it ends whatever still runs in it).
STOP = "codex app-server daemon stop"


#: Set in the environment of a `codexr codex` app-server: the door (a unix socket in that codexr's private directory)
#: that tells a codexr confined as itself where the app-server listens and the token it admits clients by.
DOOR_ENV = "CODEXR_BACKEND_DOOR"


class Unavailable(Exception):
    """codexr may not (or cannot) work through the daemon; the message says why in a user's words."""


def held_elsewhere(message: str) -> bool:
    """Whether Codex refused a thread because another app-server has it open."""
    return HELD in message


def checked_socket(link: Path, what: str = "the app-server") -> str:
    """An app-server's socket, checked to be one only this user can have put there (Unavailable otherwise).

    `--listen unix://PATH` makes PATH a link into `/tmp/codex-daemon-<uid>/`: the socket must be this user's and its
    directory this user's with mode 700, so no other user can have made or replaced it. The path returned is the
    resolved one, so a link changed after the check is not followed later.
    """
    try:
        target = os.path.realpath(link, strict=True)
        st = os.lstat(target)
        parent = os.lstat(os.path.dirname(target))
    except OSError:
        raise Unavailable(f"{what} is not running (no socket at {link})") from None
    uid = os.getuid()
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != uid:
        raise Unavailable(f"{target} is not a socket of yours")
    if not stat.S_ISDIR(parent.st_mode) or parent.st_uid != uid or parent.st_mode & 0o077:
        raise Unavailable(f"{os.path.dirname(target)} is not a directory of yours with mode 700")
    return target


def confinement_names() -> list[str]:
    """What each field of a confinement fingerprint is, in a user's words (snapshot_store/confinement.py)."""
    from snapshot_store.confinement import NAMESPACES, STATUS_FIELDS

    names = [f.decode().rstrip(":") for f in STATUS_FIELDS]
    return names + [f"{ns} namespace" for ns in NAMESPACES] + ["root directory", "cgroup", "security label"]


def differences(ours: tuple[str, ...], theirs: tuple[str, ...]) -> list[str]:
    """The names of the fields two fingerprints differ in."""
    from snapshot_store.confinement import STATUS_FIELDS

    labels = iter(confinement_names()[len(STATUS_FIELDS):])
    out = []
    for mine, other in zip(ours, theirs, strict=False):
        label = mine.split(":")[0] if mine.encode().startswith(STATUS_FIELDS) else next(labels, "?")
        if mine != other:
            out.append(label)
    if len(ours) != len(theirs):
        out.append("what can be read of it")
    return out


def connect(path: str) -> tuple[socket.socket, int]:
    """A connection to the daemon's socket and the daemon's pid, where the daemon is confined exactly as this process
    (Unavailable otherwise).

    Linux only: the peer is named by a pidfd (SO_PEERPIDFD) and compared through /proc, as the resident server
    compares its callers; where that cannot be read, codexr does not work through the daemon (fails closed).
    """
    from snapshot_store.confinement import fingerprint, peer

    if sys.platform != "linux" or not os.path.isdir("/proc/self/ns"):
        raise Unavailable(f"codexr cannot check the rights of Codex's daemon on {sys.platform}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(10)
        try:
            sock.connect(path)
        except OSError as exc:
            raise Unavailable(f"Codex's app-server daemon does not answer ({exc.strerror})") from None
        found, ours = peer(sock), fingerprint("self")
        if found is None or ours is None:
            raise Unavailable("codexr cannot read what confines Codex's daemon (needs Linux 6.5 and /proc)")
        pid, theirs = found
        differ = differences(ours, theirs)
        if differ:
            raise Unavailable(f"Codex's app-server daemon (pid {pid}) runs with other rights than this codexr "
                              f"(its {', '.join(differ[:3])} differ{'s' if len(differ) == 1 else ''})")
        sock.settimeout(None)
        return sock, pid
    except BaseException:
        sock.close()
        raise


def reachable(link: Path, what: str) -> str:
    """The checked socket at `link`, once a connection to it has found the app-server confined as this process
    (`checked_socket`, `connect`): asked before codexr switches to it, to say why not in one line (Unavailable)."""
    path = checked_socket(link, what)
    connect(path)[0].close()
    return path


@dataclass(frozen=True)
class Holder:
    """The process that holds a thread's writer lock."""

    pid: int
    command: tuple[str, ...]

    @property
    def daemon(self) -> bool:
        """Is it Codex's managed daemon?"""
        return "--managed-daemon" in self.command

    @property
    def door(self) -> Path | None:
        """For the app-server of a `codexr codex`: its door (DOOR_ENV, read from its environment); None otherwise."""
        try:
            environ = Path(f"/proc/{self.pid}/environ").read_bytes().split(b"\0")
        except OSError:
            return None
        key = DOOR_ENV.encode() + b"="
        found = [e[len(key):] for e in environ if e.startswith(key)]
        return Path(os.fsdecode(found[0])) if found and os.path.isabs(found[0]) else None

    def socket(self, codex_home: Path) -> Path | None:
        """The unix socket it serves clients on, from its command line (`--listen unix://PATH`; no PATH: the daemon's
        control socket below CODEX_HOME); None for one on stdio, which no other client can reach."""
        words = list(self.command)
        for i, word in enumerate(words):
            url = words[i + 1] if word == "--listen" and i + 1 < len(words) else word.removeprefix("--listen=")
            if (word == "--listen" or word.startswith("--listen=")) and url.startswith("unix://"):
                path = url.removeprefix("unix://")
                if not path:
                    return codex_home.joinpath(*CONTROL)
                return Path(path) if os.path.isabs(path) else None  # relative to its cwd: not followed
        return None

    def __str__(self) -> str:
        words = [os.path.basename(self.command[0]), *self.command[1:4]] if self.command else []
        return f"pid {self.pid}" + (f" ({' '.join(words)})" if words else "")


def holder(codex_home: Path, thread_id: str) -> Holder | None:
    """Who holds a thread's writer lock, where the system says (Linux's /proc/locks; None elsewhere or unknown)."""
    lock = codex_home / "thread-writer-locks" / f"{thread_id}.lock"
    try:
        st = os.stat(lock)
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5] == where and parts[4].isdigit():
            try:
                cmd = Path(f"/proc/{parts[4]}/cmdline").read_bytes().split(b"\0")
            except OSError:
                cmd = []
            return Holder(int(parts[4]), tuple(w.decode(errors="replace") for w in cmd if w))
    return None


def ask_door(door: Path) -> tuple[str, str]:
    """Where a `codexr codex` app-server listens and the token it admits clients by, asked of its door. The door is in
    that codexr's private directory (this user's, mode 700) and answers only a process confined exactly as itself;
    this side checks the door's process the same way (Linux: SO_PEERPIDFD and /proc). Unavailable with the reason."""
    from snapshot_store.confinement import fingerprint, peer

    try:
        st = os.lstat(door.parent)
    except OSError:
        raise Unavailable(f"{door.parent} is gone") from None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise Unavailable(f"{door.parent} is not a directory of yours with mode 700")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(10)
        sock.connect(str(door))
        found, ours = peer(sock), fingerprint("self")
        if found is None or ours is None or found[1] != ours:
            raise Unavailable("the codexr codex that has it runs with other rights than this codexr")
        data = b""
        while len(data) < 512 and (chunk := sock.recv(512)):
            data += chunk
    except OSError as exc:
        raise Unavailable(f"the codexr codex that has it does not answer ({exc.strerror or exc})") from None
    finally:
        sock.close()
    words = data.decode("ascii", "replace").split()
    if len(words) != 2 or not words[0].startswith("ws://127.0.0.1:"):
        raise Unavailable("the codexr codex that has it refused: this codexr runs with other rights than it")
    return words[0], words[1]
