"""Reading the selected paths into the store, trusting the stat cache where it is safe to."""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from typing import BinaryIO, Protocol

import blake3

from .dirfd import DirCache, DirChanged, SymlinkInPath
from .manifest import ABSENT, FileEntry, FileMap, LinkEntry, SkippedEntry
from .reasons import Reason, unreadable
from .records import field, record
from .repository.packs import CHUNK, STREAM_THRESHOLD
from .scope import REPLACED
from .stamps import Key, stat_key

READ_ATTEMPTS = 3


class KnownContent(Protocol):
    """What a capture may reuse instead of reading a file: the workspace index's stat cache (detect/index.py)."""

    def lookup(self, rel: str, key: Key) -> str | None:
        """The content id recorded for this exact stat key, if any."""


class BlobSink(Protocol):
    """Where captured content goes: the pack writer, or a hash-only sink for dry runs."""

    bytes_stored: int

    def has_named(self, name: str) -> bool: ...

    def add_named(self, data: bytes) -> str: ...

    def add_stream_named(self, src: BinaryIO) -> tuple[str, int]: ...


class HashOnly:
    """A sink that hashes and keeps nothing: previews must not change the store."""

    bytes_stored = 0

    def has_named(self, name: str) -> bool:
        return True

    def add_named(self, data: bytes) -> str:
        return blake3.blake3(data).hexdigest()

    def add_stream_named(self, src: BinaryIO) -> tuple[str, int]:
        hasher = blake3.blake3()
        total = 0
        while chunk := src.read(CHUNK):
            hasher.update(chunk)
            total += len(chunk)
        return hasher.hexdigest(), total


@record
class Captured:
    """Entries read from disk plus what the stat cache and the restorer need."""

    entries: FileMap = field(default_factory=dict)
    stats: dict[str, Key] = field(default_factory=dict)
    fresh: dict[str, tuple[Key, str]] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    bytes_hashed: int = 0
    modes: dict[int, int] = field(default_factory=dict, repr=False)
    keeps_fresh: bool = True  # False: `fresh` is left empty, what it would hold is `FreshOf` entries and stats

    def mode(self, st_mode: int) -> int:
        """The permission bits, one int object per value (S_IMODE makes a new one each time: ~3 MB per 100,000
        entries)."""
        bits = stat.S_IMODE(st_mode)
        return self.modes.setdefault(bits, bits)


class FreshOf(Mapping[str, tuple[Key, str]]):
    """What `Captured.fresh` would hold, read from the entries and stats that hold it already: each file read or
    found in the stat cache, by path, as (its stat key, its blob), in the order read. A dict of them was ~10 MB at
    100,000 files (its tuples and table; measured) for a one-shot capture that only saves them."""

    def __init__(self, entries: Mapping[str, object], stats: Mapping[str, Key]) -> None:
        self._entries, self._stats = entries, stats

    def __getitem__(self, path: str) -> tuple[Key, str]:
        entry = self._entries[path]
        if not isinstance(entry, FileEntry):
            raise KeyError(path)
        return self._stats[path], entry.blob

    def __iter__(self) -> Iterator[str]:
        entries = self._entries
        return (p for p in self._stats if isinstance(entries[p], FileEntry))

    def __len__(self) -> int:
        return sum(1 for _p in self)


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_size, a.st_mtime_ns, a.st_ctime_ns, a.st_ino) == (b.st_size, b.st_mtime_ns, b.st_ctime_ns, b.st_ino)


Progress = Callable[[int, int, int], None]  # files done, files in all, bytes read so far
PROGRESS_EVERY = 0.25


def read_paths(root: str | DirCache, to_capture: Mapping[str, Key], sink: BlobSink, cache: KnownContent,
               progress: Progress | None = None, *, fresh: bool = True) -> Captured:
    """Capture every path: symlinks as links, files by content, never following a link.

    Every path is reached through directory fds with O_NOFOLLOW at each component; given the
    DirCache the walk used, the reads go through the very directories the walk listed. `fresh`: keep
    `Captured.fresh` (else it stays empty: `FreshOf` its entries and stats gives it).
    """
    if isinstance(root, DirCache):
        return _read_paths(root, to_capture, sink, cache, progress, fresh)
    with DirCache(root) as dirs:
        return _read_paths(dirs, to_capture, sink, cache, progress, fresh)


