"""A rewind, a redo and the proxy's revert are one flow, read top to bottom here: plan → decide → keep the
conversation → record → apply → finish; then what each of the three does at those steps.

Why one: each changes Codex's threads and the workspace together, in the one order a kill at any instant cannot
break. The store's safety capture and plan are taken under its locks and held (`Workspace.prepare`), so the
caller's steps run between plan and apply with the plan still true, and the store never calls back into them. What
differs between the three is each step's *what* (`Steps`): who decides (the front end asks; the proxy's rule), how
the conversation is kept (a fork; the origin thread resumed; the proxy's fork through its client), what is recorded
(a redo entry; a redo's start), and how a failure is worded. The rules of the next issues (whose change a file
holds, names that differ only in case, a per-file choice) land in `plan`, once, for all three.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from snapshot_store import RestorePlan, RestoreResult, Store, StoreError
from snapshot_store.errors import Interrupted
from snapshot_store.fsutil import translate_os_errors
from snapshot_store.manifest import Entry, FileMap
from snapshot_store.restore import DELETE, LEAVE, WRITE
from snapshot_store.settings import ScopeSettings
from snapshot_store.states import StatesRestore, key_path, prepare_states_restore, state_key
from snapshot_store.vocab import SnapshotKind

from ..errors import SessionError
from ..recording.recorder import Recorder
from ..recording.sidecar import RedoEntry, Sidecars, ThreadSidecar
from ..services.threads import Prompt
from ..shared.vocab import CONVERSATION_MODES, RewindMode
from .outside_owners import keep_yours_outside
from .owners import Decision, Owners, conflicts, decide, left_map
from .picks import BOTH, MINE, NOT_CHOSEN, Picks, outside, pick, within
from .records import forget_interrupted, forget_rewind, forked_sidecar, note, saving_redo
from .stake import at_stake, stake_lines
from .targets import FROM_PATCH, RewindTargets, merged_plan, merged_result

if TYPE_CHECKING:  # the proxy's revert runs this flow too, and never loads the SDK
    from ..codex.codex_connection import CodexConnection
    from ..recording.auto_gc import AutoGc
    from ..services.choices import Choices
    from ..services.threads import Threads


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
    """Paths the workspace's safety capture must look at beyond its tracked set (the thread's agent-touched ones)."""
    targets: RewindTargets | None = None
    """A rewind's pre-edit states (targets.py): the plan shown gives their reasons and what cannot be restored."""
    owners: Callable[[FileMap], Owners] | None = None
    """The rule of whose change each path holds (owners.py), given the state now: only the agent's go back."""
    picks: Picks = field(default_factory=Picks)
    """The user's file-by-file choices: --only/--except, a picker's toggles, the answers to conflicts."""
    suffix: str = "rewound"
    """The name a kept-both's restored state is written beside the user's file with (`NAME.rewound`)."""
    decided: dict[str, Decision] = field(default_factory=dict)
    """What the rule decided otherwise than the plain restore (kept, merged, conflicts), once planned."""
    outside_decided: dict[str, Decision] = field(default_factory=dict)
    """The same for paths outside the workspace, by absolute path (as the plan shows them)."""
    beside: dict[str, str] = field(default_factory=dict)
    """Kept-both paths -> the name their restored state is written to."""
    latest: str | None = None
    """The thread's newest snapshot: what it captured, the safety capture covers too (the store decodes its map only
    when it is not the workspace's newest, which the capture grows from: ~0.1 s of a rewind at 100,000 files)."""

    def keep_yours(self, store: Store, plan: RestorePlan, now: FileMap, dry_run: bool) -> None:
        """The rule and the user's choices laid over the plan: a path not the agent's change alone is left (saying
        why) or merged; then --only/--except and the choices known so far."""
        if self.owners is not None:
            self.decided = decide(store, plan.actions, self.owners(now), Path(plan.root), dry_run)
        self.choose(plan)
        for flag, names in (("--only", self.picks.only), ("--except", self.picks.exclude)):
            for name in names:
                if not any(within(a.path, name) for a in plan.actions):
                    plan.notes.append(f"{flag} {name}: nothing this restore would change is there")

    def choose(self, plan: RestorePlan) -> None:
        """The choices (again, after the front end answered): idempotent."""
        plan.actions += pick(plan.actions, self.decided, self.picks, Path(plan.root), self.suffix, self.beside)

    def choose_outside(self, plan: RestorePlan) -> None:
        """The choices over the plan of paths outside the workspace (a states plan, keyed without the leading `/`):
        keep yours, or take the restored state; `--only` (workspace paths) leaves them all. Nothing is written beside
        a file there (nothing is written outside the workspace but the states the agent's patches touched), so
        `both` keeps yours. Before, every choice about such a path was dropped: a file chosen to be kept was
        written over all the same. Idempotent, as `choose`."""
        if self.picks.only and "" not in self.picks.only:
            for a in plan.actions:
                if a.op in (WRITE, DELETE):
                    a.op, a.reason = LEAVE, NOT_CHOSEN.format(how=self.picks.how())
        choice = {state_key(p): MINE if c == BOTH else c for p, c in self.picks.choice.items() if outside(p)}
        pick(plan.actions, {state_key(p): d for p, d in self.outside_decided.items()}, Picks(choice=choice),
             Path(plan.root), self.suffix, {})

    @property
    def all_decided(self) -> dict[str, Decision]:
        """What the rule decided, inside the workspace (relative paths) and outside it (absolute ones)."""
        return {**self.decided, **self.outside_decided}

    def sides(self) -> dict[str, Entry | None]:
        """Each conflict's restored side."""
        every = self.all_decided
        return {p: every[p].target for p in conflicts(every)}

    def shown(self, workspace: RestorePlan, outside: RestorePlan | None) -> RestorePlan:
        """The one plan a front end shows: a rewind's says which states come from the agent's patches; a redo's
        puts back what the rewind's safety capture held, with no such reason."""
        return merged_plan(workspace, outside, self.targets, FROM_PATCH if self.targets is not None else None)


