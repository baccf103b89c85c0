"""The repository: one directory holding packs, snapshot records, refs, caches and journals (FORMAT.md).

It reads and writes the store's own files and nothing else: what a workspace holds is the Capturer's business
(capture.py), what a restore does the Restorer's (restore/). Narrow views of it: repository/interfaces.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self, cast

from ..errors import AmbiguousSnapshot, CorruptStore, StoreError, UnknownSnapshot, UnsupportedFormat
from ..fsutil import append_locked, atomic_write, complete_lines, locked_for_append, translate_os_errors
from ..ids import digest_hex, is_snapshot_id, is_snapshot_prefix, workspace_key
from ..locks import flocked
from ..manifest import (
    REBASE_DEPTH,
    Entry,
    FileMap,
    SnapshotHead,
    SnapshotRecord,
    apply_delta,
    delta,
    is_captured,
    look_up,
)
from ..names import Folding, remembered
from ..roots import Identity, protected_identities, workspace_root
from ..vocab import UNLISTED_KINDS
from . import commits, mapcache
from .listing import SnapshotInfo
from .packs import BlobIndex, PackWriter, read_generation

if TYPE_CHECKING:
    from ..restore.journal import Recovery

STORE_FORMAT = "codex-rewind-snapshots"
STORE_VERSION = 1
REF_TAIL_BYTES = 16 * 1024  # `latest` parses only this much of a workspace's ref log
AUTO_GC_INTERVAL = 24 * 3600.0  # automatic gc at most this often
GC_MARKER = "gc.last"  # holds the time of the last automatic gc
CACHE_SAVE_INTERVAL = 60.0  # a watched (long-running) workspace saves its stat cache at most this often
LOOKUPS = 64  # `entries_at` searches records for at most this many paths; beyond, it decodes the map
NAMED_HOPS = 64  # `named_between` follows at most this many delta records (a turn adds one or two)
SUBDIRS = ("packs", "snapshots", "refs", "refs/workspaces", "cache", "journal", "locks")



def read_record(path: str) -> SnapshotRecord:
    """One snapshot file, verified: its name is the hash of its bytes."""
    return SnapshotRecord.decode(os.path.basename(path), read_verified(path))


def read_verified(path: str) -> bytes:
    """A snapshot file's bytes, checked against its name (the hash of its bytes)."""
    snap_id = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError as exc:
        raise UnknownSnapshot(f"no snapshot {snap_id}") from exc
    except OSError as exc:
        raise CorruptStore(f"snapshot {snap_id} cannot be read: {exc.strerror}") from exc
    if digest_hex(data) != snap_id:
        raise CorruptStore(f"snapshot {snap_id} does not match its hash (damaged file)")
    return data



