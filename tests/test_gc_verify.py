"""Garbage collection never loses reachable data; verify names every kind of damage."""

from __future__ import annotations

import json
import os
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import blake3
import pytest
from fs_helpers import store_files

from snapshot_store import RetentionPolicy, ScopeSettings, Store, StoreBusy
from snapshot_store.maint.gc import gc, maybe_auto_gc, plan_gc
from snapshot_store.maint.verify import verify

SCOPE = ScopeSettings(residue_max_files=1000)
DAY = 86400.0


def policy(**kw: float) -> RetentionPolicy:
    """Only the rules a test names are active (every other limit disabled)."""
    base: dict[str, float] = {"max_age_days": 0, "max_snapshots_per_workspace": 0, "max_store_bytes": 0,
                              "grace_seconds": 0, "keep_latest": 1}
    base.update(kw)
    return RetentionPolicy(**base)  # type: ignore[arg-type]


def tree(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[Path(dirpath, d).relative_to(root).as_posix() + "/"] = "dir"
        for f in files:
            p = Path(dirpath, f)
            out[p.relative_to(root).as_posix()] = (p.read_bytes(), stat.S_IMODE(p.lstat().st_mode))
    return out


def packs(store_dir: Path) -> set[str]:
    return {p.stem for p in (store_dir / "packs").glob("*.pack") if not p.name.startswith(".")}


def rewrite_all(ws: Path, names: tuple[str, ...] = ("a.bin", "b.bin"), size: int = 2000) -> None:
    """New incompressible content for every file: the next capture stores a whole new snapshot."""
    for n in names:
        (ws / n).write_bytes(os.urandom(size))


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "file_snapshots"


@pytest.fixture
def store(store_dir: Path) -> Iterator[Store]:
    s = Store.open(store_dir)
    yield s
    s.close()


def capture_at(store: Store, ws: Path, when: float, monkeypatch: pytest.MonkeyPatch) -> str:
    """Capture with the wall clock reading `when` (so the snapshot's creation time is `when`)."""
    with monkeypatch.context() as m:
        m.setattr(time, "time", lambda: when)
        return store.at(ws).capture(scope=SCOPE).id


def aged_snapshots(store: Store, ws: Path, now: float, ages: tuple[float, ...],
                   monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """One all-new snapshot per age (days before `now`), in the order given; their ids."""
    ids = []
    for age in ages:
        rewrite_all(ws)
        ids.append(capture_at(store, ws, now - age * DAY, monkeypatch))
    return ids


def full_snapshots(store: Store, ws: Path, n: int) -> list[str]:
    """n captures, each with all-new content, so no snapshot depends on another."""
    ids = []
    for _ in range(n):
        rewrite_all(ws)
        ids.append(store.at(ws).capture(scope=SCOPE).id)
    assert all(store.record(i).parent is None for i in ids)
    return ids


def listed(store: Store, ws: Path) -> list[str]:
    return [i.id for i in store.list_snapshots(ws)]


# ----------------------------------------------------------------------------- gc safety


def test_aggressive_gc_keeps_every_listed_snapshot_fully_restorable(ws: Path, store_dir: Path) -> None:
    trees: dict[str, dict[str, object]] = {}
    for n in range(6):
        (ws / f"f{n}.txt").write_bytes(os.urandom(300))
    (ws / "dir").mkdir()
    with Store.open(store_dir) as store:
        for i in range(14):
            # Small changes, so most snapshots are deltas on a parent that retention drops; every
            # file changes at steps 4 and 9, so the snapshots before step 9 become unreachable.
            for n in range(6) if i in (4, 9) else [i % 6]:
                (ws / f"f{n}.txt").write_bytes(os.urandom(300 + i))
            if i % 4 == 1:
                (ws / "dir" / f"new{i}.txt").write_text(f"added in step {i}\n")
            if i % 4 == 3:
                os.unlink(ws / "dir" / f"new{i - 2}.txt")
            if i == 7:
                os.chmod(ws / "f0.txt", 0o755)
            snap = store.at(ws).capture(scope=SCOPE).id
            trees[snap] = tree(ws)
        assert store.record(list(trees)[-1]).parent is not None
        plan = gc(store, policy(max_snapshots_per_workspace=2))
        assert len(plan.dropped) == 12
        assert len(plan.delete_snapshots) == 9  # the chains before step 9 are really collected
        survivors = listed(store, ws)
        assert survivors == list(trees)[-2:]
    with Store.open(store_dir) as store:
        assert verify(store, full=True).ok
        for snap in survivors:
            store.at(ws).restore(snap, scope=SCOPE)
            assert tree(ws) == trees[snap]
        report = verify(store, full=True)
        assert report.ok, report.problems


def test_unreachable_objects_younger_than_the_grace_period_are_kept(
        ws: Path, store_dir: Path, store: Store) -> None:
    rewrite_all(ws, ("a.bin", "b.bin", "c.bin"))
    old = store.at(ws).capture(scope=SCOPE).id
    old_packs = packs(store_dir)
    rewrite_all(ws, ("a.bin", "b.bin", "c.bin"))
    new = store.at(ws).capture(scope=SCOPE).id
    assert store.record(new).parent is None
    old_path = store_dir / "snapshots" / old[:2] / old

    plan = gc(store, policy(max_snapshots_per_workspace=1, grace_seconds=3600))
    assert [i.id for i in plan.dropped] == [old]
    assert listed(store, ws) == [new]
    assert old_path.exists()  # unreachable but young: kept
    assert old_packs <= packs(store_dir)

    # Once the objects are older than the grace period, they go.
    past = time.time() - 7200
    os.utime(old_path, (past, past))
    for p in old_packs:
        os.utime(store_dir / "packs" / f"{p}.pack", (past, past))
    plan = gc(store, policy(max_snapshots_per_workspace=1, grace_seconds=3600))
    assert plan.delete_snapshots == [old]
    assert not old_path.exists()
    assert not (old_packs & packs(store_dir))
    with Store.open(store_dir) as fresh:
        assert verify(fresh, full=True).ok
        assert fresh.files(new)


def test_retention_by_age(ws: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    ids = aged_snapshots(store, ws, now, (40, 20, 10, 1), monkeypatch)
    plan = plan_gc(store, policy(max_age_days=15), now=now)
    assert sorted(i.id for i in plan.dropped) == sorted(ids[:2])
    # Thirty days later every snapshot is too old, but the newest always stays.
    plan = plan_gc(store, policy(max_age_days=15), now=now + 30 * DAY)
    assert sorted(i.id for i in plan.dropped) == sorted(ids[:3])


def test_keep_latest_survives_every_other_rule(ws: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    now = time.time()
    ids = aged_snapshots(store, ws, now, (40, 35, 30, 25), monkeypatch)
    gc(store, policy(max_age_days=10, max_snapshots_per_workspace=1, max_store_bytes=1, keep_latest=2))
    assert listed(store, ws) == ids[2:]
    for snap in ids[2:]:
        assert store.files(snap)


def test_retention_by_count_keeps_the_newest(ws: Path, store_dir: Path, store: Store) -> None:
    ids = full_snapshots(store, ws, 5)
    plan = gc(store, policy(max_snapshots_per_workspace=3))
    assert sorted(i.id for i in plan.dropped) == sorted(ids[:2])
    assert listed(store, ws) == ids[2:]
    for snap in ids[:2]:
        assert not (store_dir / "snapshots" / snap[:2] / snap).exists()


def test_size_cap_keeps_the_newest_even_if_it_alone_is_too_big(ws: Path, store: Store) -> None:
    ids = full_snapshots(store, ws, 4)
    newest_tree = tree(ws)
    gc(store, policy(max_store_bytes=1))
    assert listed(store, ws) == ids[-1:]
    rewrite_all(ws)
    store.at(ws).restore(ids[-1], scope=SCOPE)
    assert tree(ws) == newest_tree
    with Store.open(store.path) as fresh:
        assert verify(fresh, full=True).ok


def test_size_cap_drops_only_as_many_oldest_snapshots_as_needed(ws: Path, store: Store) -> None:
    """Each snapshot holds 4000 bytes of its own incompressible blobs; the cap fits three and a half."""
    ids = full_snapshots(store, ws, 5)
    plan = gc(store, policy(max_store_bytes=14_000))
    assert sorted(i.id for i in plan.dropped) == sorted(ids[:2])
    assert listed(store, ws) == ids[2:]


def pin(store_dir: Path, snap: str) -> None:
    """How the app's thread sidecar pins snapshots: a ref file outside refs/workspaces naming them."""
    d = store_dir / "refs" / "threads"
    d.mkdir(parents=True, exist_ok=True)
    (d / "x.json").write_text(json.dumps({"thread": "x", "turns": [{"turn": "t1", "snapshot": snap}]}))


def test_snapshot_pinned_by_a_thread_ref_survives_retention(ws: Path, store_dir: Path, store: Store) -> None:
    rewrite_all(ws)
    first = store.at(ws).capture(scope=SCOPE).id
    first_tree = tree(ws)
    pin(store_dir, first)
    full_snapshots(store, ws, 3)
    gc(store, policy(max_snapshots_per_workspace=1, max_age_days=1e-9, max_store_bytes=1))
    assert (store_dir / "snapshots" / first[:2] / first).exists()
    with Store.open(store_dir) as fresh:
        assert verify(fresh, full=True).ok
        fresh.at(ws).restore(first, scope=SCOPE)
    assert tree(ws) == first_tree


def test_snapshot_pinned_by_a_thread_ref_is_not_dropped_by_retention(
        ws: Path, store_dir: Path, store: Store) -> None:
    """README: "Snapshots pinned by other refs (e.g. conversation threads) are never dropped by retention"."""
    rewrite_all(ws)
    first = store.at(ws).capture(scope=SCOPE).id
    pin(store_dir, first)
    ids = [first, *full_snapshots(store, ws, 3)]
    plan = gc(store, policy(max_snapshots_per_workspace=1))
    assert first not in [i.id for i in plan.dropped]
    assert listed(store, ws) == [first, ids[-1]]


def test_mostly_dead_pack_is_repacked_and_live_blobs_stay_readable(
        ws: Path, store_dir: Path, store: Store) -> None:
    keep = os.urandom(200)
    (ws / "keep.bin").write_bytes(keep)
    big = ("big1.bin", "big2.bin", "big3.bin")
    rewrite_all(ws, big, size=10_000)
    store.at(ws).capture(scope=SCOPE)
    [first_pack] = packs(store_dir)
    rewrite_all(ws, big, size=10_000)
    latest = store.at(ws).capture(scope=SCOPE).id
    assert store.record(latest).parent is None
    latest_tree = tree(ws)
    size_before = sum(os.path.getsize(store_dir / "packs" / f"{p}.pack") for p in packs(store_dir))

    plan = gc(store, policy(max_snapshots_per_workspace=1))
    assert plan.repack == [first_pack]
    assert first_pack not in packs(store_dir)
    size_after = sum(os.path.getsize(store_dir / "packs" / f"{p}.pack") for p in packs(store_dir))
    assert size_after < size_before - 25_000
    with Store.open(store_dir) as fresh:
        assert b"".join(fresh.blob_chunks(blake3.blake3(keep).hexdigest())) == keep
        assert verify(fresh, full=True).ok
        for n in ("keep.bin", *big):
            (ws / n).unlink()
        fresh.at(ws).restore(latest, scope=SCOPE)
    assert tree(ws) == latest_tree


def test_dry_run_changes_nothing_in_the_store(ws: Path, store_dir: Path, store: Store) -> None:
    full_snapshots(store, ws, 4)
    (store_dir / "packs" / ".tmp-0123456789abcdef.pack").write_bytes(b"leftover")
    before = store_files(store_dir)
    plan = gc(store, policy(max_snapshots_per_workspace=1), dry_run=True)
    assert plan.dry_run
    assert plan.dropped and plan.delete_snapshots and (plan.delete_packs or plan.repack) and plan.delete_temp
    assert store_files(store_dir) == before
    # The same plan for real does change the store: the dry run above was not vacuous.
    gc(store, policy(max_snapshots_per_workspace=1))
    assert store_files(store_dir) != before


def test_gc_cannot_run_while_a_capture_holds_the_shared_lock(ws: Path, store: Store) -> None:
    full_snapshots(store, ws, 2)
    holding, release = threading.Event(), threading.Event()

    def capture_in_progress() -> None:
        with store.shared_lock():
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=capture_in_progress)
    holder.start()
    assert holding.wait(10)
    try:
        with pytest.raises(StoreBusy):
            gc(store, policy(max_snapshots_per_workspace=1), wait=False)
        assert len(listed(store, ws)) == 2
        # A waiting gc blocks until the capture is done.
        finished = threading.Event()

        def waiting_gc() -> None:
            gc(store, policy(max_snapshots_per_workspace=1))
            finished.set()

        waiter = threading.Thread(target=waiting_gc)
        waiter.start()
        assert not finished.wait(0.3)
        assert len(listed(store, ws)) == 2
    finally:
        release.set()
        holder.join(10)
    waiter.join(10)
    assert finished.is_set()
    assert len(listed(store, ws)) == 1


# The gc-vs-restore race is proven with real processes in test_gc_safety.py
# (test_gc_in_another_process_waits_for_a_restore_awaiting_confirmation).


def test_auto_gc_runs_at_most_once_per_interval(ws: Path, store_dir: Path, store: Store) -> None:
    full_snapshots(store, ws, 3)
    first = maybe_auto_gc(store, policy(max_snapshots_per_workspace=2), interval=3600)
    assert first is not None and len(first.dropped) == 1
    assert len(listed(store, ws)) == 2
    assert maybe_auto_gc(store, policy(max_snapshots_per_workspace=1), interval=3600) is None
    assert len(listed(store, ws)) == 2
    # Once the interval has passed, it runs again.
    marker = store_dir / "gc.last"
    assert marker.exists()
    marker.write_text(str(time.time() - 7200))
    again = maybe_auto_gc(store, policy(max_snapshots_per_workspace=1), interval=3600)
    assert again is not None
    assert len(listed(store, ws)) == 1


def test_auto_gc_skips_a_busy_store_without_error(ws: Path, store: Store) -> None:
    full_snapshots(store, ws, 2)
    with Store.open(store.path) as other, other.shared_lock():
        assert maybe_auto_gc(store, policy(max_snapshots_per_workspace=1), interval=0) is None
    assert len(listed(store, ws)) == 2


# ----------------------------------------------------------------------------- verify


def damaged_store(ws: Path, store_dir: Path) -> list[str]:
    """A store with three snapshots (the later two deltas) and its files closed."""
    for n in range(4):
        (ws / f"f{n}.txt").write_text(f"file {n}\n")
    ids = []
    with Store.open(store_dir) as store:
        for i in range(3):
            (ws / "f0.txt").write_text(f"version {i}\n")
            ids.append(store.at(ws).capture(scope=SCOPE).id)
    return ids


def test_verify_clean_store_is_ok(ws: Path, store_dir: Path) -> None:
    damaged_store(ws, store_dir)
    with Store.open(store_dir) as store:
        for full in (False, True):
            report = verify(store, full=full)
            assert report.ok and report.problems == [] and report.warnings == []
            assert report.snapshots == 3 and report.refs == 3 and report.packs >= 1 and report.blobs >= 4


def test_verify_names_a_truncated_pack_index(ws: Path, store_dir: Path) -> None:
    damaged_store(ws, store_dir)
    idx = sorted((store_dir / "packs").glob("*.idx"))[0]
    idx.write_bytes(idx.read_bytes()[:20])
    with Store.open(store_dir) as store:
        report = verify(store)
    assert not report.ok
    assert any(idx.name in p for p in report.problems), report.problems


def test_verify_names_an_altered_snapshot_file(ws: Path, store_dir: Path) -> None:
    ids = damaged_store(ws, store_dir)
    path = store_dir / "snapshots" / ids[1][:2] / ids[1]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with Store.open(store_dir) as store:
        report = verify(store)
    assert not report.ok
    assert any(ids[1] in p and "does not match its hash" in p for p in report.problems), report.problems


def test_verify_names_the_snapshot_whose_blob_is_missing(ws: Path, store_dir: Path) -> None:
    (ws / "only-in-first.txt").write_text("unique content\n")
    with Store.open(store_dir) as store:
        snap = store.at(ws).capture(scope=SCOPE).id
    [pack] = packs(store_dir)
    (store_dir / "packs" / f"{pack}.pack").unlink()
    (store_dir / "packs" / f"{pack}.idx").unlink()
    blob = blake3.blake3(b"unique content\n").hexdigest()
    with Store.open(store_dir) as store:
        report = verify(store)
    assert not report.ok
    assert any(snap in p and blob in p for p in report.problems), report.problems


def test_verify_reports_leftover_temp_files_as_warnings_only(ws: Path, store_dir: Path) -> None:
    ids = damaged_store(ws, store_dir)
    (store_dir / "packs" / ".tmp-0123456789abcdef.pack").write_bytes(b"half a pack")
    (store_dir / "snapshots" / ids[0][:2] / ".tmp-fedcba9876543210").write_bytes(b"half a snapshot")
    with Store.open(store_dir) as store:
        report = verify(store, full=True)
    assert report.ok, report.problems
    assert len(report.warnings) == 2
    assert any(".tmp-0123456789abcdef.pack" in w for w in report.warnings)
    assert any(".tmp-fedcba9876543210" in w for w in report.warnings)