@dataclass
class RewindPreview:
    """What a rewind is about to do, shown for confirmation before anything changes."""

    thread_id: str
    to_prompt: int
    prompt: str
    mode: str
    plan: RestorePlan | None  # None when no files are restored
    choices: dict[str, str] = field(default_factory=dict)
    """The answers (path -> owners.MINE / REWOUND / BOTH) the front end gives on seeing the plan; unanswered: MINE."""
    sides: dict[str, Entry | None] = field(default_factory=dict)
    """Each conflict (the agent and the user both changed it, no clean merge): its restored side (the other is the
    file now), to show both and ask."""


@dataclass
class RedoPreview:
    """What a redo is about to do: what changed since the rewind comes before anything is restored."""

    thread_id: str
    origin_thread: str
    mode: str
    plan: RestorePlan | None
    changed_since_rewind: list[str]
    turns_since_rewind: int
    choices: dict[str, str] = field(default_factory=dict)
    sides: dict[str, Entry | None] = field(default_factory=dict)


@dataclass
class Planned:
    """A flow's plan: the one a front end shows, and its two parts (the workspace's, the paths outside it)."""

    shown: RestorePlan
    workspace: RestorePlan
    outside: StatesRestore | None


@dataclass
class Done:
    """A flow that went ahead: the thread the files now go with, and what the restore did (None: no files)."""

    dest: str
    result: RestoreResult | None


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

    def finish(self, done: Done) -> None:
        """After the apply: what the kind records last (a redo pops its entry), and the thread marked used."""




def preview(place: Place, files: Files) -> tuple[RestoreResult, Planned]:
    """What the flow's restore would do, against captures held in memory only (nothing written, no lock kept)."""
    with place.store.at(place.cwd).prepare(files.workspace, dry_run=True, known_paths=files.known,
                                           thread_latest=files.latest, scope=place.scope) as ready:
        files.keep_yours(place.store, ready.plan, ready.safety.files, dry_run=True)
        ws = ready.unapplied()
    out = prepare_outside(place.store, files, place.codex_home, dry_run=True)
    out_plan = out.plan if out is not None else None
    planned = Planned(files.shown(ws.plan, out_plan), ws.plan, out)
    return merged_result(ws, planned.shown, None, out_plan, files.targets), planned


