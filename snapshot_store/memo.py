"""Decoded store files kept in memory by path and stat, for a process that serves many commands (app/server.py).

Every one-shot command decodes the same files again: the target snapshot's manifest (~40-65 ms for 11,000
files), every pack index (~20-30 ms), the stat cache (~15 ms), the saved walk and Git listing (~5-15 ms each).
The resident server keeps what its last command loaded, decoded, and forks the next worker with it (a one-file
restore: ~340 -> ~250 ms in-process, measured with the first four memoized). An entry is used only while every
file it came from has the stat it had when it was loaded (inode, size, mtime and ctime: a write, a rename over
it, damage through the file system all move ctime), and never for a file written within the racy window of its
load (statcache.py's rule). Off unless `enable()`d (the server does). `snapshots verify` runs with it off, since
it looks for damage a stat cannot show, and so does gc, whose deletion decisions are documented as made from
what is on disk. Callers must not mutate what `load` returns.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

from .statcache import is_racy

#: At most this many decoded files, and this many entries in them, least recent out: ~440 bytes an entry (a
#: server grew by 24 MB keeping an 11,000-file workspace's manifest, pack indexes, stat cache and walk: 55,000
#: entries), so ~65 MB at most. Files are many small ones too (a pack index per capture that stored something).
MAX_FILES = 4096
MAX_WEIGHT = 150_000

Signature = tuple[tuple[int, int, int, int, int], ...]
Loader = Callable[[str], Any]

#: What is kept: kind -> the module and function that read such a file from disk (named here, imported when
#: first used: those modules use this one).
KINDS = {
    "snapshot": ("repository.repo", "read_record"),  # a snapshot file (its decoded record)
    "pack": ("repository.packs", "read_pack_index"),  # a pack index, also keyed by its pack file's stat
    "stat": ("statcache", "read_stat_cache"),  # a workspace's stat cache
    "walk": ("walkstate", "read"),  # a workspace's saved walk
    "git": ("scope", "GitTracked.read"),  # a workspace's saved Git listing
}

_enabled = False
_entries: OrderedDict[tuple[str, str], tuple[Signature, Any, int]] = OrderedDict()
_weight = 0
_used: dict[tuple[str, str], None] = {}
_loaders: dict[str, Loader] = {}


def _loader(kind: str) -> Loader:
    loader = _loaders.get(kind)
    if loader is None:
        module, name = KINDS[kind]
        found: Any = importlib.import_module(f".{module}", __package__)
        for attr in name.split("."):  # a function, or a class's method ("GitTracked.read")
            found = getattr(found, attr)
        loader = _loaders[kind] = found
    return loader


def _files(kind: str, path: str) -> tuple[str, ...]:
    """The files whose stat an entry depends on: a pack index's pack too (its size bounds the index's offsets)."""
    return (path, path[:-4] + ".pack") if kind == "pack" else (path,)


def _contents(obj: Any) -> Any:
    """What a kept object is mostly made of: a manifest's changes, an index's entries, a walk's groups, a
    listing's paths (a stat cache is its own dict)."""
    for attr in ("changes", "entries", "seen", "paths"):
        part = getattr(obj, attr, None)
        if part is not None:
            return part
    return obj


def _weight_of(obj: Any) -> int:
    """Entries held (a manifest's paths, an index's blobs, a walk's files, a cache's files), to bound the memory."""
    seen = getattr(obj, "seen", None)
    if seen is not None:
        return sum(len(names) for _dir, names, _keys in seen)
    part = _contents(obj)
    return len(part) if isinstance(part, dict | list) else 1


def enable(on: bool = True) -> None:
    """Turn memoizing on (the resident server) or off (dropping everything kept)."""
    global _enabled, _weight
    _enabled = on
    if not on:
        _entries.clear()
        _used.clear()
        _weight = 0


def enabled() -> bool:
    """Is memoizing on in this process?"""
    return _enabled


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Read from disk for the duration (verify), keeping what is memoized for later."""
    global _enabled
    was, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = was


def _signature(paths: tuple[str, ...], now_ns: int) -> Signature | None:
    """The stat of every file, or None if one is missing or was written too recently to vouch for its content."""
    out = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
        if is_racy(key, now_ns):
            return None
        out.append(key)
    return tuple(out)


def load(kind: str, path: str) -> Any:
    """The registered loader's result for `path`: kept from an earlier load while its files' stats are the same."""
    loader = _loader(kind)
    if not _enabled:
        return loader(path)
    global _weight
    key = (kind, path)
    _used[key] = None
    files = _files(kind, path)
    sig = _signature(files, time.time_ns())
    hit = _entries.get(key)
    if hit is not None and sig is not None and hit[0] == sig:
        _entries.move_to_end(key)
        return hit[1]
    obj = loader(path)
    # Kept only if nothing moved while it was read (a file replaced mid-read is not the one decoded).
    if sig is not None and obj is not None and _signature(files, time.time_ns()) == sig:
        if hit is not None:
            _weight -= hit[2]
        w = max(1, _weight_of(obj))
        _entries[key] = (sig, obj, w)
        _entries.move_to_end(key)
        _weight += w
        while _entries and (len(_entries) > MAX_FILES or _weight > MAX_WEIGHT):
            _k, (_s, _o, old) = _entries.popitem(last=False)
            _weight -= old
    return obj


def touch() -> None:
    """Write to every kept object once, so a fork makes its copy-on-write copies now, not during a command.

    A fork shares the server's pages until it writes to them, and reference counting writes to every object a
    command uses: a one-file restore on 11,000 files took ~9,000 page faults with what it used from here, ~6,000
    after this (~40 ms less of it, measured). The resident server's spare calls it while it waits for a caller.
    """
    for _sig, obj, _w in _entries.values():
        part = _contents(obj)
        for item in part.items() if isinstance(part, dict) else part if isinstance(part, list) else ():
            if isinstance(item, tuple):  # a (key, value) pair, an index's (blob, location), a walk's group
                for value in item:
                    if isinstance(value, tuple):  # an entry, a location, a stat key: their fields too
                        for _field in value:
                            pass


def take_used() -> list[tuple[str, str]]:
    """(kind, path) of every load since the last call, oldest first: what a worker tells the server to warm."""
    out = list(_used)
    _used.clear()
    return out


def warm(used: list[tuple[str, str]]) -> int:
    """Load what a command used (as it is on disk now), so the next fork finds it decoded; how many are kept.

    A file that is gone or damaged now is skipped: the command that next asks for it reads it and says so.
    """
    for kind, path in used:
        if kind in KINDS:
            with contextlib.suppress(Exception):  # warming is a guess: whoever needs the file meets the error itself
                prepare = getattr(load(kind, path), "prepare", None)
                if prepare is not None:
                    prepare()  # what every user of it derives first (a saved walk's path sets), derived once here
    _used.clear()
    return sum(1 for key in used if key in _entries)
