"""A restore's journal: written before its first change, and how an interrupted restore is finished or undone.

A journal is only a to-do list: every step it names must be one the restore could have planned from its two
snapshots (the target and the safety capture), or nothing is touched. Finishing redoes each step whose path still
holds its pre-restore state; a restore stopped on purpose is rolled back instead, last step first. A *held* journal
is one half of a change with two sides (files and a conversation): it stays after its steps until its caller settles
it, and an interrupted one is finished only when the caller's `settle` says the other side happened, else rolled back.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import blake3

from ..errors import CorruptStore, SafetyGone, StoreBusy, StoreError, TargetGone, UnknownSnapshot
from ..fsutil import atomic_write, fsync_dir
from ..ids import is_snapshot_id
from ..locks import host_name, owner_alive, owner_info, owner_text
from ..manifest import Entry, FileMap, is_captured, parent_of, parse_entry, witnessed_absent
from ..repository.interfaces import BlobLoader, SnapshotLoader
from ..repository.packs import CHUNK
from ..safefs import SafeRoot, UnsafePath
from ..scope import forbidden
from ..stamps import stat_key
from .plan import DELETE, RMDIR, WRITE


class JournalLoader(SnapshotLoader, BlobLoader, Protocol):
    """What recovery reads: the journal's two snapshots, and the blobs it writes back."""


class WorkspaceNotes(Protocol):
    """Told of the paths a restore or a recovery rewrote, so the workspace index looks at them again."""

    def forget(self, paths: list[str]) -> None: ...

    def absorb(self, written: dict[str, Entry], deleted: list[str], dirs_changed: bool) -> None: ...


def write_journal(path: Path, doc: dict[str, Any]) -> None:
    """Write (or rewrite) a restore's journal durably, before the change it announces (FORMAT.md)."""
    atomic_write(path, json.dumps(doc).encode())


def drop_journal(path: Path) -> None:
    """The restore is done (or rolled back): its journal goes, durably."""
    path.unlink()
    fsync_dir(path.parent)


def held_here(owner: dict[str, Any]) -> bool:
    """Whether a held journal's owner is this very process: it is settled by its holder only (`owner_alive`
    cannot tell, since the pid is its own)."""
    return owner.get("pid") == os.getpid() and owner.get("host") == host_name() and \
        owner.get("start") == owner_info()["start"]

#: The caller's judge of an interrupted held restore: True when the other side of the change happened (the restore
#: is finished), False when it did not (rolled back); it may raise StoreBusy to leave the journal for later.
Settle = Callable[[dict[str, Any]], bool]


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
    held: dict[str, Any] | None = None  # a held restore's caller data (the other side of the change)

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


def matches(fs: SafeRoot, path: str, entry: Entry | None) -> bool:
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
    held: dict[str, Any] | None = None  # the restore is one side of a change its caller settles (module docstring)
    respelled: dict[str, str] = field(default_factory=dict)  # a write's path -> the other spelling it renamed


def parse_journal(journal: Path) -> _Journal:
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
        held = doc.get("held")
        if not isinstance(rollback, bool) or not isinstance(dir_modes, dict) or not all(
                isinstance(m, int) and 0 <= m <= 0o7777 for m in dir_modes.values()):
            raise ValueError("bad rollback or dir_modes")
        if held is not None and not isinstance(held, dict):
            raise ValueError("bad held")
        respelled = doc.get("respelled") or {}
        if not isinstance(respelled, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and not forbidden(v) and "\0" not in v
                for k, v in respelled.items()):
            raise ValueError("bad respelled")
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise CorruptStore(f"restore journal {journal} is damaged; move it away to continue") from exc
    return _Journal(safety_id, target_id, actions, owner, rollback, dir_modes, held, respelled)


def before_states(safety: FileMap, respelled: dict[str, str]) -> FileMap:
    """The state each journaled path had before the restore: a write that renamed another spelling of its path
    (a folding volume: the same file) had that spelling's state."""
    if not respelled:
        return safety
    out = dict(safety)
    for path, spelled in respelled.items():
        entry = safety.get(spelled)
        if entry is not None:
            out[path] = entry
    return out


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


