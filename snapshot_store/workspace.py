"""The front door: one workspace of one repository — capture, plan, restore, diff, recover.

Everything below it (the repository, the capturer, the restorer) knows nothing of it, so the layers import
one way only: repository <- capture, restore <- workspace <- store (the convenience the app and tests hold).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .capture import Capturer, CaptureResult
from .diff import Change, diff_maps
from .errors import SafetyGone, StoreError, TargetGone
from .fsutil import translate_os_errors
from .manifest import FileMap, captured_items, witnessed_absent
from .readfiles import Progress
from .repository.repo import Repository
from .scope import Ignore
from .settings import ScopeSettings
from .vocab import STATES_KINDS, SnapshotKind

if TYPE_CHECKING:  # restore's modules load where a restore is made (a command that only captures: ~4 ms less)
    from .restore.apply import Contents, Restorer, RestoreResult
    from .restore.journal import Recovery
    from .restore.plan import RestorePlan


class Workspace:
    """A workspace root in a repository, with the capturer that keeps its index."""

    def __init__(self, repo: Repository, capturer: Capturer, root: str | os.PathLike[str]) -> None:
        self.repo = repo
        self.capturer = capturer
        self.root: Path = repo.workspace(root)  # refused when it is or lies inside the store or Codex's home

    @property
    def restorer(self) -> Restorer:
        """Applies plans into this workspace, telling the capturer what it rewrote."""
        from .restore.apply import Restorer

        return Restorer(self.repo, self.root, self.repo.journal_file(self.root), self.capturer.notes(self.root),
                        self.repo.on_held)

    def capture(self, *, label: str | None = None, known_paths: Iterable[str] = (), scope: ScopeSettings | None = None,
                kind: str = SnapshotKind.CAPTURE, progress: Progress | None = None) -> CaptureResult:
        """Capture this workspace (Capturer.capture)."""
        return self.capturer.capture(self.root, label=label, known_paths=known_paths, scope=scope, kind=kind,
                                     progress=progress)

    def capture_summary(self, *, label: str | None = None, known_paths: Iterable[str] = (),
                        scope: ScopeSettings | None = None, progress: Progress | None = None) -> CaptureResult:
        """A capture of which only the id and counts are shown (Capturer.capture_summary)."""
        return self.capturer.capture_summary(self.root, label=label, known_paths=known_paths, scope=scope,
                                             progress=progress)

    def capture_thread_summary(self, *, known_paths: Iterable[str], thread_latest: str | None = None,
                               label: str | None = None, scope: ScopeSettings | None = None,
                               kind: str = SnapshotKind.CAPTURE, progress: Progress | None = None) -> CaptureResult:
        """A thread's capture of which only the id and counts are used (Capturer.capture_thread_summary)."""
        return self.capturer.capture_thread_summary(self.root, known_paths=known_paths, thread_latest=thread_latest,
                                                    label=label, scope=scope, kind=kind, progress=progress)

    def capture_thread(self, *, known_paths: Iterable[str], label: str | None = None,
                       scope: ScopeSettings | None = None, kind: str = SnapshotKind.CAPTURE,
                       progress: Progress | None = None) -> CaptureResult:
        """A conversation thread's capture of exactly what it tracks (Capturer.capture_thread)."""
        return self.capturer.capture_thread(self.root, known_paths=known_paths, label=label, scope=scope,
                                            kind=kind, progress=progress)

    def preview(self, *, known_paths: Iterable[str] = (), scope: ScopeSettings | None = None) -> CaptureResult:
        """This workspace now, hashed in memory only (Capturer.preview)."""
        return self.capturer.preview(self.root, known_paths=known_paths, scope=scope)

    def diff(self, snap_id: str, scope: ScopeSettings | None = None) -> list[Change]:
        """Per-path changes from a snapshot to this workspace now (two snapshots: Store.diff)."""
        old = self.repo.files(snap_id)
        known = [p for p, _e in captured_items(old)]
        return diff_maps(old, self.preview(known_paths=known, scope=scope).files)

    def recover(self, own_held: bool = False) -> Recovery | None:
        """Finish a restore that was interrupted in this workspace (None when there was none).

        Only under the workspace lock, which a running restore holds: a live restore is never
        "finished" by someone else (StoreBusy instead). A held restore of this process is judged only by its
        holder (`own_held`: it has given up waiting for the other side).
        """
        with self.repo.workspace_lock(self.root, wait=False):
            return self._recover(own_held)

    def _recover(self, own_held: bool = False) -> Recovery | None:
        report = self.restorer.recover(own_held)
        if report is not None:
            self.repo.report_recovery(report)
        return report

    def plan(self, snap_id: str, *, known_paths: Iterable[str] = (), scope: ScopeSettings | None = None,
             progress: Progress | None = None, into: bool = False) -> RestorePlan:
        """What restoring `snap_id` here would do, against a capture held in memory only (nothing written)."""
        return self.restore(snap_id, dry_run=True, known_paths=known_paths, scope=scope, progress=progress,
                            into=into).plan

    def prepare(self, snap_id: str, *, dry_run: bool = False, known_paths: Iterable[str] = (),
                scope: ScopeSettings | None = None, progress: Progress | None = None,
                into: bool = False, thread_latest: str | None = None) -> PreparedRestore:
        """A restore taken as far as its plan: enter it (`with`) to take the locks, finish an interrupted restore,
        commit the safety capture and plan; then `apply` it, or leave the block and nothing changes.

        The caller does what it must between the plan and the apply (ask, fork the conversation, record a redo
        entry) inside the block: the locks stay held, so the plan is still the truth when it is applied, and the
        store never calls back into the caller. A snapshot witnessed absence only under its own root: restoring it
        into another directory is refused unless `into` is set, and then nothing there is deleted. `thread_latest`:
        a snapshot whose captured paths the safety capture covers too (a thread's newest), decoded only when it is
        not the workspace's newest (which the capture grows from anyway).
        """
        return PreparedRestore(self, snap_id, dry_run=dry_run, known_paths=known_paths, scope=scope,
                               progress=progress, into=into, thread_latest=thread_latest)

    def restore(
        self,
        snap_id: str,
        *,
        dry_run: bool = False,
        known_paths: Iterable[str] = (),
        scope: ScopeSettings | None = None,
        confirm: Callable[[RestorePlan], bool] | None = None,
        progress: Progress | None = None,
        into: bool = False,
        hold: dict[str, Any] | None = None,
    ) -> RestoreResult:
        """Safety capture, plan, (`confirm`: a yes or no on the plan), journaled apply (`prepare`, then `apply`).
        The safety id undoes it exactly. With `hold`, see PreparedRestore.apply."""
        with self.prepare(snap_id, dry_run=dry_run, known_paths=known_paths, scope=scope, progress=progress,
                          into=into) as prepared:
            if dry_run or (confirm is not None and not confirm(prepared.plan)):
                return prepared.unapplied()
            return prepared.apply(hold)

    def update_held(self, hold: dict[str, Any]) -> None:
        """Rewrite this process's held restore's data, durably (before the caller acts on the other side)."""
        with self.repo.workspace_lock(self.root):
            self.restorer.update_hold(hold)

    def release_held(self) -> None:
        """The other side of this process's held restore happened: the restore stands."""
        with self.repo.workspace_lock(self.root):
            self.restorer.release()

    def undo_held(self) -> Recovery:
        """The other side did not happen: this process's held restore is rolled back."""
        with translate_os_errors(f"undo of the restore into {self.root}"), self.repo.workspace_lock(self.root):
            return self.restorer.undo()