def run(place: Place, files: Files | None, steps: Steps, hold: dict[str, Any] | None = None) -> Done | None:
    """plan → decide → check → keep → record → apply: None when declined (nothing changed). With `hold` the workspace's
    restore is held for the conversation side (snapshot_store's held journal), which the caller settles."""
    if files is None:  # the conversation only: no plan, nothing to apply
        if not steps.decide(None):
            return None
        dest = steps.keep()
        steps.record(dest, None)
        done = Done(dest, None)
        steps.finish(done)
        return done
    with translate_os_errors(f"restore into {place.cwd}"), \
            place.store.at(place.cwd).prepare(files.workspace, known_paths=files.known, scope=place.scope,
                                              thread_latest=files.latest) as ready:
        # plan: the workspace's safety capture and plan are taken (under its locks), then those of paths outside it
        files.keep_yours(place.store, ready.plan, ready.safety.files, dry_run=False)  # only the agent's go back
        outside = prepare_outside(place.store, files, place.codex_home)
        shown = files.shown(ready.plan, outside.plan if outside is not None else None)
        planned = Planned(shown, ready.plan, outside)
        if not steps.decide(planned):  # decide
            return None
        files.choose(ready.plan)  # the answers given on seeing the plan
        if outside is not None:
            files.choose_outside(outside.plan)
        planned.shown = files.shown(ready.plan, outside.plan if outside is not None else None)
        ready.check()  # the content to write verified: a damaged store changes nothing, the conversation included
        if outside is not None:
            outside.check()
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
    done = Done(dest, merged_result(result, planned.shown, out_result, None, files.targets))
    steps.finish(done)  # finish
    return done


def left_by(store: Store, files: Files, planned: Planned) -> str:
    """The snapshot of what a rewind leaves (redo compares against it, and puts back only what differs): its target,
    with what the rule and the user's choices kept or merged laid over it."""
    over = left_map(planned.workspace.actions, files.decided, files.beside)
    if not over:
        return files.workspace
    return store.write_unlisted(planned.workspace.root, over, parent=files.workspace, kind=SnapshotKind.REWIND_TARGET,
                                label="what the rewind left (kept and merged paths)")


def _reraise(err: BaseException, exc: BaseException) -> NoReturn:
    """Raise what a step made of `exc` (itself: as it came)."""
    if err is exc:
        raise exc
    raise err from exc


def prepare_outside(store: Store, files: Files, codex_home: Path, *, dry_run: bool = False
                    ) -> StatesRestore | None:
    """Safety capture and plan of a restore of `files`' paths outside the workspace (None when there are none), the
    rule and the choices known so far laid over it; Codex's home is never written."""
    if files.outside is None:
        return None
    ready = prepare_states_restore(store, files.outside, dry_run=dry_run, protected=[str(codex_home)])
    decided = keep_yours_outside(store, files.outside, ready.plan, dry_run)  # what you changed since stays
    files.outside_decided = {key_path(k): d for k, d in decided.items()}
    files.choose_outside(ready.plan)
    return ready


# ----------------------------------------------------------------------------------------------------------------
# What each kind does at those steps.


class Services(Protocol):
    """What the steps of an SDK-driven rewind or redo use of the session (app/rewind/rewinder.py's Rewinder)."""

    conn: CodexConnection
    choices: Choices
    recorder: Recorder
    threads: Threads
    gc: AutoGc
    sidecars: Sidecars
    store: Store
    cwd: Path
    tracking: bool