def _read_paths(dirs: DirCache, to_capture: Mapping[str, Key], sink: BlobSink, cache: KnownContent,
                progress: Progress | None, fresh: bool) -> Captured:
    out = Captured(keeps_fresh=fresh)
    total = len(to_capture)
    next_report = time.monotonic() + PROGRESS_EVERY
    for n, rel in enumerate(sorted(to_capture)):
        if progress is not None and time.monotonic() >= next_report:
            progress(n, total, out.bytes_hashed)
            next_report = time.monotonic() + PROGRESS_EVERY
        key = to_capture[rel]
        if stat.S_ISLNK(key[4]):
            try:
                target = dirs.readlink(rel)
            except (SymlinkInPath, DirChanged) as exc:
                _not_reached(rel, exc, out)
                continue
            except OSError as exc:
                _skip(out, rel, unreadable(exc.strerror), f"unreadable symlink: {exc.strerror}")
                continue
            out.entries[rel] = LinkEntry("l", target)
            out.stats[rel] = key
            continue
        cached = cache.lookup(rel, key)
        if cached is not None and sink.has_named(cached):
            out.entries[rel] = FileEntry("f", out.mode(key[4]), key[0], cached)
            out.stats[rel] = key
            if fresh:
                out.fresh[rel] = (key, cached)
            continue
        _read_file(dirs, rel, key, sink, out)
    return out


def _skip(out: Captured, rel: str, reason: str, said: str) -> None:
    """Record `rel` as not captured, with the reason the snapshot keeps and the words the capture's report says."""
    out.entries[rel] = SkippedEntry("x", reason)
    out.skipped.append((rel, said))


def _not_reached(rel: str, exc: SymlinkInPath | DirChanged, out: Captured) -> None:
    """A directory on the way turned into a symlink (or another directory) after the walk."""
    if isinstance(exc, SymlinkInPath):
        _skip(out, rel, Reason.BEHIND_SYMLINK, "behind a symlinked directory")
    else:
        _skip(out, rel, REPLACED, "a directory on its path was replaced during capture; not captured")


def _pread_all(fd: int, size_hint: int) -> bytes:
    """Read a whole small file from offset 0 in as few syscalls as its size allows."""
    data = os.pread(fd, size_hint + 1, 0)
    if len(data) <= size_hint:
        return data
    parts = [data]
    pos = len(data)
    while chunk := os.pread(fd, CHUNK, pos):
        parts.append(chunk)
        pos += len(chunk)
    return b"".join(parts)


def _read_file(dirs: DirCache, rel: str, walked: Key, sink: BlobSink, out: Captured) -> None:
    """Read one file, retrying while it changes under us; never store a torn read as valid."""
    try:
        fd = dirs.open(rel, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError:
        out.entries[rel] = ABSENT
        return
    except (SymlinkInPath, DirChanged) as exc:
        _not_reached(rel, exc, out)
        return
    except OSError as exc:
        _skip(out, rel, unreadable(exc.strerror), f"unreadable: {exc.strerror}")
        return
    with os.fdopen(fd, "rb", buffering=0) as f:
        for _attempt in range(READ_ATTEMPTS):
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                out.entries[rel] = SkippedEntry("x", Reason.NOT_REGULAR)
                return
            if before.st_size <= STREAM_THRESHOLD:
                data = _pread_all(fd, before.st_size)
                blob = sink.add_named(data)
                size = len(data)
            else:
                f.seek(0)
                blob, size = sink.add_stream_named(f)
            after = os.fstat(fd)
            out.bytes_hashed += size
            if _same(before, after) and size == after.st_size:
                key = stat_key(after)
                if key == walked:
                    key = walked  # the walk's tuple, not an equal second one (~23 MB at 100,000 files)
                hexid = blob  # one string for the entry, the stat cache and the pack writer (a second was ~12 MB)
                out.entries[rel] = FileEntry("f", out.mode(after.st_mode), key[0], hexid)
                out.stats[rel] = key
                if out.keeps_fresh:
                    out.fresh[rel] = (key, hexid)
                return
        _skip(out, rel, Reason.CHANGING, "kept changing during capture; not captured")
