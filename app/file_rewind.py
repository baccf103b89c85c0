"""The file side of a rewind to a recorded prompt, for a front end that does the conversation side itself: the
proxy, whose client reverts the conversation with `thread/revert` (issue 19 §4).

Every rule of a rewind holds: the pre-turn snapshot with the pre-edit states of the undone turns' patches, the
safety snapshot before anything is written, witnessed deletion only, nothing outside the workspace but the
patched paths' recorded states, the redo entry saved (pinning the safety snapshots) before any file changes.
The pieces both rewinds need (the safety capture outside the workspace, the redo entry's record, a fork's sidecar)
live here, and the SDK's rewinder (app/rewinder.py) uses them: this module must not import the SDK, which the
proxy never loads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from pathlib import Path

from snapshot_store import RestorePlan, RestoreResult, Store, StoreError
from snapshot_store.states import StatesRestore, prepare_states_restore

from .errors import SessionError
from .others_work import at_stake, stake_lines
from .recorder import Recorder
from .rewind_targets import merged_plan, merged_result, restore_targets
from .sidecar import RedoEntry, ThreadSidecar, TurnRecord
from .vocab import RewindMode


@dataclass
class FilesRewound:
    """What a file rewind did: its result (plan, counts, safety snapshot) and the prompt it went back to."""

    result: RestoreResult
    number: int
    prompt: str
    outside_safety: str | None
    """The states snapshot of the paths outside the workspace the rewind wrote (undo restores it)."""

    @property
    def written(self) -> int:
        return len(self.result.written)

    @property
    def deleted(self) -> int:
        return len(self.result.deleted)


def rewind_files(recorder: Recorder, thread_id: str, before_turn: str, codex_home: Path, *,
                 keep: Callable[[], str], others: Sequence[str] = ()) -> FilesRewound:
    """Restore the workspace to just before `before_turn` of `thread_id`.

    The order is the SDK's rewind's: safety capture, plan, the decision, `keep()` (the conversation kept whole:
    it returns the thread `codexr redo` goes back to), the redo entry saved (pinning the safety snapshots), then
    the journaled restore. With `others` (other live codexr sessions here) the plan decides, as the rewinder's
    warning does (app/others_work.py): it goes ahead when it deletes or overwrites nothing but files as this
    thread last captured them, else it is refused naming those files (this caller cannot ask; `codexr rewind`
    asks). Raises SessionError (no file changed, `keep` not called) when refused, when the prompt has no snapshot
    or the store refuses; a StoreError after the redo entry was saved leaves a rewind `codexr redo` undoes.
    """
    store, cwd, scope = recorder.store, recorder.cwd, recorder.scope
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
    known = recorder.known_paths(side)
    outside: dict[str, StatesRestore] = {}
    shown: dict[str, RestorePlan] = {}
    refused: list[str] = []

    def go(plan: RestorePlan) -> bool:
        out = prepare_outside(store, out_target, codex_home)
        if out is not None:
            outside["prep"] = out
        merged = shown["plan"] = merged_plan(plan, out.plan if out else None, targets)
        stake = at_stake(store, side, merged) if others else None
        if stake is not None and stake.files:
            refused.extend(stake_lines(stake))
            return False
        redo_thread = keep()
        entry = RedoEntry(origin_thread=redo_thread, mode=RewindMode.BOTH, safety_id=plan.safety_id,
                          target_snapshot=ws_target, to_prompt=number, prompt=target.prompt,
                          origin_turns=len(side.turns), outside_safety_id=out.safety_id if out else None,
                          outside_target=out_target)
        recorder.sidecars.update(thread_id, saving_redo(entry, via="thread/revert"))
        return True

    try:
        result = store.at(cwd).restore(ws_target, known_paths=known, scope=scope, confirm=go)
    except StoreError as exc:
        raise SessionError(f"the files could not be restored: {exc}") from exc
    if refused:
        raise SessionError(f"another codexr session is live in this workspace ({'; '.join(others)}) and this revert "
                           f"would delete or overwrite files that may be its work — {'; '.join(refused)}; rewind "
                           "with `codexr rewind`, which shows the plan and asks first")
    prep = outside.get("prep")
    out_res = prep.apply() if prep is not None else None
    result = merged_result(result, shown["plan"], out_res, None, targets)
    return FilesRewound(result, number, target.prompt, prep.safety_id if prep else None)


def saving_redo(entry: RedoEntry, **extra: str) -> Callable[[ThreadSidecar], None]:
    """What records a rewind in the sidecar of the thread it landed on: its redo entry (which pins its safety
    snapshots) and its history event (`extra` joins the event); the SDK's rewind (app/rewinder.py) uses it too."""
    event = {"event": "rewind", "from": entry.origin_thread, "to_prompt": entry.to_prompt, "mode": entry.mode,
             **extra, "safety_id": entry.safety_id, "outside_safety_id": entry.outside_safety_id, "at": time.time()}

    def add(s: ThreadSidecar) -> None:
        s.redo.append(entry)
        s.history.append(event)

    return add


