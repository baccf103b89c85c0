"""The one door to change detection: a capture asks it what may have changed since the workspace's newest snapshot,
and tells it what it saw; a restore tells it what it wrote.

Behind the door (restic's archiver asks its parent snapshot the same question; dulwich's index.py is the one index):
* the workspace index (index.py): the stat cache per path and the saved walk per listed directory, one file; a check
  of the saved walk (walkstate.py) is the look of a process that keeps no journal (a one-shot command);
* a journal (journal.py: inotify on Linux, an FSEvents one would be a second implementation) that a long-running
  process keeps between its captures, with the last capture it vouches for: the fast path (fastpath.py) re-reads
  only what it reports;
* the change monitor (monitor.py, started by monitor_launch.py), whose token outlives processes: asked before
  anything of the workspace is looked at, it can settle a check by naming the only paths to look at.

Its verbs: `look` (one capture's questions, `Look`), `watch` and `unwatch` (a journal), `absorb` (a restore's own
writes) and `forget` (paths a restore rewrote) through `notes`, `forget_last` (a gc ran), `close`.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import marshal
import stat
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from .. import heap
from .. import scope as scope_mod
from ..dirfd import DirCache, DirChanged, SymlinkInPath
from ..errors import StoreError
from ..ids import workspace_key
from ..manifest import ABSENT, Entry, FileMap, captured_paths, is_captured
from ..readfiles import Captured
from ..records import NamedTuple, field, record, replace
from ..repository.packs import read_generation
from ..scope import IGNORE_FILE
from ..settings import ScopeSettings
from ..stamps import Key, stat_key
from ..vocab import SnapshotKind
from . import monitor, walkstate
from .changes import Changes
from .index import Prepared, StatCache, WorkspaceIndex, kept_entries
from .journal import Journal, open_journal

if TYPE_CHECKING:  # fastpath is imported where used: a capture answered unchanged never is (~1 ms of ~45)
    from ..readfiles import KnownContent
    from ..repository.repo import Repository
    from ..scope import GitTracked, Ignore, Scope
    from . import fastpath

CACHE_SAVE_INTERVAL = 60.0  # a watched (long-running) workspace saves its stat cache at most this often
#: Bytes a journal's fast path must read before its reads look in an undecoded stat cache: hashing that much costs about
#: what decoding 100,000 entries does (~0.1 s; issue 35)
REUSE_MIN_BYTES = 64 << 20
#: Seconds a session's capture leaves its index's save to a thread (`_Behind`): after a turn that changed files, the
#: walk's encoding and the index file's rewrite were ~39 of the capture's ~50 ms at 100,000 files (~6 of ~10 at
#: 11,000; issue 35 §1), paid while the turn waited; a restore right after a safety capture runs before it.
BEHIND_DELAY = 1.0


@record
class Watched:
    """One watched workspace: its journal, the last capture, and paths a restore wrote since."""

    journal: Journal
    last: fastpath.LastCapture | None = None
    pending: set[str] = field(default_factory=set)  # paths a restore wrote: re-read at the next capture
    saved: walkstate.WalkState | None = None  # what the last capture kept for the next process (walkstate.py)
    # `last` as a capture that found the files through the saved walk left it (one that read only changed files or
    # found none), built when first needed (Look.reread, Look.kept)
    deferred: _LastBuilt | None = None
    held: Changes | None = None  # the journal's events a look drained, for the fast path (`drain`)
    # The saved walk's covered bytes and the Git listing last found equal to them, both held (neither changes in place):
    # the session's next capture with the same two need not marshal 100,000 paths again (~10 ms; issue 35)
    same_listing: tuple[bytes, GitTracked] | None = None
    # The index file as this session last bound a token to its walk (monitor.walk_identity): a capture that does not
    # write the walk again binds its own token to that file only while it is still the one
    bound_walk: list[object] | None = None

    def settle(self) -> None:
        """Build the deferred last capture, if any (None from the builder: the next capture checks or walks)."""
        build, self.deferred = self.deferred, None
        if build is not None:
            self.last = build()

    def drain(self) -> Changes:
        """The journal's events since the last drain, with those a look drained and left to the fast path."""
        got = self.journal.drain()
        held, self.held = self.held, None
        if held is None:
            return got
        return Changes(held.files | got.files, held.structural or got.structural, held.paths | got.paths,
                       held.lost or got.lost)

    def reset(self) -> None:
        """A walk follows: the journal starts over, and the events a look drained go with it."""
        self.held = None
        self.journal.reset()

    def quiet(self) -> Changes | None:
        """While the last capture is still to be built, what the journal names since the saved walk when it names
        only files (changed, made or removed) or nothing: the capture goes on from the saved walk as a one-shot
        check would (Look.check), and the map is decoded only if files were made or removed (a turn that changed
        nothing waited ~0.5 s for it at 100,000 files, issue 35). None: the last capture is built now; the events
        stay `held` for the fast path either way."""
        if self.deferred is None or self.pending or self.saved is None:
            self.settle()
            return None
        self.held = changes = self.drain()
        if changes.structural or changes.lost:
            self.settle()
            return None
        return changes


class Start(NamedTuple):
    """Where a capture's look at the files starts: the fast path's (a last capture and what changed since), or a
    walk (`since` None)."""

    since: fastpath.Since | None
    known: list[str]  # the known paths as the fast path settles them (what growing adds, and the caller's)
    walk_known: list[str] | None  # the known paths a walk covers, when worked out already (None: the caller adds
    # what the parent captured)


class Found:
    """What a capture found of the files, the fast path's or a walk's, held in one place: once the snapshot is
    committed, the door lets go of what a one-shot process no longer needs (~40 MB at 100,000 files). (A plain class:
    a dataclass costs every process that imports it ~0.2 ms.)"""

    __slots__ = ("captured", "fast", "selected", "skipped", "state")

    def __init__(self, state: fastpath.LastCapture | None, captured: Captured, skipped: list[tuple[str, str]],
                 selected: Scope | None = None, fast: fastpath.Selection | None = None) -> None:
        self.state = state
        self.captured = captured
        self.skipped = skipped
        self.selected = selected  # the walk's (None: the fast path's)
        self.fast = fast  # the fast path's selection (None: walked)


