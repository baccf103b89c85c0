"""flock-based locks: shared for capture and restore, exclusive for gc; owner info for messages."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from .errors import StoreBusy


def _process_start(pid: int) -> str | None:
    """The kernel's start time of a process (tells a live owner from a reused pid): /proc on Linux, sysctl on
    Darwin; None where neither answers (then a live pid is taken for the owner, as before)."""
    if sys.platform == "darwin":
        return _darwin_start(pid)
    from .procstat import start_time

    return start_time(pid)


def _darwin_start(pid: int) -> str | None:
    """`p_starttime` of the process's kinfo_proc (sysctl CTL_KERN, KERN_PROC, KERN_PROC_PID): a struct timeval, the
    first 16 bytes of the struct. Written for Darwin and unverified there (docs/development.md)."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    mib = (ctypes.c_int * 4)(1, 14, 1, pid)
    buf = ctypes.create_string_buffer(1024)  # kinfo_proc is 648 bytes on 64-bit Darwin
    size = ctypes.c_size_t(len(buf))
    sysctl = getattr(libc, "sysctl", None)
    if sysctl is None or sysctl(mib, 4, buf, ctypes.byref(size), None, ctypes.c_size_t(0)) != 0 or size.value < 16:
        return None  # no such process (the answer is empty), or no sysctl
    sec = int.from_bytes(buf.raw[0:8], sys.byteorder, signed=True)
    usec = int.from_bytes(buf.raw[8:12], sys.byteorder, signed=True)
    return f"{sec}.{usec:06d}" if sec > 0 else None


def host_name() -> str:
    """This machine's name, as socket.gethostname() gives it, without importing socket (~3 ms a command)."""
    return os.uname().nodename


def owner_info(pid: int | None = None) -> dict[str, object]:
    """Who this process (or process `pid` of this host) is, for journals and lock files."""
    pid = os.getpid() if pid is None else pid
    return {"pid": pid, "host": host_name(), "start": _process_start(pid), "since": time.time()}


def owner_alive(owner: dict[str, object]) -> bool:
    """Is the process that wrote `owner` still running on this host?

    Another host's process cannot be asked; there the workspace lock (flock) is the only evidence.
    """
    pid = owner.get("pid")
    if not isinstance(pid, int) or pid <= 0 or owner.get("host") != host_name():
        return False
    if pid == os.getpid():
        return False  # our own: the operation that wrote it has returned, or we would not be here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    start = owner.get("start")
    return start is None or _process_start(pid) in (None, start)


def owner_text(owner: dict[str, object]) -> str:
    """`pid N on HOST`, for messages."""
    return f"pid {owner.get('pid')} on {owner.get('host')}"


def _owner() -> bytes:
    return json.dumps(owner_info()).encode()


def read_owner(path: Path) -> str:
    """Who holds (or last held) a lock, for an error message."""
    try:
        info = json.loads(path.read_bytes() or b"{}")
        return f"pid {info.get('pid')} on {info.get('host')}"
    except (OSError, ValueError):
        return "another process"


@contextlib.contextmanager
def flocked(path: Path, *, exclusive: bool, wait: bool = True, what: str = "the store") -> Iterator[None]:
    """Hold an advisory lock on `path` for the duration of the block."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        flags = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        try:
            fcntl.flock(fd, flags | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError as exc:
            raise StoreBusy(f"{what} is busy: locked by {read_owner(path)}") from exc
        if exclusive:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _owner(), 0)
        yield
    finally:
        os.close(fd)
