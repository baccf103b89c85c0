"""flock-based locks: shared for capture and restore, exclusive for gc; owner info for messages."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from .errors import StoreBusy


def _owner() -> bytes:
    return json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode()


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
