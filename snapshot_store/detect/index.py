"""One workspace's index, as git's (and dulwich's index.py) is one file: per path the stat key and content id (the
stat cache), per listed directory its stat and the digest of its entries with the files seen in it (the saved walk),
so a capture can tell what changed without reading file contents or walking.

Both halves live in `cache/<wskey>.index` (FORMAT.md §7), each with its own checksum: an unchanged capture decodes
only the walk half, and rewrites the per-path half as it found it. The stat cache is racy-timestamp safe: an entry is
only remembered if the file's mtime and ctime are older than the capture's start by more than the file system's
timestamp granularity, so a file modified in the same clock tick as a capture is re-hashed next time.
"""

from __future__ import annotations

import contextlib
import itertools
import marshal
import os
import struct
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import BinaryIO

import blake3

from ..fsutil import atomic_write, atomic_write_parts, tmp_name
from ..records import NamedTuple
from ..stamps import COARSE_WINDOW_NS, FINE_WINDOW_NS, SECOND_NS, Key, is_racy
from ..stamps import stat_key as stat_key  # named here for callers (tests) that knew it from the stat cache
from . import walkstate

MAGIC = b"CRINDEX1"
LENGTH = struct.Struct("<Q")  # before each section: its length (checksum and payload; 0 = the half is empty)
CHECKSUM = 32  # a section starts with the blake3 of its payload
#: The two files the halves had before (read once, then removed: FORMAT.md §7): their magic, then a section.
LEGACY_STAT_MAGIC = b"CRSTAT2\n"
LEGACY_WALK_MAGIC = b"CRWALK3\n"


def sections(data: bytes) -> tuple[bytes, bytes] | None:
    """An index file's walk and per-path sections as stored (None: not an index, or truncated or padded)."""
    if not data.startswith(MAGIC):
        return None
    pos, out = len(MAGIC), []
    for _half in range(2):
        if pos + LENGTH.size > len(data):
            return None
        (size,) = LENGTH.unpack_from(data, pos)
        pos += LENGTH.size
        if pos + size > len(data) or 0 < size < CHECKSUM:
            return None
        out.append(data[pos:pos + size])
        pos += size
    if pos != len(data):
        return None
    return out[0], out[1]


class StatAt(NamedTuple):
    """Where an index file read for its walk half holds its per-path half, not read yet."""

    identity: tuple[int, ...]  # the file's (st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns) when read
    offset: int
    size: int


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def read_walk_section(path: Path) -> tuple[bytes, StatAt] | None:
    """The walk section of the index file at `path`, and where its per-path section is (read by `read_stat_at` when
    asked): an unchanged capture never needs that half, and reading its ~18 MB was ~10 ms of each one-shot command
    and each turn's first capture at 100,000 files (measured; issue 35). None: not an index, or truncated or padded."""
    with open(path, "rb") as f:
        return _layout(f, walk=True)


def _layout(f: BinaryIO, *, walk: bool) -> tuple[bytes, StatAt] | None:
    """The open index file's walk section (with `walk`; else b"", skipped) and where its per-path section is."""
    st = os.fstat(f.fileno())
    total = st.st_size
    f.seek(0)
    if f.read(len(MAGIC)) != MAGIC:
        return None
    head = f.read(LENGTH.size)
    if len(head) != LENGTH.size:
        return None
    (size,) = LENGTH.unpack(head)
    pos = len(MAGIC) + LENGTH.size
    if pos + size > total or 0 < size < CHECKSUM:
        return None
    body = f.read(size) if walk else b""
    if walk and len(body) != size:
        return None
    pos += size
    f.seek(pos)
    head = f.read(LENGTH.size)
    if len(head) != LENGTH.size:
        return None
    (stat_size,) = LENGTH.unpack(head)
    pos += LENGTH.size
    if pos + stat_size != total or 0 < stat_size < CHECKSUM:
        return None
    return body, StatAt(_identity(st), pos, stat_size)


