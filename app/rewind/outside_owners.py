"""Whose change a path outside the workspace holds, for a rewind (issue 34): the agent's patch left it in a state
each turn records (`TurnRecord.post_edit`); a path no longer in that state was changed by the user since, and the
rewind keeps it (or merges the text, as owners.decide does inside the workspace).

Why: no snapshot walks outside the workspace, so the pre- and post-turn snapshots owners.py reads say nothing
there. The rewind's states target (targets.outside_target) carries, per path, the last undone prompt that patched
it and the states snapshot of what that patch left (`meta.agent_left`); the states restore's plan, whose safety
capture read each path as it is now, is then changed here. A path with no post state recorded (a turn recorded
before issue 34) goes back as it always did.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from snapshot_store import RestorePlan, Store, StoreError
from snapshot_store.manifest import Entry
from snapshot_store.restore import DELETE, LEAVE, WRITE, Action
from snapshot_store.states import STATES_ROOT

from ..recording.sidecar import ThreadSidecar
from .owners import KEPT_YOURS, Decision, Owners, decide

AGENT_LEFT = "agent_left"  # the states target's meta: {key: [prompt number, post-edit snapshot id | null]}


def agent_left(store: Store, side: ThreadSidecar, turns: Mapping[str, int], keys: Iterable[str]
               ) -> dict[str, list[int | str | None]]:
    """For each states key (an absolute path without its `/`), the last undone prompt whose patch touched it and
    the states snapshot of what it left there (None: that turn recorded none). `turns`: turn id -> prompt number."""
    want = set(keys)
    out: dict[str, list[int | str | None]] = {}
    for rec in side.turns:  # in the order the prompts ran: the last one wins
        number = turns.get(rec.turn_id)
        if number is None or not want:
            continue
        try:
            if rec.post_edit and store.exists(rec.post_edit):
                touched, left = set(store.files(rec.post_edit)) & want, rec.post_edit
            elif rec.pre_edit and store.exists(rec.pre_edit):  # no post state recorded: touched, left unknown
                why = store.head(rec.pre_edit).meta.get("unrecoverable") or {}
                named = set(store.files(rec.pre_edit)) | {str(p).lstrip("/") for p in why}
                touched, left = named & want, None
            else:
                continue
        except StoreError:
            continue  # a damaged record says nothing
        for key in touched:
            out[key] = [number, left]
    return out


def keep_yours_outside(store: Store, target_id: str, plan: RestorePlan, dry_run: bool) -> dict[str, Decision]:
    """Leave (or merge) every path outside the workspace the states plan would write or delete that is no longer as
    the agent's last undone patch left it; what was decided so, by states key (a conflict's restored side is one
    the user may still choose, as inside the workspace). A target without `meta.agent_left` (a redo's, an older
    rewind's) is restored as it is."""
    try:
        left_of = store.head(target_id).meta.get(AGENT_LEFT)
    except StoreError:
        return {}
    if not isinstance(left_of, dict):
        return {}
    owners = Owners(0, 0)
    decided: dict[str, Decision] = {}
    both: list[Action] = []
    for a in plan.actions:
        found = left_of.get(a.path)
        if a.op not in (WRITE, DELETE) or not isinstance(found, list) or len(found) != 2:
            continue
        number, post_id = found
        left = _left(store, post_id, a.path)
        if not isinstance(number, int) or left is None or a.current == left:
            continue  # no post state known, or the path is as the agent left it: the agent's alone, it goes back
        if a.op == WRITE and _is_file(left) and _is_file(a.current) and _is_file(a.target):
            owners.agent[a.path], owners.left[a.path], owners.user[a.path] = number, left, number
            both.append(a)
        else:
            decided[a.path] = Decision("kept", a.op, a.target, KEPT_YOURS.format(m=number))
            a.op, a.reason = LEAVE, KEPT_YOURS.format(m=number)
    if both:
        if dry_run:
            decided.update(decide(store, both, owners, Path(STATES_ROOT), dry_run))
        else:
            with store.shared_lock():  # the merged blobs are stored as a restore's are: under the store's lock
                decided.update(decide(store, both, owners, Path(STATES_ROOT), dry_run))
    return decided


def _left(store: Store, post_id: object, key: str) -> Entry | None:
    """What the agent's patch left at `key` (None: unknown — no record, or it could not be read then)."""
    if not isinstance(post_id, str):
        return None
    try:
        if not store.exists(post_id):
            return None
        e = store.files(post_id).get(key)
    except StoreError:
        return None
    return e if e is not None and e.kind in ("f", "l", "-") else None


def _is_file(e: Entry | None) -> bool:
    return e is not None and e.kind == "f"
