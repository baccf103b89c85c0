"""Snapshot manifests: a map path -> entry, stored as a delta against a parent snapshot.

Entry kinds (named tuples, compared by value like the plain tuples they encode as):
  FileEntry("f", mode, size, blob_hex)  regular file captured
  LinkEntry("l", target)                symlink captured (as a link, never followed)
  ListedDir("d")                        directory whose complete listing was seen: every child is in the map
  UnlistedDir("D", reason)              directory seen but not descended (churn, hidden, ignored, unreadable)
  SkippedEntry("x", reason)             path seen present but not captured (budget, size, ignored, hidden...)
  AbsentEntry("-")                      path looked at directly and found absent (tombstone)
The root directory is the key "". On disk each entry is the JSON list of its fields (FORMAT.md §3).
"""

from __future__ import annotations

import contextlib
import json
import operator
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import zstandard

from .collector import held_off
from .errors import CorruptStore
from .records import NamedTuple, field, record

if TYPE_CHECKING:  # typing.TypeIs is Python 3.13+; only the type checker needs it
    from typing_extensions import TypeIs

FORMAT_VERSION = 1
REBASE_DEPTH = 64
ENCODE_SLICE = 2048  # entries encoded to JSON at a time (SnapshotRecord.encode)



class FileEntry(NamedTuple):
    """A regular file captured: its permission bits, size and content's blob id."""

    kind: Literal["f"]
    mode: int
    size: int
    blob: str


class LinkEntry(NamedTuple):
    """A symlink captured as a link (never followed)."""

    kind: Literal["l"]
    target: str


class ListedDir(NamedTuple):
    """A directory whose complete listing was seen: a child missing from the map was absent."""

    kind: Literal["d"]


class UnlistedDir(NamedTuple):
    """A directory seen but not entered, and why (a reasons.Reason value or an unreadable text)."""

    kind: Literal["D"]
    reason: str


class SkippedEntry(NamedTuple):
    """A path seen present but not captured, and why (restores decide by the reason code)."""

    kind: Literal["x"]
    reason: str


class AbsentEntry(NamedTuple):
    """A path looked at directly and found absent (a tombstone)."""

    kind: Literal["-"]


Entry = FileEntry | LinkEntry | ListedDir | UnlistedDir | SkippedEntry | AbsentEntry
FileMap = dict[str, Entry]

ABSENT = AbsentEntry("-")
WALKED = ListedDir("d")
CAPTURED_KINDS = frozenset({"f", "l"})


def is_captured(entry: Entry | None) -> TypeIs[FileEntry | LinkEntry]:
    """A file or symlink whose content the snapshot holds."""
    return entry is not None and entry.kind in CAPTURED_KINDS


def parent_of(path: str) -> str:
    """The parent key of a relative path ('' is the root)."""
    cut = path.rfind("/")
    return path[:cut] if cut >= 0 else ""


def witnessed_absent(files: Mapping[str, Entry], path: str) -> bool:
    """True only if the snapshot looked at exactly this location and found nothing there.

    Either a tombstone names the path, or the nearest ancestor the snapshot knows about was
    fully listed without this child, or was a file, symlink or tombstone itself.
    """
    entry = files.get(path)
    if entry is not None:
        return entry.kind == "-"
    current = path
    while current:
        ancestor = parent_of(current)
        anc = files.get(ancestor)
        if anc is not None:
            return anc.kind in ("d", "f", "l", "-")
        current = ancestor
    return False


def _document(data: bytes) -> bytes:
    """A snapshot file's JSON text (raises zstandard.ZstdError when it is no zstd frame)."""
    return zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 31)


