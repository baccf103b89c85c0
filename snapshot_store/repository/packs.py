"""Content-addressed blob storage: blobs appended to pack files, located through pack indexes.

One file per blob would cost a create + fsync per file (seconds for a cold capture of a
10,000-file tree on these machines); packs make a capture one sequential write and one fsync.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

import blake3
import zstandard

if TYPE_CHECKING:
    import concurrent.futures

from ..errors import CorruptStore, MissingBlob
from ..fsutil import TMP_PREFIX, atomic_write, atomic_write_parts, durable, tmp_name
from ..ids import is_pack_id, new_pack_id
from ..records import NamedTuple, record

GENERATION_FILE = "generation"  # beside packs/: changed by gc around every deletion

PACK_MAGIC = b"CRPACK1\n"
IDX_MAGIC = b"CRIDX01\n"
RECORD = struct.Struct("<32sBQQ")  # blob id, codec, stored length, raw length
IDX_ENTRY = struct.Struct("<32sBQQQ")  # blob id, codec, data offset, stored length, raw length
IDX_COUNT = struct.Struct("<I")
CODEC_RAW = 0
CODEC_ZSTD = 1
PACK_TARGET_BYTES = 256 * 1024 * 1024
STREAM_THRESHOLD = 4 * 1024 * 1024
CHUNK = 1024 * 1024
BATCH_BYTES = 2 * 1024 * 1024  # raw bytes handed to the compression worker at a time
BATCH_FILES = 512
# Batches in flight at most: with the one being filled, ~6 MiB of raw data waits in memory on a source tree (each
# batch can overshoot by one file below STREAM_THRESHOLD: IN_FLIGHT_MAX). 8 batches of 4 MiB (~36 MiB, and their
# compressed copies) were part of the cold 100,000-file capture's peak RSS: freed file buffers stay in the heap; 4 of
# 2 MiB were ~5 MB more than 2 (one compressed while the next waits: no slower, 5 alternating runs).
MAX_BATCHES = 2
IN_FLIGHT_MAX = (MAX_BATCHES + 1) * (BATCH_BYTES + STREAM_THRESHOLD)  # the bound `most_in_flight` stays under
ZSTD_LEVEL = 1  # same ratio as level 3 on source trees here, ~30% faster
ZSTD_FHD_MUST_BE_ZERO = 0x18  # zstd frame header descriptor: unused bit 4 and reserved bit 3


class Location(NamedTuple):
    """Where one blob lives."""

    pack: str
    codec: int
    offset: int
    stored_len: int
    raw_len: int


@record
class PackInfo:
    """Index data of one pack, as loaded from its .idx file."""

    pack_id: str
    size: int
    entries: list[tuple[bytes, Location]]


def encode_index(entries: list[tuple[bytes, Location]]) -> bytes:
    """Serialize a pack index with a trailing blake3 of everything before it."""
    records = b"".join(IDX_ENTRY.pack(blob, loc.codec, loc.offset, loc.stored_len, loc.raw_len)
                       for blob, loc in entries)
    return b"".join(index_parts(records, len(entries)))


def index_parts(records: bytes | bytearray, count: int) -> tuple[bytes, bytes | bytearray, bytes]:
    """A pack index of `count` entries packed as IDX_ENTRY records, in the pieces it is written in (never joined)."""
    head = IDX_MAGIC + IDX_COUNT.pack(count)
    hasher = blake3.blake3(head)
    hasher.update(records)
    return head, records, hasher.digest()


class Written(NamedTuple):
    """A pack this process wrote, its entries kept as its index stores them (IDX_ENTRY records) until every location is
    asked for: a Location object per blob, with its ints, was ~17 MB of the cold 100,000-file capture (measured)."""

    pack_id: str
    size: int
    records: bytes | bytearray
    at: dict[str, int]  # blob (its hex id, the string the capture's map holds) -> the number of its record

    def location(self, blob: bytes) -> Location | None:
        """The blob's location in this pack (None: not in it)."""
        i = self.at.get(blob.hex())
        if i is None:
            return None
        _blob, codec, offset, stored, raw = IDX_ENTRY.unpack_from(self.records, i * IDX_ENTRY.size)
        return Location(self.pack_id, codec, offset, stored, raw)

    def entries(self) -> Iterator[tuple[bytes, Location]]:
        """Every blob's location, in the index's order."""
        for blob, codec, offset, stored, raw in IDX_ENTRY.iter_unpack(self.records):
            yield blob, Location(self.pack_id, codec, offset, stored, raw)


IDX_HEAD = len(IDX_MAGIC) + IDX_COUNT.size
#: Lookups a BlobIndex answers by searching the pack indexes' bytes before it decodes them all: a search is ~1 ms
#: per 5.5 MB of index (100,000 blobs), decoding every entry ~310 ms of a one-file restore at 100,000 files (issue 35).
LAZY_LOOKUPS = 32


