"""Commits of listed snapshots: a snapshot file and its ref line are one step, finished or dropped if interrupted.

A snapshot's writer holds its workspace's ref log under the log's own flock from before the snapshot file until
after the ref line, and leaves a marker, `journal/<wskey>.<snapshot id>.commit`, for exactly that time
(FORMAT.md §5). So a marker the next holder of that lock finds is an interrupted commit, never a running one: that
holder appends the missing ref line when the snapshot is whole, or records the snapshot as dropped when it is not,
then removes the marker. Readers without the lock (verify, a dry-run gc) judge the marker the same way and call it
what it is — an interrupted write, not lost history.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Callable
from pathlib import Path

from ..errors import StoreError
from ..fsutil import append_locked, read_locked
from ..ids import workspace_key
from ..records import record
from ..vocab import UNLISTED_KINDS
from .dropped import add_dropped
from .interfaces import CommitJudge
from .listing import SnapshotInfo

MARKER_SUFFIX = ".commit"
_MARKER_RE = re.compile(r"([0-9a-f]{32})\.([0-9a-f]{64})\.commit")

FINISH = "finish"  # whole: its ref line is appended
DROP = "drop"  # a listed snapshot that cannot be restored: recorded in `dropped`, gc sweeps it after the grace period
CLEAR = "clear"  # nothing to list (no file yet, listed already, damaged, or not this workspace's): the marker goes


@record(frozen=True)
class Marker:
    """One commit marker: the workspace (by key) whose ref log owes a line, and the snapshot it is owed for."""

    path: Path
    wskey: str
    snapshot: str

    @property
    def name(self) -> str:
        return f"journal/{self.path.name}"


@record(frozen=True)
class Judged:
    """What the next writer does with a marker (FINISH, DROP or CLEAR), and why."""

    marker: Marker
    action: str
    why: str
    info: SnapshotInfo | None = None  # the snapshot's ref line, for FINISH and DROP

    def summary(self, *, would: bool = False) -> str:
        """One line saying what was done (`would`: what will be), for a command's report."""
        snap = self.marker.snapshot
        if self.action == FINISH:
            assert self.info is not None
            return (f"{'would finish' if would else 'finished'} an interrupted capture: snapshot {snap} of workspace "
                    f"{self.info.root} {'gets' if would else 'got'} its ref line")
        if self.action == DROP:
            assert self.info is not None
            return (f"{'would drop' if would else 'dropped'} an interrupted capture: snapshot {snap} of workspace "
                    f"{self.info.root} ({self.why})")
        return f"{'would remove' if would else 'removed'} {self.marker.name}: {self.why}"


def marker_path(store: Path, wskey: str, snap_id: str) -> Path:
    """Where the writer of `snap_id` marks its commit."""
    return store / "journal" / f"{wskey}.{snap_id}{MARKER_SUFFIX}"


def markers(store: Path, wskey: str | None = None) -> list[Marker]:
    """The commit markers in the store (of one workspace), by name."""
    try:
        names = os.listdir(store / "journal")
    except FileNotFoundError:
        return []
    out = []
    for name in sorted(names):
        m = _MARKER_RE.fullmatch(name)
        if m is not None and (wskey is None or m[1] == wskey):
            out.append(Marker(store / "journal" / name, m[1], m[2]))
    return out


def mark(path: Path) -> None:
    """Leave a marker: an empty file, whose name says it all (no write for a full disk to tear, nothing to parse)."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644))


def judge(repo: CommitJudge, marker: Marker, named: Callable[[str], bool]) -> Judged:
    """What a marker's snapshot is: whole (FINISH), a listed snapshot that cannot be restored (DROP), or nothing to
    list (CLEAR). `named`: does the workspace's ref log name this id already?"""
    snap = marker.snapshot
    if named(snap):
        return Judged(marker, CLEAR, "its capture was interrupted after its ref line")
    if not repo.exists(snap):
        return Judged(marker, CLEAR, "its capture was interrupted before its snapshot file was complete")
    try:
        rec = repo.record(snap)
    except StoreError as exc:
        return Judged(marker, CLEAR, f"its snapshot file is damaged: {exc}")  # verify reports the file itself
    if rec.root == "/" or rec.kind in UNLISTED_KINDS or workspace_key(rec.root) != marker.wskey:
        return Judged(marker, CLEAR, f"snapshot {snap} is not one of this workspace's listed snapshots")
    info = SnapshotInfo(snap, rec.root, rec.created, rec.kind, rec.label, int(rec.meta.get("file_count", 0)))
    try:
        files = repo.files(snap)  # every member of its parent chain read and checked against its hash
    except StoreError as exc:
        return Judged(marker, DROP, f"its parent chain cannot be read: {exc}", info)
    repo.blobs.refresh()  # packs the interrupted capture wrote
    missing = [p for p, e in files.items() if e.kind == "f" and bytes.fromhex(e.blob) not in repo.blobs]
    if missing:
        return Judged(marker, DROP, f"{len(missing)} of its files' contents are missing, {missing[0]!r} among them",
                      info)
    return Judged(marker, FINISH, "whole", info)


def finish_locked(repo: CommitJudge, wskey: str, fd: int) -> list[Judged]:
    """Finish or drop the workspace's interrupted commits; `fd` is its ref log under `locked_for_append`.

    Each marker goes only after what it owed is durable (the ref line appended and fsynced, or `dropped`
    rewritten), so a crash in between leaves a marker the next writer judges again — CLEAR, the line being there.
    """
    found = markers(repo.path, wskey)
    if not found:
        return []
    data = read_locked(fd)
    lines = data[: data.rfind(b"\n") + 1]  # a torn tail names nothing

    def named(snap: str) -> bool:
        return f'{{"id":"{snap}",'.encode() in lines

    judged = sorted((judge(repo, m, named) for m in found),
                    key=lambda j: (j.info.created if j.info is not None else 0.0, j.marker.snapshot))
    dropped = {j.marker.snapshot for j in judged if j.action == DROP}
    for j in judged:
        if j.action == FINISH:
            assert j.info is not None
            append_locked(fd, j.info.line() + b"\n")
    if dropped:
        add_dropped(repo.path, dropped)
    for j in judged:
        with contextlib.suppress(OSError):  # one that cannot go (a directory by that name) is judged CLEAR again
            j.marker.path.unlink()
    return judged


def commit_running(ref: Path) -> bool:
    """Does a writer hold this ref log's lock right now (a commit in progress, not an interrupted one)?"""
    try:
        fd = os.open(ref, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # also releases a lock taken
    return False
