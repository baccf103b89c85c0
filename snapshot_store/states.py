"""Single-file states keyed by absolute path: saved, captured and restored outside any workspace.

A *states snapshot* is an ordinary snapshot whose `root` is `/` and whose keys are absolute paths
without their leading `/` (FORMAT.md §11). No workspace ref lists it; a pin keeps it. Only the
paths it names are ever looked at: there is no walk, so a restore of one is a restore of those
files alone — with the usual safety capture first, witnessed deletion only (a `["-"]` entry), a
journal, and every path reached from `/` one component at a time without following a symlink.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import blake3

from .errors import StoreError
from .fsutil import translate_os_errors
from .manifest import ABSENT, Entry, FileEntry, FileMap, LinkEntry, SkippedEntry, UnlistedDir
from .reasons import Reason
from .repository.packs import PackWriter
from .repository.repo import Repository
from .restore.apply import Contents, Restorer, RestoreResult
from .restore.plan import DELETE, LEAVE, WRITE, Action, RestorePlan, plan_restore
from .safefs import SafeRoot, UnsafePath
from .scope import Ignore, forbidden
from .stamps import Key, stat_key
from .vocab import SnapshotKind

STATES_ROOT = "/"
KIND_PRE_EDIT = SnapshotKind.PRE_EDIT
KIND_STATES_SAFETY = SnapshotKind.STATES_SAFETY
KIND_POST_EDIT = SnapshotKind.POST_EDIT
PROTECTED = "Codex's own files and the snapshot store are never written"


def state_key(path: str) -> str:
    """The manifest key of an absolute, normalised path ('/a/b' -> 'a/b')."""
    if not os.path.isabs(path) or os.path.normpath(path) != path or path == "/":
        raise StoreError(f"{path!r} is not a normalised absolute path")
    key = path[1:]
    if forbidden(key) or "\0" in key:
        raise StoreError(f"{path!r}: refusing to record a path inside .git")
    return key


def key_path(key: str) -> str:
    """The absolute path of a states-snapshot key."""
    return "/" + key


@dataclass(frozen=True)
class FileState:
    """One path's content (None: the path was absent, or a symlink to `link`) and permission bits."""

    content: bytes | None
    mode: int = 0o644
    link: str | None = None  # the path was a symlink with this target (content is then None)
    mode_seen: bool = True  # False: nothing saw the mode (a deleted file's); `mode` is a cautious stand-in


def save_states(store: Repository, states: Mapping[str, FileState], *, label: str,
                meta: dict[str, object] | None = None, kind: str = KIND_PRE_EDIT) -> str:
    """Store each state (blobs first, then the snapshot file) and return the snapshot id."""
    changes: dict[str, Entry] = {}
    with translate_os_errors("snapshot store"), store.shared_lock():
        writer = store.blob_writer()
        try:
            for path, st in states.items():
                key = state_key(path)
                if st.link is not None:
                    changes[key] = LinkEntry("l", st.link)
                elif st.content is None:
                    changes[key] = ABSENT
                else:
                    blob = writer.add(st.content)
                    changes[key] = FileEntry("f", stat.S_IMODE(st.mode), len(st.content), blob.hex())
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        return store.write_unlisted(STATES_ROOT, changes, parent=None, kind=kind, label=label,
                                    meta=dict(meta or {}))


def _capture_one(fs: SafeRoot, key: str, writer: PackWriter | None) -> tuple[Entry, Key | None]:
    """One path as it is now, read without following any symlink (its blob stored if `writer`)."""
    try:
        # Opening the parent raises UnsafePath when a symlink (or a file) stands on the way.
        if fs.dir_fd(key.rpartition("/")[0], False) is None:
            return ABSENT, None
        st = fs.lstat(key)
        if st is None:
            return ABSENT, None
        if stat.S_ISLNK(st.st_mode):
            return LinkEntry("l", fs.readlink(key)), stat_key(st)
        if stat.S_ISDIR(st.st_mode):
            return UnlistedDir("D", Reason.DIRECTORY), stat_key(st)
        if not stat.S_ISREG(st.st_mode):
            return SkippedEntry("x", Reason.NOT_REGULAR), stat_key(st)
        fd = fs.open_regular(key)
        if fd is None:
            return SkippedEntry("x", Reason.REPLACED), None
        with os.fdopen(fd, "rb") as f:
            opened = os.fstat(f.fileno())
            if stat_key(opened) != stat_key(st):
                return SkippedEntry("x", Reason.REPLACED), None
            if writer is None:
                hasher = blake3.blake3()
                size = 0
                while chunk := f.read(1 << 20):
                    hasher.update(chunk)
                    size += len(chunk)
                blob_hex = str(hasher.hexdigest())
            else:
                blob, size = writer.add_stream(f)
                blob_hex = blob.hex()
        return FileEntry("f", stat.S_IMODE(st.st_mode), size, blob_hex), stat_key(st)
    except UnsafePath:
        return SkippedEntry("x", Reason.BEHIND_SYMLINK), None
    except OSError as exc:
        return SkippedEntry("x", f"unreadable: {exc.strerror}"), None


