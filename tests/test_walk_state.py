"""A capture without a change journal checks the last walk's saved stats instead of walking (walkstate.py).

Each capture here opens the store afresh, as a one-shot `codexr snapshots capture` or `restore` does, so the
only thing carried between them is what is on disk. Files are aged and the tests wait past the racy-timestamp
window (100 ms) where a test needs the saved stats to be trusted, as they are for a tree left alone that long.
"""

from __future__ import annotations

import marshal
import os
import random
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from fs_helpers import codexr
from store_helpers import WIDE, age_tree, git, make_repo, tree, write

import snapshot_store.detect.door as door_mod
import snapshot_store.detect.index as index_mod
import snapshot_store.detect.walkstate as walkstate
import snapshot_store.repository.repo as repo_mod
import snapshot_store.scope as scope_mod
import snapshot_store.stamps as stamps
import snapshot_store.store as store_mod
from snapshot_store import Store
from snapshot_store.capture import CaptureResult
from snapshot_store.detect.door import Look
from snapshot_store.detect.index import MAGIC, WorkspaceIndex, payload, sections
from snapshot_store.detect.walkstate import KEY, UNTRUSTED, WalkState
from snapshot_store.manifest import ABSENT, Entry, captured_paths, count_captured, is_captured
from snapshot_store.restore.plan import WRITE
from snapshot_store.settings import ScopeSettings

SETTLE = 0.15  # past statcache.FINE_WINDOW_NS: what a capture sees then, it may vouch for
#: The racy window the random-edit properties run with (`narrow_window`), and the wait past it: they sleep before
#: every step, and the window's width changes only which stats a check may trust, never what a capture must equal.
NARROW_WINDOW_NS = 30_000_000  # well above this kernel's timestamp tick (a jiffy, <= 4 ms)
NARROW_SETTLE = 0.045
SMALL = ScopeSettings(residue_max_files=1000, residue_max_file_bytes=1000)  # a 4 KB untracked file: only if known


def capture(store_dir: Path, ws: Path, *, summary: bool = True, thread: bool = False,
            known_paths: Sequence[str] = ()) -> CaptureResult:
    """One capture by a freshly opened store (a new process, as far as the store can tell): a one-shot command's
    (`summary`: only its id and counts are asked for), a full one, or a thread's (`thread`: exactly `known_paths`)."""
    with Store.open(store_dir) as s:
        door = s.at(ws)
        if thread:
            return door.capture_thread(known_paths=known_paths, scope=WIDE)
        if summary:
            return door.capture_summary(known_paths=known_paths, scope=WIDE)
        return door.capture(known_paths=known_paths, scope=WIDE)


def capture_without_walking(monkeypatch: pytest.MonkeyPatch, store_dir: Path, ws: Path):  # type: ignore[no-untyped-def]
    """`capture`, which must check the saved walk: walking fails the test."""
    def no_walk(*_a: object, **_k: object) -> None:
        raise AssertionError("walked")

    with monkeypatch.context() as m:
        m.setattr(scope_mod, "select", no_walk)
        return capture(store_dir, ws)


def files_of(store_dir: Path, snap: str) -> dict:
    with Store.open(store_dir) as s:
        return dict(s.files(snap))


def walked_files(store_dir: Path, ws: Path, *, thread: bool = False, known_paths: Sequence[str] = ()) -> dict:
    """What a full walk from the same newest snapshot sees now (a preview never uses the saved walk).

    Taken before the capture it is compared with: both then grow from the same parent (what it captured stays
    tracked), or with `thread`, cover the same `known_paths`.
    """
    with Store.open(store_dir) as s:
        latest = s.latest(s.workspace(ws))
        grown = [] if thread or latest is None else captured_paths(s.files(latest))
        return dict(s.at(ws).preview(scope=WIDE, known_paths=[*known_paths, *grown]).files)


def index_file(store_dir: Path) -> Path:
    found = list((store_dir / "cache").glob("*.index"))
    assert len(found) == 1, found
    return found[0]


def saved_walk(store_dir: Path) -> WalkState | None:
    """The walk half of the workspace's index, as the next capture would load it."""
    return WorkspaceIndex(index_file(store_dir)).saved_walk()


def stat_section(store_dir: Path) -> bytes:
    """The per-path half of the workspace's index, as stored (checksum and payload)."""
    parts = sections(index_file(store_dir).read_bytes())
    assert parts is not None
    return parts[1]


@pytest.fixture
def repo(ws: Path) -> Path:
    make_repo(ws, {"README.md": "readme\n", "src/a.py": "a = 1\n", "src/b.py": "b = 2\n", "docs/x/y.md": "y\n"})
    write(ws, "notes.txt", "untracked notes\n")
    write(ws, "src/new.py", "untracked code\n")
    write(ws, ".hidden", "not captured\n")
    age_tree(ws, settle=SETTLE)
    return ws


@pytest.fixture
def narrow_window(monkeypatch: pytest.MonkeyPatch) -> float:
    """The in-process store's racy window narrowed to NARROW_WINDOW_NS (the production 100 ms made the random-edit
    properties ~27 s of the suite, nearly all sleep); returns the wait past it."""
    monkeypatch.setattr(stamps, "FINE_WINDOW_NS", NARROW_WINDOW_NS)
    monkeypatch.setattr(index_mod, "FINE_WINDOW_NS", NARROW_WINDOW_NS)
    return NARROW_SETTLE


@pytest.fixture
def trusted(repo: Path, tmp_path: Path) -> Path:
    """A store whose saved walk of `repo` is trusted (the walk happened well after the last write)."""
    store_dir = tmp_path / "store"
    capture(store_dir, repo)
    return store_dir


def test_an_unchanged_capture_checks_the_saved_walk_instead_of_walking(repo: Path, trusted: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    with Store.open(trusted) as s:
        before = s.latest(repo)
        assert before is not None
        before_files = dict(s.files(before))

    def no_walk(*_a: object, **_k: object) -> None:
        raise AssertionError("walked")

    def no_manifest(*_a: object, **_k: object) -> None:
        raise AssertionError("decoded a manifest")

    monkeypatch.setattr(scope_mod, "select", no_walk)
    monkeypatch.setattr(store_mod.Store, "files", no_manifest)
    res = capture(trusted, repo)
    monkeypatch.undo()
    assert res.unchanged and res.id != before
    assert res.file_count == sum(1 for e in before_files.values() if is_captured(e))
    assert files_of(trusted, res.id) == before_files  # the new snapshot holds exactly the same map


def test_a_file_rewritten_to_the_same_size_and_mtime_is_still_seen(repo: Path, trusted: Path) -> None:
    """Only the inode's ctime tells this rewrite apart; it is part of every saved key."""
    path = repo / "src" / "a.py"
    old = os.stat(path)
    path.write_text("a = 9\n")  # same size
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))  # and the old mtime back
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo)
    assert not res.unchanged
    assert files_of(trusted, res.id) == expected
    with Store.open(trusted) as s:
        assert b"".join(s.blob_chunks(s.files(res.id)["src/a.py"][3])) == b"a = 9\n"


def test_a_created_file_is_seen_through_its_directory(repo: Path, trusted: Path) -> None:
    write(repo, "docs/x/new.md", "new\n")
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo)
    assert is_captured(files_of(trusted, res.id)["docs/x/new.md"])
    assert files_of(trusted, res.id) == expected


def test_a_deleted_file_is_seen(repo: Path, trusted: Path) -> None:
    (repo / "src" / "b.py").unlink()
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo)
    assert not is_captured(files_of(trusted, res.id).get("src/b.py"))
    assert files_of(trusted, res.id) == expected


@pytest.mark.parametrize("rel", ["src/new.py", "src/b.py"], ids=["untracked", "tracked"])
def test_the_captures_after_a_captured_file_is_removed_check_instead_of_walking(
        repo: Path, trusted: Path, monkeypatch: pytest.MonkeyPatch, rel: str) -> None:
    """The capture after the removal witnesses it (a tombstone, as a walk's); the next one, which a walk would make
    without it (the file no longer captured, so no longer known), drops an untracked file's tombstone without walking
    (it walked the whole tree once per removal: ~2.7 s at 100,000 files); a tracked file's stays, Git lists it."""
    (repo / rel).unlink()
    time.sleep(SETTLE)
    expected = walked_files(trusted, repo)
    first = capture_without_walking(monkeypatch, trusted, repo)
    assert files_of(trusted, first.id) == expected and files_of(trusted, first.id)[rel] == ABSENT
    time.sleep(SETTLE)
    expected = walked_files(trusted, repo)
    second = capture_without_walking(monkeypatch, trusted, repo)
    assert files_of(trusted, second.id) == expected
    assert (rel in expected) == (rel == "src/b.py")
    third = capture_without_walking(monkeypatch, trusted, repo)
    assert third.unchanged and files_of(trusted, third.id) == expected


@pytest.mark.parametrize("also", ["nothing", "a hidden file made", "the hidden file there touched"])
def test_a_file_made_beside_a_hidden_one_is_settled_without_walking(repo: Path, trusted: Path,
                                                                    monkeypatch: pytest.MonkeyPatch, also: str) -> None:
    """The root holds `.hidden`, which no saved group sees (not captured): its age says it was there when the walk
    listed the root, so the listing less the new file is the saved one and the check names the new file (a file made
    at a workspace's root, beside its `.env`, made the next capture walk). An unseen entry that changed since cannot
    be told from a new one: then the capture walks, and records what a walk sees either way."""
    write(repo, "made.txt", "made at the root\n")
    if also == "a hidden file made":
        write(repo, ".new-hidden", "hidden, new\n")
    elif also == "the hidden file there touched":
        os.chmod(repo / ".hidden", 0o600)
    time.sleep(SETTLE)
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo) if also == "the hidden file there touched" else \
        capture_without_walking(monkeypatch, trusted, repo)
    assert files_of(trusted, res.id) == expected and is_captured(expected["made.txt"])
    assert capture_without_walking(monkeypatch, trusted, repo).unchanged


