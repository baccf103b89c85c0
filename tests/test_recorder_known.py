"""A thread's turn captures keep everything the thread tracks (app/recording/recorder.py): its agent-touched paths
and every path it captured before, never another thread's, without decoding its latest snapshot when it is the
workspace's.

Each step opens the store afresh, as `codexr exec --thread ID` does in a new process: only what is on disk is
carried between them. Files are aged and the tests wait past the racy-timestamp window where a capture must be
able to vouch for what it saw.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from store_helpers import age_tree, make_repo, write

import snapshot_store.repository.repo as repo_mod
from app.recording.recorder import Recorder, TurnState
from app.recording.sidecar import Sidecars
from snapshot_store import Store, StoreError
from snapshot_store.manifest import captured_paths, is_captured
from snapshot_store.settings import ScopeSettings
from snapshot_store.vocab import SnapshotKind

SETTLE = 0.15  # past statcache.FINE_WINDOW_NS: what a capture sees then, it may vouch for
SMALL = ScopeSettings(residue_max_files=1000, residue_max_file_bytes=1000)  # a 4 KB untracked file: only if known
BIG = "x" * 4000


def recorder(s: Store, store_dir: Path, ws: Path) -> Recorder:
    """The recorder a codexr process binds to the workspace (app/recording/recording.py)."""
    return Recorder(s, Sidecars(store_dir), ws, SMALL, tracking=True)


def run_turn(store_dir: Path, ws: Path, thread: str, touched: list[str]) -> None:
    """One turn of `thread` in a fresh process: its pre-turn capture, then the agent touched `touched`, then its
    post-turn capture."""
    with Store.open(store_dir) as s:
        rec = recorder(s, store_dir, ws)
        side = rec.sidecar(thread)
        pre, _ = rec.begin(side, "go")
        rec.bind(thread, side, f"turn-{time.time_ns()}", "go", pre)
        turn_id = rec.sidecars.load(thread).turns[-1].turn_id  # type: ignore[union-attr]
        for rel in touched:
            write(ws, rel, BIG)
        age_tree(ws, settle=SETTLE)
        done = rec.finish(thread, turn_id, "go", TurnState(touched=touched), "completed", pre)
        assert done.capture_error is None and done.post is not None


def expected(store_dir: Path, ws: Path, thread: str) -> dict:
    """What the thread's capture must hold: a walk (a preview never uses the saved walk) over its agent-touched paths
    and everything its latest snapshot captured."""
    with Store.open(store_dir) as s:
        side = Sidecars(store_dir).load(thread)
        assert side is not None
        latest = side.latest_snapshot()
        assert latest is not None
        known = [*side.agent_touched, *captured_paths(s.files(latest))]
        return dict(s.at(ws).preview(known_paths=known, scope=SMALL).files)


def resumed_capture(store_dir: Path, ws: Path, thread: str) -> dict:
    """The pre-turn capture of the resumed thread (`codexr exec --thread ID`) in a fresh process: its map."""
    with Store.open(store_dir) as s:
        rec = recorder(s, store_dir, ws)
        snap = rec.capture(rec.sidecar(thread), SnapshotKind.PRE_TURN, "before: again")
    assert snap is not None
    with Store.open(store_dir) as s:
        return dict(s.files(snap))


@pytest.fixture
def repo(ws: Path) -> Path:
    make_repo(ws, {"README.md": "readme\n", "src/a.py": "a = 1\n"})
    write(ws, "notes.txt", "untracked notes\n")  # residue: captured while small, then tracked by the thread
    age_tree(ws, settle=SETTLE)
    return ws


def test_a_resumed_threads_unchanged_capture_decodes_no_manifest(repo: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 21: at 100,000 files decoding the thread's latest snapshot to list its paths cost 1.5 s before the
    resumed thread's turn even started. Its latest is the workspace's: the capture grows from it instead, and records
    the same map, the agent-touched file (too large for the residue) included."""
    store_dir = tmp_path / "store"
    run_turn(store_dir, repo, "thread-a", ["big.log"])
    want = expected(store_dir, repo, "thread-a")
    time.sleep(SETTLE)
    with monkeypatch.context() as m:
        def refuse(*_a: object, **_k: object) -> None:
            raise AssertionError("decoded a manifest")

        m.setattr(repo_mod.Repository, "files", refuse)
        with Store.open(store_dir) as s:
            rec = recorder(s, store_dir, repo)
            snap = rec.capture(rec.sidecar("thread-a"), SnapshotKind.PRE_TURN, "before: again")
    assert snap is not None
    with Store.open(store_dir) as s:
        got = dict(s.files(snap))
    assert is_captured(got["big.log"]) and is_captured(got["notes.txt"])
    assert got == want


