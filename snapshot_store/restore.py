"""Restore = safety capture, plan, preview, journaled apply. Deletes only witnessed absences."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from .capture import Progress
from .errors import CorruptStore, Interrupted, StoreBusy, StoreError, StoreFull
from .fsutil import atomic_write, fsync_dir, translate_os_errors
from .ids import is_snapshot_id
from .interrupts import HeldSignals
from .locks import owner_alive, owner_info, owner_text
from .manifest import CAPTURED_KINDS, WALKED, Entry, FileMap, is_captured, parent_of, parse_entry, witnessed_absent
from .packs import CHUNK, PackWriter
from .reasons import ENTERABLE_DIRS, NEVER_REPORTED_DIRS, Reason
from .safefs import SafeRoot, UnsafePath
from .scope import HIDDEN, IGNORE_FILE, Ignore, forbidden
from .settings import ScopeSettings
from .statcache import Key, is_racy, stat_key

if TYPE_CHECKING:
    from .store import Store

WRITE, DELETE, RMDIR, LEAVE = "write", "delete", "rmdir", "leave"
_HELD_OR_ABSENT = CAPTURED_KINDS | {"-"}  # what a restore may write or delete: its safety capture covers them


@dataclass
class Action:
    """One step of a restore plan (or a path it leaves alone, with the reason)."""

    op: str
    path: str
    reason: str
    target: Entry | None = None
    current: Entry | None = None
    before: Key | None = None

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


@dataclass
class RestoreResult:
    """The outcome of a restore; `safety_id` restores the pre-restore state exactly."""

    plan: RestorePlan
    safety_id: str | None
    written: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    left: list[Action] = field(default_factory=list)
    dry_run: bool = False
    seconds: float = 0.0
    recovered: Recovery | None = None  # an interrupted earlier restore this one finished first
    # Planned writes and deletes that were not done (also in `left`): a restore with any is incomplete.
    failed: list[Action] = field(default_factory=list)
    late_signal: int | None = None  # a stopping signal that came after the last change: the restore stands

    def as_json(self) -> dict[str, Any]:
        """Stable JSON shape the CLI prints."""
        return {
            "recovered": self.recovered.as_json() if self.recovered else None,
            "failed": [a.as_json() for a in self.failed],
            "root": self.plan.root,
            "target": self.plan.target_id,
            "safety_id": self.safety_id,
            "dry_run": self.dry_run,
            "written": self.written,
            "deleted": self.deleted,
            "left": [a.as_json() for a in self.left],
            "plan": [a.as_json() for a in self.plan.actions],
            "notes": list(self.plan.notes),
            "seconds": round(self.seconds, 6),
        }


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
                 protected: tuple[str, ...] = ()) -> RestorePlan:
    """Decide per path: write what the target holds, delete what it witnessed absent, else leave.

    Nothing at or below a `protected` directory (Codex's home, the store) is ever written or deleted.
    """
    actions: list[Action] = []
    deletes: dict[str, Action] = {}
    emptied: list[str] = []  # directories a write replaces: removed (deepest first) once emptied
    held = ("f", "l")
    # Files and symlinks held on either side that differ (two passes, not a union of both maps and a third).
    changed = {p for p, t in target.items() if t.kind in held and current.get(p) != t}
    changed.update(p for p, s in current.items() if s.kind in held and target.get(p) != s)
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
    for path, s in current.items():
        if s.kind not in ("x", "D") or not path or path == IGNORE_FILE:
            continue
        if forbidden(path) or ignore.file(path) or not witnessed_absent(target, path):
            continue
        if protected and _under(path, protected):
            continue
        if s.kind == "x" and s.reason == HIDDEN:
            actions.append(Action(LEAVE, path, "absent in the target; hidden files are only captured when tracked, "
                                               "touched by the agent or enabled (include_hidden)", None, s))
        elif s.kind == "x":
            actions.append(Action(LEAVE, path, f"absent in the target, but the safety capture could not hold it "
                                               f"({s.reason})", target.get(path), s))
        elif s.kind == "D" and s.reason not in NEVER_REPORTED_DIRS:
            actions.append(Action(LEAVE, path, f"directory absent in the target, not looked into ({s.reason})",
                                  target.get(path), s))
    # A file standing where the target needs a directory is deleted first (the safety capture holds it).
    for a in list(actions):
        if a.op == WRITE:
            anc = parent_of(a.path)
            while anc:
                if is_captured(current.get(anc)) and anc not in deletes:
                    deletes[anc] = Action(DELETE, anc, f"a file stands where {a.path} needs a directory",
                                          None, current[anc])
                anc = parent_of(anc)
    ordered = sorted(deletes.values(), key=lambda a: a.path.count("/"), reverse=True)
    rmdirs = _empty_dirs_after(ordered, target, current)
    rmdirs += [Action(RMDIR, d, "directory replaced by a file") for d in sorted(set(emptied), key=len, reverse=True)]
    writes = [a for a in actions if a.op == WRITE]
    # A path the plan deletes or writes (e.g. a file removed so a directory can be written) is not also left.
    acted = set(deletes) | {a.path for a in writes}
    leaves = [a for a in actions if a.op == LEAVE and a.path not in acted]
    return RestorePlan(root, target_id, [*ordered, *rmdirs, *writes, *leaves])


def _keep_everything(plan: RestorePlan) -> None:
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


# ----------------------------------------------------------------------- apply


def restore(
    store: Store,
    snap_id: str,
    root: str | os.PathLike[str] | None = None,
    *,
    dry_run: bool = False,
    known_paths: Iterable[str] = (),
    scope: ScopeSettings | None = None,
    confirm: Callable[[RestorePlan], bool] | None = None,
    progress: Progress | None = None,
    into: bool = False,
) -> RestoreResult:
    """Safety capture, plan, (confirm), journaled apply. The safety id undoes it exactly.

    A snapshot witnessed absence only under its own root: restoring it into another directory is
    refused unless `into` is set, and then nothing there is deleted.
    """
    started = time.perf_counter()
    target_rec = store.record(snap_id)
    if target_rec.root == "/" and target_rec.kind in ("pre-edit", "states-safety"):
        raise StoreError(f"snapshot {snap_id[:12]} records single files by absolute path (agent edits); "
                         "rewind and redo restore it, not a workspace restore")
    ws = store.workspace(root if root is not None else target_rec.root)
    foreign = str(ws) != target_rec.root
    if foreign and not into:
        raise StoreError(
            f"snapshot {snap_id[:12]} was taken of {target_rec.root}, not {ws}; to copy its files into {ws} "
            f"anyway pass --into {ws} (nothing there is deleted then)")
    target = store.files(snap_id)
    # The safety capture must hold everything the restore may write or delete, without size cap:
    # every path the target holds or tombstoned, and any file the target witnessed absent.
    targets = [p for p, e in target.items() if e.kind in _HELD_OR_ABSENT]
    known = [*known_paths, *targets]
    # The shared store lock spans capture, confirmation and apply: gc cannot drop the target meanwhile.
    with translate_os_errors(f"restore into {ws}"), store.workspace_lock(ws), store.shared_lock():
        recovered = None if dry_run else recover(store, ws)
        ignore = Ignore.load(ws)
        # Dry runs hash in memory only; real runs commit the safety snapshot before touching anything.
        safety_started_ns = time.time_ns()
        safety = store.capture(ws, known_paths=known, scope=scope, kind="safety", dry_run=dry_run,
                               label=f"before restoring {snap_id[:12]}",
                               force=None if foreign else lambda p: witnessed_absent(target, p),
                               progress=progress)
        plan = plan_restore(target, safety.files, ignore, str(ws), snap_id,
                            protected_in(safety.files, store.protected_rel(ws)))
        plan.safety_id = None if dry_run else safety.id
        if foreign:
            _keep_everything(plan)
        for a in plan.actions:
            if a.op in (WRITE, DELETE):
                a.before = safety.stats.get(a.path)
        result = RestoreResult(plan, None if dry_run else safety.id, dry_run=dry_run, recovered=recovered)
        if dry_run:
            result.left = plan.left
            result.seconds = time.perf_counter() - started
            return result
        if confirm is not None and not confirm(plan):
            result.left = plan.left
            result.seconds = time.perf_counter() - started
            return result
        _secure_safety_copies(store, ws, plan, safety.stored_blobs)
        _apply(store, ws, plan, safety.id, result, safety_started_ns)
    result.seconds = time.perf_counter() - started
    return result


def _secure_safety_copies(store: Store, ws: Path, plan: RestorePlan, fresh: frozenset[bytes]) -> None:
    """Before a file is overwritten or deleted, the store must hold an intact copy of it.

    The safety capture reuses blobs already stored; one of those may be damaged on disk (its id
    still matches the file). Each reused blob is read back and verified; a damaged one is stored
    afresh from the file itself, and a file that no longer matches is left alone.
    """
    reused: dict[bytes, list[Action]] = {}
    for a in plan.actions:
        if a.op in (WRITE, DELETE) and a.current is not None and a.current.kind == "f":
            blob = bytes.fromhex(a.current.blob)
            if blob not in fresh:
                reused.setdefault(blob, []).append(a)
    damaged: list[tuple[bytes, list[Action]]] = []
    for blob, actions in reused.items():
        try:
            store.blobs.check(blob)
        except CorruptStore:
            damaged.append((blob, actions))
    if not damaged:
        return
    writer = PackWriter(store.blobs)
    try:
        with SafeRoot(str(ws)) as fs:
            for blob, actions in damaged:
                for a in actions:
                    if _store_again(fs, a.path, writer) != blob:
                        a.op, a.reason = LEAVE, "changed after the safety capture (its stored copy was damaged)"
        writer.commit()
    except BaseException:
        writer.abort()
        raise


def _store_again(fs: SafeRoot, path: str, writer: PackWriter) -> bytes | None:
    """Store a file's current content even though a blob of that id exists; its id, or None."""
    try:
        fd = fs.open_regular(path)
    except (OSError, UnsafePath):
        return None
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as f:
        blob, _size = writer.add_stream(f, force=True)
    return blob


def _apply(store: Store, ws: Path, plan: RestorePlan, safety_id: str, result: RestoreResult,
           safety_started_ns: int) -> None:
    # Pre-flight: every blob to be written must exist, verify and have the size the snapshot says,
    # so a damaged (or forged) store changes nothing.
    sizes = {a.target.blob: (a.target.size, a.path) for a in plan.actions if a.op == WRITE and a.target
             and a.target.kind == "f"}
    for blob, (size, path) in sizes.items():
        store.blobs.check(bytes.fromhex(blob))
        if store.blobs.locate(bytes.fromhex(blob)).raw_len != size:
            raise CorruptStore(f"snapshot {plan.target_id[:12]} says {path} has {size} bytes, but its content "
                               "has another length (damaged snapshot); nothing was changed")
    journal = store.journal_file(ws)
    actions = [a for a in plan.actions if a.op in (WRITE, DELETE, RMDIR)]
    doc: dict[str, Any] = {
        "root": str(ws),
        "target": plan.target_id,
        "safety": safety_id,
        "started": time.time(),
        "actions": [[a.op, a.path, list(a.target) if a.target else None, list(a.before) if a.before else None]
                    for a in actions],
    }
    doc["owner"] = owner_info()
    cache = store.stat_cache(ws)
    # From the journal on, SIGINT/SIGTERM/SIGHUP only stop the loop between two steps; the steps taken are
    # then rolled back (with the signals still held: a second Ctrl+C cannot cut the rollback short).
    with HeldSignals() as held, SafeRoot(str(ws)) as fs:
        doc["dir_modes"] = _dir_modes(fs, actions)
        atomic_write(journal, json.dumps(doc).encode())
        reached = 0
        for a in plan.actions:
            if held.pending is not None:
                break
            if a.op == LEAVE:
                result.left.append(a)
                continue
            reached += 1
            try:
                done = _do(store, fs, a, safety_started_ns)
            except UnsafePath as exc:
                _not_done(result, Action(LEAVE, a.path, str(exc), a.target, a.current))
                continue
            except OSError as exc:
                if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                    raise StoreFull(
                        f"restore into {ws}: the disk filled up after {len(result.written)} files were written; "
                        f"the restore is journaled and the next codexr run finishes it once there is space "
                        f"(safety snapshot {safety_id[:12]} holds the state before it)") from exc
                # One path that cannot be changed (a directory in the way, permissions) is reported,
                # not allowed to abort the rest half-way.
                _not_done(result, Action(LEAVE, a.path, f"could not {a.op}: {exc.strerror}", a.target, a.current))
                continue
            if done is None:
                continue
            if done:
                (result.written if a.op == WRITE else result.deleted).append(a.path)
            else:
                _not_done(result, Action(LEAVE, a.path, "changed after the safety capture; left as it is",
                                         a.target, a.current))
        if held.pending is not None:
            _interrupted(store, ws, fs, journal, doc, actions[:reached], held.pending)
        cache.forget(result.written + result.deleted)
        written = {a.path: a.target for a in plan.actions if a.op == WRITE and a.target is not None}
        store.absorb_own_changes(ws, {p: written[p] for p in result.written}, result.deleted, fs.dirs_changed)
        fs.sync()
        journal.unlink()
        fsync_dir(journal.parent)
        result.late_signal = held.pending


def _not_done(result: RestoreResult, left: Action) -> None:
    """A planned write or delete that did not happen: left alone, and the restore is incomplete."""
    result.left.append(left)
    result.failed.append(left)


def _dir_modes(fs: SafeRoot, actions: list[Action]) -> dict[str, int]:
    """The modes of the directories the restore removes, so a rollback makes them as they were."""
    out: dict[str, int] = {}
    for a in actions:
        if a.op == RMDIR or (a.op == WRITE and a.current is not None and a.current.kind in ("d", "D")):
            st = fs.lstat(a.path)
            if st is not None and stat.S_ISDIR(st.st_mode):
                out[a.path] = stat.S_IMODE(st.st_mode)
    return out


def _interrupted(store: Store, ws: Path, fs: SafeRoot, journal: Path, doc: dict[str, Any], reached: list[Action],
                 signum: int) -> None:
    """Roll back the steps taken, say so, and raise Interrupted (the journal turns into a rollback first).

    The journal is rewritten before anything is put back: a kill during the rollback leaves a journal the
    next command rolls back further, never one it would finish.
    """
    doc["rollback"] = True
    atomic_write(journal, json.dumps(doc).encode())
    before = store.files(doc["safety"])
    steps = [(a.op, a.path, a.target) for a in reached]
    report = Recovery(str(ws), doc["target"], doc["safety"], rolled_back=True)
    _roll_back(store, fs, steps, before, doc["dir_modes"], report)
    store.stat_cache(ws).forget([a.path for a in reached])
    store.absorb_own_changes(ws, report.put_back, report.removed, True)
    fs.sync()
    safety = doc["safety"][:12]
    if report.left:
        shown = "; ".join(f"{p}: {why}" for p, why in report.left[:3])
        more = f" and {len(report.left) - 3} more" if len(report.left) > 3 else ""
        # The journal goes too: the user stopped this restore, no later command may finish it.
        journal.unlink()
        fsync_dir(journal.parent)
        raise Interrupted(
            f"the restore was stopped and rolled back except {len(report.left)} path(s) ({shown}{more}), which hold "
            f"what snapshot {doc['target'][:12]} has or changed meanwhile; `codexr snapshots restore {safety} --yes` "
            f"puts back the state before the restore (safety snapshot {safety})", signum, rolled_back=False)
    journal.unlink()
    fsync_dir(journal.parent)
    raise Interrupted(f"the restore was rolled back; nothing changed (safety snapshot {safety})", signum,
                      rolled_back=True)


def _do(store: Store, fs: SafeRoot, a: Action, safety_started_ns: int) -> bool | None:
    """Carry out one action if the path is still as the safety capture saw it."""
    st = fs.lstat(a.path)
    if a.op == RMDIR:
        with contextlib.suppress(OSError):
            fs.rmdir(a.path)
        return None
    if a.before is not None:
        if st is None or stat_key(st) != a.before:
            return False
        # Timestamps this fresh cannot prove the content is unchanged: compare the content itself.
        if is_racy(a.before, safety_started_ns) and not _matches(fs, a.path, a.current):
            return False
    elif st is not None and a.op == WRITE and not (a.current is not None and a.current.kind in ("d", "D")):
        return False
    if a.op == DELETE:
        # False: it changed between this check and the unlink, so it was put back (left).
        return st is None or fs.unlink(a.path, stat_key(st))
    t = a.target
    assert t is not None
    if st is not None and a.current is not None and a.current.kind in ("d", "D"):
        with contextlib.suppress(OSError):
            fs.rmdir(a.path)
    if t.kind == "f":
        fs.write_file(a.path, store.blob_chunks(t.blob), t.mode)
    else:
        assert t.kind == "l", t  # a write's target is always captured (plan_restore, recover check it)
        fs.write_link(a.path, t.target)
    return True


# ----------------------------------------------------------------------- recovery


@dataclass
class Recovery:
    """What finishing (or rolling back) an interrupted restore did."""

    root: str
    target: str = ""
    safety: str = ""
    rolled_back: bool = False  # the restore had been stopped on purpose: its steps were undone, not finished
    finished: list[str] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)
    put_back: dict[str, Entry] = field(default_factory=dict)  # a rollback's writes (for the change journal)
    removed: list[str] = field(default_factory=list)  # and its deletes

    def summary(self) -> str:
        """One line for the user naming both snapshots: an interrupted restore was found and finished or undone."""
        left = f", {len(self.left)} left alone (changed since)" if self.left else ""
        target, safety = self.target[:12], self.safety[:12]
        if self.rolled_back:
            return (f"rolled back an interrupted restore of snapshot {target} into {self.root}: "
                    f"{len(self.finished)} paths put back as safety snapshot {safety} holds them{left}")
        return (f"finished an interrupted restore of snapshot {target} into {self.root}: {len(self.finished)} "
                f"paths done{left}; safety snapshot {safety} holds the state before it "
                f"(undo: codexr snapshots restore {safety} --yes)")

    def as_json(self) -> dict[str, Any]:
        """Stable JSON shape."""
        return {"root": self.root, "target": self.target, "safety": self.safety, "rolled_back": self.rolled_back,
                "finished": self.finished, "left": [{"path": p, "reason": r} for p, r in self.left]}