class RewindSteps:
    """A rewind: the front end's `confirm` decides; the conversation is forked just before the prompt (the modes with
    the conversation); the redo entry goes on the thread it lands on (a fork's sidecar shares the earlier turns)."""

    def __init__(self, sv: Services, side: ThreadSidecar | None, thread_id: str, target: Prompt,
                 prompts: list[Prompt], mode: str, files: Files | None,
                 confirm: Callable[[RewindPreview], bool] | None) -> None:
        self.sv, self.side, self.thread_id, self.target, self.prompts = sv, side, thread_id, target, prompts
        self.mode, self.files, self.confirm = mode, files, confirm
        self.at = 0.0  # the redo entry's time, once saved
        self.made: str | None = None  # a fork made ahead (`fork_ahead`) that `keep` has not taken yet

    def decide(self, planned: Planned | None) -> bool:
        files = self.files
        preview = RewindPreview(self.thread_id, self.target.number, self.target.text, self.mode,
                                planned.shown if planned else None, files.picks.choice if files else {},
                                files.sides() if files else {})
        return self.confirm is None or self.confirm(preview)

    def keep(self) -> str:
        """The conversation as it was just before the prompt: a fork (for the first prompt a fork *before* it,
        experimental `beforeTurnId`: unlike a fresh thread/start it is saved at once, so another codexr process can
        resume or redo it). A compaction or review between the two prompts stays: it came before the prompt."""
        if self.mode not in CONVERSATION_MODES:
            return self.thread_id
        if self.made is not None:
            dest, self.made = self.made, None
            return dest
        return self._fork()

    def fork_ahead(self) -> None:
        """`keep`'s fork made before the decision, while the files are planned, for a caller that takes any plan
        (`--yes`); `unkept` archives it if the rewind stops before `keep`."""
        self.made = self._fork()

    def unkept(self) -> None:
        """A fork made ahead that no `keep` took (the rewind stopped or failed before it) is archived."""
        if self.made is not None:
            made, self.made = self.made, None
            self._archive(made)

    def _fork(self) -> str:
        sv, target = self.sv, self.target
        if target.number == 1:
            params = {**sv.choices.thread_params(sv.cwd), "beforeTurnId": target.turn_id}
        else:
            params = {**sv.choices.thread_params(sv.cwd),
                      "lastTurnId": target.after_turn or self.prompts[target.number - 2].turn_id}
        resp = sv.conn.rpc(f"cannot fork thread {self.thread_id}",
                           lambda: sv.conn.client.thread_fork(self.thread_id, params))
        return str(resp.thread.id)

    def record(self, dest: str, planned: Planned | None) -> None:
        """The redo entry on the thread the rewind lands on, before any file changes (it pins the safeties); a
        failure archives the fork just made."""
        sv, origin, outside = self.sv, self.thread_id, planned.outside if planned else None
        entry = RedoEntry(origin_thread=origin, mode=self.mode, safety_id=planned.shown.safety_id if planned else None,
                          target_snapshot=left_by(sv.store, self.files, planned) if self.files and planned else None,
                          to_prompt=self.target.number, prompt=self.target.text, origin_turns=len(self.prompts),
                          outside_safety_id=outside.safety_id if outside else None,
                          outside_target=self.files.outside if self.files else None)
        add = saving_redo(entry)
        try:
            if dest == origin:
                side = self.side
                sv.sidecars.update(origin, add, new=lambda: side if side is not None else sv.recorder.sidecar(origin))
            else:
                shared = {p.turn_id for p in self.prompts[: self.target.number - 1]}
                fork = (ThreadSidecar(thread_id=dest, cwd=str(sv.cwd), tracking=sv.tracking, forked_from=origin)
                        if self.side is None else forked_sidecar(self.side, dest, origin, str(sv.cwd), shared))
                add(fork)
                sv.sidecars.save(fork)
        except BaseException:
            self._archive(dest)
            raise
        self.at = entry.at

    def stopped(self, exc: Interrupted | StoreError, dest: str, outside: bool) -> BaseException:
        if isinstance(exc, StoreError):
            return SessionError(f"{exc} — the rewind is recorded: the conversation continues on thread {dest}, "
                                f"and `codexr redo --thread {dest}` undoes the files it changed")
        if outside:
            return Interrupted(f"{exc} (files outside the workspace), but the workspace's files were restored and "
                               f"the rewind is recorded: the conversation continues on thread {dest}, and "
                               f"`codexr redo --thread {dest}` undoes it", exc.signum, rolled_back=False)
        if not exc.rolled_back:
            return Interrupted(f"the rewind was stopped: {exc}; the rewind is recorded: the conversation continues "
                               f"on thread {dest}, and `codexr redo --thread {dest}` undoes it", exc.signum, False)
        # Its files rolled back, the rewind did not happen: the redo entry goes and the fork is archived.
        origin = self.thread_id
        forget_interrupted(self.sv.sidecars, dest, origin, self.at)
        fork = ""
        if dest != origin:
            self._archive(dest)
            fork = f"; its conversation fork {dest} is archived"
        return Interrupted(f"the rewind was rolled back: files as before{fork}; nothing changed, "
                           f"continue on thread {origin}", exc.signum, True)

    def finish(self, done: Done) -> None:
        self.sv.threads.mark_used(done.dest)
        self.sv.gc.collect_later()

    def _archive(self, fork: str) -> None:
        """A rewind that did not happen leaves no stray fork behind (archived, not deleted)."""
        if fork != self.thread_id:
            with contextlib.suppress(Exception):
                self.sv.conn.client.thread_archive(fork)