@contextlib.contextmanager
def _parsing(snap_id: str) -> Iterator[None]:
    """What a damaged or forged snapshot file raises while it is parsed, as CorruptStore naming it."""
    try:
        yield
    except CorruptStore:
        raise
    except (zstandard.ZstdError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CorruptStore(f"snapshot {snap_id} cannot be parsed: {exc}") from exc


@record(frozen=True)
class SnapshotHead:
    """A snapshot file's metadata without its map: what a caller that asks a snapshot's depth, root, kind or meta
    needs (decoding the whole record of a 100,000-file snapshot to learn its depth was 0.68 s of every unchanged
    pre-turn capture whose parent was written whole; the head alone ~20 ms, issue 35)."""

    root: str
    created: float
    kind: str
    label: str | None
    parent: str | None
    depth: int
    meta: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, doc: Mapping[str, Any], snap_id: str) -> SnapshotHead:
        """The head of a decoded document, checked as a record's is."""
        if doc.get("format") != FORMAT_VERSION:
            raise CorruptStore(f"snapshot {snap_id} has unknown format {doc.get('format')!r}")
        parent = doc["parent"]
        if parent is not None and not (isinstance(parent, str) and _HEX64.fullmatch(parent)):
            raise ValueError(f"bad parent {parent!r}")
        return cls(root=str(doc["root"]), created=float(doc["created"]), kind=str(doc["kind"]), label=doc["label"],
                   parent=parent, depth=int(doc["depth"]), meta=dict(doc.get("meta") or {}))

    @classmethod
    def decode(cls, snap_id: str, data: bytes) -> SnapshotHead:
        """The head of a snapshot file, its map left unparsed."""
        with _parsing(snap_id):
            raw = _document(data)
            return cls.of(json.loads(b"{" + raw[_map_end(raw) + 2:], object_pairs_hook=_unique_keys), snap_id)


_MAP_START = b'{"changes":{'


def _map_end(raw: bytes) -> int:
    """Where a snapshot document's map closes: the canonical encoding puts "changes" first and its values are lists
    or null, so the first `},"created":` closes the map (inside a string that `"` would be escaped)."""
    if not raw.startswith(_MAP_START):
        raise ValueError("not a snapshot document")
    end = raw.find(b'},"created":')
    if end < 0:
        raise ValueError("no end of the map")
    return end


def _value_at(raw: bytes, at: int, end: int, scan: Callable[[str], tuple[Any, int]]) -> Any:
    """The JSON value (an entry's list, or null) that starts at `at` in the map, which ends at `end`: decoded from a
    window that widens until the value is whole in it (a value cut short never parses: it is a list or null)."""
    width = 512
    while True:
        try:
            return scan(raw[at:min(end, at + width)].decode("ascii"))[0]
        except ValueError:
            if at + width >= end:
                raise
            width *= 8


def look_up(snap_id: str, data: bytes, paths: Iterable[str]) -> tuple[SnapshotHead, dict[str, Entry | None]]:
    """A snapshot file's head and what its map says of `paths`, the map left undecoded: {path: entry, or None where
    the record removes it}; a path it does not name is left out (a delta leaves it as the parent has it).

    Each key is found by its canonical text (`json.dumps` of the path, as `SnapshotRecord.encode` writes it) right
    after the map's `{` or an entry's `,`: outside strings, since a `"` inside one is escaped, and never inside an
    entry, whose lists hold no objects. A key named twice is damage, as in a full decode. Checked as a full decode
    checks what it reads (`parse_entry`, `valid_key`); what it does not read is not checked (FORMAT.md §3: a reader
    may look up keys so). Decoding a 100,000-entry record whole was ~0.3 s of every capture after a file changed,
    for the few entries it needs (issue 35)."""
    with _parsing(snap_id):
        raw = _document(data)
        end = _map_end(raw)
        head = SnapshotHead.of(json.loads(b"{" + raw[end + 2:], object_pairs_hook=_unique_keys), snap_id)
        # Searched as bytes (the text is ASCII): the map sliced and decoded to a str first was a copy of ~14 MB and
        # 9-24 ms of a 46-72 ms look-up in the 100,000-entry record (its decompression ~23-46 ms stays).
        first = len(_MAP_START)  # the first key, right after the map's "{"
        found: dict[str, Entry | None] = {}
        scan = json.JSONDecoder().raw_decode
        for path in paths:
            key = json.dumps(path).encode("ascii") + b":"
            at = first if raw.startswith(key, first) else raw.find(b"," + key, first, end) + 1
            if at == 0:
                continue
            if raw.find(b"," + key, at, end) >= 0:
                raise ValueError("duplicate key")
            value = _value_at(raw, at + len(key), end, scan)
            entry = parse_entry(value) if value is not None else None
            if not (valid_key(path) or (_is_git_dir(path) and (entry is None or entry.kind == "D"))):
                raise ValueError(f"bad path {path!r}")
            found[path] = entry
        return head, found


