"""Thread-pinned snapshots have a retention rule too: a thread idle past retention_days pins nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from store_helpers import write

from snapshot_store import RetentionPolicy, Store
from snapshot_store.maint.gc import gc
from snapshot_store.maint.verify import verify

REPO = Path(__file__).parents[1]
DAY = 86400.0


def _sidecar(store: Store, thread: str, snaps: list[str], age_days: float) -> Path:
    path = store.path / "refs" / "threads" / f"{thread}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"version": 1, "thread_id": thread, "cwd": "/x", "tracking": True, "created": 0, "forked_from": None,
           "turns": [{"turn_id": f"t{n}", "prompt": "p", "pre": s, "post": None, "status": "completed",
                      "started": 0} for n, s in enumerate(snaps)],
           "agent_touched": [], "redo": [], "history": []}
    path.write_text(json.dumps(doc))
    when = time.time() - age_days * DAY
    os.utime(path, (when, when))
    return path


@pytest.mark.parametrize(("idle_days", "kept"), [(40.0, False), (5.0, True)])
def test_an_idle_threads_snapshots_follow_workspace_retention(ws: Path, tmp_path: Path, idle_days: float,
                                                              kept: bool) -> None:
    with Store.open(tmp_path / "store") as store:
        old = []
        for n in range(3):
            write(ws, "f.txt", os.urandom(2000) + bytes([n]))
            old.append(store.at(ws).capture().id)
        _sidecar(store, "thread-0001", old[:2], idle_days)
        policy = RetentionPolicy(thread_idle_days=30, max_snapshots_per_workspace=1, grace_seconds=0)
        gc(store, policy)
        listed = {i.id for i in store.list_snapshots(ws)}
        assert (old[0] in listed and old[1] in listed) is kept
        assert old[2] in listed
        assert verify(store, full=True, retention=policy).ok


def test_cli_verify_knows_an_idle_thread_pins_nothing(ws: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    with Store.open(home / "file_snapshots") as store:
        snaps = []
        for n in range(2):
            write(ws, "f.txt", os.urandom(2000) + bytes([n]))
            snaps.append(store.at(ws).capture().id)
        _sidecar(store, "thread-0002", snaps[:1], 40.0)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    args = ["-c", "file_snapshots.retention_max_snapshots=1", "-c", "file_snapshots.gc_grace_seconds=0"]
    for cmd in (["gc"], ["verify", "--full"]):
        res = subprocess.run([sys.executable, "-m", "app.cli", *args, "snapshots", *cmd], cwd=ws, env=env,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stdout + res.stderr
