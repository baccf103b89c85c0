"""Decoded snapshot records kept as a `marshal` beside the store (`cache/<id>.map`): a disposable, checksummed copy.

A record written whole holds every path of the workspace: at 100,000 files its JSON decodes in ~0.27 s (with the
collector held off), and every one-shot restore, rewind or capture that goes on from it paid that. Its marshal loads
and becomes entries again in ~0.08 s (measured on the generated 100,000-file tree's first record). Only records of
at least MIN_ENTRIES entries are kept, and at most KEEP of them (the newest written); the snapshot file itself is still
read and checked against its id whenever the cache is used (FORMAT.md §7).
"""

from __future__ import annotations

import contextlib
import marshal
import os
from pathlib import Path

import blake3

from ..collector import held_off
from ..fsutil import atomic_write_parts
from ..manifest import Entry, SnapshotRecord, entries_again

MAGIC = b"CRMAP1\n"
MIN_ENTRIES = 4096  # a smaller record decodes in a few milliseconds: no cache
KEEP = 4  # cached records beyond these (the oldest written) are removed when one is written
SUFFIX = ".map"


def cache_path(cache_dir: Path, snap_id: str) -> Path:
    """Where the decoded copy of one record is kept."""
    return cache_dir / f"{snap_id}{SUFFIX}"


def load(cache_dir: Path, snap_id: str) -> SnapshotRecord | None:
    """The record as cached, when its copy is there and intact (None: none, or damaged: the caller decodes)."""
    try:
        with open(cache_path(cache_dir, snap_id), "rb") as f:
            data = f.read()
    except OSError:
        return None
    head = len(MAGIC) + 64 + 32
    if (len(data) < head or not data.startswith(MAGIC) or data[len(MAGIC):len(MAGIC) + 64] != snap_id.encode("ascii")
            or blake3.blake3(memoryview(data)[head:]).digest() != data[head - 32:head]):
        return None
    try:
        with held_off():
            fields, keys, values = marshal.loads(memoryview(data)[head:])
            del data
            changes: dict[str, Entry | None] = dict(zip(keys, entries_again(values), strict=True))
        root, created, kind, label, parent, depth, meta = fields
    except (ValueError, EOFError, TypeError, KeyError, IndexError):
        return None  # checksummed, so only another version's layout gets here
    return SnapshotRecord(root=root, created=created, kind=kind, label=label, parent=parent, depth=depth,
                          changes=changes, meta=meta)


def save(cache_dir: Path, snap_id: str, rec: SnapshotRecord) -> None:
    """Keep a decoded record's copy (best effort: a cache that cannot be written is simply not there)."""
    if len(rec.changes) < MIN_ENTRIES:
        return
    fields = (rec.root, rec.created, rec.kind, rec.label, rec.parent, rec.depth, rec.meta)
    payload = marshal.dumps((fields, tuple(rec.changes), tuple(
        None if e is None else tuple(e) for e in rec.changes.values())))
    with contextlib.suppress(OSError, ValueError):
        atomic_write_parts(cache_path(cache_dir, snap_id),
                           (MAGIC, snap_id.encode("ascii"), blake3.blake3(payload).digest(), payload), sync=False)
        _prune(cache_dir)


def _prune(cache_dir: Path) -> None:
    """Remove all but the KEEP newest cached records."""
    found: list[tuple[int, str]] = []
    with os.scandir(cache_dir) as it:
        for e in it:
            if e.name.endswith(SUFFIX) and len(e.name) == 64 + len(SUFFIX):
                with contextlib.suppress(OSError):
                    found.append((e.stat(follow_symlinks=False).st_mtime_ns, e.name))
    for _mtime, name in sorted(found, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            os.unlink(cache_dir / name)