def _matches(fs: SafeRoot, path: str, entry: Entry | None) -> bool:
    """Does the path currently hold exactly this entry (content compared by hash)?"""
    st = fs.lstat(path)
    if entry is None or entry.kind == "-":
        return st is None
    if st is None:
        return False
    try:
        if entry.kind in ("d", "D"):
            return stat.S_ISDIR(st.st_mode)
        if entry.kind == "l":
            return bool(stat.S_ISLNK(st.st_mode) and fs.readlink(path) == entry.target)
        if entry.kind == "f":
            if not stat.S_ISREG(st.st_mode) or stat.S_IMODE(st.st_mode) != entry.mode or st.st_size != entry.size:
                return False  # the mode counts: a mode-only change is a change
            return bool(_hash_file(fs, path) == entry.blob)
    except (OSError, UnsafePath):
        return False
    return False


def _hash_file(fs: SafeRoot, path: str) -> str | None:
    """blake3 of a regular file read in chunks (never whole: files may be gigabytes); None if not regular."""
    fd = fs.open_regular(path)
    if fd is None:
        return None
    try:
        hasher = blake3.blake3()
        while chunk := os.read(fd, CHUNK):
            hasher.update(chunk)
        return str(hasher.hexdigest())
    finally:
        os.close(fd)


