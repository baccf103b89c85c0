"""Rewind and redo of a thread through the SDK: the conversation (`thread/fork`, back to the origin) with its files.

Why apart: a rewind is the one operation that changes both Codex's threads and the workspace, in an order that a
kill at any instant cannot break (safety capture, plan, confirmation, fork, redo entry, journaled restore); the
proxy's file rewind (app/rewind/revert.py, for a client that reverts the conversation itself) shares its pieces.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from snapshot_store import RestorePlan, RestoreResult, StoreError
from snapshot_store.errors import Interrupted
from snapshot_store.restore import DELETE, WRITE
from snapshot_store.states import StatesRestore

from ..auto_gc import AutoGc
from ..choices import Choices
from ..codex_connection import CodexConnection
from ..errors import Declined, SessionError
from ..recorder import Recorder
from ..sidecar import RedoEntry, ThreadSidecar
from ..threads import Prompt, Threads
from ..vocab import CONVERSATION_MODES, FILE_MODES, RewindMode
from ..workspace_lock import SessionLock
from .flow import Files, Place, Planned, preview, run
from .revert import forked_sidecar, saving_redo
from .stake import others_warning
from .targets import merged_plan, merged_result, restore_targets


@dataclass
class RewindPreview:
    """What a rewind is about to do, shown for confirmation before anything changes."""

    thread_id: str
    to_prompt: int
    prompt: str
    mode: str
    plan: RestorePlan | None  # None when no files are restored


@dataclass
class RedoPreview:
    """What a redo is about to do: what changed since the rewind comes before anything is restored."""

    thread_id: str
    origin_thread: str
    mode: str
    plan: RestorePlan | None
    changed_since_rewind: list[str]
    turns_since_rewind: int


@dataclass
class RewindResult:
    """What a rewind did (or, for a dry run, would do)."""

    thread_id: str
    origin_thread: str
    mode: str
    to_prompt: int
    prompt: str
    safety_id: str | None
    restore: RestoreResult | None
    dry_run: bool = False
    no_snapshot_reason: str | None = None  # the prompt is conversation-only, and why

    def as_json(self) -> dict[str, Any]:
        """Stable JSON for `codexr rewind --json`."""
        return {
            "thread_id": self.thread_id,
            "origin_thread": self.origin_thread,
            "mode": self.mode,
            "to_prompt": self.to_prompt,
            "prompt": self.prompt,
            "safety_id": self.safety_id,
            "dry_run": self.dry_run,
            "restore": self.restore.as_json() if self.restore else None,
            "no_snapshot_reason": self.no_snapshot_reason,
        }


@dataclass
class RedoResult:
    """What a redo did (or would do)."""

    thread_id: str
    from_thread: str
    mode: str
    safety_id: str | None
    changed_since_rewind: list[str]
    turns_since_rewind: int
    restore: RestoreResult | None
    dry_run: bool = False

    def as_json(self) -> dict[str, Any]:
        """Stable JSON for `codexr redo --json`."""
        return {
            "thread_id": self.thread_id,
            "from_thread": self.from_thread,
            "mode": self.mode,
            "safety_id": self.safety_id,
            "changed_since_rewind": self.changed_since_rewind,
            "turns_since_rewind": self.turns_since_rewind,
            "dry_run": self.dry_run,
            "restore": self.restore.as_json() if self.restore else None,
        }


class Rewinder:
    """Rewinds and redoes the threads of one workspace (the recorder's store, sidecars and scope)."""

    def __init__(self, conn: CodexConnection, recorder: Recorder, threads: Threads, choices: Choices,
                 lock: SessionLock, gc: AutoGc, codex_home: Path) -> None:
        self.conn, self.recorder, self.threads, self.choices = conn, recorder, threads, choices
        self.lock, self.gc, self.codex_home = lock, gc, codex_home
        self.store, self.sidecars, self.cwd = recorder.store, recorder.sidecars, recorder.cwd
        self.scope, self.tracking = recorder.scope, recorder.tracking

    def resolve_prompt(self, prompts: list[Prompt], to: str | int) -> Prompt:
        """The prompt `to` names: its number (from 1) or its turn id."""
        if isinstance(to, int) or str(to).isdigit():
            n = int(to)
            if not 1 <= n <= len(prompts):
                raise SessionError(f"prompt {n} does not exist (the thread has {len(prompts)} prompts)")
            return prompts[n - 1]
        for p in prompts:
            if p.turn_id == to:
                return p
        raise SessionError(f"turn {to} is not in this thread")

    def other_sessions(self) -> list[str]:
        """Other live codexr sessions in this workspace (their work may be overwritten)."""
        return self.lock.others()

    def others_warning(self, thread_id: str | None, plan: RestorePlan | None) -> list[str]:
        """Warning lines for a restore plan while another codexr session is live here (none when alone): the
        files it deletes or overwrites that are not as this thread last captured them (app/rewind/stake.py, the
        rule the proxy's revert refuses by)."""
        others = self.other_sessions()
        if not others or plan is None:
            return []
        side = self.sidecars.load(thread_id) if thread_id else None
        return others_warning(others, self.store, side, plan)

    @property
    def place(self) -> Place:
        """Where this workspace's rewinds restore (app/rewind/flow.py)."""
        return Place(self.store, self.cwd, self.scope, self.codex_home)

    def rewind(self, thread_id: str, to: str | int, mode: str = RewindMode.BOTH, *, dry_run: bool = False,
               confirm: Callable[[RewindPreview], bool] | None = None) -> RewindResult:
        """Fork the conversation before prompt `to` and/or restore its pre-turn files.

        The flow's order (app/rewind/flow.py; a kill at any instant leaves a rewind that did not happen, or one that
        redo undoes): safety capture, plan, `confirm`, fork, the redo entry saved (pinning the safety snapshot),
        then the journaled restore. A declined rewind changes nothing and creates no fork.
        """
        if mode not in tuple(RewindMode):
            raise SessionError(f"unknown rewind mode {mode!r}")
        side = self.sidecars.load(thread_id)
        prompts = self.threads.prompts(thread_id)
        target = self.resolve_prompt(prompts, to)
        files = mode in FILE_MODES
        why = target.no_snapshot_reason()
        if files and why is not None:
            raise SessionError(f"{why}; rewind the conversation only with --conversation-only")
        if files and target.pre and not self.store.exists(target.pre):
            raise SessionError(
                f"prompt {target.number}'s file snapshot is gone (retention drops the snapshots of threads idle "
                "longer than file_snapshots.thread_retention_days); rewind the conversation only with "
                "--conversation-only")
        if files and target.pre:
            self._same_workspace(self.store.record(target.pre).root, "rewind")
        plan = self._rewind_files(side, prompts, target, persist=not dry_run) if files and target.pre else None
        if dry_run:
            restore = preview(self.place, plan)[0] if plan is not None else None
            return RewindResult(thread_id, thread_id, mode, target.number, target.text, None, restore, True, why)
        steps = _RewindSteps(self, side, thread_id, target, prompts, mode, plan, confirm)
        done = run(self.place, plan, steps)
        if done is None:
            raise Declined("rewind cancelled; nothing changed")
        safety = done.result.safety_id if done.result else None
        self.threads.mark_used(done.dest)
        self.gc.collect_later()
        return RewindResult(done.dest, thread_id, mode, target.number, target.text, safety, done.result,
                            no_snapshot_reason=why)

    def _rewind_files(self, side: ThreadSidecar | None, prompts: list[Prompt], target: Prompt,
                      persist: bool) -> Files:
        """What a rewind to `target` restores: its pre-turn snapshot with the pre-edit states the agent's patches
        recorded for paths it does not hold, in the workspace and outside it (app/rewind/targets.py)."""
        assert target.pre is not None
        undone = {p.turn_id: p.number for p in prompts[target.number - 1:]}
        targets, ws_target, out_target = restore_targets(self.store, str(self.cwd), side, undone, target.pre,
                                                         target.text, persist)
        return Files(ws_target, out_target, self.recorder.known_paths(side) if side else [],
                     shown=lambda ws, out: merged_plan(ws, out, targets),
                     merged=lambda ws, plan, out, out_plan: merged_result(ws, plan, out, out_plan, targets))

    def _same_workspace(self, root: str, what: str) -> None:
        """Refuse a rewind or redo whose files are another directory's: the store would suggest `--into`, which
        copies a snapshot elsewhere and is no option of theirs; the thread's workspace is where it belongs."""
        if root == str(self.cwd):
            return
        import shlex

        raise SessionError(f"this thread's files are in {root}, not in {self.cwd}: run the {what} there "
                           f"(`codexr -C {shlex.quote(root)} {what} ...`)")

    def _rewind_interrupted(self, exc: Interrupted, dest: str, origin: str, at: float) -> Interrupted:
        """A rewind whose file restore a signal stopped: the redo entry goes and the fork is archived, so that
        with its files rolled back the rewind did not happen (or, if some could not be put back, says what to do)."""
        if not exc.rolled_back:
            return Interrupted(f"the rewind was stopped: {exc}; the rewind is recorded: the conversation continues "
                               f"on thread {dest}, and `codexr redo --thread {dest}` undoes it", exc.signum, False)

        def drop(s: ThreadSidecar) -> None:
            if s.redo and s.redo[-1].at == at and s.redo[-1].origin_thread == origin:
                s.redo.pop()
            s.history.append({"event": "rewind-interrupted", "from": origin, "at": time.time()})

        self.sidecars.update(dest, drop)
        fork = ""
        if dest != origin:
            self._drop_fork(dest, origin)
            fork = f"; its conversation fork {dest} is archived"
        return Interrupted(f"the rewind was rolled back: files as before{fork}; nothing changed, "
                           f"continue on thread {origin}", exc.signum, True)

    def _record_rewind(self, side: ThreadSidecar | None, dest_thread: str, origin: str, target: Prompt,
                       prompts: list[Prompt], mode: str, safety_id: str | None, target_snapshot: str | None,
                       outside_safety: str | None, outside_target: str | None) -> None:
        """Save the redo entry on the destination thread before any file changes (it pins the safeties)."""
        files = mode in FILE_MODES
        entry = RedoEntry(origin_thread=origin, mode=mode, safety_id=safety_id,
                          target_snapshot=target_snapshot if files else None, to_prompt=target.number,
                          prompt=target.text, origin_turns=len(prompts), outside_safety_id=outside_safety,
                          outside_target=outside_target)
        add = saving_redo(entry)
        if dest_thread == origin:
            self.sidecars.update(origin, add, new=lambda: side if side is not None else self.recorder.sidecar(origin))
        else:
            dest = self._fork_sidecar(side, dest_thread, origin, prompts[: target.number - 1])
            add(dest)
            self.sidecars.save(dest)

    def _drop_fork(self, new_thread: str, thread_id: str) -> None:
        """A rewind that failed before it was recorded leaves no stray fork behind (archived, not deleted)."""
        if new_thread != thread_id:
            with contextlib.suppress(Exception):
                self.conn.client.thread_archive(new_thread)

    def _fork_before(self, thread_id: str, target: Prompt, prompts: list[Prompt]) -> str:
        """The conversation as it was just before `target` was sent.

        For the first prompt this is a fork *before* it (experimental `beforeTurnId`): unlike a fresh
        thread/start it is saved at once, so another codexr process can resume or redo it.
        """
        if target.number == 1:
            params = {**self.choices.thread_params(self.cwd), "beforeTurnId": target.turn_id}
        else:  # a compaction or review between the two prompts stays: it came before `target` was sent
            params = {**self.choices.thread_params(self.cwd),
                      "lastTurnId": target.after_turn or prompts[target.number - 2].turn_id}
        resp = self.conn.rpc(f"cannot fork thread {thread_id}", lambda: self.conn.client.thread_fork(thread_id, params))
        return str(resp.thread.id)

    def _fork_sidecar(self, side: ThreadSidecar | None, new_thread: str, origin: str,
                      shared: list[Prompt]) -> ThreadSidecar:
        """The fork keeps the snapshots of the prompts it shares with its origin."""
        if side is None:
            return ThreadSidecar(thread_id=new_thread, cwd=str(self.cwd), tracking=self.tracking, forked_from=origin)
        return forked_sidecar(side, new_thread, origin, str(self.cwd), {p.turn_id for p in shared})

    def _changed_outside(self, entry: RedoEntry, out: StatesRestore | None) -> list[str]:
        """Paths outside the workspace the redo overwrites or deletes that changed after the rewind."""
        if out is None or entry.outside_target is None or not self.store.exists(entry.outside_target):
            return []
        left_by_rewind = self.store.files(entry.outside_target)
        changed = []
        for a in out.plan.actions:
            then = left_by_rewind.get(a.path)
            if a.op in (WRITE, DELETE) and a.current != then and not (
                    (a.current is None or a.current.kind == "-") and (then is None or then.kind == "-")):
                changed.append("/" + a.path)
        return sorted(changed)

    def _changed_since_rewind(self, entry: RedoEntry, plan: RestorePlan) -> list[str]:
        """Paths the redo will write or delete whose state is not the one the rewind left.

        Taken from the redo's own plan, so it names everything the redo overwrites or deletes that
        changed after the rewind, also where a walk never looks (churn or ignored directories).
        """
        if entry.target_snapshot is None:
            return []
        left_by_rewind = self.store.files(entry.target_snapshot)
        out = []
        for a in plan.actions:
            if a.op not in (WRITE, DELETE):
                continue
            then = left_by_rewind.get(a.path)
            # absent then and absent now is no change, however each capture recorded the absence
            absent_now = a.current is None or a.current.kind == "-"
            if a.current != then and not (absent_now and (then is None or then.kind == "-")):
                out.append(a.path)
        return sorted(out)

    def redo(self, thread_id: str, *, dry_run: bool = False,
             confirm: Callable[[RedoPreview], bool] | None = None) -> RedoResult:
        """Undo the last rewind that landed on this thread: its files and its conversation.

        The flow's order (app/rewind/flow.py), after the origin thread is resumed: `confirm` sees what changed since
        the rewind before anything is restored; the redo's own safety snapshot is pinned in the sidecar before
        files change; the entry is popped after, so a redo killed half-way can simply be run again.
        """
        side = self.sidecars.load(thread_id)
        if side is None or not side.redo:
            raise SessionError(f"nothing to redo on thread {thread_id}")
        entry = side.redo[-1]
        # On a fork, prompts past the shared ones are new; on the same thread (files-only), past the old count.
        base = entry.to_prompt - 1 if entry.origin_thread != thread_id else entry.origin_turns
        turns_since = max(0, len(self.threads.prompts(thread_id)) - base)
        restores = entry.mode in FILE_MODES and entry.safety_id is not None
        if restores and entry.safety_id and self.store.exists(entry.safety_id):
            self._same_workspace(self.store.record(entry.safety_id).root, "redo")
        files = None
        if restores and entry.safety_id:
            files = Files(entry.safety_id, entry.outside_safety_id, self.recorder.known_paths(side),
                          shown=lambda ws, out: merged_plan(ws, out, None, None),
                          merged=lambda ws, plan, out, out_plan: merged_result(ws, plan, out, out_plan, None))
        steps = _RedoSteps(self, thread_id, entry, turns_since, confirm)
        if dry_run:
            restore = None
            if files is not None:
                restore, planned = preview(self.place, files)
                steps.changes(planned)
            return RedoResult(entry.origin_thread, thread_id, entry.mode, None, steps.changed, turns_since, restore,
                              True)
        if entry.mode in CONVERSATION_MODES and entry.origin_thread != thread_id:
            self.threads.resume_thread(entry.origin_thread)  # first: a thread Codex will not resume changes nothing
        done = run(self.place, files, steps)
        if done is None:
            raise Declined("redo cancelled; nothing changed")
        safety = done.result.safety_id if done.result else None

        def pop(s: ThreadSidecar) -> None:
            if s.redo and s.redo[-1].at == entry.at and s.redo[-1].origin_thread == entry.origin_thread:
                s.redo.pop()
            s.history.append({"event": "redo", "to": entry.origin_thread, "at": time.time(), "safety_id": safety})

        self.sidecars.update(thread_id, pop)
        if entry.origin_thread != thread_id:
            self.sidecars.update(
                entry.origin_thread,
                lambda s: s.history.append({"event": "redone", "from": thread_id, "at": time.time(),
                                            "safety_id": safety}),
                new=lambda: self.recorder.sidecar(entry.origin_thread))
        self.threads.mark_used(entry.origin_thread if entry.mode in CONVERSATION_MODES else thread_id)
        self.gc.collect_later()
        return RedoResult(entry.origin_thread, thread_id, entry.mode, safety, steps.changed, turns_since,
                          done.result)


class _RewindSteps:
    """A rewind's steps in the flow (app/rewind/flow.py): the front end's `confirm` decides, the conversation is
    forked just before the prompt (modes with the conversation), the redo entry goes on the thread it lands on."""

    def __init__(self, rw: Rewinder, side: ThreadSidecar | None, thread_id: str, target: Prompt,
                 prompts: list[Prompt], mode: str, files: Files | None,
                 confirm: Callable[[RewindPreview], bool] | None) -> None:
        self.rw, self.side, self.thread_id, self.target, self.prompts = rw, side, thread_id, target, prompts
        self.mode, self.files, self.confirm = mode, files, confirm
        self.at = 0.0  # the redo entry's time, once saved

    def decide(self, planned: Planned | None) -> bool:
        preview = RewindPreview(self.thread_id, self.target.number, self.target.text, self.mode,
                                planned.shown if planned else None)
        return self.confirm is None or self.confirm(preview)

    def keep(self) -> str:
        if self.mode not in CONVERSATION_MODES:
            return self.thread_id
        return self.rw._fork_before(self.thread_id, self.target, self.prompts)

    def record(self, dest: str, planned: Planned | None) -> None:
        outside = planned.outside if planned else None
        try:
            self.rw._record_rewind(self.side, dest, self.thread_id, self.target, self.prompts, self.mode,
                                   planned.shown.safety_id if planned else None,
                                   self.files.workspace if self.files else None,
                                   outside.safety_id if outside else None,
                                   self.files.outside if self.files else None)
        except BaseException:
            self.rw._drop_fork(dest, self.thread_id)
            raise
        saved = self.rw.sidecars.load(dest)
        self.at = saved.redo[-1].at if saved is not None and saved.redo else 0.0

    def stopped(self, exc: Interrupted | StoreError, dest: str, outside: bool) -> BaseException:
        if isinstance(exc, StoreError):
            return SessionError(f"{exc} — the rewind is recorded: the conversation continues on thread {dest}, "
                                f"and `codexr redo --thread {dest}` undoes the files it changed")
        if outside:
            return Interrupted(f"{exc} (files outside the workspace), but the workspace's files were restored and "
                               f"the rewind is recorded: the conversation continues on thread {dest}, and "
                               f"`codexr redo --thread {dest}` undoes it", exc.signum, rolled_back=False)
        return self.rw._rewind_interrupted(exc, dest, self.thread_id, self.at)


class _RedoSteps:
    """A redo's steps in the flow (app/rewind/flow.py): `confirm` decides, seeing what changed since the rewind; the
    conversation is the rewind's origin (resumed before the flow); the redo's start is recorded on this thread."""

    def __init__(self, rw: Rewinder, thread_id: str, entry: RedoEntry, turns_since: int,
                 confirm: Callable[[RedoPreview], bool] | None) -> None:
        self.rw, self.thread_id, self.entry, self.turns_since, self.confirm = rw, thread_id, entry, turns_since, confirm
        self.changed: list[str] = []

    def changes(self, planned: Planned | None) -> None:
        """What the redo overwrites or deletes that changed since the rewind (inside the workspace, then outside)."""
        self.changed = self.rw._changed_since_rewind(self.entry, planned.workspace) if planned else []
        self.changed += self.rw._changed_outside(self.entry, planned.outside if planned else None)

    def decide(self, planned: Planned | None) -> bool:
        self.changes(planned)
        preview = RedoPreview(self.thread_id, self.entry.origin_thread, self.entry.mode,
                              planned.shown if planned else None, self.changed, self.turns_since)
        return self.confirm is None or self.confirm(preview)

    def keep(self) -> str:
        return self.entry.origin_thread

    def record(self, dest: str, planned: Planned | None) -> None:
        outside = planned.outside if planned else None
        event = {"event": "redo-started", "to": self.entry.origin_thread, "at": time.time(),
                 "safety_id": planned.shown.safety_id if planned else None,
                 "outside_safety_id": outside.safety_id if outside else None}
        self.rw.sidecars.update(self.thread_id, lambda s: s.history.append(event))

    def stopped(self, exc: Interrupted | StoreError, dest: str, outside: bool) -> BaseException:
        if isinstance(exc, StoreError):
            return exc
        if outside:
            return Interrupted(f"{exc} (files outside the workspace), but the workspace's files were restored; "
                               f"`codexr redo --thread {self.thread_id}` again finishes the redo", exc.signum,
                               rolled_back=False)
        if not exc.rolled_back:
            return exc
        # Nothing was popped or recorded as redone: the rewind can still be redone.
        self.rw.sidecars.update(self.thread_id, lambda s: s.history.append(
            {"event": "redo-interrupted", "to": self.entry.origin_thread, "at": time.time()}))
        return Interrupted(f"the redo was rolled back: files as before; nothing changed, the rewind can still be "
                           f"redone on thread {self.thread_id}", exc.signum, True)