def prepare_outside(store: Store, snap_id: str | None, codex_home: Path, *, dry_run: bool = False
                    ) -> StatesRestore | None:
    """Safety capture and plan of a restore of paths outside the workspace (None when there are none); the SDK's
    rewind and redo (app/rewinder.py) use it too."""
    if snap_id is None:
        return None
    return prepare_states_restore(store, snap_id, dry_run=dry_run, protected=[str(codex_home)])


def copy_turns(recorder: Recorder, origin: str, fork: str) -> None:
    """The fork holding a reverted thread's turns keeps their snapshots (it is what `codexr redo` returns to)."""
    side = recorder.sidecars.load(origin)
    if side is None:
        return
    recorder.sidecars.save(forked_sidecar(side, fork, origin, side.cwd))


def forked_sidecar(side: ThreadSidecar, fork: str, origin: str, cwd: str,
                   shared: Container[str] | None = None) -> ThreadSidecar:
    """A fork of `side`'s thread keeps the snapshots of the turns it shares with its origin (all, or those whose
    ids `shared` holds) and the agent-touched paths; the SDK's rewind (app/rewinder.py) forks with it too."""
    dest = ThreadSidecar(thread_id=fork, cwd=cwd, tracking=side.tracking, forked_from=origin)
    dest.turns = [TurnRecord(**vars(t)) for t in side.turns if shared is None or t.turn_id in shared]
    dest.touch(side.agent_touched)
    return dest


def drop_turns(recorder: Recorder, thread_id: str, from_turn: str) -> None:
    """After the conversation was reverted: the thread's records end before `from_turn` (the fork keeps them)."""

    def cut(s: ThreadSidecar) -> None:
        ids = [t.turn_id for t in s.turns]
        if from_turn in ids:
            s.turns = s.turns[: ids.index(from_turn)]

    recorder.sidecars.update(thread_id, cut)


def undo_files(recorder: Recorder, thread_id: str, done: FilesRewound, codex_home: Path) -> None:
    """The conversation could not be reverted: put the files back as they were (never files without it)."""
    store = recorder.store
    safety = done.result.safety_id
    if safety is not None:
        store.at(recorder.cwd).restore(safety, known_paths=recorder.known_paths(recorder.sidecar(thread_id)),
                                       scope=recorder.scope)
    if done.outside_safety is not None:
        prepare_states_restore(store, done.outside_safety, dry_run=False, protected=[str(codex_home)]).apply()

    def pop(s: ThreadSidecar) -> None:
        if s.redo and s.redo[-1].safety_id == safety:
            s.redo.pop()
        s.history.append({"event": "rewind-undone", "why": "the conversation was not reverted", "at": time.time()})

    recorder.sidecars.update(thread_id, pop)