_OPS = (WRITE, DELETE, RMDIR)


@dataclass
class _Journal:
    """A validated restore journal."""

    safety: str
    target: str
    actions: list[tuple[str, str, Entry | None]]
    owner: dict[str, Any]
    rollback: bool = False  # the restore was interrupted on purpose and was being rolled back
    dir_modes: dict[str, int] = field(default_factory=dict)


def _parse_journal(journal: Path) -> _Journal:
    """Validate the whole journal before anything is touched; damage is a clear error."""
    try:
        doc = json.loads(journal.read_bytes())
        safety_id, target_id = doc["safety"], doc["target"]
        if not all(isinstance(i, str) and is_snapshot_id(i) for i in (safety_id, target_id)):
            raise ValueError("bad snapshot id")
        actions: list[tuple[str, str, Entry | None]] = []
        for item in doc["actions"]:
            op, path, target, _before = item
            if op not in _OPS or not isinstance(path, str) or forbidden(path) or "\0" in path:
                raise ValueError(f"bad action {item!r}")
            entry = parse_entry(target) if target is not None else None
            if op == WRITE and (entry is None or entry.kind not in ("f", "l")):
                raise ValueError(f"bad write action {item!r}")
            actions.append((op, path, entry))
        owner = doc.get("owner") or {}
        if not isinstance(owner, dict):
            raise ValueError("bad owner")
        rollback = doc.get("rollback", False)
        dir_modes = doc.get("dir_modes") or {}
        if not isinstance(rollback, bool) or not isinstance(dir_modes, dict) or not all(
                isinstance(m, int) and 0 <= m <= 0o7777 for m in dir_modes.values()):
            raise ValueError("bad rollback or dir_modes")
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise CorruptStore(f"restore journal {journal} is damaged; move it away to continue") from exc
    return _Journal(safety_id, target_id, actions, owner, rollback, dir_modes)