def recover(loader: JournalLoader, root: Path, journal: Path, notes: WorkspaceNotes | None,
            settle: Settle | None = None, *, own_held: bool = False) -> Recovery | None:
    """Finish an interrupted restore (redo each step whose path still holds its pre-restore state), or roll back
    one that was being rolled back when it was killed, or a held one whose other side `settle` says did not happen
    (without `settle`, a held restore is rolled back). A restore this process holds is left alone (StoreBusy)
    unless its holder asks (`own_held`). The caller reports what was done: never silently."""
    if not journal.exists():
        return None
    doc = parse_journal(journal)
    if owner_alive(doc.owner) or (doc.held is not None and not own_held and held_here(doc.owner)):
        raise StoreBusy(f"a restore into {root} is still running ({owner_text(doc.owner)})")
    safety_id, actions = doc.safety, doc.actions
    try:
        safety_files = loader.files(safety_id)
    except (UnknownSnapshot, CorruptStore) as exc:  # damage: without it no step can be judged; say the way out
        raise SafetyGone(str(root), doc.target, safety_id, _readable(loader, doc.target)) from exc
    before_map = before_states(safety_files, doc.respelled)
    try:
        target_files = loader.files(doc.target)
    except UnknownSnapshot as exc:  # every later capture and restore failed on "no snapshot": say the way out
        raise TargetGone(str(root), doc.target, safety_id) from exc
    _check_against_snapshots(journal, actions, target_files, before_map)
    rollback = doc.rollback
    if doc.held is not None and not rollback and not (settle is not None and settle(doc.held)):
        rollback = True
        write_journal(journal, {**json.loads(journal.read_bytes()), "rollback": True})  # a kill now: still undone
    report = Recovery(str(root), doc.target, safety_id, rolled_back=rollback, held=doc.held)
    with SafeRoot(str(root)) as fs:
        # First give files a killed delete had set aside their names back (and drop other temps),
        # so a delete cut short before its check is judged, and redone, like any other step.
        _clean_temps(fs, actions)
        if rollback:
            roll_back(loader, fs, actions, before_map, doc.dir_modes, report)
        else:
            _finish(loader, fs, actions, before_map, report)
            _clean_temps(fs, actions)  # temps of the steps just redone, if one failed half-way
        fs.sync()
    if notes is not None:
        notes.forget([path for _op, path, _t in actions])
    drop_journal(journal)
    return report


def _readable(loader: JournalLoader, snap_id: str) -> bool:
    """Whether the snapshot's map can be read (a restore of it could run)."""
    try:
        loader.files(snap_id)
    except (UnknownSnapshot, CorruptStore):
        return False
    return True


def give_up(root: Path, journal: Path, notes: WorkspaceNotes | None) -> None:
    """Drop a journal that can be neither finished nor rolled back (a snapshot of it is gone: TargetGone,
    SafetyGone) as recovery ends one: files a killed delete had set aside get their names back and the restore's
    temps go first, so nothing the restore held goes with the journal."""
    doc = parse_journal(journal)
    with SafeRoot(str(root)) as fs:
        _clean_temps(fs, doc.actions)
        fs.sync()
    if notes is not None:
        notes.forget([path for _op, path, _t in doc.actions])
    drop_journal(journal)


def _clean_temps(fs: SafeRoot, actions: list[tuple[str, str, Entry | None]]) -> None:
    """Drop the temporary files of the journaled steps' directories (a set-aside file gets its name back)."""
    for d in {parent_of(path) for _op, path, _t in actions}:
        with contextlib.suppress(OSError, UnsafePath):
            fs.clean_temps(d)


def _finish(blobs: BlobLoader, fs: SafeRoot, actions: list[tuple[str, str, Entry | None]], before_map: FileMap,
            report: Recovery) -> None:
    """Redo each journaled step not yet done; a path changed since is left as it is (reported)."""
    for op, path, t in actions:
        try:
            if op == RMDIR:
                with contextlib.suppress(OSError):
                    fs.rmdir(path)
                continue
            if matches(fs, path, t if op == WRITE else None):
                report.finished.append(path)
                continue
            before = before_map.get(path)
            was_dir = before is not None and before.kind in ("d", "D")
            seen = fs.lstat(path)
            # A directory the restore was replacing may already be emptied or gone.
            if not (matches(fs, path, before) or (was_dir and seen is None)):
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
                    fs.write_file(path, blobs.blob_chunks(t.blob), t.mode)
                else:
                    assert t.kind == "l", t  # checked when the journal was read
                    fs.write_link(path, t.target)
            report.finished.append(path)
        except (OSError, UnsafePath, StoreError) as exc:
            report.left.append((path, f"could not finish: {exc}"))


def roll_back(blobs: BlobLoader, fs: SafeRoot, steps: Sequence[tuple[str, str, Entry | None]], before: FileMap,
               dir_modes: dict[str, int], report: Recovery) -> None:
    """Put each step's path back as the safety capture saw it, last step first.

    A path already as it was is fine; one that holds what the step made is put back; anything else
    changed meanwhile and is left (reported). Directories a write created are removed again when empty.
    """
    for op, path, t in reversed(steps):
        was = before.get(path)
        try:
            if _undo(blobs, fs, op, path, t, was, dir_modes.get(path), report):
                report.finished.append(path)
        except (OSError, UnsafePath, StoreError) as exc:
            report.left.append((path, f"could not put back: {exc}"))
    made = {anc for op, path, _t in steps if op == WRITE for anc in _ancestors(path)
            if witnessed_absent(before, anc)}
    for anc in sorted(made, key=lambda d: d.count("/"), reverse=True):
        with contextlib.suppress(OSError, UnsafePath):
            fs.rmdir(anc)  # only an empty one: it did not exist before the restore


def _undo(blobs: BlobLoader, fs: SafeRoot, op: str, path: str, t: Entry | None, was: Entry | None,
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
    elif matches(fs, path, was):
        return False  # never done, or already undone
    if not matches(fs, path, t if op == WRITE else None):
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
        fs.write_file(path, blobs.blob_chunks(was.blob), was.mode)
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