def capture_states(store: Repository, paths: Iterable[str], *, label: str, kind: str = KIND_POST_EDIT) -> str | None:
    """Each absolute path as it is now, read as a states restore's safety capture reads it (so a later restore can
    tell whether a path is still as it was then), stored as a states snapshot (None when no path may be recorded)."""
    keys = sorted({p.lstrip("/") for p in paths if os.path.isabs(p) and os.path.normpath(p) == p and p != "/"
                   and not forbidden(p.lstrip("/")) and "\0" not in p})
    if not keys:
        return None
    changes: dict[str, Entry] = {}
    with translate_os_errors("snapshot store"), store.shared_lock():
        writer = store.blob_writer()
        try:
            with SafeRoot(STATES_ROOT) as fs:
                for key in keys:
                    changes[key] = _capture_one(fs, key, writer)[0]
            writer.commit()
        except BaseException:
            writer.abort()
            raise
        return store.write_unlisted(STATES_ROOT, changes, parent=None, kind=kind, label=label)


def restorer(store: Repository) -> Restorer:
    """The restorer of single files: its root is "/", and no workspace index is told of its writes."""
    return Restorer(store, Path(STATES_ROOT), store.journal_file(Path(STATES_ROOT)), settle=store.on_held)


@dataclass
class StatesRestore:
    """A prepared restore of a states snapshot: its safety capture is committed, its plan made."""

    store: Repository
    plan: RestorePlan
    safety_id: str | None
    fresh: frozenset[bytes]
    started_ns: int
    checked: Contents | None = field(default=None, init=False)  # what `check` verified, for the apply

    def check(self) -> None:
        """Verify every content the apply writes (CorruptStore, "nothing was changed", where one is damaged), before
        the caller changes anything of its own; `apply` checks anyway when this was not called."""
        store = self.store
        with translate_os_errors("restore of single files"), store.workspace_lock(Path(STATES_ROOT)), \
                store.shared_lock():
            self.checked = restorer(store).check(self.plan, self.fresh)

    def apply(self) -> RestoreResult:
        """Journaled apply (each path only if it is still as the safety capture saw it)."""
        store = self.store
        assert self.safety_id is not None
        started = time.perf_counter()
        result = RestoreResult(self.plan, self.safety_id)
        root = Path(STATES_ROOT)
        with translate_os_errors("restore of single files"), store.workspace_lock(root), store.shared_lock():
            restorer(store).apply(self.plan, self.safety_id, result, self.fresh, self.started_ns, checked=self.checked)
        result.seconds = time.perf_counter() - started
        return result


def prepare_states_restore(store: Repository, snap_id: str, *, dry_run: bool = False,
                           protected: Iterable[str] = ()) -> StatesRestore:
    """Finish an interrupted states restore, capture every named path (safety), and plan.

    Paths at or below a `protected` directory (Codex's home, the store) are left, never written.
    """
    target_rec = store.record(snap_id)
    if target_rec.root != STATES_ROOT:
        raise StoreError(f"snapshot {snap_id[:12]} is not a record of single files")
    target = store.files(snap_id)
    guarded = [os.path.realpath(p) for p in [*protected, *map(str, store.protected)]]
    root = Path(STATES_ROOT)
    current: FileMap = {}
    stats: dict[str, Key] = {}
    started_ns = time.time_ns()
    with translate_os_errors("restore of single files"), store.workspace_lock(root), store.shared_lock():
        if not dry_run:
            report = restorer(store).recover()
            if report is not None:
                store.report_recovery(report)
        writer = None if dry_run else store.blob_writer()
        try:
            with SafeRoot(STATES_ROOT) as fs:
                for key in sorted(target):
                    entry, key_stat = _capture_one(fs, key, writer)
                    current[key] = entry
                    if key_stat is not None:
                        stats[key] = key_stat
            if writer is not None:
                writer.commit()
        except BaseException:
            if writer is not None:
                writer.abort()
            raise
        safety_id = None
        if not dry_run:
            safety_id = store.write_unlisted(STATES_ROOT, current, parent=None, kind=KIND_STATES_SAFETY,
                                             label=f"before restoring {snap_id[:12]}")
    plan = plan_restore(target, current, Ignore(), STATES_ROOT, snap_id)
    plan.safety_id = safety_id
    for a in plan.actions:
        path = key_path(a.path)
        if a.op in (WRITE, DELETE) and any(path == g or path.startswith(g.rstrip("/") + "/") for g in guarded):
            a.op, a.reason = LEAVE, PROTECTED
        if a.op in (WRITE, DELETE):
            a.before = stats.get(a.path)
    for key, entry in sorted(target.items()):
        # A path the target holds but that stands behind a symlink or is unreadable now is named too.
        cur = current.get(key)
        if cur is not None and cur.kind == "x" and entry != cur and not any(a.path == key for a in plan.actions):
            plan.actions.append(Action(LEAVE, key, f"cannot be restored now ({cur.reason})", entry, cur))
    fresh = frozenset(writer.stored) if writer is not None else frozenset()
    return StatesRestore(store, plan, safety_id, fresh, started_ns)
