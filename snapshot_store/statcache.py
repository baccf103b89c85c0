"""Stat cache: lets an unchanged tree be captured without reading file contents.

Racy-timestamp safe: an entry is only remembered if the file's mtime and ctime are older than
the capture's start by more than the file system's timestamp granularity, so a file modified in
the same clock tick as a capture is re-hashed next time.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
import time
from collections.abc import Mapping

from .stamps import COARSE_WINDOW_NS, FINE_WINDOW_NS, SECOND_NS, Key, is_racy
from .stamps import stat_key as stat_key  # named here for callers (tests) that knew it from here

#: A command that changed at most this many entries (files read again, or rewritten by a restore) leaves the file
#: as it was: what it says of those paths no longer matches their stat (a rewrite moves ctime, a re-read was of a
#: file whose stat moved), so they just miss and the next walk hashes them again. Rewriting all 11,000 entries
#: for them was ~12 ms of every one-shot restore (measured in the resident server's workers).
SMALL_CHANGE = 64
ENCODE_SLICE = 2048  # entries marshalled at a time (encode_parts)


def decode(body: bytes | memoryview) -> dict[str, tuple[int, int, int, int, int, str]]:
    """The per-path half's entries (a marshal of {path: (size, mtime_ns, ctime_ns, ino, mode, blob hex)}); ValueError
    if it is not a dict (the index's checksum guards against damage)."""
    doc = marshal.loads(body)
    if type(doc) is not dict:
        raise ValueError("not a stat cache")
    return doc


class StatCache:
    """path -> (stat key, blob hex) for one workspace, the per-path half of its index (index.py); a damaged one is
    simply rebuilt."""

    def __init__(self, body: bytes | memoryview | None) -> None:
        # Kept as stored, (size, mtime_ns, ctime_ns, ino, mode, blob hex) by path: loading is then one marshal call
        # and saving another (re-tupling 11,000 entries each way cost ~20 ms of a one-file restore, measured).
        # Decoded only when an entry is looked up or the whole is rewritten: a restore's safety capture that reads a
        # few changed files needs neither, and decoding 100,000 entries held ~50 MB of its peak RSS (measured).
        self._body = body
        self._entries: dict[str, tuple[int, int, int, int, int, str]] | None = None
        self._pending: dict[str, tuple[int, int, int, int, int, str] | None] = {}  # changes made before decoding
        self.dirty = False
        self.small = 0  # entries changed by re-reads and rewrites since the last save (see SMALL_CHANGE)
        self.saved_at = 0.0

    @property
    def entries(self) -> dict[str, tuple[int, int, int, int, int, str]]:
        """path -> (size, mtime_ns, ctime_ns, ino, mode, blob hex), decoded when first asked (a damaged half: none)."""
        if self._entries is None:
            entries: dict[str, tuple[int, int, int, int, int, str]] = {}
            if self._body is not None:
                with contextlib.suppress(ValueError, EOFError, TypeError, AttributeError):
                    entries = decode(self._body)
            self._body = None
            for p, v in self._pending.items():
                if v is None:
                    entries.pop(p, None)
                else:
                    entries[p] = v
            self._pending = {}
            self._entries = entries
        return self._entries

    @entries.setter
    def entries(self, value: dict[str, tuple[int, int, int, int, int, str]]) -> None:
        self._body, self._pending, self._entries = None, {}, value

    def _set(self, path: str, value: tuple[int, int, int, int, int, str] | None) -> None:
        """Change one entry (None: drop it), without decoding the rest when they are not decoded yet."""
        if self._entries is not None:
            if value is None:
                self._entries.pop(path, None)
            else:
                self._entries[path] = value
        else:
            self._pending[path] = value

    def lookup(self, rel: str, key: Key) -> str | None:
        """The cached blob for this exact stat key, if any (an entry of another shape is no hit)."""
        hit = self.entries.get(rel)
        if (type(hit) is tuple and len(hit) == 6 and hit[:5] == key
                and type(hit[5]) is str):
            return hit[5]
        return None

    def update(self, fresh: dict[str, tuple[Key, str]], started_ns: int) -> None:
        """Replace the cache with this capture's results, dropping racy entries."""
        fine, coarse = started_ns - FINE_WINDOW_NS, started_ns - COARSE_WINDOW_NS
        kept = {
            p: (*k, b)
            for p, (k, b) in fresh.items()
            if max(k[1], k[2]) < (coarse if k[1] % SECOND_NS == 0 else fine)
        }
        if kept != self.entries:
            self.entries = kept
            self.dirty = True

    def update_some(self, entries: Mapping[str, tuple[object, ...]], fresh: dict[str, tuple[Key, str]],
                    started_ns: int) -> None:
        """Update only the paths a journal-driven capture re-read."""
        for p in entries:
            v = fresh.get(p)
            self._set(p, (*v[0], v[1]) if v is not None and not is_racy(v[0], started_ns) else None)
            self._changed_one()

    def forget(self, paths: list[str]) -> None:
        """Invalidate paths a restore just rewrote."""
        if self._entries is None:  # not decoded: whether each path had an entry is unknown, so each counts
            for p in paths:
                self._set(p, None)
                self._changed_one()
            return
        for p in paths:
            if self._entries.pop(p, None) is not None:
                self._changed_one()

    def _changed_one(self) -> None:
        self.small += 1
        if self.small > SMALL_CHANGE:
            self.dirty = True

    def encode(self) -> bytes:
        """The entries as the index stores them (one marshal of the dict, version 2), joined."""
        return b"".join(self.encode_parts())

    def encode_parts(self) -> list[bytes]:
        """`encode`'s bytes in pieces of ENCODE_SLICE entries: version 2 writes a dict as "{", its pairs and "0",
        with no references between them, so the pieces join to the same bytes; one marshal of 100,000 entries grew
        a buffer to ~25 MB at the cold capture's peak. Version 2: no back-references; marshal's default (4) keeps
        a table of every object it wrote and took 20-28 ms instead of 6-10 ms for 11,000 entries (measured)."""
        items = iter(self.entries.items())
        pieces = [b"{"]
        while part := dict(itertools.islice(items, ENCODE_SLICE)):
            pieces.append(marshal.dumps(part, 2)[1:-1])
        pieces.append(b"0")
        return pieces

    def saved(self) -> None:
        """The index wrote these entries: changes count from here (SMALL_CHANGE)."""
        self.dirty = False
        self.small = 0
        self.saved_at = time.monotonic()
