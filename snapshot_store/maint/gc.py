"""Garbage collection: apply retention to workspace refs, mark from every ref and pin, sweep after a grace period.

Planned first, then executed (restic's prune): gc reads every ref, pin, pack index and kept
snapshot chain before it deletes anything, and refuses (one line, nothing deleted) while any of
them is damaged. Refs are rewritten before any object goes, so a crash can leave unreferenced
objects (collected next time) but never a ref to a missing one.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import blake3

from ..errors import CorruptStore, StoreBusy, StoreError
from ..fsutil import TMP_PREFIX, atomic_write, fsync_dir, translate_os_errors
from ..ids import is_pack_id, is_snapshot_id
from ..repository import commits
from ..repository.listing import SnapshotInfo
from ..repository.packs import RECORD, Location, PackScan, PackWriter, scan_pack, write_index
from ..repository.repo import AUTO_GC_INTERVAL, GC_MARKER
from ..settings import RetentionPolicy
from .reach import each_needs
from .refcheck import (
    RefFile,
    lost_history,
    lost_line,
    prune_dropped,
    read_dropped,
    read_pins,
    ref_line,
    ref_mismatch,
    workspace_ref_files,
    write_dropped,
)

if TYPE_CHECKING:
    from ..repository.repo import Repository

REPACK_BELOW = 0.5
PENDING = "gc.pending"  # written before gc's first deletion, removed after its last (FORMAT.md §8)
_KEPT = float("inf")  # survival level of a root retention never drops


@dataclass
class GcPlan:
    """Everything a gc run would do; `dry_run` prints this and stops."""

    dropped: list[SnapshotInfo] = field(default_factory=list)
    delete_snapshots: list[str] = field(default_factory=list)
    delete_packs: list[str] = field(default_factory=list)
    repack: list[str] = field(default_factory=list)
    delete_temp: list[Path] = field(default_factory=list)
    rebuilt_indexes: list[str] = field(default_factory=list)
    finish_packs: list[str] = field(default_factory=list)
    interrupted: bool = False
    finished_commits: list[str] = field(default_factory=list)  # interrupted captures finished or dropped (§5)
    live_snapshots: int = 0
    live_blobs: int = 0
    missing_blobs: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    freed_by_retention: int = 0
    over_cap: int = 0
    dry_run: bool = False
    _refs: list[RefFile] = field(default_factory=list, repr=False)
    _live: set[bytes] = field(default_factory=set, repr=False)
    _home: dict[bytes, str] = field(default_factory=dict, repr=False)
    _entries: dict[str, list[tuple[bytes, Location]]] = field(default_factory=dict, repr=False)

    def as_json(self) -> dict[str, Any]:
        """Stable JSON for the CLI."""
        return {
            "dry_run": self.dry_run,
            "dropped_by_retention": [i.id for i in self.dropped],
            "delete_snapshots": len(self.delete_snapshots),
            "delete_packs": len(self.delete_packs) + len(self.finish_packs),
            "repack": len(self.repack),
            "delete_temp": len(self.delete_temp),
            "rebuilt_indexes": self.rebuilt_indexes,
            "finished_interrupted_gc": self.interrupted,
            "finished_commits": self.finished_commits,
            "live_snapshots": self.live_snapshots,
            "live_blobs": self.live_blobs,
            "missing_blobs": self.missing_blobs,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "freed_by_retention": self.freed_by_retention,
            "over_cap_bytes": self.over_cap,
        }


# ----------------------------------------------------------------------------- the interrupted-gc marker


def _pending_body(doc: dict[str, Any]) -> bytes:
    return json.dumps({k: doc[k] for k in ("started", "packs", "snapshots")}, sort_keys=True).encode()


def read_pending(store: Repository) -> dict[str, Any] | None:
    """The marker of a gc that was interrupted while deleting (None if none, or if it is damaged)."""
    try:
        doc = json.loads((store.path / PENDING).read_bytes())
        if blake3.blake3(_pending_body(doc)).hexdigest() != doc["check"]:
            return None
        if not all(isinstance(p, str) and is_pack_id(p) for p in doc["packs"]):
            return None
        return dict(doc)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pending_exists(store: Repository) -> bool:
    """True when a gc marker is on disk (damaged or not)."""
    return (store.path / PENDING).exists()


def _write_pending(store: Repository, packs: list[str], snapshots: list[str]) -> None:
    doc: dict[str, Any] = {"started": time.time(), "packs": sorted(packs), "snapshots": sorted(snapshots)}
    doc["check"] = blake3.blake3(_pending_body(doc)).hexdigest()
    atomic_write(store.path / PENDING, json.dumps(doc).encode() + b"\n")


# ----------------------------------------------------------------------------- packs and their indexes


@dataclass
class _Packs:
    entries: dict[str, list[tuple[bytes, Location]]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)  # .pack + .idx bytes
    rebuilt: list[str] = field(default_factory=list)
    finish: list[str] = field(default_factory=list)


def _stop(why: str) -> CorruptStore:
    return CorruptStore(f"gc stopped, nothing was deleted: {why}")


def _load_packs(store: Repository, pending: set[str], *, write: bool) -> _Packs:
    """Read every pack index from disk; rebuild a missing or damaged one from its pack (if `write`).

    A `.pack` is never deleted for lacking an index: its records name their blobs, so the index is
    rebuilt when every record verifies; otherwise gc refuses, unless an interrupted gc had already
    decided to delete that pack (its marker names it).
    """
    packs_dir = store.path / "packs"
    out = _Packs()
    names = {f.name for f in packs_dir.iterdir()}
    pack_ids = {n[:-5] for n in names if n.endswith(".pack") and is_pack_id(n[:-5])}
    idx_ids = {n[:-4] for n in names if n.endswith(".idx") and is_pack_id(n[:-4])}
    for pid in sorted(idx_ids - pack_ids):
        raise _stop(f"pack index {pid}.idx has no pack file (its blobs are lost); "
                    "run `codexr snapshots verify --repair` to drop the dangling index")
    for pid in sorted(pack_ids):
        scan: PackScan | None = None
        if pid in idx_ids:
            try:
                info = store.blobs.load_pack(pid)
            except StoreError:
                pass
            else:
                out.entries[pid] = info.entries
                out.sizes[pid] = info.size + (packs_dir / f"{pid}.idx").stat().st_size
                continue
        scan = scan_pack(packs_dir, pid)
        if not scan.complete:
            if pid in pending:
                out.finish.append(pid)  # the interrupted gc copied its live blobs before deleting
                continue
            what = "a damaged index" if pid in idx_ids else "no index"
            raise _stop(f"pack {pid} has {what}, and it cannot be rebuilt: {scan.damage[0]}; "
                        "run `codexr snapshots verify --repair`")
        out.rebuilt.append(pid)
        out.entries[pid] = scan.entries
        out.sizes[pid] = scan.size
        if write:
            write_index(packs_dir, pid, scan.entries)
            store.blobs.damaged.pop(pid, None)
    if write and out.rebuilt:
        store.blobs.refresh()
    return out


# ----------------------------------------------------------------------------- planning


def _retain(infos: list[SnapshotInfo], policy: RetentionPolicy, now: float, pinned: set[str]) -> list[SnapshotInfo]:
    """Newest-first rules: age, count; the newest `keep_latest` and pinned ones always survive."""
    ordered = sorted(infos, key=lambda i: i.created, reverse=True)
    kept = []
    for n, info in enumerate(ordered):
        if n < policy.keep_latest or info.id in pinned:
            kept.append(info)
            continue
        if policy.max_age_days and now - info.created > policy.max_age_days * 86400:
            continue
        if policy.max_snapshots_per_workspace and n >= policy.max_snapshots_per_workspace:
            continue
        kept.append(info)
    return sorted(kept, key=lambda i: i.created)


def _all_snapshots(store: Repository) -> Iterator[tuple[str, Path]]:
    for bucket in (store.path / "snapshots").iterdir():
        if bucket.is_dir():
            for f in bucket.iterdir():
                yield f.name, f


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def _check_refs(store: Repository, policy: RetentionPolicy, now: float) -> tuple[list[RefFile], set[str], set[str]]:
    """Every ref and pin, strictly: (ref files, pinned ids that exist, ids of every ref line)."""
    refs = workspace_ref_files(store)
    pins = read_pins(store, policy.thread_idle_days, now)
    problems = [p for r in refs for p in r.problems] + pins.problems
    for r in refs:
        for n, info in r.lines:
            why = ref_mismatch(store, r, n, info)
            if why is not None:
                problems.append(why)
    for sid, rel in sorted(pins.required.items()):
        try:
            store.record(sid)
        except StoreError as exc:
            problems.append(f"pin file {rel} names snapshot {sid}, which cannot be read: {exc}")
    if problems:
        more = f" (and {len(problems) - 1} more; see `codexr snapshots verify`)" if len(problems) > 1 else ""
        raise _stop(problems[0] + more)
    snaps = store.path / "snapshots"
    pinned = {s for s in pins.ids if (snaps / s[:2] / s).is_file()}
    return refs, pinned, {i.id for r in refs for i in r.infos}


def plan_gc(store: Repository, policy: RetentionPolicy, now: float | None = None, *,
            _packs: _Packs | None = None) -> GcPlan:
    """Compute retention, mark and sweep decisions without changing anything."""
    now = time.time() if now is None else now
    pending = read_pending(store)
    plan = GcPlan(interrupted=pending_exists(store))
    packs = _packs if _packs is not None else _load_packs(store, set(pending["packs"]) if pending else set(),
                                                           write=False)
    plan.rebuilt_indexes, plan.finish_packs = list(packs.rebuilt), list(packs.finish)
    refs, pinned, ref_ids = _check_refs(store, policy, now)
    plan._refs = refs
    # Interrupted commits (FORMAT.md §5): gc finishes them before planning; a dry run plans as if it had — a whole
    # snapshot is listed (kept like the newest of its workspace), one that cannot be is dropped — and says so.
    judged = [commits.judge(store, m, ref_ids.__contains__) for m in commits.markers(store.path)]
    interrupted = {j.marker.snapshot for j in judged if j.action != commits.CLEAR}
    pinned |= {j.marker.snapshot for j in judged if j.action == commits.FINISH}
    plan.finished_commits = [j.summary(would=True) for j in judged]

    # Survival level of each root: dropped by age/count -> 0; the k-th oldest the size cap may drop -> k;
    # never dropped -> inf. Dropping the first k size-cap candidates keeps the roots with level > k.
    kept_by_ref = {id(r): _retain(r.infos, policy, now, pinned) for r in refs}
    level: dict[str, float] = {s: 0.0 for s in ref_ids}
    droppable: list[SnapshotInfo] = []
    for r in refs:
        kept = kept_by_ref[id(r)]
        droppable.extend(i for i in kept[: max(0, len(kept) - policy.keep_latest)] if i.id not in pinned)
        for i in kept:
            level[i.id] = _KEPT
    droppable.sort(key=lambda i: i.created)
    for k, info in enumerate(droppable, 1):
        level[info.id] = float(k)
    for s in pinned:
        level[s] = _KEPT

    blob_size: dict[bytes, int] = {}
    home: dict[bytes, str] = {}
    pending_packs = set(pending["packs"]) if pending else set()
    for pid, entries in packs.entries.items():
        for b, loc in entries:
            if b not in home or (home[b] in pending_packs and pid not in pending_packs):
                home[b] = pid
                blob_size[b] = loc.stored_len + RECORD.size
    blob_level: dict[bytes, float] = {}
    snap_level: dict[str, float] = {}
    missing: set[bytes] = set()
    try:
        for needs in each_needs(store, level):
            lv = level[needs.root]
            for s in needs.chain:
                snap_level[s] = max(snap_level.get(s, -1.0), lv)
            for b in needs.blobs:
                blob_level[b] = max(blob_level.get(b, -1.0), lv)
                if b not in home:
                    missing.add(b)
    except StoreError as exc:
        raise _stop(str(exc)) from exc
    # Workspace history no ref names (a deleted ref file) is no garbage: put back by `verify --repair` first.
    lost = lost_history(store, (n for n, _f in _all_snapshots(store) if is_snapshot_id(n)),
                        set(snap_level) | ref_ids | interrupted)
    if lost:
        root, ids = min(lost.items())
        more = f" (and {len(lost) - 1} more workspace(s))" if len(lost) > 1 else ""
        raise _stop(lost_line(store, root, ids) + more)
    snap_size = {s: _size(store.path / "snapshots" / s[:2] / s) for s in snap_level}

    def live_bytes(k: float) -> int:
        return (sum(blob_size.get(b, 0) for b, lv in blob_level.items() if lv > k)
                + sum(snap_size[s] for s, lv in snap_level.items() if lv > k))

    cut = 0
    if policy.max_store_bytes:
        # Drop the fewest oldest candidates that bring what stays under the cap; if none does,
        # drop only as far as dropping still frees space (never history for nothing).
        sizes = [live_bytes(float(k)) for k in range(len(droppable) + 1)]
        under = [k for k, n in enumerate(sizes) if n <= policy.max_store_bytes]
        cut = under[0] if under else sizes.index(min(sizes))
        plan.over_cap = max(0, sizes[cut] - policy.max_store_bytes)
    plan.freed_by_retention = live_bytes(-1.0) - live_bytes(float(cut))
    live_snaps = {s for s, lv in snap_level.items() if lv > cut}
    live = {b for b, lv in blob_level.items() if lv > cut}
    plan._live, plan._home, plan._entries = live, home, packs.entries
    gone_roots = {s for s, lv in level.items() if lv <= cut}
    for r in refs:
        plan.dropped.extend(i for i in r.infos if i.id in gone_roots)
    plan.live_snapshots, plan.live_blobs, plan.missing_blobs = len(live_snaps), len(live - missing), len(missing)

    all_snap_bytes = 0
    for name, f in _all_snapshots(store):
        all_snap_bytes += _size(f)
        if name.startswith(TMP_PREFIX):
            if _age(f, now) > policy.grace_seconds:
                plan.delete_temp.append(f)
        elif is_snapshot_id(name) and name not in live_snaps and _age(f, now) > policy.grace_seconds:
            plan.delete_snapshots.append(name)
    packs_dir = store.path / "packs"
    plan.bytes_before = sum(packs.sizes.values()) + all_snap_bytes + sum(
        _size(packs_dir / f"{p}.pack") for p in packs.finish)
    alive: dict[str, int] = defaultdict(int)
    total: dict[str, int] = defaultdict(int)
    for pid, entries in packs.entries.items():
        for b, loc in entries:
            total[pid] += loc.stored_len
            if b in live and home.get(b) == pid:
                alive[pid] += loc.stored_len
    old = {pid for pid in packs.entries if _age(packs_dir / f"{pid}.pack", now) > policy.grace_seconds}
    for pid in sorted(old):
        if alive[pid] == 0:
            plan.delete_packs.append(pid)
        elif alive[pid] < total[pid] * REPACK_BELOW:
            plan.repack.append(pid)

    def after() -> int:
        dead_snap = sum(_size(store.path / "snapshots" / s[:2] / s) for s in plan.delete_snapshots)
        freed = sum(packs.sizes[p] for p in plan.delete_packs)
        freed += sum(packs.sizes[p] - alive[p] - RECORD.size * sum(
            1 for b, _loc in packs.entries[p] if b in live and home.get(b) == p) for p in plan.repack)
        return plan.bytes_before - dead_snap - freed - sum(_size(packs_dir / f"{p}.pack") for p in packs.finish)

    plan.bytes_after = after()
    if policy.max_store_bytes and plan.bytes_after > policy.max_store_bytes:
        # Over the cap: also repack packs that are mostly alive, so every dead byte is freed.
        extra = [p for p in sorted(old) if p not in plan.delete_packs and p not in plan.repack
                 and alive[p] < total[p]]
        if extra:
            plan.repack = sorted(plan.repack + extra)
            plan.bytes_after = after()
    for f in packs_dir.iterdir():
        if f.name.startswith(TMP_PREFIX) and _age(f, now) > policy.grace_seconds:
            plan.delete_temp.append(f)
    return plan


# ----------------------------------------------------------------------------- executing


def gc(store: Repository, policy: RetentionPolicy, *, dry_run: bool = False, wait: bool = True) -> GcPlan:
    """Run (or with `dry_run` only plan) a collection under the store's exclusive lock, reading from disk."""
    with store.exclusive_lock(wait=wait), translate_os_errors("gc"):
        pending = read_pending(store)
        packs = _load_packs(store, set(pending["packs"]) if pending else set(), write=not dry_run)
        finished = [] if dry_run else store.finish_all_commits()  # before the refs are read: they list them
        plan = plan_gc(store, policy, _packs=packs)
        if not dry_run:
            plan.finished_commits = [j.summary() for j in finished]
        plan.dry_run = dry_run
        if dry_run:
            return plan
        _execute(store, plan)
        plan.bytes_after = _measure(store)
        atomic_write(store.path / GC_MARKER, str(time.time()).encode(), sync=False)
    return plan


