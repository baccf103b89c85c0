"""What a rewind restores beyond the pre-turn snapshot: the pre-edit states of the agent's patches.

A path the pre-turn snapshot holds (captured, or witnessed absent) keeps using the snapshot. Any
other path the target prompt's own patches touched — hidden, in a churn directory, beyond the residue limits, or
outside the workspace — gets the state that patch recorded (`app/recording/pre_edit.py`). Inside
the workspace these states are laid over the snapshot (a derived snapshot the redo entry pins);
outside it they form a states snapshot restored path by path (`snapshot_store.states`). A path first patched by a
later prompt is left as it is: its state before the target prompt was never seen, and is never invented (issue 34).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from snapshot_store import RestorePlan, RestoreResult, Store
from snapshot_store.manifest import Entry, is_captured, parent_of, witnessed_absent
from snapshot_store.restore import LEAVE, Action
from snapshot_store.states import STATES_ROOT, key_path
from snapshot_store.vocab import SnapshotKind

from ..recording.sidecar import ThreadSidecar, relative_to
from .outside_owners import AGENT_LEFT, agent_left

FROM_PATCH = "pre-edit state from the agent's patch"
UNSEEN = "left as it is: its state before prompt {to} is unknown (codexr first saw it at prompt {n})"
SHELL_NOTE = ("{n} of the prompts undone ran shell commands: files they changed outside the workspace are not "
              "covered (only the agent's patches are recorded there)")


@dataclass
class RewindTargets:
    """The restore targets of a rewind to one prompt, and what cannot be restored."""

    inside: dict[str, Entry] = field(default_factory=dict)  # workspace-relative path -> pre-edit entry
    outside: dict[str, Entry] = field(default_factory=dict)  # absolute-path key -> pre-edit entry
    unrecoverable: dict[str, str] = field(default_factory=dict)  # shown path -> why
    how: dict[str, str] = field(default_factory=dict)  # shown path -> how a deleted file's mode and type were decided
    commands: int = 0  # prompts undone that ran shell commands

    def notes(self) -> list[str]:
        """The one-line notes every plan of this rewind shows."""
        return [SHELL_NOTE.format(n=self.commands)] if self.commands else []


def rewind_targets(store: Store, cwd: str, side: ThreadSidecar, turns: Mapping[str, int],
                   pre_snapshot: str) -> RewindTargets:
    """Collect the pre-edit states of the turns undone (`turns`: turn id -> prompt number; earliest wins per path).

    A path first patched by a prompt after the target is left alone and named: that prompt's pre-edit state is not
    the target's, and writing it would invent a state codexr never saw (issue 34).
    """
    out = RewindTargets()
    decided: set[str] = set()
    target = min(turns.values(), default=0)
    states: list[tuple[str, Entry | str, int, object]] = []  # each path's earliest pre-edit state, in path order
    for rec in side.turns:  # in the order the prompts ran
        number = turns.get(rec.turn_id)
        if number is None:
            continue
        if rec.commands:
            out.commands += 1
        if not rec.pre_edit or not store.exists(rec.pre_edit):
            continue
        files = store.files(rec.pre_edit)
        meta = store.head(rec.pre_edit).meta
        whys = meta.get("unrecoverable") or {}
        hows = meta.get("deleted") or {}  # absent in records written before issue 17
        found: list[tuple[str, Entry | str]] = [(key_path(k), e) for k, e in files.items()]
        found += [(str(p), str(w)) for p, w in whys.items() if isinstance(p, str)]
        for path, what in sorted(found, key=lambda x: x[0]):
            if path not in decided:
                decided.add(path)
                states.append((path, what, number, hows))
    asked = [rel for s in states if (rel := relative_to(cwd, s[0])) is not None]
    if asked:
        # The restore after this decodes the target's map whatever happens here (its plan compares whole maps), so
        # it is decoded first and these verdicts come from it: searched in the records instead, a path no later
        # record names meant reading the first record's whole text at 100,000 files, then decoding it all the same
        # (a one-file rewind there: 480 -> 421 ms median in-process, 10 rewinds each way, issue 35).
        store.files(pre_snapshot)
    pre_map = entries_around(store, pre_snapshot, asked)
    for path, what, number, hows in states:
        rel = relative_to(cwd, path)
        if rel is not None and (is_captured(pre_map.get(rel)) or witnessed_absent(pre_map, rel)):
            continue  # the pre-turn snapshot holds it
        shown = rel if rel is not None else path
        if number != target:
            out.unrecoverable[shown] = UNSEEN.format(to=target, n=number)
            continue
        how = hows.get(path) if isinstance(hows, dict) else None
        if isinstance(how, str) and not isinstance(what, str):
            out.how[shown] = how
        if isinstance(what, str):
            out.unrecoverable[shown] = what
        elif rel is not None:
            out.inside[rel] = what
        else:
            out.outside[path.lstrip("/")] = what
    return out


def entries_around(store: Store, snap_id: str, paths: list[str]) -> dict[str, Entry]:
    """What a snapshot's map holds at these paths and each of their ancestors, all that `is_captured` and
    `witnessed_absent` ask of it: from its map when decoded already, else read from its records without decoding it
    (decoded only beyond Repository.entries_at's few paths; the whole map is ~0.1 s at 100,000 files)."""
    keys = set(paths)
    for p in paths:
        while p:
            p = parent_of(p)
            keys.add(p)
    if not paths:
        return {}
    return {k: e for k, e in store.entries_at(snap_id, keys).items() if e is not None}


def inside_target(store: Store, cwd: str, pre_snapshot: str, targets: RewindTargets, label: str,
                  persist: bool) -> str:
    """The pre-turn snapshot, with the pre-edit states it lacks laid over it."""
    if not targets.inside:
        return pre_snapshot
    return store.write_unlisted(cwd, dict(targets.inside), parent=pre_snapshot, kind=SnapshotKind.REWIND_TARGET,
                                label=label, persist=persist)


def outside_target(store: Store, targets: RewindTargets, label: str, persist: bool,
                   left: dict[str, list[int | str | None]] | None = None) -> str | None:
    """A states snapshot of the pre-edit states outside the workspace (None when there are none); `left`: what the
    agent's last undone patch left at each path (outside_owners.agent_left), for its restore to keep the user's."""
    if not targets.outside:
        return None
    return store.write_unlisted(STATES_ROOT, dict(targets.outside), parent=None, kind=SnapshotKind.PRE_EDIT,
                                label=label, meta={AGENT_LEFT: left} if left else None, persist=persist)


def restore_targets(store: Store, cwd: str, side: ThreadSidecar | None, undone: Mapping[str, int], pre_snapshot: str,
                    prompt: str, persist: bool) -> tuple[RewindTargets, str, str | None]:
    """A rewind's targets, its workspace target and its states target outside it (the SDK's rewind and the
    proxy's file rewind alike): `undone` maps the undone turns to their prompt numbers."""
    targets = rewind_targets(store, cwd, side, undone, pre_snapshot) if side else RewindTargets()
    label = f"rewind to: {prompt[:50]}"
    left = agent_left(store, side, undone, targets.outside) if side and targets.outside else None
    return (targets, inside_target(store, cwd, pre_snapshot, targets, label, persist),
            outside_target(store, targets, label, persist, left))


def _outside_actions(plan: RestorePlan | None, reason: str | None) -> list[Action]:
    """The states plan's actions with absolute paths (for showing; applying uses the plan itself)."""
    if plan is None:
        return []
    out = []
    for a in plan.actions:
        why = a.reason if reason is None or a.op == LEAVE else f"{a.reason}; {reason}"
        out.append(replace(a, path=key_path(a.path), reason=why))
    return out


def merged_plan(ws: RestorePlan, outside: RestorePlan | None, targets: RewindTargets | None,
                reason: str | None = FROM_PATCH) -> RestorePlan:
    """One plan to show: the workspace's, then the paths outside it, then what cannot be restored."""
    actions = []
    for a in ws.actions:
        if targets is not None and reason and a.path in targets.inside and a.op != LEAVE:
            a = replace(a, reason=f"{a.reason}; {reason}")
        actions.append(a)
    actions += _outside_actions(outside, reason)
    if targets is not None:
        actions = [replace(a, reason=f"{a.reason}; {targets.how[a.path]}") if a.op != LEAVE and a.path in targets.how
                   else a for a in actions]
    if targets is not None:
        actions += [Action(LEAVE, p, why) for p, why in sorted(targets.unrecoverable.items())]
    notes = [*ws.notes, *(targets.notes() if targets is not None else [])]
    return RestorePlan(ws.root, ws.target_id, actions, ws.safety_id, notes)


def merged_result(ws: RestoreResult, plan: RestorePlan, outside: RestoreResult | None,
                  outside_plan: RestorePlan | None, targets: RewindTargets | None) -> RestoreResult:
    """The workspace restore's result with the outside one and the unrecoverable paths folded in."""
    res = RestoreResult(plan, ws.safety_id, list(ws.written), list(ws.deleted), list(ws.left), ws.dry_run,
                        ws.seconds, ws.recovered, list(ws.failed), ws.late_signal)
    if outside is not None:
        res.written += [key_path(p) for p in outside.written]
        res.deleted += [key_path(p) for p in outside.deleted]
        res.left += [replace(a, path=key_path(a.path)) for a in outside.left]
        res.failed += [replace(a, path=key_path(a.path)) for a in outside.failed]
        res.late_signal = res.late_signal or outside.late_signal
        res.seconds += outside.seconds
    elif outside_plan is not None:
        res.left += [replace(a, path=key_path(a.path)) for a in outside_plan.left]
    if targets is not None:
        res.left += [Action(LEAVE, p, why) for p, why in sorted(targets.unrecoverable.items())]
    return res