def test_a_changed_ignore_file_means_walking(repo: Path, trusted: Path) -> None:
    write(repo, ".codexsnapignore", "")
    time.sleep(SETTLE)
    capture(trusted, repo)  # the ignore file exists (empty) and the saved walk vouches for its stat
    time.sleep(SETTLE)
    write(repo, ".codexsnapignore", "docs/\n")  # rewritten in place: only its own stat moves
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo)
    files = files_of(trusted, res.id)
    assert files["docs"][0] == "D"
    assert files == expected


def test_a_directory_swapped_for_a_symlink_is_walked_and_never_followed(repo: Path, trusted: Path,
                                                                        tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(repo / "src", outside)
    write(outside, "secret.txt", "outside the workspace\n")
    shutil.rmtree(repo / "src")
    os.symlink(outside, repo / "src")
    res = capture(trusted, repo)
    files = files_of(trusted, res.id)
    assert files["src"][0] == "l"
    assert not any(p.startswith("src/") and is_captured(e) for p, e in files.items())


def test_a_changed_file_is_read_again_alone_and_the_result_agrees_with_a_walk(repo: Path, trusted: Path) -> None:
    write(repo, "src/a.py", "a = 'changed, and longer'\n")
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo)
    assert res.bytes_hashed == len("a = 'changed, and longer'\n")  # one file read, not the tree
    assert files_of(trusted, res.id) == expected


def test_a_capture_right_after_a_write_does_not_vouch_for_that_file(repo: Path, tmp_path: Path) -> None:
    """The racy-timestamp rule: a change in the same clock tick would leave every stat field equal."""
    store_dir = tmp_path / "store"
    write(repo, "src/a.py", "a = 2\n")  # written just now: within the window of the capture below
    capture(store_dir, repo)
    state = saved_walk(store_dir)
    assert state is not None
    keys = {f"{d}/{n}" if d else n: packed[i * KEY.size:(i + 1) * KEY.size]
            for d, names, packed in state.seen for i, n in enumerate(names)}
    assert keys["src/a.py"] == UNTRUSTED
    assert keys["README.md"] != UNTRUSTED


