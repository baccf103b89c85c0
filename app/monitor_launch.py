"""Starting and reaching a workspace's change monitor (snapshot_store/monitor_daemon.py), with no more rights than
the process that asked.

The monitor is started by the first capture that wants one (a posix_spawn of this Python: same user, credentials,
namespaces, seccomp filter, cgroup as the asker) and exits after CODEXR_MONITOR_IDLE seconds without a question.
Its socket lies in the resident server's runtime directory (runtime.runtime_dir: this user's, mode 700, not below a
directory a sandboxed command may write), named by the workspace and by the confinement of the process that
started it (confinement.fingerprint), so a process confined otherwise (Codex's sandbox) never reaches it and gets
its own. Both ends check the other before a byte is sent: same uid (SO_PEERCRED) and the same confinement, and
the client also that the peer is the pid the monitor's lock file names. `CODEXR_MONITOR=0` turns it off.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
from typing import Any

from snapshot_store.monitor import Answer, MonitorClient

IDLE = 1800.0  # seconds without a question before a monitor exits
#: File systems whose every change passes through this kernel, so inotify sees it. Not NFS, SMB, 9p, FUSE (sshfs),
#: virtiofs or cluster file systems: a change made by another machine (or the VM's host) raises no event here,
#: which is why git's fsmonitor refuses network file systems too.
LOCAL_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "zfs", "f2fs", "overlay", "reiserfs", "jfs",
                      "bcachefs", "nilfs2"})


def enabled() -> bool:
    """Whether the user left the monitor on (`CODEXR_MONITOR=0` turns it off)."""
    return os.environ.get("CODEXR_MONITOR", "1").strip().lower() not in ("0", "off", "no", "false")


def socket_for(root: str, create: bool = True) -> str | None:
    """The monitor socket for workspace `root` and this process's confinement (None: no safe place for one)."""
    from . import confinement
    from .runtime import SOCKET_MAX, _hasher, runtime_dir

    base = runtime_dir(create)
    own = confinement.fingerprint("self")
    if base is None or own is None:
        return None
    h = _hasher()
    h.update(repr(("monitor", 1, os.getuid(), root, own)).encode(errors="surrogateescape"))
    path = os.path.join(base, f"m-{h.hexdigest()}.sock")
    return path if len(os.fsencode(path)) <= SOCKET_MAX else None


def peer_is_kin(sock: socket.socket, pid_file: str | None = None) -> bool:
    """Whether the other end of `sock` is this user's, confined as this process is (and, with `pid_file`, the
    process whose pid that file holds: the monitor that took the lock)."""
    from . import confinement

    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12)
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
    from .runtime import lock_names

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
    """The capture's change source: asks the workspace's monitor, and starts one where none answers."""

    def __init__(self) -> None:
        self._started: set[str] = set()
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
        answer = MonitorClient(path, lambda sock: peer_is_kin(sock, path + ".lock")).ask(root, since)
        if answer is None and root not in self._started:
            self._started.add(root)
            spawn(root, path)
        return answer


def attach(store: Any) -> None:
    """Give the store's capturer a monitor to ask, where one may run here."""
    from snapshot_store.watch import ChangeJournal

    if enabled() and ChangeJournal.available():
        store.capturer.monitor = Launcher()


def spawn(root: str, path: str) -> int | None:
    """Start the monitor of `root` on `path` in the background, unless one holds the lock (its pid, or None)."""
    from .runtime import take_lock

    fd = take_lock(path + ".lock")
    if fd is None:
        return None
    os.close(fd)  # released: the monitor takes it for its life
    env = dict(os.environ)
    env["CODEXR_MONITOR_SYS_PATH"] = repr([os.path.abspath(p) if p else os.getcwd() for p in sys.path])
    code = ("import sys, os, ast; sys.path[:] = ast.literal_eval(os.environ.pop('CODEXR_MONITOR_SYS_PATH')); "
            "from app.monitor_launch import main; main(sys.argv[1], sys.argv[2])")
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, path + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)]
    try:
        return os.posix_spawn(sys.executable, [sys.executable, "-c", code, root, path], env,
                              file_actions=actions, setsid=True)
    except OSError:
        return None


def idle_seconds() -> float:
    """`CODEXR_MONITOR_IDLE`, else IDLE."""
    try:
        return max(1.0, float(os.environ.get("CODEXR_MONITOR_IDLE", IDLE)))
    except ValueError:
        return IDLE


def main(root: str, path: str) -> None:
    """The monitor process: take the lock for life, bind the socket (mode 600 in a 700 directory), answer."""
    from snapshot_store.monitor_daemon import serve

    from .runtime import take_lock

    os.chdir("/")  # holds no caller's directory
    lock = take_lock(path + ".lock")
    if lock is None:
        return  # another monitor is starting or running
    os.ftruncate(lock, 0)
    os.write(lock, f"{os.getpid()}\n".encode())
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a dead monitor's (the lock says none runs)
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

    listener.listen(16)
    try:
        serve(root, listener, peer_is_kin, idle_seconds(), still_mine)
    except OSError:
        pass  # the workspace went, or cannot be watched whole: the captures check on their own
    finally:
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == bound:  # still ours: unlinked before the lock is released
                os.unlink(path)
        listener.close()
        os.close(lock)
