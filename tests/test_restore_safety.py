"""A restore's undo must work: its safety copy is intact, it acts only on its own workspace, and
it is finished by nobody else while it runs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fs_helpers import codexr
from store_helpers import WIDE, tree, write

from snapshot_store import ScopeSettings, Store, StoreError
from snapshot_store.maint.verify import verify

REPO = Path(__file__).parents[1]
WIDE_5000 = ScopeSettings(residue_max_files=5000)


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store.open(tmp_path / "home" / "file_snapshots") as s:
        yield s


def _damage_blob(store: Store, blob_hex: str) -> None:
    loc = store.blobs.locate(bytes.fromhex(blob_hex))
    path = store.path / "packs" / f"{loc.pack}.pack"
    with open(path, "r+b") as f:
        f.seek(loc.offset + loc.stored_len // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_a_damaged_stored_copy_of_current_work_is_stored_afresh_before_the_restore(ws: Path, store: Store) -> None:
    write(ws, "work.txt", b"old\n")
    old = store.at(ws).capture(scope=WIDE).id
    mine = os.urandom(20_000)  # incompressible: stored raw, so one flipped byte damages exactly it
    write(ws, "work.txt", mine)
    now = store.at(ws).capture(scope=WIDE)
    _damage_blob(store, now.files["work.txt"][3])  # the store's only copy of the user's work rots

    with Store.open(store.path) as other:  # a fresh process: finds the blob indexed, trusts nothing
        res = other.at(ws).restore(old, scope=WIDE)
    assert (ws / "work.txt").read_bytes() == b"old\n"
    assert res.safety_id is not None
    with Store.open(store.path) as other:
        other.at(ws).restore(res.safety_id, scope=WIDE)
    assert (ws / "work.txt").read_bytes() == mine


def test_a_restore_leaves_a_file_whose_only_copy_is_damaged_and_that_changed(ws: Path, store: Store,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """If the file changes between the safety capture and the re-store, nothing vouches for it: left."""
    import snapshot_store.restore.apply as restore_mod

    write(ws, "work.txt", b"old\n")
    old = store.at(ws).capture(scope=WIDE).id
    mine = os.urandom(20_000)
    write(ws, "work.txt", mine)
    _damage_blob(store, store.at(ws).capture(scope=WIDE).files["work.txt"][3])
    real = restore_mod._store_again

    def edit_first(fs: object, path: str, writer: object) -> bytes | None:
        write(ws, "work.txt", b"edited meanwhile\n")
        return real(fs, path, writer)  # type: ignore[arg-type]

    monkeypatch.setattr(restore_mod, "_store_again", edit_first)
    res = store.at(ws).restore(old, scope=WIDE)
    assert (ws / "work.txt").read_bytes() == b"edited meanwhile\n"
    assert [a.path for a in res.left] == ["work.txt"]


def test_restoring_another_workspaces_snapshot_is_refused(tmp_path: Path, store: Store) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "shared.txt", b"from a\n")
    snap_a = store.at(a).capture(scope=WIDE).id
    write(b, "mine.txt", b"b's own work\n")
    write(b, "shared.txt", b"b's version\n")
    before = tree(b)
    with pytest.raises(StoreError, match=r"was taken of .*--into"):
        store.at(b).restore(snap_a, scope=WIDE)
    assert tree(b) == before


def test_restoring_into_another_directory_on_request_deletes_nothing(tmp_path: Path, store: Store) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    write(a, "shared.txt", b"from a\n")
    write(a, "sub/x.txt", b"x\n")
    snap_a = store.at(a).capture(scope=WIDE).id
    write(b, "mine.txt", b"b's own work\n")
    write(b, "sub/y.txt", b"b's y\n")
    write(b, "shared.txt", b"b's version\n")
    res = store.at(b).restore(snap_a, scope=WIDE, into=True)
    assert (b / "shared.txt").read_bytes() == b"from a\n"
    assert (b / "sub" / "x.txt").read_bytes() == b"x\n"
    assert (b / "mine.txt").read_bytes() == b"b's own work\n"  # a never looked at b: never deleted
    assert (b / "sub" / "y.txt").read_bytes() == b"b's y\n"
    assert not res.deleted
    assert verify(store).ok




def test_cli_restore_of_another_workspaces_snapshot_needs_into(tmp_path: Path) -> None:
    home, a, b = tmp_path / "home", tmp_path / "a", tmp_path / "b"
    write(a, "shared.txt", b"from a\n")
    with Store.open(home / "file_snapshots") as s:
        snap_a = s.at(a).capture().id
    write(b, "mine.txt", b"b's own work\n")
    before = tree(b)
    res = codexr(home, "snapshots", "restore", snap_a[:12], "--yes", cwd=b)
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--into" in res.stderr and "Traceback" not in res.stderr
    assert tree(b) == before
    res = codexr(home, "snapshots", "restore", snap_a[:12], "--yes", "--into", str(b), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (b / "shared.txt").read_bytes() == b"from a\n" and (b / "mine.txt").exists()


def test_cli_restore_warns_when_another_session_works_in_the_workspace(tmp_path: Path) -> None:
    from app.recording.workspace_lock import SessionLock

    home, ws = tmp_path / "home", tmp_path / "ws"
    write(ws, "f.txt", b"1\n")
    with Store.open(home / "file_snapshots") as s:
        snap = s.at(ws).capture().id
    write(ws, "f.txt", b"2\n")
    live = SessionLock(home / "file_snapshots", Path(os.path.realpath(ws)))
    live.path = live.path.with_name("otherhost-1.json")  # a session of another machine: always live
    live.acquire()
    (live.path).write_text(json.dumps({"pid": 1, "host": "otherhost", "since": 0, "workspace": str(ws)}))
    res = codexr(home, "snapshots", "restore", snap[:12], "--yes", cwd=ws)
    assert res.returncode == 0, res.stderr
    assert "other codexr sessions are live" in res.stderr and "otherhost" in res.stderr


def _journal(home: Path, ws: Path) -> Path:
    from snapshot_store.ids import workspace_key

    return home / "file_snapshots" / "journal" / f"{workspace_key(os.path.realpath(ws))}.json"


def _stop_when_journaled(proc: subprocess.Popen[str], journal: Path, timeout: float = 120.0) -> None:
    """SIGSTOP the restore the moment its journal exists (it is then applying its plan)."""
    deadline = time.monotonic() + timeout
    while not journal.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the restore ended before its journal was seen: {proc.communicate()}")
    os.kill(proc.pid, signal.SIGSTOP)
    assert journal.exists()


def _start_restore(home: Path, ws: Path, target: str, scope: list[str]) -> subprocess.Popen[str]:
    """`codexr snapshots restore TARGET --yes` as a separate process."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    return subprocess.Popen([sys.executable, "-m", "app.cli", *scope, "snapshots", "restore", target, "--yes"],
                            cwd=ws, env=env, text=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def _many_files(ws: Path, n: int, mode: int) -> None:
    for i in range(n):
        write(ws, f"d{i % 20}/f{i}.txt", f"file {i}\n".encode(), mode=mode)