@pytest.mark.parametrize("other_after", [False, True], ids=["latest-is-the-threads", "another-thread-came-after"])
def test_a_resumed_thread_keeps_what_it_tracked_and_not_another_threads_paths(
        repo: Path, tmp_path: Path, other_after: bool) -> None:
    """Tracking only grows: a residue file the thread captured stays captured once it is too large for the residue,
    and its agent-touched file too. Another thread's agent-touched file (as large) stays that thread's, whether it
    captured before this thread's last turn or after it (then this thread's latest is not the workspace's)."""
    store_dir = tmp_path / "store"
    if not other_after:
        run_turn(store_dir, repo, "thread-b", ["other.log"])
    run_turn(store_dir, repo, "thread-a", ["big.log"])
    if other_after:
        run_turn(store_dir, repo, "thread-b", ["other.log"])
    write(repo, "notes.txt", BIG)  # over SMALL's residue limit now
    write(repo, "big.log", BIG + "edited\n")
    age_tree(repo, settle=SETTLE)
    want = expected(store_dir, repo, "thread-a")
    got = resumed_capture(store_dir, repo, "thread-a")
    assert is_captured(got["notes.txt"]) and got["notes.txt"].size == len(BIG)
    assert is_captured(got["big.log"])
    assert not is_captured(got.get("other.log"))
    assert got == want


@pytest.mark.parametrize("other_after", [False, True], ids=["latest-is-the-threads", "another-thread-came-after"])
def test_a_damaged_latest_snapshot_of_the_thread_is_an_error_not_fewer_paths(
        repo: Path, tmp_path: Path, other_after: bool) -> None:
    """The thread's latest snapshot cannot be read: its capture fails (the turn reports it) rather than capture
    less than the thread tracks, which a later restore would take for paths never seen."""
    store_dir = tmp_path / "store"
    run_turn(store_dir, repo, "thread-a", ["big.log"])
    if other_after:
        run_turn(store_dir, repo, "thread-b", ["other.log"])
    side = Sidecars(store_dir).load("thread-a")
    assert side is not None and side.latest_snapshot() is not None
    latest = str(side.latest_snapshot())
    record = store_dir / "snapshots" / latest[:2] / latest
    record.write_bytes(record.read_bytes()[:-8] + b"damaged!")
    write(repo, "notes.txt", "changed\n")
    age_tree(repo, settle=SETTLE)
    with pytest.raises(StoreError):
        resumed_capture(store_dir, repo, "thread-a")


@pytest.mark.parametrize("other_after", [False, True], ids=["latest-is-the-threads", "another-thread-came-after"])
def test_a_rewinds_safety_capture_holds_what_the_thread_captured_before(repo: Path, tmp_path: Path,
                                                                        other_after: bool) -> None:
    """A rewind's safety capture covers every path the thread captured before, as its turn captures do: a residue
    file it captured while small and that has grown past the limit since is held, with its content now, whether the
    thread's latest snapshot is the workspace's (the capture grows from it) or another thread captured after it
    (whose captures held that file back). (The target witnessed that file absent, which alone lifts the size limit
    for it: this holds the promise, not the way the thread's latest snapshot reaches the capture.)"""
    from app.rewind.revert import rewind_files

    store_dir = tmp_path / "store"
    run_turn(store_dir, repo, "thread-a", ["big.log"])
    write(repo, "late.txt", "small, after the first prompt\n")
    age_tree(repo, settle=SETTLE)
    run_turn(store_dir, repo, "thread-a", [])  # captures late.txt as residue
    write(repo, "late.txt", BIG)  # over SMALL's residue limit now
    age_tree(repo, settle=SETTLE)
    if other_after:
        run_turn(store_dir, repo, "thread-b", ["other.log"])
    side = Sidecars(store_dir).load("thread-a")
    assert side is not None
    first = side.turns[0]
    with Store.open(store_dir) as s:
        assert "late.txt" not in s.files(str(first.pre))  # the rewind's target never held it
        if other_after:
            latest = s.latest(s.workspace(repo))
            assert latest is not None and not is_captured(s.files(latest).get("late.txt"))
        rec = recorder(s, store_dir, repo)
        done = rewind_files(rec, "thread-a", first.turn_id, tmp_path / "codex-home", keep=lambda: "thread-a",
                            hold={"test": True})
        safety = done.result.safety_id if done.result is not None else None
        assert safety is not None
        held = s.files(safety).get("late.txt")
    assert is_captured(held) and held.size == len(BIG)  # type: ignore[union-attr]
    assert (repo / "late.txt").read_text() == BIG  # not the target's: left as it is
