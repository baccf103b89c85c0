"""The store's words are StrEnums in one place (snapshot_store/vocab.py); on disk and in JSON they stay the strings
every store already holds (FORMAT.md), so no store needs converting and every reader of `--json` keeps working."""

from __future__ import annotations

import json
from pathlib import Path

from store_helpers import WIDE, write

from snapshot_store import Store
from snapshot_store.repository.repo import read_record
from snapshot_store.vocab import RestoreOp, SnapshotKind


def test_the_words_are_the_strings_stores_and_journals_already_hold() -> None:
    assert [str(op) for op in RestoreOp] == ["write", "delete", "rmdir", "leave"]
    assert [str(k) for k in SnapshotKind] == ["capture", "safety", "pre-turn", "post-turn", "rewind-target",
                                              "pre-edit", "states-safety", "post-edit"]


def test_a_kind_and_the_operations_are_written_as_plain_strings(ws: Path, tmp_path: Path) -> None:
    write(ws, "a.txt", "one\n")
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as store:
        door = store.at(ws)
        first = door.capture_thread(known_paths=["a.txt"], kind=SnapshotKind.PRE_TURN, scope=WIDE)
        write(ws, "a.txt", "two\n")
        write(ws, "b.txt", "made after the snapshot\n")
        result = door.restore(first.id, scope=WIDE)
    assert result.safety_id is not None
    [ref] = (store_dir / "refs" / "workspaces").glob("*.jsonl")
    lines = [json.loads(line) for line in ref.read_text().splitlines()]
    assert [(d["id"], d["kind"]) for d in lines] == [(first.id, "pre-turn"), (result.safety_id, "safety")]
    for snap, kind in ((first.id, "pre-turn"), (result.safety_id, "safety")):
        rec = read_record(str(store_dir / "snapshots" / snap[:2] / snap))
        assert rec.kind == kind and type(rec.kind) is str
    shown = json.loads(json.dumps(result.as_json()))
    assert {(a["op"], a["path"]) for a in shown["plan"]} >= {("write", "a.txt"), ("delete", "b.txt")}