class _Behind:
    """An index save (and the monitor's token bound to it), run by a timer thread `delay` after the capture (a
    session's: BEHIND_DELAY; a pre-turn capture's: at once), or by whoever needs the index as the file says first
    (`settle`: the next capture's look, close); one at a time, whichever thread comes second finding it done. Until
    it runs, the file holds the walk saved before: a process that reads it meanwhile checks the stats (the snapshot it
    names is not the newest), and one killed meanwhile leaves that walk, which the next process cannot use, so it
    walks: slower, never wrong."""

    def __init__(self, run: Callable[[], None], delay: float) -> None:
        self._run: Callable[[], None] | None = run
        self._lock = threading.Lock()
        self._timer = threading.Timer(delay, self.settle)
        self._timer.daemon = True
        self._timer.start()

    def settle(self) -> None:
        """Run it now unless it has run."""
        with self._lock:
            run, self._run = self._run, None
            self._timer.cancel()
            if run is not None:
                # Disposable, as the save always was (losing it costs a walk, never a wrong answer): whatever it
                # raises must neither print a thread's traceback over the app nor fail the next capture's look.
                with contextlib.suppress(Exception):
                    run()

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Nothing of it runs meanwhile (it may still be to run afterwards)."""
        with self._lock:
            yield


class ChangeDetector:
    """Change detection for the workspaces one repository captures: their indexes, journals and monitors."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self._indexes: dict[str, WorkspaceIndex] = {}
        self._watched: dict[str, Watched] = {}
        self._behind: dict[str, _Behind] = {}  # a workspace's index save left to a thread (by its key)
        #: A change monitor that outlives this process (monitor.py), where the caller wants one (use_monitors).
        self.monitor: monitor.ChangeSource | None = None

    def use_monitors(self, wanted: bool) -> None:
        """Ask each workspace's change monitor before a capture, starting one where none answers and one can run here
        (monitor_launch.py), when `wanted` (the user's setting, `CODEXR_MONITOR`)."""
        from . import monitor_launch  # here: sockets and peer checks only for a process that uses them

        self.monitor = monitor_launch.Launcher() if wanted else None

    def index(self, ws: Path) -> WorkspaceIndex:
        """The workspace's index, loaded once per process."""
        key = workspace_key(str(ws))
        index = self._indexes.get(key)
        if index is None:
            index = WorkspaceIndex(self.repo.cache_file(ws, ".index"),
                                   legacy=(self.repo.cache_file(ws, ".stat"), self.repo.cache_file(ws, ".walk")))
            self._indexes[key] = index
        return index

    def save_behind(self, ws: Path, run: Callable[[], None], delay: float) -> None:
        """Leave a workspace's index save to a thread (`_Behind`) `delay` seconds on, after the one left before it has
        run."""
        self.settle(ws)
        self._behind[workspace_key(str(ws))] = _Behind(run, delay)

    def settle(self, ws: Path | None = None) -> None:
        """Run the index saves left to a thread now (of `ws`, or every workspace's)."""
        keys = [workspace_key(str(ws))] if ws is not None else list(self._behind)
        for key in keys:
            behind = self._behind.pop(key, None)
            if behind is not None:
                behind.settle()

    # ----------------------------------------------------------------- journals
    def watch(self, ws: Path, kind: str | None = None) -> bool:
        """Keep a change journal of this workspace so later captures can skip the walk (`kind`: journal.KINDS, else
        this platform's).

        Meant for long-running processes (the session); False where this platform has no journal.
        """
        if str(ws) in self._watched:
            return True
        journal = open_journal(str(ws), kind)
        if journal is None:
            return False
        self._watched[str(ws)] = Watched(journal)
        return True

    def watching(self, ws: Path) -> bool:
        """Whether a journal of this workspace is kept."""
        return str(ws) in self._watched

    def unwatch(self, ws: Path) -> None:
        """Stop the change journal of a workspace."""
        self.settle(ws)
        w = self._watched.pop(str(ws), None)
        if w is not None:
            w.journal.close()

    # ----------------------------------------------------------------- what a restore tells
    def notes(self, ws: Path) -> Notes:
        """What a restore of `ws` tells about its own writes (restore.journal.WorkspaceNotes)."""
        return Notes(self, ws)

    def forget(self, ws: Path, paths: list[str]) -> None:
        """A restore rewrote these paths: the index never vouches for what it said of them (not while a save left to a
        thread runs: both touch the per-path half; one still to run comes after, and writes what this left)."""
        behind = self._behind.get(workspace_key(str(ws)))
        with behind.held() if behind is not None else contextlib.nullcontext():
            self.index(ws).forget(paths)

    def absorb(self, ws: Path, written: dict[str, Entry], deleted: list[str], dirs_changed: bool) -> None:
        """After a restore, fold its own writes into the journal's last capture instead of re-walking."""
        from . import fastpath

        w = self._watched.get(str(ws))
        if w is not None:
            w.settle()
        if w is None or w.last is None:
            return
        w.last = fastpath.absorbed(w.last, w.drain(), written, deleted, dirs_changed)
        if w.last is not None:
            w.pending.update(written)

    def build_ahead(self, ws: Path) -> None:
        """Start building what the workspace's next capture goes on from, where a capture left it to be built
        (Look.reread), on a thread: for a session to call once the turn has started."""
        w = self._watched.get(str(ws))
        if w is not None and w.deferred is not None:
            w.deferred.start()

    def forget_last(self) -> None:
        """A gc ran: a journal's last file map names blobs it may have freed, so the next capture walks."""
        for w in self._watched.values():
            w.last = w.deferred = None

    def release(self) -> None:
        """Save the indexes of the workspaces no journal watches and let them go: a one-shot command done capturing
        (each keeps its encoded halves for the next save, ~30 MB at 100,000 files), before what it runs next (an
        automatic gc) holds its own beside them."""
        self.settle()
        for key, index in list(self._indexes.items()):
            if not any(workspace_key(ws) == key for ws in self._watched):
                with contextlib.suppress(OSError):
                    index.save()
                del self._indexes[key]

    def close(self) -> None:
        """Save the workspace indexes and stop the change journals."""
        self.settle()
        for index in self._indexes.values():
            with contextlib.suppress(OSError):
                index.save()
        for w in self._watched.values():
            w.journal.close()
        self._watched.clear()

    # ----------------------------------------------------------------- a capture's questions
    def look(self, ws: Path, *, started_ns: int, dry_run: bool) -> Look:
        """One capture's questions, from now on: the monitor (if any) is asked first, before anything of the workspace
        is looked at (a recovery writes, the ignore rules are read), so whatever changes from here is in its next
        answer. A dry run (nothing stored) asks no monitor and uses no journal. The last capture's index save, if a
        thread still has it to do, is done first: the token and the walk are read as the file has them."""
        self.settle(ws)
        asked = self._ask_monitor(ws) if self.monitor is not None and not dry_run else None
        watched = self._watched.get(str(ws)) if not dry_run else None
        quiet = watched.quiet() if watched is not None else None
        return Look(self, ws, started_ns, dry_run, asked, watched, quiet)

    def _ask_monitor(self, ws: Path) -> monitor.Asked | None:
        """The monitor's answer since the token bound to the saved walk (None: no monitor, or no answer)."""
        assert self.monitor is not None
        identity = monitor.walk_identity(self.index(ws).path)
        bound = monitor.bound_token(self.repo.cache_file(ws, ".mon"), identity)
        answer = self.monitor.ask(str(ws), bound[0] if bound is not None else None)
        if answer is None:
            return None
        return monitor.Asked(answer, identity if bound is not None else None, bound[1] if bound is not None else None)


@record
class Notes:
    """The door's side of restore.journal.WorkspaceNotes for one workspace."""

    door: ChangeDetector
    ws: Path

    def forget(self, paths: list[str]) -> None:
        self.door.forget(self.ws, paths)

    def absorb(self, written: dict[str, Entry], deleted: list[str], dirs_changed: bool) -> None:
        self.door.absorb(self.ws, written, deleted, dirs_changed)


