"""Garbage collection: apply retention to workspace refs, mark from every ref, sweep after a grace period.

Planned first, then executed (restic's prune): refs are rewritten before any object goes, so a
crash can leave unreferenced objects (collected next time) but never a ref to a missing one.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import StoreBusy, StoreError
from .fsutil import TMP_PREFIX, atomic_write, fsync_dir, translate_os_errors
from .ids import is_pack_id, is_snapshot_id
from .packs import PackWriter
from .settings import RetentionPolicy
from .store import SnapshotInfo, read_ref_file

if TYPE_CHECKING:
    from .store import Store

_ID_RE = re.compile(r"\b[0-9a-f]{64}\b")
AUTO_GC_INTERVAL = 24 * 3600.0
REPACK_BELOW = 0.5


@dataclass
class GcPlan:
    """Everything a gc run would do; `dry_run` prints this and stops."""

    dropped: list[SnapshotInfo] = field(default_factory=list)
    delete_snapshots: list[str] = field(default_factory=list)
    delete_packs: list[str] = field(default_factory=list)
    repack: list[str] = field(default_factory=list)
    delete_temp: list[Path] = field(default_factory=list)
    live_snapshots: int = 0
    live_blobs: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    dry_run: bool = False

    def as_json(self) -> dict[str, Any]:
        """Stable JSON for the CLI."""
        return {
            "dry_run": self.dry_run,
            "dropped_by_retention": [i.id for i in self.dropped],
            "delete_snapshots": len(self.delete_snapshots),
            "delete_packs": len(self.delete_packs),
            "repack": len(self.repack),
            "delete_temp": len(self.delete_temp),
            "live_snapshots": self.live_snapshots,
            "live_blobs": self.live_blobs,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
        }


def pinned_ids(store: Store) -> set[str]:
    """Snapshot ids named by any ref outside refs/workspaces (e.g. thread sidecars): never dropped."""
    out: set[str] = set()
    refs = store.path / "refs"
    for path in refs.rglob("*"):
        if not path.is_file() or path.parent == refs / "workspaces" or path.name.startswith(TMP_PREFIX):
            continue
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise StoreError(f"ref file {path} cannot be read; gc stopped to protect its snapshots") from exc
        out.update(_ID_RE.findall(text))
    return out


def _workspace_refs(store: Store) -> dict[Path, list[SnapshotInfo]]:
    return {p: read_ref_file(p) for p in sorted((store.path / "refs" / "workspaces").glob("*.jsonl"))}


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


def _mark(store: Store, roots: set[str]) -> tuple[set[str], set[bytes]]:
    """Live snapshots (roots and their parent chains) and the blobs their deltas name."""
    live: set[str] = set()
    blobs: set[bytes] = set()
    for snap in roots:
        current: str | None = snap
        while current is not None and current not in live:
            try:
                rec = store.record(current)
            except StoreError:
                break
            live.add(current)
            for entry in rec.changes.values():
                if entry is not None and entry[0] == "f":
                    blobs.add(bytes.fromhex(entry[3]))
            current = rec.parent
    return live, blobs


def _all_snapshots(store: Store) -> Iterator[tuple[str, Path]]:
    for bucket in (store.path / "snapshots").iterdir():
        if bucket.is_dir():
            for f in bucket.iterdir():
                yield f.name, f


def _age(path: Path, now: float) -> float:
    try:
        return now - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def plan_gc(store: Store, policy: RetentionPolicy, now: float | None = None) -> GcPlan:
    """Compute retention, mark and sweep decisions without changing anything."""
    now = time.time() if now is None else now
    store.blobs.refresh()
    plan = GcPlan()
    pinned = pinned_ids(store)
    refs = _workspace_refs(store)
    kept = {p: _retain(infos, policy, now, pinned) for p, infos in refs.items()}

    def roots() -> set[str]:
        return pinned | {i.id for infos in kept.values() for i in infos}

    live, blobs = _mark(store, roots())
    sizes = {pid: size for pid, size in store.blobs.loaded.items()}
    plan.bytes_before = sum(sizes.values()) + sum(f.stat().st_size for _n, f in _all_snapshots(store))

    def live_bytes(blobs: set[bytes]) -> int:
        return sum(store.blobs.locations[b].stored_len for b in blobs if b in store.blobs.locations)

    if policy.max_store_bytes and live_bytes(blobs) > policy.max_store_bytes:
        # Drop the fewest oldest snapshots that bring the store under the cap (binary search on
        # how many); the newest `keep_latest` per workspace and pinned ones are never candidates.
        droppable = sorted(
            (i for infos in kept.values() for i in infos[: max(0, len(infos) - policy.keep_latest)]
             if i.id not in pinned),
            key=lambda i: i.created,
        )
        base = kept

        def drop(k: int) -> dict[Path, list[SnapshotInfo]]:
            gone = {i.id for i in droppable[:k]}
            return {p: [i for i in infos if i.id not in gone] for p, infos in base.items()}

        lo, hi = 1, len(droppable)
        while lo < hi:
            mid = (lo + hi) // 2
            kept = drop(mid)
            if live_bytes(_mark(store, roots())[1]) <= policy.max_store_bytes:
                hi = mid
            else:
                lo = mid + 1
        kept = drop(lo)
        live, blobs = _mark(store, roots())
    for p, infos in refs.items():
        kept_ids = {i.id for i in kept[p]}
        plan.dropped.extend(i for i in infos if i.id not in kept_ids)
    plan.live_snapshots, plan.live_blobs = len(live), len(blobs)
    for name, f in _all_snapshots(store):
        if name.startswith(TMP_PREFIX):
            if _age(f, now) > policy.grace_seconds:
                plan.delete_temp.append(f)
        elif is_snapshot_id(name) and name not in live and _age(f, now) > policy.grace_seconds:
            plan.delete_snapshots.append(name)
    per_pack: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for b, loc in store.blobs.locations.items():
        per_pack[loc.pack][0] += loc.stored_len
        if b in blobs:
            per_pack[loc.pack][1] += loc.stored_len
    packs_dir = store.path / "packs"
    for pack_id in sorted(store.blobs.loaded):
        total, alive = per_pack.get(pack_id, [0, 0])
        if _age(packs_dir / f"{pack_id}.pack", now) <= policy.grace_seconds:
            continue
        if alive == 0:
            plan.delete_packs.append(pack_id)
        elif total and alive / total < REPACK_BELOW:
            plan.repack.append(pack_id)
    for f in packs_dir.iterdir():
        stem = f.name.split(".")[0]
        orphan = f.suffix == ".pack" and is_pack_id(stem) and stem not in store.blobs.loaded
        if (f.name.startswith(TMP_PREFIX) or orphan) and _age(f, now) > policy.grace_seconds:
            plan.delete_temp.append(f)
    dead_snap = sum((store._snapshot_path(s).stat().st_size for s in plan.delete_snapshots), 0)
    dead_pack = sum(sizes.get(p, 0) for p in plan.delete_packs)
    repacked = sum(sizes.get(p, 0) - per_pack[p][1] for p in plan.repack)
    plan.bytes_after = plan.bytes_before - dead_snap - dead_pack - repacked
    return plan


def gc(store: Store, policy: RetentionPolicy, *, dry_run: bool = False, wait: bool = True) -> GcPlan:
    """Run (or with `dry_run` only plan) a collection under the store's exclusive lock."""
    with store.exclusive_lock(wait=wait), translate_os_errors("gc"):
        plan = plan_gc(store, policy)
        plan.dry_run = dry_run
        if dry_run:
            return plan
        _execute(store, plan)
        atomic_write(store.path / "gc.last", str(time.time()).encode(), sync=False)
    return plan