def read_stat_at(path: Path, at: StatAt) -> bytes | None:
    """The per-path section `at` names, read now: from the same file if it is still in place, else (another process
    renamed its index over it) the current file's own per-path section, whose entries vouch for themselves as well
    (each holds the stat it was true for). None: no index there now, or a damaged one."""
    try:
        with open(path, "rb") as f:
            if _identity(os.fstat(f.fileno())) != at.identity:
                current = _layout(f, walk=False)
                if current is None:
                    return None
                at = current[1]
            f.seek(at.offset)
            body = f.read(at.size)
            if len(body) != at.size or f.read(1):
                return None
    except FileNotFoundError:
        return None
    return body


#: A section as stored, or as (checksum, *payload pieces) not yet joined: the per-path half of 100,000 files is
#: ~20 MB, and its joined copy was part of the cold capture's peak memory.
Section = bytes | tuple[bytes, ...]


def payload(section: Section) -> memoryview | None:
    """A section's payload when its checksum holds (None: an empty half, or a damaged one)."""
    if isinstance(section, tuple):  # made here from its payload: its checksum holds
        return memoryview(section[1] if len(section) == 2 else b"".join(section[1:]))
    if len(section) < CHECKSUM:
        return None
    body = memoryview(section)[CHECKSUM:]
    return body if blake3.blake3(body).digest() == section[:CHECKSUM] else None


def section(body: bytes | None) -> bytes:
    """A payload as stored: its checksum first (None: an empty half)."""
    return b"" if body is None else b"".join(_unjoined(body))


def _unjoined(*body: bytes) -> tuple[bytes, ...]:
    """`section` of the payload made of these pieces, without joining them."""
    hasher = blake3.blake3()
    for piece in body:
        hasher.update(piece)
    return (hasher.digest(), *body)


def _pieces(section: Section) -> tuple[bytes, ...]:
    return section if isinstance(section, tuple) else (section,)


def join(walk: Section, stat: Section) -> bytes:
    """The index file of two sections."""
    return b"".join(parts(walk, stat))


def parts(walk: Section, stat: Section) -> tuple[bytes, ...]:
    """The index file of two sections, piece by piece: written without joining them (a copy of the whole file,
    ~35 MB at 100,000 files, was part of the cold capture's peak memory)."""
    w, s = _pieces(walk), _pieces(stat)
    return MAGIC, LENGTH.pack(sum(map(len, w))), *w, LENGTH.pack(sum(map(len, s))), *s


def _legacy_section(path: Path, magic: bytes) -> bytes | None:
    """A half from its old file (its magic, then the same checksum and payload), b"" if damaged, None if absent."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError:
        return b""
    return data[len(magic):] if data.startswith(magic) else b""


#: A command that changed at most this many entries (files read again, or rewritten by a restore) leaves the file
#: as it was: what it says of those paths no longer matches their stat (a rewrite moves ctime, a re-read was of a
#: file whose stat moved), so they just miss and the next walk hashes them again. Rewriting all 11,000 entries
#: for them was ~12 ms of every one-shot restore (measured in the resident server's workers).
SMALL_CHANGE = 64
ENCODE_SLICE = 2048  # entries marshalled at a time (encode_parts)


StatEntry = tuple[int, int, int, int, int, str]  # (size, mtime_ns, ctime_ns, ino, mode, blob hex)


def kept_entries(fresh: Mapping[str, tuple[Key, str]], started_ns: int) -> Iterator[tuple[str, StatEntry]]:
    """A capture's results as the stat cache keeps them, in their order: racy ones dropped."""
    fine, coarse = started_ns - FINE_WINDOW_NS, started_ns - COARSE_WINDOW_NS
    for p, (k, b) in fresh.items():
        if max(k[1], k[2]) < (coarse if k[1] % SECOND_NS == 0 else fine):
            yield p, (*k, b)


def _marshalled(entries: Iterable[tuple[str, StatEntry]]) -> Iterator[bytes]:
    """The bytes of one marshal (version 2) of the dict of `entries`, in pieces of ENCODE_SLICE entries: version 2
    writes a dict as "{", its pairs and "0", with no references between them, so the pieces join to the same bytes."""
    items = iter(entries)
    yield b"{"
    while part := dict(itertools.islice(items, ENCODE_SLICE)):
        yield marshal.dumps(part, 2)[1:-1]
    yield b"0"


