"""What confines a process, read from /proc: the change monitor (detect/monitor_launch.py) answers only a process
confined as itself, and the app's resident server runs a command only for a caller confined alike (issue 17: a
worker kept the server's rights, so a sandboxed agent's `codexr` left Codex's sandbox).

Compared: the credentials (real, effective, saved and file-system uids and gids, supplementary groups), the five
capability sets, `no_new_privs`, the seccomp mode and its number of filters, the allowed CPUs and memory nodes,
every namespace (mount, pid, user, network, ipc, uts, cgroup, time, and those for children), the root directory,
the cgroup and the LSM label (AppArmor, SELinux). Two processes that differ in any of them do not run a command
or answer a question for each other. Not visible here, so not compared: Landlock domains (which need
`no_new_privs` or CAP_SYS_ADMIN to be entered, and come with Codex's seccomp filter) and the contents of two equally
long seccomp filter lists.

A process is named by a pidfd, not a pid: what was read is the peer's only if the pidfd's process is still alive
after the read (a pid is not reused before its process is gone). Imports: `os` only (app/launch.py runs this in
every one-shot command, before anything else is imported; the package's __init__ imports only errors.py).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # not `typing`'s (its import costs ~15 ms); mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class _Sock(Protocol):
        """What `peer_pidfd` needs of a socket (the `socket` module's and `_socket`'s alike)."""

        def getsockopt(self, level: int, option: int, /) -> int: ...

#: Lines of /proc/PID/status that say what a process may do.
STATUS_FIELDS = (b"Uid:", b"Gid:", b"Groups:", b"CapInh:", b"CapPrm:", b"CapEff:", b"CapBnd:", b"CapAmb:",
                 b"NoNewPrivs:", b"Seccomp:", b"Seccomp_filters:", b"Cpus_allowed:", b"Mems_allowed:")
NAMESPACES = ("mnt", "pid", "pid_for_children", "user", "net", "ipc", "uts", "cgroup", "time", "time_for_children")
#: getsockopt(SOL_SOCKET, SO_PEERPIDFD): a pidfd of the peer as it connected (Linux 6.5; Python 3.11 lacks the name).
SO_PEERPIDFD = 77


def _read(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


def _or_error(path: str, read: Callable[[str], object]) -> str:
    """`read(path)` as text, or the error's name where the error is what every process gets (no such LSM)."""
    try:
        return repr(read(path))
    except (FileNotFoundError, IsADirectoryError) as exc:
        return type(exc).__name__
    except OSError as exc:
        if exc.errno in (22, 95):  # EINVAL, EOPNOTSUPP: no LSM answers for attr/current
            return f"errno {exc.errno}"
        raise


def fingerprint(pid: int | str) -> tuple[str, ...] | None:
    """What confines process `pid` (or "self"), or None when any of it cannot be read (then: no server)."""
    base = f"/proc/{pid}"
    try:
        status = _read(f"{base}/status")
        fields = []
        for line in status.splitlines():
            if line.startswith(STATUS_FIELDS):
                fields.append(line.decode("ascii", "replace").replace("\t", " "))
        for ns in NAMESPACES:
            fields.append(_or_error(f"{base}/ns/{ns}", os.readlink))
        st = os.stat(f"{base}/root")
        fields.append(f"root {st.st_dev}:{st.st_ino}")
        fields.append(_or_error(f"{base}/cgroup", _read))
        fields.append(_or_error(f"{base}/attr/current", _read))
    except OSError:
        return None
    if not any(f.startswith("Uid:") for f in fields) or not any(f.startswith("CapBnd:") for f in fields):
        return None
    return tuple(fields)


def pidfd_pid(pidfd: int) -> int | None:
    """The pid (in this process's pid namespace) of the process `pidfd` refers to; None when it is gone or hidden."""
    try:
        info = _read(f"/proc/self/fdinfo/{pidfd}")
    except OSError:
        return None
    for line in info.splitlines():
        if line.startswith(b"Pid:"):
            pid = int(line.split()[1])
            return pid if pid > 0 else None
    return None


def alive(pidfd: int) -> bool:
    """Whether the process of `pidfd` still holds its pid (signal 0: no signal, only the check; not `select`,
    whose import a one-shot command would pay)."""
    import _signal  # type: ignore[import-not-found]  # built in

    try:
        _signal.pidfd_send_signal(pidfd, 0)
    except OSError:
        return False
    return True


def of_peer(pidfd: int) -> tuple[int, tuple[str, ...]] | None:
    """The pid and fingerprint of the process `pidfd` names, read while it was provably that process."""
    pid = pidfd_pid(pidfd)
    if pid is None:
        return None
    found = fingerprint(pid)
    if found is None or not alive(pidfd):  # alive after the read: the pid was still its own during it
        return None
    return pid, found


def peer_pidfd(sock: _Sock) -> int | None:
    """A pidfd of the process at the other end of the connected unix socket `sock` (None: kernel too old)."""
    try:
        return int(sock.getsockopt(1, SO_PEERPIDFD))  # SOL_SOCKET
    except OSError:
        return None


def peer(sock: _Sock) -> tuple[int, tuple[str, ...]] | None:
    """The pid and fingerprint of the process at the other end of the unix socket `sock`, read while it was
    provably that process (None: the kernel cannot name it, it is gone, or it may not be read)."""
    pidfd = peer_pidfd(sock)
    if pidfd is None:
        return None
    try:
        return of_peer(pidfd)
    finally:
        os.close(pidfd)