def _check_against_snapshots(journal: Path, actions: list[tuple[str, str, Entry | None]], target: FileMap,
                             before: FileMap) -> None:
    """Every journaled step must be one the restore could have planned from its two snapshots.

    A journal is only a to-do list: what may be written comes from the target snapshot, and a
    delete is only ever of a path the safety snapshot holds.
    """
    dirs_needed = {anc for p, e in target.items() if is_captured(e) for anc in _ancestors(p)}
    for op, path, t in actions:
        if op == WRITE:
            ok = target.get(path) == t
        elif op == DELETE:
            ok = is_captured(before.get(path)) and (
                witnessed_absent(target, path) or path in dirs_needed
                or any(is_captured(target.get(anc)) for anc in _ancestors(path)))
        else:
            ok = True
        if not ok:
            raise CorruptStore(f"restore journal {journal} names a step its snapshots do not allow ({op} {path}); "
                               "move it away to continue")


def _ancestors(path: str) -> list[str]:
    out = []
    anc = parent_of(path)
    while anc:
        out.append(anc)
        anc = parent_of(anc)
    return out


def recover(store: Store, root: Path) -> Recovery | None:
    """Finish an interrupted restore (redo each step whose path still holds its pre-restore state), or roll back
    one that was being rolled back when it was killed. Reported through `store.on_recovery`: never silently."""
    journal = store.journal_file(root)
    if not journal.exists():
        return None
    doc = _parse_journal(journal)
    if owner_alive(doc.owner):
        raise StoreBusy(f"a restore into {root} is still running ({owner_text(doc.owner)})")
    safety_id, actions = doc.safety, doc.actions
    before_map = store.files(safety_id)
    _check_against_snapshots(journal, actions, store.files(doc.target), before_map)
    report = Recovery(str(root), doc.target, safety_id, rolled_back=doc.rollback)
    with SafeRoot(str(root)) as fs:
        # First give files a killed delete had set aside their names back (and drop other temps),
        # so a delete cut short before its check is judged, and redone, like any other step.
        _clean_temps(fs, actions)
        if doc.rollback:
            _roll_back(store, fs, actions, before_map, doc.dir_modes, report)
        else:
            _finish(store, fs, actions, before_map, report)
            _clean_temps(fs, actions)  # temps of the steps just redone, if one failed half-way
        fs.sync()
    store.stat_cache(root).forget([path for _op, path, _t in actions])
    journal.unlink()
    fsync_dir(journal.parent)
    store.report_recovery(report)
    return report


