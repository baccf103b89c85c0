"""A rewind, a redo and the proxy's revert are one flow, read top to bottom here: plan → decide → keep the
conversation → record → apply → (the caller) finish.

Why one: each changes Codex's threads and the workspace together, in the one order a kill at any instant cannot
break. The store's safety capture and plan are taken under its locks and held (`Workspace.prepare`), so the
caller's steps run between plan and apply with the plan still true, and the store never calls back into them. What
differs between the three is each step's *what* (`Steps`): who decides (the front end asks; the proxy's rule), how
the conversation is kept (a fork; the origin thread resumed; the proxy's fork through its client), what is recorded
(a redo entry; a redo's start), and how a failure is worded. The rules of the next issues (whose change a file
holds, names that differ only in case, a per-file choice) land in `plan`, once, for all three.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, Protocol

from snapshot_store import RestorePlan, RestoreResult, Store, StoreError
from snapshot_store.errors import Interrupted
from snapshot_store.fsutil import translate_os_errors
from snapshot_store.settings import ScopeSettings
from snapshot_store.states import StatesRestore, prepare_states_restore


@dataclass
class Place:
    """Where a flow restores: the store, the workspace, its scope, and Codex's home (never written)."""

    store: Store
    cwd: Path
    scope: ScopeSettings
    codex_home: Path


@dataclass
class Files:
    """What the files go back to: a snapshot of the workspace, a states snapshot of paths outside it (or none)."""

    workspace: str
    outside: str | None = None
    known: list[str] = field(default_factory=list)
    """Paths the workspace's safety capture must look at beyond its tracked set (the thread's known paths)."""
    shown: Callable[[RestorePlan, RestorePlan | None], RestorePlan] = lambda ws, _outside: ws
    """The plan a front end shows, from the workspace's plan and the outside one (a rewind adds its pre-edit
    states' reasons and what cannot be restored)."""
    merged: Callable[[RestoreResult, RestorePlan, RestoreResult | None, RestorePlan | None], RestoreResult] = \
        lambda ws, _plan, _out, _out_plan: ws
    """The result a front end shows, from the workspace's result, the plan shown and the outside result or plan."""


@dataclass
class Planned:
    """A flow's plan: the one a front end shows, and its two parts (the workspace's, the paths outside it)."""

    shown: RestorePlan
    workspace: RestorePlan
    outside: StatesRestore | None


class Steps(Protocol):
    """What a rewind, a redo or the proxy's revert does at each step of the flow."""

    def decide(self, planned: Planned | None) -> bool:
        """Go ahead? (`planned` None: no files change.) False changes nothing."""

    def keep(self) -> str:
        """Keep the conversation as it must be after this (a fork; the origin): the thread the files go with from
        now on. Called only once decided, before anything is recorded."""

    def record(self, dest: str, planned: Planned | None) -> None:
        """Record what is about to happen (a redo entry pins the safety snapshots), before any file changes; a
        failure here must leave nothing of `keep` behind."""

    def stopped(self, exc: Interrupted | StoreError, dest: str, outside: bool) -> BaseException:
        """What to raise (`exc` itself: as it is) when a signal or the store stopped the apply (`outside`: of the
        paths outside the workspace, after the workspace's were restored), the thread being `dest`."""


@dataclass
class Done:
    """A flow that went ahead: the thread the files now go with, and what the restore did (None: no files)."""

    dest: str
    result: RestoreResult | None


def preview(place: Place, files: Files) -> tuple[RestoreResult, Planned]:
    """What the flow's restore would do, against captures held in memory only (nothing written, no lock kept)."""
    ws = place.store.at(place.cwd).restore(files.workspace, dry_run=True, known_paths=files.known,
                                           scope=place.scope)
    out = prepare_outside(place.store, files.outside, place.codex_home, dry_run=True)
    out_plan = out.plan if out is not None else None
    planned = Planned(files.shown(ws.plan, out_plan), ws.plan, out)
    return files.merged(ws, planned.shown, None, out_plan), planned


def run(place: Place, files: Files | None, steps: Steps, hold: dict[str, Any] | None = None) -> Done | None:
    """plan → decide → keep → record → apply: None when declined (nothing changed). With `hold` the workspace's
    restore is held for the conversation side (snapshot_store's held journal), which the caller settles."""
    if files is None:  # the conversation only: no plan, nothing to apply
        if not steps.decide(None):
            return None
        dest = steps.keep()
        steps.record(dest, None)
        return Done(dest, None)
    with translate_os_errors(f"restore into {place.cwd}"), \
            place.store.at(place.cwd).prepare(files.workspace, known_paths=files.known, scope=place.scope) as ready:
        # plan: the workspace's safety capture and plan are taken (under its locks), then those of paths outside it
        outside = prepare_outside(place.store, files.outside, place.codex_home)
        planned = Planned(files.shown(ready.plan, outside.plan if outside is not None else None), ready.plan,
                          outside)
        if not steps.decide(planned):  # decide
            return None
        dest = steps.keep()  # keep the conversation
        steps.record(dest, planned)  # record, before any file changes
        try:  # apply
            result = ready.apply(hold)
        except (Interrupted, StoreError) as exc:
            _reraise(steps.stopped(exc, dest, outside=False), exc)
    try:
        out_result = outside.apply() if outside is not None else None
    except (Interrupted, StoreError) as exc:
        _reraise(steps.stopped(exc, dest, outside=True), exc)
    return Done(dest, files.merged(result, planned.shown, out_result, None))


def _reraise(err: BaseException, exc: BaseException) -> NoReturn:
    """Raise what a step made of `exc` (itself: as it came)."""
    if err is exc:
        raise exc
    raise err from exc


def prepare_outside(store: Store, snap_id: str | None, codex_home: Path, *, dry_run: bool = False
                    ) -> StatesRestore | None:
    """Safety capture and plan of a restore of paths outside the workspace (None when there are none); Codex's
    home is never written."""
    if snap_id is None:
        return None
    return prepare_states_restore(store, snap_id, dry_run=dry_run, protected=[str(codex_home)])
