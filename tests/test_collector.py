"""The cyclic collector is held off while a big map is decoded, and always running again afterwards."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator

import pytest

from snapshot_store.collector import held_off
from snapshot_store.manifest import FileEntry, SnapshotRecord


@pytest.fixture(autouse=True)
def collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_a_decode_runs_without_collections_and_leaves_the_collector_running() -> None:
    changes = {f"d{i % 7}/f{i}.txt": FileEntry("f", 0o644, i, f"{i:064x}") for i in range(20_000)}
    data = SnapshotRecord(root="/w", created=1.0, kind="manual", label=None, parent=None, depth=0,
                          changes=dict(changes)).encode()
    seen: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            seen.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        rec = SnapshotRecord.decode("0" * 64, data)
    finally:
        gc.callbacks.remove(count)
    assert rec.changes == changes
    # With the collector running, its 20,000 entries' containers set off dozens of young collections; held off, one
    # runs once it resumes.
    assert len(seen) <= 1, seen
    assert gc.isenabled()


def test_nested_and_concurrent_holds_leave_the_collector_running_once_all_have_left() -> None:
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with held_off():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=other)
    with held_off():
        t.start()
        inside.wait(10)
        with held_off():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner use leaves it to the outer one
    leave.set()
    t.join(10)
    assert gc.isenabled()
    for _round in range(200):  # threads entering and leaving in every order: it always ends running
        workers = [threading.Thread(target=_hold_briefly) for _ in range(4)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(10)
        assert gc.isenabled()


def _hold_briefly() -> None:
    with held_off():
        sum(range(100))


def test_a_collector_the_program_turned_off_stays_off() -> None:
    gc.disable()
    with held_off():
        pass
    assert not gc.isenabled()
    with pytest.raises(RuntimeError), held_off():
        raise RuntimeError("a decode that fails")
    assert not gc.isenabled()
    gc.enable()
    with pytest.raises(RuntimeError), held_off():
        raise RuntimeError("a decode that fails")
    assert gc.isenabled()