def check_index(pack_id: str, data: bytes) -> None:
    """Check a pack index's frame (magic, checksum, length); raise CorruptStore naming the pack on any mismatch."""
    if len(data) < IDX_HEAD + 32 or not data.startswith(IDX_MAGIC):
        raise CorruptStore(f"pack index {pack_id}.idx is truncated or not a pack index")
    if blake3.blake3(memoryview(data)[:-32]).digest() != data[-32:]:
        raise CorruptStore(f"pack index {pack_id}.idx fails its checksum")
    (count,) = IDX_COUNT.unpack_from(data, len(IDX_MAGIC))
    if len(data) != IDX_HEAD + count * IDX_ENTRY.size + 32:
        raise CorruptStore(f"pack index {pack_id}.idx has a wrong length")


def _location(pack_id: str, pack_size: int, codec: int, offset: int, stored: int, raw: int) -> Location:
    if offset + stored > pack_size or codec not in (CODEC_RAW, CODEC_ZSTD):
        raise CorruptStore(f"pack index {pack_id}.idx points outside its pack")
    return Location(pack_id, codec, offset, stored, raw)


def decode_index(pack_id: str, data: bytes, pack_size: int) -> list[tuple[bytes, Location]]:
    """Parse and check a pack index; raise CorruptStore naming the pack on any mismatch."""
    check_index(pack_id, data)
    out: list[tuple[bytes, Location]] = []
    for blob, codec, offset, stored, raw in IDX_ENTRY.iter_unpack(memoryview(data)[IDX_HEAD:-32]):
        if offset + stored > pack_size or codec not in (CODEC_RAW, CODEC_ZSTD):  # _location's check, in line (100k)
            raise CorruptStore(f"pack index {pack_id}.idx points outside its pack")
        out.append((blob, Location(pack_id, codec, offset, stored, raw)))
    return out


class IndexEntries:
    """A pack index's entries, checked as decode_index checks them when read, and decoded each time they are walked:
    gc walks them twice, and held decoded (a Location, a tuple and three ints per blob) they were ~24 MB of its peak
    after a cold capture of 100,000 files (measured)."""

    def __init__(self, pack_id: str, data: bytes, pack_size: int) -> None:
        check_index(pack_id, data)
        for _blob, codec, offset, stored, _raw in IDX_ENTRY.iter_unpack(memoryview(data)[IDX_HEAD:-32]):
            if offset + stored > pack_size or codec not in (CODEC_RAW, CODEC_ZSTD):
                raise CorruptStore(f"pack index {pack_id}.idx points outside its pack")
        self.pack_id, self._data = pack_id, data

    def __iter__(self) -> Iterator[tuple[bytes, Location]]:
        pack_id = self.pack_id
        for blob, codec, offset, stored, raw in IDX_ENTRY.iter_unpack(memoryview(self._data)[IDX_HEAD:-32]):
            yield blob, Location(pack_id, codec, offset, stored, raw)

    def __len__(self) -> int:
        return (len(self._data) - IDX_HEAD - 32) // IDX_ENTRY.size


def search_index(pack_id: str, data: bytes, pack_size: int, blob: bytes) -> Location | None:
    """The blob's location in a checked pack index's bytes, found without decoding them (None: not there)."""
    end = len(data) - 32
    at = data.find(blob, IDX_HEAD, end)
    while at >= 0:
        if (at - IDX_HEAD) % IDX_ENTRY.size == 0:  # an entry's id, not bytes that straddle two entries
            _blob, codec, offset, stored, raw = IDX_ENTRY.unpack_from(data, at)
            return _location(pack_id, pack_size, codec, offset, stored, raw)
        at = data.find(blob, at + 1, end)
    return None


def read_generation(store_dir: Path) -> bytes:
    """gc's current generation token ("" before the first gc)."""
    try:
        return (store_dir / GENERATION_FILE).read_bytes()
    except FileNotFoundError:
        return b""


def read_pack_index(idx_path: str) -> PackInfo:
    """One pack's index, checked against its pack's size."""
    pack_id, data, size = read_index_bytes(idx_path)
    return PackInfo(pack_id, size, decode_index(pack_id, data, size))


def read_index_bytes(idx_path: str) -> tuple[str, bytes, int]:
    """One pack's id, its index's bytes (frame not checked yet) and its pack's size."""
    pack_id = os.path.basename(idx_path)[:-4]
    try:
        size = os.stat(idx_path[:-4] + ".pack").st_size
        with open(idx_path, "rb") as f:
            data = f.read()
    except FileNotFoundError as exc:
        raise CorruptStore(f"pack {pack_id} has an index but no pack file") from exc
    return pack_id, data, size