@record
class SnapshotRecord:
    """One snapshot file's content: metadata plus a delta against `parent` (or a full map)."""

    root: str
    created: float
    kind: str
    label: str | None
    parent: str | None
    depth: int
    changes: dict[str, Entry | None]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def head(self) -> SnapshotHead:
        """Its metadata, as `SnapshotHead.decode` reads it from the file."""
        return SnapshotHead(self.root, self.created, self.kind, self.label, self.parent, self.depth, dict(self.meta))

    def encode(self) -> bytes:
        """Canonical bytes: sorted keys so equal content gets an equal id."""
        doc = {
            "format": FORMAT_VERSION,
            "root": self.root,
            "created": self.created,
            "kind": self.kind,
            "label": self.label,
            "parent": self.parent,
            "depth": self.depth,
            "meta": self.meta,
        }
        rest = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("ascii")
        # The JSON of the whole document with sorted keys ("changes" sorts first), made slice by slice: encoding a
        # 100,000-entry map at once held a list per entry, two sorted copies and the text both as str and bytes
        # (~50 MB above the map in the cold capture of 100,000 files); the bytes are the same. Appended to one
        # buffer as made: a list of the slices joined at the end held the text twice (~14 MB more at 100,000).
        raw = bytearray(b'{"changes":{')
        paths = sorted(self.changes)
        for at in range(0, len(paths), ENCODE_SLICE):
            part = {k: (list(v) if (v := self.changes[k]) is not None else None) for k in paths[at:at + ENCODE_SLICE]}
            if at:
                raw += b","
            raw += json.dumps(part, separators=(",", ":"), sort_keys=True)[1:-1].encode("ascii")
        del paths
        raw += b"},"
        raw += rest[1:]
        return zstandard.ZstdCompressor(level=9).compress(raw)

    @classmethod
    def decode(cls, snap_id: str, data: bytes) -> SnapshotRecord:
        """Parse a snapshot file, raising CorruptStore with its id on any problem."""
        with _parsing(snap_id), held_off():
            doc = json.loads(_document(data), object_pairs_hook=_unique_keys)
            head = SnapshotHead.of(doc, snap_id)
            changes: dict[str, Entry | None] = {}
            for k, v in doc["changes"].items():
                entry = parse_entry(v) if v is not None else None
                if not (valid_key(k) or (_is_git_dir(k) and (entry is None or entry.kind == "D"))):
                    raise ValueError(f"bad path {k!r}")
                changes[k] = entry
            return cls(root=head.root, created=head.created, kind=head.kind, label=head.label, parent=head.parent,
                       depth=head.depth, changes=changes, meta=head.meta)


_KINDS: dict[str, type[Entry]] = {"f": FileEntry, "l": LinkEntry, "d": ListedDir, "D": UnlistedDir,
                                  "x": SkippedEntry, "-": AbsentEntry}
_ARITY = {kind: len(cls._fields) for kind, cls in _KINDS.items()}
_HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_FILE_SIZE = 1 << 50  # 1 PiB: a larger size is a damaged or forged entry, not a file


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object with a key given twice is damage (which one would a reader believe?)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        raise ValueError("duplicate key")
    return out


def _is_git_dir(path: str) -> bool:
    """A `.git` directory is recorded (as seen, never entered); nothing below it ever is."""
    parent, _, name = path.rpartition("/")
    return name == ".git" and valid_key(parent)


# `.git` in any letter case: macOS and Windows file systems are case-insensitive.
_FORBIDDEN = re.compile(r"(?:^|/)(?:\.{1,2}|\.git)?(?:/|$)", re.IGNORECASE)


def forbidden(rel: str) -> bool:
    """Paths the store never reads or writes: anything inside a `.git`, and malformed names."""
    # Only a path with an empty component or one starting with "." can match; the substring tests decide the
    # common case without the regex (every key of every manifest a capture decodes passes here: 11,000 keys
    # took 52-115 ms through the regex and an import per call, 10-20 ms now; measured on 11,000 paths).
    if rel and rel[0] not in "./" and rel[-1] != "/" and "/." not in rel and "//" not in rel:
        return False
    return _FORBIDDEN.search(rel) is not None


