"""The Workspace front door (snapshot_store/workspace.py): capture, plan, restore, diff and recover of one root,
as the app's Store calls them; and a Restorer works from a loader and a root alone (no Store)."""

from __future__ import annotations

import time
from pathlib import Path

from store_helpers import WIDE, write

from snapshot_store import Store
from snapshot_store.restore import Restorer
from snapshot_store.restore.apply import RestoreResult
from snapshot_store.restore.plan import WRITE, plan_restore
from snapshot_store.scope import Ignore


def test_capture_plan_restore_and_diff_through_the_front_door(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws, "a.txt", "one\n")
    write(ws, "b.txt", "keep\n")
    with Store.open(tmp_path / "store") as store:
        door = store.at(ws)
        first = door.capture(scope=WIDE)
        write(ws, "a.txt", "two\n")
        assert [(c.path, c.change) for c in door.diff(first.id, scope=WIDE)] == [("a.txt", "modified")]
        plan = door.plan(first.id, scope=WIDE)
        assert [(a.op, a.path) for a in plan.actions if a.op == WRITE] == [("write", "a.txt")]
        assert (ws / "a.txt").read_text() == "two\n"  # planning changed nothing
        result = door.restore(first.id, scope=WIDE)
        assert (ws / "a.txt").read_text() == "one\n" and (ws / "b.txt").read_text() == "keep\n"
        assert result.safety_id is not None and store.files(result.safety_id)["a.txt"] != first.files["a.txt"]
        assert door.recover() is None  # the restore finished: nothing to recover


def test_a_restorer_needs_only_a_loader_and_a_root(tmp_path: Path) -> None:
    """restore/apply.py writes the planned files from what the loader reads; the safety snapshot is the caller's."""
    ws = tmp_path / "ws"
    write(ws, "a.txt", "one\n")
    with Store.open(tmp_path / "store") as store:
        target = store.at(ws).capture(scope=WIDE)
        write(ws, "a.txt", "two\n")
        started_ns = time.time_ns()
        safety = store.at(ws).capture(scope=WIDE, kind="safety")
        root = store.workspace(ws)
        plan = plan_restore(store.files(target.id), safety.files, Ignore.load(root), str(root), target.id)
        for a in plan.actions:
            a.before = safety.stats.get(a.path)
        result = RestoreResult(plan, safety.id)
        Restorer(store, root, store.journal_file(root)).apply(plan, safety.id, result, safety.stored_blobs, started_ns)
        assert result.written == ["a.txt"] and (ws / "a.txt").read_text() == "one\n"
        assert not store.journal_file(root).exists()