class Look:
    """One capture's questions to the door, in the order it asks them: `check` the saved walk (when no journal can
    say), `unchanged` (the parent's map stands: `kept` then names it), else `start` (the last capture and what changed
    since, or a walk), `select` and `merged` (the fast path) or `before_walk` and `walked`, and at last `remember`."""

    def __init__(self, door: ChangeDetector, ws: Path, started_ns: int, dry_run: bool, asked: monitor.Asked | None,
                 watched: Watched | None, quiet: Changes | None = None) -> None:
        self.door, self.ws, self.started_ns, self.dry_run = door, ws, started_ns, dry_run
        self.asked, self.watched = asked, watched
        self.quiet = quiet  # a session's journal named only these files since its saved walk (Watched.quiet)
        self.index = door.index(ws)
        self.index.keep_decoded = watched is not None  # a session's next capture reuses the decoded saved walk
        self.checked: walkstate.Checked | None = None
        self.by_check = False  # the fast path starts from the check's look (else from the journal's, or walks)
        self.cache: StatCache | None = None  # the stat cache as the index holds it when `start` looked
        self.prepared: Prepared | None = None  # the index a one-shot walk wrote before its snapshot (`prepare`)
        self.saved_covered: list[str] | None = None  # the saved walk's covered paths as `tombstones_only` decoded them
        #: paths the saved walk covered and a thread's capture does not, whose files it takes all the same
        #: (`_covers_what_was_covered`): the recent-file rule counts them
        self.extra: frozenset[str] = frozenset()

    def check(self, parent: str | None, settings: ScopeSettings, git_signature: tuple[int, ...] | None) -> None:
        """Look at the saved walk's stats when no journal has seen a capture yet (a one-shot command, a session's
        first capture). A session whose journal holds its last capture goes on from that alone: the monitor's answer
        as a check's look rebuilt the last capture from the saved walk (~0.35 s of the post-turn capture of a
        `codexr exec` whose pre-turn one read a file made by hand, 100,000 files; issue 35), and the token it leaves
        is bound to the walk the journal keeps as well (`_bind`)."""
        w = self.watched
        if parent is None or self.dry_run:
            return
        if self.quiet is not None:
            self.checked = self._check_quiet(parent, settings, git_signature)
            if self.checked is not None:
                return
            self.settle()
        if w is None or w.last is None:
            self.checked = self._check_walk(parent, settings, git_signature, w.journal if w is not None else None)

    def _check_walk(self, parent: str, settings: ScopeSettings, git_signature: tuple[int, ...] | None,
                    journal: Journal | None) -> walkstate.Checked | None:
        """The saved walk, if it describes `parent`'s files under these rules, with a fresh look at its stats.

        A `journal` gets a watch on every saved directory before the look, so that nothing changed after the look
        goes unseen by the captures that follow (the order a walk keeps: watch, then list). The look is the monitor's
        answer where it is about this very walk and settles everything, else every stat.
        """
        state = self.index.saved_walk()
        chain = None if state is None else self._chain_below(state, parent, settings, git_signature)
        if state is None or chain is None:
            return None
        if journal is not None:
            for rel in state.dirs[1]:
                journal.watch_dir(rel)
        asked = self.asked
        with DirCache(str(self.ws), folding=self.door.repo.folding(self.ws)) as dirs:
            look = None
            try:
                if (asked is not None and asked.answer.changes is not None and asked.identity is not None
                        and monitor.walk_identity(self.index.path) == asked.identity  # the walk just loaded
                        and state.snapshot == asked.snapshot):  # and the one the token's capture saved
                    look = monitor.check_since(dirs, state, asked.answer.changes)
                if look is None:
                    look = walkstate.check(dirs, state)
            except walkstate.DamagedWalk:
                return None  # its groups, decoded only now, are not clean: walk
            return walkstate.Checked(state, look, chain)

    def _chain_below(self, state: walkstate.WalkState, parent: str, settings: ScopeSettings,
                     git_signature: tuple[int, ...] | None) -> int | None:
        """How many unchanged snapshots lie between a saved walk and `parent`, if it describes `parent`'s files under
        these rules (None: it cannot be used)."""
        repo = self.door.repo
        if not state.same_rules(settings, git_signature, repo.protected_rel(self.ws)):
            return None
        chain = _unchanged_since(repo, parent, state.snapshot, str(self.ws))
        # Unchanged files keep the blobs they had without asking the blob index (a walk would, through the stat
        # cache): only while no gc ran and no pack index the capture relied on went away or changed.
        if chain is None or not walkstate.packs_hold(state.packs, _packs(repo)):
            return None
        return chain

    def _check_quiet(self, parent: str, settings: ScopeSettings, git_signature: tuple[int, ...] | None
                     ) -> walkstate.Checked | None:
        """The session's saved walk with what its journal named since as the check's look: what `_check_walk` would
        find, without a stat of every file (the journal has watched every saved directory since before that walk's
        look) but the paths no watch reports on. None: the last capture is wanted (`settle`)."""
        w, quiet = self.watched, self.quiet
        assert w is not None and w.saved is not None and quiet is not None
        state, repo = w.saved, self.door.repo
        chain = self._chain_below(state, parent, settings, git_signature)
        if chain is None:
            return None
        # No keys for the journal's files: only a capture that reads them all again goes on from this look.
        look = walkstate.Check(Changes(set(quiet.files), False, set(quiet.paths), False), {})
        if state.unwatched:
            with DirCache(str(self.ws), folding=repo.folding(self.ws)) as dirs:
                walkstate.look_unwatched(dirs, state, look)
            if look.changes.structural:
                return None
        return walkstate.Checked(state, look, chain)

    def settle(self) -> None:
        """The capture goes on from the last capture after all (files made or removed, or one the parent did not
        capture): built now, the journal's events since (held) go to the fast path, not a look from the saved walk."""
        if self.quiet is not None:
            assert self.watched is not None
            self.quiet = self.checked = None
            self.watched.settle()

    def unchanged(self, grow: bool, known: list[str], git: GitTracked, settings: ScopeSettings,
                  ignore: Ignore) -> walkstate.Checked | None:
        """The check found nothing moved and a walk would give the map the saved one did: the parent's map holds and
        can be recorded again without decoding it (None: look further). A session's journal goes on from the saved
        walk (`kept`), its map built only when a capture needs it."""
        checked, w = self.checked, self.watched
        if checked is None or not checked.check.unchanged:
            return None
        if w is not None and (w.last is not None or w.pending):
            return None
        return checked if self._covers(checked, grow, known, git, settings, ignore) else None

    def _covers(self, checked: walkstate.Checked, grow: bool, known: list[str], git: GitTracked,
                settings: ScopeSettings, ignore: Ignore) -> bool:
        """`_covers_what_was_covered`, the paths it covered besides kept in `extra`."""
        extra = _covers_what_was_covered(checked, grow, known, git, self.watched, settings, ignore)
        self.extra = extra if extra is not None else frozenset()
        return extra is not None

    def kept(self, checked: walkstate.Checked, snap_id: str, chained: bool, ground: Reread,
             kind: str = SnapshotKind.CAPTURE) -> None:
        """The capture recorded the parent's map as `snap_id` (`chained`: a new snapshot on top of the parent; else
        the parent itself). The saved walk names it when a directory's stat moved, the chain grew long or this capture
        covered less (`extra`: from here the saved walk covers what it did) (else it is not rewritten: ~6 ms saved),
        and the monitor's token is bound to the walk. A session's journal goes on from
        the saved walk, its last capture built when first needed (Watched.quiet). A pre-turn capture's walk is
        written by a thread, as `_save_index` leaves it (the turn waits for the snapshot alone), unless the journal
        vouched for it (a session's later capture: its binding goes as below)."""
        state, moved, w = checked.state, checked.check.dir_keys, self.watched
        rewritten = bool(moved) or (chained and checked.chain + 1 >= walkstate.CHAIN_LIMIT) or bool(self.extra)
        if self.extra:  # what this capture covered from now on: the next capture like it compares bytes (~3 ms)
            covered = state.covered_set().difference(self.extra)  # the set `extra` was found with, before it changes
            state.covered_blob, state._covered = walkstate.covered_without(state.covered, self.extra), covered
        vouched = w is not None and self.quiet is not None  # by the journal, up to this capture's look
        behind = rewritten and kind == SnapshotKind.PRE_TURN and not vouched
        if rewritten:
            state.snapshot, state.looked_ns = snap_id, self.started_ns  # a new chain starts here
            state.dirs = walkstate.with_dir_keys(state.dirs, {
                rel: walkstate.trusted(k, self.started_ns) for rel, k in moved.items()})
            if behind:
                self.index.set_walk(state)  # written with the binding below, by a thread (`_save_behind`)
            else:
                self.index.save_walk(state)
        if vouched:
            assert w is not None
            # The journal vouched for the saved walk up to this capture's look, after the token was asked: the token
            # is bound to it (written again or not). The map to build is this snapshot's too.
            w.held = None
            if w.deferred is not None:
                w.deferred.snapshot = snap_id
            if rewritten:
                self._bind(state.snapshot)
            else:
                self._bind_unwritten(state.snapshot)
            return
        if w is not None:
            w.saved = state
            w.deferred = _LastBuilt(self.door.repo, snap_id, functools.partial(
                _last_after_reread, self.door.repo, checked, Captured(), ground))
        if behind:
            self._save_behind(False, state.snapshot, 0.0)
        else:
            self._bind(state.snapshot)

    def reread_only(self, grow: bool, known: list[str], git: GitTracked, settings: ScopeSettings,
                    ignore: Ignore) -> walkstate.Checked | None:
        """The check found only files changed, each of them captured by the parent (the caller asks its records), a
        walk would cover what the saved one did, and no covered path below an unlisted directory lacks a key: the
        parent's map with those files read again is the capture (`Capturer._reread_only`; None: look further)."""
        checked, w = self.checked, self.watched
        if checked is None or checked.check.changes.structural or not checked.check.changes.files:
            return None
        if w is not None and (w.last is not None or w.pending):
            return None
        state = checked.state
        if any(key is None for key in state.unwatched.values()) or IGNORE_FILE in checked.check.changes.files:
            return None
        return checked if self._covers(checked, grow, known, git, settings, ignore) else None

    def tombstones_only(self, grow: bool, known: list[str], git: GitTracked
                        ) -> tuple[walkstate.Checked, list[str]] | None:
        """The check found nothing moved and a walk would cover what the saved one did but paths it named covered and
        neither Git-tracked nor captured (tombstones, the caller asks the parent's records): the parent's map
        without those entries is the capture, as a walk records nothing where it no longer looks
        (`Capturer._tombstones_dropped`); the paths to drop, or None (look further). A one-shot capture's only."""
        checked = self.checked
        if checked is None or not checked.check.unchanged or self.watched is not None:
            return None
        state = checked.state
        named = state.uncaptured
        if not named:
            return None
        if grow and not known:  # a one-shot capture: the sorted covered paths are searched, no set made (~8 ms)
            listed = self.saved_covered = state.covered  # (`dropped` filters them: decoded once, ~7 ms at 100,000)
            if not all(_in_sorted(listed, p) for p in named):
                return None  # not the state's own paths: damaged
            return checked, list(named)
        covered = state.covered_set()
        if not covered.issuperset(named):
            return None
        if grow:
            # The Git listing is the saved walk's (its signature is): growing covers the listing, `known` and what
            # the parent captured, so every covered path but the uncaptured ones again, and these only if known.
            if not covered.issuperset(known):
                return None
            wanted = set(known)
            dropped = [p for p in named if p not in wanted]
        else:
            now = {*git.paths, *known}
            if not covered.issuperset(now):
                return None
            dropped = sorted(covered.difference(now))
            if not set(named).issuperset(dropped):
                return None
        return (checked, dropped) if dropped else None

    def dropped(self, checked: walkstate.Checked, snap_id: str, dropped: list[str]) -> None:
        """`kept` for a capture that dropped tombstones (`tombstones_only`): the saved walk names `snap_id` and covers
        those paths no more (written again), its moved directories' stats stand, and the monitor's token is bound."""
        state, gone = checked.state, set(dropped)
        left = [p for p in state.uncaptured or () if p not in gone]
        listed = self.saved_covered if self.saved_covered is not None else state.covered
        covered = walkstate.covered_without(listed, gone)
        state = replace(
            state, snapshot=snap_id, looked_ns=self.started_ns, covered_blob=covered, _covered=None,
            grows_same=not left, uncaptured=left,
            dirs=walkstate.with_dir_keys(state.dirs, {rel: walkstate.trusted(k, self.started_ns)
                                                      for rel, k in checked.check.dir_keys.items()}))
        self.index.save_walk(state)
        self._bind(state.snapshot)

    def reread_keys(self, dirs: DirCache, paths: list[str], settings: ScopeSettings) -> dict[str, Key] | None:
        """Each changed file's stat, as the fast path would take it to read it again (fastpath.select's rules for a
        captured file), or None (the full capture decides)."""
        assert self.checked is not None
        state = self.checked.state
        covered, unwatched = state.covered_set(), state.unwatched
        if dirs.folding.any:
            return None  # a name spelled otherwise than listed: the fast path's respelling decides
        out: dict[str, Key] = {}
        for p in paths:
            try:
                st = dirs.lstat(p)
            except (OSError, SymlinkInPath, DirChanged):
                return None
            regular = stat.S_ISREG(st.st_mode)
            if not (regular or stat.S_ISLNK(st.st_mode)) or (regular and st.st_nlink > 1 and p not in unwatched):
                return None
            if p not in covered and st.st_size > settings.residue_max_file_bytes:
                return None  # held back by size now: the map's verdict changes
            out[p] = stat_key(st)
        return out

    def reread(self, snap_id: str, checked: walkstate.Checked, captured: Captured, skipped: list[tuple[str, str]],
               kind: str, ground: Reread, file_count: int, absent: Mapping[str, Entry] | None = None) -> None:
        """`remember` for a capture that read only the changed files (`reread_only`): the saved walk with their new
        keys, the stat cache, one save of the index, the monitor's token bound; a session's journal gets its last
        capture when its next capture (or a restore) first needs it (`_last_after_reread`: decoding the parent's
        map is what this capture spared the turn's start). `file_count`: the new map's captured files; `absent`: the
        tombstones of files found gone, covered from now on; the other gone files leave the map and the walk's listing
        alike."""
        w, state, git_paths = self.watched, checked.state, _Listed(ground.git)
        self.by_check, self.cache = True, self.index.stat
        unwatched = {p: captured.stats.get(p, key) for p, key in state.unwatched.items()}
        gone = checked.check.gone_paths()
        kept = _Kept(snap_id, file_count, [(str(p), str(why)) for p, why in skipped],
                     {p: walkstate.trusted(k, self.started_ns) for p, k in unwatched.items()},
                     _packs(self.door.repo), self.started_ns)
        covered = state.covered_set().difference(self.extra) if self.extra else state.covered_set()
        if absent:
            covered = covered.union(absent)
        files = {**captured.entries, **absent} if absent else captured.entries
        now = MapNow(files, covered, state.git_signature, frozenset(files).union(gone))
        saved = None
        if walkstate.savable(0, skipped):
            with DirCache(str(self.ws), folding=self.door.repo.folding(self.ws)) as dirs:
                saved = _walk_after(kept, now, state, checked.check.keys, checked.check.dir_keys, captured.stats,
                                    git_paths, functools.partial(_relisted, dirs), added=checked.check.added,
                                    gone=checked.check.gone)
        self.index.set_walk(saved)
        bound = saved.snapshot if saved is not None else None
        if w is not None:
            # Looked at through the journal: the map goes on from the one a thread builds for the parent (one step
            # after it; a builder never asked to start is dropped, so no chain of steps waits for the first need).
            prior = w.deferred if self.quiet is not None else None
            if prior is not None and (not prior.started or prior.snapshot != ground.parent):
                prior = None
            if self.quiet is not None:
                w.held = None
            w.saved = saved
            w.deferred = _LastBuilt(self.door.repo, snap_id, functools.partial(
                _last_after_reread, self.door.repo, checked, captured, ground, prior))
            if prior is not None:
                w.deferred.start()  # the parent's map is on its way: this one follows it
        self.cache.update_some(captured.entries, captured.fresh, self.started_ns)
        self._save_index(kind, bound)

    def start(self, parent_files: FileMap | None, known: list[str], grow: bool, git: GitTracked,
              settings: ScopeSettings, ignore: Ignore) -> Start:
        """What the capture's look at the files starts from: the check's look at the saved walk where a walk covering
        the paths covered now would give the parent's map, else the journal's events since its last capture, else
        nothing (a walk). `known` are the caller's known paths; `grow` adds what the parent captured."""
        from . import fastpath

        w, checked = self.watched, self.checked
        # A session's journal whose last capture made the parent's map: what growing adds to the fast path's known
        # paths is what that capture held outside its covered set (the rest is covered already), not every captured
        # path (~2 passes over 11,000 paths saved per capture).
        if (checked is None and w is not None and w.last is not None and w.last.facts is not None
                and parent_files is not None and w.last.files is parent_files):
            parent_captured = None
            fast_known = [*known, *w.last.facts.outside] if grow else known
            walk_known = None if grow else known
        else:
            parent_captured = captured_paths(parent_files) if parent_files is not None else []
            fast_known = walk_known = [*known, *parent_captured] if grow else known
        since: fastpath.Since | None = None
        if checked is not None and parent_files is not None and not checked.check.changes.structural:
            assert parent_captured is not None
            since = self._since_check(checked, parent_files, set(parent_captured), {*git.paths, *fast_known}, git,
                                      settings, ignore)
        if since is None and w is not None and w.last is not None:
            narrowed = (w.last, frozenset[str]()) if grow else _narrowed(w.last, {*git.paths, *known}, settings, ignore)
            if narrowed is not None:  # else walk: the journal's events are dropped with its reset
                since = fastpath.Since(narrowed[0], w.drain(), w.pending, dropped=narrowed[1])
        # The stat cache as the index holds it now: the walk's reads look up in it, and this capture updates it.
        self.cache = self.index.stat
        return Start(since, fast_known, walk_known)

    def _since_check(self, checked: walkstate.Checked, parent_files: FileMap, captured_then: set[str],
                     covered_now: set[str], git: GitTracked, settings: ScopeSettings, ignore: Ignore
                     ) -> fastpath.Since | None:
        """The check's look as the fast path's start, where a walk covering `covered_now` (what it would capture
        whatever the limits) gives the parent's map (walkstate.same_map); otherwise the check is dropped: walk."""
        from . import fastpath

        covered_then = checked.state.covered_set()
        dropped: set[str] = set()
        if not walkstate.same_map(covered_then, covered_now, parent_files, captured_then, settings, ignore, dropped):
            self.checked = None  # other known paths would change the map: walk
            return None
        # Covered then and now: what the fast path settles newly known paths against.
        last = _checked_last(checked, parent_files, captured_then, covered_then & covered_now, git.signature,
                             settings)
        if last is None:
            return None
        self.by_check = True
        return fastpath.Since(last, checked.check.changes, dropped=frozenset(dropped))

    def will_read(self, start: Start) -> bool:
        """Whether the fast path may read files (then the blob index is wanted before the directories' fds are
        held)."""
        return start.since is not None and bool(start.since.changes.files or start.since.pending)

    def select(self, dirs: DirCache, start: Start, git_signature: tuple[int, ...] | None, settings: ScopeSettings,
               ignore: Ignore, force: Callable[[str], bool] | None) -> fastpath.Selection | None:
        """The fast path: the last map with what changed applied, and the files to re-read (None: walk)."""
        from . import fastpath

        assert start.since is not None
        return fastpath.select(dirs, start.since, start.known, git_signature, settings, ignore, force)

    def known_content(self, to_read: Mapping[str, Key]) -> KnownContent:
        """What the fast path's reads may reuse without reading. From the check, every file to read moved since the
        saved walk, whose keys the stat cache shares, or was held back then (never cached): no lookup can hit, and
        the first would decode the whole per-path half (~50 MB at 100,000 files, measured). From a journal, a hit is
        a file another process read since, worth decoding the half for only when there is much to read: the post-turn
        capture of a turn that wrote one file decoded 100,000 entries (~0.14 s profiled) to hash a few KB again."""
        assert self.cache is not None
        if self.by_check or (self.cache.undecoded and sum(k[0] for k in to_read.values()) < REUSE_MIN_BYTES):
            return StatCache(None)
        return self.cache

    def merged(self, fast: fastpath.Selection, captured: Captured) -> fastpath.LastCapture:
        """The fast path's new state after its re-reads."""
        from . import fastpath

        return fastpath.merge(fast, captured)

    def before_walk(self) -> Callable[[str], None] | None:
        """A walk follows: the journal starts over, and watches each directory before the walk lists it (the hook
        returned; None: no journal). A process that keeps no journal (a one-shot command) maps large blocks on their
        own from here (heap.bound)."""
        if self.watched is None:
            if not self.dry_run:
                heap.bound()
            return None
        self.watched.reset()
        return self.watched.journal.watch_dir

    def walked(self, selected: Scope, captured: Captured, git_signature: tuple[int, ...] | None,
               settings: ScopeSettings) -> fastpath.LastCapture:
        """The state a walk and its reads leave (fastpath.after_walk)."""
        from . import fastpath

        return fastpath.after_walk(selected, captured, git_signature, settings)

    def stat_cache(self) -> KnownContent:
        """What a walk's reads may reuse without reading: the stat cache."""
        assert self.cache is not None
        return self.cache

    @property
    def keeps_fresh(self) -> bool:
        """Should a walk's reads keep their results as a dict (Captured.fresh)? Only for a journal that goes on from
        them (a session); a one-shot process only saves them (readfiles.FreshOf)."""
        return self.watched is not None

    # ----------------------------------------------------------------- before the snapshot's map is encoded
    def prepare(self, found: Found, file_count: int, skipped: list[tuple[str, str]], git_paths: list[str],
                kind: str) -> bool:
        """A one-shot process's walk: the index written now (WorkspaceIndex.prepare, the walk half naming the snapshot
        once `remember` knows its id) and what only it needed let go (the walk's stats, keys and covered set, and the
        stat cache read), before the snapshot's map is encoded: they were ~28 MB of the cold 100,000-file capture's
        peak, beside the map's encoding (measured). True: `found` holds no walk, state or stats from here. False
        (watched, no walk, a safety capture, or the index cannot be written): `remember` does it all, as before."""
        state, selected = found.state, found.selected
        if self.watched is not None or selected is None or state is None or kind == SnapshotKind.SAFETY:
            return False
        assert state.facts is not None
        saved = None
        if walkstate.savable(state.facts.unstable, skipped):
            kept = _Kept(walkstate.PLACEHOLDER, file_count, [(str(p), str(why)) for p, why in skipped],
                         {p: walkstate.trusted(k, self.started_ns) for p, k in state.unwatched.items()},
                         _packs(self.door.repo), self.started_ns)
            saved = _walk_of(kept, state, selected, found.captured.stats, git_paths,
                             self.door.repo.protected_rel(self.ws), blob=False)
        try:
            walk = walkstate.encode_parts(saved, sorted(state.covered)) if saved is not None else None
            self.prepared = self.index.prepare(walk, kept_entries(state.fresh, self.started_ns))
        except (OSError, ValueError):
            return False
        found.state = found.selected = None
        found.captured = Captured()
        self.cache = None
        return True

    def abandon(self) -> None:
        """The snapshot was not committed: a prepared index is dropped (the one in place stays)."""
        if self.prepared is not None:
            self.index.abandon(self.prepared)
            self.prepared = None

    # ----------------------------------------------------------------- after the snapshot is committed
    def remember(self, snap_id: str, file_count: int, skipped: list[tuple[str, str]], found: Found,
                 git_paths: list[str], kind: str) -> None:
        """What this capture saw, for the next one: the journal's last capture, the walk the next process checks, the
        stat cache, both written in one save of the index, and the monitor's token bound to the walk.

        A one-shot process keeps nothing: `found`'s walk, stats and fresh hashes are dropped here (the index holds
        them from here), before the per-path half is built and the index encoded (~40 MB of the cold 100,000-file
        capture's peak RSS).
        """
        if self.prepared is not None:  # a one-shot walk's index, written before the snapshot (`prepare`)
            prepared, self.prepared = self.prepared, None
            placed = self.index.finish(prepared, snap_id)
            self._bind(snap_id if placed and prepared.walk >= 0 else None)
            return
        w, checked, state, selected = self.watched, self.checked, found.state, found.selected
        assert state is not None and self.cache is not None
        if w is not None:
            w.last = state
            w.pending.clear()
            if (selected is None and not self.by_check and state.touched is not None and not state.touched
                    and w.saved is not None and _unchanged_since(self.door.repo, snap_id, w.saved.snapshot,
                                                                 str(self.ws)) in range(walkstate.CHAIN_LIMIT)):
                # The journal saw no file move since the walk saved for this snapshot (or one it holds unchanged,
                # as `kept` allows): that walk, and the index holding it, say what saving them again would (~50 ms
                # at 100,000 files: the walk encoded, 30 MB written and renamed over the old file, for every unchanged
                # capture after a change).
                self._bind_unwritten(w.saved.snapshot)
                return
        # What the next process checks instead of walking: from this walk, or the state this capture started from
        # with the files it read again (a check's, or the one a session saved at its last capture).
        if selected is not None:
            base = None
        elif self.by_check and checked is not None:
            base = checked.state
        else:
            base = w.saved if w is not None else None
        from_check = checked is not None and base is checked.state
        saved = self._save_walk(snap_id, file_count, skipped, state, selected, base,
                                checked.check if checked is not None and from_check else None,
                                found.captured.stats, git_paths)
        if w is not None:
            w.saved = saved
        # The token vouches for the walk saved: from this capture's own look (a walk or a check), or one a session's
        # journal updated (`_bind`).
        bound = saved.snapshot if saved is not None else None
        walked = selected is not None
        if w is None:
            saved = found.selected = selected = None
        cache = self.cache
        if walked and w is None:
            cache.replace(state.fresh, self.started_ns)  # encoded from the capture's results as it is written
        elif walked:
            cache.update(state.fresh, self.started_ns)
        else:
            cache.update_some(found.captured.entries, found.captured.fresh, self.started_ns)
        if w is None:
            found.state = state = None
            found.captured.fresh = {}
        self._save_index(kind, bound)

    def _save_index(self, kind: str, bound: str | None) -> None:
        """One write of the index for both halves, then the monitor's token bound to the walk saved for `bound`.

        A restore's safety capture leaves the per-path half to the restore's end (close): it forgets the paths it
        rewrites right after, and saving it twice cost ~40-70 ms of a one-file restore (11,000 files, measured); a
        watched workspace saves it at most once a minute. After the index is written: the binding names the index
        file that holds this walk."""
        assert self.cache is not None
        per_path = kind != SnapshotKind.SAFETY and (
            self.watched is None or time.monotonic() - self.cache.saved_at > CACHE_SAVE_INTERVAL)
        # A session's, and any pre-turn capture's: left to a thread (`_Behind`). A pre-turn capture's starts at once:
        # the turn waits for the snapshot alone, and the save runs while Codex works on it (a turn shorter than
        # BEHIND_DELAY paid it at the post-turn capture's look instead, and without a journal before the prompt went).
        if self.watched is not None or kind == SnapshotKind.PRE_TURN:
            self._save_behind(per_path, bound, 0.0 if kind == SnapshotKind.PRE_TURN else BEHIND_DELAY)
            return
        with contextlib.suppress(OSError):
            self.index.save(per_path=per_path)  # disposable: the snapshot is already committed
        self._bind(bound)

    def _save_behind(self, per_path: bool, bound: str | None, delay: float) -> None:
        """The index's save, then the token's binding to the walk saved for `bound`, left to a thread (`_Behind`)."""
        index = self.index

        def save() -> None:
            with contextlib.suppress(OSError):
                index.save(per_path=per_path)
            self._bind(bound)

        self.door.save_behind(self.ws, save, delay)

    def _bind(self, snapshot: str | None, expected: list[object] | None = None) -> None:
        """Bind the token asked before this capture to the walk it saved, for `snapshot` (None: unbind, the next
        capture checks). The binding names the walk's snapshot: should another capture of the workspace have saved
        its own walk in between, the next capture finds another snapshot in the file and checks every stat.

        A walk a session's journal kept up to date is bound too: the token was asked before the journal was read
        (`ChangeDetector.look`), so what changed before the journal's read is in the walk (the journal watched every
        saved directory since that walk's look; the paths no watch reports on, and racy keys, are looked at by every
        check) and what changed after the token is in the monitor's next answer (issue 35: a one-shot rewind after a
        `codexr exec` stat'ed all 100,000 files, ~0.5 s, because the exec's post-turn capture left no token)."""
        w = self.watched
        if self.asked is None:
            if w is not None:
                w.bound_walk = None
            return
        path = self.door.repo.cache_file(self.ws, ".mon")
        bound = None
        if snapshot is not None:
            bound = monitor.bind(path, self.asked.answer.token, self.index.path, snapshot, expected)
        else:
            monitor.forget(path)
        if w is not None:
            w.bound_walk = bound

    def _bind_unwritten(self, snapshot: str) -> None:
        """`_bind` for a session's capture that left the saved walk as it was: only to the index file this session
        last bound a token to (another process may have written its own walk since)."""
        w = self.watched
        if w is None or w.bound_walk is None:
            self._bind(None)
        else:
            self._bind(snapshot, w.bound_walk)

    def _save_walk(self, snap_id: str, file_count: int, skipped: list[tuple[str, str]],
                   state: fastpath.LastCapture, selected: Scope | None, base: walkstate.WalkState | None,
                   check: walkstate.Check | None, read: Mapping[str, Key],
                   git_paths: list[str]) -> walkstate.WalkState | None:
        """What this capture saw, for the next process (None: a walk nobody can check), set in the index (written
        once, with the per-path half); returned."""
        assert state.facts is not None
        saved = None
        if walkstate.savable(state.facts.unstable, skipped):
            kept = _Kept(snap_id, file_count, [(str(p), str(why)) for p, why in skipped],
                         {p: walkstate.trusted(k, self.started_ns) for p, k in state.unwatched.items()},
                         _packs(self.door.repo), self.started_ns)
            if selected is not None:
                saved = _walk_of(kept, state, selected, read, git_paths, self.door.repo.protected_rel(self.ws))
            elif base is not None:
                with DirCache(str(self.ws), folding=self.door.repo.folding(self.ws)) as dirs:
                    saved = _walk_after(kept, MapNow.of(state), base, check.keys if check else {},
                                        check.dir_keys if check else {}, read, git_paths,
                                        functools.partial(_relisted, dirs), check.added if check else None,
                                        check.gone if check else None)
        self.index.set_walk(saved)
        return saved