def _same(old: Mapping[str, StatEntry], new: Iterable[tuple[str, StatEntry]]) -> bool:
    """Are these the entries `old` holds, whatever their order (a dict's equality, without building one)?"""
    count = 0
    for p, v in new:
        if old.get(p) != v:
            return False
        count += 1
    return count == len(old)


def stat_entries(body: bytes | memoryview) -> dict[str, tuple[int, int, int, int, int, str]]:
    """The per-path half's entries (a marshal of {path: (size, mtime_ns, ctime_ns, ino, mode, blob hex)}); ValueError
    if it is not a dict (the index's checksum guards against damage)."""
    doc = marshal.loads(body)
    if type(doc) is not dict:
        raise ValueError("not a stat cache")
    return doc


class StatCache:
    """path -> (stat key, blob hex) for one workspace, the per-path half of its index; a damaged one is
    simply rebuilt."""

    def __init__(self, body: bytes | memoryview | None) -> None:
        # Kept as stored, (size, mtime_ns, ctime_ns, ino, mode, blob hex) by path: loading is then one marshal call
        # and saving another (re-tupling 11,000 entries each way cost ~20 ms of a one-file restore, measured).
        # Decoded only when an entry is looked up or the whole is rewritten: a restore's safety capture that reads a
        # few changed files needs neither, and decoding 100,000 entries held ~50 MB of its peak RSS (measured).
        self._body = body
        self._entries: dict[str, tuple[int, int, int, int, int, str]] | None = None
        self._pending: dict[str, tuple[int, int, int, int, int, str] | None] = {}  # changes made before decoding
        # A capture's results that replace the entries, kept as they came until saved (`replace`).
        self._fresh: tuple[Mapping[str, tuple[Key, str]], int] | None = None
        self.dirty = False
        self.small = 0  # entries changed by re-reads and rewrites since the last save (see SMALL_CHANGE)
        self.saved_at = 0.0

    @property
    def entries(self) -> dict[str, tuple[int, int, int, int, int, str]]:
        """path -> (size, mtime_ns, ctime_ns, ino, mode, blob hex), decoded when first asked (a damaged half: none)."""
        if self._fresh is not None:  # replaced, not saved yet: built after all
            fresh, self._fresh = self._fresh, None
            self._entries = dict(kept_entries(*fresh))
        if self._entries is None:
            entries: dict[str, tuple[int, int, int, int, int, str]] = {}
            if self._body is not None:
                with contextlib.suppress(ValueError, EOFError, TypeError, AttributeError):
                    entries = stat_entries(self._body)
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
        self._body, self._pending, self._entries, self._fresh = None, {}, value, None

    @property
    def undecoded(self) -> bool:
        """Its stored entries are not decoded yet (the first lookup decodes them all)."""
        return self._entries is None and self._fresh is None and self._body is not None

    @property
    def streamed(self) -> bool:
        """Replaced by a capture's results not built into entries (`replace`): saved piece by piece, then dropped."""
        return self._fresh is not None

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

    def update(self, fresh: Mapping[str, tuple[Key, str]], started_ns: int) -> None:
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

    def replace(self, fresh: Mapping[str, tuple[Key, str]], started_ns: int) -> None:
        """`update` for a process that looks nothing up afterwards (a one-shot command): the entries are never built
        as a dict; the save encodes them from `fresh` (which must not change meanwhile) a slice at a time. At 100,000
        files the dict of entries and its encoded pieces were ~34 MB of the cold capture's peak (measured)."""
        if self._entries is not None and self._fresh is None and _same(self._entries, kept_entries(fresh, started_ns)):
            return  # the same entries: nothing to write
        self._body, self._pending, self._entries, self._fresh = None, {}, None, (fresh, started_ns)
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
        """`encode`'s bytes in pieces of ENCODE_SLICE entries (`_marshalled`): one marshal of 100,000 entries grew
        a buffer to ~25 MB at the cold capture's peak. Version 2: no back-references; marshal's default (4) keeps
        a table of every object it wrote and took 20-28 ms instead of 6-10 ms for 11,000 entries (measured)."""
        return list(self.encode_iter())

    def encode_iter(self) -> Iterator[bytes]:
        """`encode_parts` made as they are asked for: a replaced cache's from its capture's results (`replace`)."""
        if self._fresh is not None:
            return _marshalled(kept_entries(*self._fresh))
        return _marshalled(self.entries.items())

    def written(self) -> None:
        """A streamed save wrote the replaced entries: they are on disk only from here (the index reads the file
        again when next asked; this object holds none)."""
        self._fresh = None
        self.saved()

    def saved(self) -> None:
        """The index wrote these entries: changes count from here (SMALL_CHANGE)."""
        self.dirty = False
        self.small = 0
        self.saved_at = time.monotonic()