class RedoSteps:
    """A redo: `confirm` decides, seeing what changed since the rewind; the conversation is the rewind's origin
    (resumed before the flow); the redo's start is recorded on this thread, its entry popped at the end."""

    def __init__(self, sv: Services, thread_id: str, entry: RedoEntry, turns_since: int,
                 confirm: Callable[[RedoPreview], bool] | None, files: Files | None = None) -> None:
        self.sv, self.thread_id, self.entry, self.turns_since, self.confirm = sv, thread_id, entry, turns_since, confirm
        self.files = files
        self.changed: list[str] = []

    def changes(self, planned: Planned | None) -> None:
        """What the redo overwrites or deletes that changed since the rewind (inside the workspace, then outside)."""
        store, entry = self.sv.store, self.entry
        ws_left, out_left = entry.target_snapshot, entry.outside_target
        self.changed = changed_since(store, ws_left, planned.workspace) if planned and ws_left else []
        outside = planned.outside if planned else None
        if outside is not None and out_left is not None and store.exists(out_left):
            self.changed += ["/" + p for p in changed_since(store, out_left, outside.plan)]

    def decide(self, planned: Planned | None) -> bool:
        self.changes(planned)
        preview = RedoPreview(self.thread_id, self.entry.origin_thread, self.entry.mode,
                              planned.shown if planned else None, self.changed, self.turns_since,
                              self.files.picks.choice if self.files else {}, self.files.sides() if self.files else {})
        return self.confirm is None or self.confirm(preview)

    def keep(self) -> str:
        return self.entry.origin_thread

    def record(self, dest: str, planned: Planned | None) -> None:
        outside = planned.outside if planned else None
        note(self.sv.sidecars, self.thread_id, {
            "event": "redo-started", "to": dest, "at": time.time(),
            "safety_id": planned.shown.safety_id if planned else None,
            "outside_safety_id": outside.safety_id if outside else None})

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
        note(self.sv.sidecars, self.thread_id, {"event": "redo-interrupted", "to": dest, "at": time.time()})
        return Interrupted(f"the redo was rolled back: files as before; nothing changed, the rewind can still be "
                           f"redone on thread {self.thread_id}", exc.signum, True)

    def finish(self, done: Done) -> None:
        """The entry goes (a redo killed before this can simply be run again); both threads' histories say so."""
        sv, entry, thread_id = self.sv, self.entry, self.thread_id
        safety = done.result.safety_id if done.result else None

        def pop(s: ThreadSidecar) -> None:
            if s.redo and s.redo[-1].at == entry.at and s.redo[-1].origin_thread == entry.origin_thread:
                s.redo.pop()
            s.history.append({"event": "redo", "to": entry.origin_thread, "at": time.time(), "safety_id": safety})

        sv.sidecars.update(thread_id, pop)
        if entry.origin_thread != thread_id:
            note(sv.sidecars, entry.origin_thread, {"event": "redone", "from": thread_id, "at": time.time(),
                                                    "safety_id": safety},
                 new=lambda: sv.recorder.sidecar(entry.origin_thread))
        sv.threads.mark_used(entry.origin_thread if entry.mode in CONVERSATION_MODES else thread_id)
        sv.gc.collect_later()