def _clean_temps(fs: SafeRoot, actions: list[tuple[str, str, Entry | None]]) -> None:
    """Drop the temporary files of the journaled steps' directories (a set-aside file gets its name back)."""
    for d in {parent_of(path) for _op, path, _t in actions}:
        with contextlib.suppress(OSError, UnsafePath):
            fs.clean_temps(d)


def _finish(store: Store, fs: SafeRoot, actions: list[tuple[str, str, Entry | None]], before_map: FileMap,
            report: Recovery) -> None:
    """Redo each journaled step not yet done; a path changed since is left as it is (reported)."""
    for op, path, t in actions:
        try:
            if op == RMDIR:
                with contextlib.suppress(OSError):
                    fs.rmdir(path)
                continue
            if _matches(fs, path, t if op == WRITE else None):
                report.finished.append(path)
                continue
            before = before_map.get(path)
            was_dir = before is not None and before.kind in ("d", "D")
            seen = fs.lstat(path)
            # A directory the restore was replacing may already be emptied or gone.
            if not (_matches(fs, path, before) or (was_dir and seen is None)):
                report.left.append((path, "changed since the interrupted restore; left as it is"))
                continue
            if op == DELETE:
                if seen is not None and not fs.unlink(path, stat_key(seen)):
                    report.left.append((path, "changed since the interrupted restore; left as it is"))
                    continue
            else:
                assert t is not None
                st = fs.lstat(path)
                if st is not None and stat.S_ISDIR(st.st_mode):
                    fs.rmdir(path)
                if t.kind == "f":
                    fs.write_file(path, store.blob_chunks(t.blob), t.mode)
                else:
                    assert t.kind == "l", t  # checked when the journal was read
                    fs.write_link(path, t.target)
            report.finished.append(path)
        except (OSError, UnsafePath, StoreError) as exc:
            report.left.append((path, f"could not finish: {exc}"))