class Repository:
    """A snapshot store at `path` (normally $CODEX_HOME/file_snapshots): its files, not what a workspace holds."""

    def __init__(self, path: Path, protected: tuple[Path, ...]) -> None:
        self.path = path
        self.protected = protected  # the store itself first, then Codex's home: never captured, restored into
        self.protected_ids: frozenset[Identity] = protected_identities(protected)
        self._blobs: BlobIndex | None = None  # loaded on first use: an unchanged capture needs no blob (~15-30 ms)
        self._generation = read_generation(path)  # gc's, while the blob index is not loaded
        self._maps: OrderedDict[str, FileMap] = OrderedDict()
        self._records: dict[str, SnapshotRecord] = {}
        self._heads: dict[str, SnapshotHead] = {}  # of snapshots whose map was not decoded
        # Told when a gc (by any process) may have freed what was learnt of the store before (the capturer's
        # journal state names blobs): see _fence.
        self.on_gc: list[Callable[[], None]] = []
        self._volatile: dict[str, SnapshotRecord] = {}  # unlisted snapshots of dry runs, never written
        # Told of every interrupted restore this store finishes or rolls back (a command prints it), and the
        # ones it did, in order: a recovery is never silent, whichever operation ran it.
        self.on_recovery: Callable[[Recovery], None] | None = None
        self.recoveries: list[Recovery] = []
        # Judges an interrupted *held* restore (restore/journal.py: one side of a change with two sides): True when
        # its other side happened. Without it such a restore is rolled back.
        self.on_held: Callable[[dict[str, Any]], bool] | None = None
        self.finished_commits: list[commits.Judged] = []  # interrupted captures this store finished or dropped
        self._folding: dict[str, Folding] = {}  # per workspace: how its volume folds names (names.py)

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = True,
             protected: Iterable[str | os.PathLike[str]] = ()) -> Self:
        """Open (and by default create) a store; refuse an unknown format version."""
        root = Path(os.path.abspath(path))
        fmt = root / "format"
        with translate_os_errors(f"snapshot store {root}"):
            if not fmt.exists():
                if not create:
                    raise StoreError(f"no snapshot store at {root}")
                if root.exists() and not root.is_dir():
                    raise StoreError(f"snapshot store {root} is not a directory")
                root.mkdir(parents=True, exist_ok=True)
                for sub in SUBDIRS:
                    (root / sub).mkdir(exist_ok=True)
                doc = {"format": STORE_FORMAT, "version": STORE_VERSION}
                atomic_write(fmt, json.dumps(doc).encode() + b"\n")
            else:
                try:
                    doc = json.loads(fmt.read_bytes())
                except ValueError as exc:
                    raise CorruptStore(f"snapshot store {root}: format file is damaged") from exc
                if not isinstance(doc, dict) or doc.get("format") != STORE_FORMAT:
                    raise CorruptStore(f"{root} is not a codex-rewind snapshot store")
                if doc.get("version") != STORE_VERSION:
                    raise UnsupportedFormat(
                        f"snapshot store {root} has format version {doc.get('version')}; "
                        f"this codexr reads version {STORE_VERSION}"
                    )
                for sub in SUBDIRS:
                    (root / sub).mkdir(exist_ok=True)
        prot = (root, *(Path(os.path.realpath(p)) for p in protected))
        return cls(root, prot)

    def close(self) -> None:
        """Release file descriptors."""
        if self._blobs is not None:
            self._blobs.close()

    def shed_written(self) -> None:
        """Let go of the packs this process wrote as the blob index holds them (BlobIndex.shed_written): a one-shot
        command done writing, before what it runs next (an automatic gc) loads its own."""
        if self._blobs is not None:
            self._blobs.shed_written()

    @property
    def blobs(self) -> BlobIndex:
        """Where every stored blob is (every pack index, loaded when first asked)."""
        if self._blobs is None:
            self._blobs = BlobIndex(self.path / "packs")
            if self._blobs.generation != self._generation:
                self._forget_cached()  # a gc ran since this store was opened
        return self._blobs

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ----------------------------------------------------------------- locks
    @contextlib.contextmanager
    def shared_lock(self) -> Iterator[None]:
        """Held by captures and restores so gc cannot sweep what they are about to reference.

        Whatever this process learnt about the store before a gc ran elsewhere is dropped here,
        under the lock: every later decision that a blob or snapshot exists is made afresh.
        """
        with flocked(self.path / "locks" / "store.lock", exclusive=False):
            self._fence()
            yield

    @contextlib.contextmanager
    def exclusive_lock(self, wait: bool = True) -> Iterator[None]:
        """Held by gc."""
        with flocked(self.path / "locks" / "store.lock", exclusive=True, wait=wait):
            self._fence()
            yield

    def _fence(self) -> None:
        """After a gc (by any process): forget cached blob locations, snapshots and journal state."""
        if self._blobs is not None:
            if not self._blobs.fence():
                return
        else:
            now = read_generation(self.path)
            if now == self._generation:
                return
            self._generation = now
        self._forget_cached()

    def _forget_cached(self) -> None:
        self._records.clear()
        self._heads.clear()
        self._maps.clear()
        for hook in self.on_gc:
            hook()

    def workspace_lock(self, root: Path, wait: bool = True) -> contextlib.AbstractContextManager[None]:
        """Serialises restores (and journal recovery) within one workspace."""
        return flocked(self.path / "locks" / f"{workspace_key(str(root))}.lock", exclusive=True,
                       wait=wait, what=f"workspace {root}")

    # ----------------------------------------------------------------- snapshots
    def _snapshot_path(self, snap_id: str) -> Path:
        if not is_snapshot_id(snap_id):
            raise UnknownSnapshot(f"{snap_id!r} is not a snapshot id")
        return self.path / "snapshots" / snap_id[:2] / snap_id

    def record(self, snap_id: str) -> SnapshotRecord:
        """Read one snapshot file, verifying its name is the hash of its bytes."""
        rec = self._records.get(snap_id) or self._volatile.get(snap_id)
        if rec is not None:
            return rec
        loaded = self._read_record(snap_id)
        self._records[snap_id] = loaded
        return loaded

    def _read_record(self, snap_id: str) -> SnapshotRecord:
        """One snapshot file, verified, and decoded or taken from its decoded copy (mapcache): the copy never stands in
        for a snapshot file that is gone or damaged, which is read and checked against its id all the same."""
        path = str(self._snapshot_path(snap_id))
        cache = self.path / "cache"
        data = read_verified(path)
        rec = mapcache.load(cache, snap_id)
        if rec is None:
            rec = SnapshotRecord.decode(snap_id, data)
            del data
            mapcache.save(cache, snap_id, rec)
        return rec

    def verify_file(self, snap_id: str) -> None:
        """Raise unless the snapshot's file is there and its bytes are its id (~5 ms for a 100,000-file record
        written whole, whose head alone is ~55 ms: the zstd frame is decompressed to its end)."""
        if snap_id in self._records or snap_id in self._heads or snap_id in self._volatile:
            return
        read_verified(str(self._snapshot_path(snap_id)))

    def head(self, snap_id: str) -> SnapshotHead:
        """One snapshot's metadata (depth, parent, root, kind, meta), its file verified but its map not decoded."""
        rec = self._records.get(snap_id) or self._volatile.get(snap_id)
        if rec is not None:
            return rec.head
        known = self._heads.get(snap_id)
        if known is not None:
            return known
        path = str(self._snapshot_path(snap_id))
        head = SnapshotHead.decode(snap_id, read_verified(path))
        self._heads[snap_id] = head
        return head

    def files(self, snap_id: str) -> FileMap:
        """The full path map of a snapshot, replaying its delta chain (cached; do not mutate)."""
        cached = self._maps.get(snap_id)
        if cached is not None:
            self._maps.move_to_end(snap_id)
            return cached
        files = self._replay(snap_id, self.record)
        self.remember(snap_id, files)
        return files

    def files_aside(self, snap_id: str) -> FileMap:
        """`files` for another thread: records read and maps replayed without adding to this object's caches (it
        only reads them), so the thread that owns them may go on meanwhile; the caller `remember`s the map."""
        return self._replay(snap_id, self._record_aside)

    def _record_aside(self, snap_id: str) -> SnapshotRecord:
        """`record` for another thread: the cached record, else the file read, without adding it to the cache."""
        return self._records.get(snap_id) or self._read_record(snap_id)

    def _replay(self, snap_id: str, record: Callable[[str], SnapshotRecord]) -> FileMap:
        """A snapshot's map: its chain's records (`record`) applied from the nearest full map or cached one."""
        chain: list[SnapshotRecord] = []
        current: str | None = snap_id
        base: FileMap | None = None
        seen: set[str] = set()
        while current is not None:
            if current in seen:
                raise CorruptStore(f"snapshot {snap_id} has a cycle in its parent chain")
            seen.add(current)
            hit = self._maps.get(current)
            if hit is not None and current != snap_id:
                base = dict(hit)
                break
            rec = record(current)
            chain.append(rec)
            current = rec.parent
        files: FileMap = base if base is not None else {}
        for rec in reversed(chain):
            apply_delta(files, rec.changes)
        return files

    def entries_at(self, snap_id: str, paths: Collection[str]) -> dict[str, Entry | None]:
        """What a snapshot's map holds at these paths (None: nothing), read along its chain without decoding it:
        each record not decoded already is searched for the keys still wanted (manifest.look_up), newest first, until
        every path is named or the chain ends. Beyond LOOKUPS paths, the map is decoded (each search is a scan of
        the record's text)."""
        if len(paths) > LOOKUPS or snap_id in self._maps:
            files = self.files(snap_id)
            return {p: files.get(p) for p in paths}
        want = set(paths)
        out: dict[str, Entry | None] = {}
        current: str | None = snap_id
        seen: set[str] = set()
        while want and current is not None:
            if current in seen:
                raise CorruptStore(f"snapshot {snap_id} has a cycle in its parent chain")
            seen.add(current)
            hit = self._maps.get(current)
            rec = self._records.get(current) or self._volatile.get(current)
            if hit is not None:
                named, parent = {p: hit.get(p) for p in want}, None
            elif rec is not None:
                named, parent = {p: rec.changes[p] for p in want if p in rec.changes}, rec.parent
            else:
                head, named = look_up(current, read_verified(str(self._snapshot_path(current))), want)
                self._heads[current] = head
                parent = head.parent
            out.update(named)
            want.difference_update(named)
            current = parent
        out.update(dict.fromkeys(want))  # named by no record down to the whole one: not in the map
        return out

    def named_between(self, older: str, newer: str, hops: int = NAMED_HOPS) -> set[str] | None:
        """Every path the delta records from `older` (excluded) to `newer` name, when `newer` descends from `older`
        within `hops` records; None otherwise (another branch, a full record on the way, or too far)."""
        names: set[str] = set()
        current: str | None = newer
        for _ in range(hops):
            if current is None:
                return None
            if current == older:
                return names
            rec = self.record(current)
            names.update(rec.changes)
            current = rec.parent
        return None

    def chain_aside(self, root: Path) -> dict[str, SnapshotRecord]:
        """For another thread: the records of the workspace's newest snapshot's chain, back to the one written whole,
        read and decoded without adding to this object's caches (`keep_records` adds them). A one-shot rewind's target
        is on that chain almost always; at 100,000 files the record written whole took ~80-90 ms to decode and
        Codex ~50 ms to start, one after the other (issue 35)."""
        out: dict[str, SnapshotRecord] = {}
        current = self.latest(root)
        while current is not None and current not in out:
            rec = out[current] = self._record_aside(current)
            current = rec.parent
        return out

    def keep_records(self, records: dict[str, SnapshotRecord]) -> None:
        """Cache records another thread read (`chain_aside`): each is its file's bytes decoded, as `record` would."""
        for snap_id, rec in records.items():
            self._records.setdefault(snap_id, rec)

    def remember(self, snap_id: str, files: FileMap) -> None:
        self._maps[snap_id] = files
        self._maps.move_to_end(snap_id)
        while len(self._maps) > 8:
            self._maps.popitem(last=False)

    def forget_snapshots(self, snap_ids: Iterable[str]) -> None:
        """Drop cached records and maps of snapshot files gc just deleted."""
        for snap in snap_ids:
            self._records.pop(snap, None)
            self._heads.pop(snap, None)
            self._maps.pop(snap, None)

    def exists(self, snap_id: str) -> bool:
        """Is there a snapshot file of this id (gc may have dropped an old one)?"""
        return is_snapshot_id(snap_id) and self._snapshot_path(snap_id).is_file()

    def resolve(self, ref: str) -> str:
        """A full snapshot id from an id or a unique prefix of at least 4 hex digits."""
        ref = ref.strip().lower()
        if is_snapshot_id(ref):
            if not self._snapshot_path(ref).exists():
                raise UnknownSnapshot(f"no snapshot {ref}")
            return ref
        if not is_snapshot_prefix(ref):
            raise UnknownSnapshot(f"{ref!r} is not a snapshot id (expected at least 4 hex digits)")
        bucket = self.path / "snapshots" / ref[:2]
        matches = sorted(p.name for p in bucket.glob(f"{ref}*")) if bucket.is_dir() else []
        matches = [m for m in matches if is_snapshot_id(m)]
        if not matches:
            raise UnknownSnapshot(f"no snapshot matches {ref}")
        if len(matches) > 1:
            raise AmbiguousSnapshot(f"{ref} matches {len(matches)} snapshots; type more digits")
        return matches[0]

    def info(self, snap_id: str) -> SnapshotInfo:
        """Metadata of one snapshot."""
        rec = self.head(snap_id)
        return SnapshotInfo(snap_id, rec.root, rec.created, rec.kind, rec.label,
                            int(rec.meta.get("file_count", 0)))

    # ----------------------------------------------------------------- refs
    def _ref_path(self, root: str) -> Path:
        return self.path / "refs" / "workspaces" / f"{workspace_key(root)}.jsonl"

    def list_snapshots(self, root: str | os.PathLike[str] | None = None) -> list[SnapshotInfo]:
        """Snapshots of one workspace (or all), oldest first."""
        if root is not None:
            paths = [self._ref_path(str(Path(os.path.realpath(os.path.abspath(root)))))]
        else:
            paths = sorted((self.path / "refs" / "workspaces").glob("*.jsonl"))
        out: list[SnapshotInfo] = []
        for path in paths:
            out.extend(read_ref_file(path))
        out.sort(key=lambda i: i.created)
        return out

    def latest(self, root: Path) -> str | None:
        """The newest snapshot of a workspace that can still be read.

        Every capture asks this, so only the ref log's tail is parsed (the log grows with every
        capture); the whole log is read only when the tail names no snapshot that still exists.
        """
        path = self._ref_path(str(root))
        try:
            with open(path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - REF_TAIL_BYTES))
                lines = complete_lines(f.read())  # a torn final line (crash mid-append) is no record
        except FileNotFoundError:
            return None
        if size > REF_TAIL_BYTES:
            lines = lines[1:]  # the first line of the window may be cut
        for line in reversed(lines):
            try:
                snap = json.loads(line)["id"]
                if not isinstance(snap, str) or not is_snapshot_id(snap):
                    raise ValueError("bad id")
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptStore(f"ref file {path.name} is damaged near its end") from exc
            if self._snapshot_path(snap).exists():
                return snap
        for info in reversed(self.list_snapshots(root)):
            if self._snapshot_path(info.id).exists():
                return info.id
        return None

    def workspace(self, root: str | os.PathLike[str]) -> Path:
        """The workspace's real path; refused when it is or lies inside the store or Codex's home."""
        return workspace_root(root, self.protected[1:], store=self.protected[0])

    def protected_rel(self, root: Path) -> tuple[str, ...]:
        """The protected directories below `root` by path (a bind mount is found by the walk instead)."""
        out = []
        for p in self.protected:
            with contextlib.suppress(ValueError):
                rel = Path(os.path.realpath(p)).relative_to(root).as_posix()
                if rel != ".":
                    out.append(rel)
        return tuple(out)

    def write_snapshot(self, ws: Path, files: FileMap, parent: str | None, parent_files: FileMap | None,
                       kind: str, label: str | None, file_count: int,
                       known_delta: dict[str, Entry | None] | None = None) -> tuple[str, bool]:
        """Write the snapshot as a delta against `parent` (or whole); return (id, unchanged). `known_delta`: that
        delta, where the caller knows it (manifest.delta's answer, found without comparing every entry)."""
        changes: dict[str, Entry | None]
        whole = cast("dict[str, Entry | None]", files)  # the map itself, not a copy (~5 MB at 100,000 files): a
        # map is never changed once recorded (its record and `remember` share it, as its cached copy did)
        depth = 0
        unchanged = False
        if parent is not None and parent_files is not None:
            changes = known_delta if known_delta is not None else delta(parent_files, files)
            unchanged = not changes
            depth = self.head(parent).depth + 1
            if depth >= REBASE_DEPTH or len(changes) * 2 > len(files):
                parent, changes, depth = None, whole, 0
        else:
            parent, changes = None, whole
        rec = SnapshotRecord(root=str(ws), created=time.time(), kind=kind, label=label, parent=parent,
                             depth=depth, changes=changes, meta={"file_count": file_count})
        snap_id = self.commit(rec)
        self.remember(snap_id, files)
        return snap_id, unchanged

    def commit(self, rec: SnapshotRecord) -> str:
        """Write a listed snapshot — its file, durably, then its ref line — as one step (FORMAT.md §5); its id.

        Under the ref log's flock, held throughout: an interrupted commit of the workspace is finished (or dropped)
        first, then this one's marker is left, the file written, the line appended, the marker removed. A failure
        takes back the file it wrote, so "nothing was committed" is true of the whole store.
        """
        data = rec.encode()
        snap_id = digest_hex(data)
        path = self._snapshot_path(snap_id)
        info = SnapshotInfo(snap_id, rec.root, rec.created, rec.kind, rec.label, int(rec.meta.get("file_count", 0)))
        wskey = workspace_key(rec.root)
        with locked_for_append(self._ref_path(rec.root)) as fd:
            self.finished_commits.extend(commits.finish_locked(self, wskey, fd))
            marker = commits.marker_path(self.path, wskey, snap_id)
            commits.mark(marker)
            wrote = False
            try:
                path.parent.mkdir(exist_ok=True)
                if not path.exists():
                    atomic_write(path, data)
                    wrote = True
                append_locked(fd, info.line() + b"\n")
            except BaseException:
                try:
                    if wrote:
                        path.unlink()  # ours alone: no ref, pin or other snapshot can name it yet
                except OSError:
                    pass  # still marked: the next writer finishes it, rather than leave it named by no ref
                else:
                    with contextlib.suppress(OSError):
                        marker.unlink()
                raise
            with contextlib.suppress(OSError):
                marker.unlink()  # a marker left names a listed snapshot: the next writer only removes it
        self._records[snap_id] = rec
        return snap_id

    def finish_commits(self, root: Path) -> list[commits.Judged]:
        """Finish or drop an interrupted commit of this workspace (a capture killed between its snapshot file and
        its ref line), so that its newest snapshot is what its ref log ends with. One directory listing when there is
        none."""
        wskey = workspace_key(str(root))
        if not commits.markers(self.path, wskey):
            return []
        with translate_os_errors("snapshot store"), locked_for_append(self._ref_path(str(root))) as fd:
            done = commits.finish_locked(self, wskey, fd)
        self.finished_commits.extend(done)
        return done

    def finish_all_commits(self) -> list[commits.Judged]:
        """Every workspace's interrupted commits, finished or dropped (gc and `verify --repair`, before they read
        the refs)."""
        done: list[commits.Judged] = []
        for wskey in sorted({m.wskey for m in commits.markers(self.path)}):
            with (translate_os_errors("snapshot store"),
                  locked_for_append(self.path / "refs" / "workspaces" / f"{wskey}.jsonl") as fd):
                done.extend(commits.finish_locked(self, wskey, fd))
        self.finished_commits.extend(done)
        return done

    def write_unlisted(self, root: str, changes: dict[str, Entry], *, parent: str | None, kind: str,
                       label: str | None, meta: dict[str, Any] | None = None, persist: bool = True) -> str:
        """A snapshot no workspace ref lists (pre-edit states, derived rewind targets): kept by a pin.

        Every blob it names must already be durable. With `persist` off it is only known to this
        store object (dry runs): nothing is written.
        """
        if kind not in UNLISTED_KINDS:
            raise StoreError(f"a snapshot of kind {kind!r} must be listed in its workspace's ref")
        base: FileMap = dict(self.files(parent)) if parent is not None else {}
        depth = self.head(parent).depth + 1 if parent is not None else 0
        if depth >= REBASE_DEPTH:
            apply_delta(base, changes)
            parent, depth, delta_changes = None, 0, dict(base)
        else:
            delta_changes = dict(changes)
            apply_delta(base, changes)
        doc_meta = {"file_count": sum(1 for e in base.values() if is_captured(e)), **(meta or {})}
        rec = SnapshotRecord(root=root, created=time.time(), kind=kind, label=label, parent=parent,
                             depth=depth, changes=dict(delta_changes), meta=doc_meta)
        data = rec.encode()
        snap_id = digest_hex(data)
        if persist:
            path = self._snapshot_path(snap_id)
            with translate_os_errors("snapshot store"):
                path.parent.mkdir(exist_ok=True)
                if not path.exists():
                    atomic_write(path, data)
        else:
            self._volatile[snap_id] = rec
        self._records[snap_id] = rec
        self.remember(snap_id, base)
        return snap_id

    def report_recovery(self, report: Recovery) -> None:
        """Record a finished or rolled-back interrupted restore and tell the caller's `on_recovery`."""
        self.recoveries.append(report)
        if self.on_recovery is not None:
            self.on_recovery(report)

    def journal_file(self, root: Path) -> Path:
        """Where a running restore of this workspace keeps its journal (FORMAT.md)."""
        return self.path / "journal" / f"{workspace_key(str(root))}.json"

    def auto_gc_due(self, interval: float = AUTO_GC_INTERVAL) -> bool:
        """Has `interval` passed since the last automatic gc? (Asked without importing gc: ~8 ms a command.)"""
        try:
            last = float((self.path / GC_MARKER).read_text())
        except (OSError, ValueError):
            last = 0.0
        return time.time() - last >= interval

    def blob_chunks(self, blob_hex: str) -> Iterator[bytes]:
        """A blob's verified content, in chunks."""
        return self.blobs.stream(bytes.fromhex(blob_hex))

    def check_blob(self, blob: bytes) -> int:
        """Verify one stored blob (CorruptStore if damaged) and return its length."""
        return self.checked_blob(blob, 0)[0]

    def checked_blob(self, blob: bytes, keep: int) -> tuple[int, bytes | None]:
        """Verify one stored blob (CorruptStore if damaged): its length, and its bytes if at most `keep` long."""
        data = self.blobs.check(blob, keep)
        return self.blobs.locate(blob).raw_len, data

    def blob_writer(self) -> PackWriter:
        """A writer of new blobs into a pack of this repository (durable once committed)."""
        return PackWriter(lambda: self.blobs, self.path / "packs")

    def folding(self, root: Path) -> Folding:
        """How the workspace's volume folds names (names.py): probed once per device, remembered in the cache."""
        found = self._folding.get(str(root))
        if found is None:
            found = self._folding[str(root)] = remembered(self.cache_file(root, ".names"), root)
        return found

    def cache_file(self, root: Path, suffix: str) -> Path:
        """Where a disposable cache of one workspace lives (FORMAT.md §7): `.index`, `.git`, `.names` (`.stat`,
        `.walk`: old)."""
        return self.path / "cache" / f"{workspace_key(str(root))}{suffix}"


def read_ref_file(path: Path) -> list[SnapshotInfo]:
    """Parse a workspace ref log: every complete line must parse; a torn unterminated tail is skipped."""
    try:
        lines = complete_lines(path.read_bytes())
    except FileNotFoundError:
        return []
    out: list[SnapshotInfo] = []
    for n, line in enumerate(lines):
        try:
            d = json.loads(line)
            if not is_snapshot_id(d["id"]):
                raise ValueError("bad id")
            out.append(SnapshotInfo(d["id"], d["root"], float(d["created"]), d["kind"], d.get("label"),
                                    int(d.get("file_count", 0))))
        except (ValueError, KeyError, TypeError) as exc:
            raise CorruptStore(f"ref file {path.name} line {n + 1} is damaged") from exc
    return out

