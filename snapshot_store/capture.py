"""Capturing a workspace: scope (Git listing, known paths, residue, ignore rules) -> changed paths -> blobs ->
a delta manifest -> its ref.

A Capturer works on one repository and keeps, per workspace, what makes the next capture cheap: the Git
listing, the workspace index (index.py: the stat cache and the saved walk, one file), and where a long-running
process watches it, the inotify change journal (watch.py). A one-shot process has no journal: it checks the walk
the last capture saved instead (walkstate.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import marshal
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import scope as scope_mod
from .detect import fastpath, monitor, walkstate
from .detect.index import StatCache, WorkspaceIndex
from .detect.mapfacts import MapFacts
from .dirfd import DirCache
from .errors import StoreBusy, StoreError
from .fsutil import translate_os_errors
from .ids import workspace_key
from .manifest import REBASE_DEPTH, Entry, FileMap, SnapshotRecord, captured_paths, delta, is_captured
from .readfiles import HashOnly, Progress, read_paths
from .repository.packs import PackWriter, read_generation
from .repository.repo import Repository
from .roots import resolve_root
from .settings import ScopeSettings
from .stamps import Key
from .vocab import SnapshotKind

if TYPE_CHECKING:
    from .restore.journal import Recovery

CACHE_SAVE_INTERVAL = 60.0  # a watched (long-running) workspace saves its stat cache at most this often


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
    reused: bool = False  # `id` is the workspace's latest snapshot, which holds this map already: nothing written

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




def _covers_what_was_covered(state: walkstate.WalkState, grow: bool, known: list[str], git_paths: list[str]) -> bool:
    """Would a walk now cover exactly what the saved walk covered (so, nothing having moved, give its map)?

    Growing, it covers the Git listing, `known` and what the latest snapshot captured: the saved walk's paths when
    each of them was Git-tracked or captured and `known` adds none. A thread's capture covers the Git listing and
    `known` only: the same set, or a path covered then and not now (another thread's) might be held back now, and
    one covered now and not then might be captured though the saved walk skipped it.
    """
    covered = state.covered_set()
    if grow:
        return state.grows_same and (not known or covered.issuperset(known))
    return covered == {*git_paths, *known}


def _narrowed(last: fastpath.LastCapture, covered_now: set[str], settings: ScopeSettings,
              ignore: scope_mod.Ignore) -> fastpath.LastCapture | None:
    """The journal's last capture as a thread's capture covering `covered_now` starts from, or None (walk).

    The last capture may have covered another thread's paths (one session, several threads): kept covered, this
    thread's snapshot would hold that thread's files whatever the limits, and a rewind of it would put them back.
    A walk covering `covered_now` would give the same map only where walkstate.same_map says so.
    """
    if covered_now == last.covered:
        return last
    if not walkstate.same_map(last.covered, covered_now, last.files, set(captured_paths(last.files)), settings,
                              ignore):
        return None
    return dataclasses.replace(last, covered=last.covered & covered_now, facts=None, touched=None)


class Capturer:
    """Captures workspaces into one repository, keeping per workspace what the next capture reuses."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._git: dict[str, scope_mod.GitTracked] = {}
        self._indexes: dict[str, WorkspaceIndex] = {}
        self._watched: dict[str, fastpath.Watched] = {}
        #: A change monitor that outlives this process (detect/monitor.py), where the caller wants one (use_monitors).
        self.monitor: monitor.ChangeSource | None = None
        repo.on_gc.append(self._forget_last)

    def use_monitors(self, wanted: bool) -> None:
        """Ask each workspace's change monitor before a capture, starting one where none answers, when `wanted` (the
        user's setting, `CODEXR_MONITOR`) and one can run here (detect/monitor_launch.py)."""
        from .detect import monitor_launch  # here: sockets and peer checks only for a process that uses them

        self.monitor = monitor_launch.Launcher() if wanted and monitor_launch.available() else None

    def _forget_last(self) -> None:
        """A gc ran: a journal's last file map names blobs it may have freed, so the next capture walks."""
        for w in self._watched.values():
            w.last = None

    def close(self) -> None:
        """Save the workspace indexes and stop the change journals."""
        for index in self._indexes.values():
            with contextlib.suppress(OSError):
                index.save()
        for w in self._watched.values():
            w.journal.close()
        self._watched.clear()

    def index(self, root: Path) -> WorkspaceIndex:
        """The workspace's index (a restore tells it the paths it rewrote)."""
        key = workspace_key(str(root))
        index = self._indexes.get(key)
        if index is None:
            index = WorkspaceIndex(self.repo.cache_file(root, ".index"),
                                   legacy=(self.repo.cache_file(root, ".stat"), self.repo.cache_file(root, ".walk")))
            self._indexes[key] = index
        return index

    def _git_cache_path(self, root: Path) -> Path:
        """Where the workspace's Git listing is kept between processes (FORMAT.md §7)."""
        return self.repo.cache_file(root, ".git")

    # ----------------------------------------------------------------- change journal
    def watch(self, root: str | os.PathLike[str]) -> bool:
        """Keep an inotify change journal for this workspace so later captures can skip the walk.

        Meant for long-running processes (the session); returns False where inotify is missing.
        """
        ws = self.repo.workspace(root)
        if str(ws) in self._watched:
            return True
        from .detect.inotify import ChangeJournal  # here: inotify_simple (ctypes) is for long-running processes only

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
        """A capture whose caller needs only its id and counts (a one-shot command): when nothing changed its
        `files` and `stats` may be empty, and no manifest is decoded."""
        return self._run(root, label=label, known_paths=known_paths, scope=scope, progress=progress,
                         summary_only=True)

    def capture_thread_summary(self, root: str | os.PathLike[str], *, known_paths: Iterable[str],
                               thread_latest: str | None = None, label: str | None = None,
                               scope: ScopeSettings | None = None, kind: str = SnapshotKind.CAPTURE,
                               progress: Progress | None = None) -> CaptureResult:
        """`capture_thread` for a caller that needs only the snapshot's id and counts (a turn's capture): when
        nothing changed and the thread covers what the saved walk covered, its `files` and `stats` are empty and
        no manifest is decoded.

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
               label: str, progress: Progress | None = None,
               whatever_size: Callable[[str], bool] | None = None) -> CaptureResult:
        """A restore's safety capture, stored before anything is touched: every path it may write or delete
        (`known_paths`), and the files for which `whatever_size` is true whatever the residue limits say."""
        return self._run(root, label=label, known_paths=known_paths, scope=scope, kind=SnapshotKind.SAFETY,
                         progress=progress, whatever_size=whatever_size)

    def safety_preview(self, root: str | os.PathLike[str], *, known_paths: Iterable[str],
                       scope: ScopeSettings | None, progress: Progress | None = None,
                       whatever_size: Callable[[str], bool] | None = None) -> CaptureResult:
        """What `safety` would hold (a dry-run restore plans against it), hashed in memory: nothing stored."""
        return self._run(root, known_paths=known_paths, scope=scope, kind=SnapshotKind.SAFETY, progress=progress,
                         whatever_size=whatever_size, dry_run=True)

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
        started = time.perf_counter()
        started_ns = time.time_ns()
        ws = self.repo.workspace(root)
        settings = scope or ScopeSettings()
        with translate_os_errors(f"capture of {ws}"), self.repo.shared_lock():
            # Asked before anything of the workspace is looked at (a recovery writes, the ignore rules are read):
            # whatever changes from here on is in the next answer.
            asked = self._ask_monitor(ws) if self.monitor is not None and not dry_run else None
            recovered = None if dry_run else self._recover_if_idle(ws)
            ignore = scope_mod.Ignore.load(ws)
            key = str(ws)
            known_git = self._git.get(key)
            if known_git is None:  # a fresh process: the listing the last capture saved, if the index is unchanged
                known_git = scope_mod.GitTracked.load(self._git_cache_path(ws))
            git = scope_mod.git_tracked(ws, known_git)
            self._git[key] = git
            if not dry_run:
                # A capture killed between its snapshot file and its ref line: that snapshot is finished (then it is
                # the newest, the parent this capture grows from, reuses or checks the saved walk against) or dropped.
                self.repo.finish_commits(ws)
            parent = self.repo.latest(ws)
            known = list(known_paths)
            # A thread's own newest snapshot is the workspace's: growing from the parent adds exactly what the thread
            # captured before (and lets an unchanged tree skip the decoding). Another one's map is decoded here.
            strict = thread_latest is not None and thread_latest == parent
            if strict:
                grow = True
            elif thread_latest is not None:
                known.extend(captured_paths(self.repo.files(thread_latest)))  # damaged: an error, not fewer paths
            watched = self._watched.get(key) if not dry_run else None  # a long-running process's inotify journal
            # No journal, or one that has seen nothing yet (a session's first capture): check the last walk's
            # saved stats instead of walking (a one-shot command, the first turn of a session).
            checked = None
            if (watched is None or watched.last is None) and not dry_run and parent is not None:
                checked = self._check_walk(ws, parent, settings, git.signature,
                                           watched.journal if watched is not None else None, asked)
            elif watched is not None and not watched.pending and asked is not None and parent is not None:
                # A session's journal says what changed since its last capture, but only the monitor's answer leaves
                # a token bound for the next process: used when it settles everything, else the journal as before.
                checked = self._check_walk(ws, parent, settings, git.signature, watched.journal, asked,
                                           monitor_only=True)
            # Nothing moved and a walk would cover what the saved one did: the parent's map, recorded again without
            # decoding it. A session's journal with no capture yet (`codexr exec`'s pre-turn) stays without one: its
            # next capture checks again.
            if (checked is not None and parent is not None and summary_only and whatever_size is None
                    and recovered is None and checked.check.unchanged
                    and (watched is None or (watched.last is None and not watched.pending))
                    and _covers_what_was_covered(checked.state, grow, known, git.paths)):
                done = self._unchanged(ws, checked, parent, kind, label, started, started_ns, reuse)
                if done is not None:
                    self._bind_monitor(ws, asked, checked.state.snapshot)
                    self._save_git_listing(ws, git, known_git)
                    return done
            parent_files: FileMap | None = None
            if parent is not None:
                try:
                    parent_files = self.repo.files(parent)
                except StoreError:
                    if strict:
                        raise  # the thread's tracked set is unknown: capturing less would forget paths
                    parent, parent_files, checked = None, None, None
            # A session's journal whose last capture made the parent's map: what growing adds to the fast path's
            # known paths is what that capture held outside its covered set (the rest is covered already), not
            # every captured path (~2 passes over 11,000 paths saved per capture).
            own = (checked is None and watched is not None and watched.last is not None
                   and watched.last.facts is not None and parent_files is not None
                   and watched.last.files is parent_files)
            parent_captured: list[str] = []
            if own:
                assert watched is not None and watched.last is not None and watched.last.facts is not None
                fast_known = [*known, *watched.last.facts.outside] if grow else known
            else:
                parent_captured = captured_paths(parent_files) if parent_files is not None else []
                if grow:
                    known.extend(parent_captured)
                fast_known = known
            # What changed since the last capture: the check's look at the saved index, or the inotify journal.
            since: fastpath.Since | None = None
            by_check = False  # the fast path starts from the check's look (else from the journal, or walks)
            if checked is not None and parent_files is not None and not checked.check.changes.structural:
                covered_now = {*git.paths, *known}  # what a walk would capture whatever the limits
                captured_then = set(parent_captured)
                if walkstate.same_map(checked.state.covered_set(), covered_now, parent_files, captured_then, settings,
                                      ignore):
                    # Covered then and now: what the fast path settles newly known paths against.
                    last = self._checked_last(checked, parent_files, captured_then,
                                              checked.state.covered_set() & covered_now, git.signature, settings)
                    if last is not None:
                        since = fastpath.Since(last, checked.check.changes)
                        by_check = True
                else:
                    checked = None  # other known paths would change the map: walk
            if since is None and watched is not None and watched.last is not None:
                last = watched.last if grow else _narrowed(watched.last, {*git.paths, *known}, settings, ignore)
                if last is not None:  # else walk: the journal's events are dropped with its reset
                    since = fastpath.Since(last, watched.journal.drain(), watched.pending)
            index = self.index(ws)
            cache = index.stat
            sink = HashOnly() if dry_run else self.repo.blob_writer()
            state: fastpath.LastCapture | None = None
            fast: fastpath.Selection | None = None
            selected: scope_mod.Scope | None = None
            try:
                if since is not None:
                    if isinstance(sink, PackWriter) and (since.changes.files or since.pending):
                        sink.load_index()  # files to read: loaded before the directories' fds are held
                    with DirCache(key) as dirs:  # the fast path's looks and its reads use the same fds
                        fast = fastpath.select(dirs, since, fast_known, git.signature, settings, ignore,
                                               whatever_size)
                        if fast is not None:
                            # From the check, every file to read moved since the saved walk, whose keys the stat
                            # cache shares, or was held back then (never cached): no lookup can hit, and the first
                            # would decode the whole per-path half (~50 MB at 100,000 files, measured).
                            captured = read_paths(dirs, fast.to_read, sink, StatCache(None) if by_check else cache,
                                                  progress)
                            state = fastpath.merge(fast, captured)
                            skipped = captured.skipped
                walked = state is None
                if state is None:
                    if isinstance(sink, PackWriter):
                        sink.load_index()  # before the walk holds its directories' fds (a low RLIMIT_NOFILE)
                    if watched is not None:
                        watched.journal.reset()
                    if own and grow:
                        assert parent_files is not None
                        known.extend(captured_paths(parent_files))  # a walk covers every path the parent captured
                    with DirCache(key) as dirs:  # the walk and the reads see the same directories
                        selected = scope_mod.select(ws, settings, ignore, git.paths, known,
                                                    protected=self.repo.protected_rel(ws),
                                                    protected_ids=self.repo.protected_ids,
                                                    on_dir=watched.journal.watch_dir if watched is not None else None,
                                                    force=whatever_size, dirs=dirs)
                        captured = read_paths(dirs, selected.to_capture, sink, cache, progress)
                    files = selected.entries
                    files.update(captured.entries)
                    skipped = selected.skipped + captured.skipped
                    covered = frozenset(selected.covered)
                    unwatched = fastpath.unwatched_after_walk(files, covered, selected.to_capture, selected.linked)
                    # Held in `files`, `covered` and the stats from here: their tables would only add to the peak
                    # that writing the snapshot and the index reaches (~5 MB each at 100,000 files).
                    captured.entries, selected.to_capture, selected.covered = {}, {}, set()
                    state = fastpath.LastCapture(files, captured.fresh, captured.stats, covered, unwatched,
                                                 git.signature, settings, time.monotonic())
                files, stats = state.files, state.stats
                if state.facts is None:
                    state.facts = MapFacts.of(files, state.covered)
                facts = state.facts
                skipped = [*skipped, *scope_mod.too_large_skipped(facts.too_large, skipped,
                                                                  settings.residue_max_file_bytes)]
                result = CaptureResult(
                    id="", root=key, file_count=facts.file_count,
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
            # The listing is true whatever happens to this capture from here; saved before the snapshot's maps are
            # encoded, its encoding (~8 MB at 100,000 paths) does not add to their peak.
            self._save_git_listing(ws, git, known_git)
            result.bytes_stored = sink.bytes_stored
            result.stored_blobs = frozenset(sink.stored)
            sink.stored = set()  # the frozenset is the one copy kept (a second was ~4 MB at 100,000 blobs)
            # The fast path knows where the map moved: when it started from the parent's own map, the delta is
            # those entries that differ (a whole-map comparison was ~2 ms of every session capture).
            changes = None
            if not walked and fast is not None and parent_files is not None and fast.last.files is parent_files:
                assert state.touched is not None
                changes = delta(parent_files, files, among=state.touched)
            elif reuse and parent_files is not None:
                changes = delta(parent_files, files)  # compared once: the reuse below and the record share it
            if reuse and parent is not None and parent_files is not None and recovered is None and not changes:
                result.id, result.unchanged, result.reused = parent, True, True
                self.repo.remember(parent, files)  # the next capture's journal starts from this very map
            else:
                result.id, result.unchanged = self.repo.write_snapshot(ws, files, parent, parent_files, kind, label,
                                                                   result.file_count, changes)
            if watched is not None:
                watched.last = state
                watched.pending.clear()
            # What the next process checks instead of walking: from this walk, or the state this capture started
            # from with the files it read again (a check's, or the one a session saved at its last capture).
            if selected is not None:
                base = None
            elif by_check and checked is not None:
                base = checked.state
            else:
                base = watched.saved if watched is not None else None
            from_check = checked is not None and base is checked.state
            saved = self._save_walk(ws, result, state, selected, base,
                                    checked.check.keys if checked is not None and from_check else {},
                                    checked.check.dir_keys if checked is not None and from_check else {},
                                    captured.stats, git.paths, started_ns)
            if watched is not None:
                watched.saved = saved
            # The token vouches for a walk saved from this capture's own look (a walk or a check); one a journal
            # updated is not bound (the journal saw what the token's monitor may not have).
            bound = saved.snapshot if saved is not None and (selected is not None or by_check) else None
            # Nothing keeps a one-shot capture's walk state, the walk's stats or its fresh hashes (the index holds
            # them from here): dropped before the per-path half is built and the index encoded, they were ~40 MB of
            # the cold 100,000-file capture's peak RSS.
            if watched is None:
                saved, selected = None, None
            if walked:
                cache.update(state.fresh, started_ns)
            else:
                cache.update_some(captured.entries, captured.fresh, started_ns)
            if watched is None:
                state, captured.fresh = None, {}
            # One write of the index for both halves. A restore's safety capture leaves the per-path half to the
            # restore's end (close): it forgets the paths it rewrites right after, and saving it twice cost ~40-70 ms
            # of a one-file restore (11,000 files, measured); a watched workspace saves it at most once a minute.
            per_path = kind != SnapshotKind.SAFETY and (
                watched is None or time.monotonic() - cache.saved_at > CACHE_SAVE_INTERVAL)
            with contextlib.suppress(OSError):
                index.save(per_path=per_path)  # disposable: the snapshot is already committed
            # After the index is written: the binding names the index file that holds this walk.
            self._bind_monitor(ws, asked, bound)
        result.seconds = time.perf_counter() - started
        return result

    # ----------------------------------------------------------------- the change monitor (monitor.py)
    def _ask_monitor(self, ws: Path) -> monitor.Asked | None:
        """The monitor's answer since the token bound to the saved walk (None: no monitor, or no answer)."""
        assert self.monitor is not None
        index = self.index(ws)
        identity = monitor.walk_identity(index.path)
        bound = monitor.bound_token(self.repo.cache_file(ws, ".mon"), identity)
        answer = self.monitor.ask(str(ws), bound[0] if bound is not None else None)
        if answer is None:
            return None
        return monitor.Asked(answer, identity if bound is not None else None, bound[1] if bound is not None else None)

    def _bind_monitor(self, ws: Path, asked: monitor.Asked | None, snapshot: str | None) -> None:
        """Bind the token asked before this capture to the walk it saved, for `snapshot` (None: unbind, the next capture
        checks). The binding names the walk's snapshot: should another capture of the workspace have saved its own
        walk in between, the next capture finds another snapshot in the file and checks every stat."""
        if asked is None:
            return
        path = self.repo.cache_file(ws, ".mon")
        if snapshot is not None:
            monitor.bind(path, asked.answer.token, self.index(ws).path, snapshot)
        else:
            monitor.forget(path)

    def _save_git_listing(self, ws: Path, git: scope_mod.GitTracked, known: scope_mod.GitTracked | None) -> None:
        if git is not known:
            with contextlib.suppress(OSError):
                git.save(self._git_cache_path(ws))  # disposable too

    # ----------------------------------------------------------------- the last walk, between processes
    def _check_walk(self, ws: Path, parent: str, settings: ScopeSettings, git_signature: tuple[int, ...] | None,
                    journal: fastpath.Journal | None, asked: monitor.Asked | None = None,
                    monitor_only: bool = False) -> walkstate.Checked | None:
        """The saved walk, if it describes `parent`'s files under these rules, with a fresh look at its stats.

        A `journal` gets a watch on every saved directory before the look, so that nothing changed after the
        look goes unseen by the captures that follow (the order a walk keeps: watch, then list). The look is the
        monitor's answer where it is about this very walk and settles everything (`asked`), else every stat;
        `monitor_only`: the answer or nothing.
        """
        state = self.index(ws).saved_walk()
        if state is None or not state.same_rules(settings, git_signature, self.repo.protected_rel(ws)):
            return None
        chain = self._unchanged_since(parent, state.snapshot, str(ws))
        if chain is None:
            return None
        # Unchanged files keep the blobs they had without asking the blob index (a walk would, through the stat
        # cache): only while no gc ran and no pack index the capture relied on went away or changed.
        if not walkstate.packs_hold(state.packs, walkstate.pack_signature(self.repo.path / "packs",
                                                                         read_generation(self.repo.path))):
            return None
        if journal is not None:
            for rel in state.dirs[1]:
                journal.watch_dir(rel)
        with DirCache(str(ws)) as dirs:
            look = None
            if (asked is not None and asked.answer.changes is not None and asked.identity is not None
                    and monitor.walk_identity(self.index(ws).path) == asked.identity  # the walk just loaded
                    and state.snapshot == asked.snapshot):  # and the one the token's capture saved
                look = monitor.check_since(dirs, state, asked.answer.changes)
            if look is None:
                if monitor_only:
                    return None
                look = walkstate.check(dirs, state)
            return walkstate.Checked(state, look, chain)

    def _unchanged_since(self, snap: str, base: str, root: str) -> int | None:
        """Unchanged snapshots between `base` and `snap` (None: `snap` may not hold `base`'s files)."""
        for steps in range(walkstate.CHAIN_LIMIT + 1):
            if snap == base:
                return steps
            try:
                rec = self.repo.record(snap)
            except StoreError:
                return None
            if rec.changes or rec.parent is None or rec.root != root:
                return None
            snap = rec.parent
        return None

    def _checked_last(self, checked: walkstate.Checked, parent_files: FileMap, captured: set[str],
                      covered: frozenset[str], git_signature: tuple[int, ...] | None,
                      settings: ScopeSettings) -> fastpath.LastCapture | None:
        """The last capture as the check vouches for it: the fast path re-reads only the files whose stat moved.

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
        return fastpath.LastCapture(parent_files, {}, stats, covered, dict(state.unwatched),
                                    git_signature, settings, time.monotonic())

    def _unchanged(self, ws: Path, checked: walkstate.Checked, parent: str, kind: str, label: str | None,
                   started: float, started_ns: int, reuse: bool) -> CaptureResult | None:
        """Nothing moved since `parent`: record that, without decoding a manifest (None: do the full capture);
        `reuse`: `parent` is the answer, nothing is written but the walk's moved directories."""
        state = checked.state
        try:
            prev = self.repo.record(parent)
        except StoreError:
            return None  # the full capture decides what a damaged parent means
        moved = checked.check.dir_keys
        if reuse:
            snap_id, restart = parent, bool(moved)  # the chain does not grow: `parent` itself, no steps
        else:
            if prev.depth + 1 >= REBASE_DEPTH:
                return None  # this one rebases: written whole, so the map is needed
            rec = SnapshotRecord(root=str(ws), created=time.time(), kind=kind, label=label, parent=parent,
                                 depth=prev.depth + 1, changes={}, meta={"file_count": state.file_count})
            snap_id = self.repo.commit(rec)
            restart = bool(moved) or checked.chain + 1 >= walkstate.CHAIN_LIMIT
        if restart:  # else not rewritten: ~6 ms saved
            state.snapshot = snap_id  # a new chain starts here
            state.dirs = walkstate.with_dir_keys(state.dirs, {
                rel: walkstate.trusted(k, started_ns) for rel, k in moved.items()})
            self.index(ws).save_walk(state)
        return CaptureResult(id=snap_id, root=str(ws), file_count=state.file_count, bytes_hashed=0, bytes_stored=0,
                             seconds=time.perf_counter() - started, unchanged=True, skipped=list(state.skipped),
                             reused=reuse)

    def _save_walk(self, ws: Path, result: CaptureResult, state: fastpath.LastCapture,
                   selected: scope_mod.Scope | None, base: walkstate.WalkState | None, checked_keys: dict[str, Key],
                   moved_dirs: dict[str, Key], read: dict[str, Key], git_paths: list[str],
                   started_ns: int) -> walkstate.WalkState | None:
        """What this capture saw, for the next process (None: a walk nobody can check), set in the index (the
        capture writes it once, with the per-path half); return it."""
        index = self.index(ws)
        files = state.files

        def trusted(key: Key | None) -> Key | None:
            return walkstate.trusted(key, started_ns)

        assert state.facts is not None
        if not walkstate.savable(state.facts.unstable, result.skipped):
            index.set_walk(None)
            return None
        unwatched = {p: trusted(k) for p, k in state.unwatched.items()}
        packs = walkstate.pack_signature(self.repo.path / "packs", read_generation(self.repo.path))
        skipped = [(str(p), str(why)) for p, why in result.skipped]
        if selected is None:
            if base is None:
                index.set_walk(None)
                return None
            # No directory moved since `base` was saved (else this capture walked), so the same entries are there:
            # only the files read again get new keys (rebuilding the whole state cost ~30 ms of a one-file restore).
            # A file no longer captured keeps an entry: the next check just looks at it again. A new one (a session's
            # journal reports created files) moved its directory's stat: the next check walks.
            newly = {rel: trusted(read.get(rel, now)) for rel, now in checked_keys.items()}
            newly.update((rel, trusted(key)) for rel, key in read.items())
            # Every captured file must keep a key the next check looks at, or a change to it would go unseen.
            if any(is_captured(files.get(rel)) for rel in newly):
                looked = base.seen_paths()
                if any(is_captured(files.get(rel)) and rel not in looked and rel not in unwatched for rel in newly):
                    index.set_walk(None)
                    return None
            # Directories listed the same at the check: their new stats stand (racy ones untrusted).
            listed = walkstate.with_dir_keys(base.dirs, {rel: trusted(k) for rel, k in moved_dirs.items()})
            covered = frozenset(state.covered)
            # Sorting and marshalling 11,000 paths again is ~5 ms of every session capture: only when they moved.
            same = covered is base.covered_set() or covered == base.covered_set()
            blob = base.covered_blob if same else marshal.dumps(sorted(covered), 2)
            if same and base.grows_same and base.git_signature == state.git_signature and state.touched is not None:
                # Only the entries this capture moved can have stopped being captured (the covered set and the Git
                # listing are the base's): a pass over the whole covered set each capture was ~1-2 ms.
                grows = walkstate.grows_same(covered, git_paths, files, among=state.touched)
            else:
                grows = walkstate.grows_same(covered, git_paths, files)
            saved = dataclasses.replace(base, snapshot=result.id, packs=packs, dirs=listed,
                                        seen=walkstate.with_keys(base.seen, newly), unwatched=unwatched,
                                        covered_blob=blob, _covered=covered,
                                        file_count=result.file_count, skipped=skipped, grows_same=grows)
            index.set_walk(saved)
            return saved
        # Walked: every listed directory and stat'ed entry, racy ones untrusted.
        dirs: walkstate.Group = ("", list(selected.listed),
                                 b"".join(walkstate.pack_key(trusted(key)) for key in selected.listed.values()))
        seen = {rel: trusted(read.get(rel) or key) for rel, key in selected.seen.items()
                if walkstate.stat_bound(files, rel)}
        # Every captured file must be looked at by the next check, or a change to it would go unseen.
        if any(is_captured(e) and p not in seen and p not in unwatched for p, e in files.items()):
            index.set_walk(None)
            return None
        covered = frozenset(state.covered)
        saved = walkstate.WalkState(
            snapshot=result.id, settings=walkstate.settings_key(state.settings), git_signature=state.git_signature,
            protected=self.repo.protected_rel(ws), packs=packs, dirs=dirs, seen=walkstate.group(seen),
            covered_blob=marshal.dumps(sorted(covered), 2), unwatched=unwatched, file_count=result.file_count,
            skipped=skipped, listings=b"".join(selected.listing[rel] for rel in selected.listed),
            grows_same=walkstate.grows_same(covered, git_paths, files))
        index.set_walk(saved)
        return saved

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

    def notes(self, ws: Path) -> WorkspaceNotes:
        """What a restore of `ws` tells about its own writes: the stat cache forgets them, a journal absorbs them."""
        return WorkspaceNotes(self, ws)


@dataclass
class WorkspaceNotes:
    """The capturer's side of restore.journal.WorkspaceNotes for one workspace."""

    capturer: Capturer
    ws: Path

    def forget(self, paths: list[str]) -> None:
        self.capturer.index(self.ws).forget(paths)

    def absorb(self, written: dict[str, Entry], deleted: list[str], dirs_changed: bool) -> None:
        self.capturer.absorb_own_changes(self.ws, written, deleted, dirs_changed)
