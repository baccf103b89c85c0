"""Garbage collection: apply retention to workspace refs, mark from every ref and pin, sweep after a grace period.

Planned first, then executed (restic's prune): gc_plan.py builds the plan without changing anything and
refuses (one line, nothing deleted) while any ref, pin, pack index or kept chain is damaged; this module
carries it out. Refs are rewritten before any object goes, so a crash can leave unreferenced objects
(collected next time) but never a ref to a missing one.
"""

from __future__ import annotations

import contextlib
import time
from typing import TYPE_CHECKING

from ..errors import CorruptStore, StoreBusy
from ..fsutil import TMP_PREFIX, atomic_write, fsync_dir, translate_os_errors
from ..repository.packs import PackWriter
from ..repository.repo import AUTO_GC_INTERVAL, GC_MARKER
from ..settings import RetentionPolicy
from .gc_plan import GcPlan, load_packs, plan_gc, size_of, snapshot_files
from .pending import PENDING, pending_packs, write_pending
from .refcheck import prune_dropped, read_dropped, ref_line, write_dropped

if TYPE_CHECKING:
    from ..repository.repo import Repository

# ----------------------------------------------------------------------------- executing


def gc(store: Repository, policy: RetentionPolicy, *, dry_run: bool = False, wait: bool = True) -> GcPlan:
    """Run (or with `dry_run` only plan) a collection under the store's exclusive lock, reading from disk."""
    with store.exclusive_lock(wait=wait), translate_os_errors("gc"):
        packs = load_packs(store, pending_packs(store), write=not dry_run)
        finished = [] if dry_run else store.finish_all_commits()  # before the refs are read: they list them
        plan = plan_gc(store, policy, _packs=packs)
        if not dry_run:
            plan.finished_commits = [j.summary() for j in finished]
        plan.dry_run = dry_run
        if dry_run:
            return plan
        if not plan.changes_nothing():
            _execute(store, plan)
        plan.bytes_after = _measure(store)
        atomic_write(store.path / GC_MARKER, str(time.time()).encode(), sync=False)
    return plan


def _measure(store: Repository) -> int:
    """Bytes of packs, pack indexes and snapshot files now on disk."""
    total = sum(size_of(f) for f in (store.path / "packs").iterdir()
                if not f.name.startswith(TMP_PREFIX) and f.suffix in (".pack", ".idx"))
    return total + sum(size_of(f) for _n, f in snapshot_files(store))


def _execute(store: Repository, plan: GcPlan) -> None:
    """Carry the plan out between two moves of the store's generation."""
    # Every other store reloads what it knows once the generation moves; it moves again at the end,
    # so a store that loaded its blob index while this gc was deleting cannot keep it either.
    store.blobs.note_gc()
    try:
        _apply(store, plan)
    finally:
        store.blobs.note_gc()


def _apply(store: Repository, plan: GcPlan) -> None:
    """Refs first, then repacked copies, the marker, and only then deletions (FORMAT.md §8)."""
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
                for b in plan._keep[pid]:
                    writer.add(store.blobs.read(b), force=True)
            writer.commit()
        except BaseException:
            writer.abort()
            raise
    write_pending(store, sorted(gone | set(plan.finish_packs)), plan.delete_snapshots)
    packs_dir = store.path / "packs"
    for pack_id in sorted(gone | set(plan.finish_packs)):
        # The index goes first: a pack without an index is rebuilt or, named by the marker, finished.
        with contextlib.suppress(FileNotFoundError):
            (packs_dir / f"{pack_id}.idx").unlink()
        with contextlib.suppress(FileNotFoundError):
            (packs_dir / f"{pack_id}.pack").unlink()
    fsync_dir(packs_dir)
    store.blobs.forget(store.blobs.known | gone)  # every pack: read again lazily, as found now
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