def valid_key(path: str) -> bool:
    """A manifest key: the root "" or a clean relative path that never enters `.git` (no NUL)."""
    return path == "" or (not forbidden(path) and "\0" not in path)


_new_tuple = tuple.__new__  # ~20% of decoding an 11,000-file manifest went to namedtuple's generated __new__
_TYPES: dict[str, tuple[type, ...]] = {"f": (str, int, int, str), "l": (str, str), "D": (str, str), "x": (str, str)}


def entries_again(values: Iterable[Sequence[Any] | None]) -> list[Entry | None]:
    """Entries made again from their tuples as a checksummed cache of decoded ones holds them (not checked again)."""
    kinds, make = _KINDS, _new_tuple
    return [None if v is None else make(kinds[v[0]], v) for v in values]


def parse_entry(value: Any) -> Entry:
    """Check one serialized entry's shape and types; raise ValueError when it is malformed."""
    # The common case first, with the same checks as below spelled out (half the time per file entry).
    if type(value) is list and len(value) == 4 and value[0] == "f":
        _kind, mode, size, blob = value
        if (type(mode) is int and type(size) is int and type(blob) is str and 0 <= mode <= 0o7777
                and 0 <= size < MAX_FILE_SIZE and _HEX64.fullmatch(blob)):
            return _new_tuple(FileEntry, value)  # FileEntry("f", mode, size, blob) without its Python __new__
    if not isinstance(value, list) or not value or _ARITY.get(value[0]) != len(value):
        raise ValueError(f"bad entry {value!r}")
    types = _TYPES.get(value[0])
    if types is not None and not all(type(v) is t for v, t in zip(value, types, strict=True)):
        raise ValueError(f"bad entry {value!r}")
    if value[0] == "f" and not (0 <= value[1] <= 0o7777 and 0 <= value[2] < MAX_FILE_SIZE
                                and _HEX64.fullmatch(value[3])):
        raise ValueError(f"bad file entry {value!r}")
    if value[0] == "l" and (not value[1] or "\0" in value[1]):
        raise ValueError(f"bad symlink entry {value!r}")
    return _KINDS[value[0]]._make(value)


def delta(old: Mapping[str, Entry], new: Mapping[str, Entry], among: Iterable[str] | None = None
          ) -> dict[str, Entry | None]:
    """Changes turning `old` into `new` (None removes a key). `among`: the only keys where the two may differ, when
    the caller knows them (a session's fast path), so the other entries are not compared."""
    if among is not None:
        return {k: new.get(k) for k in among if old.get(k) != new.get(k)}
    changes: dict[str, Entry | None] = {k: v for k, v in new.items() if old.get(k) != v}
    for k in old.keys() - new.keys():
        changes[k] = None
    return changes


def apply_delta(base: FileMap, changes: Mapping[str, Entry | None]) -> None:
    """Apply `changes` to `base` in place (None: the path is gone). One `update` and a look for None in C: a loop
    assigning each entry was ~9 ms of a 100,000-entry record's replay, this ~3 ms."""
    base.update(changes)  # type: ignore[arg-type]  # the Nones go right below
    if None in changes.values():
        for k, v in changes.items():
            if v is None:
                del base[k]


def captured_paths(files: Mapping[str, Entry]) -> list[str]:
    """Paths of files and symlinks, in the map's order (one pass; `is_captured` per entry cost ~3x as much)."""
    return [p for p, e in files.items() if e.kind in CAPTURED_KINDS]


def count_captured(files: Mapping[str, Entry]) -> int:
    """How many files and symlinks (C-level: no Python call per entry)."""
    return sum(map(CAPTURED_KINDS.__contains__, map(_KIND, files.values())))


_KIND = operator.itemgetter(0)  # an entry's kind (its first field)


def captured_items(files: Mapping[str, Entry]) -> Iterator[tuple[str, Entry]]:
    """Files and symlinks, sorted by path."""
    for path in sorted(files):
        entry = files[path]
        if entry.kind in CAPTURED_KINDS:
            yield path, entry