class _Kept(NamedTuple):
    """What every saved walk of this capture holds besides its directories and files."""

    snapshot: str
    file_count: int
    skipped: list[tuple[str, str]]
    unwatched: dict[str, Key | None]  # racy keys untrusted
    packs: tuple[bytes, dict[str, int]]
    started_ns: int

    def trusted(self, key: Key | None) -> Key | None:
        return walkstate.trusted(key, self.started_ns)


def _walk_of(kept: _Kept, state: fastpath.LastCapture, selected: Scope, read: Mapping[str, Key],
             git_paths: list[str], protected: tuple[str, ...], blob: bool = True) -> walkstate.WalkState | None:
    """The saved walk of a capture that walked: every listed directory and stat'ed entry, racy ones untrusted
    (None: a captured file the next check would not look at). `blob` False: its `covered_blob` is left empty (its
    encoder writes the covered paths: walkstate.encode_parts)."""
    files, trusted = state.files, kept.trusted
    dirs: walkstate.Group = ("", list(selected.listed),
                             b"".join(walkstate.pack_key(trusted(key)) for key in selected.listed.values()))
    seen = {rel: trusted(read.get(rel) or key) for rel, key in selected.seen.items()
            if walkstate.stat_bound(files, rel)}
    # Every captured file must be looked at by the next check, or a change to it would go unseen.
    if any(is_captured(e) and p not in seen and p not in kept.unwatched for p, e in files.items()):
        return None
    covered = frozenset(state.covered)
    uncaptured = walkstate.uncaptured(covered, git_paths, files)
    return walkstate.made(
        snapshot=kept.snapshot, settings=walkstate.settings_key(state.settings), git_signature=state.git_signature,
        protected=protected, packs=kept.packs, dirs=dirs, seen=walkstate.group(seen),
        covered_blob=marshal.dumps(sorted(covered), 2) if blob else b"", unwatched=kept.unwatched,
        file_count=kept.file_count,
        skipped=kept.skipped, listings=b"".join(selected.listing[rel] for rel in selected.listed),
        grows_same=not uncaptured, looked_ns=kept.started_ns, uncaptured=walkstate.named(uncaptured))


