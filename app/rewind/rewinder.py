"""Rewind and redo of a thread through the SDK: the conversation (`thread/fork`, back to the origin) with its files.

Why apart: a rewind is the one operation that changes both Codex's threads and the workspace, in an order that a
kill at any instant cannot break (safety capture, plan, confirmation, fork, redo entry, journaled restore); the
proxy's file rewind (app/rewind/revert.py, for a client that reverts the conversation itself) shares its pieces.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from snapshot_store import RestorePlan, RestoreResult

from ..codex.codex_connection import CodexConnection
from ..errors import ConversationGone, Declined, SessionError
from ..recording.auto_gc import AutoGc
from ..recording.recorder import Recorder
from ..recording.sidecar import ThreadSidecar
from ..recording.workspace_lock import SessionLock
from ..services.choices import Choices
from ..services.threads import Prompt, Threads
from ..shared.vocab import CONVERSATION_MODES, FILE_MODES, RewindMode
from ..shared.words import plural
from .flow import Files, Place, RedoPreview, RedoSteps, RewindPreview, RewindSteps, preview, run
from .owners import Decision, owner_rule, redo_rule
from .picks import Picks
from .stake import others_warning
from .targets import restore_targets


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
    decided: dict[str, Decision] = field(default_factory=dict)  # what the rule kept or merged (owners.py)

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
            **owners_json(self.decided),
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
    decided: dict[str, Decision] = field(default_factory=dict)

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
            **owners_json(self.decided),
        }


def owners_json(decided: dict[str, Decision]) -> dict[str, list[str]]:
    """The paths the rule decided otherwise than the plain restore, by kind (`--json`'s kept / merged / conflicts)."""
    return {key: sorted(p for p, d in decided.items() if d.kind == kind)
            for key, kind in (("kept", "kept"), ("merged", "merged"), ("conflicts", "conflict"))}


P = TypeVar("P")


class Ahead:
    """Calls run in order on a thread of their own while the caller goes on (the first that fails ends them); `then`
    wraps a confirm so their outcome comes first (the error raised there)."""

    def __init__(self, *fns: Callable[[], object]) -> None:
        self._fns = fns
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="codexr-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for fn in self._fns:
                fn()
        except BaseException as exc:
            self._error = exc

    def join(self) -> None:
        self._thread.join()

    def then(self, confirm: Callable[[P], bool] | None) -> Callable[[P], bool]:
        """`confirm`, asked once the call ended well (its error raised instead)."""
        def asked(preview: P) -> bool:
            self.join()
            if self._error is not None:
                raise self._error
            return confirm is None or confirm(preview)
        return asked


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
                raise SessionError(f"prompt {n} does not exist (the thread has {plural(len(prompts), 'prompt')})")
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
               confirm: Callable[[RewindPreview], bool] | None = None, picks: Picks | None = None,
               held: Callable[[], object] | None = None, yes: bool = False) -> RewindResult:
        """Fork the conversation before prompt `to` and/or restore its pre-turn files.

        The flow's order (app/rewind/flow.py; a kill at any instant leaves a rewind that did not happen, or one that
        redo undoes): safety capture, plan, `confirm`, fork, the redo entry saved (pinning the safety snapshot),
        then the journaled restore. A declined rewind changes nothing and creates no fork. `held`: Codex's resume of
        the thread (is it open elsewhere?), run while the files are planned, ending before `confirm` is asked (its
        error ends the rewind there, nothing changed). `yes`: the caller takes any plan (`--yes`), so the fork is
        made then too, after the resume; a rewind that stops before taking it archives it, as an interrupted one
        does (a kill in that window leaves it unarchived: a thread in the list, the files and the origin as before).
        """
        if mode not in tuple(RewindMode):
            raise SessionError(f"unknown rewind mode {mode!r}")
        side = self.sidecars.load(thread_id)
        try:
            prompts = self.threads.prompts(thread_id)
        except ConversationGone:
            if mode != RewindMode.FILES or side is None:
                raise
            prompts, held = self.threads.recorded_prompts(side), None  # the files from codexr's record alone
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
            self._same_workspace(self.store.head(target.pre).root, "rewind")
        steps = RewindSteps(self, side, thread_id, target, prompts, mode, None, confirm)
        # Codex's resume (40-190 ms at 100,000 files, measured) goes on while the files are planned (~0.4 s), which
        # asks nothing of Codex: in series they were a third of a one-file rewind there (issue 35). So does the fork
        # when the answer is known to be yes (45-125 ms there, a fifth of the rewind).
        calls = [held] if held is not None else []
        if yes and mode in CONVERSATION_MODES:
            calls.append(steps.fork_ahead)
        ahead = Ahead(*calls) if calls and not dry_run else None
        try:
            plan = self._rewind_files(side, prompts, target, persist=not dry_run) if files and target.pre else None
            if plan is not None and picks is not None:
                plan.picks = picks
            if dry_run:
                restore = preview(self.place, plan)[0] if plan is not None else None
                return RewindResult(thread_id, thread_id, mode, target.number, target.text, None, restore, True, why,
                                    plan.all_decided if plan is not None else {})
            steps.files = plan
            if ahead is not None:
                steps.confirm = ahead.then(confirm)
            done = run(self.place, plan, steps)
        finally:
            if ahead is not None:
                ahead.join()  # never left running: the session's connection closes after this
                steps.unkept()
        if done is None:
            raise Declined("rewind cancelled; nothing changed")
        safety = done.result.safety_id if done.result else None
        return RewindResult(done.dest, thread_id, mode, target.number, target.text, safety, done.result,
                            no_snapshot_reason=why, decided=plan.all_decided if plan is not None else {})

    def _rewind_files(self, side: ThreadSidecar | None, prompts: list[Prompt], target: Prompt,
                      persist: bool) -> Files:
        """What a rewind to `target` restores: its pre-turn snapshot with the pre-edit states the agent's patches
        recorded for paths it does not hold, in the workspace and outside it (app/rewind/targets.py)."""
        assert target.pre is not None
        undone = {p.turn_id: p.number for p in prompts[target.number - 1:]}
        targets, ws_target, out_target = restore_targets(self.store, str(self.cwd), side, undone, target.pre,
                                                         target.text, persist)
        numbers = {p.turn_id: p.number for p in prompts}
        at = next((i for i, t in enumerate(side.turns) if t.turn_id == target.turn_id), None) if side else None
        records = side.turns[at:] if side is not None and at is not None else []
        since = records[-1].started if records else 0.0
        restored = [e.target_snapshot for e in (side.redo if side else []) if e.target_snapshot and e.at >= since]
        owners = owner_rule(self.store, records, numbers, target.number, len(prompts), targets.inside, restored)
        return Files(ws_target, out_target, list(side.agent_touched) if side else [], targets, owners,
                     latest=side.latest_snapshot() if side else None)

    def _same_workspace(self, root: str, what: str) -> None:
        """Refuse a rewind or redo whose files are another directory's: the store would suggest `--into`, which
        copies a snapshot elsewhere and is no option of theirs; the thread's workspace is where it belongs."""
        if root == str(self.cwd):
            return
        import shlex

        if not os.path.isdir(root):  # moved or deleted: "run it there" would send the user to nothing
            also = "; `--conversation-only` rewinds the conversation alone" if what == "rewind" else ""
            raise SessionError(f"this thread's files were in {root}, which no longer exists (moved or deleted): "
                               f"nothing was changed; its snapshots restore only there (`codexr snapshots restore ID "
                               f"--into DIR` copies one elsewhere){also}")
        raise SessionError(f"this thread's files are in {root}, not in {self.cwd}: run the {what} there "
                           f"(`codexr -C {shlex.quote(root)} {what} ...`)")

    def _rewound_to(self, thread_id: str) -> str:
        """Where a redo asked of the thread a rewind started from is to be asked (a rewind's redo lives on the fork it
        went to: asked of the original, as a new user of the CLI does, it only said there was nothing to redo)."""
        landed = [(s.redo[-1].at, s.thread_id) for s in self.sidecars.all()
                  if s.redo and s.redo[-1].origin_thread == thread_id and s.thread_id != thread_id]
        if not landed:
            return ""
        fork = max(landed)[1]
        return f"; its last rewind went to thread {fork}: `codexr redo --thread {fork}`"

    def redo(self, thread_id: str, *, dry_run: bool = False,
             confirm: Callable[[RedoPreview], bool] | None = None, picks: Picks | None = None,
             held: Callable[[], object] | None = None) -> RedoResult:
        """Undo the last rewind that landed on this thread: its files and its conversation.

        The flow's order (app/rewind/flow.py), the origin thread resumed before `confirm` is asked: `confirm` sees
        what changed since the rewind before anything is restored; the redo's own safety snapshot is pinned in the
        sidecar before files change; the entry is popped after, so a redo killed half-way can simply be run again.
        `held`: Codex's resume of this thread (a command's), run first on the same thread as the origin's.
        """
        side = self.sidecars.load(thread_id)
        if side is None or not side.redo:
            raise SessionError(f"nothing to redo on thread {thread_id}{self._rewound_to(thread_id)}")
        entry = side.redo[-1]
        # On a fork, prompts past the shared ones are new; on the same thread (files-only), past the old count.
        base = entry.to_prompt - 1 if entry.origin_thread != thread_id else entry.origin_turns
        try:
            turns_since = max(0, len(self.threads.prompts(thread_id)) - base)
        except ConversationGone:
            if entry.mode != RewindMode.FILES:
                raise
            turns_since, held = max(0, len(side.turns) - base), None  # a files-only rewind's, from codexr's record
        restores = entry.mode in FILE_MODES and entry.safety_id is not None
        if restores and entry.safety_id and self.store.exists(entry.safety_id):
            self._same_workspace(self.store.head(entry.safety_id).root, "redo")
        files = None
        if restores and entry.safety_id:
            left = entry.target_snapshot if entry.target_snapshot and self.store.exists(entry.target_snapshot) else None
            since = [t for t in side.turns if t.started >= entry.at]
            owners = redo_rule(self.store, left, entry.safety_id, entry.to_prompt, since) if left else None
            files = Files(entry.safety_id, entry.outside_safety_id, list(side.agent_touched), owners=owners,
                          picks=picks or Picks(), suffix="redone", latest=side.latest_snapshot())
        steps = RedoSteps(self, thread_id, entry, turns_since, confirm, files)
        if dry_run:
            restore = None
            if files is not None:
                restore, planned = preview(self.place, files)
                steps.changes(planned)
            return RedoResult(entry.origin_thread, thread_id, entry.mode, None, steps.changed, turns_since, restore,
                              True, files.all_decided if files is not None else {})
        resumes = [held] if held is not None else []
        if entry.mode in CONVERSATION_MODES and entry.origin_thread != thread_id:
            resumes.append(functools.partial(self.threads.resume_thread, entry.origin_thread))
        # Codex's resumes go on while the files are planned (as a rewind's); a thread Codex will not resume ends the
        # redo at its confirm, before anything changed
        ahead = Ahead(*resumes) if resumes else None
        if ahead is not None:
            steps.confirm = ahead.then(confirm)
        try:
            done = run(self.place, files, steps)
        finally:
            if ahead is not None:
                ahead.join()
        if done is None:
            raise Declined("redo cancelled; nothing changed")
        safety = done.result.safety_id if done.result else None
        return RedoResult(entry.origin_thread, thread_id, entry.mode, safety, steps.changed, turns_since,
                          done.result, decided=files.all_decided if files is not None else {})

