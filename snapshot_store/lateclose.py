"""Replaced and deleted files' last references, dropped by a thread so a restore does not wait for their blocks to go.

A rename over a file, or an unlink, that drops an inode's last reference frees its blocks inside that call: ~65 µs
for a 7 KB file on this machine's ext4 idle, ~210 µs loaded, a fifth of a 100-file in-session restore (issue 35;
bench/README.md "Measured"). An O_PATH fd taken just before holds the inode, so the rename only moves a name, and the
freeing happens at the fd's close, which a thread of this module does while the restore goes on. O_PATH opens no
device and waits on no FIFO; where the system lacks it (macOS) nothing is held and the call frees as before.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import queue

_O_PATH: int = getattr(os, "O_PATH", 0)
#: fds held at most at once: a restore waits for the thread beyond this (well under a low RLIMIT_NOFILE).
HELD_MAX = 256
#: How long a full queue is waited on before the fd is closed in the caller's thread instead.
PUT_WAIT_S = 1.0


class _Closer:
    """One thread per process closing held fds in the order they came."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = 0
        self._queue: queue.Queue[int] | None = None

    def _started(self) -> queue.Queue[int]:
        with self._lock:
            if self._pid != os.getpid() or self._queue is None:  # first use here, or a forked child's
                import queue  # only when a restore replaces a file (a one-shot capture never does)

                self._queue = queue.Queue(HELD_MAX)
                threading.Thread(target=self._run, args=(self._queue,), name="codexr-late-close",
                                 daemon=True).start()
                self._pid = os.getpid()
            return self._queue

    @staticmethod
    def _run(q: queue.Queue[int]) -> None:
        while True:
            fd = q.get()
            with contextlib.suppress(OSError):
                os.close(fd)
            q.task_done()

    def drop(self, fd: int) -> None:
        import queue

        try:
            self._started().put(fd, timeout=PUT_WAIT_S)
        except queue.Full:  # the thread is not keeping up (or is gone, as at interpreter exit): close it here
            os.close(fd)

    def settle(self) -> None:
        """Wait until every fd handed over is closed (a test about to unmount, say)."""
        if self._pid == os.getpid() and self._queue is not None:
            self._queue.join()


_closer = _Closer()


def hold(dir_fd: int, name: str) -> int | None:
    """An fd holding the inode `name` names (a symlink itself, never followed), or None (missing, or no O_PATH)."""
    if not _O_PATH:
        return None
    try:
        return os.open(name, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None


def drop(fd: int | None) -> None:
    """Let the thread close a held fd (its inode freed there if nothing else names it)."""
    if fd is not None:
        _closer.drop(fd)


@contextlib.contextmanager
def held(dir_fd: int, name: str) -> Iterator[None]:
    """Hold the inode `name` names across the block (a rename over it, or its unlink); the thread closes it after."""
    fd = hold(dir_fd, name)
    try:
        yield
    finally:
        drop(fd)


def settle() -> None:
    """Wait until every held fd is closed."""
    _closer.settle()