class MapNow(NamedTuple):
    """What `_walk_after` asks of the map a capture made: entries at the paths it read again or moved (`touched`),
    the covered set and the Git listing's signature."""

    files: Mapping[str, Entry]
    covered: frozenset[str]
    git_signature: tuple[int, ...] | None
    touched: frozenset[str] | None

    @classmethod
    def of(cls, state: fastpath.LastCapture) -> MapNow:
        return cls(state.files, state.covered, state.git_signature, state.touched)


def _walk_after(kept: _Kept, state: MapNow, base: walkstate.WalkState, checked_keys: dict[str, Key],
                moved_dirs: dict[str, Key], read: Mapping[str, Key], git_paths: Collection[str],
                relist: Callable[[str], list[str] | None] | None = None,
                added: Mapping[str, Mapping[str, str]] | None = None,
                gone: Mapping[str, Mapping[str, str]] | None = None) -> walkstate.WalkState | None:
    """The saved walk `base` (a check's, or the one a session saved) with the files this capture read again.

    No directory moved since `base` was saved but to add files (else this capture walked), so the saved entries are
    there: only the files read again get new keys (rebuilding the whole state cost ~30 ms of a one-file restore). A
    file no longer captured keeps an entry: the next check just looks at it again. A file made since (a session's
    journal reports it, or the check found it: `added`) joins its directory's listing, and its group when captured,
    once that directory, listed again, holds exactly the saved entries and those (else the next process walks: ~2.9 s
    at 100,000 files); one the check found gone (`gone`) leaves them. None: a captured file, or one held back by its
    size, that the next check would not look at.
    """
    files, trusted = state.files, kept.trusted
    try:
        base.seen  # noqa: B018 -- decoded (and checked) here: groups that are not clean leave no walk to save
    except walkstate.DamagedWalk:
        return None
    newly = {rel: trusted(read.get(rel, now)) for rel, now in checked_keys.items()}
    newly.update((rel, trusted(key)) for rel, key in read.items())
    made: dict[str, dict[str, tuple[str, Key | None]]] = {}
    if any(is_captured(files.get(rel)) for rel in newly):
        looked = base.seen_paths()
        for rel in newly:
            entry = files.get(rel)
            if is_captured(entry) and rel not in looked and rel not in kept.unwatched:
                parent, _, name = rel.rpartition("/")
                made.setdefault(parent, {})[name] = (entry.kind, newly[rel])
    also: dict[str, dict[str, str]] = {}
    for parent, names in (added or {}).items():
        for name, kind in names.items():
            rel = f"{parent}/{name}" if parent else name
            if is_captured(files.get(rel)):
                continue  # read again, so among `made`
            if walkstate.stat_bound(files, rel):
                return None  # held back by its size: its group would need its key
            also.setdefault(parent, {})[name] = kind  # ignored, hidden, ...: in the listing only
    if made or also or gone:
        grown = walkstate.with_listed(base, made, relist, also, gone) if relist is not None else None
        if grown is None:
            return None
        base = grown
    # Directories listed the same at the check: their new stats stand (racy ones untrusted).
    listed = walkstate.with_dir_keys(base.dirs, {rel: trusted(k) for rel, k in moved_dirs.items()})
    covered = frozenset(state.covered)
    # Sorting and marshalling 11,000 paths again is ~5 ms of every session capture: only when they moved.
    same = covered is base.covered_set() or covered == base.covered_set()
    blob = base.covered_blob if same else marshal.dumps(sorted(covered), 2)
    prior = [] if base.grows_same else base.uncaptured
    touched = state.touched
    if (prior is not None and touched is not None and base.git_signature == state.git_signature
            and (same or touched.issuperset(covered.difference(base.covered_set())))):
        # Only the entries this capture moved (and the paths it covers newly, among them) can have changed their
        # answer (the Git listing is the base's): a pass over the whole covered set each capture was ~1-2 ms.
        moved = walkstate.uncaptured(covered, git_paths, files, among=touched)
        uncaptured = sorted({*moved, *(p for p in prior if p not in touched and p in covered)})
    else:
        uncaptured = walkstate.uncaptured(covered, git_paths, files)
    return walkstate.with_groups(base, walkstate.with_keys(base.seen, newly), snapshot=kept.snapshot,
                                 packs=kept.packs, dirs=listed, unwatched=kept.unwatched, covered_blob=blob,
                                 _covered=covered, file_count=kept.file_count, skipped=kept.skipped,
                                 grows_same=not uncaptured, looked_ns=kept.started_ns,
                                 uncaptured=walkstate.named(uncaptured))


