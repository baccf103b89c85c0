"""A restore held between its plan and its apply (`Workspace.prepare`), as a rewind holds it while it asks, forks
the conversation and records its redo entry: nothing changes until `apply`, and no other process's restore or gc
can move the ground under the plan meanwhile (real processes, waiting on the real locks)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from store_helpers import tree, waits_on_lock

from snapshot_store import Store, StoreError
from snapshot_store.ids import workspace_key
from snapshot_store.restore import WRITE

REPO = Path(__file__).parents[1]


def _codexr(home: Path, *args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _two_states(tmp_path: Path) -> tuple[Path, Path, str, bytes]:
    """A workspace whose first snapshot alone holds `x` in a.txt (the second is a full snapshot, not a delta on
    it), and whose a.txt now holds something else: restoring the first snapshot writes `x` back."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    x = os.urandom(50_000)
    (ws / "a.txt").write_bytes(x)
    with Store.open(home / "file_snapshots") as store:
        first = store.at(ws).capture().id
        (ws / "a.txt").write_bytes(os.urandom(50_000))
        (ws / "b.txt").write_bytes(os.urandom(1000))
        assert store.record(store.at(ws).capture().id).parent is None
    (ws / "a.txt").write_bytes(b"the user's current text\n")
    return home, ws, first, x


def test_a_prepared_restore_left_unapplied_changes_no_file_and_keeps_its_safety_snapshot(tmp_path: Path) -> None:
    home, ws, first, _x = _two_states(tmp_path)
    before = tree(ws)
    with Store.open(home / "file_snapshots") as store:
        with store.at(ws).prepare(first) as ready:
            assert [a.path for a in ready.plan.actions if a.op == WRITE] == ["a.txt"]
            safety = ready.plan.safety_id
        assert tree(ws) == before  # declined: nothing written, nothing deleted
        assert safety is not None and store.exists(safety)
        assert b"".join(store.blob_chunks(store.files(safety)["a.txt"][3])) == b"the user's current text\n"


def test_a_prepared_restore_applies_once_and_only_inside_its_block(tmp_path: Path) -> None:
    home, ws, first, x = _two_states(tmp_path)
    with Store.open(home / "file_snapshots") as store:
        ready = store.at(ws).prepare(first)
        with ready:
            ready.apply()
            assert (ws / "a.txt").read_bytes() == x
            with pytest.raises(StoreError, match="once"):
                ready.apply()
        with pytest.raises(StoreError, match="inside its `with` block"):
            ready.apply()
        with store.at(ws).prepare(first) as again:
            pass
        with pytest.raises(StoreError, match="inside its `with` block"):
            again.apply()  # its locks are gone: the plan may no longer be the truth


def test_a_gc_in_another_process_waits_until_the_prepared_restore_is_applied(tmp_path: Path) -> None:
    """The target is what retention would drop: if gc could run between the plan and the apply (a user reading the
    confirmation), the apply would find the target's blobs swept."""
    home, ws, first, x = _two_states(tmp_path)
    store_dir = home / "file_snapshots"
    with Store.open(store_dir) as store, store.at(ws).prepare(first) as ready:
        gc = _codexr(home, "-c", "file_snapshots.gc_grace_seconds=0", "-c",
                     "file_snapshots.retention_max_snapshots=1", "snapshots", "gc", "--json", cwd=ws)
        waits_on_lock(gc, store_dir / "locks" / "store.lock")
        time.sleep(0.5)
        assert gc.poll() is None, "gc ran while a restore was between its plan and its apply"
        ready.apply()
    _out, err = gc.communicate(timeout=120)
    assert gc.returncode == 0, err
    assert (ws / "a.txt").read_bytes() == x


def test_another_restore_of_the_workspace_waits_for_the_prepared_one(tmp_path: Path) -> None:
    home, ws, first, x = _two_states(tmp_path)
    store_dir = home / "file_snapshots"
    with Store.open(store_dir) as store:
        second = store.list_snapshots(ws)[1].id
        with store.at(ws).prepare(first) as ready:
            other = _codexr(home, "snapshots", "restore", second, "--yes", "--json", cwd=ws)
            waits_on_lock(other, store_dir / "locks" / f"{workspace_key(str(ws.resolve()))}.lock")
            time.sleep(0.5)
            assert other.poll() is None, "another restore ran between this one's plan and its apply"
            ready.apply()
            assert (ws / "a.txt").read_bytes() == x
    _out, err = other.communicate(timeout=120)
    assert other.returncode == 0, err
    assert (ws / "a.txt").read_bytes() != x  # the second restore came after, with its own safety capture
    with Store.open(store_dir) as store:
        safeties = [i.id for i in store.list_snapshots(ws) if i.kind == "safety"]
        assert b"".join(store.blob_chunks(store.files(safeties[-1])["a.txt"][3])) == x
