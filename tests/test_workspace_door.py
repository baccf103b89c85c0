"""The Workspace front door (snapshot_store/workspace.py): capture, plan, restore, diff and recover of one root,
as the app's Store calls them; and a Restorer works from a loader and a root alone (no Store)."""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import pytest
from store_helpers import WIDE, write

from snapshot_store import Store
from snapshot_store.restore import Restorer
from snapshot_store.restore.apply import RestoreResult
from snapshot_store.restore.plan import WRITE, plan_restore
from snapshot_store.scope import Ignore
from snapshot_store.workspace import _named_between


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


@pytest.mark.parametrize("seed", range(4))
def test_a_plan_from_the_paths_the_records_name_is_the_plan_of_the_whole_maps(tmp_path: Path, seed: int) -> None:
    """A restore plans from the paths the delta records between its target and its safety snapshot name (two passes
    over 100,000 entries were ~50 ms of a rewind, issue 35): the same plan as comparing the two maps whole, for random
    edits between them (files changed, made, removed, a directory replaced by a file and back), and for a target
    written over another snapshot (a rewind's pre-edit states laid over its pre-turn one)."""
    rng = random.Random(seed)
    ws = tmp_path / "ws"
    for i in range(120):  # changes to under half the map: each capture writes a delta record, not a whole one
        write(ws, f"d{i % 4}/f{i}.txt", f"{i}\n")
    for k in range(3):
        write(ws, f"s{k}/one.txt", "small\n")
    with Store.open(tmp_path / "store") as store:
        door = store.at(ws)
        target = door.capture(scope=WIDE).id
        for _step in range(3):
            for _ in range(6):
                files = sorted(p for p in ws.rglob("*") if p.is_file())
                op = rng.choice(["modify", "create", "delete", "swap"])
                if op == "modify" and files:
                    rng.choice(files).write_text(f"changed {rng.random()}\n")
                elif op == "create":
                    write(ws, f"d{rng.randrange(6)}/new{rng.randrange(1000)}.txt", "new\n")
                elif op == "delete" and files:
                    rng.choice(files).unlink()
                elif op == "swap":
                    d = ws / f"s{rng.randrange(3)}"
                    if d.is_dir():
                        shutil.rmtree(d)
                        d.write_text("a file where a directory was\n")
                    elif d.exists():
                        d.unlink()
                        write(ws, f"{d.name}/back.txt", "a directory again\n")
            door.capture(scope=WIDE)
        newest = store.latest(store.workspace(ws))
        assert newest is not None
        some = next(e for e in store.files(newest).values() if e.kind == "f")
        over = store.write_unlisted(str(store.workspace(ws)), {"d1/laid-over.txt": some, "d2/f2.txt": some},
                                    parent=target, kind="rewind-target", label=None)
        safety = door.capture(scope=WIDE, kind="safety")
        root = store.workspace(ws)
        for snap in (target, over):
            named = _named_between(store, snap, safety.id)
            assert named is not None and len(named) < 120
            whole = plan_restore(store.files(snap), safety.files, Ignore.load(root), str(root), snap)
            fast = plan_restore(store.files(snap), safety.files, Ignore.load(root), str(root), snap, named=named)
            assert [(a.op, a.path, a.reason) for a in fast.actions] == [(a.op, a.path, a.reason) for a in whole.actions]
            assert any(a.op == WRITE for a in whole.actions)
