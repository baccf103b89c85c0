"""Rewind and redo survive kills and concurrent writers; a declined one changes nothing.

The real Codex against the scripted model. Kills are real SIGKILLs of a `codexr` process, delivered
by strace at a chosen system call.
"""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from e2e_helpers import Rig, RigFactory, files_only, tree_diff

from app.codex.scripted_model import add_file, delete_file, message, update_file
from app.rewind.picks import REWOUND, Picks
from app.session import Declined, RedoPreview, RewindPreview
from snapshot_store.ids import workspace_key

REPO = Path(__file__).parents[1]
STRACE = shutil.which("strace")


def _two_prompts(rig: Rig, tag: str) -> tuple[str, list[dict[str, object]]]:
    """Prompt 1 adds a.txt; prompt 2 changes it and adds b.txt. Returns the thread and the trees after each."""
    rig.model.script(f"{tag}-one", [add_file("a.txt", "first\n"), message("one")])
    rig.model.script(f"{tag}-two", [update_file("a.txt", "first", "second"), add_file("b.txt", "bee\n"),
                                    message("two")])
    tid = rig.session.start_thread()
    trees = [rig.tree()]
    for p in (f"{tag}-one please", f"{tag}-two please"):
        assert rig.turn(tid, p).status == "completed"
        trees.append(rig.tree())
    return tid, trees


def _codexr(rig: Rig, *args: str, stdin: int | None = subprocess.DEVNULL,
            prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **rig.env}
    return subprocess.run([*prefix, sys.executable, "-m", "app.cli", *args], cwd=rig.ws, env=env, stdin=stdin,
                          capture_output=True, text=True, timeout=180)


def _same(rig: Rig, expected: dict[str, object], what: str) -> None:
    now = rig.tree()
    assert files_only(now) == files_only(expected), f"{what}\n{tree_diff(expected, now)}"


@pytest.mark.skipif(STRACE is None, reason="needs strace")
def test_a_rewind_killed_as_its_restore_finishes_can_be_redone(rigs: RigFactory) -> None:
    rig = rigs.make()
    tid, trees = _two_prompts(rig, "kill-rw")
    rig.session.close()  # one process at a time may own the thread
    journal = rig.home / "file_snapshots" / "journal" / f"{workspace_key(str(rig.ws))}.json"
    # SIGKILL at the moment the restore removes its journal: every file is written, nothing after runs.
    killer = (str(STRACE), "-qq", "-o", os.devnull, "-P", str(journal), "-e", "trace=unlink,unlinkat",
              "-e", "inject=unlink,unlinkat:signal=KILL")
    res = _codexr(rig, "rewind", "--thread", tid, "--to", "2", "--yes", prefix=killer)
    assert res.returncode in (-9, 137), res.stderr
    assert journal.exists()
    cap = _codexr(rig, "snapshots", "capture")  # the next command finishes the interrupted restore
    assert cap.returncode == 0, cap.stderr
    _same(rig, trees[1], "the interrupted rewind was finished")
    side_dir = rig.home / "file_snapshots" / "refs" / "threads"
    forks = [p.stem for p in side_dir.glob("*.json") if p.stem != tid]
    assert len(forks) == 1, "the rewind's redo entry was not saved before its files changed"
    red = _codexr(rig, "redo", "--thread", forks[0], "--yes")
    assert red.returncode == 0, red.stderr
    _same(rig, trees[2], "redo after the killed rewind")


def test_a_declined_rewind_creates_no_fork_and_changes_nothing(rigs: RigFactory) -> None:
    rig = rigs.make()
    tid, trees = _two_prompts(rig, "decline-rw")
    threads = rig.thread_ids()
    seen: list[RewindPreview] = []

    def no(preview: RewindPreview) -> bool:
        seen.append(preview)
        return False

    with pytest.raises(Declined):
        rig.session.rewind(tid, 2, confirm=no)
    assert seen and seen[0].plan is not None and seen[0].plan.writes
    assert rig.thread_ids() == threads
    assert not rig.session.sidecars.load(tid).redo  # type: ignore[union-attr]
    _same(rig, trees[2], "declined rewind")


def test_a_declined_cli_rewind_exits_1(rigs: RigFactory) -> None:
    rig = rigs.make()
    tid, trees = _two_prompts(rig, "decline-cli")
    rig.session.close()
    main, child = pty.openpty()
    os.write(main, b"n\n")
    try:
        res = _codexr(rig, "rewind", "--thread", tid, "--to", "2", stdin=child)
    finally:
        os.close(child)
        os.close(main)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "nothing changed" in res.stdout
    _same(rig, trees[2], "declined CLI rewind")
    side_dir = rig.home / "file_snapshots" / "refs" / "threads"
    assert [p.stem for p in side_dir.glob("*.json")] == [tid]


