"""Applying a restore plan: the safety copies checked, a journal written, each step done only if its path is
still as the safety capture saw it, and a stop (Ctrl+C) rolled back.

A Restorer is given a reader of the repository (snapshots and blobs: repository/interfaces.py) and the
workspace it writes into; the safety capture that precedes it is the caller's (Workspace.restore for a
workspace, states.py for single files): it never sees the whole store.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import CorruptStore, Interrupted, StoreError, StoreFull
from ..interrupts import HeldSignals
from ..locks import owner_info
from ..manifest import FileEntry
from ..repository.interfaces import Loader
from ..repository.packs import PackWriter
from ..safefs import SafeRoot, UnsafePath
from ..stamps import is_racy, stat_key
from ..words import plural
from .journal import (
    Recovery,
    Settle,
    WorkspaceNotes,
    before_states,
    drop_journal,
    give_up,
    held_here,
    matches,
    parse_journal,
    recover,
    roll_back,
    write_journal,
)
from .plan import DELETE, LEAVE, RMDIR, WRITE, Action, RestorePlan


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





class Restorer:
    """Restores into one root (a workspace, or "/" for single files) from what `loader` reads."""

    def __init__(self, loader: Loader, root: Path, journal: Path, notes: WorkspaceNotes | None = None,
                 settle: Settle | None = None) -> None:
        self.loader = loader
        self.root = root
        self.journal = journal  # where a running restore of this root keeps its journal (FORMAT.md)
        self.notes = notes  # the workspace index, told what the restore rewrote
        self.settle = settle  # judges an interrupted held restore (journal.Settle)

    def recover(self, own_held: bool = False) -> Recovery | None:
        """Finish (or roll back) an interrupted restore of this root; the caller holds the workspace lock. A held
        restore of this process's own is judged only when its holder asks (`own_held`)."""
        return recover(self.loader, self.root, self.journal, self.notes, self.settle, own_held=own_held)

    def give_up(self) -> None:
        """Drop this root's journal whose target or safety snapshot is gone (journal.give_up): the caller's restore,
        the one the error named, goes on from the files as they are."""
        give_up(self.root, self.journal, self.notes)

    def check(self, plan: RestorePlan, fresh: frozenset[bytes]) -> Contents:
        """Before anything changes: the safety copies secured, and every blob the plan writes verified (CorruptStore,
        nothing changed, where one is damaged). A caller with changes of its own to make (a conversation fork, a redo
        entry) checks first, so a damaged store changes nothing of theirs either."""
        _secure_safety_copies(self.loader, self.root, plan, fresh)
        return _preflight(self.loader, plan)

    def apply(self, plan: RestorePlan, safety_id: str, result: RestoreResult, fresh: frozenset[bytes],
              safety_started_ns: int, hold: dict[str, Any] | None = None, checked: Contents | None = None) -> None:
        """`check` (unless `checked` is what it returned), then carry out the plan, journaled (see _apply); with
        `hold`, the journal stays until `release` or `undo` (the restore is one side of a change the caller
        settles)."""
        contents = checked if checked is not None else self.check(plan, fresh)
        _apply(contents, self.root, self.journal, self.notes, plan, safety_id, result, safety_started_ns, hold)

    def _own_held(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.journal.read_bytes()) if self.journal.exists() else {}
        if doc.get("held") is None or doc.get("rollback") or not held_here(doc.get("owner") or {}):
            raise StoreError(f"no held restore of {self.root} to settle")
        return doc

    def update_hold(self, hold: dict[str, Any]) -> None:
        """Rewrite a held restore's caller data (durably, before the caller acts on the other side)."""
        write_journal(self.journal, {**self._own_held(), "held": hold})

    def release(self) -> None:
        """The other side happened: the held restore stands, its journal goes."""
        self._own_held()
        drop_journal(self.journal)

    def undo(self) -> Recovery:
        """The other side did not happen: roll the held restore back (as an interrupted one is)."""
        doc = self._own_held()
        parsed = parse_journal(self.journal)
        with SafeRoot(str(self.root)) as fs:  # what it cannot put back yet is a rollback the next command goes on with
            return _roll_back_taken(self.loader, self.root, fs, self.journal, self.notes, doc,
                                    parsed.actions, keep_if_failed=True)


def _secure_safety_copies(loader: Loader, ws: Path, plan: RestorePlan, fresh: frozenset[bytes]) -> None:
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
            loader.check_blob(blob)
        except CorruptStore:
            damaged.append((blob, actions))
    if not damaged:
        return
    writer = loader.blob_writer()
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