def test_the_capture_after_one_that_could_not_vouch_for_a_file_reads_it_again_without_walking(
        repo: Path, trusted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An untrusted key never matches, so the check names that file and it is read again; the rest still holds.
    (It used to make the next capture walk: 0.3-0.45 s of a one-shot restore on 11,000 files, bench_startup.)"""
    write(repo, "src/a.py", "a = 2\n")
    capture(trusted, repo)  # right after the write: its key is saved untrusted
    time.sleep(SETTLE)
    write(repo, "src/b.py", "b = 'changed too'\n")
    expected = walked_files(trusted, repo)
    res = capture_without_walking(monkeypatch, trusted, repo)
    assert files_of(trusted, res.id) == expected
    assert res.bytes_hashed == len("a = 2\n") + len("b = 'changed too'\n")  # the two files, not the tree


def test_the_captured_stats_of_a_checked_capture_are_a_consistent_mapping(repo: Path, trusted: Path) -> None:
    """Looked up lazily, but iterating gives exactly the paths a lookup answers (a file whose saved key is
    untrusted has none: the check names it and it is read again)."""
    from snapshot_store.detect.walkstate import captured_stats

    write(repo, "src/a.py", "a = 2\n")
    capture(trusted, repo)  # right after the write: src/a.py's key is saved untrusted (if this ran within 100 ms)
    state = saved_walk(trusted)
    assert state is not None
    with Store.open(trusted) as s:
        files = s.files(state.snapshot)
    captured = {p for p, e in files.items() if is_captured(e)}
    stats = captured_stats(captured, state, changed=captured)
    assert stats is not None
    as_dict = dict(stats.items())
    assert set(as_dict) <= captured and len(stats) == len(as_dict)
    for p in captured:
        assert stats.get(p) == as_dict.get(p)
    assert "README.md" in as_dict


def test_a_stat_cache_a_restore_left_unsaved_never_vouches_for_a_rewritten_file(repo: Path, trusted: Path) -> None:
    """A one-file restore does not rewrite the stat cache (index.SMALL_CHANGE): the entry it would have dropped
    stays on disk. A later walk must still read the file, even at the same path, size and mtime as that entry."""
    with Store.open(trusted) as s:
        snap = s.latest(repo)
        assert snap is not None
    stale_body = payload(stat_section(trusted))
    assert stale_body is not None
    stale = marshal.loads(stale_body)["src/a.py"]
    write(repo, "src/a.py", "a = 'edited'\n")
    time.sleep(SETTLE)
    before = stat_section(trusted)
    with Store.open(trusted) as s:
        s.at(repo).restore(snap, scope=WIDE)
    assert (repo / "src" / "a.py").read_text() == "a = 1\n"
    assert stat_section(trusted) == before  # left as it was, the old entry of src/a.py in it
    WorkspaceIndex(index_file(trusted)).forget_walk()  # the next capture walks, consulting the stat cache
    write(repo, "src/a.py", "a = 9\n")  # the size of the stale entry's content
    os.utime(repo / "src" / "a.py", ns=(stale[1], stale[1]))
    time.sleep(SETTLE)
    res = capture(trusted, repo)
    with Store.open(trusted) as s:
        assert b"".join(s.blob_chunks(s.files(res.id)["src/a.py"][3])) == b"a = 9\n"


def test_a_damaged_saved_walk_is_ignored(repo: Path, trusted: Path) -> None:
    path = index_file(trusted)
    data = bytearray(path.read_bytes())
    parts = sections(bytes(data))
    assert parts is not None and parts[0]
    data[len(MAGIC) + 8 + len(parts[0]) // 2] ^= 0xFF  # in the middle of the walk half
    path.write_bytes(bytes(data))
    write(repo, "notes.txt", "edited notes\n")
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo)
    assert files_of(trusted, res.id) == expected


def test_lost_pack_files_make_an_unchanged_capture_store_its_files_again(repo: Path, trusted: Path) -> None:
    """The saved walk names the pack indexes it relied on: with them gone, nothing is taken on trust."""
    for p in (trusted / "packs").iterdir():
        p.unlink()
    res = capture(trusted, repo)
    write(repo, "src/a.py", "a = 'overwritten'\n")
    with Store.open(trusted) as s:
        s.at(repo).restore(res.id, scope=WIDE)
    assert (repo / "src" / "a.py").read_text() == "a = 1\n"


def test_a_one_shot_restore_keeps_a_same_size_edit_in_its_safety_snapshot(repo: Path, trusted: Path) -> None:
    with Store.open(trusted) as s:
        first = s.latest(repo)
    assert first is not None
    path = repo / "README.md"
    old = os.stat(path)
    path.write_text("README\n")  # the user's edit: same size, old mtime put back
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    with Store.open(trusted) as s:
        res = s.at(repo).restore(first, scope=WIDE)
    assert path.read_text() == "readme\n"
    assert res.safety_id is not None
    with Store.open(trusted) as s:
        s.at(repo).restore(res.safety_id, scope=WIDE)
    assert path.read_text() == "README\n"


def _without_the_fast_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """A capture that must be answered from the saved walk: the fast path's start, or a walk, fails the test."""
    def no_start(*_a: object, **_k: object) -> None:
        raise AssertionError("the full capture ran")

    monkeypatch.setattr(Look, "start", no_start)


@pytest.mark.parametrize("since", ["nothing", "an edit in place"])
def test_a_safety_capture_the_saved_walk_answers_holds_every_file_and_still_guards_each_path(
        repo: Path, trusted: Path, monkeypatch: pytest.MonkeyPatch, since: str) -> None:
    """A restore in a workspace where nothing changed since its newest snapshot, or only a file that snapshot captured
    was edited in place (the saved walk says so), takes that map (with the file read again) as its safety capture
    without the fast path (~0.3 s of a rewind at 100,000 files): the safety snapshot holds every file as it is, and a
    file changed between the plan and the apply is still left alone, as the safety's stats say."""
    with Store.open(trusted) as s:
        first = s.latest(s.workspace(repo))
    assert first is not None
    write(repo, "src/a.py", "a = 'the agent'\n")
    write(repo, "src/b.py", "b = 'the agent'\n")
    age_tree(repo, settle=SETTLE)
    newest = capture(trusted, repo).id
    assert capture(trusted, repo).unchanged  # the saved walk now names the newest map, trusted
    expected = files_of(trusted, newest)
    if since != "nothing":
        write(repo, "README.md", "readme, edited by the agent\n")
        expected = walked_files(trusted, repo)
        assert expected != files_of(trusted, newest)
    with monkeypatch.context() as m, Store.open(trusted) as s:
        _without_the_fast_path(m)
        with s.at(repo).prepare(first, scope=WIDE) as ready:
            written = {a.path for a in ready.plan.actions if a.op == WRITE}
            assert written == {"src/a.py", "src/b.py"} | ({"README.md"} if since != "nothing" else set())
            safety = ready.plan.safety_id
            assert safety is not None and dict(s.files(safety)) == expected
            write(repo, "src/b.py", "b = 'the user, after the plan'\n")
            ready.apply()
    assert (repo / "src" / "a.py").read_text() == "a = 1\n" and (repo / "README.md").read_text() == "readme\n"
    assert (repo / "src" / "b.py").read_text() == "b = 'the user, after the plan'\n"  # not as the safety saw it
    with Store.open(trusted) as s:
        s.at(repo).restore(safety, scope=WIDE)
    assert (repo / "src" / "a.py").read_text() == "a = 'the agent'\n"
    if since != "nothing":
        assert (repo / "README.md").read_text() == "readme, edited by the agent\n"


def test_a_file_written_just_before_the_newest_capture_that_the_restore_deletes_is_in_its_safety(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a rewind right after a turn meets: the file the agent made last was too fresh for the turn's capture to
    vouch for its stat, and the target witnessed it absent. The safety capture reads it again alone (no fast path),
    holds it, and the restore deletes it; restoring the safety brings it back."""
    store_dir = tmp_path / "store"
    first = capture(store_dir, repo, known_paths=["made.txt"]).id  # made.txt witnessed absent
    age_tree(repo, settle=SETTLE)
    capture(store_dir, repo)  # a walk it can vouch for
    write(repo, "made.txt", "made by the agent just now\n")
    capture(store_dir, repo)  # at once: its stat too fresh to vouch for
    state = saved_walk(store_dir)
    assert state is not None and state.untrusted() == ["made.txt"]
    with monkeypatch.context() as m, Store.open(store_dir) as s:
        _without_the_fast_path(m)
        res = s.at(repo).restore(first, scope=WIDE)
    assert not (repo / "made.txt").exists() and res.safety_id is not None
    assert files_of(store_dir, res.safety_id)["made.txt"].kind == "f"
    with Store.open(store_dir) as s:
        s.at(repo).restore(res.safety_id, scope=WIDE)
    assert (repo / "made.txt").read_text() == "made by the agent just now\n"


def test_a_file_held_back_by_its_size_that_the_restore_deletes_is_captured_whole_first(
        repo: Path, tmp_path: Path) -> None:
    """The target witnessed a path absent where a file too large to capture is now: the safety capture takes it whole
    (whatever the limits) before the restore deletes it, also when nothing changed since the newest snapshot."""
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        first = s.at(repo).capture(scope=SMALL, known_paths=["big.log"]).id  # big.log witnessed absent
    big = "x" * 4000 + "\n"
    write(repo, "big.log", big)
    age_tree(repo, settle=SETTLE)
    with Store.open(store_dir) as s:
        door = s.at(repo)
        held = door.capture_summary(scope=SMALL).id
        assert s.files(held)["big.log"].kind == "x"  # held back: too large for an untracked file
        assert door.capture_summary(scope=SMALL).unchanged
        # asked of the capturer as a restore asks it, without naming the path among the known ones
        whole = door.capturer.safety(repo, known_paths=[], scope=SMALL, label="test",
                                     whatever_size=lambda p: p == "big.log")
        assert whole.files["big.log"].kind == "f" and not whole.unchanged
        res = door.restore(first, scope=SMALL)
    assert not (repo / "big.log").exists()
    assert res.safety_id is not None
    with Store.open(store_dir) as s:
        assert s.files(res.safety_id)["big.log"].kind == "f"
        s.at(repo).restore(res.safety_id, scope=SMALL)
    assert (repo / "big.log").read_text() == big


def test_a_session_s_capture_that_reads_a_few_small_files_leaves_the_stat_cache_undecoded(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's journal names the files a turn wrote; reading a few KB of them again never decodes the per-path
    stat cache (a post-turn capture at 100,000 files decoded all of it, ~0.14 s profiled, to hash one small file):
    the capture still holds what a walk sees."""
    import snapshot_store.detect.index as index_mod

    store_dir = tmp_path / "store"
    capture(store_dir, repo)  # a stat cache on disk for the session's store to find
    decoded: list[int] = []
    real = index_mod.stat_entries

    def counted(body: bytes | memoryview) -> dict:  # type: ignore[type-arg]
        decoded.append(len(body))
        return real(body)

    with Store.open(store_dir) as s:
        s.capturer.watch(repo)
        door = s.at(repo)
        door.capture(scope=WIDE)  # the session's first capture: its journal goes on from here
        write(repo, "src/a.py", "a = 'written by the turn'\n")
        write(repo, "src/made.py", "made by the turn\n")
        age_tree(repo, settle=SETTLE)
        expected = walked_files(store_dir, repo)
        monkeypatch.setattr(index_mod, "stat_entries", counted)
        res = door.capture(scope=WIDE)
        assert decoded == []
    assert files_of(store_dir, res.id) == expected


def test_a_capture_that_reads_an_edited_file_again_leaves_the_saved_git_listing_undecoded(
        repo: Path, trusted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A one-shot capture after a tracked file was edited in place reads that file again and saves the walk with its
    new key; none of it needs the Git listing's paths (decoding 100,000 of them was ~24 ms), and the map is a walk's."""
    write(repo, "README.md", "readme, edited\n")
    age_tree(repo, settle=SETTLE)
    expected = walked_files(trusted, repo)
    decoded: list[str] = []
    real = scope_mod._saved_paths

    def counted(path: str, *rest: object) -> list[str] | None:
        decoded.append(path)
        return real(path, *rest)  # type: ignore[arg-type]

    monkeypatch.setattr(scope_mod, "_saved_paths", counted)
    res = capture_without_walking(monkeypatch, trusted, repo)
    assert decoded == [] and res.bytes_hashed > 0
    assert files_of(trusted, res.id) == expected


def test_a_git_index_change_means_walking(repo: Path, trusted: Path) -> None:
    write(repo, "staged.txt", "x\n")
    git(repo, "add", "staged.txt")
    res = capture(trusted, repo)
    assert is_captured(files_of(trusted, res.id)["staged.txt"])


OPS = ("modify", "same-size", "create", "delete", "chmod", "mkdir", "rmdir", "rename", "symlink", "ignore",
       "save-by-rename", "nothing")


def _random_op(ws: Path, rng: random.Random) -> None:
    files = sorted(p for p, e in tree(ws).items() if e[0] == "f")
    dirs = sorted({str(Path(p).parent) for p in files if "/" in p} | {"."})
    op = rng.choice(OPS)
    if op in ("modify", "same-size", "chmod", "delete", "save-by-rename") and files:
        rel = rng.choice(files)
        path = ws / rel
        if op == "save-by-rename":
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_bytes(path.read_bytes() + b"saved\n")
            os.rename(tmp, path)
        elif op == "modify":
            path.write_bytes(path.read_bytes() + b"more\n")
        elif op == "same-size":
            old = os.stat(path)
            data = path.read_bytes()
            path.write_bytes(bytes(reversed(data)) if len(set(data)) > 1 else b"Z" * len(data))
            os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
        elif op == "chmod":
            os.chmod(path, os.stat(path).st_mode ^ 0o100)
        else:
            path.unlink()
    elif op == "create":
        write(ws, f"{rng.choice(dirs)}/made{rng.randrange(1000)}.txt".removeprefix("./"), "made\n")
    elif op == "mkdir":
        write(ws, f"{rng.choice(dirs)}/d{rng.randrange(100)}/inner.txt".removeprefix("./"), "inner\n")
    elif op == "rmdir":
        cands = [d for d in dirs if d not in (".", "src")]
        if cands:
            shutil.rmtree(ws / rng.choice(cands))
    elif op == "rename" and files:
        src = rng.choice(files)
        dst = f"{rng.choice(dirs)}/renamed{rng.randrange(100)}.txt".removeprefix("./")
        if not os.path.exists(ws / dst):
            os.rename(ws / src, ws / dst)
    elif op == "symlink":
        name = f"link{rng.randrange(10)}"
        if not os.path.lexists(ws / name):
            os.symlink(rng.choice(files) if files else "nowhere", ws / name)
    elif op == "ignore":
        write(ws, ".codexsnapignore", rng.choice(["", "*.txt\n", "docs/\n"]))


@pytest.mark.parametrize("seed", range(3))
def test_captures_that_check_agree_with_walks_over_random_edits(repo: Path, tmp_path: Path, seed: int,
                                                                narrow_window: float) -> None:
    """After each edit (past the racy window, so saved stats are trusted), the checked capture equals a walk."""
    rng = random.Random(seed)
    store_dir = tmp_path / "store"
    capture(store_dir, repo)
    for step in range(12):
        time.sleep(narrow_window)
        _random_op(repo, rng)
        time.sleep(narrow_window)
        expected = walked_files(store_dir, repo)
        res = capture(store_dir, repo, summary=step % 2 == 0)
        assert files_of(store_dir, res.id) == expected, f"seed {seed} step {step}"


def test_the_command_line_reports_an_unchanged_capture_like_a_walked_one(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    first = codexr(home, "snapshots", "capture", cwd=repo)
    time.sleep(SETTLE)
    second = codexr(home, "snapshots", "capture", cwd=repo)
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert first.stderr.startswith("6 files, ")
    assert second.stderr.startswith("6 files, 0 B hashed, 0 B stored") and "(no changes since" in second.stderr
    assert saved_walk(home / "file_snapshots") is not None


def test_a_file_dated_before_1970_is_checked_like_any_other(repo: Path, tmp_path: Path) -> None:
    path = repo / "notes.txt"
    os.utime(path, ns=(-86_400_000_000_123, -86_400_000_000_123))  # 1969-12-31, never a whole second
    time.sleep(SETTLE)
    store_dir = tmp_path / "store"
    capture(store_dir, repo)
    time.sleep(SETTLE)
    assert capture(store_dir, repo).unchanged
    path.write_text("untracked NOTES\n")  # same size
    os.utime(path, ns=(-86_400_000_000_123, -86_400_000_000_123))
    res = capture(store_dir, repo)
    assert not res.unchanged
    with Store.open(store_dir) as s:
        assert b"".join(s.blob_chunks(s.files(res.id)["notes.txt"][3])) == b"untracked NOTES\n"


def test_a_sessions_first_capture_checks_the_saved_walk_and_its_journal_watches_from_then_on(
        repo: Path, trusted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first turn of a session (or of `codexr exec`) no longer walks; later turns still see every change."""
    s = Store.open(trusted)
    try:
        assert s.capturer.watch(repo)
        real_select = scope_mod.select

        def no_walk(*_a: object, **_k: object) -> None:
            raise AssertionError("walked")

        monkeypatch.setattr(scope_mod, "select", no_walk)
        first = s.at(repo).capture(scope=WIDE)
        assert first.bytes_hashed == 0
        write(repo, "docs/x/y.md", "y changed\n")  # seen only through the watches the check added
        write(repo, "src/made.py", "made\n")
        second = s.at(repo).capture(scope=WIDE)
        monkeypatch.setattr(scope_mod, "select", real_select)
        assert second.bytes_hashed == len("y changed\n") + len("made\n")
        expected = walked_files(trusted, repo)
        assert {p: e for p, e in second.files.items() if is_captured(e)} == \
            {p: e for p, e in expected.items() if is_captured(e)}
    finally:
        s.close()


@pytest.mark.parametrize("turn", ["edits a file", "creates files"])
def test_a_session_keeps_the_saved_walk_current_for_the_next_process(repo: Path, tmp_path: Path, turn: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn that creates files (the journal names them): the session re-lists their directories when it saves the
    walk, so the next process (a rewind's safety capture) checks instead of walking the whole tree (~2.9 s at 100,000
    files, issue 35), as it does after a turn that edits one."""
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        assert s.capturer.watch(repo)
        s.at(repo).capture(scope=WIDE)  # walks
        time.sleep(SETTLE)
        if turn == "edits a file":
            write(repo, "src/a.py", "a = 'edited in the session'\n")
        else:
            write(repo, "src/made.py", "made in the turn\n")
            write(repo, "docs/x/also.md", "and this\n")
        time.sleep(SETTLE)
        last = s.at(repo).capture(scope=WIDE)  # the journal's fast path
        if turn == "creates files":
            assert last.files["src/made.py"].kind == "f"
    time.sleep(SETTLE)
    res = capture_without_walking(monkeypatch, store_dir, repo)
    assert res.unchanged
    assert files_of(store_dir, res.id) == files_of(store_dir, last.id)


def test_a_file_made_while_the_session_re_lists_its_directory_is_not_missed_by_the_next_process(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another file appears in that directory after the session's capture read what the journal named and before it
    re-lists the directory: the listing is not the saved one plus the files read, so no saved walk vouches for the
    directory, and the next process walks and captures the newcomer."""
    store_dir = tmp_path / "store"
    real = walkstate.listed_names

    def racing(fd: int) -> list[str]:
        write(repo, "src/intruder.txt", "made during the re-listing\n")
        return real(fd)

    with Store.open(store_dir) as s:
        assert s.capturer.watch(repo)
        s.at(repo).capture(scope=WIDE)
        time.sleep(SETTLE)
        write(repo, "src/made.py", "made in the turn\n")
        time.sleep(SETTLE)
        monkeypatch.setattr(walkstate, "listed_names", racing)
        last = s.at(repo).capture(scope=WIDE)
        monkeypatch.undo()
        assert "src/intruder.txt" not in last.files
    time.sleep(SETTLE)
    res = capture(store_dir, repo, summary=False)
    assert res.files["src/intruder.txt"].kind == "f" and res.files["src/made.py"].kind == "f"


def test_a_file_saved_by_renaming_a_temp_file_over_it_is_checked_not_walked(repo: Path, trusted: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Editors (and restores) save that way: the directory's stat moves, its names and types do not."""
    write(repo, "src/.a.py.swp", "a = 'saved by an editor'\n")
    os.rename(repo / "src" / ".a.py.swp", repo / "src" / "a.py")
    expected = walked_files(trusted, repo)
    res = capture_without_walking(monkeypatch, trusted, repo)
    assert files_of(trusted, res.id) == expected
    with Store.open(trusted) as s:
        assert b"".join(s.blob_chunks(s.files(res.id)["src/a.py"][3])) == b"a = 'saved by an editor'\n"


def test_a_fifo_replaced_by_a_file_of_the_same_name_is_seen(ws: Path, tmp_path: Path) -> None:
    """Same names, another type: the listing digest holds types too, so this is walked."""
    make_repo(ws, {"README.md": "readme\n"})
    os.mkfifo(ws / "pipe")
    age_tree(ws, settle=SETTLE)
    store_dir = tmp_path / "store"
    first = capture(store_dir, ws)
    assert files_of(store_dir, first.id)["pipe"][0] == "x"
    time.sleep(SETTLE)
    write(ws, "pipe.tmp", "now a file\n")
    os.rename(ws / "pipe.tmp", ws / "pipe")
    expected = walked_files(store_dir, ws)
    res = capture(store_dir, ws)
    assert is_captured(files_of(store_dir, res.id)["pipe"])
    assert files_of(store_dir, res.id) == expected


KNOWABLE = ["src/a.py", "notes.txt", ".hidden", "src/new.py", "docs/x/y.md", "gone.txt", "build/out.txt",
            "src/.secret"]


@pytest.mark.parametrize(("seed", "summary"), [(0, False), (1, False), (2, False), (3, True), (4, True)])
def test_captures_with_their_own_known_paths_agree_with_walks(repo: Path, tmp_path: Path, seed: int,
                                                              summary: bool, narrow_window: float) -> None:
    """A session captures with its thread's own known paths (capture_thread), which the saved walk was not taken
    with: the check stands in for the walk only where the map is the same; every capture must equal a walk.
    `summary`: as a turn's capture asks (capture_thread_summary), so an unchanged one may record its parent's map."""
    rng = random.Random(100 + seed)
    write(repo, "build/out.txt", "churn\n")
    write(repo, "src/.secret", "hidden\n")
    store_dir = tmp_path / "store"
    capture(store_dir, repo)
    for step in range(14):
        time.sleep(narrow_window)
        if rng.random() < 0.5:
            _random_op(repo, rng)
            time.sleep(narrow_window)
        thread = rng.random() >= 0.3
        with Store.open(store_dir) as s:  # like a thread's paths: some of what the newest snapshot captured
            latest = s.latest(repo)
            assert latest is not None
            held = sorted(p for p, e in s.files(latest).items() if is_captured(e))
        known = rng.sample(held, rng.randrange(len(held) + 1))
        if rng.random() < 0.3:
            known.append(rng.choice(KNOWABLE))
        expected = walked_files(store_dir, repo, thread=thread, known_paths=known)
        if summary and thread:
            res = thread_summary(store_dir, repo, known)
        else:
            res = capture(store_dir, repo, summary=False, thread=thread, known_paths=known)
            assert res.files == expected, f"seed {seed} step {step} thread {thread} known {known}"
        assert files_of(store_dir, res.id) == expected, f"seed {seed} step {step} thread {thread} known {known}"


def thread_summary(store_dir: Path, ws: Path, known_paths: Sequence[str]) -> CaptureResult:
    """A turn's capture as `codexr exec` makes it: a fresh process that watches the workspace, then asks only for
    the id of a capture of exactly the thread's paths."""
    with Store.open(store_dir) as s:
        assert s.capturer.watch(ws)
        return s.at(ws).capture_thread_summary(known_paths=known_paths, scope=WIDE)


def store_files(store_dir: Path) -> dict[str, bytes]:
    """Every snapshot record and ref log of the store, by path: what a capture that writes nothing leaves alone."""
    return {str(p.relative_to(store_dir)): p.read_bytes() for sub in ("snapshots", "refs")
            for p in sorted((store_dir / sub).rglob("*")) if p.is_file()}


@pytest.mark.parametrize("how", ["fresh process", "session", "walk"])
def test_a_turn_capture_of_the_latest_snapshots_map_answers_with_it_and_writes_nothing(
        repo: Path, tmp_path: Path, how: str) -> None:
    """The prompt after a turn that left the files alone: its pre-turn capture is the snapshot that already holds
    them, durable since that capture, so nothing is written or synced before the prompt is sent. Whatever looked
    (the saved walk's check in a fresh process, a session's journal, a walk); a change is a snapshot of its own."""
    store_dir = tmp_path / "store"
    known = ["notes.txt"]

    def turn_capture(s: Store) -> CaptureResult:
        if how == "walk":
            for f in (store_dir / "cache").glob("*.index"):
                f.unlink()  # no saved walk: the capture walks
        return s.at(repo).capture_thread_summary(known_paths=known, scope=WIDE)

    with Store.open(store_dir) as s:
        if how == "session":
            assert s.capturer.watch(repo)
        first = turn_capture(s)
        time.sleep(SETTLE)
        on_disk = store_files(store_dir)
        if how != "session":
            s.close()
            s = Store.open(store_dir)
        again = turn_capture(s)
        assert again.id == first.id and store_files(store_dir) == on_disk
        assert again.reused and again.unchanged and not first.reused
        write(repo, "notes.txt", "notes edited between the turns\n")
        changed = turn_capture(s)
        assert changed.id != first.id and not changed.reused
        blob = s.files(changed.id)["notes.txt"][3]
        assert b"".join(s.blob_chunks(blob)) == b"notes edited between the turns\n"
        s.close()
    assert {p: e for p, e in files_of(store_dir, changed.id).items() if p != "notes.txt"} == \
        {p: e for p, e in files_of(store_dir, first.id).items() if p != "notes.txt"}


def test_a_damaged_latest_snapshot_is_never_reused_as_the_next_turn_s(repo: Path, tmp_path: Path) -> None:
    """The reused answer reads no map; it still checks the snapshot file's bytes against its id: a damaged one is no
    turn's snapshot (the capture decides as for any damaged parent), in a fresh process as in the same one."""
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        first = s.at(repo).capture_thread_summary(known_paths=["notes.txt"], scope=WIDE)
    time.sleep(SETTLE)
    snap = store_dir / "snapshots" / first.id[:2] / first.id
    data = bytearray(snap.read_bytes())
    data[len(data) // 2] ^= 0xFF
    snap.write_bytes(bytes(data))
    with Store.open(store_dir) as s:
        again = s.at(repo).capture_thread_summary(known_paths=["notes.txt"], scope=WIDE)
        assert again.id != first.id and not again.reused
        assert s.files(again.id)["notes.txt"].kind == "f"


def test_a_process_s_next_capture_sees_what_another_process_changed_and_saved_between(repo: Path,
                                                                                         tmp_path: Path) -> None:
    """A session keeps the saved walk it decoded for its next capture (`codexr exec`'s post-turn one). Another
    process's capture between the two rewrites the index: the session's next capture still records that one's change
    and its own after it, as a walk would."""
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as a:
        assert a.capturer.watch(repo)  # a session: it keeps the decoded walk
        a.at(repo).capture_thread_summary(known_paths=["notes.txt"], scope=WIDE)
        time.sleep(SETTLE)
        write(repo, "src/a.py", "a = 2\n")
        time.sleep(SETTLE)
        with Store.open(store_dir) as b:  # another process, as far as the store can tell
            between = b.at(repo).capture_thread_summary(known_paths=["notes.txt"], scope=WIDE)
        write(repo, "notes.txt", "notes again\n")
        time.sleep(SETTLE)
        after = a.at(repo).capture_thread_summary(known_paths=["notes.txt"], scope=WIDE)
        assert after.id != between.id and not after.reused
        files = a.files(after.id)
        for rel, text in (("src/a.py", b"a = 2\n"), ("notes.txt", b"notes again\n")):
            assert b"".join(a.blob_chunks(files[rel][3])) == text, rel
    assert files == forced_walk(store_dir, repo, ["notes.txt"])


def forced_walk(store_dir: Path, ws: Path, known_paths: Sequence[str]) -> dict:
    """The map a thread's capture records when it must walk: the index file (the saved walk) removed first."""
    index_file(store_dir).unlink()
    with Store.open(store_dir) as s:
        return dict(s.files(s.at(ws).capture_thread(known_paths=known_paths, scope=WIDE).id))


def no_decoding(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding any snapshot's manifest fails the test (the unchanged thread capture must not need one)."""
    def refuse(*_a: object, **_k: object) -> None:
        raise AssertionError("decoded a manifest")

    monkeypatch.setattr(repo_mod.Repository, "files", refuse)


@pytest.mark.parametrize("known", [[], ["notes.txt", ".hidden", "docs/x/y.md"]])
def test_an_unchanged_turn_capture_records_the_map_a_walk_would_without_decoding_one(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, known: list[str]) -> None:
    """`codexr exec`'s pre-turn capture on an unchanged tree (issue 21: 100,000 files) writes the unchanged record
    straight from the saved walk, when the thread covers what that walk covered: Git's paths and the thread's own,
    here some outside Git (`.hidden` is captured only because the thread knows it)."""
    store_dir = tmp_path / "store"
    capture(store_dir, repo, summary=False, thread=True, known_paths=known)  # the saved walk covers these paths
    time.sleep(SETTLE)
    with monkeypatch.context() as m:
        no_decoding(m)
        res = thread_summary(store_dir, repo, known)
    assert res.unchanged and res.bytes_hashed == 0
    got = files_of(store_dir, res.id)
    assert (".hidden" in known) == is_captured(got[".hidden"])
    assert got == forced_walk(store_dir, repo, known)


@pytest.mark.parametrize("change", ["edit", "git add"])
def test_a_changed_tree_gives_the_turn_capture_the_map_a_walk_would(repo: Path, tmp_path: Path,
                                                                    change: str) -> None:
    """A file edited, or one added to Git (a hidden file: captured only once tracked; nothing in the workspace's
    files moves), between turns: the turn's capture records the change, as a walk does."""
    store_dir = tmp_path / "store"
    write(repo, ".env_local", "KEY=1\n")
    age_tree(repo, settle=SETTLE)
    capture(store_dir, repo, summary=False, thread=True, known_paths=["notes.txt"])
    time.sleep(SETTLE)
    if change == "edit":
        (repo / "src/a.py").write_text("a = 2  # edited\n")
    else:
        git(repo, "add", "-f", ".env_local")
    time.sleep(SETTLE)
    res = thread_summary(store_dir, repo, ["notes.txt"])
    assert not res.unchanged
    got = files_of(store_dir, res.id)
    assert is_captured(got[".env_local"]) == (change == "git add")
    assert got == forced_walk(store_dir, repo, ["notes.txt"])


@pytest.mark.parametrize(("then", "now"), [([], [".hidden"]), ([".hidden"], []), (["notes.txt"], [])])
def test_a_turn_capture_covering_other_paths_than_the_saved_walk_records_its_own_map(
        repo: Path, tmp_path: Path, then: list[str], now: list[str]) -> None:
    """Nothing changed, but the thread knows a path the saved walk did not cover (`.hidden`: captured only when
    known), or the saved walk covered one of another thread's paths this thread does not know (held back or left
    to the residue now): the unchanged record of the newest snapshot would be another map."""
    store_dir = tmp_path / "store"
    write(repo, "notes.txt", "x" * 4000)  # over SMALL's residue size limit: captured only while known
    age_tree(repo, settle=SETTLE)
    with Store.open(store_dir) as s:
        s.at(repo).capture_thread(known_paths=then, scope=SMALL)
    time.sleep(SETTLE)
    with Store.open(store_dir) as s:
        assert s.capturer.watch(repo)
        res = s.at(repo).capture_thread_summary(known_paths=now, scope=SMALL)
    got = files_of(store_dir, res.id)
    assert is_captured(got[".hidden"]) == (".hidden" in now)
    assert is_captured(got["notes.txt"]) == ("notes.txt" in now)
    index_file(store_dir).unlink()
    with Store.open(store_dir) as s:
        assert got == dict(s.files(s.at(repo).capture_thread(known_paths=now, scope=SMALL).id))


def test_a_sessions_first_capture_with_its_own_known_paths_checks_instead_of_walking(
        repo: Path, trusted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a session captures (its thread's paths, capture_thread): no walk where the map is the same."""
    def no_walk(*_a: object, **_k: object) -> None:
        raise AssertionError("walked")

    s = Store.open(trusted)
    try:
        assert s.capturer.watch(repo)
        monkeypatch.setattr(scope_mod, "select", no_walk)
        first = s.at(repo).capture_thread(scope=WIDE, known_paths=[])
        monkeypatch.undo()
        assert first.bytes_hashed == 0
    finally:
        s.close()
    with Store.open(trusted) as s:
        assert dict(s.files(first.id)) == dict(s.files(s.list_snapshots(repo)[-2].id))



@pytest.mark.parametrize("bad", ["../outside.txt", ".git", "a/b", "..", ""])
def test_a_forged_walk_state_naming_a_path_out_of_the_workspace_is_not_used(repo: Path, trusted: Path,
                                                                           tmp_path: Path, bad: str) -> None:
    """The state is checksummed against damage, not forgery: a crafted name must never be looked at or read."""
    (tmp_path / "outside.txt").write_text("secret outside the workspace\n")
    path = index_file(trusted)
    state = saved_walk(trusted)
    assert state is not None
    parent, names, packed = state.seen[0]
    state.seen[0] = (parent, [*names, bad], packed + UNTRUSTED)
    WorkspaceIndex(path).save_walk(state)
    parts = sections(path.read_bytes())
    assert parts is not None
    body = payload(parts[0])
    assert body is not None and marshal.loads(body)  # a well-formed half with a valid checksum
    state = saved_walk(trusted)
    if state is not None:  # the groups are checked when first decoded: the check that asks them walks instead
        with pytest.raises(walkstate.DamagedWalk):
            state.seen  # noqa: B018
    expected = walked_files(trusted, repo)
    res = capture(trusted, repo)
    assert files_of(trusted, res.id) == expected


def test_a_known_file_below_an_unlisted_directory_is_checked_too(repo: Path, tmp_path: Path) -> None:
    """Paths covered below directories the walk does not list (a churn directory) carry their own saved stat."""
    write(repo, "node_modules/pkg/patched.js", "one\n")
    age_tree(repo, settle=SETTLE)
    store_dir = tmp_path / "store"
    capture(store_dir, repo, known_paths=["node_modules/pkg/patched.js"])
    time.sleep(SETTLE)
    assert capture(store_dir, repo).unchanged
    path = repo / "node_modules" / "pkg" / "patched.js"
    old = os.stat(path)
    path.write_text("two\n")  # same size, old mtime put back: only its own stat (its ctime) moved
    os.utime(path, ns=(old.st_atime_ns, old.st_mtime_ns))
    res = capture(store_dir, repo)
    assert not res.unchanged
    with Store.open(store_dir) as s:
        assert b"".join(s.blob_chunks(s.files(res.id)["node_modules/pkg/patched.js"][3])) == b"two\n"


def walked(ws: Path, tmp_path: Path, rels: tuple[str, ...]) -> tuple[WalkState, set[str]]:
    """`rels` written and captured: the saved walk, and every path its groups hold, joined (`rels` among them)."""
    for rel in rels:
        write(ws, rel, rel + "\n")
    age_tree(ws)
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        s.at(ws).capture(scope=WIDE)
    state = saved_walk(store_dir)
    assert state is not None
    joined = {f"{parent}/{name}" if parent else name for parent, names, _k in state.seen for name in names}
    assert joined >= set(rels)
    return state, joined


def test_the_seen_paths_are_exactly_the_files_the_walk_saw(ws: Path, tmp_path: Path) -> None:
    """SeenPaths answers by directory and name what the set of joined paths answered: every file the walk saw, at
    the root and below, and nothing else (a directory, a prefix, a path one level off, an empty name)."""
    state, joined = walked(ws, tmp_path, ("top.txt", "a/b.txt", "a/c/d.txt", "e/f.txt"))
    seen = state.seen_paths()
    assert all(p in seen for p in joined)
    for other in ("", "a", "a/c", "a/", "b.txt", "a/d.txt", "c/d.txt", "a/c/d.txt/x", "top.txt/", "/top.txt", 3):
        assert (other in seen) == (other in joined), other
    asked = [*joined, "", "a", "a/c", "a/", "b.txt", "a/d.txt", "c/d.txt", "a/c/d.txt/x", "top.txt/", "/top.txt"]
    assert sorted(seen.missing(asked)) == sorted(p for p in asked if p not in joined)  # by directory, the same answer


def test_all_seen_says_yes_only_when_every_path_is_a_seen_one(ws: Path, tmp_path: Path) -> None:
    """The count by groups (walkstate.all_seen, which spares captured_stats a pass by directory) answers as the set
    of joined paths does, for any subset, one path more, or one off; a state whose groups are not as `group` writes
    them (a name twice, unsorted, a parent twice: a count could then pass a missing path) says no, and
    captured_stats still finds the missing path the slow way."""

    from snapshot_store.detect.walkstate import all_seen, captured_stats

    state, joined = walked(ws, tmp_path, ("top.txt", "a/b.txt", "a/c/d.txt", "a/c/e.txt", "e/f.txt"))
    assert all_seen(state, joined) and all_seen(state, {"a/c/d.txt", "top.txt"}) and all_seen(state, set())
    for extra in ("a/c", "a/x.txt", "c/d.txt", "/top.txt", "top.txt/"):
        assert not all_seen(state, joined | {extra}), extra
        assert not all_seen(state, {"a/b.txt", extra}), extra
    c = next(g for g in state.seen if g[0] == "a/c")
    k = len(c[2]) // len(c[1])
    twice = [g if g is not c else ("a/c", ["d.txt", "d.txt"], c[2][:k] * 2) for g in state.seen]
    unsorted = [g if g is not c else ("a/c", ["e.txt", "d.txt"], c[2][k:] + c[2][:k]) for g in state.seen]
    for odd in (twice, unsorted, [*state.seen, c]):
        bad = walkstate.with_groups(state, odd)
        assert not all_seen(bad, {"a/c/d.txt", "a/c/e.txt"})
    lying = walkstate.with_groups(state, twice)  # d.txt twice, e.txt never: as many names
    assert captured_stats(joined, lying, changed=set()) is None
    assert captured_stats(joined, state, changed=set()) is not None


def _present(files: Mapping[str, Entry], ws: Path) -> dict[str, Entry]:
    """The map without its tombstones, each checked true (a session's journal keeps covering a path a thread once
    knew, so it may witness an absence a walk does not look at: the same files, one more true witness)."""
    for p, e in files.items():
        if e == ABSENT:
            assert not os.path.lexists(ws / p), p
    return {p: e for p, e in files.items() if e != ABSENT}


def _session_op(ws: Path, rng: random.Random) -> None:
    """`_random_op`, plus untracked files growing past and shrinking under SMALL's size limit."""
    if rng.random() < 0.25:
        rel = f"big{rng.randrange(3)}.txt"
        write(ws, rel, "x" * rng.choice([10, 4000]))
    else:
        _random_op(ws, rng)


@pytest.mark.parametrize(("seed", "scope"), [(0, WIDE), (1, SMALL), (5, SMALL), (7, SMALL), (9, WIDE), (10, SMALL)])
def test_a_sessions_captures_record_what_a_walk_sees_over_random_edits(repo: Path, tmp_path: Path, seed: int,
                                                                        scope: ScopeSettings) -> None:
    """A session's captures through its change journal work out the delta, the file count, the files held back by
    size and what the saved walk says from the entries that moved, not the whole map: after each edit every kind of
    capture a session makes (the workspace's, a thread's, a turn's summary growing from the thread's newest) records
    on disk the map it returns and the files a walk sees, reports what a walk reports, and the next process's check
    of the saved walk agrees too. (A thread's paths here hold all the workspace captured, as one thread's do.)"""
    rng = random.Random(300 + seed)
    store_dir = tmp_path / "store"
    s = Store.open(store_dir)
    try:
        assert s.capturer.watch(repo)
        s.at(repo).capture(scope=scope)
        for step in range(24):
            if rng.random() < 0.8:
                _session_op(repo, rng)
            latest = s.latest(repo)
            assert latest is not None
            held = sorted(p for p, e in s.files(latest).items() if is_captured(e))
            kind = rng.choice(["workspace", "thread", "turn"])
            known = [] if kind == "workspace" else list(held) if kind == "turn" else rng.sample(held, len(held) // 2)
            if rng.random() < 0.3:
                known.append(rng.choice(KNOWABLE))
            with Store.open(store_dir) as other:
                grown = [] if kind == "thread" else held  # a thread's capture covers exactly its paths
                walk = other.at(repo).preview(scope=scope, known_paths=[*known, *grown])
            where = f"seed {seed} step {step} {kind} known {known}"
            if kind == "workspace":
                res = s.at(repo).capture(scope=scope, known_paths=known)
            elif kind == "thread":
                res = s.at(repo).capture_thread(known_paths=known, scope=scope)
            else:
                res = s.at(repo).capture_thread_summary(known_paths=known, thread_latest=latest, scope=scope)
            recorded = files_of(store_dir, res.id)  # decoded from disk by another store
            if res.files:
                assert recorded == res.files, where
            assert _present(recorded, repo) == _present(walk.files, repo), where
            assert res.file_count == walk.file_count == count_captured(recorded), where
            assert sorted(res.skipped) == sorted(walk.skipped), where
    finally:
        s.close()
    time.sleep(SETTLE)
    expected = walked_files(store_dir, repo)
    assert _present(files_of(store_dir, capture(store_dir, repo, summary=False).id), repo) == _present(expected, repo)


def test_a_threads_capture_in_a_session_leaves_another_threads_known_paths_to_it(repo: Path, tmp_path: Path) -> None:
    """One session captures for two threads (a resumed or forked thread, the proxy's several clients): thread B's
    capture must not hold what only thread A knows (a churn-directory file its agent edited), or rewinding B would
    put A's file back. Through the change journal exactly as when walking."""
    write(repo, "build/out.txt", "thread A's build output\n")
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        assert s.capturer.watch(repo)
        a = s.at(repo).capture_thread(known_paths=["build/out.txt"], scope=WIDE)
        assert is_captured(a.files.get("build/out.txt"))
        write(repo, "notes.txt", "edited before thread B's turn\n")
        b = s.at(repo).capture_thread(known_paths=["src/a.py"], scope=WIDE)
        assert "build/out.txt" not in b.files
        assert files_of(store_dir, b.id) == walked_files(store_dir, repo, thread=True, known_paths=["src/a.py"])
        write(repo, "build/out.txt", "thread A's agent wrote more\n")
        s.at(repo).restore(b.id, scope=WIDE, known_paths=["src/a.py"])
    assert (repo / "build/out.txt").read_text() == "thread A's agent wrote more\n"


def test_the_stats_a_restore_leaves_a_session_are_the_unpacked_ones_less_what_it_wrote() -> None:
    """After a restore a session's stats drop the paths it wrote or deleted, a lazy map left lazy (unpacking every
    key of 100,000 was ~1 s of a one-shot rewind): the same answers as the unpacked map less those paths, in layers."""
    from types import MappingProxyType

    from snapshot_store.detect.fastpath import _merged, _without

    keys = {f"d{i % 7}/f{i}": (i, i * 3, i * 5, i + 1, 0o100644) for i in range(200)}
    lazy = MappingProxyType(keys)  # a Mapping that is no dict, as walkstate.CapturedStats
    first, second = {"d1/f1", "d2/f9", "nowhere"}, {"d3/f3", "d1/f8"}
    newer = {"d4/f4": (9, 9, 9, 9, 0o100644), "new/x": (1, 2, 3, 4, 0o100644)}
    layered = _without(_merged(_without(lazy, first), newer), second)
    want = {**{p: k for p, k in keys.items() if p not in first}, **newer}
    want = {p: k for p, k in want.items() if p not in second}
    assert dict(layered) == want and len(layered) == len(want)
    for p in [*first, *second, "d0/f0", "new/x", "d4/f4"]:
        assert (p in layered) == (p in want) and layered.get(p) == want.get(p), p
    lazy_only = _without(lazy, first)
    assert not isinstance(lazy_only, dict) and dict(lazy_only) == {p: k for p, k in keys.items() if p not in first}
    # read again after a restore removed it (the first capture after a rewind): the path has its new key, and the
    # lazy map is still not unpacked (a layer over it, not a dict of its 100,000 keys)
    again = {"d1/f1": (7, 7, 7, 7, 0o100644)}
    reread = _merged(_without(lazy, first), again)
    assert not isinstance(reread, dict)
    assert dict(reread) == {**{p: k for p, k in keys.items() if p not in first}, **again}
    assert reread["d1/f1"] == again["d1/f1"] and "d2/f9" not in reread


def test_files_the_user_makes_are_settled_without_walking(repo: Path, trusted: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """New files and a symlink in directories that list nothing the saved walk does not see: the check names them
    (their directory lists the saved entries plus them), the fast path settles them as a walk would, and the walk it
    saves vouches for them: the next capture finds nothing changed (issue 35: the next one-shot capture walked)."""
    write(repo, "src/made.py", "made by the user\n")
    write(repo, "docs/x/z.md", "z\n")
    os.symlink("a.py", repo / "src" / "link.py")
    write(repo, "src/.made_hidden", "hidden: seen, not captured\n")
    time.sleep(SETTLE)
    expected = walked_files(trusted, repo)
    res = capture_without_walking(monkeypatch, trusted, repo)
    assert files_of(trusted, res.id) == expected
    assert expected["src/made.py"][0] == "f" and expected["src/link.py"] == ("l", "a.py")
    assert expected["src/.made_hidden"][0] == "x"
    time.sleep(SETTLE)
    again = capture_without_walking(monkeypatch, trusted, repo)
    assert again.unchanged and files_of(trusted, again.id) == expected


@pytest.mark.parametrize("change", ["too large", "a file made a symlink", "a directory made", "beside a hidden file"])
def test_what_the_check_cannot_name_still_gets_a_walks_verdict(repo: Path, trusted: Path, change: str) -> None:
    """A new file held back by its size (its key would have to be kept: the next process walks), a file become a
    symlink (same name, another type), a new directory, a file made in a directory that holds one the walk saw but
    does not look at: the map is what a walk finds, now and after the next change."""
    small = ScopeSettings(residue_max_files=1000, residue_max_file_bytes=1000)
    with Store.open(trusted) as s:  # the saved walk under these settings
        s.at(repo).capture(scope=small)
    time.sleep(SETTLE)
    if change == "too large":
        write(repo, "src/big.bin", b"x" * 5000)
    elif change == "a file made a symlink":
        os.unlink(repo / "src" / "new.py")
        os.symlink("a.py", repo / "src" / "new.py")
    elif change == "a directory made":
        write(repo, "src/pkg/m.py", "in a new directory\n")
    else:
        write(repo, "made_in_root.txt", "beside .hidden\n")
    time.sleep(SETTLE)

    def walked() -> dict:
        with Store.open(trusted) as s:
            latest = s.latest(repo)
            assert latest is not None
            return dict(s.at(repo).preview(scope=small, known_paths=captured_paths(s.files(latest))).files)

    expected = walked()
    with Store.open(trusted) as s:
        res = s.at(repo).capture_summary(scope=small)
    assert files_of(trusted, res.id) == expected
    if change == "too large":
        assert expected["src/big.bin"][0] == "x"
        write(repo, "src/big.bin", b"small now\n")  # under the limit: a walk captures it
        time.sleep(SETTLE)
        expected = walked()
        with Store.open(trusted) as s:
            res = s.at(repo).capture_summary(scope=small)
        assert files_of(trusted, res.id) == expected and expected["src/big.bin"][0] == "f"


@pytest.mark.parametrize("change", ["a tracked file removed", "an untracked file removed", "a file renamed",
                                    "made and removed", "made just before the last capture, removed"])
def test_files_the_user_removes_or_renames_are_settled_without_walking(repo: Path, trusted: Path, change: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Files of the walk's gone from their directory (which lists the saved entries less them, plus any made): the
    check names them too, the capture records them as a walk would, without walking, and the walk it saves no longer
    looks for them."""
    if change == "a tracked file removed":
        os.unlink(repo / "src" / "b.py")
    elif change == "an untracked file removed":
        os.unlink(repo / "src" / "new.py")
    elif change == "a file renamed":
        os.rename(repo / "src" / "a.py", repo / "src" / "a_renamed.py")
    elif change == "made and removed":
        os.unlink(repo / "src" / "b.py")
        write(repo, "src/made.py", "made\n")
    else:  # its key in the saved walk is untrusted (racy): its type, file or symlink, is not known from it
        write(repo, "src/made.py", "made\n")
        capture(trusted, repo)
        time.sleep(SETTLE)
        os.unlink(repo / "src" / "made.py")
    time.sleep(SETTLE)
    expected = walked_files(trusted, repo)
    res = capture_without_walking(monkeypatch, trusted, repo)
    assert files_of(trusted, res.id) == expected
    time.sleep(SETTLE)
    expected = walked_files(trusted, repo)
    with Store.open(trusted) as s:
        again = s.at(repo).capture_summary(scope=WIDE)
    assert files_of(trusted, again.id) == expected


def test_saved_walks_of_earlier_formats_are_read_and_another_version_s_is_not(repo: Path, trusted: Path) -> None:
    """Version 3 (no `uncaptured`: read as not known), version 2 (the groups decoded with the rest, no untrusted
    list) and version 1 (a bare tuple of 13 fields, before `looked_ns`: read as not knowing when it looked) still
    read, their groups checked as version 4's are; a version this code does not know reads as no saved walk (the
    capture walks) rather than as fields in the wrong places."""
    state = saved_walk(trusted)
    assert state is not None and state.looked_ns > 0 and state.uncaptured == []
    body = walkstate.encode(state)
    assert body is not None
    version, fields = marshal.loads(body)
    assert version == walkstate.WALK_VERSION == 4 and len(fields) == walkstate.V3_FIELDS + 1
    assert isinstance(fields[walkstate.SEEN_FIELD], bytes)  # the groups, decoded when first asked
    groups = marshal.loads(fields[walkstate.SEEN_FIELD])
    assert groups == state.seen
    v3 = fields[:walkstate.V3_FIELDS]
    v2 = (*fields[:walkstate.SEEN_FIELD], groups, *fields[walkstate.SEEN_FIELD + 1:walkstate.V2_FIELDS])
    for old_body, looked in ((marshal.dumps((3, v3), 2), state.looked_ns),
                             (marshal.dumps((2, v2), 2), state.looked_ns),
                             (marshal.dumps(v2[:walkstate.UNVERSIONED_FIELDS], 2), 0)):
        old = walkstate.decode(old_body)
        assert old is not None and old.looked_ns == looked and old.covered_set() == state.covered_set()
        assert old.seen == state.seen and old.untrusted() == state.untrusted() and old.uncaptured is None
    assert walkstate.decode(marshal.dumps((3, fields), 2)) is None  # version 4's fields called version 3's
    assert walkstate.decode(marshal.dumps((version, (*fields[:-1], ["../x"])), 2)) is None  # a path of no workspace
    forged = [(groups[0][0], [*groups[0][1], ".."], groups[0][2] + UNTRUSTED), *groups[1:]]
    assert walkstate.decode(marshal.dumps((2, (*v2[:walkstate.SEEN_FIELD], forged, *v2[walkstate.SEEN_FIELD + 1:])),
                                          2)) is None
    assert walkstate.decode(marshal.dumps((version + 1, (*fields, "more")), 2)) is None
    assert walkstate.decode(marshal.dumps((2, fields), 2)) is None  # version 4's fields called version 2's
    assert walkstate.decode(marshal.dumps(fields, 2)) is None  # 16 bare fields: no version of ours


def test_a_walk_state_s_groups_are_decoded_only_when_asked_and_written_back_as_stored(repo: Path,
                                                                                      trusted: Path) -> None:
    """A capture that the monitor's answer (or a check of directories only) settles never decodes the groups: the
    state it writes again holds them as it read them, with the paths whose keys are untrusted, and once decoded they
    are the same groups a walk made."""
    state = saved_walk(trusted)
    assert state is not None and state._seen is None and state.seen_stored
    stored, untrusted = state.seen_stored, state.untrusted()
    again = walkstate.decode(walkstate.encode(state) or b"")
    assert again is not None and again.seen_stored == stored and again.untrusted() == untrusted
    assert again.seen == marshal.loads(stored) and again.untrusted() == walkstate.untrusted_of(again.seen)


def test_a_threads_first_capture_of_a_tree_git_covers_whole_decodes_no_covered_set(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A thread that knows no path yet covers the Git listing; where the saved walk covered exactly that, the listing's
    marshal equals the stored one and the capture is found unchanged without decoding the covered set (a set of every
    tracked path, built and compared, ~35 ms at 100,000 files)."""
    make_repo(ws, {"README.md": "readme\n", "src/a.py": "a = 1\n", "docs/x/y.md": "y\n"})
    age_tree(ws, settle=SETTLE)
    store_dir = tmp_path / "store"

    def turn_capture() -> CaptureResult:  # a new thread's pre-turn capture, as `codexr exec` takes it
        with Store.open(store_dir) as s:
            return s.at(ws).capture_thread_summary(known_paths=[], scope=WIDE, kind="pre-turn")

    first = turn_capture()

    def decoded(_state: WalkState) -> frozenset[str]:
        raise AssertionError("the covered set was decoded")

    monkeypatch.setattr(WalkState, "covered_set", decoded)
    again = turn_capture()
    monkeypatch.undo()
    assert again.unchanged and again.id == first.id


def test_a_sessions_unchanged_turn_captures_compare_the_git_listing_once(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watched session's pre-turn captures of an unchanged tree marshalled the whole Git listing each time to compare
    it with the saved walk's (~10 ms of ~12 ms at 100,000 files, issue 35's goal 15 ms): the same listing found equal
    to the same saved bytes is not marshalled again; a changed listing is."""
    import snapshot_store.detect.door as door_mod

    make_repo(ws, {"README.md": "readme\n", "src/a.py": "a = 1\n", "docs/x/y.md": "y\n"})
    age_tree(ws, settle=SETTLE)
    listings: list[object] = []
    real_dumps = marshal.dumps

    def counted(value: object, *args: int) -> bytes:
        if isinstance(value, list) and "src/a.py" in value:
            listings.append(value)
        return real_dumps(value, *args)

    with Store.open(tmp_path / "store") as s:  # an earlier process: the session goes on from its saved walk
        first = s.at(ws).capture_thread_summary(known_paths=[], scope=WIDE, kind="pre-turn")
    with Store.open(tmp_path / "store") as s:
        s.capturer.watch(ws)
        monkeypatch.setattr(door_mod.marshal, "dumps", counted)
        again = [s.at(ws).capture_thread_summary(known_paths=[], scope=WIDE, kind="pre-turn") for _ in range(4)]
        assert all(r.unchanged and r.id == first.id for r in again)
        assert len(listings) <= 1, f"the Git listing was marshalled {len(listings)} times for 4 unchanged captures"
        write(ws, "src/b.py", "b = 2\n")
        git(ws, "add", "src/b.py")
        age_tree(ws, settle=SETTLE)
        changed = s.at(ws).capture_thread_summary(known_paths=[], scope=WIDE, kind="pre-turn")
        monkeypatch.undo()
        assert not changed.unchanged and "src/b.py" in s.files(changed.id)


def test_a_sessions_unchanged_captures_after_a_change_leave_the_index_and_the_next_process_checks_it(
        ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a change the journal answered, each unchanged capture of a watched session wrote its saved walk and the
    index again (~50 ms at 100,000 files: 30 MB written and renamed). The journal saw nothing move, so the walk saved
    for the snapshot (or one it holds unchanged, up to the chain limit) stands; a new process checks it, captures
    without walking, and sees what a walk sees."""
    make_repo(ws, {"README.md": "readme\n", "src/a.py": "a = 1\n", "docs/x/y.md": "y\n"})
    age_tree(ws, settle=SETTLE)
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        s.capturer.watch(ws)
        s.at(ws).capture(scope=WIDE)
        write(ws, "src/a.py", "a = 2\n")
        age_tree(ws, settle=SETTLE)
        changed = s.at(ws).capture(scope=WIDE)  # the journal's answer: the walk saved for this snapshot
        assert not changed.unchanged
        s.capturer.detect.settle()  # its save, which a session leaves to a thread, done now
        saved = os.stat(index_file(store_dir))
        turn = s.at(ws).capture_thread_summary(known_paths=[], scope=WIDE, kind="pre-turn")
        plain = [s.at(ws).capture(scope=WIDE) for _ in range(3)]  # new snapshots, each an unchanged step
        assert turn.unchanged and all(p.unchanged for p in plain)
        now = os.stat(index_file(store_dir))
        assert (now.st_ino, now.st_mtime_ns) == (saved.st_ino, saved.st_mtime_ns), "the index was written again"
        for _ in range(walkstate.CHAIN_LIMIT):
            s.at(ws).capture(scope=WIDE)
        assert saved_walk(store_dir).snapshot != changed.id  # past the chain limit: saved again
    write(ws, "docs/x/y.md", "y, changed after the session\n")
    age_tree(ws, settle=SETTLE)
    expected = walked_files(store_dir, ws)
    after = capture_without_walking(monkeypatch, store_dir, ws)
    assert files_of(store_dir, after.id) == expected and expected["docs/x/y.md"] != changed.files["docs/x/y.md"]


def test_a_new_threads_capture_in_a_session_drops_a_removed_files_tombstone_without_walking(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's journal last captured an untracked file's removal (a tombstone, covered then); a new thread's
    capture covers only the Git listing, where a walk would record nothing for that path: the journal's capture
    drops the tombstone as the check's does, instead of walking (the app's new thread after a removal walked the
    whole tree)."""
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        assert s.capturer.watch(repo)
        s.at(repo).capture_thread_summary(known_paths=["src/new.py"], scope=WIDE)
        os.unlink(repo / "src/new.py")
        gone = s.at(repo).capture_thread(known_paths=["src/new.py"], scope=WIDE)
        assert gone.files["src/new.py"] == ABSENT
        time.sleep(SETTLE)
        want = walked_files(store_dir, repo, thread=True)
        with monkeypatch.context() as m:
            m.setattr(scope_mod, "select", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("walked")))
            fresh = s.at(repo).capture_thread(known_paths=[], scope=WIDE)
    assert "src/new.py" not in fresh.files and files_of(store_dir, fresh.id) == want


def test_a_sessions_index_save_left_to_a_thread_is_in_the_file_once_the_session_closes(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session's capture after a change leaves the walk's encoding and the index file's rewrite to a thread (~39 of
    ~50 ms at 100,000 files). A session that closes before the thread ran writes it at its close: the next process
    checks the walk saved for the session's last snapshot, captures without walking, and sees what a walk sees."""
    monkeypatch.setattr(door_mod, "BEHIND_DELAY", 600.0)  # the thread never comes first here
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        assert s.capturer.watch(repo)
        s.at(repo).capture(scope=WIDE)
        for text in ("a = 2, in the session\n", "a = 3, in the session\n"):
            write(repo, "src/a.py", text)  # each capture's look first runs the save the one before left
            age_tree(repo, settle=SETTLE)
            last = s.at(repo).capture(scope=WIDE)
            assert not last.unchanged
        before = saved_walk(store_dir)
        assert before is not None and before.snapshot != last.id  # the last save is still the thread's
    walk = saved_walk(store_dir)
    assert walk is not None and walk.snapshot == last.id
    write(repo, "src/b.py", "b = 3, after the session\n")
    age_tree(repo, settle=SETTLE)
    expected = walked_files(store_dir, repo)
    after = capture_without_walking(monkeypatch, store_dir, repo)
    assert files_of(store_dir, after.id) == expected and expected["src/b.py"] != last.files["src/b.py"]


KILLED_SESSION = """
import os, sys, time
from pathlib import Path
from snapshot_store import Store
from store_helpers import WIDE, age_tree, write
store_dir, ws = Path(sys.argv[1]), Path(sys.argv[2])
import snapshot_store.detect.door as door
door.BEHIND_DELAY = 600.0  # the thread never comes first here
s = Store.open(store_dir)
assert s.capturer.watch(ws)
s.at(ws).capture(scope=WIDE)
for text in ("a = 2, in the killed session\\n", "a = 3, in the killed session\\n"):
    write(ws, "src/a.py", text)  # each capture's look first runs the save the one before left
    age_tree(ws, settle=0.15)
    last = s.at(ws).capture(scope=WIDE)
print(last.id, flush=True)
time.sleep(60)  # killed here, its index save still left to the thread
"""


KILLED_PRE_TURN = """
import sys, threading, time
from pathlib import Path
from snapshot_store import Store
from snapshot_store.detect.index import WorkspaceIndex
from store_helpers import WIDE, age_tree, write
store_dir, ws = Path(sys.argv[1]), Path(sys.argv[2])
real = WorkspaceIndex.save
def stalled(self, *, per_path=True):
    if threading.current_thread() is not threading.main_thread():
        time.sleep(60)  # the thread's save, still to be written when the kill comes
    real(self, per_path=per_path)
WorkspaceIndex.save = stalled
s = Store.open(store_dir)
write(ws, "src/a.py", "a = 2, before the killed turn\\n")
age_tree(ws, settle=0.15)
print(s.at(ws).capture(scope=WIDE, kind="pre-turn").id, flush=True)
time.sleep(60)  # the turn: killed here, the index save still on its thread
"""


@pytest.mark.parametrize("script", ["session", "one-shot pre-turn"])
def test_a_session_killed_before_its_index_save_ran_leaves_nothing_the_next_capture_trusts_wrongly(
        repo: Path, tmp_path: Path, script: str) -> None:
    """SIGKILL of a real process while its last capture's index save is still left to a thread (a session's, or a
    one-shot `codexr exec`'s pre-turn capture, whose save runs while the turn does): the file holds the walk saved
    before, for an older snapshot, which the next process cannot use; it walks, and records what a walk sees, the
    killed process's change and one made after it included."""
    import signal
    import subprocess
    import sys

    store_dir = tmp_path / "store"
    capture(store_dir, repo)  # a saved walk the killed process's first capture goes on from
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1]), str(Path(__file__).parent)])}
    code = KILLED_SESSION if script == "session" else KILLED_PRE_TURN
    proc = subprocess.Popen([sys.executable, "-c", code, str(store_dir), str(repo)], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        last = (proc.stdout.readline() if proc.stdout is not None else "").strip()
        assert len(last) == 64, "the session did not capture"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(30)
    walk = saved_walk(store_dir)
    assert walk is None or walk.snapshot != last  # the save left to the thread never ran
    write(repo, "src/b.py", "b = 3, after the kill\n")
    age_tree(repo, settle=SETTLE)
    expected = walked_files(store_dir, repo)
    after = capture(store_dir, repo)
    got, killed = files_of(store_dir, after.id), files_of(store_dir, last)
    assert got == expected
    assert got["src/a.py"] == killed["src/a.py"] and got["src/b.py"] != killed["src/b.py"]


def test_a_failing_index_save_left_to_a_thread_fails_no_capture(repo: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The index save a session leaves to a thread is disposable: one that raises (here, a save that cannot run at
    all) must not fail the next capture, which runs it first; the captures record what a walk sees."""
    monkeypatch.setattr(door_mod, "BEHIND_DELAY", 600.0)
    store_dir = tmp_path / "store"

    def broken(self: WorkspaceIndex, *, per_path: bool = True) -> None:
        raise RuntimeError("the save cannot run")

    with Store.open(store_dir) as s:
        assert s.capturer.watch(repo)
        s.at(repo).capture(scope=WIDE)
        with monkeypatch.context() as m:
            m.setattr(WorkspaceIndex, "save", broken)
            write(repo, "src/a.py", "a = 2, its save broken\n")
            age_tree(repo, settle=SETTLE)
            s.at(repo).capture(scope=WIDE)
            write(repo, "src/b.py", "b = 3, its save broken too\n")
            age_tree(repo, settle=SETTLE)
            grown = captured_paths(s.files(s.latest(s.workspace(repo))))
            expected = dict(s.at(repo).preview(scope=WIDE, known_paths=grown).files)
            got = s.at(repo).capture(scope=WIDE)  # its look runs the broken save first
            assert dict(got.files) == expected
            s.capturer.detect.settle()


@pytest.mark.parametrize("watched", [False, True])
def test_a_pre_turn_captures_index_save_runs_while_the_turn_does(
        repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, watched: bool) -> None:
    """A pre-turn capture returns its snapshot (all the turn waits for) before its index save has run: the save starts
    on a thread at once, in a one-shot `codexr exec` without a journal (where it ran before the prompt was sent) and in
    a session (where a turn shorter than BEHIND_DELAY paid it at the post-turn capture's look). The next look and the
    store's close wait for it; the file then holds the pre-turn snapshot's walk. Other kinds in a one-shot process
    still save in line."""
    import threading

    monkeypatch.setattr(door_mod, "BEHIND_DELAY", 600.0)  # only the pre-turn capture's goes at once
    entered, release, saved_in = threading.Event(), threading.Event(), []
    real_save = WorkspaceIndex.save

    def held_save(self: WorkspaceIndex, *, per_path: bool = True) -> None:
        saved_in.append(threading.current_thread() is threading.main_thread())
        if not saved_in[-1]:
            entered.set()
            assert release.wait(30), "the test never let the save go"
        real_save(self, per_path=per_path)

    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        if watched:
            assert s.capturer.watch(repo)
        s.at(repo).capture(scope=WIDE)
        s.capturer.detect.settle()
        monkeypatch.setattr(WorkspaceIndex, "save", held_save)
        write(repo, "src/a.py", "a = 2, before the turn\n")
        age_tree(repo, settle=SETTLE)
        pre = s.at(repo).capture(scope=WIDE, kind="pre-turn")  # returns while the save waits on `release`
        assert not pre.unchanged
        assert entered.wait(10) and saved_in == [False], saved_in
        walk = saved_walk(store_dir)
        assert walk is None or walk.snapshot != pre.id
        release.set()
        s.capturer.detect.settle()
        walk = saved_walk(store_dir)
        assert walk is not None and walk.snapshot == pre.id
        if not watched:
            write(repo, "src/a.py", "a = 3, by hand\n")
            age_tree(repo, settle=SETTLE)
            s.at(repo).capture(scope=WIDE)
            assert saved_in == [False, True]  # a plain capture's save: in the caller, before it returns
