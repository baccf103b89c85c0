"""Whose change a path holds, for a rewind (issue 34): what changed inside a turn of the thread is the agent's; what
changed between its turns, or after the last one, is the user's (or another session's), and a rewind keeps it.

Why: a restore that took every path back to the pre-turn snapshot also took back the user's own work done between
prompts (a hand-made file deleted, a hand edit reverted) — the complaint most often made of every agent's rewind.
Nothing was lost (the safety snapshot and redo hold it), but it did what those tools do. The rule, from the
snapshots the thread already has (one before and one after each prompt's turn): a path the agent changed in the
undone turns and nobody changed since goes back; any other path the restore would change is kept, and the plan says
why (a path both changed is kept as it is for now: a three-way merge is the rule's next step).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snapshot_store import Store
from snapshot_store.manifest import Entry, FileEntry, FileMap, is_captured, witnessed_absent
from snapshot_store.restore import LEAVE, WRITE

from ..recording.sidecar import TurnRecord

KEPT_YOURS = "kept: changed by you (or another session), not by the agent in prompts {first}-{last}"
KEPT_BOTH = "kept as it is now: changed by the agent in prompt {n} and by you since (not merged)"
KEPT_UNKNOWN = "kept: not changed by the agent in a prompt codexr recorded (prompts {first}-{last})"


def _held(m: FileMap, p: str) -> Entry | bool | None:
    """What state `m` knows `p` in: its entry (captured), None (witnessed absent), or False (it never looked, or
    saw it without capturing it: unknown)."""
    e = m.get(p)
    if e is not None and is_captured(e):
        return e
    return None if witnessed_absent(m, p) else False


def changed(a: FileMap, b: FileMap) -> set[str]:
    """Paths both states know, whose content (a file's bytes and mode, a link's target, presence) differs. A path
    only one of them looked at is no change: a snapshot that sees more (a file just tracked) did not change it."""
    out = set()
    for p in set(a) | set(b):
        x, y = _held(a, p), _held(b, p)
        if x is not False and y is not False and x != y:
            out.add(p)
    return out


@dataclass
class Owners:
    """Who changed what since the prompt a rewind goes back before."""

    first: int
    last: int
    agent: dict[str, int] = field(default_factory=dict)  # path -> the last undone prompt whose turn changed it
    left: dict[str, Entry | None] = field(default_factory=dict)  # path -> what the agent's last change left there
    user: set[str] = field(default_factory=set)  # paths changed between the turns or after the last one

    def kept(self, path: str) -> str | None:
        """Why the rewind keeps `path` as it is now (None: it is the agent's alone, and goes back)."""
        if path in self.agent:
            return KEPT_BOTH.format(n=self.agent[path]) if path in self.user else None
        if path in self.user:
            return KEPT_YOURS.format(first=self.first, last=self.last)
        return KEPT_UNKNOWN.format(first=self.first, last=self.last)


def owner_rule(store: Store, undone: list[TurnRecord], numbers: Mapping[str, int], first: int, last: int,
               agent_patched: Iterable[str] = (), restored: Iterable[str] = ()) -> Callable[[FileMap], Owners]:
    """For the sidecar's records from prompt `first` on (prompts, the user's `!` commands and queued prompts alike:
    each ran as a turn of the thread), the rule that, given the state now, says who changed each path. `numbers`:
    a record's prompt number (a record between prompts counts with the one before); `agent_patched`: paths the
    agent's patches touched that the snapshots may not hold (their pre-edit states, app/rewind/targets.py). A turn
    without snapshots (a prompt sent without codexr) proves nothing the agent's: what changed across it counts as
    the user's; a queued turn, which has no pre-turn snapshot, starts from the post of the turn before it.
    `restored`: what codexr's own restores since the last turn (files-only rewinds, redos) put back, as the target
    snapshots they restored to: a path now as one of them left it is no change of the user's."""
    patched = list(agent_patched)
    restores = [t for t in restored if store.exists(t)]

    def owners(now: FileMap) -> Owners:
        out = Owners(first, last, {p: first for p in patched})
        before: FileMap | None = None
        number, prev_post = first, None
        for rec in undone:
            number = numbers.get(rec.turn_id, number)
            pre_id = rec.pre or (prev_post if rec.post else None)
            prev_post = rec.post
            if not (pre_id and rec.post and store.exists(pre_id) and store.exists(rec.post)):
                continue
            pre, post = store.files(pre_id), store.files(rec.post)
            if before is not None:
                out.user |= changed(before, pre)
            for p in changed(pre, post):
                out.agent[p] = number
                held = _held(post, p)
                out.left[p] = None if held is None or isinstance(held, bool) else held
            before = post
        if before is not None:
            since = changed(before, now)
            for target in restores:  # codexr put these back itself
                put = store.files(target)
                since = {p for p in since if _held(put, p) is False or _held(put, p) != _held(now, p)}
            out.user |= since
        return out

    return owners


MERGED = "merged: your changes kept, the agent's of prompt {n} on taken back"
CONFLICT = "conflict, kept yours: you and the agent changed the same lines (prompt {n}); the rewound text is {path}"


def merge_both(store: Store, plan_actions: list[Any], owners: Owners, root: Path, dry_run: bool) -> None:
    """Paths both the agent and the user changed: a three-way merge of the text (base: what the agent left; ours:
    the file now; theirs: what the rewind restores), libgit2's merge-file through pygit2. A clean merge is written
    (its blob stored first, unless `dry_run`); overlapping hunks, a binary or a non-file side are a conflict: the
    file is kept as it is and the plan says so."""
    import tempfile

    import pygit2

    writer = None if dry_run else store.blob_writer()
    with tempfile.TemporaryDirectory(prefix="codexr-merge-") as tmp:
        repo = pygit2.init_repository(tmp, bare=True)
        try:
            for a in plan_actions:
                if a.op != WRITE or a.path not in owners.agent or a.path not in owners.user:
                    continue
                n = owners.agent[a.path]
                base, theirs = owners.left.get(a.path), a.target
                try:
                    ours_bytes = (root / a.path).read_bytes()
                except OSError:
                    ours_bytes = None
                if not (isinstance(base, tuple) and base.kind == "f" and theirs is not None and theirs.kind == "f"
                        and ours_bytes is not None):
                    a.op, a.reason = LEAVE, KEPT_BOTH.format(n=n)
                    continue
                sides = [b"".join(store.blob_chunks(base.blob)), ours_bytes, b"".join(store.blob_chunks(theirs.blob))]
                if any(b"\0" in x for x in sides):
                    a.op, a.reason = LEAVE, KEPT_BOTH.format(n=n) + " (binary)"
                    continue
                base_e, ours_e, theirs_e = (pygit2.IndexEntry(a.path, repo.create_blob(x), pygit2.enums.FileMode.BLOB)
                                            for x in sides)
                result = repo.merge_file_from_index(base_e, ours_e, theirs_e, use_deprecated=False)
                if not result.automergeable:
                    a.op, a.reason = LEAVE, CONFLICT.format(n=n, path="in the safety snapshot")
                    continue
                merged = result.contents.encode() if isinstance(result.contents, str) else bytes(result.contents)
                mode = a.current.mode if a.current is not None and a.current.kind == "f" else theirs.mode
                blob = writer.add(merged).hex() if writer is not None else theirs.blob
                a.target = FileEntry("f", mode, len(merged), blob)
                a.reason = MERGED.format(n=n)
            if writer is not None:
                writer.commit()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