def _preflight(loader: Loader, plan: RestorePlan) -> Contents:
    """Every blob to be written must exist, verify and have the size the snapshot says, so a damaged (or forged) store
    changes nothing."""
    contents = Contents(loader)
    sizes = {a.target.blob: (a.target.size, a.path) for a in plan.actions if a.op == WRITE and a.target
             and a.target.kind == "f"}
    for blob, (size, path) in sizes.items():
        try:
            found = contents.check(blob)
        except CorruptStore as exc:
            raise type(exc)(f"{exc} (the content of {path}); nothing was changed (`codexr snapshots verify --full` "
                           "checks the whole store)") from None
        if found != size:
            raise CorruptStore(f"snapshot {plan.target_id[:12]} says {path} has {size} bytes, but its content "
                               "has another length (damaged snapshot); nothing was changed")
    return contents


def _apply(contents: Contents, ws: Path, journal: Path, notes: WorkspaceNotes | None, plan: RestorePlan,
           safety_id: str, result: RestoreResult, safety_started_ns: int, hold: dict[str, Any] | None) -> None:
    loader = contents.loader
    actions = [a for a in plan.actions if a.op in (WRITE, DELETE, RMDIR)]
    doc: dict[str, Any] = {
        "root": str(ws),
        "target": plan.target_id,
        "safety": safety_id,
        "started": time.time(),
        "actions": [[a.op, a.path, list(a.target) if a.target else None, list(a.before) if a.before else None]
                    for a in actions],
    }
    respelled = {a.path: a.respell for a in actions if a.respell is not None}
    if respelled:  # recovery judges such a write by the state of the spelling it renamed (journal.py)
        doc["respelled"] = respelled
    doc["owner"] = owner_info()
    if hold is not None:
        doc["held"] = hold
    # From the journal on, SIGINT/SIGTERM/SIGHUP only stop the loop between two steps; the steps taken are
    # then rolled back (with the signals still held: a second Ctrl+C cannot cut the rollback short).
    with HeldSignals() as held, SafeRoot(str(ws)) as fs:
        doc["dir_modes"] = _dir_modes(fs, actions)
        write_journal(journal, doc)
        taken: list[Action] = []
        try:
            _steps(contents, ws, fs, plan, safety_id, result, safety_started_ns, held, taken)
        except Exception as exc:
            if hold is None:
                raise  # journaled: the next command finishes it (StoreFull says so)
            # A held restore's other side will not happen now: what it wrote is put back.
            full = isinstance(exc.__cause__, OSError) and exc.__cause__.errno in (errno.ENOSPC, errno.EDQUOT)
            _undone(loader, ws, fs, journal, notes, doc, taken, len(result.written), exc if not full else None)
        if held.pending is not None:
            _interrupted(loader, ws, fs, journal, notes, doc, taken, held.pending)
        if notes is not None:
            notes.forget(result.written + result.deleted)
            written = {a.path: a.target for a in plan.actions if a.op == WRITE and a.target is not None}
            notes.absorb({p: written[p] for p in result.written}, result.deleted, fs.dirs_changed)
        fs.sync()
        if hold is None:
            drop_journal(journal)  # (a held one stays: its caller settles it, Restorer.release or undo)
        result.late_signal = held.pending


#: The pre-flight keeps the verified bytes of blobs up to KEPT_BLOB long, KEPT_BYTES in all, for the writes: each blob
#: is then read, decompressed and hashed once per restore, not twice (issue 35 §2); longer ones are streamed again.
KEPT_BLOB = 1 << 20
KEPT_BYTES = 16 << 20


class Contents:
    """The content a restore writes: the blobs the pre-flight verified, their bytes kept where small."""

    def __init__(self, loader: Loader) -> None:
        self.loader = loader
        self.kept: dict[str, bytes] = {}
        self.room = KEPT_BYTES

    def check(self, blob_hex: str) -> int:
        """Verify one blob (CorruptStore if damaged) and return its length, keeping its bytes while there is room."""
        size, data = self.loader.checked_blob(bytes.fromhex(blob_hex), min(KEPT_BLOB, self.room))
        if data is not None:
            self.kept[blob_hex] = data
            self.room -= len(data)
        return size

    def chunks(self, blob_hex: str) -> Iterable[bytes]:
        """A blob's verified content: the kept bytes, else read (and verified) again."""
        data = self.kept.get(blob_hex)
        return (data,) if data is not None else self.loader.blob_chunks(blob_hex)