def changed_since(store: Store, left: str, plan: RestorePlan) -> list[str]:
    """Paths `plan` writes or deletes whose state is not the one snapshot `left` (what a rewind left) holds.

    Taken from the redo's own plan, so it names everything the redo overwrites or deletes that changed after the
    rewind, also where a walk never looks (churn or ignored directories). Absent then and absent now is no change,
    however each capture recorded the absence.
    """
    then_map = store.files(left)
    out = []
    for a in plan.actions:
        if a.op not in (WRITE, DELETE):
            continue
        then = then_map.get(a.respell or a.path)  # a rename to another spelling: the file it renames
        absent_now = a.current is None or a.current.kind == "-"
        if a.current != then and not (absent_now and (then is None or then.kind == "-")):
            out.append(a.path)
    return sorted(out)


class RevertSteps:
    """The proxy's revert (app/rewind/revert.py): its client cannot be asked, so the rule of app/rewind/stake.py
    decides; the conversation is kept by the caller's fork (`keep`); the redo entry goes on the reverted thread, and
    the held restore's journal learns the safety snapshots and the fork; a failure drops the redo entry again."""

    def __init__(self, recorder: Recorder, side: ThreadSidecar, thread_id: str, number: int, prompt: str,
                 files: Files, keep: Callable[[], str], hold: dict[str, Any], others: Sequence[str]) -> None:
        self.recorder, self.side, self.thread_id, self.number, self.prompt = recorder, side, thread_id, number, prompt
        self.files, self.fork, self.hold, self.others = files, keep, hold, others
        self.refused: list[str] = []

    def decide(self, planned: Planned | None) -> bool:
        assert planned is not None
        stake = at_stake(self.recorder.store, self.side, planned.shown) if self.others else None
        if stake is not None and stake.files:
            self.refused = stake_lines(stake)
            return False
        return True

    def keep(self) -> str:
        return self.fork()

    def record(self, dest: str, planned: Planned | None) -> None:
        assert planned is not None
        out = planned.outside
        self.hold.update(safety=planned.workspace.safety_id, outside_safety=out.safety_id if out else None,
                         fork=dest)
        entry = RedoEntry(origin_thread=dest, mode=RewindMode.BOTH, safety_id=planned.workspace.safety_id,
                          target_snapshot=left_by(self.recorder.store, self.files, planned), to_prompt=self.number,
                          prompt=self.prompt,
                          origin_turns=len(self.side.turns), outside_safety_id=out.safety_id if out else None,
                          outside_target=self.files.outside)
        self.recorder.sidecars.update(self.thread_id, saving_redo(entry, via="thread/revert"))

    def stopped(self, exc: Interrupted | StoreError, dest: str, outside: bool) -> BaseException:
        """The held restore was rolled back (or the paths outside failed: then it is undone here): the redo entry
        goes, since there is nothing to redo."""
        back = ""
        if outside:
            undo = self.recorder.store.at(self.recorder.cwd).undo_held()
            back = "they were put back" if not undo.left else f"{len(undo.left)} could not be put back yet"
        forget_rewind(self.recorder.sidecars, self.thread_id, self.hold["safety"],
                      f"the files could not be restored ({exc})")
        if outside:
            return SessionError(f"the files outside the workspace could not be restored ({exc}); of those inside "
                                f"it {back}")
        return SessionError(f"the files could not be restored: {exc}")

    def finish(self, done: Done) -> None:
        """Nothing yet: the revert goes to Codex next, and is settled by its answer (revert.py's settle_files)."""
