"""Starting and reaching a workspace's change monitor (monitor_daemon.py), with no more rights than the process that
asked: the store's own, so it never calls up into the app (the app only says whether the user wants monitors).

The monitor is started by the first capture that wants one (a posix_spawn of this Python: same user, credentials,
namespaces, seccomp filter, cgroup as the asker) and exits after CODEXR_MONITOR_IDLE seconds without a question.
Its socket lies in the resident server's runtime directory (rundir.runtime_dir: this user's, mode 700, not below a
directory a sandboxed command may write), named by the workspace and by the confinement of the process that
started it (confinement.fingerprint), so a process confined otherwise (Codex's sandbox) never reaches it and gets
its own. Both ends check the other before a byte is sent: same uid (SO_PEERCRED) and the same confinement, and
the client also that the peer is the pid the monitor's lock file names. `CODEXR_MONITOR=0` turns it off (read by the
app, which tells the store: Capturer.use_monitors).

At most `CODEXR_MONITOR_MAX` (MAX) run at once per user and runtime directory: each holds one of that many slot
locks (`m-slot-K.lock`), taken by the starter before the process exists and handed down to it with the
workspace's monitor lock. With every slot taken, the starter asks the least recently asked monitor to exit (on its
socket, with a question's peer checks) and starts nothing: its capture, and that workspace's until the next try
finds the slot free, check every file, as without a monitor.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from .. import confinement
from ..rundir import SOCKET_MAX, hasher, lock_names, runtime_dir, take_lock
from .monitor import Answer, MonitorClient

if TYPE_CHECKING:
    import _socket  # the monitor process imports `socket` (`main`); a capture's peer checks need only this C module

IDLE = 1800.0  # seconds without a question before a monitor exits
#: Monitors of this user's at once (`CODEXR_MONITOR_MAX`): each is a Python process of ~22 MB resident (half of it
#: shared code), so 8 stay under ~180 MB however many workspaces were captured; a user works in a few at a time,
#: and the least recently asked one makes room for a new one (whose workspace's captures check every file
#: meanwhile, as without one).
MAX = 8
SLOT_FD, LOCK_FD = 3, 4  # where a monitor finds its slot's lock and its own lock, held from before it was spawned
#: File systems whose every change passes through this kernel, so inotify sees it. Not NFS, SMB, 9p, FUSE (sshfs),
#: virtiofs or cluster file systems: a change made by another machine (or the VM's host) raises no event here,
#: which is why git's fsmonitor refuses network file systems too.
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "overlay", "reiserfs", "jfs",
                      "bcachefs", "nilfs2"})


def available() -> bool:
    """Whether a monitor can run here at all (inotify)."""
    from .inotify import ChangeJournal

    return ChangeJournal.available()


def socket_for(root: str, create: bool = True) -> str | None:
    """The monitor socket for workspace `root` and this process's confinement (None: no safe place for one)."""
    own = confinement.fingerprint("self")  # first: where no /proc says it (a Mac), no directory is made either
    base = runtime_dir(create) if own is not None else None
    if base is None or own is None:
        return None
    h = hasher()
    h.update(repr(("monitor", 1, os.getuid(), root, own)).encode(errors="surrogateescape"))
    path = os.path.join(base, f"m-{h.hexdigest()}.sock")
    return path if len(os.fsencode(path)) <= SOCKET_MAX else None


def peer_is_kin(sock: _socket.socket, pid_file: str | None = None) -> bool:
    """Whether the other end of `sock` is this user's, confined as this process is (and, with `pid_file`, the
    process whose pid that file holds: the monitor that took the lock)."""
    import _socket

    try:
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        return False
    pid, uid = int.from_bytes(raw[0:4], sys.byteorder, signed=True), int.from_bytes(raw[4:8], sys.byteorder)
    if uid != os.getuid():
        return False
    peer = confinement.peer(sock)
    if peer is None or peer[1] != confinement.fingerprint("self") or peer[0] != pid:
        return False
    if pid_file is None:
        return True
    return lock_names(pid_file, pid)