def _steps(contents: Contents, ws: Path, fs: SafeRoot, plan: RestorePlan, safety_id: str, result: RestoreResult,
           safety_started_ns: int, held: HeldSignals, taken: list[Action]) -> None:
    """Carry out the plan's actions in order until a held signal stops it; `taken` gets each one attempted. The
    content of the next STAGED files is written ahead and made durable together (SafeRoot.stage), each still put in
    place by its own step, after its own check."""
    staged: dict[str, str] = {}
    tried: set[int] = set()
    try:
        for i, a in enumerate(plan.actions):
            if held.pending is not None:
                break
            if a.op == LEAVE:
                result.left.append(a)
                continue
            if i not in tried and _stageable(a) and fs.stage_writes:
                window = _window(plan.actions, i)
                tried.update(window)
                staged.update(_stage(contents, fs, [plan.actions[j] for j in window], ws, safety_id, result))
            _step(contents, ws, fs, a, safety_id, result, safety_started_ns, taken, staged)
    finally:
        fs.unstage(staged)


#: Writes staged at once: their temps' fds stay open until synced together (well under a low RLIMIT_NOFILE).
STAGED = 64
STAGED_BYTES = 64 << 20


def _window(actions: list[Action], i: int) -> list[int]:
    """The next stageable writes from `i` on: at most STAGED of them and STAGED_BYTES of content (at least one), so a
    restore of big files never holds much more than one file's worth beside the originals."""
    out: list[int] = []
    size = 0
    for j in range(i, len(actions)):
        a = actions[j]
        if not _stageable(a):
            continue
        size += a.target.size if isinstance(a.target, FileEntry) else 0
        if out and (len(out) >= STAGED or size > STAGED_BYTES):
            break
        out.append(j)
    return out


def _stageable(a: Action) -> bool:
    """A write of a regular file that replaces no directory and renames no other spelling."""
    return (a.op == WRITE and a.target is not None and a.target.kind == "f" and a.respell is None
            and not (a.current is not None and a.current.kind in ("d", "D")))


def _stage(contents: Contents, fs: SafeRoot, actions: list[Action], ws: Path, safety_id: str, result: RestoreResult
           ) -> dict[str, str]:
    """Stage a window of writes (a full disk stops the restore as a write would)."""
    try:
        return fs.stage((a.path, contents.chunks(a.target.blob), a.target.mode) for a in actions
                        if isinstance(a.target, FileEntry))
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _full(ws, result, safety_id) from exc
        raise


def _full(ws: Path, result: RestoreResult, safety_id: str) -> StoreFull:
    return StoreFull(f"restore into {ws}: the disk filled up after {len(result.written)} files were written; "
                     f"the restore is journaled and the next codexr run finishes it once there is space "
                     f"(safety snapshot {safety_id[:12]} holds the state before it)")


def _step(contents: Contents, ws: Path, fs: SafeRoot, a: Action, safety_id: str, result: RestoreResult,
          safety_started_ns: int, taken: list[Action], staged: dict[str, str]) -> None:
    """One action of the plan, its outcome recorded in `result`."""
    taken.append(a)
    try:
        done = _do(contents, fs, a, safety_started_ns, staged)
    except UnsafePath as exc:
        _not_done(result, Action(LEAVE, a.path, str(exc), a.target, a.current))
        return
    except OSError as exc:
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise _full(ws, result, safety_id) from exc
        # One path that cannot be changed (a directory in the way, permissions) is reported,
        # not allowed to abort the rest half-way.
        _not_done(result, Action(LEAVE, a.path, f"could not {a.op}: {exc.strerror}", a.target, a.current))
        return
    if done is None:
        return
    if done:
        (result.written if a.op == WRITE else result.deleted).append(a.path)
    else:
        _not_done(result, Action(LEAVE, a.path, "changed after the safety capture; left as it is",
                                 a.target, a.current))


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


def _roll_back_taken(loader: Loader, ws: Path, fs: SafeRoot, journal: Path, notes: WorkspaceNotes | None,
                     doc: dict[str, Any], steps: list[tuple[str, str, Any]], keep_if_failed: bool) -> Recovery:
    """Undo the steps taken, last first, as the safety snapshot holds their paths.

    The journal is rewritten with `rollback: true` before anything is put back: a kill during the rollback leaves a
    journal the next command rolls back further, never one it would finish. It goes afterwards — unless
    `keep_if_failed` and a path could not be put back for a reason that may pass (a full disk): then the next
    command goes on rolling back.
    """
    doc["rollback"] = True
    write_journal(journal, doc)
    before = before_states(loader.files(doc["safety"]), doc.get("respelled") or {})
    report = Recovery(str(ws), doc["target"], doc["safety"], rolled_back=True, held=doc.get("held"))
    roll_back(loader, fs, steps, before, doc["dir_modes"], report)
    if notes is not None:
        notes.forget([path for _op, path, _t in steps])
        notes.absorb(report.put_back, report.removed, True)
    fs.sync()
    if not (keep_if_failed and any(why.startswith("could not put back") for _p, why in report.left)):
        drop_journal(journal)
    return report


