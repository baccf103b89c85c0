"""Captures and restores racing a gc, with real processes: no snapshot may name a blob gc swept.

A capture (or a restore's safety capture) that loaded its blob index before a gc ran must not
"deduplicate" against a blob that gc then deleted. Each test makes the overlap certain: the test
process holds the store's exclusive lock (as gc does), starts the `codexr` command in a subprocess,
waits until that process has loaded the store and is waiting for the lock, then sweeps with the
real gc code and lets go.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

from store_helpers import waits_on_lock

from snapshot_store import RetentionPolicy, Store
from snapshot_store.locks import flocked
from snapshot_store.maint import gc as gc_mod
from snapshot_store.maint.verify import verify

REPO = Path(__file__).parents[1]
SWEEP_ALL = RetentionPolicy(max_snapshots_per_workspace=1, grace_seconds=0, max_age_days=0, max_store_bytes=0)


def _codexr(home: Path, *args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=env, text=True,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@contextlib.contextmanager
def _gc_holds_the_lock(store_dir: Path) -> Iterator[None]:
    with flocked(store_dir / "locks" / "store.lock", exclusive=True):
        yield


def _sweep(store_dir: Path) -> None:
    """The real gc's plan and execution, run while the test holds gc's lock."""
    with Store.open(store_dir) as store:
        gc_mod._execute(store, gc_mod.plan_gc(store, SWEEP_ALL))


def _setup(tmp_path: Path) -> tuple[Path, Path, bytes]:
    """A workspace whose first snapshot holds content X, and a second snapshot not built on the first.

    After gc keeps one snapshot per workspace, X is referenced by nothing and its pack is deleted.
    """
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    x = os.urandom(50_000)
    (ws / "a.txt").write_bytes(x)
    with Store.open(home / "file_snapshots") as store:
        store.at(ws).capture()
        (ws / "a.txt").write_bytes(os.urandom(50_000))
        (ws / "b.txt").write_bytes(os.urandom(1000))  # more than half the map changed: a full snapshot
        second = store.at(ws).capture()
        assert store.record(second.id).parent is None
    return home, ws, x


def _assert_store_whole(store_dir: Path) -> None:
    with Store.open(store_dir) as store:
        report = verify(store, full=True)
        assert report.ok, report.problems


def test_a_capture_waiting_behind_gc_stores_what_gc_swept(tmp_path: Path) -> None:
    home, ws, x = _setup(tmp_path)
    store_dir = home / "file_snapshots"
    (ws / "a.txt").write_bytes(x)  # back to the content only the swept snapshot held
    with _gc_holds_the_lock(store_dir):
        proc = _codexr(home, "snapshots", "capture", "--json", cwd=ws)
        waits_on_lock(proc, store_dir / "locks" / "store.lock")
        _sweep(store_dir)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    _assert_store_whole(store_dir)
    with Store.open(store_dir) as store:
        newest = store.list_snapshots(ws)[-1].id
        assert b"".join(store.blob_chunks(store.files(newest)["a.txt"][3])) == x


def test_a_restore_waiting_behind_gc_keeps_an_undo_that_works(tmp_path: Path) -> None:
    home, ws, x = _setup(tmp_path)
    store_dir = home / "file_snapshots"
    with Store.open(store_dir) as store:
        target = store.list_snapshots(ws)[-1].id
    (ws / "a.txt").write_bytes(x)  # the user's current work: only the swept snapshot held this content
    with _gc_holds_the_lock(store_dir):
        proc = _codexr(home, "snapshots", "restore", target, "--yes", "--json", cwd=ws)
        waits_on_lock(proc, store_dir / "locks" / "store.lock")
        _sweep(store_dir)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert (ws / "a.txt").read_bytes() != x  # the restore did overwrite the user's work...
    _assert_store_whole(store_dir)
    with Store.open(store_dir) as store:
        safety = [i for i in store.list_snapshots(ws) if i.kind == "safety"][-1].id
        store.at(ws).restore(safety)
    assert (ws / "a.txt").read_bytes() == x  # ...and its safety snapshot brings it back


def test_a_long_lived_store_forgets_blobs_a_gc_elsewhere_swept(tmp_path: Path) -> None:
    """The session keeps its store open for hours; a gc run by another command must not leave it stale."""
    home, ws, x = _setup(tmp_path)
    store_dir = home / "file_snapshots"
    with Store.open(store_dir) as session_store:
        session_store.capturer.watch(ws)
        session_store.at(ws).capture()
        env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
        gc_run = subprocess.run(
            [sys.executable, "-m", "app.cli", "-c", "file_snapshots.gc_grace_seconds=0",
             "-c", "file_snapshots.retention_max_snapshots=1", "snapshots", "gc", "--json"],
            cwd=ws, env=env, capture_output=True, text=True, timeout=120)
        assert gc_run.returncode == 0, gc_run.stderr
        (ws / "a.txt").write_bytes(x)
        res = session_store.at(ws).capture()
        assert res.bytes_stored > 0
    _assert_store_whole(store_dir)
