"""Capturing a workspace: scope (Git listing, known paths, residue, ignore rules) -> changed paths -> blobs ->
a delta manifest -> its ref.

A Capturer works on one repository and keeps, per workspace, the Git listing. What makes the next capture cheap
(the workspace index with its stat cache and saved walk, a long-running process's journal, the change monitor) is
behind one door, the ChangeDetector (detect/door.py): a capture asks it what may have changed before it looks at the
files (`look`) and tells it what it saw once its snapshot is committed (`remember`); in between it only reads.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import heap
from . import scope as scope_mod
from .detect import walkstate
from .detect.door import ChangeDetector, Found, Look, Notes, Reread, Start
from .detect.index import StatCache
from .dirfd import DirCache
from .errors import StoreBusy, StoreError
from .fsutil import translate_os_errors
from .manifest import ABSENT, REBASE_DEPTH, Entry, FileMap, SnapshotRecord, captured_paths, delta, is_captured
from .readfiles import BlobSink, Captured, HashOnly, Progress, read_paths
from .records import NamedTuple, field, record
from .repository.packs import PackWriter
from .repository.repo import Repository
from .roots import resolve_root
from .settings import ScopeSettings
from .stamps import Key
from .vocab import SnapshotKind

if TYPE_CHECKING:
    from .restore.journal import Recovery

#: At most this many changed files are read again on the parent's map without decoding it (`_reread_only`): each is
#: a search of the parent's records (Repository.entries_at); beyond, the full capture.
REREAD_MAX = 64
#: Of the untracked files held back by the recent-file limit, at most this many are named in `skipped` (the count
#: is CaptureResult.over_limit): a list of every one would cost as much as the files are many.
OVER_LIMIT_SAMPLE = 20


@record
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
    reused: bool = False  # `id` is the workspace's latest snapshot, which holds this map already: nothing written
    # Untracked files the recent-file limit (`residue_max_files`) held back: how many, and that limit. `skipped`
    # names at most OVER_LIMIT_SAMPLE of them (there may be 100,000).
    over_limit: int = 0
    residue_max_files: int = 0

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
            "over_limit": {"count": self.over_limit, "limit": self.residue_max_files},
            "recovered": self.recovered.as_json() if self.recovered else None,
        }


class _Asked(NamedTuple):
    """What the intent asked for (its switches, `Capturer._run`) and when the capture started."""

    label: str | None
    kind: str
    settings: ScopeSettings
    grow: bool
    dry_run: bool
    whatever_size: Callable[[str], bool] | None
    progress: Progress | None
    summary_only: bool
    reuse: bool
    started: float  # perf_counter
    started_ns: int  # wall clock: what the racy-timestamp rule compares stats with


class _Saved(NamedTuple):
    """What a capture the saved walk answers starts from (Capturer._from_saved)."""

    whole: bool  # a restore's safety capture: its result carries the map and the stats
    files: FileMap  # the parent's map (whole only)
    captured: set[str]  # its captured paths (whole only)
    known: list[str]  # the known paths, as the saved walk's coverage is asked about


def _whole(ask: _Asked) -> bool:
    """A restore's safety capture, given the parent's map and its stats (`_from_saved`)."""
    return ask.kind == SnapshotKind.SAFETY and not (ask.summary_only or ask.dry_run)


class _Ground(NamedTuple):
    """What a capture knows before it looks at any file: the workspace's rules, its Git listing and newest snapshot,
    and the paths it covers whatever the limits (`known`). (Tuples: a dataclass costs every process ~0.2 ms.)"""

    ws: Path
    recovered: Recovery | None
    ignore: scope_mod.Ignore
    git: scope_mod.GitTracked
    known_git: scope_mod.GitTracked | None  # the listing as found before this capture (saved again if it moved)
    parent: str | None
    known: list[str]
    grow: bool  # what the parent captured stays covered
    strict: bool  # the parent is the thread's own latest: its map must be readable

    @property
    def key(self) -> str:
        return str(self.ws)


class Capturer:
    """Captures workspaces into one repository, keeping per workspace what the next capture reuses."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._git: dict[str, scope_mod.GitTracked] = {}
        self.detect = ChangeDetector(repo)  # the door to change detection (detect/door.py)
        repo.on_gc.append(self.detect.forget_last)

    def use_monitors(self, wanted: bool) -> None:
        """Let captures ask each workspace's change monitor when `wanted` (the user's setting: ChangeDetector)."""
        self.detect.use_monitors(wanted)

    def close(self) -> None:
        """Save the workspace indexes and stop the change journals."""
        self.detect.close()

    def release(self) -> None:
        """Done capturing in this process (a one-shot command): what only a next capture here would reuse goes (the
        unwatched workspaces' indexes, saved first; the Git listings), so an automatic gc that follows does not hold
        its own peak beside the capture's (a new store's first capture of 100,000 files: 281 -> 236 MB peak RSS), nor
        the packs it wrote as the blob index holds them (read again from their indexes when asked)."""
        self.detect.release()
        self._git.clear()
        self.repo.shed_written()

    def watch(self, root: str | os.PathLike[str], journal: str | None = None) -> bool:
        """Keep a change journal of this workspace so later captures can skip the walk (`journal`: "inotify" or
        "watchdog", else this platform's).

        Meant for long-running processes (the session); returns False where this platform has none.
        """
        return self.detect.watch(self.repo.workspace(root), journal)

    def build_ahead(self, root: str | os.PathLike[str]) -> None:
        """Let a thread build what the next capture of this watched workspace goes on from, when its last capture
        read only changed files and left that to be built (`_reread_only`): for a session, once the turn has started
        (before, the thread would slow the turn's start it just spared)."""
        self.detect.build_ahead(resolve_root(root))

    def unwatch(self, root: str | os.PathLike[str]) -> None:
        """Stop the change journal of a workspace."""
        self.detect.unwatch(resolve_root(root))

    def notes(self, ws: Path) -> Notes:
        """What a restore of `ws` tells about its own writes: the index forgets them, a journal absorbs them."""
        return self.detect.notes(ws)

    def _git_cache_path(self, root: Path) -> Path:
        """Where the workspace's Git listing is kept between processes (FORMAT.md §7)."""
        return self.repo.cache_file(root, ".git")

    def capture(self, root: str | os.PathLike[str], *, label: str | None = None, known_paths: Iterable[str] = (),
                scope: ScopeSettings | None = None, kind: str = SnapshotKind.CAPTURE, progress: Progress | None = None
                ) -> CaptureResult:
        """A snapshot of the workspace's tracked set: blobs, then the snapshot, then its ref.

        `known_paths` are captured whatever their size (agent-touched, earlier-tracked); everything the
        workspace's latest snapshot captured stays tracked. `progress(done, total, bytes)` is called now and
        then while file contents are read.
        """
        return self._run(root, label=label, known_paths=known_paths, scope=scope, kind=kind, progress=progress)

    def capture_summary(self, root: str | os.PathLike[str], *, label: str | None = None,
                        known_paths: Iterable[str] = (), scope: ScopeSettings | None = None,
                        progress: Progress | None = None) -> CaptureResult:
        """A capture whose caller needs only its id and counts (a one-shot command): its `files` and `stats` may be
        empty, `stored_blobs` is, and no manifest is decoded when nothing changed or only files the parent captured
        were changed in place (`_reread_only`)."""
        return self._run(root, label=label, known_paths=known_paths, scope=scope, progress=progress,
                         summary_only=True)

    def capture_thread_summary(self, root: str | os.PathLike[str], *, known_paths: Iterable[str],
                               thread_latest: str | None = None, label: str | None = None,
                               scope: ScopeSettings | None = None, kind: str = SnapshotKind.CAPTURE,
                               progress: Progress | None = None) -> CaptureResult:
        """`capture_thread` for a caller that needs only the snapshot's id and counts (a turn's capture): when
        nothing changed, or only files the parent captured were changed in place, and the thread covers what the
        saved walk covered, its `files` and `stats` are empty and no manifest is decoded; `stored_blobs` is always.

        When the map it would record is the workspace's latest snapshot's, that snapshot is the answer and nothing is
        written (`reused`): it holds this very state and is durable already, so a prompt sent after a turn that left
        the files alone waits for no write and no fsync (the pre-turn capture's three fsyncs were ~56 ms of Enter ->
        answer at load 10, bench/README "Tenth pass"); a turn's snapshots are named by its sidecar, not by kind.

        `thread_latest`, the thread's newest snapshot: every path it captured stays tracked, as if in
        `known_paths`. When it is the workspace's latest too (no other capture came between), the capture grows
        from it as the workspace's own capture does, so an unchanged tree decodes no manifest; a damaged one is an
        error, never a smaller tracked set."""
        return self._run(root, label=label, known_paths=known_paths, scope=scope, kind=kind, progress=progress,
                         grow=False, summary_only=True, thread_latest=thread_latest, reuse=True)

    def capture_thread(self, root: str | os.PathLike[str], *, known_paths: Iterable[str], label: str | None = None,
                       scope: ScopeSettings | None = None, kind: str = SnapshotKind.CAPTURE,
                       progress: Progress | None = None) -> CaptureResult:
        """A conversation thread's capture: the scope and exactly the paths the thread tracks (`known_paths`),
        not what the workspace's latest snapshot captured (another thread's agent-touched paths stay its own)."""
        return self._run(root, label=label, known_paths=known_paths, scope=scope, kind=kind, progress=progress,
                         grow=False)

    def safety(self, root: str | os.PathLike[str], *, known_paths: Iterable[str], scope: ScopeSettings | None,
               label: str, progress: Progress | None = None, whatever_size: Callable[[str], bool] | None = None,
               thread_latest: str | None = None) -> CaptureResult:
        """A restore's safety capture, stored before anything is touched: every path it may write or delete
        (`known_paths`), what `thread_latest` captured (a thread's newest snapshot: decoded only when it is not the
        workspace's newest, which the capture grows from), and the files for which `whatever_size` is true whatever
        the residue limits say."""
        return self._run(root, label=label, known_paths=known_paths, scope=scope, kind=SnapshotKind.SAFETY,
                         progress=progress, whatever_size=whatever_size, thread_latest=thread_latest)

    def safety_preview(self, root: str | os.PathLike[str], *, known_paths: Iterable[str],
                       scope: ScopeSettings | None, progress: Progress | None = None,
                       whatever_size: Callable[[str], bool] | None = None,
                       thread_latest: str | None = None) -> CaptureResult:
        """What `safety` would hold (a dry-run restore plans against it), hashed in memory: nothing stored."""
        return self._run(root, known_paths=known_paths, scope=scope, kind=SnapshotKind.SAFETY, progress=progress,
                         whatever_size=whatever_size, dry_run=True, thread_latest=thread_latest)

    def preview(self, root: str | os.PathLike[str], *, known_paths: Iterable[str] = (),
                scope: ScopeSettings | None = None) -> CaptureResult:
        """The workspace now as `known_paths` and the scope see it (a diff's current side), hashed in memory
        only: nothing is stored, and what the latest snapshot captured is not added."""
        return self._run(root, known_paths=known_paths, scope=scope, dry_run=True, grow=False)

    def _run(
        self,
        root: str | os.PathLike[str],
        *,
        label: str | None = None,
        known_paths: Iterable[str] = (),
        scope: ScopeSettings | None = None,
        kind: str = SnapshotKind.CAPTURE,
        grow: bool = True,
        dry_run: bool = False,
        whatever_size: Callable[[str], bool] | None = None,
        progress: Progress | None = None,
        summary_only: bool = False,
        thread_latest: str | None = None,
        reuse: bool = False,
    ) -> CaptureResult:
        """The capture the intents above name (callers name one of them, never these switches): `grow` adds what
        the latest snapshot captured to `known_paths`, `dry_run` stores nothing, `whatever_size` lifts the residue
        limits, `summary_only` may skip the maps, `thread_latest` adds what that snapshot captured (and must be
        readable), `reuse` answers with the latest snapshot when the map is its own."""
        ask = _Asked(label, kind, scope or ScopeSettings(), grow, dry_run, whatever_size, progress, summary_only, reuse,
                     time.perf_counter(), time.time_ns())
        ws = self.repo.workspace(root)
        with translate_os_errors(f"capture of {ws}"), self.repo.shared_lock():
            # The door, first: its monitor is asked before anything of the workspace is looked at.
            look = self.detect.look(ws, started_ns=ask.started_ns, dry_run=dry_run)
            c = self._ground(ws, ask, known_paths, thread_latest)
            look.check(c.parent, ask.settings, c.git.signature)  # the saved walk, where no journal can say
            done = self._unchanged(c, ask, look)
            if done is None:
                done = self._reread_only(c, ask, look)
            if done is None:
                done = self._tombstones_dropped(c, ask, look)
            if done is not None:
                return done
            look.settle()  # a session's journal: its last capture, once built, is where the fast path starts
            c, parent_files = self._parent_files(c)
            start = look.start(parent_files, c.known, c.grow, c.git, ask.settings, c.ignore)  # fast path, or walk
            sink = HashOnly() if dry_run else self.repo.blob_writer()
            try:
                found = self._fast_path(c, ask, look, start, sink)
                if found is None:
                    found = self._walk(c, ask, look, start, parent_files, sink)
                result = self._result(c, ask, found)
                if dry_run:
                    result.seconds = time.perf_counter() - ask.started
                    return result
                assert isinstance(sink, PackWriter)
                sink.commit()
            except BaseException:
                if isinstance(sink, PackWriter):
                    sink.abort()
                raise
            # The listing is true whatever happens to this capture from here; saved before the snapshot's maps are
            # encoded, its encoding (~8 MB at 100,000 paths) does not add to their peak.
            self._save_git_listing(c)
            # A one-shot walk's index, written now: what only it needed goes before the map is encoded, and so do the
            # packs it wrote as the blob index holds them (nothing here reads a blob again: ~12 MB at 100,000 blobs),
            # given back before the map's encoding maps its own buffers (~29 MB at 100,000 files; heap.py).
            if ask.summary_only and look.prepare(found, result.file_count, result.skipped, c.git.paths, kind):
                result.stats = {}
                sink.forget_stored()
                self.repo.shed_written()
                heap.give_back()
            try:
                self._record(c, ask, result, found, parent_files, sink)
            except BaseException:
                look.abandon()
                raise
            look.remember(result.id, result.file_count, result.skipped, found, c.git.paths, kind)  # for the next one
        result.seconds = time.perf_counter() - ask.started
        return result

    def _ground(self, ws: Path, ask: _Asked, known_paths: Iterable[str], thread_latest: str | None) -> _Ground:
        """Finish an interrupted restore or commit, read the ignore rules and the Git listing, find the parent, and
        the paths covered whatever the limits."""
        recovered = None if ask.dry_run else self._recover_if_idle(ws)
        ignore = scope_mod.Ignore.load(ws, self.repo.folding(ws))
        known_git = self._git.get(str(ws))
        if known_git is None:  # a fresh process: the listing the last capture saved, if the index is unchanged
            known_git = scope_mod.GitTracked.load(self._git_cache_path(ws))
        git = scope_mod.git_tracked(ws, known_git)
        self._git[str(ws)] = git
        if not ask.dry_run:
            # A capture killed between its snapshot file and its ref line: that snapshot is finished (then it is the
            # newest, the parent this capture grows from, reuses or checks the saved walk against) or dropped.
            self.repo.finish_commits(ws)
        parent = self.repo.latest(ws)
        known = list(known_paths)
        # A thread's own newest snapshot is the workspace's: growing from the parent adds exactly what the thread
        # captured before (and lets an unchanged tree skip the decoding). Another one's map is decoded here.
        strict = thread_latest is not None and thread_latest == parent
        grow = ask.grow or strict
        if thread_latest is not None and not strict:
            known.extend(captured_paths(self.repo.files(thread_latest)))  # damaged: an error, not fewer paths
        return _Ground(ws, recovered, ignore, git, known_git, parent, known, grow, strict)

    def _unchanged(self, c: _Ground, ask: _Asked, look: Look) -> CaptureResult | None:
        """Nothing moved since the parent and a walk would cover what the saved one did: the parent's map, recorded
        again without decoding a manifest (None: do the full capture); `reuse`: the parent is the answer, nothing is
        written but the walk's moved directories.

        A restore's safety capture gets the parent's map decoded and the saved walk's stats of its files, unless a file
        the walk held back by its size is one `whatever_size` wants whole: the fast path's look at every captured
        path's key and its map built again were ~0.3 s of a rewind at 100,000 files (profiled; issue 35)."""
        base = self._from_saved(c, ask, look, moved=False)
        if base is None:
            return None
        whole, files, captured_then, known = base
        checked = look.unchanged(c.grow, known, c.git, ask.settings, c.ignore)
        if checked is None or c.parent is None:
            return None
        state = checked.state
        stats: Mapping[str, Key] = {}
        try:  # reused, the parent's bytes must be its id; chained on, its depth is read too (not its map)
            prev = None if ask.reuse else self.repo.head(c.parent)
            if prev is None:
                self.repo.verify_file(c.parent)
            if whole:
                stats = walkstate.CapturedStats(captured_then, state)
        except (StoreError, walkstate.DamagedWalk):
            return None  # the full capture decides what a damaged parent (or saved walk) means
        if prev is None:
            snap_id = c.parent  # the chain does not grow: the parent itself, no steps
        else:
            if prev.depth + 1 >= REBASE_DEPTH:
                return None  # this one rebases: written whole, so the map is needed
            rec = SnapshotRecord(root=c.key, created=time.time(), kind=ask.kind, label=ask.label, parent=c.parent,
                                 depth=prev.depth + 1, changes={}, meta={"file_count": state.file_count})
            snap_id = self.repo.commit(rec)
        look.kept(checked, snap_id, chained=not ask.reuse, ground=self._reread_ground(c, ask, {}), kind=ask.kind)
        self._save_git_listing(c)
        return CaptureResult(id=snap_id, root=c.key, file_count=state.file_count, bytes_hashed=0, bytes_stored=0,
                             seconds=time.perf_counter() - ask.started, unchanged=True, skipped=list(state.skipped),
                             files=files, stats=stats, reused=ask.reuse,
                             residue_max_files=ask.settings.residue_max_files)

    def _from_saved(self, c: _Ground, ask: _Asked, look: Look, *, moved: bool) -> _Saved | None:
        """What `_unchanged` and `_reread_only` start from, where the saved walk may answer this capture at all: a
        caller wanting only the id and counts, or a restore's safety capture (`whole`), which is given the parent's
        map, its captured paths, and the known paths as the walk's coverage is asked about (a path the map captured,
        growing covers anyway) — when nothing moved, or with `moved` files changed in place. None: the full capture,
        also when a file held back by its size is one `whatever_size` wants whole (a changed file too large now sends
        `reread_keys` there too)."""
        whole = _whole(ask)
        if not ((ask.summary_only and ask.whatever_size is None) or whole) or c.recovered is not None \
                or c.parent is None:
            return None
        if not whole:
            return _Saved(False, {}, set(), c.known)
        seen = look.checked
        if seen is None or seen.check.changes.structural or not (moved or seen.check.unchanged):
            return None
        try:
            files = self.repo.files(c.parent)  # not None: refused above
        except StoreError:
            return None  # the full capture decides what a damaged parent means
        wanted = ask.whatever_size
        if wanted is not None and any(e.kind == "x" and wanted(p) for p, e in files.items()):
            return None
        captured = set(captured_paths(files))
        return _Saved(True, files, captured, list(set(c.known).difference(captured)) if c.grow else c.known)

    def _reread_only(self, c: _Ground, ask: _Asked, look: Look) -> CaptureResult | None:
        """Only files the parent captured changed since it, and a walk would cover what the saved one did: those files
        read again, the delta of their entries written on the parent, whose map is never decoded (None: the full
        capture). Decoding a 100,000-file parent's chain and vouching for each of its paths were ~0.5 s of every
        capture after a file changed, one-shot or a session's first (issue 35); what its records say of these few
        paths is read without decoding them (`Repository.entries_at`)."""
        base = self._from_saved(c, ask, look, moved=True)
        if base is None or c.parent is None:
            return None
        whole, files, captured_then, known = base
        checked = look.reread_only(c.grow, known, c.git, ask.settings, c.ignore)
        if checked is None:
            return None
        if whole:
            try:
                checked.state.seen  # noqa: B018 -- the saved keys of the files not read again: decoded (and checked)
            except walkstate.DamagedWalk:
                return None
        paths = sorted(checked.check.changes.files)
        gone, made = checked.check.gone_paths(), checked.check.made_paths()
        if len(paths) > REREAD_MAX or ((gone or made) and whole) or (
                made and not self._made_taken(c, ask, made, checked.state, len(look.extra))):
            return None  # a safety capture's map is given only files read again
        try:
            head = self.repo.head(c.parent)
            old = self.repo.entries_at(c.parent, paths)
        except StoreError:
            return None  # the full capture decides what a damaged parent means
        if head.depth + 1 >= REBASE_DEPTH or not all(
                (old[p] is None or old[p] == ABSENT) if p in made else is_captured(old[p]) for p in paths):
            return None
        to_read_paths = [p for p in paths if p not in gone]
        sink = self.repo.blob_writer()
        try:
            sink.load_index()  # before the directories' fds are held
            with DirCache(c.key, folding=self.repo.folding(c.ws)) as dirs:
                to_read = look.reread_keys(dirs, to_read_paths, ask.settings)
                captured = read_paths(dirs, to_read, sink, StatCache(None), ask.progress) if to_read else Captured()
            if to_read is None or captured.skipped or captured.entries.keys() != set(to_read_paths):
                sink.abort()
                return None  # one vanished, became unreadable or kept changing: the full capture's verdicts
            sink.commit()
        except BaseException:
            sink.abort()
            raise
        changes: dict[str, Entry | None] = {p: e for p, e in captured.entries.items() if e != old[p]}
        state = checked.state
        # A file the check found gone from its listed directory: a walk looks at it directly where it covers it
        # (growing: every path the parent captured; a thread's capture covers what the saved walk did) and finds it
        # absent, else records nothing there.
        covered_then = state.covered_set() if gone and not c.grow else frozenset[str]()
        absent = {p: ABSENT for p in gone if c.grow or p in covered_then}
        changes.update((p, absent.get(p)) for p in gone)
        file_count = state.file_count - len(gone) + len(made)
        stats: Mapping[str, Key] = {}
        if whole:  # the files read again were captured before and are now: the same paths, some with new keys
            files = {**files, **captured.entries}  # the parent's map may be the repository's, kept: a copy
            stats = walkstate.CapturedStats(captured_then, state, fresh=captured.stats)
        if ask.reuse and not changes:
            snap_id = c.parent  # touched, not changed: the parent holds this very map
        else:
            snap_id = self.repo.commit(SnapshotRecord(
                root=c.key, created=time.time(), kind=ask.kind, label=ask.label, parent=c.parent, depth=head.depth + 1,
                changes=changes, meta={"file_count": file_count}))
        look.reread(snap_id, checked, captured, list(state.skipped), ask.kind, self._reread_ground(c, ask, old),
                    file_count, absent)
        self._save_git_listing(c)
        return CaptureResult(id=snap_id, root=c.key, file_count=file_count, bytes_hashed=captured.bytes_hashed,
                             bytes_stored=sink.bytes_stored, seconds=time.perf_counter() - ask.started,
                             unchanged=not changes, skipped=list(state.skipped), files=files, stats=stats,
                             stored_blobs=frozenset(sink.stored),
                             reused=snap_id == c.parent, residue_max_files=ask.settings.residue_max_files)

    @staticmethod
    def _made_taken(c: _Ground, ask: _Asked, made: set[str], state: walkstate.WalkState, extra: int) -> bool:
        """Would a walk capture each of these files, made in listed directories since the parent (read then as the
        changed ones are: `Look.reread_keys` refuses one held back by its size)? As fastpath._settle settles a made
        file: growing, the parent's captured files are covered, so the recent-file limit counts only the files made
        since; a thread's capture counts the untracked files the parent took too: the saved walk's files outside
        what it covered, and the `extra` paths it covered that this capture does not (`Look.reread_only`; a thread's
        first capture after a file made by hand decoded the parent, ~0.6 s of `codexr exec` at 100,000 files; issue
        35). One ignored, hidden or a `.git` is held back (no: the full capture records why)."""
        settings, known = ask.settings, set(c.known)
        residue = [p for p in made if p not in known]
        if any(scope_mod.forbidden(p) or c.ignore.file(p) or scope_mod.hidden(p, settings) for p in made):
            return False
        try:
            taken = 0 if c.grow else walkstate.residue_taken(state) + extra
        except walkstate.DamagedWalk:
            return False
        return taken + len(residue) <= settings.residue_max_files

    def _tombstones_dropped(self, c: _Ground, ask: _Asked, look: Look) -> CaptureResult | None:
        """Nothing moved since the parent, whose map holds tombstones of paths a walk no longer covers (an untracked
        file removed: the capture after the removal recorded its absence, growing from a map that captured it): the
        parent's map without them, written as their delta on it, whose map is never decoded (None: the full
        capture). At 100,000 files that capture decoded the parent's map and the saved walk's keys, ~0.5 s of each
        one-shot capture, turn or rewind that came second after a rewind took a turn's new file back (issue 35)."""
        if _whole(ask):
            return None  # (before `_from_saved`, which would build a safety capture's map and captured paths first)
        base = self._from_saved(c, ask, look, moved=False)
        if base is None or c.parent is None:
            return None
        found = look.tombstones_only(c.grow, base.known, c.git)
        if found is None or len(found[1]) > REREAD_MAX:
            return None
        checked, dropped = found
        try:
            head = self.repo.head(c.parent)
            old = self.repo.entries_at(c.parent, dropped)
        except StoreError:
            return None  # the full capture decides what a damaged parent means
        if head.depth + 1 >= REBASE_DEPTH or any(e is None or e.kind != "-" for e in old.values()):
            return None  # a path held back, say, stays in a walk's map: the full capture
        state = checked.state
        snap_id = self.repo.commit(SnapshotRecord(
            root=c.key, created=time.time(), kind=ask.kind, label=ask.label, parent=c.parent, depth=head.depth + 1,
            changes=dict.fromkeys(dropped), meta={"file_count": state.file_count}))
        look.dropped(checked, snap_id, dropped)
        self._save_git_listing(c)
        return CaptureResult(id=snap_id, root=c.key, file_count=state.file_count, bytes_hashed=0, bytes_stored=0,
                             seconds=time.perf_counter() - ask.started, unchanged=False, skipped=list(state.skipped),
                             residue_max_files=ask.settings.residue_max_files)

    @staticmethod
    def _reread_ground(c: _Ground, ask: _Asked, old: dict[str, Entry | None]) -> Reread:
        """What a capture from the saved walk stood on, for a session's journal to build its last capture from."""
        assert c.parent is not None
        return Reread(c.parent, old, c.grow, c.known, c.git, c.git.signature, ask.settings, c.ignore)

    def _parent_files(self, c: _Ground) -> tuple[_Ground, FileMap | None]:
        """The parent's map (None: no parent, or a damaged one the capture goes on without, as if it had none)."""
        if c.parent is None:
            return c, None
        try:
            return c, self.repo.files(c.parent)
        except StoreError:
            if c.strict:
                raise  # the thread's tracked set is unknown: capturing less would forget paths
            return c._replace(parent=None), None

    def _fast_path(self, c: _Ground, ask: _Asked, look: Look, start: Start, sink: BlobSink) -> Found | None:
        """The last capture's map with what changed since, re-reading only the files whose stat moved (None: walk)."""
        if start.since is None:
            return None
        if isinstance(sink, PackWriter) and look.will_read(start):
            sink.load_index()  # files to read: loaded before the directories' fds are held
        with DirCache(c.key, folding=self.repo.folding(c.ws)) as dirs:  # the fast path's looks and reads: same fds
            fast = look.select(dirs, start, c.git.signature, ask.settings, c.ignore, ask.whatever_size)
            if fast is None:
                return None
            captured = read_paths(dirs, fast.to_read, sink, look.known_content(fast.to_read), ask.progress)
            return Found(look.merged(fast, captured), captured, captured.skipped, fast=fast)

    def _walk(self, c: _Ground, ask: _Asked, look: Look, start: Start, parent_files: FileMap | None,
              sink: BlobSink) -> Found:
        """Walk the workspace and read what it selects."""
        if isinstance(sink, PackWriter):
            sink.load_index()  # before the walk holds its directories' fds (a low RLIMIT_NOFILE)
        on_dir = look.before_walk()
        known = start.walk_known
        if known is None:  # a walk covers every path the parent captured
            assert parent_files is not None
            known = [*c.known, *captured_paths(parent_files)]
        with DirCache(c.key, folding=self.repo.folding(c.ws)) as dirs:  # the walk and the reads: same directories
            selected = scope_mod.select(c.ws, ask.settings, c.ignore, c.git.paths, known,
                                        protected=self.repo.protected_rel(c.ws), protected_ids=self.repo.protected_ids,
                                        on_dir=on_dir, force=ask.whatever_size, dirs=dirs)
            captured = read_paths(dirs, selected.to_capture, sink, look.stat_cache(), ask.progress,
                                  fresh=look.keeps_fresh)
        skipped = selected.skipped + captured.skipped
        return Found(look.walked(selected, captured, c.git.signature, ask.settings), captured, skipped,
                     selected=selected)

    def _result(self, c: _Ground, ask: _Asked, found: Found) -> CaptureResult:
        """The capture's result before its snapshot is written: counts, the skipped report, the map and its stats."""
        state = found.state
        assert state is not None
        facts = state.map_facts()
        limit = ask.settings.residue_max_files
        skipped = [*found.skipped, *scope_mod.too_large_skipped(facts.too_large, found.skipped,
                                                                ask.settings.residue_max_file_bytes),
                   *scope_mod.over_limit_skipped(state.files, facts.over_limit, limit, OVER_LIMIT_SAMPLE)]
        result = CaptureResult(id="", root=c.key, file_count=facts.file_count,
                               bytes_hashed=found.captured.bytes_hashed, bytes_stored=0, seconds=0.0, unchanged=False,
                               skipped=skipped, files=state.files, stats=state.stats, over_limit=facts.over_limit,
                               residue_max_files=limit)
        if c.recovered is not None:
            result.recovered = c.recovered
            result.skipped[:0] = [(p, f"interrupted restore: {why}") for p, why in c.recovered.left]
        return result

    def _record(self, c: _Ground, ask: _Asked, result: CaptureResult, found: Found, parent_files: FileMap | None,
                sink: PackWriter) -> None:
        """Write the snapshot (a delta on the parent), or, asked to `reuse`, name the parent when the map is its own."""
        result.bytes_stored = sink.bytes_stored
        if not ask.summary_only:  # its callers use only the id and counts (~4 MB at 100,000 blobs, measured)
            result.stored_blobs = sink.stored
        files, touched = result.files, found.state.touched if found.state is not None else None
        # The fast path knows where the map moved: when it started from the parent's own map, the delta is those
        # entries that differ (a whole-map comparison was ~2 ms of every session capture).
        changes = None
        if found.fast is not None and parent_files is not None and found.fast.last.files is parent_files:
            assert touched is not None
            changes = delta(parent_files, files, among=touched)
        elif ask.reuse and parent_files is not None:
            changes = delta(parent_files, files)  # compared once: the reuse below and the record share it
        if ask.reuse and c.parent is not None and parent_files is not None and c.recovered is None and not changes:
            result.id, result.unchanged, result.reused = c.parent, True, True
            self.repo.remember(c.parent, files)  # the next capture's journal starts from this very map
        else:
            result.id, result.unchanged = self.repo.write_snapshot(c.ws, files, c.parent, parent_files, ask.kind,
                                                                   ask.label, result.file_count, changes)

    def _save_git_listing(self, c: _Ground) -> None:
        if c.git is not c.known_git or c.git.reread:
            c.git.reread = False
            with contextlib.suppress(OSError):
                c.git.save(self._git_cache_path(c.ws))  # disposable too

    def _recover_if_idle(self, ws: Path) -> Recovery | None:
        """A capture finishes an interrupted restore, but leaves one that is still running alone."""
        repo = self.repo
        journal = repo.journal_file(ws)
        if not journal.exists():
            return None
        from .restore.apply import Restorer  # here: only a capture that finds a journal loads restore's modules

        try:
            with repo.workspace_lock(ws, wait=False):
                report = Restorer(repo, ws, journal, self.notes(ws), repo.on_held).recover()
        except StoreBusy:
            return None
        if report is not None:
            repo.report_recovery(report)
        return report
