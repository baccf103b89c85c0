"""A gc's plan, built as restic plans its prune: survival levels, mark, size cut, sweep; nothing changes on disk.

gc reads every ref, pin, pack index and kept snapshot chain before it deletes anything, and refuses (one line,
nothing deleted) while any of them is damaged. The plan is a value: `gc --dry-run` prints it, gc executes it
(gc.py). Read top to bottom:

1. survival levels: what the retention policy keeps. Each root (a snapshot a ref line or pin names) gets a level:
   0 when age or count drops it, k when it is the k-th oldest the size cap may drop, infinity when nothing drops
   it (pins, thread sidecars, interrupted commits to finish, the newest `keep_latest` of each workspace).
2. mark: what the roots reach. Each snapshot file and blob takes the highest level of a root that needs it, so
   dropping the first k size-cap candidates keeps exactly what has a level above k.
3. size cut: the smallest k that brings what stays under the size cap (or the one that frees most).
4. sweep: what goes. Snapshot files and packs nothing live needs, once older than the grace period; packs mostly
   dead are repacked; leftover temporary files.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CorruptStore, StoreError
from ..fsutil import TMP_PREFIX
from ..ids import is_pack_id, is_snapshot_id
from ..records import NamedTuple
from ..repository import commits
from ..repository.listing import SnapshotInfo
from ..repository.packs import RECORD, Location, PackScan, scan_pack, write_index
from ..settings import RetentionPolicy
from .pending import pending_exists, pending_packs
from .reach import each_needs
from .refcheck import RefFile, journal_pins, lost_history, lost_line, read_pins, ref_mismatch, workspace_ref_files

if TYPE_CHECKING:
    from ..repository.repo import Repository

REPACK_BELOW = 0.5
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
    _refs: list[RefFile] = field(default_factory=list, repr=False)  # ref files to rewrite without `dropped`
    _keep: dict[str, list[bytes]] = field(default_factory=dict, repr=False)  # repack: live blobs, in pack order

    def changes_nothing(self) -> bool:
        """Nothing to drop, rewrite, repack or delete, and no interrupted gc to finish: carried out, it would only
        move the generation, which makes every other process reload its pack indexes and every saved walk useless
        (the capture after a new store's first one walked again: ~3.8 s instead of ~0.6 s at 100,000 files)."""
        return not (self.dropped or self.delete_snapshots or self.delete_packs or self.repack or self.delete_temp
                    or self.finish_packs or self.interrupted)  # refs are rewritten only without `dropped`

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


def stop(why: str) -> CorruptStore:
    """gc's refusal: one line, and nothing was deleted."""
    return CorruptStore(f"gc stopped, nothing was deleted: {why}")


# ----------------------------------------------------------------------------- what is on disk


def snapshot_files(store: Repository) -> Iterator[tuple[str, Path]]:
    """(name, path) of every file in the snapshot buckets, temporary ones included."""
    for bucket in (store.path / "snapshots").iterdir():
        if bucket.is_dir():
            for f in bucket.iterdir():
                yield f.name, f


def age_of(path: Path, now: float) -> float:
    """Seconds since the file was written (0 for a file gone meanwhile)."""
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def size_of(path: Path) -> int:
    """The file's size (0 for a file gone meanwhile)."""
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


@dataclass
class Packs:
    """Every pack's index entries and size, as gc found them."""

    entries: dict[str, Iterable[tuple[bytes, Location]]] = field(default_factory=dict)  # walkable more than once
    sizes: dict[str, int] = field(default_factory=dict)  # .pack + .idx bytes
    rebuilt: list[str] = field(default_factory=list)
    finish: list[str] = field(default_factory=list)


def load_packs(store: Repository, pending: set[str], *, write: bool) -> Packs:
    """Read every pack index from disk; rebuild a missing or damaged one from its pack (if `write`).

    A `.pack` is never deleted for lacking an index: its records name their blobs, so the index is
    rebuilt when every record verifies; otherwise gc refuses, unless an interrupted gc had already
    decided to delete that pack (its marker names it).
    """
    packs_dir = store.path / "packs"
    out = Packs()
    names = {f.name for f in packs_dir.iterdir()}
    pack_ids = {n[:-5] for n in names if n.endswith(".pack") and is_pack_id(n[:-5])}
    idx_ids = {n[:-4] for n in names if n.endswith(".idx") and is_pack_id(n[:-4])}
    for pid in sorted(idx_ids - pack_ids):
        raise stop(f"pack index {pid}.idx has no pack file (its blobs are lost); "
                   "run `codexr snapshots verify --repair` to drop the dangling index")
    for pid in sorted(pack_ids):
        scan: PackScan | None = None
        if pid in idx_ids:
            try:
                size, entries = store.blobs.pack_entries(pid)  # decoded as walked (IndexEntries)
            except StoreError:
                pass
            else:
                out.entries[pid] = entries
                out.sizes[pid] = size + (packs_dir / f"{pid}.idx").stat().st_size
                continue
        scan = scan_pack(packs_dir, pid)
        if not scan.complete:
            if pid in pending:
                out.finish.append(pid)  # the interrupted gc copied its live blobs before deleting
                continue
            what = "a damaged index" if pid in idx_ids else "no index"
            raise stop(f"pack {pid} has {what}, and it cannot be rebuilt: {scan.damage[0]}; "
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


# ----------------------------------------------------------------------------- the plan


def plan_gc(store: Repository, policy: RetentionPolicy, now: float | None = None, *,
            _packs: Packs | None = None) -> GcPlan:
    """The plan of a gc, in the four steps above; nothing on disk changes (`_packs`: the indexes gc has loaded)."""
    now = time.time() if now is None else now
    pending = pending_packs(store)
    plan = GcPlan(interrupted=pending_exists(store))
    packs = _packs if _packs is not None else load_packs(store, pending, write=False)
    plan.rebuilt_indexes, plan.finish_packs = list(packs.rebuilt), list(packs.finish)
    survival = _survival_levels(store, policy, now, plan)
    marks = _mark(store, survival, packs, pending)
    live = _size_cut(store, policy, survival, marks, plan)
    _sweep(store, policy, now, packs, marks, live, plan)
    return plan


# ----------------------------------------------------------------------------- 1. survival levels


class _Survival(NamedTuple):
    """What retention keeps: a survival level per root, and what else must not be taken for lost history."""

    level: dict[str, float]  # root -> 0 (dropped by age/count), k (k-th oldest the size cap may drop), inf (kept)
    candidates: int  # how many roots the size cap may drop (levels 1..candidates)
    ref_ids: set[str]  # every snapshot a ref line names
    interrupted: set[str]  # snapshots of interrupted commits gc finishes or drops before it plans


def _survival_levels(store: Repository, policy: RetentionPolicy, now: float, plan: GcPlan) -> _Survival:
    """Read refs and pins strictly, judge interrupted commits, and give every root its survival level."""
    refs, pinned, ref_ids = _check_refs(store, policy, now)
    plan._refs = refs
    # Interrupted commits (FORMAT.md §5): gc finishes them before planning; a dry run plans as if it had — a whole
    # snapshot is listed (kept like the newest of its workspace), one that cannot be is dropped — and says so.
    judged = [commits.judge(store, m, ref_ids.__contains__) for m in commits.markers(store.path)]
    interrupted = {j.marker.snapshot for j in judged if j.action != commits.CLEAR}
    pinned |= {j.marker.snapshot for j in judged if j.action == commits.FINISH}
    plan.finished_commits = [j.summary(would=True) for j in judged]
    level, candidates = _levels(refs, ref_ids, pinned, policy, now)
    return _Survival(level, candidates, ref_ids, interrupted)


def _check_refs(store: Repository, policy: RetentionPolicy, now: float) -> tuple[list[RefFile], set[str], set[str]]:
    """Every ref, pin and restore journal, strictly: (ref files, pinned ids that exist, ids of every ref line)."""
    refs = workspace_ref_files(store)
    pins = read_pins(store, policy.thread_idle_days, now)
    journaled, journal_problems = journal_pins(store)
    problems = [p for r in refs for p in r.problems] + pins.problems + journal_problems
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
        raise stop(problems[0] + more)
    snaps = store.path / "snapshots"
    pinned = {s for s in pins.ids | journaled if (snaps / s[:2] / s).is_file()}
    return refs, pinned, {i.id for r in refs for i in r.infos}


def _levels(refs: list[RefFile], ref_ids: set[str], pinned: set[str], policy: RetentionPolicy,
            now: float) -> tuple[dict[str, float], int]:
    """Survival level of each root, and how many the size cap may drop.

    Dropped by age/count -> 0; the k-th oldest the size cap may drop -> k; never dropped -> inf. Dropping the
    first k size-cap candidates keeps the roots with level > k.
    """
    level: dict[str, float] = {s: 0.0 for s in ref_ids}
    droppable: list[SnapshotInfo] = []
    for r in refs:
        kept = _retain(r.infos, policy, now, pinned)
        droppable.extend(i for i in kept[: max(0, len(kept) - policy.keep_latest)] if i.id not in pinned)
        for i in kept:
            level[i.id] = _KEPT
    droppable.sort(key=lambda i: i.created)
    for k, info in enumerate(droppable, 1):
        level[info.id] = float(k)
    for s in pinned:
        level[s] = _KEPT
    return level, len(droppable)


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


# ----------------------------------------------------------------------------- 2. mark


class _Marks(NamedTuple):
    """What the roots reach, each snapshot file and blob at the highest level of a root that needs it."""

    snaps: dict[str, float]
    blobs: dict[bytes, float]
    missing: set[bytes]  # needed blobs no pack holds
    home: dict[bytes, str]  # the pack each blob is kept from
    blob_size: dict[bytes, int]  # its record's bytes there


def _mark(store: Repository, survival: _Survival, packs: Packs, pending: set[str]) -> _Marks:
    """Walk every root's chain and file map; refuse when a chain is damaged or history has lost its ref."""
    home, blob_size = _homes(packs, pending)
    level = survival.level
    snaps: dict[str, float] = {}
    blobs: dict[bytes, float] = {}
    missing: set[bytes] = set()
    try:
        for needs in each_needs(store, level):
            lv = level[needs.root]
            for s in needs.chain:
                snaps[s] = max(snaps.get(s, -1.0), lv)
            for b in needs.blobs:
                blobs[b] = max(blobs.get(b, -1.0), lv)
                if b not in home:
                    missing.add(b)
    except StoreError as exc:
        raise stop(str(exc)) from exc
    _refuse_lost_history(store, set(snaps) | survival.ref_ids | survival.interrupted)
    return _Marks(snaps, blobs, missing, home, blob_size)


def _homes(packs: Packs, pending: set[str]) -> tuple[dict[bytes, str], dict[bytes, int]]:
    """The pack each blob is kept from (one an interrupted gc is not deleting, if any) and its record's size."""
    home: dict[bytes, str] = {}
    blob_size: dict[bytes, int] = {}
    for pid, entries in packs.entries.items():
        for b, loc in entries:
            if b not in home or (home[b] in pending and pid not in pending):
                home[b] = pid
                blob_size[b] = loc.stored_len + RECORD.size
    return home, blob_size


def _refuse_lost_history(store: Repository, named: set[str]) -> None:
    """Workspace history no ref names (a deleted ref file) is no garbage: put back by `verify --repair` first."""
    lost = lost_history(store, (n for n, _f in snapshot_files(store) if is_snapshot_id(n)), named)
    if lost:
        root, ids = min(lost.items())
        more = f" (and {len(lost) - 1} more workspace(s))" if len(lost) > 1 else ""
        raise stop(lost_line(store, root, ids) + more)


# ----------------------------------------------------------------------------- 3. size cut


class _Live(NamedTuple):
    """What survives the cut: the snapshot files and blobs gc keeps."""

    snaps: set[str]
    blobs: set[bytes]


def _size_cut(store: Repository, policy: RetentionPolicy, survival: _Survival, marks: _Marks,
              plan: GcPlan) -> _Live:
    """Drop the fewest oldest size-cap candidates that bring what stays under the cap; the rest lives."""
    live_bytes = _live_bytes(store, marks)
    cut = 0
    if policy.max_store_bytes:
        # Drop the fewest oldest candidates that bring what stays under the cap; if none does,
        # drop only as far as dropping still frees space (never history for nothing).
        sizes = [live_bytes(float(k)) for k in range(survival.candidates + 1)]
        under = [k for k, n in enumerate(sizes) if n <= policy.max_store_bytes]
        cut = under[0] if under else sizes.index(min(sizes))
        plan.over_cap = max(0, sizes[cut] - policy.max_store_bytes)
    plan.freed_by_retention = live_bytes(-1.0) - live_bytes(float(cut))
    live = _Live({s for s, lv in marks.snaps.items() if lv > cut}, {b for b, lv in marks.blobs.items() if lv > cut})
    gone_roots = {s for s, lv in survival.level.items() if lv <= cut}
    for r in plan._refs:
        plan.dropped.extend(i for i in r.infos if i.id in gone_roots)
    plan.live_snapshots, plan.live_blobs = len(live.snaps), len(live.blobs - marks.missing)
    plan.missing_blobs = len(marks.missing)
    return live


def _live_bytes(store: Repository, marks: _Marks) -> Callable[[float], int]:
    """Bytes of the blobs and snapshot files that stay when the first k size-cap candidates go."""
    snap_size = {s: size_of(store.path / "snapshots" / s[:2] / s) for s in marks.snaps}

    def live_bytes(k: float) -> int:
        return (sum(marks.blob_size.get(b, 0) for b, lv in marks.blobs.items() if lv > k)
                + sum(snap_size[s] for s, lv in marks.snaps.items() if lv > k))

    return live_bytes


# ----------------------------------------------------------------------------- 4. sweep


class _PackUse(NamedTuple):
    """How much of one pack is alive: the records it holds, and the live blobs it is home to."""

    total: int  # stored bytes of every record
    alive: int  # stored bytes of the live blobs kept from it
    kept: int  # how many they are (listed, in pack order, only for a pack repacked: `_kept_in`)


def _sweep(store: Repository, policy: RetentionPolicy, now: float, packs: Packs, marks: _Marks, live: _Live,
           plan: GcPlan) -> None:
    """What goes: dead snapshot files and packs past the grace period, mostly dead packs repacked, temp files."""
    snap_bytes = _sweep_snapshots(store, policy, now, live, plan)
    packs_dir = store.path / "packs"
    plan.bytes_before = sum(packs.sizes.values()) + snap_bytes + sum(
        size_of(packs_dir / f"{p}.pack") for p in packs.finish)
    use = _pack_use(packs, marks, live)
    old = sorted(pid for pid in packs.entries if age_of(packs_dir / f"{pid}.pack", now) > policy.grace_seconds)
    for pid in old:
        if use[pid].alive == 0:
            plan.delete_packs.append(pid)
        elif use[pid].alive < use[pid].total * REPACK_BELOW:
            plan.repack.append(pid)
    plan.bytes_after = _bytes_after(store, packs, use, plan)
    if policy.max_store_bytes and plan.bytes_after > policy.max_store_bytes:
        # Over the cap: also repack packs that are mostly alive, so every dead byte is freed.
        extra = [p for p in old if p not in plan.delete_packs and p not in plan.repack
                 and use[p].alive < use[p].total]
        if extra:
            plan.repack = sorted(plan.repack + extra)
            plan.bytes_after = _bytes_after(store, packs, use, plan)
    plan._keep = {p: _kept_in(packs, p, marks, live) for p in plan.repack}
    for f in packs_dir.iterdir():
        if f.name.startswith(TMP_PREFIX) and age_of(f, now) > policy.grace_seconds:
            plan.delete_temp.append(f)


def _sweep_snapshots(store: Repository, policy: RetentionPolicy, now: float, live: _Live, plan: GcPlan) -> int:
    """Plan the snapshot files (and temporary ones) past the grace period nothing live needs; their bytes now."""
    total = 0
    for name, f in snapshot_files(store):
        total += size_of(f)
        if name.startswith(TMP_PREFIX):
            if age_of(f, now) > policy.grace_seconds:
                plan.delete_temp.append(f)
        elif is_snapshot_id(name) and name not in live.snaps and age_of(f, now) > policy.grace_seconds:
            plan.delete_snapshots.append(name)
    return total


def _pack_use(packs: Packs, marks: _Marks, live: _Live) -> dict[str, _PackUse]:
    """For every pack, its record bytes and the live blobs gc keeps from it."""
    use: dict[str, _PackUse] = {}
    for pid, entries in packs.entries.items():
        total = alive = kept = 0
        for b, loc in entries:
            total += loc.stored_len
            if b in live.blobs and marks.home.get(b) == pid:
                alive += loc.stored_len
                kept += 1
        use[pid] = _PackUse(total, alive, kept)
    return use


def _kept_in(packs: Packs, pid: str, marks: _Marks, live: _Live) -> list[bytes]:
    """The live blobs gc keeps from a pack it repacks, in pack order (a list for every pack was a blob id per live
    blob held through the sweep: ~8 MB at 100,000 blobs)."""
    return [b for b, _loc in packs.entries[pid] if b in live.blobs and marks.home.get(b) == pid]


def _bytes_after(store: Repository, packs: Packs, use: dict[str, _PackUse], plan: GcPlan) -> int:
    """The store's size once the plan's deletions and repacks are done."""
    packs_dir = store.path / "packs"
    dead_snap = sum(size_of(store.path / "snapshots" / s[:2] / s) for s in plan.delete_snapshots)
    freed = sum(packs.sizes[p] for p in plan.delete_packs)
    freed += sum(packs.sizes[p] - use[p].alive - RECORD.size * use[p].kept for p in plan.repack)
    return plan.bytes_before - dead_snap - freed - sum(size_of(packs_dir / f"{p}.pack") for p in packs.finish)