def _execute(store: Store, plan: GcPlan) -> None:
    # Every other store reloads what it knows once the generation moves; it moves again at the end,
    # so a store that loaded its blob index while this gc was deleting cannot keep it either.
    store.blobs.note_gc()
    try:
        _sweep(store, plan)
    finally:
        store.blobs.note_gc()


def _sweep(store: Store, plan: GcPlan) -> None:
    dropped = {i.id for i in plan.dropped}
    if dropped:
        for path, infos in _workspace_refs(store).items():
            keep = [i for i in infos if i.id not in dropped]
            if len(keep) == len(infos):
                continue
            lines = [json.dumps({"id": i.id, "root": i.root, "created": i.created, "kind": i.kind,
                                 "label": i.label, "file_count": i.file_count}, separators=(",", ":"))
                     for i in keep]
            atomic_write(path, "".join(line + "\n" for line in lines).encode())
    live, blobs = _mark(store, pinned_ids(store) | {i.id for v in _workspace_refs(store).values() for i in v})
    if plan.repack:
        writer = PackWriter(store.blobs)
        try:
            for b, loc in list(store.blobs.locations.items()):
                if loc.pack in plan.repack and b in blobs:
                    writer.add(store.blobs.read(b), force=True)
            writer.commit()
        except BaseException:
            writer.abort()
            raise
    packs_dir = store.path / "packs"
    gone = set(plan.delete_packs) | set(plan.repack)
    for pack_id in sorted(gone):
        # The index goes first: a pack without an index is invisible and collected later.
        with contextlib.suppress(FileNotFoundError):
            (packs_dir / f"{pack_id}.idx").unlink()
        with contextlib.suppress(FileNotFoundError):
            (packs_dir / f"{pack_id}.pack").unlink()
    store.blobs.forget(gone)
    fsync_dir(packs_dir)
    for snap in plan.delete_snapshots:
        if snap not in live:
            with contextlib.suppress(FileNotFoundError):
                store._snapshot_path(snap).unlink()
            store._records.pop(snap, None)
            store._maps.pop(snap, None)
    for f in plan.delete_temp:
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


def maybe_auto_gc(store: Store, policy: RetentionPolicy, interval: float = AUTO_GC_INTERVAL) -> GcPlan | None:
    """Collect at most once per `interval`, never waiting for a busy store."""
    marker = store.path / "gc.last"
    try:
        last = float(marker.read_text())
    except (OSError, ValueError):
        last = 0.0
    if time.time() - last < interval:
        return None
    try:
        return gc(store, policy, wait=False)
    except StoreBusy:
        return None


def store_size(path: Path) -> int:
    """Apparent size of every file in the store."""
    total = 0
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(dirpath, n)).st_size
    return total
