"""Hostile store files: a forged snapshot or journal gets one clear line and changes nothing.

A snapshot file's name is the hash of its bytes, so a forged one passes that check; what it says
must still be checked before any of it becomes a path or a write.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import blake3
import pytest
import zstandard
from fs_helpers import codexr
from store_helpers import tree, write

from snapshot_store import CorruptStore, Store
from snapshot_store.ids import workspace_key

BLOB = "ab" * 32




def _forge(store_dir: Path, ws: Path, changes_json: str) -> str:
    """Write a snapshot whose raw JSON is given (hash-valid name) and list it for the workspace."""
    raw = ('{"changes":' + changes_json.replace("@", BLOB) + f',"created":{time.time()!r},"depth":0,"format":1,'
           '"kind":"capture","label":null,"meta":{"file_count":1},"parent":null,"root":' + json.dumps(str(ws)) + "}")
    data = zstandard.ZstdCompressor().compress(raw.encode())
    snap = blake3.blake3(data).hexdigest()
    path = store_dir / "snapshots" / snap[:2] / snap
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    line = {"id": snap, "root": str(ws), "created": time.time(), "kind": "capture", "label": None, "file_count": 1}
    with open(store_dir / "refs" / "workspaces" / f"{workspace_key(str(ws))}.jsonl", "a") as f:
        f.write(json.dumps(line) + "\n")
    return snap


HOSTILE = {
    "parent escape": '{"":["d"],"../escape.txt":["f",420,5,"@"]}',
    "inner escape": '{"":["d"],"a/../../escape.txt":["f",420,5,"@"]}',
    "absolute": '{"":["d"],"/tmp/escape.txt":["f",420,5,"@"]}',
    "into .git": '{"":["d"],".git/hooks/pre-commit":["f",493,5,"@"]}',
    "nul byte": '{"":["d"],"a\\u0000b":["f",420,5,"@"]}',
    "absurd size": '{"":["d"],"big.txt":["f",420,99999999999999999999,"@"]}',
    "absurd mode": '{"":["d"],"m.txt":["f",99999,5,"@"]}',
    "duplicate key": '{"":["d"],"x.txt":["f",420,5,"@"],"x.txt":["-"]}',
    "bad blob id": '{"":["d"],"x.txt":["f",420,5,"../../etc/passwd"]}',
    "size beyond any disk": '{"":["d"],"big.txt":["f",420,1000000000000000000,"@"]}',
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_forged_snapshot_is_refused_everywhere(tmp_path: Path, case: str) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws, "mine.txt", b"my work\n")
    with Store.open(home / "file_snapshots") as store:
        store.at(ws).capture()
    snap = _forge(home / "file_snapshots", Path(os.path.realpath(ws)), HOSTILE[case])
    with Store.open(home / "file_snapshots") as store, pytest.raises(CorruptStore):
        store.record(snap)
    before, outside = tree(ws), sorted(os.listdir(tmp_path))
    for args in (("snapshots", "restore", snap, "--yes"), ("snapshots", "show", snap)):
        res = codexr(home, *args, cwd=ws)
        assert res.returncode == 2 and res.stderr.startswith("codexr: error:"), (args, res.stderr)
        assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    ver = codexr(home, "snapshots", "verify", cwd=ws)
    assert ver.returncode == 1 and snap in ver.stdout + ver.stderr
    assert tree(ws) == before and sorted(os.listdir(tmp_path)) == outside


def test_a_snapshot_whose_size_disagrees_with_its_blob_changes_nothing(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws, "mine.txt", b"my work\n")
    with Store.open(home / "file_snapshots") as store:
        blob = store.at(ws).capture().files["mine.txt"][3]
    snap = _forge(home / "file_snapshots", Path(os.path.realpath(ws)),
                  '{"":["d"],"mine.txt":["f",420,8,"' + blob + '"],"new.txt":["f",420,99,"' + blob + '"]}')
    before = tree(ws)
    res = codexr(home, "snapshots", "restore", snap, "--yes", cwd=ws)
    assert res.returncode == 2 and "another length" in res.stderr, res.stderr
    assert tree(ws) == before


def test_a_forged_journal_step_is_never_carried_out(tmp_path: Path) -> None:
    """A journal may only finish what its target and safety snapshots allow: no invented writes."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws, "mine.txt", b"my work\n")
    write(ws, "secret.txt", b"do not copy me around\n")
    with Store.open(home / "file_snapshots") as store:
        snap = store.at(ws).capture()
    blob = snap.files["secret.txt"][3]
    journal = home / "file_snapshots" / "journal" / f"{workspace_key(os.path.realpath(ws))}.json"
    for actions in ([["write", "planted.txt", ["f", 420, 22, blob], None]],
                    [["delete", "mine.txt", None, None]]):
        journal.write_text(json.dumps({"root": os.path.realpath(ws), "target": snap.id, "safety": snap.id,
                                       "started": 0, "actions": actions}))
        before = tree(ws)
        res = codexr(home, "snapshots", "capture", cwd=ws)
        assert res.returncode == 2 and "do not allow" in res.stderr, res.stderr
        assert tree(ws) == before


def test_an_absurd_time_in_a_ref_line_lists_without_a_traceback(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws, "mine.txt", b"my work\n")
    with Store.open(home / "file_snapshots") as store:
        snap = store.at(ws).capture()
    ref = home / "file_snapshots" / "refs" / "workspaces" / f"{workspace_key(os.path.realpath(ws))}.jsonl"
    line = json.loads(ref.read_text())
    ref.write_text(json.dumps({**line, "created": 1e300}) + "\n")
    res = codexr(home, "snapshots", "list", cwd=ws)
    assert res.returncode == 0 and snap.id[:12] in res.stdout and "Traceback" not in res.stderr, res.stderr
    assert codexr(home, "snapshots", "verify", cwd=ws).returncode == 1  # and verify names the damage