def test_redo_names_what_changed_since_the_rewind_before_restoring(rigs: RigFactory) -> None:
    """Also where the walk never looks: a file in a churn directory the redo's plan deletes."""
    rig = rigs.make()
    m = rig.model
    m.script("since-one", [add_file("build/deploy.sh", "deploy\n"), add_file("a.txt", "a\n"), message("one")])
    m.script("since-two", [delete_file("build/deploy.sh"), message("two")])
    # c.txt: created by prompt three, deleted by the rewind and still absent — not a change since the rewind
    m.script("since-three", [update_file("a.txt", "a", "A"), add_file("c.txt", "c\n"), message("three")])
    s = rig.session
    tid = s.start_thread()
    for p in ("since-one please", "since-two please", "since-three please"):
        assert rig.turn(tid, p).status == "completed"
    after_three = rig.tree()
    r = s.rewind(tid, 3)
    assert not (rig.ws / "build" / "deploy.sh").exists()
    rig.write("build/deploy.sh", "made again by a shell command\n")
    rig.write("a.txt", "edited after the rewind\n")
    previews: list[RedoPreview] = []

    def look(preview: RedoPreview) -> bool:
        previews.append(preview)
        # nothing is restored yet while the user reads the list
        assert (rig.ws / "a.txt").read_text() == "edited after the rewind\n"
        return True

    # issue 34: what changed since the rewind is the user's, so the redo keeps it (a.txt, which the rewind also
    # changed, is a conflict); nothing is overwritten unless chosen
    kept = s.redo(r.thread_id, dry_run=True)
    assert kept.changed_since_rewind == [] and kept.decided["build/deploy.sh"].kind == "kept", kept
    assert kept.decided["a.txt"].kind == "conflict", kept.decided
    take = Picks(choice={"a.txt": REWOUND, "build/deploy.sh": REWOUND})  # the user takes the redone states
    dry = s.redo(r.thread_id, dry_run=True, picks=take)
    red = s.redo(r.thread_id, confirm=look, picks=take)
    assert previews and previews[0].changed_since_rewind == ["a.txt", "build/deploy.sh"]
    assert dry.changed_since_rewind == red.changed_since_rewind == ["a.txt", "build/deploy.sh"]
    _same(rig, after_three, "redo")


def test_a_turn_does_not_overwrite_a_rewind_recorded_meanwhile(rigs: RigFactory) -> None:
    """`run_turn` re-reads the sidecar under its lock: a redo entry written during the turn stays."""
    rig = rigs.make()
    tid, _trees = _two_prompts(rig, "rmw")
    s = rig.session
    rig.model.script("rmw-three", [add_file("c.txt", "c\n"), message("three")])
    r = s.rewind(tid, 2, mode="files")  # the redo entry lands on this same thread

    def during(method: str, _params: dict[str, object]) -> None:
        if method == "turn/started":
            s.sidecars.update(tid, lambda side: side.history.append({"event": "from another process"}))

    assert rig.turn(tid, "rmw-three please", on_event=during).status == "completed"
    side = s.sidecars.load(tid)
    assert side is not None and len(side.redo) == 1 and r.safety_id == side.redo[0].safety_id
    assert {"event": "from another process"} in side.history
    assert "c.txt" in side.agent_touched


def test_a_failing_post_turn_capture_keeps_the_agent_touched_paths(rigs: RigFactory,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from snapshot_store import StoreFull

    rig = rigs.make()
    rig.model.script("post-fails", [add_file("made.txt", "m\n"), message("done")])
    s = rig.session
    real = s.store.capturer.capture_thread_summary  # what a turn's captures call

    def capture(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
        if kwargs.get("kind") == "post-turn":
            raise StoreFull("capture of ws: the disk is full; nothing was committed")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(s.store.capturer, "capture_thread_summary", capture)
    tid = s.start_thread()
    out = rig.turn(tid, "post-fails please")
    assert out.status == "completed" and out.post is None
    assert out.capture_error is not None and "disk is full" in out.capture_error
    side = s.sidecars.load(tid)
    assert side is not None and side.agent_touched == ["made.txt"]
    assert side.turns[0].status == "completed" and side.turns[0].pre is not None


def test_the_session_runs_automatic_gc_after_a_turn(rigs: RigFactory) -> None:
    """Auto-gc used to run only from `snapshots capture`; sessions, where users work, never ran it."""
    rig = rigs.make(config_extra="[file_snapshots]\ngc_grace_seconds = 0\n")
    rig.model.script("autogc", [add_file("g.txt", "g\n"), message("ok")])
    s = rig.session
    marker = rig.home / "file_snapshots" / "gc.last"
    tid = s.start_thread()
    for n in range(2):
        marker.unlink(missing_ok=True)  # due
        rig.write("mine.txt", f"{n}\n")
        assert rig.turn(tid, "autogc please").status == "completed"
        assert s._gc_thread is not None
        s._gc_thread.join()
        assert marker.exists()
    assert len([p for m, p in rig.notices if m == "codexr/gc"]) == 2
    assert rig.turn(tid, "autogc please").status == "completed"  # not due again the same day
    s.close()
    assert len([p for m, p in rig.notices if m == "codexr/gc"]) == 2
