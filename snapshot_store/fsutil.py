"""Durable file primitives: temp file, fsync, rename, fsync directory (restic's write order)."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import os
import secrets
from collections.abc import Iterator
from pathlib import Path

from .errors import StoreError, StoreFull

TMP_PREFIX = ".tmp-"


def tmp_name(prefix: str = TMP_PREFIX) -> str:
    """A collision-free temporary file name for the same directory as the final file."""
    return f"{prefix}{secrets.token_hex(8)}"


def fsync_dir(path: Path) -> None:
    """Make a rename or unlink in `path` durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
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


def atomic_write(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write `data` to `path` so a reader sees the old file or the whole new one, never a part."""
    tmp = path.parent / tmp_name()
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
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
    """Append one whole record (or nothing) and fsync; readers tolerate a torn last line.

    A torn tail left by an earlier crash is terminated first, so it never swallows this record.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line
        try:
            view = memoryview(line)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            raise
    finally:
        os.close(fd)


_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def syncfs(path: Path) -> None:
    """Flush every dirty page of the file system holding `path` (one call instead of N fsyncs)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fn = getattr(_libc, "syncfs", None)
        if fn is None or fn(fd) != 0:
            os.sync()
    finally:
        os.close(fd)
