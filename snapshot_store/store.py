"""The Store: one directory holding packs, snapshots, refs, caches and journals (see FORMAT.md)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import marshal
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import fastpath, memo, walkstate
from . import scope as scope_mod
from .capture import HashOnly, Progress, read_paths
from .dirfd import DirCache
from .errors import (
    AmbiguousSnapshot,
    CorruptStore,
    StoreBusy,
    StoreError,
    UnknownSnapshot,
    UnsupportedFormat,
)
from .fsutil import append_line, atomic_write, complete_lines, translate_os_errors
from .ids import digest_hex, is_snapshot_id, is_snapshot_prefix, workspace_key
from .locks import flocked
from .manifest import (
    REBASE_DEPTH,
    Entry,
    FileMap,
    SnapshotRecord,
    apply_delta,
    captured_items,
    captured_paths,
    count_captured,
    delta,
    is_captured,
)
from .packs import BlobIndex, PackWriter, read_generation
from .settings import ScopeSettings
from .statcache import Key, StatCache, stat_key
from .workspace import Identity, protected_identities, resolve_root, workspace_root

if TYPE_CHECKING:
    from .restore import Recovery, RestorePlan, RestoreResult

STORE_FORMAT = "codex-rewind-snapshots"
STORE_VERSION = 1
REF_TAIL_BYTES = 16 * 1024  # `latest` parses only this much of a workspace's ref log
AUTO_GC_INTERVAL = 24 * 3600.0  # automatic gc at most this often
GC_MARKER = "gc.last"  # holds the time of the last automatic gc
CACHE_SAVE_INTERVAL = 60.0  # a watched (long-running) workspace saves its stat cache at most this often
#: Kinds of snapshot that no workspace ref lists (a pin keeps them); every other kind with a workspace root is
#: history that a ref must name, and gc refuses while one is named by none (FORMAT.md §4).
UNLISTED_KINDS = frozenset({"rewind-target", "pre-edit", "states-safety"})
SUBDIRS = ("packs", "snapshots", "refs", "refs/workspaces", "cache", "journal", "locks")


@dataclass(frozen=True)
class SnapshotInfo:
    """What a listing shows about one snapshot."""

    id: str
    root: str
    created: float
    kind: str
    label: str | None
    file_count: int


@dataclass
class CaptureResult:
    """The outcome of one capture."""

    id: str
    root: str
    file_count: int
    bytes_hashed: int
    bytes_stored: int
    seconds: float
    unchanged: bool
    skipped: list[tuple[str, str]] = field(default_factory=list)
    files: FileMap = field(default_factory=dict, repr=False)
    stats: Mapping[str, Key] = field(default_factory=dict, repr=False)
    stored_blobs: frozenset[bytes] = field(default=frozenset(), repr=False)  # written by this capture
    recovered: Recovery | None = None  # an interrupted restore this capture finished first

    def as_json(self) -> dict[str, Any]:
        """The stable JSON shape the CLI prints."""
        return {
            "id": self.id,
            "root": self.root,
            "file_count": self.file_count,
            "bytes_hashed": self.bytes_hashed,
            "bytes_stored": self.bytes_stored,
            "seconds": round(self.seconds, 6),
            "unchanged": self.unchanged,
            "skipped": [{"path": p, "reason": r} for p, r in self.skipped],
            "recovered": self.recovered.as_json() if self.recovered else None,
        }


@dataclass(frozen=True)
class Change:
    """One path's difference between two states."""

    path: str
    change: str  # added | modified | deleted | mode | type


def read_record(path: str) -> SnapshotRecord:
    """One snapshot file, verified: its name is the hash of its bytes."""
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
    return SnapshotRecord.decode(snap_id, data)