def _undone(loader: Loader, ws: Path, fs: SafeRoot, journal: Path, notes: WorkspaceNotes | None,
            doc: dict[str, Any], taken: list[Action], written: int, error: Exception | None) -> None:
    """A held restore that failed part-way (`error`, or None for a full disk) is rolled back; the StoreError raised
    says how far it got and what is true now."""
    report = _roll_back_taken(loader, ws, fs, journal, notes, doc, [(a.op, a.path, a.target) for a in taken],
                              keep_if_failed=True)
    what = "the disk filled up" if error is None else f"it failed ({error})"
    stuck = [p for p, why in report.left if why.startswith("could not put back")]
    if stuck:
        shown = ", ".join(stuck[:3]) + (" …" if len(stuck) > 3 else "")
        text = (f"restore into {ws}: {what} after {written} files were written; {len(stuck)} of them could not be "
                f"put back yet ({shown}): the next codexr run puts them back once it can (safety snapshot "
                f"{doc['safety'][:12]} holds the state before the restore)")
    else:
        text = f"restore into {ws}: {what} after {written} files were written; they were put back, so nothing changed"
    raise (StoreFull(text) if error is None else StoreError(text))


def _interrupted(loader: Loader, ws: Path, fs: SafeRoot, journal: Path, notes: WorkspaceNotes | None,
                 doc: dict[str, Any], reached: list[Action], signum: int) -> None:
    """Roll back the steps taken, say so, and raise Interrupted (the journal goes: a restore the user stopped is
    never finished by a later command)."""
    report = _roll_back_taken(loader, ws, fs, journal, notes, doc, [(a.op, a.path, a.target) for a in reached],
                              keep_if_failed=False)
    safety = doc["safety"][:12]
    if report.left:
        shown = "; ".join(f"{p}: {why}" for p, why in report.left[:3])
        more = f" and {len(report.left) - 3} more" if len(report.left) > 3 else ""
        raise Interrupted(
            f"the restore was stopped and rolled back except {plural(len(report.left), 'path')} ({shown}{more}), which "
            f"{'holds' if len(report.left) == 1 else 'hold'} what snapshot {doc['target'][:12]} has or changed "
            f"meanwhile; `codexr snapshots restore {safety} --yes` "
            f"puts back the state before the restore (safety snapshot {safety})", signum, rolled_back=False)
    raise Interrupted(f"the restore was rolled back; nothing changed (safety snapshot {safety})", signum,
                      rolled_back=True)


def _do(contents: Contents, fs: SafeRoot, a: Action, safety_started_ns: int,
        staged: dict[str, str] | None = None) -> bool | None:
    """Carry out one action if the path is still as the safety capture saw it."""
    st = fs.lstat(a.path)
    if a.op == RMDIR:
        with contextlib.suppress(OSError):
            fs.rmdir(a.path)
        return None
    if a.before is not None:
        if st is None or stat_key(st) != a.before:
            return False
        # The same stat does not prove the same bytes for a file: a write through a shared mmap page that is already
        # dirty moves no stat field, and the safety snapshot would then hold older bytes than the ones overwritten or
        # deleted. A file's content is compared before it goes (only the files this restore replaces are read); for
        # the other kinds, timestamps this fresh cannot prove them unchanged either.
        must_compare = (a.current is not None and a.current.kind == "f") or is_racy(a.before, safety_started_ns)
        if must_compare and not matches(fs, a.path, a.current):
            return False
    elif st is not None and a.op == WRITE and not (a.current is not None and a.current.kind in ("d", "D")):
        return False
    if a.op == DELETE:
        # False: it changed between this check and the unlink, so it was put back (left).
        return st is None or fs.unlink(a.path, stat_key(st))
    t = a.target
    assert t is not None
    if a.respell is not None and st is not None:
        fs.respell(a.path, a.respell)  # the one file takes the target's spelling, then its content
    if st is not None and a.current is not None and a.current.kind in ("d", "D"):
        with contextlib.suppress(OSError):
            fs.rmdir(a.path)
    if t.kind == "f":
        tmp = staged.pop(a.path, None) if staged is not None else None
        if tmp is None or not fs.rename_staged(a.path, tmp):
            fs.write_file(a.path, contents.chunks(t.blob), t.mode)
    else:
        assert t.kind == "l", t  # a write's target is always captured (plan_restore, recover check it)
        fs.write_link(a.path, t.target)
    return True

