"""Workspace ref logs: a torn append (what a crash mid-write leaves) never becomes permanent damage."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fs_helpers import codexr
from store_helpers import write

from snapshot_store import CorruptStore, Store
from snapshot_store.ids import workspace_key
from snapshot_store.maint.verify import verify


def _ref(home: Path, ws: Path) -> Path:
    return home / "file_snapshots" / "refs" / "workspaces" / f"{workspace_key(os.path.realpath(ws))}.jsonl"


@pytest.mark.parametrize("torn", [b'{"id":"abc', b'{"id":"' + b"a" * 64 + b'","root":"/x"}', b"\x00\x00"])
def test_captures_after_a_torn_append_keep_the_log_readable(tmp_path: Path, torn: bytes) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws, "a.txt", b"1\n")
    assert codexr(home, "snapshots", "capture", cwd=ws).returncode == 0
    with open(_ref(home, ws), "ab") as f:
        f.write(torn)  # a crash in the middle of the next append
    for n in (b"2\n", b"3\n"):
        write(ws, "a.txt", n)
        res = codexr(home, "snapshots", "capture", cwd=ws)
        assert res.returncode == 0, res.stderr
    listed = codexr(home, "snapshots", "list", "--json", cwd=ws)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 3
    gc = codexr(home, "-c", "file_snapshots.gc_grace_seconds=0", "snapshots", "gc", cwd=ws)
    assert gc.returncode == 0, gc.stderr
    ver = codexr(home, "snapshots", "verify", "--full", cwd=ws)
    assert ver.returncode == 0, ver.stdout + ver.stderr
    assert torn not in _ref(home, ws).read_bytes()


def test_a_damaged_complete_line_is_corruption_not_a_torn_tail(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws, "a.txt", b"1\n")
    with Store.open(home / "file_snapshots") as store:
        store.at(ws).capture()
        ref = _ref(home, ws)
        ref.write_bytes(ref.read_bytes()[:-3] + b"#}\n")  # the newest line, complete and damaged
        with pytest.raises(CorruptStore):
            store.list_snapshots(ws)
        assert not verify(store).ok


def test_a_capture_whose_auto_gc_cannot_run_still_succeeds(tmp_path: Path) -> None:
    home, ws, other = tmp_path / "home", tmp_path / "ws", tmp_path / "other"
    write(ws, "a.txt", b"1\n")
    write(other, "b.txt", b"1\n")
    assert codexr(home, "snapshots", "capture", cwd=other).returncode == 0
    ref = _ref(home, other)
    ref.write_bytes(b"not json\n" + ref.read_bytes())  # damage gc must refuse to work around
    (home / "file_snapshots" / "gc.last").unlink(missing_ok=True)
    res = codexr(home, "snapshots", "capture", cwd=ws)
    assert res.returncode == 0, res.stderr
    assert "automatic gc skipped" in res.stderr and "Traceback" not in res.stderr
    assert len(res.stdout.split()) == 1