def _unescape(field: str) -> str:
    """A mountinfo path (space, tab, newline and backslash are written as octal escapes)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def fs_type(path: str, mountinfo: str | None = None) -> str | None:
    """The type of the file system `path` (a resolved path) lies on, from /proc/self/mountinfo (None: unknown)."""
    if mountinfo is None:
        try:
            with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as f:
                mountinfo = f.read()
        except OSError:
            return None
    best, found = -1, None
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split(" ")
        if not sep or len(fields) < 5 or not tail:
            continue
        point = _unescape(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best:  # the last of equally long ones is the mount on top
            best, found = len(point), tail.split(" ")[0]
    return found


class Launcher:
    """The capture's change source: asks the workspace's monitor, and starts one where none answers (twice at most
    per workspace: the first try may only have made room, by asking the least recently asked monitor to exit)."""

    def __init__(self) -> None:
        self._tries: dict[str, int] = {}
        self._local: dict[str, bool] = {}

    def ask(self, root: str, since: str | None) -> Answer | None:
        local = self._local.get(root)
        if local is None:
            local = self._local[root] = fs_type(root) in LOCAL_FS
        if not local:
            return None  # changes may come from elsewhere than this kernel: the capture checks every file
        path = socket_for(root)
        if path is None:
            return None
        answer = MonitorClient(path, _kin_of(path)).ask(root, since)
        tries = self._tries.get(root, 0)
        if answer is None and tries < 2:
            # Whether one can run here is asked only now: importing inotify was ~4 ms of every capture a monitor
            # answers (the common case), and a system without it has no monitor to answer.
            self._tries[root] = tries + 1 if available() and spawn(root, path) == MADE_ROOM else 2
        return answer


MADE_ROOM = -1
"""What `spawn` returns when it started nothing but asked a monitor to exit: the next try finds its slot free."""


def spawn(root: str, path: str) -> int | None:
    """Start the monitor of `root` on `path` in the background, unless one holds its lock or no slot is free (its
    pid; None; MADE_ROOM when all slots were taken and the least recently asked monitor agreed to exit).

    The child inherits both locks (the workspace's monitor lock and a slot's) from before it exists until it ends,
    so no second one starts meanwhile and never more than `max_monitors()` monitors run, however many processes
    start them at once."""
    import fcntl

    fd = take_lock(path + ".lock")
    if fd is None:
        return None
    held: list[int] = []
    try:
        slot = take_slot(os.path.dirname(path))
        if slot is None:
            return MADE_ROOM if evict(os.path.dirname(path), path) else None
        try:  # both above 10: no target of the file actions below overwrites a source
            held.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10))
            held.append(fcntl.fcntl(slot, fcntl.F_DUPFD_CLOEXEC, 10))
        except OSError:
            for held_fd in held:
                os.close(held_fd)
            return None
        finally:
            os.close(slot)
    finally:
        os.close(fd)
    env = dict(os.environ)
    env["CODEXR_MONITOR_SYS_PATH"] = repr([os.path.abspath(p) if p else os.getcwd() for p in sys.path])
    code = ("import sys, os, ast; sys.path[:] = ast.literal_eval(os.environ.pop('CODEXR_MONITOR_SYS_PATH')); "
            "from snapshot_store.detect.monitor_launch import main; main(sys.argv[1], sys.argv[2])")
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, path + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600),
               (os.POSIX_SPAWN_DUP2, held[0], LOCK_FD),
               (os.POSIX_SPAWN_DUP2, held[1], SLOT_FD)]
    try:
        return os.posix_spawn(sys.executable, [sys.executable, "-c", code, root, path], env,
                              file_actions=actions, setsid=True)
    except OSError:
        return None
    finally:
        for held_fd in held:
            os.close(held_fd)


def max_monitors() -> int:
    """`CODEXR_MONITOR_MAX`, else MAX (at least 1)."""
    try:
        return max(1, int(os.environ.get("CODEXR_MONITOR_MAX", MAX)))
    except ValueError:
        return MAX


def take_slot(base: str) -> int | None:
    """The fd holding one of this user's monitor slots (`m-slot-K.lock` in the runtime directory), or None: all
    taken."""
    for k in range(max_monitors()):
        fd = take_lock(os.path.join(base, f"m-slot-{k}.lock"))
        if fd is not None:
            return fd
    return None


def evict(base: str, own: str) -> bool:
    """Ask the least recently asked monitor but `own` (its lock file's mtime: each answer touches it) to exit;
    whether one agreed. Asked on its socket, with the peer checks of a question: only a monitor of this user,
    confined as this process is, and the process its lock names, is asked — never a process signalled by pid."""
    import stat

    found = []
    try:
        with os.scandir(base) as entries:
            for entry in entries:
                if not (entry.name.startswith("m-") and entry.name.endswith(".sock.lock")) or \
                        entry.path == own + ".lock":
                    continue
                with contextlib.suppress(OSError):
                    st = entry.stat(follow_symlinks=False)
                    if stat.S_ISREG(st.st_mode) and st.st_uid == os.getuid():
                        found.append((st.st_mtime_ns, entry.path[:-len(".lock")]))
    except OSError:
        return False
    return any(MonitorClient(sock, _kin_of(sock)).tell_exit() for _mtime, sock in sorted(found))


def _kin_of(path: str) -> Callable[[_socket.socket], bool]:
    """The peer check for the monitor on `path`: kin, and the process its lock file names."""
    return lambda sock: peer_is_kin(sock, path + ".lock")


def idle_seconds() -> float:
    """`CODEXR_MONITOR_IDLE`, else IDLE."""
    try:
        return max(1.0, float(os.environ.get("CODEXR_MONITOR_IDLE", IDLE)))
    except ValueError:
        return IDLE


def main(root: str, path: str) -> None:
    """The monitor process: keep the locks `spawn` handed down for life, bind the socket (mode 600 in a 700
    directory), answer."""
    from .monitor_daemon import serve

    os.chdir("/")  # holds no caller's directory
    lock = LOCK_FD
    try:
        handed, named = os.fstat(lock), os.stat(path + ".lock", follow_symlinks=False)
        if (handed.st_dev, handed.st_ino) != (named.st_dev, named.st_ino) or not _holds_slot(os.path.dirname(path)):
            return  # not started by `spawn`: no monitor without its locks
    except OSError:
        return
    for fd in (LOCK_FD, SLOT_FD):  # held by this process only: never by a child it runs (find_library's ldconfig)
        os.set_inheritable(fd, False)
    os.ftruncate(lock, 0)
    os.pwrite(lock, f"{os.getpid()}\n".encode(), 0)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead monitor's (the lock says none runs)
    import socket

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM | socket.SOCK_CLOEXEC)
    old = os.umask(0o177)
    try:
        listener.bind(path)
    finally:
        os.umask(old)
    bound = os.stat(path).st_ino

    def still_mine() -> bool:
        try:
            return os.stat(path).st_ino == bound
        except OSError:
            return False

    def asked() -> None:  # the least recently asked monitor is the one asked to make room
        with contextlib.suppress(OSError):
            os.utime(lock)

    listener.listen(16)
    try:
        serve(root, listener, peer_is_kin, idle_seconds(), still_mine, asked)
    except OSError:
        pass  # the workspace went, or cannot be watched whole: the captures check on their own
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == bound:  # still ours: unlinked before the lock is released
                os.unlink(path)
        listener.close()
        os.close(lock)  # the slot's lock goes with the process


def _holds_slot(base: str) -> bool:
    """Whether SLOT_FD is one of the slot lock files in `base` (held since `spawn` took it)."""
    try:
        handed = os.fstat(SLOT_FD)
    except OSError:
        return False
    for k in range(max_monitors()):  # the spawner's environment: the same bound
        with contextlib.suppress(OSError):
            st = os.stat(os.path.join(base, f"m-slot-{k}.lock"), follow_symlinks=False)
            if (st.st_dev, st.st_ino) == (handed.st_dev, handed.st_ino):
                return True
    return False
