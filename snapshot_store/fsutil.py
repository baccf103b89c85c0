"""Durable file primitives: temp file, fsync, rename, fsync directory (restic's write order)."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import functools
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .errors import StoreError, StoreFull

TMP_PREFIX = ".tmp-"


def tmp_name(prefix: str = TMP_PREFIX) -> str:
    """A collision-free temporary file name for the same directory as the final file."""
    return f"{prefix}{os.urandom(8).hex()}"  # secrets.token_hex, without importing secrets (~9 ms)


_F_FULLFSYNC: int | None = getattr(fcntl, "F_FULLFSYNC", None)  # Darwin only


def durable(fd: int) -> None:
    """fsync `fd`, through to the disk: on Darwin fsync leaves the data in the drive's cache, F_FULLFSYNC flushes it
    (SQLite's `fullfsync`); a file system that refuses F_FULLFSYNC gets the plain fsync."""
    if _F_FULLFSYNC is not None:
        try:
            fcntl.fcntl(fd, _F_FULLFSYNC)
            return
        except OSError:
            pass
    os.fsync(fd)


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        durable(fd)
    finally:
        os.close(fd)


@contextlib.contextmanager
def translate_os_errors(what: str) -> Iterator[None]:
    """Turn ENOSPC and friends into StoreErrors with one clear line."""
    try:
        yield
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise StoreFull(f"{what}: the disk is full; nothing was committed") from exc
        if isinstance(exc, StoreError):
            raise
        where = f" ({exc.filename})" if exc.filename else ""
        raise StoreError(f"{what}: {exc.strerror or exc}{where}") from exc


class NotSmallRegular(Exception):
    """A file that must be a small regular file is not (the message says how)."""


def read_small_regular(path: Path, limit: int, *, nofollow: bool = False) -> bytes:
    """The bytes of a regular file of at most `limit` bytes; never blocks on a FIFO or reads a device.

    OSError (missing, unreadable, ELOOP for a symlink with `nofollow`) is the caller's to word.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (os.O_NOFOLLOW if nofollow else 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotSmallRegular("is not a regular file")
        too_big = f"is larger than {limit // 1024} KiB"
        if st.st_size > limit:
            raise NotSmallRegular(too_big)
        chunks: list[bytes] = []
        total = 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise NotSmallRegular(too_big)  # it grew while read
        return b"".join(chunks)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write `data` to `path` so a reader sees the old file or the whole new one, never a part."""
    atomic_write_parts(path, (data,), sync=sync)


def atomic_write_parts(path: Path, parts: Iterable[bytes | bytearray], *, sync: bool = True) -> None:
    """`atomic_write` of the parts one after another, never joined in memory (a large file's copy is its size)."""
    tmp = path.parent / tmp_name()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            for data in parts:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            if sync:
                durable(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    if sync:
        fsync_dir(path.parent)


def append_line(path: Path, line: bytes) -> None:
    """Append one whole newline-terminated record (or nothing) and fsync, under the file's own flock."""
    with locked_for_append(path) as fd:
        append_locked(fd, line)


@contextlib.contextmanager
def locked_for_append(path: Path) -> Iterator[int]:
    """`path` opened for appending (created if missing) under an exclusive flock held until the block ends.

    Appenders take this lock on the file itself, so a writer that must do more than one append's worth of work
    as one step (a snapshot's file, then its ref line) holds it across all of that.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)


def append_locked(fd: int, line: bytes) -> None:
    """Append one whole newline-terminated record (or nothing) to a file held by `locked_for_append`, and fsync.

    A torn tail an earlier crash left (bytes after the last newline) is cut off first: glued to this record it
    would turn into a damaged line in the middle of the file, which readers rightly treat as corruption.
    """
    assert line.endswith(b"\n")
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        size = _end_of_last_line(fd, size)
        os.ftruncate(fd, size)
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view):]
        durable(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, size)
        raise


def read_locked(fd: int) -> bytes:
    """The whole content of a file held by `locked_for_append`."""
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _end_of_last_line(fd: int, size: int, chunk: int = 65536) -> int:
    """Offset just past the last newline (0 if there is none), scanning backwards."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        cut = os.pread(fd, end - start, start).rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def complete_lines(data: bytes) -> list[bytes]:
    """The newline-terminated records of an append-only file; a torn unterminated tail is not one."""
    return data.split(b"\n")[:-1]


@functools.cache
def libc_function(name: str) -> Any:
    """A C library function (None if this libc lacks it), looked up on first use.

    `ctypes.CDLL(None)` is dlopen(NULL): the symbols of the interpreter and the libc it is linked against, the
    same functions `CDLL(find_library("c"))` gave; find_library ran `ldconfig -p` at import time (3-6 ms, twice
    per command, measured).
    """
    import ctypes

    return getattr(ctypes.CDLL(None, use_errno=True), name, None)


def syncfs(path: Path) -> None:
    """Flush every dirty page of the file system holding `path` (one call instead of N fsyncs)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fn = libc_function("syncfs")
        if fn is None or fn(fd) != 0:
            os.sync()
    finally:
        os.close(fd)