class _Listed(Collection[str]):
    """A Git listing's paths, decoded only when one is asked about: the walk a capture that read changed files again
    saves asks only of a path it read that is covered and not captured (`walkstate.grows_same`), and decoding a
    saved listing of 100,000 paths was ~24 ms (issue 35)."""

    def __init__(self, git: GitTracked) -> None:
        self._git = git

    def __contains__(self, path: object) -> bool:
        return path in self._git.paths

    def __iter__(self) -> Iterator[str]:
        return iter(self._git.paths)

    def __len__(self) -> int:
        return len(self._git.paths)


class Reread(NamedTuple):
    """What a capture that read only the changed files (Capturer._reread_only) stood on: its parent, the entries the
    parent's records gave for those files, and the rules a journal's last capture is built under."""

    parent: str
    old: dict[str, Entry | None]
    grow: bool
    known: list[str]
    git: GitTracked  # its paths asked only where a map is built (a saved listing decodes them then)
    git_signature: tuple[int, ...] | None
    settings: ScopeSettings
    ignore: Ignore


class _LastBuilt:
    """A session's last capture after a capture that read only the changed files, built when its next capture asks
    (called), or ahead on a thread (`start`, once the turn has started: the thread competes for the GIL, and on the
    turn's start it slowed the capture's own last steps ~2x; decoding the parent's map is what that capture spared the
    turn's start, ~0.5 s at 100,000 files). Called, it waits for the thread and caches the map in the calling thread
    (the builder only reads the repository's caches, `Repository.files_aside`)."""

    def __init__(self, repo: Repository, snap_id: str, build: Callable[[], fastpath.LastCapture | None]) -> None:
        self._repo, self._build = repo, build
        self.snapshot = snap_id  # whose map it builds (a capture that recorded the same map again renames it)
        self._out: fastpath.LastCapture | None = None
        self._thread: threading.Thread | None = None

    @property
    def started(self) -> bool:
        """Asked to build on a thread (so a builder that follows it can wait for it)."""
        return self._thread is not None

    def start(self) -> None:
        """Build on a thread from now on."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="codexr-last-capture", daemon=True)
            self._thread.start()

    def result(self) -> fastpath.LastCapture | None:
        """The state built (waited for), not cached in the repository: for the builder of the next one, which goes
        on from it on its own thread."""
        if self._thread is None:
            self._run()
        else:
            self._thread.join()
        return self._out

    def _run(self) -> None:
        try:
            self._out = self._build()
        except Exception:  # whatever went wrong, no last capture: the next capture checks, or walks
            self._out = None

    def __call__(self) -> fastpath.LastCapture | None:
        out = self.result()
        if out is not None:
            self._repo.remember(self.snapshot, out.files)
        return out


def _last_after_reread(repo: Repository, checked: walkstate.Checked, captured: Captured,
                       ground: Reread, prior: _LastBuilt | None = None) -> fastpath.LastCapture | None:
    """The last capture a session's journal goes on from after a capture that read only the changed files (or found
    none): what the check's fast path (`Look._since_check`, `fastpath.select` with nothing but captured files to read
    again, then `fastpath.merge`) would have made, from the parent's map: the one `prior` built for it, else decoded
    now. None (the next capture checks, or walks): the parent cannot be read, or its map disagrees with what its
    records gave for the files read again."""
    from . import fastpath

    built = prior.result() if prior is not None else None
    try:
        parent_files = built.files if built is not None else repo.files_aside(ground.parent)
    except StoreError:
        return None
    if any(parent_files.get(p) != e for p, e in ground.old.items()):
        return None
    captured_then = set(captured_paths(parent_files))
    known = [*ground.known, *captured_then] if ground.grow else ground.known
    covered_then, covered_now = checked.state.covered_set(), {*ground.git.paths, *known}
    if not walkstate.same_map(covered_then, covered_now, parent_files, captured_then, ground.settings, ground.ignore):
        return None
    last = _checked_last(checked, parent_files, captured_then, covered_then & covered_now, ground.git_signature,
                         ground.settings)
    if last is None:
        return None
    extra = [p for p in known if p not in last.covered]  # captured by the parent: settled as they are (select)
    covered = last.covered.union(extra) if extra else last.covered
    files, gone = parent_files, checked.check.gone_paths()
    if gone:  # files the check found gone from their listed directories: as fastpath._settle leaves them
        files = dict(parent_files)
        for p in gone:
            if p in covered:
                files[p] = ABSENT
            else:
                files.pop(p, None)
    return fastpath.merge(fastpath.Selection(last, files, dict(captured.stats), covered, gone, frozenset(gone)),
                          captured)


def _relisted(dirs: DirCache, rel: str) -> list[str] | None:
    """A directory's entries now, listed through its fd (None: it cannot be reached as a directory)."""
    try:
        return walkstate.listed_names(dirs.dir_fd(rel))
    except (OSError, SymlinkInPath, DirChanged):
        return None


