"""The file side of a rewind to a recorded prompt, for a front end that does the conversation side itself: the
proxy, whose client reverts the conversation with `thread/revert` (issue 19 §4).

It runs the one flow (flow.py) with the revert's steps, the restore held until Codex answers (held.py); every rule
of a rewind holds: the pre-turn snapshot with the pre-edit states of the undone turns' patches, the safety snapshot
before anything is written, witnessed deletion only, nothing outside the workspace but the patched paths' recorded
states, the redo entry saved (pinning the safety snapshots) before any file changes. This module must not import
the SDK, which the proxy never loads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snapshot_store import RestoreResult, StoreError
from snapshot_store.states import prepare_states_restore

from ..errors import SessionError
from ..recording.recorder import Recorder
from .flow import Files, Place, RevertSteps, run
from .owners import Decision, owner_rule
from .records import cut_turns, forget_rewind
from .targets import restore_targets


@dataclass
class FilesRewound:
    """What a file rewind did: its result (plan, counts, safety snapshot) and the prompt it went back to."""

    result: RestoreResult
    number: int
    prompt: str
    outside_safety: str | None
    """The states snapshot of the paths outside the workspace the rewind wrote (undo restores it)."""
    hold: dict[str, Any]
    """The held restore's journal data (app/rewind/held.py): the conversation side settles it."""
    decided: dict[str, Decision] = field(default_factory=dict)
    """What the rule of whose change it is kept or merged (owners.py): the revert's line names them."""

    @property
    def written(self) -> int:
        return len(self.result.written)

    @property
    def deleted(self) -> int:
        return len(self.result.deleted)


def rewind_files(recorder: Recorder, thread_id: str, before_turn: str, codex_home: Path, *,
                 keep: Callable[[], str], hold: dict[str, Any], others: Sequence[str] = ()) -> FilesRewound:
    """Restore the workspace to just before `before_turn` of `thread_id`, held for the conversation side.

    The order is the SDK's rewind's: safety capture, plan, the decision, `keep()` (the conversation kept whole:
    it returns the thread `codexr redo` goes back to), the redo entry saved (pinning the safety snapshots), then
    the journaled restore — *held* (`hold`, app/rewind/held.py): its journal stays until the caller settles it
    with `settle_files` once the conversation was or was not reverted, and a kill before that is settled by the
    next command to match the conversation. With `others` (other live codexr sessions here) the plan decides, as
    the rewinder's warning does (app/rewind/stake.py): it goes ahead when it deletes or overwrites nothing but
    files as this thread last captured them, else it is refused naming those files (this caller cannot ask;
    `codexr rewind` asks). Raises SessionError when refused, when the prompt has no snapshot or the store refuses
    (no file changed, `keep` not called), or when the restore failed part-way (what it wrote was put back, the
    redo entry dropped; the error says if a path could not be put back yet).
    """
    store, cwd = recorder.store, recorder.cwd
    side = recorder.sidecars.load(thread_id)
    if side is None or not side.tracking:
        raise SessionError("this thread has no file snapshots in codexr")
    number = next((i for i, t in enumerate(side.turns, 1) if t.turn_id == before_turn), None)
    if number is None:
        raise SessionError("that prompt ran outside codexr: it has no file snapshot")
    target = side.turns[number - 1]
    if not target.pre or not store.exists(target.pre):
        raise SessionError(f"prompt {number}'s file snapshot is gone or was never taken")
    undone = {t.turn_id: n for n, t in enumerate(side.turns[number - 1:], number)}
    targets, ws_target, out_target = restore_targets(store, str(cwd), side, undone, target.pre, target.prompt, True)
    owners = owner_rule(store, side.turns[number - 1:], undone, number, len(side.turns), targets.inside)
    files = Files(ws_target, out_target, list(side.agent_touched), targets, owners, latest=side.latest_snapshot())
    steps = RevertSteps(recorder, side, thread_id, number, target.prompt, files, keep, hold, others)
    try:
        done = run(Place(store, cwd, recorder.scope, codex_home), files, steps, hold)
    except StoreError as exc:  # before anything was recorded: nothing changed
        raise SessionError(f"the files could not be restored: {exc}") from exc
    if done is None:
        raise SessionError(f"another codexr session is live in this workspace ({'; '.join(others)}) and this revert "
                           f"would delete or overwrite files that may be its work — {'; '.join(steps.refused)}; "
                           "rewind with `codexr rewind`, which shows the plan and asks first")
    assert done.result is not None
    return FilesRewound(done.result, number, target.prompt, hold.get("outside_safety"), hold, files.all_decided)


def mark_forwarded(recorder: Recorder, done: FilesRewound) -> None:
    """Before the revert goes to Codex: the held restore says so, durably (a kill after this asks Codex)."""
    done.hold["forwarded"] = True
    recorder.store.at(recorder.cwd).update_held(done.hold)


def settle_files(recorder: Recorder, thread_id: str, done: FilesRewound, codex_home: Path, reverted: bool) -> None:
    """Codex answered the revert: on success the thread's records end before the prompt (the fork keeps them) and
    the held restore stands; else the files go back (never files without conversation) and the redo entry goes.
    Raises StoreError when a file could not be put back (the next command goes on with it)."""
    workspace = recorder.store.at(recorder.cwd)
    if reverted:
        cut_turns(recorder.sidecars, thread_id, done.hold["before"])
        workspace.release_held()
        return
    forget_rewind(recorder.sidecars, thread_id, done.result.safety_id, "the conversation was not reverted")
    undo = workspace.undo_held()
    if done.outside_safety is not None:
        prepare_states_restore(recorder.store, done.outside_safety, dry_run=False, protected=[str(codex_home)]).apply()
    if undo.left:
        more = f" and {len(undo.left) - 3} more" if len(undo.left) > 3 else ""
        raise StoreError("; ".join(f"{p}: {why}" for p, why in undo.left[:3]) + more)
