"""The fast path: a workspace's next map from the last capture's plus what changed since.

What changed comes from one of two change sources, both as a `Changes` (changes.py): a long-running process's
journal (journal.py), or a one-shot check of the saved index (walkstate.check). The door (door.py) asks `select`
first; None means "walk". Every path looked at is reached through the capture's DirCache (directory fds,
O_NOFOLLOW at each component) and the reads that follow use the same fds, so a directory swapped for a symlink is
never looked through: the capture walks instead.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING

from .. import scope as scope_mod
from ..dirfd import DirCache, DirChanged, SymlinkInPath
from ..manifest import ABSENT, WALKED, Entry, FileMap, SkippedEntry, is_captured, parent_of
from ..readfiles import Captured, FreshOf
from ..reasons import HELD_BACK, Reason
from ..records import field, record
from ..safefs import TMP_PREFIX as OWN_TMP
from ..settings import ScopeSettings
from ..stamps import Key, stat_key
from .changes import Changes
from .mapfacts import MapFacts

if TYPE_CHECKING:
    from ..scope import Scope

FULL_WALK_INTERVAL = 300.0  # inotify misses mmap writes and remote changes: walk at least this often
_NOT_REACHED = (OSError, SymlinkInPath, DirChanged)


@record
class LastCapture:
    """What the fast path reuses from the previous capture of a workspace."""

    files: FileMap
    fresh: Mapping[str, tuple[Key, str]]  # a one-shot walk's: readfiles.FreshOf (a session's: a dict)
    stats: Mapping[str, Key]  # of every captured file (walkstate.CapturedStats: unpacked when asked)
    covered: frozenset[str]
    unwatched: dict[str, Key | None]  # covered paths no watched directory reports on, with their lstat
    git_signature: tuple[int, ...] | None
    settings: ScopeSettings
    walked_at: float = 0.0  # monotonic time of the last full walk
    facts: MapFacts | None = None  # of `files` and `covered`, once a capture has worked them out
    touched: frozenset[str] | None = None  # where `files` may differ from the map this state was made from

    def map_facts(self) -> MapFacts:
        """The facts of `files` and `covered`, worked out once (a walk's, or a state whose facts were not kept)."""
        if self.facts is None:
            self.facts = MapFacts.of(self.files, self.covered)
        return self.facts


@record(frozen=True)
class Since:
    """What changed since `last` was captured, as one change source reports it."""

    last: LastCapture
    changes: Changes
    pending: set[str] = field(default_factory=set)  # paths a restore wrote since (a journal's; re-read)
    dropped: frozenset[str] = frozenset()  # tombstones `last` holds that a walk would no longer record


@record(frozen=True)
class Selection:
    """The fast path's answer: the last map with creations and removals applied, and what to re-read."""

    last: LastCapture
    files: FileMap
    to_read: dict[str, Key]
    covered: frozenset[str]
    removed: set[str]
    touched: frozenset[str]  # where `files` differs from the last map: entries settled anew or removed


def select(dirs: DirCache, since: Since, known: Iterable[str], git_signature: tuple[int, ...] | None,
           settings: ScopeSettings, ignore: scope_mod.Ignore, force: Callable[[str], bool] | None
           ) -> Selection | None:
    """The previous map plus the files known to have changed, or None (walk)."""
    changes, last = since.changes, since.last
    if (changes.structural or git_signature != last.git_signature
            or settings != last.settings or time.monotonic() - last.walked_at > FULL_WALK_INTERVAL):
        return None
    files = last.files
    if since.dropped:
        files = {p: e for p, e in files.items() if p not in since.dropped}
    dirty: set[str] = set(since.pending)
    extra = [p for p in known if p not in last.covered]
    for p in extra:
        # A newly known path (e.g. a restore target): settle it from the map where the walk saw it.
        if scope_mod.forbidden(p) or ignore.file(p):
            continue
        e = files.get(p)
        if e is None:
            if files.get(parent_of(p)) != WALKED:
                return None
        elif e.kind == "x":
            if e.reason not in (*HELD_BACK, Reason.HIDDEN):
                return None
            dirty.add(p)
    covered = last.covered.union(extra) if extra else last.covered
    if force is not None:
        dirty.update(p for p, e in files.items() if e.kind == "x" and e.reason in HELD_BACK and force(p))
    settled = _settle(dirs, changes.files, files, covered, settings, ignore, force, dirty)
    if settled is None:
        return None
    files, removed, touched = settled
    for p, key in last.unwatched.items():
        try:
            now: Key | None = stat_key(dirs.lstat(p))
        except (SymlinkInPath, DirChanged):
            return None  # a directory on the way is no longer the one watched: only a walk can tell
        except OSError:
            now = None
        if now != key:
            if key is None or now is None:
                return None
            dirty.add(p)
    to_read: dict[str, Key] = {}
    for p in dirty:
        try:
            st = dirs.lstat(p)
        except _NOT_REACHED:
            return None
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            return None
        if st.st_nlink > 1 and stat.S_ISREG(st.st_mode) and p not in last.unwatched:
            return None  # newly hard-linked: writes through another name raise no event here
        if p not in covered and st.st_size > settings.residue_max_file_bytes and not (force and force(p)):
            return None
        to_read[p] = stat_key(st)
    return Selection(last, files, to_read, covered, removed, touched | since.dropped if since.dropped else touched)


def _settle(dirs: DirCache, names: set[str], files: FileMap, covered: frozenset[str], settings: ScopeSettings,
            ignore: scope_mod.Ignore, force: Callable[[str], bool] | None, dirty: set[str]
            ) -> tuple[FileMap, set[str], frozenset[str]] | None:
    """Apply file events (not directory ones) exactly as a walk would see them now, or None.

    Each named path is looked at again (events only say where to look): a file that appeared
    is classified like the walk would classify it; one that vanished leaves the map.
    """
    changed: FileMap = {}
    removed: set[str] = set()
    over_limit: bool | None = None
    residue: int | None = None
    if dirs.folding.any:  # an event names the spelling written through: the map knows the one its directory lists
        names = names | {q for q in map(dirs.listed_spelling, names) if q is not None}
    for p in names:
        if p == scope_mod.IGNORE_FILE:
            return None
        e = files.get(p)
        try:
            st: os.stat_result | None = dirs.lstat(p)
        except FileNotFoundError:
            st = None
        except _NOT_REACHED:
            return None
        if st is not None and stat.S_ISDIR(st.st_mode):
            return None
        if st is None:
            if e is None or e.kind == "-":
                continue  # created and gone again (a temp file)
            if is_captured(e) and p not in covered:
                if over_limit is None:
                    over_limit = _any_over_limit(files)
                if over_limit:
                    return None  # the next-newest file would now enter the residue
            removed.add(p)
            continue
        if e is not None and is_captured(e):
            dirty.add(p)
            continue
        if e is not None and e.kind == "x" and e.reason in HELD_BACK:
            return None  # a residue candidate changed: the newest-N choice may change
        if scope_mod.forbidden(p):
            continue
        if ignore.file(p):
            changed[p] = SkippedEntry("x", Reason.IGNORED)
        elif not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
            changed[p] = SkippedEntry("x", Reason.NOT_REGULAR)
        elif p in covered:
            dirty.add(p)
        elif scope_mod.hidden(p, settings):
            changed[p] = SkippedEntry("x", Reason.HIDDEN)  # whatever `force` says, as in a walk (scope._residue)
        elif force is not None and force(p):
            dirty.add(p)
        elif stat.S_ISREG(st.st_mode) and st.st_size > settings.residue_max_file_bytes:
            changed[p] = SkippedEntry("x", Reason.TOO_LARGE)
        else:
            if over_limit is None:
                over_limit = _any_over_limit(files)
            if residue is None:
                residue = sum(1 for q, v in files.items() if is_captured(v) and q not in covered)
            if over_limit or residue >= settings.residue_max_files:
                return None  # the residue is full: which files stay is the walk's call
            residue += 1
            dirty.add(p)
    if not changed and not removed:
        return files, removed, frozenset()
    out = dict(files)
    out.update(changed)
    for p in removed:
        if p in covered:
            out[p] = ABSENT
        else:
            out.pop(p, None)
    return out, removed, frozenset(changed.keys() | removed)


def _any_over_limit(files: FileMap) -> bool:
    return any(v.kind == "x" and v.reason == Reason.OVER_LIMIT for v in files.values())


def merge(sel: Selection, captured: Captured) -> LastCapture:
    """The new state after the fast path's re-reads (same git signature, settings and walk time)."""
    last = sel.last
    files, fresh, stats = sel.files, last.fresh, last.stats
    if sel.removed:
        fresh = {p: v for p, v in fresh.items() if p not in sel.removed}
        stats = _without(stats, sel.removed)  # a lazy map left lazy
    if captured.entries:
        stats = _merged(stats, captured.stats)
        files = {**files, **captured.entries}
        fresh = {**fresh, **captured.fresh}
        for p, e in captured.entries.items():
            if e.kind != "f":
                fresh.pop(p, None)
    unwatched = last.unwatched
    if any(p in unwatched for p in captured.stats):
        unwatched = {**unwatched, **{p: k for p, k in captured.stats.items() if p in unwatched}}
    touched = sel.touched.union(captured.entries)
    facts = last.facts.after(last.files, files, touched, sel.covered) if last.facts is not None else None
    return LastCapture(files, fresh, stats, sel.covered, unwatched, last.git_signature, last.settings,
                       last.walked_at, facts, touched)


class _Overlay(Mapping[str, Key]):
    """Stats read again over a lazy map of the rest (walkstate.CapturedStats), without unpacking it; `removed` are
    paths of the rest that no longer have one (a restore wrote or deleted them)."""

    def __init__(self, newer: dict[str, Key], rest: Mapping[str, Key], removed: frozenset[str] = frozenset()) -> None:
        self._newer, self._rest, self._removed = newer, rest, removed

    def __getitem__(self, path: str) -> Key:
        key = self._newer.get(path)
        if key is not None:
            return key
        if path in self._removed:
            raise KeyError(path)
        return self._rest[path]

    def __iter__(self) -> Iterator[str]:
        yield from self._newer
        yield from (p for p in self._rest if p not in self._newer and p not in self._removed)

    def __len__(self) -> int:
        return sum(1 for _p in self)

    def over(self, newer: dict[str, Key]) -> _Overlay:
        """The same layers with `newer` over them (a path removed from the rest has a key again when read again)."""
        return _Overlay({**self._newer, **newer}, self._rest, self._removed)

    def without(self, paths: set[str]) -> _Overlay:
        """The same layers with `paths` removed too."""
        return _Overlay({p: k for p, k in self._newer.items() if p not in paths}, self._rest,
                        self._removed | paths)


def _merged(stats: Mapping[str, Key], newer: dict[str, Key]) -> Mapping[str, Key]:
    """`newer` over `stats`: a dict over a dict, else one layer over the lazy map (an overlay's layer grows). Flattening
    an overlay unpacked every key of the lazy map: ~0.3 s of the first `codexr exec` after a rewind at 100,000 files
    (profiled; issue 35)."""
    if isinstance(stats, dict):
        return {**stats, **newer}
    if isinstance(stats, _Overlay):
        return stats.over(newer)
    return _Overlay(newer, stats)


def _without(stats: Mapping[str, Key], paths: set[str]) -> Mapping[str, Key]:
    """`stats` less `paths`, a lazy map left lazy: unpacking every key of a 100,000-file map to drop the few a
    restore wrote was ~1 s of a one-shot `codexr rewind` (profiled; issue 35)."""
    if isinstance(stats, dict):
        return {p: k for p, k in stats.items() if p not in paths}
    if isinstance(stats, _Overlay):
        return stats.without(paths)
    return _Overlay({}, stats, frozenset(paths))


def after_walk(selected: Scope, captured: Captured, git_signature: tuple[int, ...] | None,
               settings: ScopeSettings) -> LastCapture:
    """The state a walk and its reads leave for the next capture's fast path (the walk's map is `selected.entries`,
    completed here with what was read). The tables that only built it are emptied: held on, they would only add to
    the peak that writing the snapshot and the index reaches (~5 MB each at 100,000 files)."""
    files = selected.entries
    files.update(captured.entries)
    covered = frozenset(selected.covered)  # the walk's own (scope.select): no copy
    unwatched = unwatched_after_walk(files, covered, selected.to_capture, selected.linked)
    captured.entries, selected.to_capture, selected.covered = {}, {}, frozenset()
    fresh = captured.fresh if captured.keeps_fresh else FreshOf(files, captured.stats)
    return LastCapture(files, fresh, captured.stats, covered, unwatched, git_signature, settings, time.monotonic())


def unwatched_after_walk(files: FileMap, covered: Iterable[str], to_capture: Mapping[str, Key],
                         linked: Iterable[str]) -> dict[str, Key | None]:
    """Covered paths whose changes no watched directory reports, with the lstat the walk saw; `linked` are the
    hard-linked regular files of `to_capture`."""
    unwatched: dict[str, Key | None] = {}
    for p in covered:
        if files.get(parent_of(p)) != WALKED:
            unwatched[p] = to_capture.get(p)
    # A hard-linked file can be rewritten through a name outside any watched directory.
    for p in linked:
        unwatched[p] = to_capture[p]
    return unwatched


def absorbed(last: LastCapture, changes: Changes, written: dict[str, Entry], deleted: list[str],
             dirs_changed: bool) -> LastCapture | None:
    """After a restore, its own writes folded into the last capture instead of re-walking (None: walk).

    Only when every event the journal reported (`changes`) names a path the restore wrote or deleted (or its temp
    files); written paths are re-read by the next capture, so nothing is taken on trust.
    """
    ours = set(written) | set(deleted)
    foreign = [p for p in changes.paths if p not in ours and not p.rpartition("/")[2].startswith(OWN_TMP)]
    if (dirs_changed or changes.lost or foreign or scope_mod.IGNORE_FILE in ours
            or any(p in last.unwatched for p in ours)):
        return None
    files = dict(last.files)
    fresh, stats = dict(last.fresh), _without(last.stats, ours)
    for p in deleted:
        if files.get(parent_of(p)) == WALKED:
            files.pop(p, None)
        else:
            files[p] = ABSENT
        fresh.pop(p, None)
    for p, entry in written.items():
        files[p] = entry
        fresh.pop(p, None)
    return LastCapture(files, fresh, stats, last.covered.union(written), last.unwatched,
                       last.git_signature, last.settings, last.walked_at)
