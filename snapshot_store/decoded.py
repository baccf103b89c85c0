"""Decoded store files kept in memory by path and stat: an object a process that serves many commands owns
(the resident server, app/server.py) and hands to the stores it opens. The library keeps no such cache itself.

Every one-shot command decodes the same files again: the target snapshot's manifest, every pack index, the stat
cache, the saved walk and Git listing (the numbers: bench/bench_startup.py). An entry is used only while every
file it came from has the stat it had when it was loaded (inode, size, mtime and ctime: a write, a rename over
it, damage through the file system all move ctime), and never for a file written within the racy window of its
load (stamps.py's rule). gc and verify never read through it (Repository.uncached): verify looks for damage a
stat cannot show, and gc's deletion decisions are documented as made from what is on disk. Callers must not
mutate what `load` returns.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from .stamps import is_racy

#: At most this many decoded files, and this many entries in them, least recent out: ~440 bytes an entry (a
#: server grew by 24 MB keeping an 11,000-file workspace's manifest, pack indexes, stat cache and walk: 55,000
#: entries), so ~65 MB at most. Files are many small ones too (a pack index per capture that stored something).
MAX_FILES = 4096
MAX_WEIGHT = 150_000

Signature = tuple[tuple[int, int, int, int, int], ...]
Reader = Callable[[str], Any]
#: The kinds of file kept: "snapshot" (a snapshot file's decoded record), "pack" (a pack index, also keyed by its
#: pack file's stat), "stat" (a workspace's stat cache), "walk" (its saved walk), "git" (its saved Git listing).
KINDS = ("snapshot", "pack", "stat", "walk", "git")


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


class DecodedFiles:
    """Decoded store files, each read by the reader of its kind (`readers`: store.decoded_files() gives them)."""

    def __init__(self, readers: Mapping[str, Reader]) -> None:
        self.readers = dict(readers)
        self.max_files = MAX_FILES
        self.max_weight = MAX_WEIGHT
        self.entries: OrderedDict[tuple[str, str], tuple[Signature, Any, int]] = OrderedDict()
        self.weight = 0
        self.used: dict[tuple[str, str], None] = {}  # loads since the last take_used, oldest first

    def load(self, kind: str, path: str) -> Any:
        """The reader's result for `path`: kept from an earlier load while its files' stats are the same."""
        key = (kind, path)
        self.used[key] = None
        files = _files(kind, path)
        sig = _signature(files, time.time_ns())
        hit = self.entries.get(key)
        if hit is not None and sig is not None and hit[0] == sig:
            self.entries.move_to_end(key)
            return hit[1]
        obj = self.readers[kind](path)
        # Kept only if nothing moved while it was read (a file replaced mid-read is not the one decoded).
        if sig is not None and obj is not None and _signature(files, time.time_ns()) == sig:
            if hit is not None:
                self.weight -= hit[2]
            w = max(1, _weight_of(obj))
            self.entries[key] = (sig, obj, w)
            self.entries.move_to_end(key)
            self.weight += w
            while self.entries and (len(self.entries) > self.max_files or self.weight > self.max_weight):
                _k, (_s, _o, old) = self.entries.popitem(last=False)
                self.weight -= old
        return obj

    def touch(self) -> None:
        """Write to every kept object once, so a fork makes its copy-on-write copies now, not during a command.

        A fork shares the server's pages until it writes to them, and reference counting writes to every object a
        command uses (the page faults this saves: bench/HISTORY.md). The resident server's spare calls it while it
        waits for a caller.
        """
        for _sig, obj, _w in self.entries.values():
            part = _contents(obj)
            for item in part.items() if isinstance(part, dict) else part if isinstance(part, list) else ():
                if isinstance(item, tuple):  # a (key, value) pair, an index's (blob, location), a walk's group
                    for value in item:
                        if isinstance(value, tuple):  # an entry, a location, a stat key: their fields too
                            for _field in value:
                                pass

    def take_used(self) -> list[tuple[str, str]]:
        """(kind, path) of every load since the last call, oldest first: what a worker tells the server to warm."""
        out = list(self.used)
        self.used.clear()
        return out

    def warm(self, used: list[tuple[str, str]]) -> int:
        """Load what a command used (as it is on disk now), so the next fork finds it decoded; how many are kept.

        A file that is gone or damaged now is skipped: the command that next asks for it reads it and says so.
        """
        for kind, path in used:
            if kind in self.readers:
                with contextlib.suppress(Exception):  # warming is a guess: whoever needs the file meets the error
                    prepare = getattr(self.load(kind, path), "prepare", None)
                    if prepare is not None:
                        prepare()  # what every user of it derives first (a saved walk's path sets), derived once
        self.used.clear()
        return sum(1 for key in used if key in self.entries)
