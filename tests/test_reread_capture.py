"""A capture after files changed in place reads those files again and writes their delta on the parent, whose map it
never decodes (Capturer._reread_only; issue 35: decoding a 100,000-file parent's chain was ~0.5 s of such a capture).

Each capture opens the store afresh, as a one-shot command or a session's first turn does. What a user relies on: the
snapshot holds exactly what a full capture would (files, links, modes), a touched but unchanged tree writes nothing
for a turn, a session goes on from its journal after such a capture (no walk), and what the shortcut cannot vouch for
(a file gone, grown past the residue limit, made a directory) still gets the full capture's verdict.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from store_helpers import age_tree, make_repo, tree, write

import snapshot_store.scope as scope_mod
from app.recording.recorder import Recorder, TurnState
from app.recording.sidecar import Sidecars
from snapshot_store import RetentionPolicy, Store
from snapshot_store.capture import Capturer, CaptureResult
from snapshot_store.detect import walkstate
from snapshot_store.maint.gc import gc
from snapshot_store.manifest import ABSENT, FileMap, is_captured
from snapshot_store.repository.repo import Repository
from snapshot_store.settings import ScopeSettings

SCOPE = ScopeSettings(residue_max_files=1000, residue_max_file_bytes=1000)  # a 5 KB untracked file: held back
SETTLE = 0.15  # past the stat cache's racy window: what a capture sees then, the next may vouch for
FILES = {f"src/m{i}.py": f"print({i})\n" for i in range(12)} | {"README.md": "hello\n", "docs/a/b.md": "# b\n"}


def workspace(tmp_path: Path) -> tuple[Path, Path, str]:
    """A Git workspace with one untracked file, captured once and left alone past the racy window: (ws, store, id)."""
    ws = make_repo(tmp_path / "ws", FILES)
    write(ws, "notes.txt", b"untracked\n")
    age_tree(ws)
    with Store.open(tmp_path / "store") as s:
        first = s.at(ws).capture_summary(scope=SCOPE).id
    time.sleep(SETTLE)
    return ws, tmp_path / "store", first


def decoded(store_dir: Path, snap: str) -> dict:
    with Store.open(store_dir) as s:
        return dict(s.files(snap))


_ALLOWED: list[bool] = []  # set while full_capture_now walks (no_walk lets it)


def full_capture_now(store_dir: Path, ws: Path, known: list[str] | None = None) -> dict:
    """What a full look at the workspace finds now, growing from the newest snapshot as the capture does."""
    _ALLOWED.append(True)
    try:
        with Store.open(store_dir) as s:
            latest = s.latest(s.workspace(ws))
            assert latest is not None
            grown = [p for p, e in s.files(latest).items() if is_captured(e)]
            return dict(s.at(ws).preview(scope=SCOPE, known_paths=[*grown, *(known or [])]).files)
    finally:
        _ALLOWED.pop()


def thread_capture_now(store_dir: Path, ws: Path, known: list[str], scope: ScopeSettings = SCOPE) -> dict:
    """What a full look at the workspace finds now for a thread that knows `known` (it grows from nothing)."""
    _ALLOWED.append(True)
    try:
        with Store.open(store_dir) as s:
            return dict(s.at(ws).preview(scope=scope, known_paths=known).files)
    finally:
        _ALLOWED.pop()


def no_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    real = scope_mod.select

    def walked(*a: Any, **k: Any) -> Any:
        if _ALLOWED:
            return real(*a, **k)
        raise AssertionError("walked")

    monkeypatch.setattr(scope_mod, "select", walked)


def test_a_gc_that_deletes_nothing_leaves_the_next_capture_its_saved_walk(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A new store's first capture is followed by its automatic gc: when that gc finds nothing to delete, the next
    capture still goes by the saved walk instead of walking (issue 35: ~3.8 s instead of ~0.6 s at 100,000 files)."""
    ws, store_dir, first = workspace(tmp_path)
    generation = store_dir / "generation"
    before = generation.read_bytes() if generation.exists() else None
    with Store.open(store_dir) as s:
        plan = gc(s, RetentionPolicy(max_age_days=0, max_snapshots_per_workspace=0, max_store_bytes=0,
                                     grace_seconds=0, keep_latest=1))
    assert not plan.delete_packs and not plan.delete_snapshots
    assert (generation.read_bytes() if generation.exists() else None) == before
    (ws / "src/m3.py").write_text("print('three')\n")
    time.sleep(SETTLE)
    want = full_capture_now(store_dir, ws)
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        res = s.at(ws).capture_summary(scope=SCOPE)
    assert decoded(store_dir, res.id) == want
    assert s.record(res.id).parent == first