def _measure(store: Repository) -> int:
    """Bytes of packs, pack indexes and snapshot files now on disk."""
    total = sum(_size(f) for f in (store.path / "packs").iterdir()
                if not f.name.startswith(TMP_PREFIX) and f.suffix in (".pack", ".idx"))
    return total + sum(_size(f) for _n, f in _all_snapshots(store))


def _execute(store: Repository, plan: GcPlan) -> None:
    # Every other store reloads what it knows once the generation moves; it moves again at the end,
    # so a store that loaded its blob index while this gc was deleting cannot keep it either.
    store.blobs.note_gc()
    try:
        _sweep(store, plan)
    finally:
        store.blobs.note_gc()


def _sweep(store: Repository, plan: GcPlan) -> None:
    dropped = {i.id for i in plan.dropped}
    if dropped:  # first: a snapshot file left without its ref line is history lost unless listed here
        write_dropped(store, read_dropped(store) | dropped)
    for ref in plan._refs:
        keep = [i for i in ref.infos if i.id not in dropped]
        if len(keep) == len(ref.infos):
            continue
        atomic_write(ref.path, b"".join(ref_line(i) + b"\n" for i in keep))
    gone = set(plan.delete_packs) | set(plan.repack)
    if plan.repack:
        writer = PackWriter(store.blobs)
        try:
            for pid in plan.repack:
                for b, _loc in plan._entries[pid]:
                    if b in plan._live and plan._home.get(b) == pid:
                        writer.add(store.blobs.read(b), force=True)
            writer.commit()
        except BaseException:
            writer.abort()
            raise
    _write_pending(store, sorted(gone | set(plan.finish_packs)), plan.delete_snapshots)
    packs_dir = store.path / "packs"
    for pack_id in sorted(gone | set(plan.finish_packs)):
        # The index goes first: a pack without an index is rebuilt or, named by the marker, finished.
        with contextlib.suppress(FileNotFoundError):
            (packs_dir / f"{pack_id}.idx").unlink()
        with contextlib.suppress(FileNotFoundError):
            (packs_dir / f"{pack_id}.pack").unlink()
    fsync_dir(packs_dir)
    store.blobs.forget(set(store.blobs.loaded) | gone)
    store.blobs.refresh()
    for snap in plan.delete_snapshots:
        with contextlib.suppress(FileNotFoundError):
            (store.path / "snapshots" / snap[:2] / snap).unlink()
    store.forget_snapshots(plan.delete_snapshots)
    for f in plan.delete_temp:
        with contextlib.suppress(FileNotFoundError):
            f.unlink()
    prune_dropped(store)
    (store.path / PENDING).unlink()
    fsync_dir(store.path)


def maybe_auto_gc(store: Repository, policy: RetentionPolicy, interval: float = AUTO_GC_INTERVAL) -> GcPlan | None:
    """Collect at most once per `interval`, never waiting for a busy store."""
    marker = store.path / GC_MARKER
    if not store.auto_gc_due(interval):
        return None
    try:
        return gc(store, policy, wait=False)
    except StoreBusy:
        return None
    except CorruptStore:
        # gc refused because of damage: say so once per interval, not at every capture.
        with contextlib.suppress(OSError):
            atomic_write(marker, str(time.time()).encode(), sync=False)
        raise


def store_size(path: Path) -> int:
    """Apparent size of every file in the store."""
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, n)).st_size
    return total