def _unchanged_since(repo: Repository, snap: str, base: str, root: str) -> int | None:
    """Unchanged snapshots between `base` and `snap` (None: `snap` may not hold `base`'s files)."""
    for steps in range(walkstate.CHAIN_LIMIT + 1):
        if snap == base:
            return steps
        try:
            rec = repo.record(snap)
        except StoreError:
            return None
        if rec.changes or rec.parent is None or rec.root != root:
            return None
        snap = rec.parent
    return None


def _packs(repo: Repository) -> tuple[bytes, dict[str, int]]:
    """gc's generation and the pack indexes present now (walkstate.packs_hold)."""
    return walkstate.pack_signature(repo.path / "packs", read_generation(repo.path))


def _in_sorted(paths: list[str], path: str) -> bool:
    """Is `path` among these sorted paths?"""
    i = bisect.bisect_left(paths, path)
    return i < len(paths) and paths[i] == path


def _covers_what_was_covered(checked: walkstate.Checked, grow: bool, known: list[str], git: GitTracked,
                             w: Watched | None, settings: ScopeSettings, ignore: Ignore) -> frozenset[str] | None:
    """Would a walk now give the map the saved walk gave, covering what it covered (so, nothing having moved, give its
    map)? The paths it covered that a walk now does not, where that walk would capture their files all the same
    (empty: it covers the same); None: no.

    Growing, it covers the Git listing, `known` and what the latest snapshot captured: the saved walk's paths when
    each of them was Git-tracked or captured and `known` adds none. A thread's capture covers the Git listing and
    `known` only: the same set, or a path covered then and not now must be a file the recent-file rule takes
    (`_taken_anyway`: a thread's capture after another thread's turn wrote a file, or a file made by hand, which that
    turn's growing capture then covered, decoded the parent: ~0.6 s of `codexr exec` on a new thread at 100,000
    files; issue 35); one covered now and not then might be captured though the saved walk skipped it.

    The covered set is decoded only where it is asked: a thread's first capture (nothing known yet) whose saved walk
    covered just the Git listing finds the listing's marshal (as saved, or made again) equal to the stored one (the
    same sorted paths), ~3 ms where building and comparing the sets took ~35 ms at 100,000 paths (measured); unequal
    bytes compare the sets. Growing never asks the listing at all (a saved one is not even decoded).
    """
    state, same = checked.state, frozenset[str]()
    if grow:
        return same if state.grows_same and (not known or state.covered_set().issuperset(known)) else None
    if not known:
        seen = w.same_listing if w is not None else None
        if seen is not None and seen[0] is state.covered_blob and seen[1] is git:
            return same  # this very listing was found equal to these very bytes: a session's next capture
        blob = git.paths_marshal()
        if blob is None:
            blob = marshal.dumps(git.paths, 2)
        if blob == state.covered_blob:
            if w is not None:
                w.same_listing = (state.covered_blob, git)
            return same
    covered, now = state.covered_set(), {*git.paths, *known}
    if covered == now:
        return same
    if len(covered) - len(now) > settings.residue_max_files or not covered.issuperset(now):
        return None
    extra = covered.difference(now)
    return extra if _taken_anyway(checked, extra, settings, ignore) else None