class BlobIndex:
    """Map blob id -> location, from every pack index on disk.

    The map is only trusted while gc's generation is the one read before it was loaded: gc changes
    the generation before and after deleting anything, and `fence()` (called under the store lock)
    reloads the map when it moved, so no decision that a blob exists outlives a gc.

    An index is read and its frame checked when its pack is first seen, but its entries are decoded only once more
    than LAZY_LOOKUPS blobs were asked for, or when everything is (`locations`, `loaded`, `damaged`: verify and gc):
    until then a lookup searches the indexes' bytes. A blob's further copies (`alternates`) are known once decoded.
    """

    def __init__(self, packs_dir: Path) -> None:
        self.packs_dir = packs_dir
        self._locations: dict[bytes, Location] = {}
        self.alternates: dict[bytes, list[Location]] = {}  # further copies of a blob (a re-stored good copy)
        self._loaded: dict[str, int] = {}
        self._damaged: dict[str, str] = {}
        self._lazy: dict[str, tuple[bytes, int]] = {}  # pack id -> its index's checked bytes and its pack's size
        self._written: list[Written] = []  # packs this process wrote, oldest first: their copies are found first
        self._searches = 0
        self._fds: dict[str, int] = {}
        self._dctx = zstandard.ZstdDecompressor()
        self.generation = read_generation(packs_dir.parent)
        self.refresh()

    @property
    def locations(self) -> dict[bytes, Location]:
        """Every blob's first location (every index decoded)."""
        self._decode_all()
        return self._locations

    @property
    def loaded(self) -> dict[str, int]:
        """The packs whose index is loaded and whole, with their sizes (every index decoded)."""
        self._decode_all()
        return self._loaded

    @property
    def known(self) -> frozenset[str]:
        """The packs whose index was read (`loaded`, and any found damaged once decoded), none decoded for it: what a
        caller that drops them all asks (decoding 100,000 locations only to drop them was gc's peak after a cold
        capture, ~17 MB more, measured)."""
        return frozenset(self._loaded)

    @property
    def damaged(self) -> dict[str, str]:
        """The packs whose index is damaged, with why (every index decoded)."""
        self._decode_all()
        return self._damaged

    def fence(self) -> bool:
        """Reload everything if a gc ran since the map was loaded; True when it did."""
        now = read_generation(self.packs_dir.parent)
        if now == self.generation:
            return False
        self.close()
        self._locations, self.alternates, self._loaded, self._damaged, self._lazy = {}, {}, {}, {}, {}
        self._written = []
        self._searches = 0
        self.generation = now
        self.refresh()
        return True

    def note_gc(self) -> None:
        """Called by gc (under the exclusive lock) before and after it deletes: other stores reload."""
        token = new_pack_id().encode()
        atomic_write(self.packs_dir.parent / GENERATION_FILE, token)
        self.generation = token

    def refresh(self) -> None:
        """Read pack indexes written since the last look (by this or another process)."""
        with os.scandir(self.packs_dir) as it:
            names = [e.name for e in it if e.name.endswith(".idx") and not e.name.startswith(TMP_PREFIX)]
        for name in names:
            pack_id = name[:-4]
            if pack_id in self._loaded or pack_id in self._damaged or not is_pack_id(pack_id):
                continue
            try:
                _pid, data, size = read_index_bytes(str(self.packs_dir / name))
                check_index(pack_id, data)
            except CorruptStore as exc:
                # One damaged index must not make the whole store unusable; verify reports it.
                self._damaged[pack_id] = str(exc)
                continue
            self._lazy[pack_id] = (data, size)
            self._loaded[pack_id] = size
        if self._searches >= LAZY_LOOKUPS:
            self._decode_all()

    def _decode_all(self) -> None:
        """Decode the indexes still searched by bytes, in the order they were read (the first copy stays first), after
        the packs this process wrote, whose copies come first (`add_written`)."""
        written, self._written = self._written, []
        for pack in written:
            for blob, loc in pack.entries():
                old = self._locations.get(blob)
                self._locations[blob] = loc
                if old is not None and old != loc:
                    self.alternates.setdefault(blob, []).append(old)
        while self._lazy:
            pack_id, (data, size) = next(iter(self._lazy.items()))
            del self._lazy[pack_id]
            try:
                entries = decode_index(pack_id, data, size)
            except CorruptStore as exc:
                self._damaged[pack_id] = str(exc)
                self._loaded.pop(pack_id, None)
                self._locations = {b: loc for b, loc in self._locations.items() if loc.pack != pack_id}
                continue
            found = dict(entries)
            if len(found) == len(entries) and self._locations.keys().isdisjoint(found):
                self._locations.update(found)  # the common case, without a call per blob (11,000: ~5 ms)
            else:
                for blob, loc in entries:
                    self._add(blob, loc)

    def add_written(self, pack_id: str, size: int, records: bytes | bytearray, at: dict[str, int]) -> None:
        """A pack this process just wrote (its index's `records`, each blob's record number `at`): its blobs are found
        there first (a forced, re-stored or repacked, copy is the one known good), without decoding the other indexes
        (that was ~340 ms of a capture at 100,000 files). Kept as written (Written), decoded with the rest."""
        self._written.append(Written(pack_id, size, records, at))
        self._loaded[pack_id] = size

    def shed_written(self) -> None:
        """Let go of the packs this process wrote as they are held (Written): their indexes are read again from disk
        and searched by bytes until decoded, as another process finds them (~20 MB at 100,000 blobs, measured)."""
        if self._written:
            self.forget({w.pack_id for w in self._written})
            self.refresh()

    def _add(self, blob: bytes, loc: Location) -> None:
        first = self._locations.setdefault(blob, loc)
        if first != loc and loc not in self.alternates.get(blob, ()):
            self.alternates.setdefault(blob, []).append(loc)

    def _find(self, blob: bytes) -> Location | None:
        """The blob's location: in a pack this process wrote (the newest first), decoded, or searched for in the indexes
        not decoded yet."""
        for pack in reversed(self._written):
            loc = pack.location(blob)
            if loc is not None:
                return loc  # not kept in the map: the copies it would hide are kept once everything is decoded
        loc = self._locations.get(blob)
        if loc is not None or not self._lazy:
            return loc
        if self._searches >= LAZY_LOOKUPS:
            self._decode_all()
            return self._locations.get(blob)
        self._searches += 1
        for pack_id, (data, size) in self._lazy.items():
            try:
                loc = search_index(pack_id, data, size, blob)
            except CorruptStore:
                self._decode_all()  # that index is damaged: decoded, it is set aside as before
                return self._locations.get(blob)
            if loc is not None:
                self._locations[blob] = loc
                return loc
        return None

    def check(self, blob: bytes, keep: int = 0) -> bytes | None:
        """Make sure the blob reads back intact, switching to an intact copy if the first is damaged; its verified
        bytes are returned when it is at most `keep` long (so a caller about to write it need not read it again)."""
        first = self.locate(blob)
        try:
            return self._read_through(blob, keep)
        except CorruptStore as exc:
            failure = exc
        self._decode_all()  # its other copies, if any
        for loc in self.alternates.get(blob, []):
            if loc == first:
                continue
            self._locations[blob] = loc
            try:
                return self._read_through(blob, keep)
            except CorruptStore:
                pass
        self._locations[blob] = first
        raise failure

    def _read_through(self, blob: bytes, keep: int) -> bytes | None:
        """Read a blob to its end (its hash checked there); its bytes if it is at most `keep` long."""
        kept: list[bytes] | None = [] if self.locate(blob).raw_len <= keep else None
        for chunk in self.stream(blob):
            if kept is not None:
                kept.append(chunk)
        return None if kept is None else b"".join(kept)

    def load_pack(self, pack_id: str) -> PackInfo:
        """Read one pack's index, checking it against the pack's size."""
        path = str(self.packs_dir / f"{pack_id}.idx")
        info: PackInfo = read_pack_index(path)
        return info

    def pack_entries(self, pack_id: str) -> tuple[int, IndexEntries]:
        """`load_pack`'s size and entries, checked the same way, decoded only as they are walked (IndexEntries)."""
        _pid, data, size = read_index_bytes(str(self.packs_dir / f"{pack_id}.idx"))
        return size, IndexEntries(pack_id, data, size)

    def __contains__(self, blob: bytes) -> bool:
        # Asked once per file a capture reads (100,000 in a cold capture): the decoded map first, as before.
        if blob in self._locations:
            return True
        if self._written:
            name = blob.hex()
            for pack in self._written:
                if name in pack.at:
                    return True
        return bool(self._lazy) and self._find(blob) is not None

    def has_named(self, name: str) -> bool:
        """`in`, asked by the blob's hex id (what a pack writer keys its blobs by)."""
        for pack in self._written:
            if name in pack.at:
                return True
        if not self._locations and not self._lazy:
            return False  # nothing else to ask (a new store's first capture): no bytes made for the id
        blob = bytes.fromhex(name)
        return blob in self._locations or (bool(self._lazy) and self._find(blob) is not None)

    def locate(self, blob: bytes) -> Location:
        """Find a blob, re-reading indexes once in case another process just wrote it."""
        loc = self._find(blob)
        if loc is None:
            self.refresh()
            loc = self._find(blob)
        if loc is None:
            hint = " (some pack indexes are damaged: run `codexr snapshots verify`)" if self._damaged else ""
            raise MissingBlob(f"blob {blob.hex()} is missing from the store{hint}")
        return loc

    def _fd(self, pack_id: str) -> int:
        fd = self._fds.get(pack_id)
        if fd is None:
            try:
                fd = os.open(self.packs_dir / f"{pack_id}.pack", os.O_RDONLY)
            except FileNotFoundError as exc:
                raise MissingBlob(f"pack {pack_id} is missing from the store") from exc
            self._fds[pack_id] = fd
        return fd

    def read(self, blob: bytes) -> bytes:
        """Return a blob's bytes after checking they hash to its id."""
        loc = self.locate(blob)
        stored = os.pread(self._fd(loc.pack), loc.stored_len, loc.offset)
        if len(stored) != loc.stored_len:
            raise CorruptStore(f"blob {blob.hex()} is truncated in pack {loc.pack}")
        try:
            raw = self._dctx.decompress(stored, max_output_size=loc.raw_len) if loc.codec else stored
        except zstandard.ZstdError as exc:
            raise CorruptStore(f"blob {blob.hex()} in pack {loc.pack} does not decompress") from exc
        if len(raw) != loc.raw_len or blake3.blake3(raw).digest() != blob:
            raise CorruptStore(f"blob {blob.hex()} in pack {loc.pack} does not match its hash")
        return raw

    def stream(self, blob: bytes) -> Iterator[bytes]:
        """Yield a blob's bytes in chunks of at most CHUNK; raise CorruptStore at the end if the hash is wrong.

        Memory stays bounded whatever the blob: a 1 MiB zstd piece of zeros expands to gigabytes,
        so decompression is pulled through a bounded reader (at most CHUNK out per step), never
        fed piece by piece to an unbounded decompressobj. Callers must not commit what they wrote
        until the iterator is exhausted.
        """
        loc = self.locate(blob)
        if loc.raw_len <= STREAM_THRESHOLD:
            yield self.read(blob)
            return
        src = _PackRange(self._fd(loc.pack), loc.offset, loc.offset + loc.stored_len,
                         f"blob {blob.hex()} is truncated in pack {loc.pack}")
        hasher = blake3.blake3()
        total = 0
        pieces: Iterator[bytes]
        if loc.codec == CODEC_ZSTD:
            pieces = self._dctx.read_to_iter(cast(BinaryIO, src), read_size=CHUNK, write_size=CHUNK)
        else:
            pieces = iter(lambda: src.read(CHUNK), b"")
        try:
            for out in pieces:
                total += len(out)
                if total > loc.raw_len:
                    break  # longer than the index says: damaged, and never worth buffering
                hasher.update(out)
                yield out
        except zstandard.ZstdError as exc:
            raise CorruptStore(f"blob {blob.hex()} in pack {loc.pack} does not decompress") from exc
        if total != loc.raw_len or hasher.digest() != blob:
            raise CorruptStore(f"blob {blob.hex()} in pack {loc.pack} does not match its hash")

    def forget(self, pack_ids: AbstractSet[str]) -> None:
        """Drop packs (after gc removed them) from memory."""
        for pack_id in pack_ids:
            fd = self._fds.pop(pack_id, None)
            if fd is not None:
                os.close(fd)
            self._loaded.pop(pack_id, None)
            self._lazy.pop(pack_id, None)
        self._written = [w for w in self._written if w.pack_id not in pack_ids]
        self._locations = {b: loc for b, loc in self._locations.items() if loc.pack not in pack_ids}
        alternates = {b: [loc for loc in locs if loc.pack not in pack_ids] for b, locs in self.alternates.items()}
        for b, locs in alternates.items():
            if b not in self._locations and locs:
                self._locations[b] = locs.pop(0)
        self.alternates = {b: locs for b, locs in alternates.items() if locs}

    def close(self) -> None:
        """Release open pack file descriptors."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


class _PackRange:
    """A file-like view of bytes [start, end) of a pack, read with pread (for the zstd stream reader)."""

    def __init__(self, fd: int, start: int, end: int, truncated: str) -> None:
        self.fd, self.pos, self.end, self.truncated = fd, start, end, truncated

    def read(self, size: int = -1) -> bytes:
        """Up to `size` bytes (CHUNK when unbounded); b"" at the end of the range."""
        want = self.end - self.pos if size < 0 else min(size, self.end - self.pos)
        if want <= 0:
            return b""
        piece = os.pread(self.fd, min(want, CHUNK), self.pos)
        if not piece:
            raise CorruptStore(self.truncated)
        self.pos += len(piece)
        return piece


class PackWriter:
    """Appends new blobs to a temporary pack; `commit` makes pack and index durable."""

    def __init__(self, index: BlobIndex | Callable[[], BlobIndex], packs_dir: Path | None = None) -> None:
        # A callable is asked for the index only when a blob is added or looked up: a capture that finds nothing to
        # read never loads every pack index (a large part of an unchanged capture of a large store, bench/scale.py).
        if isinstance(index, BlobIndex):
            self._index: BlobIndex | None = index
            self.dir = index.packs_dir
        else:
            if packs_dir is None:
                raise ValueError("a lazily loaded index needs its packs directory")
            self._index, self._load_index = None, index
            self.dir = packs_dir
        self._cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)  # used only by the compression worker
        self._stream_cctx = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
        self._file: BinaryIO | None = None
        self._tmp: Path | None = None
        # The open pack's blobs (the number of each one's record) and its index's records (IDX_ENTRY), as written. A
        # blob is named by its hex id, the string a capture's map holds for it (`add_named`): the id as bytes too was
        # ~8 MB of the cold 100,000-file capture's peak (measured).
        self._pending: dict[str, int] = {}
        self._records = bytearray()
        self._batch: list[tuple[bytes, str, bytes]] = []
        self._batch_bytes = 0
        self._in_flight = 0  # raw bytes added and not yet written to the pack
        self.most_in_flight = 0  # the most there ever were (IN_FLIGHT_MAX bounds it)
        self._queued: set[str] = set()
        self._batches: list[concurrent.futures.Future[list[tuple[bytes, str, int, int, bytes]]]] = []
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pack_id = ""
        self.bytes_stored = 0
        self._sealed: list[dict[str, int]] = []  # the blobs of each pack this writer sealed

    @property
    def index(self) -> BlobIndex:
        """Every stored blob's location (loaded at the first question)."""
        if self._index is None:
            self._index = self._load_index()
        return self._index

    def load_index(self) -> None:
        """Load the blob index now rather than at the first blob (a caller about to hold many fds)."""
        _ = self.index

    def _open(self) -> BinaryIO:
        if self._file is None:
            self._pack_id = new_pack_id()
            self._tmp = self.dir / f"{tmp_name()}.pack"
            self._file = open(self._tmp, "xb")  # noqa: SIM115 - closed in commit/abort
            self._file.write(PACK_MAGIC)
        return self._file

    @property
    def stored(self) -> frozenset[bytes]:
        """The blobs this writer committed (freshly written, so known intact), gathered when asked: a one-shot capture
        that only reports counts never holds a set of them (~4 MB at 100,000 blobs)."""
        return frozenset(bytes.fromhex(name) for names in self._sealed for name in names)

    def forget_stored(self) -> None:
        """The caller will not ask `stored` (a capture that reports counts only): the sealed packs' blob names and
        record numbers go (~3 MB of ints and two tables at 100,000 blobs); `stored` is empty from here."""
        self._sealed = []

    def _record(self, blob: bytes, name: str, codec: int, offset: int, stored_len: int, raw_len: int) -> None:
        """The blob is in the open pack: its index record, and its number."""
        self._pending[name] = len(self._pending)
        self._records += IDX_ENTRY.pack(blob, codec, offset, stored_len, raw_len)

    def has(self, blob: bytes) -> bool:
        """True when the blob is stored or already pending in this writer."""
        return self.has_named(blob.hex())

    def has_named(self, name: str) -> bool:
        """`has`, asked by the blob's hex id."""
        return name in self._pending or name in self._queued or self.index.has_named(name)

    def _compress(self, batch: list[tuple[bytes, str, bytes]]) -> list[tuple[bytes, str, int, int, bytes]]:
        """Runs on the worker thread (zstd releases the GIL, so reading and hashing go on meanwhile)."""
        out = []
        for blob, name, data in batch:
            codec, stored = CODEC_RAW, data
            if len(data) >= 128:
                packed = self._cctx.compress(data)
                if len(packed) < len(data) * 0.9:
                    codec, stored = CODEC_ZSTD, packed
            out.append((blob, name, codec, len(data), stored))
        return out

    def add(self, data: bytes, *, force: bool = False) -> bytes:
        """Store `data` unless it is already present (or `force`, for repacking); return its id."""
        return self._add(data, force)[0]

    def add_named(self, data: bytes) -> str:
        """`add`, returning the blob's hex id: the string the writer keeps, for the caller's map to share."""
        return self._add(data, False)[1]

    def _add(self, data: bytes, force: bool) -> tuple[bytes, str]:
        blob = blake3.blake3(data).digest()
        name = blob.hex()
        if name in self._pending or name in self._queued or (not force and self.index.has_named(name)):
            return blob, name
        self._queued.add(name)
        self._batch.append((blob, name, data))
        self._batch_bytes += len(data)
        self._in_flight += len(data)
        self.most_in_flight = max(self.most_in_flight, self._in_flight)
        if self._batch_bytes >= BATCH_BYTES or len(self._batch) >= BATCH_FILES:
            self._submit()
        return blob, name

    def _submit(self) -> None:
        """Hand the current batch to the compression worker; keep at most a few batches in flight."""
        if not self._batch:
            return
        if self._pool is None:
            import concurrent.futures  # here, not at import: with logging it costs every command ~10 ms

            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="codexr-pack")
        self._batches.append(self._pool.submit(self._compress, self._batch))
        self._batch, self._batch_bytes = [], 0
        if len(self._batches) > MAX_BATCHES:
            self._drain(keep=MAX_BATCHES - 1)

    def _drain(self, keep: int = 0) -> None:
        """Write compressed batches to the pack in submission order, leaving the newest `keep` in flight."""
        if keep == 0:
            self._submit()
        while len(self._batches) > keep:
            for blob, name, codec, raw_len, stored in self._batches.pop(0).result():
                self._queued.discard(name)
                self._in_flight -= raw_len
                f = self._open()
                f.write(RECORD.pack(blob, codec, len(stored), raw_len))
                offset = f.tell()
                f.write(stored)
                self._record(blob, name, codec, offset, len(stored), raw_len)
                self.bytes_stored += len(stored)
                self._maybe_rotate()

    def add_stream(self, src: BinaryIO, *, force: bool = False) -> tuple[bytes, int]:
        """Store a file's content read in chunks (never whole in memory); return (id, raw length).

        `force` stores it even when the index already has the blob (a copy found damaged).
        """
        blob, _name, raw_len = self._add_stream(src, force)
        return blob, raw_len

    def add_stream_named(self, src: BinaryIO) -> tuple[str, int]:
        """`add_stream`, returning the blob's hex id (as `add_named`)."""
        _blob, name, raw_len = self._add_stream(src, False)
        return name, raw_len

    def _add_stream(self, src: BinaryIO, force: bool) -> tuple[bytes, str, int]:
        self._drain()
        f = self._open()
        start = f.tell()
        f.write(b"\0" * RECORD.size)
        offset = f.tell()
        hasher = blake3.blake3()
        cobj = self._stream_cctx.compressobj()
        raw_len = 0
        while True:
            chunk = src.read(CHUNK)
            if not chunk:
                break
            raw_len += len(chunk)
            hasher.update(chunk)
            f.write(cobj.compress(chunk))
        f.write(cobj.flush())
        end = f.tell()
        blob = hasher.digest()
        name = blob.hex()
        if name in self._pending or name in self._queued or (not force and self.index.has_named(name)):
            f.seek(start)
            f.truncate()
            return blob, name, raw_len
        f.seek(start)
        f.write(RECORD.pack(blob, CODEC_ZSTD, end - offset, raw_len))
        f.seek(end)
        self._record(blob, name, CODEC_ZSTD, offset, end - offset, raw_len)
        self.bytes_stored += end - offset
        self._maybe_rotate()
        return blob, name, raw_len

    def _maybe_rotate(self) -> None:
        if self._file is not None and self._file.tell() >= PACK_TARGET_BYTES:
            self._finish()

    def _finish(self) -> None:
        """Seal the current pack: fsync, rename into place, write its index."""
        f, tmp = self._file, self._tmp
        if f is None or tmp is None:
            return
        self._file = self._tmp = None
        pending, records = self._pending, self._records
        try:
            if not pending:
                f.close()
                tmp.unlink()
                return
            f.flush()
            durable(f.fileno())
            size = f.tell()
            f.close()
            final = self.dir / f"{self._pack_id}.pack"
            os.replace(tmp, final)
            try:
                atomic_write_parts(self.dir / f"{self._pack_id}.idx", index_parts(records, len(pending)), sync=True)
            except BaseException:
                with contextlib.suppress(OSError):
                    final.unlink()  # a pack nobody can find would only waste space
                raise
        except BaseException:
            with contextlib.suppress(OSError):
                f.close()
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        self.index.add_written(self._pack_id, size, records, pending)
        self._sealed.append(pending)
        self._pending, self._records = {}, bytearray()

    def commit(self) -> None:
        """Make every blob added so far durable; must precede writing anything that names them."""
        try:
            self._drain()
        finally:
            self._stop_pool()
        # No directory fsync here: each pack sealed (`_finish`) had its rename made durable by its index's
        # atomic_write, which syncs the same directory after both renames (a second one was an fsync of every
        # changed capture, 5-20 ms under load, before the turn is sent).
        self._finish()

    def _stop_pool(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def abort(self) -> None:
        """Throw away blobs not yet committed."""
        self._stop_pool()
        self._queued.clear()
        self._batches.clear()
        self._batch, self._batch_bytes, self._in_flight = [], 0, 0
        f, tmp = self._file, self._tmp
        self._file = self._tmp = None
        self._pending, self._records = {}, bytearray()
        if f is not None:
            with contextlib.suppress(OSError):
                f.close()
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.unlink()


# ----------------------------------------------------------------------------- reading a pack without its index


@record
class PackScan:
    """What a pack's own records say: the blobs that verify, and where it stops making sense."""

    pack_id: str
    size: int
    magic_ok: bool
    entries: list[tuple[bytes, Location]]
    damage: list[str]  # one line per damaged record or unreadable region

    @property
    def complete(self) -> bool:
        """Every byte of the pack belongs to a record whose content verifies."""
        return self.magic_ok and not self.damage


def record_ok(dctx: zstandard.ZstdDecompressor, fd: int, blob: bytes, loc: Location) -> bool:
    """Read one record's data in chunks and check it hashes to its id (never whole in memory).

    A zstd frame must also end exactly where the record does (a decoder stops at a damaged
    last-block flag or ignores trailing bytes): its length is walked block header by block header,
    and the output is pulled at most CHUNK bytes at a time (a piece of zeros inflates a thousandfold).
    """
    src = _PackRange(fd, loc.offset, loc.offset + loc.stored_len, "truncated")
    pieces: Iterator[bytes]
    if loc.codec == CODEC_ZSTD:
        head = os.pread(fd, min(ZSTD_MAX_HEADER, loc.stored_len), loc.offset)
        if len(head) < 5 or head[4] & ZSTD_FHD_MUST_BE_ZERO:
            return False  # a decoder ignores the unused frame-header bit: check it here
        if _frame_length(fd, loc, head) != loc.stored_len:
            return False
        pieces = dctx.read_to_iter(cast(BinaryIO, src), read_size=CHUNK, write_size=CHUNK)
    else:
        pieces = iter(lambda: src.read(CHUNK), b"")
    hasher = blake3.blake3()
    total = 0
    try:
        for out in pieces:
            total += len(out)
            if total > loc.raw_len:
                return False
            hasher.update(out)
    except (zstandard.ZstdError, CorruptStore):
        return False
    return total == loc.raw_len and hasher.digest() == blob


ZSTD_MAX_HEADER = 18  # magic (4) + the largest frame header (14)


def _frame_length(fd: int, loc: Location, head: bytes) -> int | None:
    """The compressed length of the zstd frame starting the record, from its block headers (None if damaged)."""
    try:
        pos = loc.offset + zstandard.frame_header_size(head)
        checksum = zstandard.get_frame_parameters(head).has_checksum
    except zstandard.ZstdError:
        return None
    end = loc.offset + loc.stored_len
    while True:
        raw = os.pread(fd, 3, pos)
        if len(raw) < 3 or pos + 3 > end:
            return None
        header = int.from_bytes(raw, "little")
        kind, size = (header >> 1) & 3, header >> 3
        if kind == 3:
            return None  # reserved block type
        pos += 3 + (1 if kind == 1 else size)  # an RLE block holds one byte
        if pos > end:
            return None
        if header & 1:  # the last block
            break
    return pos + (4 if checksum else 0) - loc.offset


def scan_pack(packs_dir: Path, pack_id: str) -> PackScan:
    """Parse a pack record by record, verifying each record's content hash (to rebuild its index).

    Records tile the pack from the magic to its end; parsing stops at the first header that runs
    past the end or names an unknown codec, since nothing after it can be located.
    """
    path = packs_dir / f"{pack_id}.pack"
    dctx = zstandard.ZstdDecompressor()
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        scan = PackScan(pack_id, size, os.pread(fd, len(PACK_MAGIC), 0) == PACK_MAGIC, [], [])
        if not scan.magic_ok:
            scan.damage.append(f"pack {pack_id} does not start with {PACK_MAGIC!r}")
        pos = len(PACK_MAGIC)
        while pos < size:
            head = os.pread(fd, RECORD.size, pos)
            if len(head) < RECORD.size:
                scan.damage.append(f"pack {pack_id}: {size - pos} trailing bytes at offset {pos} are no record")
                break
            blob, codec, stored, raw = RECORD.unpack(head)
            data_at = pos + RECORD.size
            bad = codec not in (CODEC_RAW, CODEC_ZSTD) or (codec == CODEC_RAW and stored != raw)
            if bad or data_at + stored > size:
                scan.damage.append(f"pack {pack_id}: record header at offset {pos} is damaged; "
                                   f"{size - pos} bytes from there cannot be parsed")
                break
            loc = Location(pack_id, codec, data_at, stored, raw)
            if record_ok(dctx, fd, blob, loc):
                scan.entries.append((blob, loc))
            else:
                scan.damage.append(f"pack {pack_id}: record at offset {pos} (blob {blob.hex()}) "
                                   "does not match its hash")
            pos = data_at + stored
    finally:
        os.close(fd)
    return scan


def write_index(packs_dir: Path, pack_id: str, entries: list[tuple[bytes, Location]]) -> None:
    """Write (or replace) a pack's index durably; the pack itself is never changed."""
    atomic_write(packs_dir / f"{pack_id}.idx", encode_index(entries), sync=True)


def check_headers(packs_dir: Path, pack_id: str, entries: list[tuple[bytes, Location]]) -> list[str]:
    """Cross-check a pack's magic and every record header against its index; one line per mismatch.

    The index's records must tile the pack exactly (magic, then header + data, ..., end of file),
    so no byte of a pack is outside a record the index names.
    """
    problems: list[str] = []
    fd = os.open(packs_dir / f"{pack_id}.pack", os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        if os.pread(fd, len(PACK_MAGIC), 0) != PACK_MAGIC:
            problems.append(f"pack {pack_id} does not start with {PACK_MAGIC!r} (damaged magic)")
        pos = len(PACK_MAGIC)
        for blob, loc in sorted(entries, key=lambda e: e[1].offset):
            start = loc.offset - RECORD.size
            if start != pos:
                problems.append(f"pack {pack_id}: index entry for blob {blob.hex()} is at offset {loc.offset}, "
                                f"but the previous record ends at {pos}")
                pos = max(pos, loc.offset + loc.stored_len)
                continue
            head = os.pread(fd, RECORD.size, start)
            want = RECORD.pack(blob, loc.codec, loc.stored_len, loc.raw_len)
            if head != want:
                problems.append(f"pack {pack_id}: record header at offset {start} (blob {blob.hex()}) "
                                "does not match the pack index")
            pos = loc.offset + loc.stored_len
        if pos != size:
            problems.append(f"pack {pack_id}: bytes {pos}..{size} are not named by its index")
    finally:
        os.close(fd)
    return problems