class PreparedRestore:
    """A restore between its plan and its apply (Workspace.prepare): inside its `with` block the workspace lock and
    the store's shared lock are held (gc cannot drop the target, no other restore or capture of the workspace
    runs), any interrupted restore has been finished, the safety capture is committed and `plan` made."""

    def __init__(self, workspace: Workspace, snap_id: str, *, dry_run: bool, known_paths: Iterable[str],
                 scope: ScopeSettings | None, progress: Progress | None, into: bool,
                 thread_latest: str | None = None) -> None:
        self.workspace, self.snap_id, self.dry_run = workspace, snap_id, dry_run
        self._known, self._scope, self._progress, self._into = known_paths, scope, progress, into
        self._thread_latest = thread_latest
        self._locks = contextlib.ExitStack()
        self._started = time.perf_counter()
        self._applied = False
        self._inside = False  # within the `with` block: the locks held
        self._checked: Contents | None = None  # what `check` verified, for the apply

    def __enter__(self) -> PreparedRestore:
        from .restore.plan import HELD_OR_ABSENT

        ws = self.workspace
        repo, root, snap_id = ws.repo, ws.root, self.snap_id
        with translate_os_errors(f"restore into {root}"):
            target_rec = repo.record(snap_id)
            refuse_single_files(snap_id, target_rec.root, target_rec.kind)
            foreign = str(root) != target_rec.root
            if foreign and not self._into:
                raise StoreError(
                    f"snapshot {snap_id[:12]} was taken of {target_rec.root}, not {root}; to copy its files into "
                    f"{root} anyway pass --into {root} (nothing there is deleted then)")
            target = repo.files(snap_id)
            # The safety capture must hold everything the restore may write or delete, without size cap:
            # every path the target holds or tombstoned, and any file the target witnessed absent.
            known = [*self._known, *(p for p, e in target.items() if e.kind in HELD_OR_ABSENT)]
            # The shared store lock spans capture, the caller's steps and apply: gc cannot drop the target meanwhile.
            self._locks.enter_context(repo.workspace_lock(root))
            self._locks.enter_context(repo.shared_lock())
            try:
                self._plan(target, known, foreign)
            except BaseException:
                self._locks.close()
                raise
        self._inside = True
        return self

    def _plan(self, target: FileMap, known: list[str], foreign: bool) -> None:
        """Finish an interrupted restore, take the safety capture (in memory only for a dry run), plan."""
        from .restore.apply import RestoreResult
        from .restore.plan import DELETE, WRITE, keep_everything, plan_restore, protected_in

        ws, dry_run = self.workspace, self.dry_run
        repo, root, snap_id = ws.repo, ws.root, self.snap_id
        recovered = None if dry_run else self._recover_or_put_back()
        ignore = Ignore.load(root, repo.folding(root))
        # Dry runs hash in memory only; real runs commit the safety snapshot before touching anything.
        self._safety_started_ns = time.time_ns()
        wanted = None if foreign else (lambda p: witnessed_absent(target, p))
        if dry_run:
            safety = ws.capturer.safety_preview(root, known_paths=known, scope=self._scope, progress=self._progress,
                                                whatever_size=wanted, thread_latest=self._thread_latest)
        else:
            safety = ws.capturer.safety(root, known_paths=known, scope=self._scope, label=f"before restoring "
                                        f"{snap_id[:12]}", progress=self._progress, whatever_size=wanted,
                                        thread_latest=self._thread_latest)
        plan = plan_restore(target, safety.files, ignore, str(root), snap_id,
                            protected_in(safety.files, repo.protected_rel(root)), repo.folding(root),
                            named=None if dry_run else _named_between(repo, snap_id, safety.id))
        plan.safety_id = None if dry_run else safety.id
        if foreign:
            keep_everything(plan)
        for a in plan.actions:
            if a.op in (WRITE, DELETE):
                a.before = safety.stats.get(a.respell or a.path)  # a rename's: the spelling it renames
        self.safety = safety
        self.plan = plan
        self.result = RestoreResult(plan, None if dry_run else safety.id, dry_run=dry_run, recovered=recovered)

    def _recover_or_put_back(self) -> Recovery | None:
        """Finish an interrupted restore first; one whose target or safety snapshot is gone can be neither finished
        nor rolled back, and only the restore its error names (`way_out`: the safety's, the target's, or with both
        gone any) goes past it: that journal goes as a recovery ends one (set-aside files get their names back, temps
        go), and the safety capture that follows keeps the files as they are."""
        ws = self.workspace
        try:
            return ws._recover()
        except (TargetGone, SafetyGone) as gone:
            if gone.way_out is not None and gone.way_out != self.snap_id:
                raise
            ws.restorer.give_up()
            return None

    def __exit__(self, *exc: object) -> None:
        self._inside = False
        self._locks.close()

    def unapplied(self) -> RestoreResult:
        """The result of a restore left at its plan (a dry run, or declined): what it would have done, nothing done."""
        self.result.left = self.plan.left
        self.result.seconds = time.perf_counter() - self._started
        return self.result

    def check(self) -> None:
        """Verify every content the apply writes before the caller changes anything of its own (a conversation fork, a
        redo entry): CorruptStore, "nothing was changed", where the store holds one damaged. `apply` checks anyway
        when this was not called."""
        self._prepared_only("checked")
        with translate_os_errors(f"restore into {self.workspace.root}"):
            self._checked = self.workspace.restorer.check(self.plan, self.safety.stored_blobs)

    def _prepared_only(self, what: str) -> None:
        """Refuse a dry run, a restore applied already, or one outside its `with` block (its locks not held)."""
        if self.dry_run or self._applied or not self._inside:
            raise StoreError(f"only a prepared restore, inside its `with` block and once, can be {what}")

    def apply(self, hold: dict[str, Any] | None = None) -> RestoreResult:
        """The journaled apply of the plan (each path only if it is still as the safety capture saw it).

        With `hold` (the caller's data, kept in the journal) the restore is one side of a change the caller then
        settles: `Workspace.release_held` when the other side happened, `undo_held` when it did not; until then an
        interruption rolls it back (restore/journal.py).
        """
        self._prepared_only("applied")
        self._applied = True
        ws = self.workspace
        with translate_os_errors(f"restore into {ws.root}"):
            ws.restorer.apply(self.plan, self.safety.id, self.result, self.safety.stored_blobs,
                              self._safety_started_ns, hold, self._checked)
        self.result.seconds = time.perf_counter() - self._started
        return self.result


def _named_between(repo: Repository, target: str, safety: str) -> set[str] | None:
    """Every path at which the target's map and the safety snapshot's may differ, when the delta records between them
    say (the safety snapshot descends from the target, or from the snapshot the target was written over: a rewind's
    pre-edit states laid over its pre-turn snapshot); None: compare the maps whole."""
    named = repo.named_between(target, safety)
    if named is not None:
        return named
    over = repo.head(target).parent
    if over is None:
        return None
    below = repo.named_between(over, safety)
    return None if below is None else below | repo.record(target).changes.keys()


def refuse_single_files(snap_id: str, root: str, kind: str) -> None:
    """A snapshot of single files by absolute path is restored by rewind and redo (states.py), not here."""
    if root == "/" and kind in STATES_KINDS:
        raise StoreError(f"snapshot {snap_id[:12]} records single files by absolute path (agent edits); "
                         "rewind and redo restore it, not a workspace restore")