def _roll_back(store: Store, fs: SafeRoot, steps: list[tuple[str, str, Entry | None]], before: FileMap,
               dir_modes: dict[str, int], report: Recovery) -> None:
    """Put each step's path back as the safety capture saw it, last step first.

    A path already as it was is fine; one that holds what the step made is put back; anything else
    changed meanwhile and is left (reported). Directories a write created are removed again when empty.
    """
    for op, path, t in reversed(steps):
        was = before.get(path)
        try:
            if _undo(store, fs, op, path, t, was, dir_modes.get(path), report):
                report.finished.append(path)
        except (OSError, UnsafePath, StoreError) as exc:
            report.left.append((path, f"could not put back: {exc}"))
    made = {anc for op, path, _t in steps if op == WRITE for anc in _ancestors(path)
            if witnessed_absent(before, anc)}
    for anc in sorted(made, key=lambda d: d.count("/"), reverse=True):
        with contextlib.suppress(OSError, UnsafePath):
            fs.rmdir(anc)  # only an empty one: it did not exist before the restore


def _undo(store: Store, fs: SafeRoot, op: str, path: str, t: Entry | None, was: Entry | None,
          dir_mode: int | None, report: Recovery) -> bool:
    """Undo one step if its path holds what the step made; True when it was changed back."""
    was_dir = was is not None and was.kind in ("d", "D")
    seen = fs.lstat(path)
    if op == DELETE and not was_dir and seen is not None and stat.S_ISDIR(seen.st_mode):
        with contextlib.suppress(OSError):
            fs.rmdir(path)  # the directory a later write needed where this file stood, emptied just now
        seen = fs.lstat(path)
    if op == RMDIR:
        if seen is None and was_dir:
            fs.mkdir(path, dir_mode)
            return True
        return False
    if was_dir:
        if seen is not None and stat.S_ISDIR(seen.st_mode):
            return False
    elif _matches(fs, path, was):
        return False  # never done, or already undone
    if not _matches(fs, path, t if op == WRITE else None):
        report.left.append((path, "changed since the restore stopped; left as it is"))
        return False
    if was is None or was.kind == "-":
        assert seen is not None  # it matched the written entry
        if not fs.unlink(path, stat_key(seen)):
            report.left.append((path, "changed since the restore stopped; left as it is"))
            return False
        report.removed.append(path)
    elif was_dir:
        if seen is not None and not fs.unlink(path, stat_key(seen)):
            report.left.append((path, "changed since the restore stopped; left as it is"))
            return False
        fs.mkdir(path, dir_mode)
    elif was.kind == "f":
        fs.write_file(path, store.blob_chunks(was.blob), was.mode)
        report.put_back[path] = was
    elif was.kind == "l":
        if seen is not None and stat.S_ISDIR(seen.st_mode):
            fs.rmdir(path)
        fs.write_link(path, was.target)
        report.put_back[path] = was
    else:
        why = getattr(was, "reason", was.kind)
        report.left.append((path, f"the safety capture could not hold it ({why}); left as it is"))
        return False
    return True