def _taken_anyway(checked: walkstate.Checked, extra: frozenset[str], settings: ScopeSettings, ignore: Ignore) -> bool:
    """Would a walk capture each of these paths the saved walk covered (and so captured whatever the limits) by the
    recent-file rule as it is? Each a file or symlink the saved walk took, unchanged since, not ignored, hidden or a
    `.git`, a file within the size limit; and the untracked files a walk would take then, these among them, within
    the limit (as fastpath._settle and scope's residue settle them)."""
    state, changes = checked.state, checked.check.changes
    held = {p for p, _why in state.skipped}
    if not extra.isdisjoint(changes.files) or not extra.isdisjoint(changes.paths) or not extra.isdisjoint(held):
        return False
    try:
        keys = walkstate.seen_keys(state, extra)
        for p in extra:
            key = keys.get(p)
            if (key is None or scope_mod.forbidden(p) or ignore.file(p) or scope_mod.hidden(p, settings)
                    or (stat.S_ISREG(key[4]) and key[0] > settings.residue_max_file_bytes)):
                return False
        return walkstate.residue_taken(state) + len(extra) <= settings.residue_max_files
    except walkstate.DamagedWalk:
        return False  # its groups, decoded only now, are not clean: the full capture


def _narrowed(last: fastpath.LastCapture, covered_now: set[str], settings: ScopeSettings,
              ignore: Ignore) -> tuple[fastpath.LastCapture, frozenset[str]] | None:
    """The journal's last capture as a thread's capture covering `covered_now` starts from, with the tombstones it
    drops (a walk covering `covered_now` records nothing there: `Since.dropped`), or None (walk).

    The last capture may have covered another thread's paths (one session, several threads): kept covered, this
    thread's snapshot would hold that thread's files whatever the limits, and a rewind of it would put them back.
    A walk covering `covered_now` would give the same map only where walkstate.same_map says so.
    """
    if covered_now == last.covered:
        return last, frozenset()
    dropped: set[str] = set()
    if not walkstate.same_map(last.covered, covered_now, last.files, set(captured_paths(last.files)), settings,
                              ignore, dropped):
        return None
    return replace(last, covered=last.covered & covered_now, facts=None, touched=None), frozenset(dropped)


def _checked_last(checked: walkstate.Checked, parent_files: FileMap, captured: set[str], covered: frozenset[str],
                  git_signature: tuple[int, ...] | None, settings: ScopeSettings) -> fastpath.LastCapture | None:
    """The last capture as the check vouches for it: the fast path re-reads only the files whose stat moved.

    `covered`: paths covered by the saved walk and by this capture (walkstate.same_map said the map is the same);
    the fast path adds this capture's newly known ones. `captured`: the files and symlinks of the map.
    """
    from . import fastpath

    state = checked.state
    try:
        stats = walkstate.captured_stats(captured, state, checked.check.changes.files)
    except ValueError:
        return None
    if stats is None:
        return None
    return fastpath.LastCapture(parent_files, {}, stats, covered, dict(state.unwatched),
                                git_signature, settings, time.monotonic())
