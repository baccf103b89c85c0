"""Workspace ref logs: a torn append, or a capture killed between its snapshot file and its ref line (what a crash
leaves), never becomes permanent damage: the next command finishes or drops the interrupted write."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fs_helpers import Tree, codexr, store_files, tree
from store_helpers import write

from snapshot_store import CorruptStore, Store
from snapshot_store.ids import digest_hex, workspace_key
from snapshot_store.maint.verify import verify
from snapshot_store.manifest import SnapshotRecord, parse_entry
from snapshot_store.repository import commits


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


# ------------------------------------------------------------------ a capture killed before its ref line (issue 30)

STRACE = shutil.which("strace")
NO_AUTO_GC = ("-c", "file_snapshots.auto_gc=false")
GRACE0 = ("-c", "file_snapshots.gc_grace_seconds=0")
needs_strace = pytest.mark.skipif(STRACE is None, reason="needs strace")


def _run(home: Path, ws: Path, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """`codexr -c auto_gc=false ARGS` as its own process (under `prefix`: strace)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "CODEX_HOME": str(home),
           "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([*prefix, sys.executable, "-m", "app.cli", *NO_AUTO_GC, *args], cwd=ws, env=env,
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


def _ok(home: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    res = _run(home, ws, *args)
    assert res.returncode == 0, (args, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    return res


def _snapshot_files(home: Path) -> set[str]:
    return {p.name for p in (home / "file_snapshots" / "snapshots").glob("*/*") if not p.name.startswith(".tmp-")}


def _listed(home: Path, ws: Path) -> list[str]:
    return [i["id"] for i in json.loads(_ok(home, ws, "snapshots", "list", "--json").stdout)]


def _age_store(home: Path, seconds: float = 7200.0) -> None:
    """Every store file an hour or two old: no capture can still be about to append a line, the grace is over."""
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(home / "file_snapshots"):
        for f in files:
            os.utime(os.path.join(dirpath, f), (past, past))


def _two_states(tmp_path: Path) -> tuple[Path, Path, str, Tree, Tree]:
    """A workspace captured once (T1), then changed (T2: an edit, a new file, a mode change): home, ws, S1, T1, T2."""
    home, ws = tmp_path / "home", Path(os.path.realpath(tmp_path)) / "ws"
    write(ws, "a.txt", b"one\n")
    write(ws, "keep.bin", os.urandom(3000))
    write(ws, "gone.txt", b"deleted at T2\n")
    for n in range(12):  # untouched: each later snapshot is a small delta on the one before
        write(ws, f"lib/f{n}.txt", f"file {n}\n".encode())
    t1 = tree(ws)
    first = _ok(home, ws, "snapshots", "capture").stdout.strip()
    write(ws, "a.txt", b"two\n")
    write(ws, "sub/new.bin", os.urandom(5000))
    (ws / "keep.bin").chmod(0o600)
    (ws / "gone.txt").unlink()
    return home, ws, first, t1, tree(ws)


def _kill_before_its_ref_line(home: Path, ws: Path) -> str:
    """SIGKILL a real `codexr snapshots capture` at its first write to the workspace's ref log: the append of its
    ref line, which comes right after its snapshot file was made durable (trace of a capture: the snapshot's
    temp file written, fsynced, renamed, its directory fsynced; then the ref log's open, flock, write, fsync).
    Returns the snapshot the kill left without its ref line."""
    ref = _ref(home, ws)
    before, lines = _snapshot_files(home), ref.read_bytes()
    assert STRACE is not None
    killer = (STRACE, "-f", "-qq", "-o", os.devnull, "-P", str(ref), "-e", "trace=write",
              "-e", "inject=write:signal=KILL:when=1")
    res = _run(home, ws, "snapshots", "capture", prefix=killer)
    assert res.returncode in (-9, 137), (res.returncode, res.stdout, res.stderr)
    [orphan] = _snapshot_files(home) - before  # durable, and named by no ref line
    assert ref.read_bytes() == lines
    return orphan


@needs_strace
def test_a_capture_killed_before_its_ref_line_is_no_damage_and_the_next_capture_finishes_it(tmp_path: Path) -> None:
    home, ws, first, t1, t2 = _two_states(tmp_path)
    orphan = _kill_before_its_ref_line(home, ws)
    _age_store(home)  # "from then on": long after the kill, with nothing run in between
    ver = _run(home, ws, "snapshots", "verify", "--full")
    assert ver.returncode == 0, ver.stdout + ver.stderr
    assert "damaged" not in ver.stdout.lower()
    assert any(line.startswith("warning: ") and orphan in line and "interrupted write" in line
               and "next capture" in line for line in ver.stdout.splitlines()), ver.stdout
    # The next capture finishes the interrupted one first: its snapshot is listed, then the new one grows from it.
    write(ws, "a.txt", b"three\n")
    (ws / "sub" / "new.bin").unlink()
    (ws / "sub").rmdir()
    t3 = tree(ws)
    third = _ok(home, ws, "snapshots", "capture").stdout.strip()
    assert _listed(home, ws) == [first, orphan, third]
    with Store.open(home / "file_snapshots") as store:
        assert store.record(third).parent == orphan  # its delta is on the finished snapshot
    assert not [p for p in (home / "file_snapshots" / "journal").iterdir()]
    ver = _ok(home, ws, "snapshots", "verify", "--full")
    assert "warning" not in ver.stdout, ver.stdout
    for snap, want in ((orphan, t2), (third, t3), (first, t1), (orphan, t2)):
        _ok(home, ws, "snapshots", "restore", snap, "--yes")
        assert tree(ws) == want, snap
    # gc without a grace period keeps every listed snapshot whole.
    _age_store(home)
    _ok(home, ws, *GRACE0, "snapshots", "gc")
    assert _listed(home, ws)[:3] == [first, orphan, third]
    _ok(home, ws, "snapshots", "restore", orphan, "--yes")
    assert tree(ws) == t2
    _ok(home, ws, "snapshots", "verify", "--full")


@needs_strace
@pytest.mark.parametrize("retention", [(), ("-c", "file_snapshots.retention_max_snapshots=1")],
                         ids=["keep-all", "keep-one"])
def test_gc_finishes_a_capture_killed_before_its_ref_line(tmp_path: Path, retention: tuple[str, ...]) -> None:
    """The interrupted snapshot is the workspace's newest: gc lists it before retention, never sweeps it."""
    home, ws, first, _t1, t2 = _two_states(tmp_path)
    orphan = _kill_before_its_ref_line(home, ws)
    _age_store(home)
    before = store_files(home / "file_snapshots")
    dry = _ok(home, ws, *GRACE0, *retention, "snapshots", "gc", "--dry-run")
    assert store_files(home / "file_snapshots") == before, dry.stdout
    _ok(home, ws, *GRACE0, *retention, "snapshots", "gc")
    assert _listed(home, ws) == ([orphan] if retention else [first, orphan])
    assert orphan in _snapshot_files(home)
    assert not [p for p in (home / "file_snapshots" / "journal").iterdir()]
    ver = _ok(home, ws, "snapshots", "verify", "--full")
    assert "interrupted" not in ver.stdout, ver.stdout
    write(ws, "a.txt", b"scribbled\n")
    _ok(home, ws, "snapshots", "restore", orphan, "--yes")
    assert tree(ws) == t2


@needs_strace
def test_a_capture_killed_before_its_snapshot_file_leaves_nothing_the_next_capture_or_gc_cannot_clear(
        tmp_path: Path) -> None:
    """Killed at the rename that would name its snapshot file (pack, index, snapshot: the third rename)."""
    home, ws, first, _t1, t2 = _two_states(tmp_path)
    before = _snapshot_files(home)
    assert STRACE is not None
    killer = (STRACE, "-f", "-qq", "-o", os.devnull, "-e", "trace=rename,renameat,renameat2",
              "-e", "inject=rename,renameat,renameat2:signal=KILL:when=3")
    res = _run(home, ws, "snapshots", "capture", prefix=killer)
    assert res.returncode in (-9, 137), (res.returncode, res.stdout, res.stderr)
    assert _snapshot_files(home) == before
    assert list((home / "file_snapshots" / "snapshots").glob("*/.tmp-*")), "the kill did not hit the snapshot file"
    ver = _ok(home, ws, "snapshots", "verify", "--full")
    assert "damaged" not in ver.stdout.lower()
    second = _ok(home, ws, "snapshots", "capture").stdout.strip()
    assert _listed(home, ws) == [first, second]
    assert not [p for p in (home / "file_snapshots" / "journal").iterdir()]
    _age_store(home)
    _ok(home, ws, *GRACE0, "snapshots", "gc")
    assert not list((home / "file_snapshots" / "snapshots").glob("*/.tmp-*"))
    ver = _ok(home, ws, "snapshots", "verify", "--full")
    assert "warning" not in ver.stdout, ver.stdout
    write(ws, "a.txt", b"scribbled\n")
    _ok(home, ws, "snapshots", "restore", second, "--yes")
    assert tree(ws) == t2


def test_an_interrupted_capture_that_cannot_be_restored_is_dropped_then_swept_after_the_grace_period(
        tmp_path: Path) -> None:
    """A marked snapshot whose file is whole but one of whose blobs is gone (damage, since blobs are durable before
    the file): the next capture does not list it; `dropped` records it, so neither verify nor gc calls it lost
    history, and gc sweeps it once it is older than the grace period — not before."""
    home, ws = tmp_path / "home", Path(os.path.realpath(tmp_path)) / "ws"
    store_dir = home / "file_snapshots"
    write(ws, "a.txt", b"1\n")
    with Store.open(store_dir) as store:
        first = store.at(ws).capture().id
        root = str(store.workspace(ws))
    rec = SnapshotRecord(root=root, created=time.time(), kind="capture", label=None, parent=first, depth=1,
                         changes={"gone.bin": parse_entry(["f", 0o644, 5, "ab" * 32])}, meta={"file_count": 2})
    data = rec.encode()
    orphan = digest_hex(data)
    (store_dir / "snapshots" / orphan[:2]).mkdir(exist_ok=True)
    (store_dir / "snapshots" / orphan[:2] / orphan).write_bytes(data)
    commits.mark(commits.marker_path(store_dir, workspace_key(root), orphan))
    _age_store(home, 1800.0)  # older than verify's in-progress allowance, younger than the grace period
    ver = _ok(home, ws, "snapshots", "verify")
    assert any(orphan in line and "cannot be finished" in line and "drops it" in line
               for line in ver.stdout.splitlines()), ver.stdout
    second = _ok(home, ws, "snapshots", "capture").stdout.strip()
    assert _listed(home, ws) == [first, second]
    assert orphan in (store_dir / "dropped").read_text().split()
    assert not list((store_dir / "journal").iterdir())
    ver = _ok(home, ws, "snapshots", "verify")
    assert "interrupted" not in ver.stdout and "named by no ref" not in ver.stdout, ver.stdout
    _ok(home, ws, "snapshots", "gc")  # the grace period is not over: kept
    assert orphan in _snapshot_files(home)
    _age_store(home)
    _ok(home, ws, "snapshots", "gc")
    assert orphan not in _snapshot_files(home)
    assert not (store_dir / "dropped").exists()
    assert _listed(home, ws) == [first, second]
    _ok(home, ws, "snapshots", "verify", "--full")


_CAPTURES = """
import sys
from pathlib import Path
from snapshot_store import Store
store_dir, ws, me = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
with Store.open(store_dir) as store:
    for n in range(8):
        (ws / f"p{me}.txt").write_text(f"{me} {n}\\n")
        print(store.at(ws).capture().id, flush=True)
"""


def test_concurrent_captures_of_one_workspace_never_take_a_running_commit_for_an_interrupted_one(
        tmp_path: Path) -> None:
    """Four processes capture one workspace at once: each holds the ref log's lock from its marker to its ref line,
    so no capture finishes another's commit — every snapshot is listed exactly once and no marker is left."""
    home, ws = tmp_path / "home", Path(os.path.realpath(tmp_path)) / "ws"
    write(ws, "a.txt", b"0\n")
    _ok(home, ws, "snapshots", "capture")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", _CAPTURES, str(home / "file_snapshots"), str(ws), str(i)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    made: list[str] = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        made += out.split()
    lines = [json.loads(line)["id"] for line in _ref(home, ws).read_text().splitlines()]
    assert len(lines) == len(set(lines)) == 1 + 4 * 8
    assert set(made) <= set(lines)
    assert _snapshot_files(home) == set(lines)
    assert not list((home / "file_snapshots" / "journal").iterdir())
    ver = _ok(home, ws, "snapshots", "verify", "--full")
    assert "warning" not in ver.stdout, ver.stdout


@needs_strace
def test_a_sessions_captures_after_another_process_was_killed_before_its_ref_line_grow_from_that_snapshot(
        tmp_path: Path) -> None:
    """A long-running process (change journal, a turn's reusing capture) meets the interrupted snapshot as the
    workspace's newest once it is finished: the same state answers with it, a new state is a delta on it."""
    home, ws = tmp_path / "home", Path(os.path.realpath(tmp_path)) / "ws"
    write(ws, "a.txt", b"one\n")
    for n in range(12):
        write(ws, f"lib/f{n}.txt", f"file {n}\n".encode())
    first = _ok(home, ws, "snapshots", "capture").stdout.strip()
    with Store.open(home / "file_snapshots") as store:
        assert store.capturer.watch(ws)
        assert store.at(ws).capture_thread_summary(known_paths=[]).id == first  # the journal's first capture
        write(ws, "a.txt", b"two\n")
        write(ws, "lib/new.bin", os.urandom(4000))
        t2 = tree(ws)
        orphan = _kill_before_its_ref_line(home, ws)
        same = store.at(ws).capture_thread_summary(known_paths=[])  # a turn's capture: the state the orphan holds
        assert (same.id, same.reused) == (orphan, True)
        assert [i.id for i in store.list_snapshots(ws)] == [first, orphan]
        write(ws, "a.txt", b"three\n")
        (ws / "lib" / "f3.txt").unlink()
        t3 = tree(ws)
        nxt = store.at(ws).capture_thread_summary(known_paths=[])
        assert not nxt.reused and store.record(nxt.id).parent == orphan
        assert [i.id for i in store.list_snapshots(ws)] == [first, orphan, nxt.id]
        for snap, want in ((orphan, t2), (nxt.id, t3)):
            store.at(ws).restore(snap)
            assert tree(ws) == want, snap
    _ok(home, ws, "snapshots", "verify", "--full")