def test_a_capture_does_not_finish_a_restore_that_is_still_running(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    _many_files(ws, 2000, 0o644)
    scope = ["-c", "file_snapshots.residue_max_files=5000"]
    with Store.open(home / "file_snapshots") as s:
        target = s.at(ws).capture(scope=WIDE_5000).id
    for i in range(2000):
        write(ws, f"d{i % 20}/f{i}.txt", f"changed {i}\n".encode())
    restore = _start_restore(home, ws, target, scope)
    try:
        _stop_when_journaled(restore, _journal(home, ws))
        cap = codexr(home, *scope, "snapshots", "capture", cwd=ws)
        assert cap.returncode == 0, cap.stderr
        assert _journal(home, ws).exists()  # the running restore's journal is not someone else's to finish
    finally:
        os.kill(restore.pid, signal.SIGCONT)
    _out, err = restore.communicate(timeout=120)
    assert restore.returncode == 0, err
    assert not _journal(home, ws).exists()
    assert all((ws / f"d{i % 20}/f{i}.txt").read_bytes() == f"file {i}\n".encode() for i in range(2000))


def test_recovery_after_a_killed_restore_applies_mode_only_changes(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    _many_files(ws, 2000, 0o644)
    scope = ["-c", "file_snapshots.residue_max_files=5000"]
    with Store.open(home / "file_snapshots") as s:
        target = s.at(ws).capture(scope=WIDE_5000).id
    for i in range(2000):
        os.chmod(ws / f"d{i % 20}/f{i}.txt", 0o755)  # mode-only changes
    restore = _start_restore(home, ws, target, scope)
    _stop_when_journaled(restore, _journal(home, ws))
    os.kill(restore.pid, signal.SIGKILL)
    restore.communicate(timeout=60)
    still = sum(1 for i in range(2000) if os.stat(ws / f"d{i % 20}/f{i}.txt").st_mode & 0o777 == 0o755)
    assert still > 0, "the kill came too late to leave work for recovery"
    cap = codexr(home, *scope, "snapshots", "capture", cwd=ws)
    assert cap.returncode == 0, cap.stderr
    assert "finished an interrupted restore" in cap.stderr  # and it says so
    assert not _journal(home, ws).exists()
    modes = {os.stat(ws / f"d{i % 20}/f{i}.txt").st_mode & 0o777 for i in range(2000)}
    assert modes == {0o644}
