"""The C heap of a one-shot process that walks a workspace: large blocks mapped on their own, free pages given back.

A cold capture reads every file into a buffer, grows tables of 100,000 entries and writes its index and snapshot from
buffers of megabytes. glibc's malloc raises its mmap threshold to the largest block freed so far (up to 32 MiB), so
such blocks come from the heap after the first ones are freed, and the heap keeps the pages of those freed between
long-lived ones: 48-59 MB of it were free but resident when the snapshot's map was encoded at 100,000 files
(mallinfo2), and the encoding's own buffers (~29 MB: the JSON text, zstd's context and output) were mapped beside
them. `bound` fixes the threshold at its default (a block of 128 KiB or more is mapped, and unmapped when freed);
`give_back` returns the heap's free pages (malloc_trim). Where there is no glibc (macOS, musl), both do nothing.

Process-wide: the capture calls them only in a process that keeps no journal of the workspace (a one-shot command, or
a resident server's fork for one), never in a session.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)
MMAP_THRESHOLD = 128 * 1024  # glibc's default, kept: 1 MiB measured ~3 MB more at peak


@functools.cache  # a lookup in this process's own symbols (ctypes costs ~3 ms): no disk is read
def _libc() -> tuple[Callable[[int, int], int] | None, Callable[[int], int] | None]:
    """glibc's mallopt and malloc_trim, where this process has them."""
    try:
        import ctypes

        lib = ctypes.CDLL(None)
    except (ImportError, OSError):
        return None, None
    mallopt, trim = getattr(lib, "mallopt", None), getattr(lib, "malloc_trim", None)
    if mallopt is not None:
        mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return mallopt, trim


def bound() -> None:
    """From here, blocks of MMAP_THRESHOLD or more are mapped on their own and given back when freed (idempotent)."""
    mallopt = _libc()[0]
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)


def give_back() -> None:
    """Return the heap's free pages to the system (after the capture let go of what it no longer needs)."""
    trim = _libc()[1]
    if trim is not None:
        trim(0)