def test_files_changed_in_place_are_read_again_without_decoding_the_parent(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    ws, store_dir, first = workspace(tmp_path)
    (ws / "src/m3.py").write_text("print('three')\n")
    (ws / "notes.txt").write_text("untracked, edited\n")
    os.chmod(ws / "src/m5.py", 0o755)
    time.sleep(SETTLE)
    want = full_capture_now(store_dir, ws)
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        res = s.at(ws).capture_summary(scope=SCOPE)
        assert first not in s._maps and first not in s._records, "the parent's map was decoded"
        rec = s.record(res.id)
    assert not res.unchanged and res.file_count == len(FILES) + 1
    assert rec.parent == first and sorted(rec.changes) == ["notes.txt", "src/m3.py", "src/m5.py"]
    assert decoded(store_dir, res.id) == want
    # and the snapshot restores as any other: back to the first state and forward again
    with Store.open(store_dir) as s:
        s.at(ws).restore(first, scope=SCOPE)
        assert (ws / "src/m3.py").read_text() == "print(3)\n" and tree(ws)["src/m5.py"][1] & 0o777 == 0o644
        s.at(ws).restore(res.id, scope=SCOPE)
    assert (ws / "src/m3.py").read_text() == "print('three')\n"
    assert tree(ws)["src/m5.py"][1] & 0o777 == 0o755


def removed(tmp_path: Path) -> tuple[Path, Path, str, str]:
    """`workspace` with its untracked file removed since, then captured (its absence: a tombstone, as the capture grew
    from a map that captured it) and left alone past the racy window: (ws, store, the first capture, this one)."""
    ws, store_dir, first = workspace(tmp_path)
    (ws / "notes.txt").unlink()
    time.sleep(SETTLE)
    with Store.open(store_dir) as s:
        gone = s.at(ws).capture_summary(scope=SCOPE)
    assert decoded(store_dir, gone.id)["notes.txt"].kind == "-"
    assert gone.file_count == len(FILES)
    time.sleep(SETTLE)
    return ws, store_dir, first, gone.id


def test_the_captures_after_a_removal_write_and_drop_its_tombstone_without_decoding_the_parent(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35: after an untracked file's removal (a rewind taking a turn's new file back) the first capture records
    its absence and the second, growing from a map that no longer captures it, covers it no more: a walk records
    nothing there. At 100,000 files each of them decoded the parent's map and the saved walk's keys (~0.6 and ~0.5
    s); now the first writes the file's tombstone, the second its removal, on the parent, whose map neither decodes,
    and each holds what a full capture would. The one after them finds nothing moved."""
    ws, store_dir, first = workspace(tmp_path)
    (ws / "notes.txt").unlink()
    time.sleep(SETTLE)
    want = full_capture_now(store_dir, ws)
    assert want["notes.txt"].kind == "-"
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:  # the removal's: the file's tombstone written on the parent, nothing decoded
        gone = s.at(ws).capture_summary(scope=SCOPE).id
        assert first not in s._maps and first not in s._records, "the parent's map was decoded"
        assert s.record(gone).changes == {"notes.txt": ABSENT}
    assert decoded(store_dir, gone) == want
    time.sleep(SETTLE)
    want = full_capture_now(store_dir, ws)
    assert "notes.txt" not in want
    with Store.open(store_dir) as s:
        res = s.at(ws).capture_summary(scope=SCOPE)
        assert gone not in s._maps and gone not in s._records, "the parent's map was decoded"
        rec = s.record(res.id)
    assert not res.unchanged and res.file_count == len(FILES)
    assert rec.parent == gone and rec.changes == {"notes.txt": None}
    assert decoded(store_dir, res.id) == want
    with Store.open(store_dir) as s:
        again = s.at(ws).capture_summary(scope=SCOPE)
        assert res.id not in s._maps
    assert again.unchanged and decoded(store_dir, again.id) == want
    # and it restores as any other: the file back from the first capture, gone again from this one
    monkeypatch.undo()  # (the restores' safety captures may walk)
    now = tree(ws)
    with Store.open(store_dir) as s:
        s.at(ws).restore(first, scope=SCOPE)
        assert (ws / "notes.txt").read_text() == "untracked\n"
        s.at(ws).restore(res.id, scope=SCOPE)
    assert tree(ws) == now


@pytest.mark.parametrize("change", ["nested", "two", "tracked", "known", "dir"])
def test_captures_after_removals_hold_what_a_full_capture_would(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                change: str) -> None:
    """Removals the tombstone shortcut must get right or leave alone: untracked files below directories, two at once,
    a Git-tracked file (covered still: its tombstone stays), a path the caller names (covered still), a directory
    gone with its file (its parent's listing moved: the first capture walks, the second drops the file's tombstone).
    Three captures each, every one the full capture's map."""
    ws, store_dir, _first = workspace(tmp_path)
    write(ws, "work/deep/a.log", b"log\n")
    write(ws, "work/b.log", b"b\n")
    time.sleep(SETTLE)
    with Store.open(store_dir) as s:
        s.at(ws).capture_summary(scope=SCOPE)
    time.sleep(SETTLE)
    gone = {"nested": ["work/deep/a.log"], "two": ["work/b.log", "notes.txt"], "tracked": ["src/m1.py"],
            "known": ["notes.txt"], "dir": ["work/deep/a.log", "work/deep"]}[change]
    known = ["notes.txt"] if change == "known" else []
    for rel in gone:
        (ws / rel).rmdir() if (ws / rel).is_dir() else (ws / rel).unlink()
    taken: list[bool] = []
    real = Capturer._tombstones_dropped

    def spy(self: Capturer, *a: Any) -> Any:
        out = real(self, *a)
        taken.append(out is not None)
        return out

    monkeypatch.setattr(Capturer, "_tombstones_dropped", spy)
    for _ in range(3):
        time.sleep(SETTLE)
        want = full_capture_now(store_dir, ws, known)
        with Store.open(store_dir) as s:
            res = s.at(ws).capture_summary(scope=SCOPE, known_paths=known)
        assert decoded(store_dir, res.id) == want
        assert res.file_count == sum(1 for e in want.values() if is_captured(e))
    # the shortcut where a walk drops the tombstones, not where they stay
    assert any(taken) is (change in ("nested", "two", "dir")), taken


@pytest.mark.parametrize("change", ["made", "made below", "remade", "hidden", "ignored", "too large", "symlink",
                                    "thread", "thread after growing", "thread over the limit", "new directory"])
def test_the_capture_after_files_were_made_holds_what_a_full_capture_would(tmp_path: Path, change: str) -> None:
    """Issue 35: a file made between captures made the next one decode the parent's map (~0.6-1.0 s one-shot at
    100,000 files). Growing, a walk captures a new untracked file whatever the parent held (its captured files are
    covered, so the recent-file limit counts only the new ones): the capture now reads the new files and writes them
    on the parent, as it does files changed in place, without decoding it. What a walk holds back (hidden, ignored,
    too large), a thread's capture (the limit counts the parent's untracked files too), a file made again where the
    parent recorded its absence (the saved walk covered that path, a walk would not) and a new directory get the
    full capture. A thread's capture counts the untracked files the parent took too (the saved walk's files outside
    what it covered, and those it covered that the thread does not: a growing capture's walk covered the parent's
    untracked file); `codexr exec` on a new thread after a file made by hand. Past the limit, the full capture.
    Each capture's map is the full capture's, and the one after it finds nothing moved."""
    ws, store_dir, _first = workspace(tmp_path)
    write(ws, ".codexsnapignore", b"*.tmp\n")
    if change == "remade":
        (ws / "notes.txt").unlink()
    thread = change.startswith("thread")
    scope = ScopeSettings(residue_max_files=1, residue_max_file_bytes=1000) if change.endswith("limit") else SCOPE
    time.sleep(SETTLE)
    with Store.open(store_dir) as s:
        if thread and change != "thread after growing":  # the saved walk covers the Git listing: notes.txt is residue
            parent = s.at(ws).capture_thread_summary(known_paths=[], scope=scope, kind="pre-turn").id
        else:
            parent = s.at(ws).capture_summary(scope=scope).id
    time.sleep(SETTLE)
    made = {"made": "new.txt", "made below": "src/new_module.py", "remade": "notes.txt", "hidden": ".env",
            "ignored": "scratch.tmp", "too large": "big.bin", "new directory": "pkg/new.py",
            "symlink": "link-to-readme"}.get(change, "new.txt")
    if change == "symlink":
        (ws / made).symlink_to("README.md")
    else:
        write(ws, made, b"x" * 5000 if change == "too large" else b"made between turns\n")
    time.sleep(SETTLE)
    shortcut = change in ("made", "made below", "symlink", "thread", "thread after growing")
    for n in range(2):
        want = thread_capture_now(store_dir, ws, [], scope) if thread else full_capture_now(store_dir, ws)
        with Store.open(store_dir) as s:
            if thread:
                res = s.at(ws).capture_thread_summary(known_paths=[], scope=scope, kind="pre-turn")
            else:
                res = s.at(ws).capture_summary(scope=SCOPE)
            if n == 0:
                assert (parent not in s._maps) is shortcut, "the parent's map decoded, or not"
        assert decoded(store_dir, res.id) == want
        assert res.file_count == sum(1 for e in want.values() if is_captured(e))
        assert res.unchanged is (n == 1)
        time.sleep(SETTLE)


def test_a_thread_s_capture_after_removals_records_a_tombstone_where_it_covers_the_path_only(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread's capture covers the Git listing and its own paths: of two untracked files removed, the one it knows
    gets a tombstone and the other (captured by its directory's listing) leaves the map, as a walk would record
    them, without the parent's map decoded."""
    ws, store_dir, _first = workspace(tmp_path)
    write(ws, "other.txt", b"other\n")
    time.sleep(SETTLE)
    known = ["notes.txt"]
    with Store.open(store_dir) as s:
        parent = s.at(ws).capture_thread_summary(known_paths=known, scope=SCOPE, kind="pre-turn").id
    assert is_captured(decoded(store_dir, parent)["other.txt"])
    time.sleep(SETTLE)
    (ws / "notes.txt").unlink()
    (ws / "other.txt").unlink()
    time.sleep(SETTLE)
    want = thread_capture_now(store_dir, ws, known)
    assert want["notes.txt"] == ABSENT and "other.txt" not in want
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        res = s.at(ws).capture_thread_summary(known_paths=known, scope=SCOPE, kind="post-turn")
        assert parent not in s._maps and parent not in s._records, "the parent's map was decoded"
    assert decoded(store_dir, res.id) == want and res.file_count == len(FILES)


@pytest.mark.parametrize("knows", [False, True])
def test_a_thread_s_capture_drops_a_tombstone_it_no_longer_covers_and_keeps_one_it_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, knows: bool) -> None:
    """A thread's capture covers the Git listing and its own paths: a tombstone of a path it does not know is dropped
    (as a walk would, without the parent's map), one of a path it knows stays, the path still looked at."""
    ws, store_dir, _first, gone = removed(tmp_path)
    known = ["notes.txt"] if knows else []
    want = thread_capture_now(store_dir, ws, known)
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        res = s.at(ws).capture_thread_summary(known_paths=known, scope=SCOPE, kind="pre-turn")
        assert gone not in s._maps, "the parent's map was decoded"
    assert decoded(store_dir, res.id) == want
    assert ("notes.txt" in want) is knows


@pytest.mark.parametrize("other", ["untracked", "changed", "hidden", "ignored", "too large", "gone", "over the limit"])
def test_a_new_thread_s_capture_after_another_thread_s_covers_what_a_walk_would(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, other: str) -> None:
    """Another thread's turn wrote a file, so that thread's capture covered it (captured whatever the limits), and its
    walk is the one saved; a new thread (`codexr exec` again) covers only the Git listing. Where a walk now takes that
    file by the recent-file rule all the same, the new thread's capture is the parent's map without decoding it
    (issue 35: ~0.6 s at 100,000 files); where it would not (hidden, ignored, too large, a tombstone, past the limit)
    or the file changed, the full capture. Either way its map is what a walk gives the new thread, and the saved walk
    covers what it covered: the next such capture counts no untracked files again (~0.15 s at 100,000 files), and
    the other thread's next capture still holds its file."""
    counted: list[int] = []
    real = walkstate.residue_taken
    monkeypatch.setattr(walkstate, "residue_taken", lambda state: counted.append(1) or real(state))
    ws, store_dir, _first = workspace(tmp_path)
    write(ws, ".codexsnapignore", b"*.tmp\n")
    path = {"hidden": ".env", "ignored": "scratch.tmp", "too large": "big.bin"}.get(other, "made_by_turn.txt")
    write(ws, path, b"x" * 5000 if other == "too large" else b"the other thread's turn\n")
    scope = ScopeSettings(residue_max_files=1, residue_max_file_bytes=1000) if other == "over the limit" else SCOPE
    time.sleep(SETTLE)
    with Store.open(store_dir) as s:
        parent = s.at(ws).capture_thread_summary(known_paths=[path], scope=scope, kind="post-turn").id
    if other == "gone":
        (ws / path).unlink()
    if other == "changed":
        write(ws, path, b"changed since\n")
    time.sleep(SETTLE)
    for n in range(2):
        want = thread_capture_now(store_dir, ws, [], scope)
        with Store.open(store_dir) as s:
            res = s.at(ws).capture_thread_summary(known_paths=[], scope=scope, kind="pre-turn")
            if n == 0:
                assert (parent not in s._maps) is (other == "untracked"), "the parent's map decoded, or not"
        assert decoded(store_dir, res.id) == want
        assert (path in want and is_captured(want[path])) is (other in ("untracked", "changed", "over the limit"))
        if other == "over the limit":  # the newest file is taken, the other untracked one held back by the limit
            assert want["notes.txt"].kind == "x"
        if other == "untracked":
            assert len(counted) == 1, "the next capture counted the untracked files again"
        time.sleep(SETTLE)
    with Store.open(store_dir) as s:  # the other thread goes on
        res = s.at(ws).capture_thread_summary(known_paths=[path], thread_latest=parent, scope=scope, kind="pre-turn")
    assert decoded(store_dir, res.id) == thread_capture_now(store_dir, ws, [path], scope)



def test_a_new_thread_s_pre_turn_capture_after_another_thread_s_leaves_its_walk_to_a_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The capture above records the parent's map again and writes the saved walk (what it covers changed): for a
    pre-turn capture that write (~56 ms of ~250 at 100,000 files, measured) goes to a thread at once, so the turn is
    not held up by it. The capture returns while the write waits; the store's close waits for it; the file then
    names the new snapshot, and the next capture of the same thread takes it as it is (nothing walked)."""
    from snapshot_store.detect.index import WorkspaceIndex

    ws, store_dir, _first = workspace(tmp_path)
    write(ws, "made_by_turn.txt", b"the other thread's turn\n")
    time.sleep(SETTLE)
    with Store.open(store_dir) as s:
        s.at(ws).capture_thread_summary(known_paths=["made_by_turn.txt"], scope=SCOPE, kind="post-turn")
    time.sleep(SETTLE)
    entered, release, threads = threading.Event(), threading.Event(), []
    real_save = WorkspaceIndex.save

    def held_save(self: WorkspaceIndex, *, per_path: bool = True) -> None:
        threads.append(threading.current_thread() is threading.main_thread())
        if not threads[-1] and not entered.is_set():
            entered.set()
            assert release.wait(30), "the test never let the save go"
        real_save(self, per_path=per_path)

    want = thread_capture_now(store_dir, ws, [])
    with Store.open(store_dir) as s, monkeypatch.context() as m:
        m.setattr(WorkspaceIndex, "save", held_save)
        res = s.at(ws).capture_thread_summary(known_paths=[], scope=SCOPE, kind="pre-turn")
        assert res.unchanged and entered.wait(10) and threads == [False], threads
        release.set()
    assert decoded(store_dir, res.id) == want
    with Store.open(store_dir) as s:
        walk = s.capturer.detect.index(ws).saved_walk()
        assert walk is not None and walk.snapshot == res.id
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        again = s.at(ws).capture_thread_summary(known_paths=[], thread_latest=res.id, scope=SCOPE, kind="pre-turn")
    assert again.unchanged and decoded(store_dir, again.id) == want

def test_a_turn_s_capture_of_touched_but_unchanged_files_names_the_parent(tmp_path: Path) -> None:
    """Saved again with the same bytes (an editor's save, `touch`): a turn's capture is the parent, nothing written."""
    ws, store_dir, first = workspace(tmp_path)
    (ws / "src/m3.py").write_text("print(3)\n")
    os.utime(ws / "README.md")
    time.sleep(SETTLE)
    snaps = set((store_dir / "snapshots").rglob("*"))
    with Store.open(store_dir) as s:
        res = s.at(ws).capture_thread_summary(known_paths=[], thread_latest=first, scope=SCOPE, kind="pre-turn")
        assert first not in s._maps
    assert res.id == first and res.reused and res.unchanged
    assert set((store_dir / "snapshots").rglob("*")) == snaps
    # the saved walk now vouches for the new stats: the next capture finds nothing changed and reads nothing
    with Store.open(store_dir) as s:
        again = s.at(ws).capture_summary(scope=SCOPE)
    assert again.unchanged and again.bytes_hashed == 0


@pytest.mark.parametrize("ahead", [False, True])
@pytest.mark.parametrize("before", ["edited", "removed", "made"])
def test_a_session_goes_on_from_its_journal_after_such_a_capture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  ahead: bool, before: str) -> None:
    """A session's first capture reads only the changed file or the one made, or records a removed one's absence
    (`codexr exec` after a rewind took a turn's new file back: the parent was decoded for it, ~0.6 s at 100,000
    files, and for a made one ~0.6-1.0 s); its journal's next
    capture (the turn made a file and removed one: a check would walk) goes on from the last capture built from the
    parent, on a thread while the turn runs (`ahead`, as a session asks once the turn has started) or then, and does
    not walk."""
    ws, store_dir, first = workspace(tmp_path)
    if before == "edited":
        (ws / "src/m3.py").write_text("print('three')\n")
    elif before == "made":
        (ws / "src/fresh.py").write_text("made by you between turns\n")
    else:
        os.unlink(ws / "notes.txt")
    time.sleep(SETTLE)
    want_pre = full_capture_now(store_dir, ws)
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        assert s.capturer.watch(ws)
        pre = s.at(ws).capture_summary(scope=SCOPE)
        assert first not in s._maps, "the first capture decoded the parent"
        if ahead:
            s.capturer.build_ahead(ws)
        (ws / "src/made.py").write_text("made by the agent\n")
        os.unlink(ws / "docs/a/b.md")
        (ws / "src/m4.py").write_text("print('four')\n")
        want = full_capture_now(store_dir, ws)
        post = s.at(ws).capture_summary(scope=SCOPE)
    with Store.open(store_dir) as s:
        assert sorted(c.path for c in s.diff(pre.id, post.id)) == ["docs/a/b.md", "src/m4.py", "src/made.py"]
        if before == "removed":
            assert s.record(pre.id).changes == {"notes.txt": ABSENT}
    assert decoded(store_dir, pre.id) == want_pre
    # A session's journal keeps covering what it covered (a tombstone too, as it did before the shortcut): a walk
    # growing from `pre` no longer looks there; everything else is the full capture's
    post_map = decoded(store_dir, post.id)
    if before == "removed":
        assert post_map.pop("notes.txt", ABSENT) == ABSENT
    assert post_map == want


@pytest.mark.parametrize("change", ["grown past the limit", "made a directory", "removed", "hard-linked"])
def test_what_the_shortcut_cannot_vouch_for_gets_the_full_capture_s_verdict(tmp_path: Path, change: str) -> None:
    ws, store_dir, _first = workspace(tmp_path)
    (ws / "src/m3.py").write_text("print('three')\n")
    if change == "grown past the limit":
        (ws / "notes.txt").write_bytes(b"x" * 5000)  # untracked, beyond residue_max_file_bytes
    elif change == "made a directory":
        os.unlink(ws / "notes.txt")
        write(ws, "notes.txt/inner.txt", b"now a directory\n")
    elif change == "removed":
        os.unlink(ws / "src/m4.py")
    else:
        os.link(ws / "src/m6.py", tmp_path / "elsewhere.py")
    time.sleep(SETTLE)
    scope = SCOPE
    with Store.open(store_dir) as s:
        latest = s.latest(s.workspace(ws))
        assert latest is not None
        grown = [p for p, e in s.files(latest).items() if is_captured(e)]
        want = dict(s.at(ws).preview(scope=scope, known_paths=grown).files)
    with Store.open(store_dir) as s:
        res = s.at(ws).capture_summary(scope=scope)
    assert decoded(store_dir, res.id) == want
    assert decoded(store_dir, res.id)["src/m3.py"][3] != decoded(store_dir, _first)["src/m3.py"][3]
    if change == "grown past the limit":
        assert want["notes.txt"][:3] == ("f", 0o644, 5000)  # captured before: it stays so, whatever its size


def turn_capture(s: Store, ws: Path, latest: str, kind: str, known: tuple[str, ...] = ()) -> CaptureResult:
    """A turn's capture as the session's recorder asks for it."""
    return s.at(ws).capture_thread_summary(known_paths=list(known), thread_latest=latest, scope=SCOPE, kind=kind)


class Held(NamedTuple):
    """The builds of a session's map, held until released: which ones started and which ended, when."""

    released: threading.Event  # set: the builds go on
    asked: list[str]  # snapshots whose map a build started decoding
    built: list[str]  # ... and decoded


@pytest.fixture
def held_build(monkeypatch: pytest.MonkeyPatch) -> Held:
    """The map a session's journal goes on from, built only once `released` is set."""
    held = Held(threading.Event(), [], [])
    real = Repository.files_aside

    def decode(self: Repository, snap: str) -> FileMap:
        held.asked.append(snap)
        held.released.wait(30)
        held.built.append(snap)
        return real(self, snap)

    monkeypatch.setattr(Repository, "files_aside", decode)
    return held


@pytest.mark.parametrize("during", ["nothing", "a file edited"])
@pytest.mark.parametrize("before", ["nothing", "a file edited"])
def test_a_turn_s_capture_waits_for_no_map_when_its_journal_names_only_files_changed_in_place(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_build: Held, before: str, during: str) -> None:
    """A session's pre-turn capture that found nothing or only files changed in place leaves the map its journal goes
    on from to be built while the turn runs; the post-turn capture of a turn that changed nothing, or only files the
    parent captured, goes on from the saved walk and the journal instead of waiting for it (~0.5 s at 100,000 files,
    issue 35). Files made later still get the fast path from that map, built on from the parent's, and no walk."""
    released, _asked, built = held_build
    ws, store_dir, first = workspace(tmp_path)
    if before != "nothing":
        (ws / "src/m3.py").write_text("print('three')\n")
        time.sleep(SETTLE)
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        assert s.capturer.watch(ws)
        pre = turn_capture(s, ws, first, "pre-turn")
        s.capturer.build_ahead(ws)  # the turn has started
        if during != "nothing":
            (ws / "src/m4.py").write_text("print('four')\n")
        want_post = full_capture_now(store_dir, ws)
        post = turn_capture(s, ws, pre.id, "post-turn")
        assert not built, "the post-turn capture waited for the map"
        rec = s.record(post.id)
        if during == "nothing":
            assert post.id == pre.id and post.reused
        else:
            assert rec.parent == pre.id and sorted(rec.changes) == ["src/m4.py"]
        released.set()
        (ws / "src/made.py").write_text("made by the next turn\n")
        want = full_capture_now(store_dir, ws)
        after = turn_capture(s, ws, post.id, "pre-turn")
    assert built == [first], "the map was decoded again instead of built on"
    assert decoded(store_dir, post.id) == want_post
    assert decoded(store_dir, after.id) == want


def test_a_turn_s_change_below_an_unwatched_directory_is_seen_without_the_map(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_build: Held) -> None:
    """A path the agent touched below a directory nobody walks (node_modules): no journal watch reports on it, so a
    capture that goes on from the journal looks at its stat, and reads it again when it moved."""
    released, _asked, built = held_build
    ws, store_dir, _first = workspace(tmp_path)
    patched = ("node_modules/pkg/patched.js",)
    write(ws, patched[0], b"patched once\n")
    age_tree(ws)
    with Store.open(store_dir) as s:
        base = turn_capture(s, ws, _first, "post-turn", patched).id
    time.sleep(SETTLE)
    no_walk(monkeypatch)
    with Store.open(store_dir) as s:
        assert s.capturer.watch(ws)
        pre = turn_capture(s, ws, base, "pre-turn", patched)
        s.capturer.build_ahead(ws)
        (ws / patched[0]).write_text("patched again by the turn\n")
        want = full_capture_now(store_dir, ws)
        post = turn_capture(s, ws, pre.id, "post-turn", patched)
        assert not built
        assert sorted(s.record(post.id).changes) == [patched[0]]
        released.set()
    assert decoded(store_dir, post.id) == want
    assert want[patched[0]] != decoded(store_dir, pre.id)[patched[0]]


@pytest.mark.parametrize("item", ["commandExecution", "fileChange", "agentMessage"])
def test_a_session_builds_the_map_ahead_once_the_turn_may_change_files(tmp_path: Path, held_build: Held,
                                                                       item: str) -> None:
    """The recorder asks the store to build the map a post-turn capture may go on from at the turn's first item that
    may change files (a command, a patch), so it is decoded while the turn runs; a turn that only talks never has
    it decoded (its post-turn capture goes on from the journal)."""
    released, asked, _built = held_build
    ws, store_dir, first = workspace(tmp_path)
    (ws / "src/m3.py").write_text("print('three')\n")
    time.sleep(SETTLE)
    with Store.open(store_dir) as s:
        assert s.capturer.watch(ws)
        rec = Recorder(s, Sidecars(store_dir), ws, SCOPE, tracking=True)
        side = rec.sidecar("thread-1")
        pre, _seconds = rec.begin(side, "go")
        rec.bind("thread-1", side, "turn-1", "go", pre)
        state = TurnState()
        for kind in ("reasoning", item):
            rec.observe(state, "item/started", {"item": {"type": kind, "id": kind}})
        if item == "agentMessage":
            released.set()
            done = rec.finish("thread-1", "turn-1", "go", state, "completed", pre)
            assert done.post == pre and not asked, "a turn that only talked had the map decoded"
            return
        deadline = time.monotonic() + 30
        while not asked and time.monotonic() < deadline:
            time.sleep(0.01)
        assert asked == [first], "the map (the pre-turn capture's parent's, re-read files on top) was not built ahead"
        released.set()


def test_captures_that_re_read_files_leave_one_decoding_to_the_first_capture_that_needs_the_map(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held_build: Held) -> None:
    """Turns that only edit captured files, with no build asked ahead: each capture re-reads its files and the map is
    never decoded, until files are made; then it is decoded once (the newest parent's, whose record holds the earlier
    edits), not once per turn that went by."""
    released, asked, _built = held_build
    released.set()
    ws, store_dir, first = workspace(tmp_path)
    no_walk(monkeypatch)
    ids = [first]
    with Store.open(store_dir) as s:
        assert s.capturer.watch(ws)
        for i in range(3):
            (ws / f"src/m{i}.py").write_text(f"print('turn {i}')\n")
            time.sleep(SETTLE)
            ids.append(turn_capture(s, ws, ids[-1], "post-turn").id)
            assert sorted(s.record(ids[-1]).changes) == [f"src/m{i}.py"]
        assert not asked
        (ws / "src/made.py").write_text("made\n")
        want = full_capture_now(store_dir, ws)
        after = turn_capture(s, ws, ids[-1], "pre-turn")
    assert asked == [ids[-2]]
    assert decoded(store_dir, after.id) == want
