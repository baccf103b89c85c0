"""Planning a restore, purely: the target's map and the safety capture's map in, a typed plan out.

Per path: write what the target holds, delete only what it witnessed absent, else leave it with the reason.
Nothing here reads or writes the disk.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..manifest import CAPTURED_KINDS, WALKED, Entry, FileMap, is_captured, parent_of, witnessed_absent
from ..names import EXACT, Folding
from ..reasons import ENTERABLE_DIRS, NEVER_REPORTED_DIRS, Reason
from ..scope import HIDDEN, IGNORE_FILE, Ignore, forbidden
from ..stamps import Key
from ..vocab import RestoreOp

WRITE, DELETE, RMDIR, LEAVE = RestoreOp.WRITE, RestoreOp.DELETE, RestoreOp.RMDIR, RestoreOp.LEAVE  # as imported
HELD_OR_ABSENT = CAPTURED_KINDS | {"-"}  # what a restore may write or delete: its safety capture covers them


@dataclass
class Action:
    """One step of a restore plan (or a path it leaves alone, with the reason)."""

    op: RestoreOp
    path: str
    reason: str
    target: Entry | None = None
    current: Entry | None = None
    before: Key | None = None
    respell: str | None = None  # a write that first renames this other spelling of the path (a folding volume)

    def as_json(self) -> dict[str, Any]:
        """Stable JSON shape for `--json` and the journal."""
        return {"op": self.op, "path": self.path, "reason": self.reason}


@dataclass
class RestorePlan:
    """What a restore will do, computed against a safety capture of the current state."""

    root: str
    target_id: str
    actions: list[Action]
    safety_id: str | None = None  # committed before the plan is shown (None for a dry run)
    notes: list[str] = field(default_factory=list)  # what the plan cannot cover, said once

    @property
    def writes(self) -> list[Action]:
        return [a for a in self.actions if a.op == WRITE]

    @property
    def deletes(self) -> list[Action]:
        return [a for a in self.actions if a.op == DELETE]

    @property
    def left(self) -> list[Action]:
        return [a for a in self.actions if a.op == LEAVE]



def _subtree(files: FileMap, path: str) -> list[str]:
    prefix = path + "/"
    return [p for p in files if p.startswith(prefix)]


PROTECTED_REASON = "inside Codex's home or the snapshot store: codexr never writes or deletes there"


def protected_in(current: FileMap, by_path: Iterable[str] = ()) -> tuple[str, ...]:
    """Directories a restore must not touch: the ones named by path, and those the safety capture found."""
    found = (p for p, e in current.items() if e.kind == "D" and e.reason == Reason.CODEXR_DATA)
    return tuple(sorted({*by_path, *found}))


def _under(path: str, dirs: tuple[str, ...]) -> bool:
    return any(path == d or path.startswith(d + "/") for d in dirs)


def plan_restore(target: FileMap, current: FileMap, ignore: Ignore, root: str, target_id: str,
                 protected: tuple[str, ...] = (), folding: Folding = EXACT,
                 named: Collection[str] | None = None) -> RestorePlan:
    """Decide per path: write what the target holds, delete what it witnessed absent, else leave.

    Nothing at or below a `protected` directory (Codex's home, the store) is ever written or deleted. On a volume
    that folds names (`folding`), spellings of one name are one file (`one_name_per_file`). `named`: every path at
    which the two maps may differ (what the delta records between their snapshots name), or None (compare them
    whole: two passes over 100,000 entries were ~50 ms of a rewind, issue 35).
    """
    actions: list[Action] = []
    deletes: dict[str, Action] = {}
    emptied: list[str] = []  # directories a write replaces: removed (deepest first) once emptied
    held = ("f", "l")
    # Files and symlinks held on either side that differ (two passes, not a union of both maps and a third).
    if named is None:
        changed = {p for p, t in target.items() if t.kind in held and current.get(p) != t}
        changed.update(p for p, s in current.items() if s.kind in held and target.get(p) != s)
    else:
        changed = {p for p in named
                   if (t := target.get(p)) != (s := current.get(p)) and (is_captured(t) or is_captured(s))}
    for path in sorted(changed):
        t, s = target.get(path), current.get(path)
        if forbidden(path):
            continue
        if protected and _under(path, protected):
            actions.append(Action(LEAVE, path, PROTECTED_REASON, t, s))
            continue
        if ignore.file(path):
            if t != s:
                actions.append(Action(LEAVE, path, "ignored by .codexsnapignore", t, s))
            continue
        if t is not None and is_captured(t):
            if t == s:
                continue
            blocker = _blocking_ancestor(path, current)
            if blocker is not None:
                actions.append(Action(LEAVE, path, blocker, t, s))
                continue
            behind_link = s is not None and s.kind == "x" and _link_ancestor(path, current)
            if s is None or s.kind == "-" or is_captured(s) or behind_link:
                if behind_link:
                    reason = "a symlink stands where the target has a directory"
                elif s is None or s.kind == "-":
                    reason = "missing now"
                else:
                    reason = _why_differs(t, s)
                actions.append(Action(WRITE, path, reason, t, s))
            elif s.kind == "d" or s.kind == "D":
                ok, why = _removable_dir(path, current)
                if not ok:
                    actions.append(Action(LEAVE, path, why, t, s))
                    continue
                for sub in _subtree(current, path):
                    if is_captured(current[sub]):
                        deletes[sub] = Action(DELETE, sub, f"a directory stands where {path} was a file",
                                              None, current[sub])
                    else:
                        emptied.append(sub)
                emptied.append(path)
                actions.append(Action(WRITE, path, "replaces a directory", t, s))
            else:
                actions.append(Action(LEAVE, path, f"present but not capturable now ({s.reason})", t, s))
        elif is_captured(s):
            if witnessed_absent(target, path):
                deletes.setdefault(path, Action(DELETE, path, "absent in the target snapshot (witnessed)", t, s))
            elif t is not None and t.kind == "x":
                actions.append(Action(LEAVE, path, f"the target snapshot did not capture it ({t.reason})", t, s))
            elif t is not None and t.kind in ("d", "D"):
                if not any(a.path.startswith(path + "/") for a in actions if a.op == WRITE):
                    actions.append(Action(LEAVE, path, "was a directory in the target snapshot", t, s))
            else:
                actions.append(Action(LEAVE, path, "the target snapshot never looked here", t, s))
    actions += _not_held_now(target, current, ignore, protected)
    _files_in_the_way(actions, current, deletes)
    ordered = sorted(deletes.values(), key=lambda a: a.path.count("/"), reverse=True)
    rmdirs = _empty_dirs_after(ordered, target, current)
    rmdirs += [Action(RMDIR, d, "directory replaced by a file") for d in sorted(set(emptied), key=len, reverse=True)]
    writes = [a for a in actions if a.op == WRITE]
    # A path the plan deletes or writes (e.g. a file removed so a directory can be written) is not also left.
    acted = set(deletes) | {a.path for a in writes}
    leaves = [a for a in actions if a.op == LEAVE and a.path not in acted]
    if folding.any:
        ordered, writes, leaves = one_name_per_file(ordered, writes, leaves, target, current, folding)
    return RestorePlan(root, target_id, [*ordered, *rmdirs, *writes, *leaves])


def one_name_per_file(deletes: list[Action], writes: list[Action], leaves: list[Action], target: FileMap,
                      current: FileMap, folding: Folding) -> tuple[list[Action], list[Action], list[Action]]:
    """On a volume that takes two spellings for one name, they are one file: a delete of a name whose other
    spelling the restore writes becomes that write's rename to the target's spelling; one whose other spelling
    stays is no delete; of two writes to one file (a snapshot from before names were checked), one is made.

    Deleting either spelling would delete the one file, and each spelling's write would overwrite the other's.
    """
    key = folding.key
    staying = {key(p) for p, e in target.items() if is_captured(e) and current.get(p) == e}
    chosen: dict[str, Action] = {}
    out_writes: list[Action] = []
    for a in writes:
        k = key(a.path)
        first = chosen.get(k)
        if first is None:
            chosen[k] = a
            out_writes.append(a)
        else:
            leaves.append(Action(LEAVE, a.path, f"another spelling of {first.path}, which is written (this volume "
                                                f"takes both names for one)", a.target, a.current))
    out_deletes = []
    for d in deletes:
        k = key(d.path)
        w = chosen.get(k)
        if w is not None and w.path != d.path:
            w.respell, w.current = d.path, d.current
            w.reason = f"renamed from {d.path}" + ("" if _same_content(w.target, d.current) else ", content differs")
        elif k in staying:
            leaves.append(Action(LEAVE, d.path, "another spelling of a file the restore keeps (this volume takes "
                                                "both names for one)", d.target, d.current))
        else:
            out_deletes.append(d)
    # A write whose file stands under another spelling the target does not mention (no delete was planned for it):
    # the same rename first, else the write would find "its" path taken and leave it.
    spelled_now = {key(p): p for p, e in current.items() if is_captured(e)}
    for w in out_writes:
        p = spelled_now.get(key(w.path))
        if w.respell is None and p is not None and p != w.path:
            w.respell, w.current = p, current[p]
            w.reason = f"renamed from {p}" + ("" if _same_content(w.target, current[p]) else ", content differs")
    renamed = {w.respell for w in out_writes if w.respell is not None}
    return out_deletes, out_writes, [a for a in leaves if a.path not in renamed]


def _same_content(t: Entry | None, s: Entry | None) -> bool:
    """Whether a file or symlink holds what another does (mode and times aside)."""
    if t is None or s is None or t.kind != s.kind:
        return False
    if t.kind == "f" and s.kind == "f":
        return t.blob == s.blob
    return t.kind == "l" and s.kind == "l" and t.target == s.target


def _not_held_now(target: FileMap, current: FileMap, ignore: Ignore, protected: tuple[str, ...]) -> list[Action]:
    """What the target witnessed absent but the safety capture could not hold (hidden, unreadable, a directory not
    looked into): left, with the reason."""
    out = []
    for path, s in current.items():
        if s.kind not in ("x", "D") or not path or path == IGNORE_FILE:
            continue
        if forbidden(path) or ignore.file(path) or not witnessed_absent(target, path):
            continue
        if protected and _under(path, protected):
            continue
        if s.kind == "x" and s.reason == HIDDEN:
            out.append(Action(LEAVE, path, "absent in the target; hidden files are only captured when tracked, "
                                           "touched by the agent or enabled (include_hidden)", None, s))
        elif s.kind == "x":
            out.append(Action(LEAVE, path, f"absent in the target, but the safety capture could not hold it "
                                           f"({s.reason})", target.get(path), s))
        elif s.kind == "D" and s.reason not in NEVER_REPORTED_DIRS:
            out.append(Action(LEAVE, path, f"directory absent in the target, not looked into ({s.reason})",
                              target.get(path), s))
    return out


def _files_in_the_way(actions: list[Action], current: FileMap, deletes: dict[str, Action]) -> None:
    """A file standing where the target needs a directory is deleted first (the safety capture holds it)."""
    for a in actions:
        if a.op == WRITE:
            anc = parent_of(a.path)
            while anc:
                if is_captured(current.get(anc)) and anc not in deletes:
                    deletes[anc] = Action(DELETE, anc, f"a file stands where {a.path} needs a directory",
                                          None, current[anc])
                anc = parent_of(anc)


def keep_everything(plan: RestorePlan) -> None:
    """Restoring into a directory the snapshot never looked at: write its files, delete nothing."""
    kept = []
    for a in plan.actions:
        if a.op == RMDIR:
            continue
        if a.op == DELETE or (a.op == WRITE and a.current is not None and a.current.kind in ("d", "D")):
            a.op, a.reason = LEAVE, "the snapshot is of another directory: nothing here is deleted"
        kept.append(a)
    plan.actions = kept


def _link_ancestor(path: str, current: FileMap) -> bool:
    """Is some ancestor a symlink the safety capture holds (so the restore may replace it)?"""
    anc = parent_of(path)
    while anc:
        e = current.get(anc)
        if e is not None and e.kind == "l":
            return True
        anc = parent_of(anc)
    return False


def _why_differs(t: Entry, s: Entry) -> str:
    if t.kind != s.kind:
        return "type differs"
    if t.kind == "f" and s.kind == "f" and t.blob == s.blob:
        return "mode differs"
    return "content differs"


def _blocking_ancestor(path: str, current: FileMap) -> str | None:
    """Why a write cannot happen: an uncaptured file or unknown thing stands at an ancestor."""
    anc = parent_of(path)
    while anc:
        e = current.get(anc)
        if e is not None and e.kind == "x":
            return f"{anc} is a file the safety capture could not hold ({e.reason})"
        if e is not None and e.kind == "D" and e.reason not in ENTERABLE_DIRS:
            return f"{anc} cannot be entered ({e.reason})"
        anc = parent_of(anc)
    return None


def _removable_dir(path: str, current: FileMap) -> tuple[bool, str]:
    """A directory in the way may go only if the safety capture holds everything inside it."""
    if current.get(path) != WALKED:
        return False, "a directory stands here whose content was not fully seen"
    for sub in _subtree(current, path):
        e = current[sub]
        if not (is_captured(e) or e == WALKED):
            return False, f"a directory stands here holding {sub}, which the safety capture does not hold"
    return True, ""


def _empty_dirs_after(deletes: list[Action], target: FileMap, current: FileMap) -> list[Action]:
    """Directories emptied by deletes that the target witnessed absent; removed only if empty."""
    out: dict[str, Action] = {}
    for a in deletes:
        anc = parent_of(a.path)
        while anc and anc not in out and witnessed_absent(target, anc):
            out[anc] = Action(RMDIR, anc, "directory absent in the target snapshot (removed if empty)")
            anc = parent_of(anc)
    return sorted(out.values(), key=lambda a: a.path.count("/"), reverse=True)