class Store:
    """A snapshot store at `path` (normally $CODEX_HOME/file_snapshots)."""

    def __init__(self, path: Path, protected: tuple[Path, ...]) -> None:
        self.path = path
        self.protected = protected  # the store itself first, then Codex's home: never captured, restored into
        self.protected_ids: frozenset[Identity] = protected_identities(protected)
        self._blobs: BlobIndex | None = None  # loaded on first use: an unchanged capture needs no blob (~15-30 ms)
        self._generation = read_generation(path)  # gc's, while the blob index is not loaded
        self._maps: OrderedDict[str, FileMap] = OrderedDict()
        self._records: dict[str, SnapshotRecord] = {}
        self._git: dict[str, scope_mod.GitTracked] = {}
        self._caches: dict[str, StatCache] = {}
        self._watched: dict[str, fastpath.Watched] = {}
        self._volatile: dict[str, SnapshotRecord] = {}  # unlisted snapshots of dry runs, never written
        # Told of every interrupted restore this store finishes or rolls back (a command prints it), and the
        # ones it did, in order: a recovery is never silent, whichever operation ran it.
        self.on_recovery: Callable[[Recovery], None] | None = None
        self.recoveries: list[Recovery] = []

    # ----------------------------------------------------------------- opening
    @classmethod
    def open(cls, path: str | os.PathLike[str], *, create: bool = True,
             protected: Iterable[str | os.PathLike[str]] = ()) -> Store:
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
        """Save caches and release file descriptors."""
        for cache in self._caches.values():
            with contextlib.suppress(OSError):
                cache.save()
        for w in self._watched.values():
            w.journal.close()
        self._watched.clear()
        if self._blobs is not None:
            self._blobs.close()

    @property
    def blobs(self) -> BlobIndex:
        """Where every stored blob is (every pack index, loaded when first asked)."""
        if self._blobs is None:
            self._blobs = BlobIndex(self.path / "packs")
            if self._blobs.generation != self._generation:
                self._forget_cached()  # a gc ran since this store was opened
        return self._blobs

    def __enter__(self) -> Store:
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
        self._maps.clear()
        for w in self._watched.values():
            w.last = None  # its file map names blobs the gc may have freed: walk again

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
        loaded: SnapshotRecord = memo.load("snapshot", str(self._snapshot_path(snap_id)))
        self._records[snap_id] = loaded
        return loaded

    def files(self, snap_id: str) -> FileMap:
        """The full path map of a snapshot, replaying its delta chain (cached; do not mutate)."""
        cached = self._maps.get(snap_id)
        if cached is not None:
            self._maps.move_to_end(snap_id)
            return cached
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
            rec = self.record(current)
            chain.append(rec)
            current = rec.parent
        files: FileMap = base if base is not None else {}
        for rec in reversed(chain):
            apply_delta(files, rec.changes)
        self._remember(snap_id, files)
        return files

    def _remember(self, snap_id: str, files: FileMap) -> None:
        self._maps[snap_id] = files
        self._maps.move_to_end(snap_id)
        while len(self._maps) > 8:
            self._maps.popitem(last=False)

    def forget_snapshots(self, snap_ids: Iterable[str]) -> None:
        """Drop cached records and maps of snapshot files gc just deleted."""
        for snap in snap_ids:
            self._records.pop(snap, None)
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
        rec = self.record(snap_id)
        return SnapshotInfo(snap_id, rec.root, rec.created, rec.kind, rec.label,
                            int(rec.meta.get("file_count", 0)))

    # ----------------------------------------------------------------- refs
    def _ref_path(self, root: str) -> Path:
        return self.path / "refs" / "workspaces" / f"{workspace_key(root)}.jsonl"

    def _append_ref(self, info: SnapshotInfo) -> None:
        line = {"id": info.id, "root": info.root, "created": info.created, "kind": info.kind,
                "label": info.label, "file_count": info.file_count}
        append_line(self._ref_path(info.root), json.dumps(line, separators=(",", ":")).encode() + b"\n")

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

    # ----------------------------------------------------------------- capture
    def stat_cache(self, root: Path) -> StatCache:
        """The workspace's stat cache (a restore forgets the paths it rewrote)."""
        key = workspace_key(str(root))
        cache = self._caches.get(key)
        if cache is None:
            cache = StatCache(self.path / "cache" / f"{key}.stat")
            self._caches[key] = cache
        return cache

    def _git_cache_path(self, root: Path) -> Path:
        """Where the workspace's Git listing is kept between processes (FORMAT.md §7)."""
        return self.path / "cache" / f"{workspace_key(str(root))}.git"

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

    # ----------------------------------------------------------------- change journal
    def watch(self, root: str | os.PathLike[str]) -> bool:
        """Keep an inotify change journal for this workspace so later captures can skip the walk.

        Meant for long-running processes (the session); returns False where inotify is missing.
        """
        ws = self.workspace(root)
        if str(ws) in self._watched:
            return True
        from .watch import ChangeJournal  # here: inotify_simple (ctypes) is for long-running processes only

        if not ChangeJournal.available():
            return False
        try:
            self._watched[str(ws)] = fastpath.Watched(ChangeJournal(str(ws)))
        except OSError:
            return False
        return True

    def unwatch(self, root: str | os.PathLike[str]) -> None:
        """Stop the change journal of a workspace."""
        w = self._watched.pop(str(resolve_root(root)), None)
        if w is not None:
            w.journal.close()

    def absorb_own_changes(self, ws: Path, written: dict[str, Entry], deleted: list[str],
                           dirs_changed: bool) -> None:
        """After a restore, fold its own writes into the change journal instead of re-walking."""
        w = self._watched.get(str(ws))
        if w is not None:
            fastpath.absorb(w, written, deleted, dirs_changed)

    def capture(
        self,
        root: str | os.PathLike[str],
        *,
        label: str | None = None,
        known_paths: Iterable[str] = (),
        scope: ScopeSettings | None = None,
        kind: str = "capture",
        grow: bool = True,
        dry_run: bool = False,
        force: Callable[[str], bool] | None = None,
        progress: Progress | None = None,
        lean: bool = False,
    ) -> CaptureResult:
        """Capture the workspace's tracked set; commit blobs, then the snapshot, then its ref.

        `known_paths` are captured whatever their size (agent-touched, earlier-tracked, restore
        targets). With `grow`, everything the workspace's latest snapshot captured stays tracked.
        `dry_run` hashes without writing anything (used by restore previews). Files for which
        `force` is true are captured whatever the residue limits say (restore safety captures).
        `progress(done, total, bytes)` is called now and then while file contents are read.
        With `lean`, a capture that finds nothing changed may leave `files` and `stats` empty (one-shot
        commands that print only the id and counts: it then decodes no manifest).
        """
        started = time.perf_counter()
        started_ns = time.time_ns()
        ws = self.workspace(root)
        settings = scope or ScopeSettings()
        with translate_os_errors(f"capture of {ws}"), self.shared_lock():
            recovered = None if dry_run else self._recover_if_idle(ws)
            ignore = scope_mod.Ignore.load(ws)
            key = str(ws)
            known_git = self._git.get(key)
            if known_git is None:  # a fresh process: the listing the last capture saved, if the index is unchanged
                known_git = scope_mod.GitTracked.load(self._git_cache_path(ws))
            git = scope_mod.git_tracked(ws, known_git)
            self._git[key] = git
            parent = self.latest(ws)
            known = list(known_paths)
            watched = self._watched.get(key) if not dry_run else None  # a long-running process's inotify journal
            # No journal, or one that has seen nothing yet (a session's first capture): check the last walk's
            # saved stats instead of walking (a one-shot command, the first turn of a session).
            checked = None
            if (watched is None or watched.last is None) and not dry_run and parent is not None:
                checked = self._check_walk(ws, parent, settings, git.signature,
                                           watched.journal if watched is not None else None)
                if (checked is not None and watched is None and lean and force is None and recovered is None
                        and checked.check.unchanged and grow and checked.state.grows_same
                        and (not known or checked.state.covered_set().issuperset(known))):
                    done = self._unchanged(ws, checked, parent, kind, label, started, started_ns)
                    if done is not None:
                        self._save_git_listing(ws, git, known_git)
                        return done
            parent_files: FileMap | None = None
            if parent is not None:
                try:
                    parent_files = self.files(parent)
                except StoreError:
                    parent, parent_files, checked = None, None, None
            parent_captured = captured_paths(parent_files) if parent_files is not None else []
            if grow:
                known.extend(parent_captured)
            w = watched  # what the fast path asks: the journal, or the check for this one capture
            if checked is not None and parent_files is not None and not checked.check.changes.structural:
                covered_now = {*git.paths, *known}  # what a walk would capture whatever the limits
                captured_then = set(parent_captured)
                if walkstate.same_map(checked.state.covered_set(), covered_now, parent_files, captured_then, settings,
                                      ignore):
                    # Covered then and now: what the fast path settles newly known paths against.
                    w = self._checked_watch(checked, parent_files, captured_then,
                                            checked.state.covered_set() & covered_now, git.signature,
                                            settings) or watched
                else:
                    checked = None  # other known paths would change the map: walk
            cache = self.stat_cache(ws)
            sink = HashOnly() if dry_run else PackWriter(self.blobs)
            state: fastpath.LastCapture | None = None
            selected: scope_mod.Scope | None = None
            try:
                if w is not None:
                    with DirCache(key) as dirs:  # the fast path's looks and its reads use the same fds
                        fast = fastpath.select(dirs, w, known, git.signature, settings, ignore, force)
                        if fast is not None:
                            captured = read_paths(dirs, fast.to_read, sink, cache, progress)
                            state = fastpath.merge(fast, captured)
                            skipped = captured.skipped
                walked = state is None
                if state is None:
                    if watched is not None:
                        watched.journal.reset()
                    with DirCache(key) as dirs:  # the walk and the reads see the same directories
                        selected = scope_mod.select(ws, settings, ignore, git.paths, known,
                                                    protected=self.protected_rel(ws),
                                                    protected_ids=self.protected_ids,
                                                    on_dir=watched.journal.watch_dir if watched is not None else None,
                                                    force=force, dirs=dirs)
                        captured = read_paths(dirs, selected.to_capture, sink, cache, progress)
                    files = selected.entries
                    files.update(captured.entries)
                    skipped = selected.skipped + captured.skipped
                    covered = frozenset(selected.covered)
                    unwatched = fastpath.unwatched_after_walk(files, covered, selected.to_capture)
                    state = fastpath.LastCapture(files, captured.fresh, captured.stats, covered, unwatched,
                                                 git.signature, settings, time.monotonic())
                files, stats = state.files, state.stats
                skipped = [*skipped, *scope_mod.too_large_skipped(files, skipped, settings.residue_max_file_bytes)]
                result = CaptureResult(
                    id="", root=key, file_count=count_captured(files),
                    bytes_hashed=captured.bytes_hashed, bytes_stored=0, seconds=0.0, unchanged=False,
                    skipped=skipped, files=files, stats=stats,
                )
                if recovered is not None:
                    result.recovered = recovered
                    result.skipped[:0] = [(p, f"interrupted restore: {why}") for p, why in recovered.left]
                if dry_run:
                    result.seconds = time.perf_counter() - started
                    return result
                assert isinstance(sink, PackWriter)
                sink.commit()
            except BaseException:
                if isinstance(sink, PackWriter):
                    sink.abort()
                raise
            result.bytes_stored = sink.bytes_stored
            result.stored_blobs = frozenset(sink.stored)
            result.id, result.unchanged = self._write_snapshot(ws, files, parent, parent_files, kind, label,
                                                               result.file_count)
            if watched is not None:
                watched.last = state
                watched.pending.clear()
            # What the next process checks instead of walking: from this walk, or the state this capture started
            # from with the files it read again (a check's, or the one a session saved at its last capture).
            if selected is not None:
                base = None
            elif w is not watched and checked is not None:
                base = checked.state
            else:
                base = watched.saved if watched is not None else None
            from_check = checked is not None and base is checked.state
            saved = self._save_walk(ws, result, state, selected, base,
                                    checked.check.keys if checked is not None and from_check else {},
                                    checked.check.dir_keys if checked is not None and from_check else {},
                                    captured.stats, set(git.paths), started_ns)
            if watched is not None:
                watched.saved = saved
            if walked:
                cache.update(state.fresh, started_ns)
            else:
                cache.update_some(captured.entries, captured.fresh, started_ns)
            # A restore's safety capture leaves the saving to the restore's end (close): it forgets the paths it
            # rewrites right after, and saving twice cost ~40-70 ms of a one-file restore (11,000 files, measured).
            if kind != "safety" and (watched is None or time.monotonic() - cache.saved_at > CACHE_SAVE_INTERVAL):
                with contextlib.suppress(OSError):
                    cache.save()  # disposable: the snapshot is already committed
            self._save_git_listing(ws, git, known_git)
        result.seconds = time.perf_counter() - started
        return result

    def _save_git_listing(self, ws: Path, git: scope_mod.GitTracked, known: scope_mod.GitTracked | None) -> None:
        if git is not known:
            with contextlib.suppress(OSError):
                git.save(self._git_cache_path(ws))  # disposable too

    # ----------------------------------------------------------------- the last walk, between processes
    def _walk_path(self, root: Path) -> Path:
        """Where the workspace's last walk is kept between processes (FORMAT.md §7)."""
        return self.path / "cache" / f"{workspace_key(str(root))}.walk"

    def _check_walk(self, ws: Path, parent: str, settings: ScopeSettings, git_signature: tuple[int, ...] | None,
                    journal: fastpath.Journal | None) -> walkstate.Checked | None:
        """The saved walk, if it describes `parent`'s files under these rules, with a fresh look at its stats.

        A `journal` gets a watch on every saved directory before the look, so that nothing changed after the
        look goes unseen by the captures that follow (the order a walk keeps: watch, then list).
        """
        state = walkstate.load(self._walk_path(ws))
        if state is None or not state.same_rules(settings, git_signature, self.protected_rel(ws)):
            return None
        chain = self._unchanged_since(parent, state.snapshot, str(ws))
        if chain is None:
            return None
        # Unchanged files keep the blobs they had without asking the blob index (a walk would, through the stat
        # cache): only while no gc ran and no pack index the capture relied on went away or changed.
        if not walkstate.packs_hold(state.packs, walkstate.pack_signature(self.path / "packs",
                                                                         read_generation(self.path))):
            return None
        if journal is not None:
            for rel in state.dirs[1]:
                journal.watch_dir(rel)
        with DirCache(str(ws)) as dirs:
            return walkstate.Checked(state, walkstate.check(dirs, state), chain)

    def _unchanged_since(self, snap: str, base: str, root: str) -> int | None:
        """Unchanged snapshots between `base` and `snap` (None: `snap` may not hold `base`'s files)."""
        for steps in range(walkstate.CHAIN_LIMIT + 1):
            if snap == base:
                return steps
            try:
                rec = self.record(snap)
            except StoreError:
                return None
            if rec.changes or rec.parent is None or rec.root != root:
                return None
            snap = rec.parent
        return None

    def _checked_watch(self, checked: walkstate.Checked, parent_files: FileMap, captured: set[str],
                       covered: frozenset[str], git_signature: tuple[int, ...] | None,
                       settings: ScopeSettings) -> fastpath.Watched | None:
        """A one-capture journal from the check: the fast path re-reads only the files whose stat moved.

        `covered`: paths covered by the saved walk and by this capture (walkstate.same_map said the map is the
        same); the fast path adds this capture's newly known ones. `captured`: the files and symlinks of the map.
        """
        state = checked.state
        try:
            stats = walkstate.captured_stats(captured, state, checked.check.changes.files)
        except ValueError:
            return None
        if stats is None:
            return None
        last = fastpath.LastCapture(parent_files, {}, stats, covered, dict(state.unwatched),
                                    git_signature, settings, time.monotonic())
        return fastpath.Watched(walkstate.CheckedJournal(checked.check.changes), last=last)

    def _unchanged(self, ws: Path, checked: walkstate.Checked, parent: str, kind: str, label: str | None,
                   started: float, started_ns: int) -> CaptureResult | None:
        """Nothing moved since `parent`: record that, without decoding a manifest (None: do the full capture)."""
        state = checked.state
        try:
            prev = self.record(parent)
        except StoreError:
            return None  # the full capture decides what a damaged parent means
        if prev.depth + 1 >= REBASE_DEPTH:
            return None  # this one rebases: written whole, so the map is needed
        rec = SnapshotRecord(root=str(ws), created=time.time(), kind=kind, label=label, parent=parent,
                             depth=prev.depth + 1, changes={}, meta={"file_count": state.file_count})
        snap_id = self._write_record(rec)
        self._append_ref(SnapshotInfo(snap_id, str(ws), rec.created, kind, label, state.file_count))
        moved = checked.check.dir_keys
        if moved or checked.chain + 1 >= walkstate.CHAIN_LIMIT:  # else not rewritten: ~6 ms saved
            state.snapshot = snap_id  # a new chain starts here
            state.dirs = walkstate.with_dir_keys(state.dirs, {
                rel: walkstate.trusted(k, started_ns) for rel, k in moved.items()})
            walkstate.save(self._walk_path(ws), state)
        return CaptureResult(id=snap_id, root=str(ws), file_count=state.file_count, bytes_hashed=0, bytes_stored=0,
                             seconds=time.perf_counter() - started, unchanged=True, skipped=list(state.skipped))

    def _save_walk(self, ws: Path, result: CaptureResult, state: fastpath.LastCapture,
                   selected: scope_mod.Scope | None, base: walkstate.WalkState | None, checked_keys: dict[str, Key],
                   moved_dirs: dict[str, Key], read: dict[str, Key], git_paths: set[str],
                   started_ns: int) -> walkstate.WalkState | None:
        """Keep what this capture saw for the next process (or forget a walk nobody can check); return it."""
        path = self._walk_path(ws)
        files = state.files

        def trusted(key: Key | None) -> Key | None:
            return walkstate.trusted(key, started_ns)

        if not walkstate.savable(files, result.skipped):
            walkstate.forget(path)
            return None
        unwatched = {p: trusted(k) for p, k in state.unwatched.items()}
        packs = walkstate.pack_signature(self.path / "packs", read_generation(self.path))
        skipped = [(str(p), str(why)) for p, why in result.skipped]
        if selected is None:
            if base is None:
                walkstate.forget(path)
                return None
            # No directory moved since `base` was saved (else this capture walked), so the same entries are there:
            # only the files read again get new keys (rebuilding the whole state cost ~30 ms of a one-file restore).
            # A file no longer captured keeps an entry: the next check just looks at it again. A new one (a session's
            # journal reports created files) moved its directory's stat: the next check walks.
            newly = {rel: trusted(read.get(rel, now)) for rel, now in checked_keys.items()}
            newly.update((rel, trusted(key)) for rel, key in read.items())
            # Every captured file must keep a key the next check looks at, or a change to it would go unseen.
            if any(is_captured(files.get(rel)) for rel in newly):
                kept = base.seen_paths() | unwatched.keys()
                if any(is_captured(files.get(rel)) and rel not in kept for rel in newly):
                    walkstate.forget(path)
                    return None
            # Directories listed the same at the check: their new stats stand (racy ones untrusted).
            listed = walkstate.with_dir_keys(base.dirs, {rel: trusted(k) for rel, k in moved_dirs.items()})
            covered = frozenset(state.covered)
            # Sorting and marshalling 11,000 paths again is ~5 ms of every session capture: only when they moved.
            blob = base.covered_blob if covered == base.covered_set() else marshal.dumps(sorted(covered), 2)
            saved = dataclasses.replace(base, snapshot=result.id, packs=packs, dirs=listed,
                                        seen=walkstate.with_keys(base.seen, newly), unwatched=unwatched,
                                        covered_blob=blob, _covered=covered,
                                        file_count=result.file_count, skipped=skipped,
                                        grows_same=walkstate.grows_same(covered, git_paths, files))
            walkstate.save(path, saved)
            return saved
        # Walked: every listed directory and stat'ed entry, racy ones untrusted.
        dirs: walkstate.Group = ("", list(selected.listed),
                                 b"".join(walkstate.pack_key(trusted(stat_key(st)))
                                          for st in selected.listed.values()))
        seen = {rel: trusted(read.get(rel) or stat_key(st)) for rel, st in selected.seen.items()
                if walkstate.stat_bound(files, rel)}
        # Every captured file must be looked at by the next check, or a change to it would go unseen.
        if any(is_captured(e) and p not in seen and p not in unwatched for p, e in files.items()):
            walkstate.forget(path)
            return None
        covered = frozenset(state.covered)
        saved = walkstate.WalkState(
            snapshot=result.id, settings=walkstate.settings_key(state.settings), git_signature=state.git_signature,
            protected=self.protected_rel(ws), packs=packs, dirs=dirs, seen=walkstate.group(seen),
            covered_blob=marshal.dumps(sorted(covered), 2), unwatched=unwatched, file_count=result.file_count,
            skipped=skipped, listings=b"".join(selected.listing[rel] for rel in selected.listed),
            grows_same=walkstate.grows_same(covered, git_paths, files))
        walkstate.save(path, saved)
        return saved

    def _write_snapshot(self, ws: Path, files: FileMap, parent: str | None, parent_files: FileMap | None,
                        kind: str, label: str | None, file_count: int) -> tuple[str, bool]:
        """Write the snapshot as a delta against `parent` (or whole); return (id, unchanged)."""
        changes: dict[str, Any]
        depth = 0
        unchanged = False
        if parent is not None and parent_files is not None:
            changes = delta(parent_files, files)
            unchanged = not changes
            depth = self.record(parent).depth + 1
            if depth >= REBASE_DEPTH or len(changes) * 2 > len(files):
                parent, changes, depth = None, dict(files), 0
        else:
            parent, changes = None, dict(files)
        rec = SnapshotRecord(root=str(ws), created=time.time(), kind=kind, label=label, parent=parent,
                             depth=depth, changes=changes, meta={"file_count": file_count})
        snap_id = self._write_record(rec)
        self._remember(snap_id, files)
        self._append_ref(SnapshotInfo(snap_id, str(ws), rec.created, kind, label, file_count))
        return snap_id, unchanged

    def _write_record(self, rec: SnapshotRecord) -> str:
        """Write one snapshot file (durably, once: its name is its hash) and return its id."""
        data = rec.encode()
        snap_id = digest_hex(data)
        path = self._snapshot_path(snap_id)
        path.parent.mkdir(exist_ok=True)
        if not path.exists():
            atomic_write(path, data)
        self._records[snap_id] = rec
        return snap_id

    def write_unlisted(self, root: str, changes: dict[str, Entry], *, parent: str | None, kind: str,
                       label: str | None, meta: dict[str, Any] | None = None, persist: bool = True) -> str:
        """A snapshot no workspace ref lists (pre-edit states, derived rewind targets): kept by a pin.

        Every blob it names must already be durable. With `persist` off it is only known to this
        store object (dry runs): nothing is written.
        """
        if kind not in UNLISTED_KINDS:
            raise StoreError(f"a snapshot of kind {kind!r} must be listed in its workspace's ref")
        base: FileMap = dict(self.files(parent)) if parent is not None else {}
        depth = self.record(parent).depth + 1 if parent is not None else 0
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
        self._remember(snap_id, base)
        return snap_id

    # ----------------------------------------------------------------- diff
    def diff(self, a: str, b: str | None = None, root: str | os.PathLike[str] | None = None,
             scope: ScopeSettings | None = None) -> list[Change]:
        """Per-path changes from snapshot `a` to snapshot `b` (or to the workspace now)."""
        old = self.files(a)
        if b is not None:
            new = self.files(b)
        else:
            ws = root if root is not None else self.record(a).root
            known = [p for p, _e in captured_items(old)]
            new = self.capture(ws, known_paths=known, scope=scope, dry_run=True, grow=False).files
        return diff_maps(old, new)

    # ----------------------------------------------------------------- restore, gc, verify
    def restore(
        self,
        snap_id: str,
        root: str | os.PathLike[str] | None = None,
        *,
        dry_run: bool = False,
        known_paths: Iterable[str] = (),
        scope: ScopeSettings | None = None,
        confirm: Callable[[RestorePlan], bool] | None = None,
        progress: Progress | None = None,
        into: bool = False,
    ) -> RestoreResult:
        """Safety capture, plan, (confirm), journaled apply; see restore.restore()."""
        from .restore import restore

        return restore(self, snap_id, root, dry_run=dry_run, known_paths=known_paths, scope=scope,
                       confirm=confirm, progress=progress, into=into)

    def recover(self, root: str | os.PathLike[str]) -> Recovery | None:
        """Finish a restore that was interrupted in this workspace (None when there was none).

        Only under the workspace lock, which a running restore holds: a live restore is never
        "finished" by someone else (StoreBusy instead).
        """
        ws = self.workspace(root)
        with self.workspace_lock(ws, wait=False):
            from .restore import recover

            return recover(self, ws)

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

    def _recover_if_idle(self, ws: Path) -> Recovery | None:
        """A capture finishes an interrupted restore, but leaves one that is still running alone."""
        if not self.journal_file(ws).exists():
            return None
        try:
            return self.recover(ws)
        except StoreBusy:
            return None

    def blob_chunks(self, blob_hex: str) -> Iterator[bytes]:
        """A blob's verified content, in chunks."""
        return self.blobs.stream(bytes.fromhex(blob_hex))


def diff_maps(old: FileMap, new: FileMap) -> list[Change]:
    """added / deleted / modified / mode / type, for captured paths only, sorted."""
    out: list[Change] = []
    for path in sorted({p for p, e in old.items() if is_captured(e)} | {p for p, e in new.items() if is_captured(e)}):
        o, n = old.get(path), new.get(path)
        oc, nc = is_captured(o), is_captured(n)
        if oc and not nc:
            out.append(Change(path, "deleted"))
        elif nc and not oc:
            out.append(Change(path, "added"))
        elif o != n and o is not None and n is not None:
            if o.kind != n.kind:
                out.append(Change(path, "type"))
            elif o.kind == "f" and n.kind == "f" and o.blob == n.blob:
                out.append(Change(path, "mode"))
            else:
                out.append(Change(path, "modified"))
    return out


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