class Prepared(NamedTuple):
    """An index written to a temporary file before the snapshot its walk names has an id (WorkspaceIndex.prepare)."""

    tmp: Path
    walk: int  # where the walk half's payload starts in the file (-1: the half is empty)
    size: int  # the walk half's payload's length


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


READ_CHUNK = 1 << 20


class WorkspaceIndex:
    """The index of one workspace: the stat cache by path and the saved walk by directory, in one file."""

    def __init__(self, path: Path, legacy: tuple[Path, Path] | None = None) -> None:
        self.path = path
        self.legacy = legacy  # the old stat cache and saved walk files, migrated when no index exists yet
        self._walk: Section = b""  # the walk section as last read or set
        # the per-path section as last read or written (rewritten as is if unchanged), or where it is, not read yet
        self._stat_section: Section | StatAt = b""
        self._stat: StatCache | None = None
        self._read_once = False
        self._walk_unsaved = False
        # The walk section last decoded or encoded here, with its state, kept while the workspace is watched (a
        # session, `codexr exec`): its next capture finds the same bytes and decodes nothing (~55 ms at 100,000
        # files; issue 35). A one-shot process keeps nothing (the state is ~30 MB there: door.Look.remember).
        self._decoded: tuple[Section, walkstate.WalkState] | None = None
        self.keep_decoded = False
        #: A walk set and not encoded yet (in a 1-tuple: None is "no walk"): encoded by the save that writes it, which
        #: a session leaves to a thread (~12 ms at 100,000 files; door._Behind)
        self._pending: tuple[walkstate.WalkState | None] | None = None

    def _read(self) -> None:
        """The file's walk half as it is now (another process may have replaced it since), and where its per-path half
        is, read when first asked (`_stat_loaded`); damage leaves a half empty."""
        self._read_once = True
        walk: bytes = b""
        at: StatAt | bytes = b""
        try:
            got = read_walk_section(self.path)
            if got is not None:
                walk, at = got
        except FileNotFoundError:
            data = self._migrate()
            parts = sections(data) if data else None
            if parts is not None:
                walk, at = parts
        except OSError:
            pass
        if not self._walk_unsaved:
            self._walk = walk
        if self._stat is None:
            self._stat_section = at

    def _stat_loaded(self) -> Section:
        """The per-path section as read (from the file `_read` found, or the one in its place now: read_stat_at)."""
        at = self._stat_section
        if isinstance(at, StatAt):
            try:
                got = read_stat_at(self.path, at)
            except OSError:
                got = None
            self._stat_section = got if got is not None else b""
        assert not isinstance(self._stat_section, StatAt)
        return self._stat_section

    def _migrate(self) -> bytes | None:
        """A store from before the one index: build it from the two old files, read once, then remove them.

        Made only if still absent (a link, not a rename): a process migrating at the same time as another one
        captures never replaces the newer index with the old halves.
        """
        if self.legacy is None:
            return None
        stat_file, walk_file = self.legacy
        stat = _legacy_section(stat_file, LEGACY_STAT_MAGIC)
        walk = _legacy_section(walk_file, LEGACY_WALK_MAGIC)
        if stat is None and walk is None:
            return None
        data = join(walk or b"", stat or b"")
        tmp = self.path.parent / tmp_name()
        try:
            atomic_write(tmp, data, sync=False)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                with contextlib.suppress(OSError):
                    data = self.path.read_bytes()  # another process made it first: theirs stands
        except OSError:
            return data  # used for this process; the old files stay for the next one
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
        for old in (stat_file, walk_file):
            with contextlib.suppress(OSError):
                old.unlink()
        return data

    @property
    def stat(self) -> StatCache:
        """Path -> (stat key, blob), decoded when first asked: an unchanged capture that checks the saved walk
        never needs it (decoding it is ~10-15 ms on 11,000 files)."""
        if self._stat is None:
            if not self._read_once:
                self._read()
            self._stat = StatCache(payload(self._stat_loaded()))
        return self._stat

    def lookup(self, rel: str, key: Key) -> str | None:
        """The content id the index holds for this exact stat key, if any."""
        return self.stat.lookup(rel, key)

    def forget(self, paths: list[str]) -> None:
        """A restore rewrote these paths: never vouch for what the index said of them."""
        self.stat.forget(paths)

    def saved_walk(self) -> walkstate.WalkState | None:
        """The directories and files the last capture saw, or None (none, or damaged: walk)."""
        self._encode_pending()
        self._read()
        if self._decoded is not None and self._decoded[0] == self._walk:
            return self._decoded[1]
        body = payload(self._walk)
        state = walkstate.decode(body) if body is not None else None
        self._decoded = (self._walk, state) if state is not None and self.keep_decoded else None
        return state

    def set_walk(self, state: walkstate.WalkState | None) -> None:
        """What this capture saw (None: nothing it can vouch for), encoded and written by the next save."""
        self._pending = (state,)
        self._walk_unsaved = True
        self._decoded = None

    def _encode_pending(self) -> None:
        """The walk `set_walk` left, encoded (an unencodable one: none)."""
        if self._pending is None:
            return
        (state,), self._pending = self._pending, None
        body = walkstate.encode(state) if state is not None else None
        self._walk = _unjoined(body) if body is not None else b""
        self._decoded = (self._walk, state) if state is not None and body is not None and self.keep_decoded else None

    def save_walk(self, state: walkstate.WalkState) -> None:
        """Keep what this capture saw for the next process, now (the per-path half's changes wait for `save`)."""
        self.set_walk(state)
        with contextlib.suppress(OSError):
            self.save(per_path=False)

    def forget_walk(self) -> None:
        """This capture cannot vouch for its walk: the next one walks."""
        self.set_walk(None)
        with contextlib.suppress(OSError):
            self.save(per_path=False)

    def save(self, *, per_path: bool = True) -> None:
        """Write the index if a half changed: the walk as set, and with `per_path` the per-path half when it changed
        enough (SMALL_CHANGE); otherwise that half as it was read. No fsync: losing it costs a walk and a
        re-read, never a wrong answer. Atomic (temp file and rename): a reader sees the old index or the new one."""
        stat = self._stat
        new_stat = per_path and stat is not None and stat.dirty
        if not (self._walk_unsaved or new_stat):
            return
        self._encode_pending()
        if not self._read_once:
            self._read()
        if new_stat and stat is not None and stat.streamed:
            self._save_streamed(stat)
            return
        if new_stat:
            assert stat is not None
            self._stat_section = _unjoined(*stat.encode_parts())
        atomic_write_parts(self.path, parts(self._walk, self._stat_loaded()), sync=False)
        self._walk_unsaved = False
        if new_stat:
            assert stat is not None
            stat.saved()

    def prepare(self, walk: Iterable[bytes] | None, entries: Iterable[tuple[str, StatEntry]]) -> Prepared:
        """Write the index to a temporary file now, both halves piece by piece and never whole in memory: the walk's
        marshal (`walkstate.encode_parts`; None: an empty half) with the snapshot's id a placeholder still, and the
        per-path half of `entries` (a marshal of their dict, in their order; none: an empty half). `finish` names the
        snapshot and puts the file in place; `abandon` drops it. Raises what writing or the walk's marshal raise (the
        temporary file removed): a one-shot capture then saves its index as before."""
        tmp = self.path.parent / tmp_name()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(fd, MAGIC)
            at, size = -1, 0
            if walk is None:
                _write_all(fd, LENGTH.pack(0))
            else:
                _write_all(fd, bytes(LENGTH.size + CHECKSUM))  # the half's length and checksum: `finish` writes them
                at = len(MAGIC) + LENGTH.size + CHECKSUM
                for piece in walk:
                    _write_all(fd, piece)
                    size += len(piece)
            stat_at = at + size if at >= 0 else len(MAGIC) + LENGTH.size
            _write_all(fd, bytes(LENGTH.size + CHECKSUM))
            hasher, stat_size = blake3.blake3(), 0
            for part in _marshalled(entries):
                hasher.update(part)
                stat_size += len(part)
                _write_all(fd, part)
            if stat_size == len(b"{0"):  # no entries: an empty half
                os.ftruncate(fd, stat_at + LENGTH.size)
                os.pwrite(fd, LENGTH.pack(0), stat_at)
            else:
                os.pwrite(fd, LENGTH.pack(CHECKSUM + stat_size) + hasher.digest(), stat_at)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        os.close(fd)
        self._loaded_dropped()
        return Prepared(tmp, at, size)

    def _loaded_dropped(self) -> None:
        """Hold nothing of the file: read again when next asked (what a prepared index replaces, or replaced)."""
        self._walk, self._stat_section, self._stat, self._decoded, self._pending = b"", b"", None, None, None
        self._read_once = self._walk_unsaved = False

    def finish(self, prepared: Prepared, snapshot: str) -> bool:
        """Name `snapshot` in a prepared index's walk half (its checksum made again from the file), and put the file in
        place of the index; this object reads it again when next asked. False (the file dropped, the index left as it
        was): the id does not fit the placeholder, or the file is not as prepared."""
        name = snapshot.encode("ascii", "replace")
        try:
            if prepared.walk >= 0 and len(name) != len(walkstate.PLACEHOLDER):
                raise ValueError("a snapshot id of another length")
            fd = os.open(prepared.tmp, os.O_RDWR)
            try:
                if prepared.walk >= 0:
                    at = prepared.walk + walkstate.ID_AT
                    if os.pread(fd, len(name), at) != walkstate.PLACEHOLDER.encode("ascii"):
                        raise ValueError("not the prepared walk")
                    os.pwrite(fd, name, at)
                    hasher, pos, end = blake3.blake3(), prepared.walk, prepared.walk + prepared.size
                    while pos < end:
                        chunk = os.pread(fd, min(READ_CHUNK, end - pos), pos)
                        if not chunk:
                            raise ValueError("the prepared file is short")
                        hasher.update(chunk)
                        pos += len(chunk)
                    os.pwrite(fd, LENGTH.pack(CHECKSUM + prepared.size) + hasher.digest(),
                              prepared.walk - CHECKSUM - LENGTH.size)
            finally:
                os.close(fd)
            os.replace(prepared.tmp, self.path)
        except (OSError, ValueError):
            self.abandon(prepared)
            return False
        self._loaded_dropped()
        return True

    @staticmethod
    def abandon(prepared: Prepared) -> None:
        """Drop a prepared index that will not be put in place."""
        with contextlib.suppress(OSError):
            prepared.tmp.unlink()

    def _save_streamed(self, stat: StatCache) -> None:
        """`save` of a replaced per-path half (StatCache.replace), encoded twice a slice at a time: once for its
        length and checksum, then as it is written (the same bytes). Its entries then live on disk only: a later look
        reads the file again, as the next process would (this one is about to exit)."""
        self._encode_pending()
        hasher, size = blake3.blake3(), 0
        for piece in stat.encode_iter():
            hasher.update(piece)
            size += len(piece)
        w = _pieces(self._walk)
        head = (MAGIC, LENGTH.pack(sum(map(len, w))), *w, LENGTH.pack(CHECKSUM + size), hasher.digest())
        atomic_write_parts(self.path, itertools.chain(head, stat.encode_iter()), sync=False)
        self._walk_unsaved = False
        stat.written()
        self._stat, self._stat_section, self._read_once = None, b"", False
