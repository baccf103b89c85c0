"""A restore interrupted mid-apply (crash, kill) is finished on the next run, from its journal."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path

import blake3
import pytest

import snapshot_store.restore.apply as restore_mod
from snapshot_store import CorruptStore, ScopeSettings, Store
from snapshot_store.safefs import SafeRoot

SCOPE = ScopeSettings(residue_max_files=1000)
TMP_PREFIX = ".codexr-tmp-"


class Killed(BaseException):
    """Stands in for SIGKILL / power loss: nothing below catches a BaseException it does not re-raise."""


def tree(root: Path) -> dict[str, object]:
    """Every directory, file (bytes, mode) and symlink below root."""
    out: dict[str, object] = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            p = Path(dirpath, d)
            out[p.relative_to(root).as_posix() + "/"] = "dir" if not p.is_symlink() else ("link", os.readlink(p))
        for f in files:
            p = Path(dirpath, f)
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = ("link", os.readlink(p))
            else:
                out[rel] = (p.read_bytes(), stat.S_IMODE(p.lstat().st_mode))
    return out


def write(root: Path, rel: str, text: str) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "home" / "file_snapshots"


def crash_after(monkeypatch: pytest.MonkeyPatch, k: int) -> list[str]:
    """Make the restore apply step die (like a kill) before its (k+1)-th action; return paths done."""
    real = restore_mod._do
    done: list[str] = []

    def dying(store: Store, fs: SafeRoot, a: restore_mod.Action, *rest: object) -> object:
        if len(done) >= k:
            raise Killed(f"killed before {a.op} {a.path}")
        result = real(store, fs, a, *rest)  # type: ignore[arg-type]
        done.append(a.path)
        return result

    monkeypatch.setattr(restore_mod, "_do", dying)
    return done


def journals(store_dir: Path) -> list[Path]:
    return sorted((store_dir / "journal").glob("*.json"))


def temps(root: Path) -> Iterator[Path]:
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f.startswith(TMP_PREFIX):
                yield Path(dirpath, f)


def make_interrupted_restore(ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch, k: int
                             ) -> tuple[str, dict[str, object], list[str]]:
    """Capture a target, change the workspace, start a restore that is killed after k actions.

    Returns (target id, tree at the target, the paths the killed restore finished).
    """
    for name in "abcde":
        write(ws, f"{name}.txt", f"target {name}\n")
    write(ws, "sub/f.txt", "target f\n")
    with Store.open(store_dir) as store:
        target = store.at(ws).capture(scope=SCOPE).id
    target_tree = tree(ws)
    for name in "abcd":
        write(ws, f"{name}.txt", f"edited later {name}, longer than before\n")
    write(ws, "sub/f.txt", "edited later f\n")
    (ws / "e.txt").unlink()
    write(ws, "n1.txt", "created by a shell command\n")
    write(ws, "n2.txt", "also created later\n")
    done = crash_after(monkeypatch, k)
    store = Store.open(store_dir)
    with pytest.raises(Killed):
        store.at(ws).restore(target, scope=SCOPE)
    store.close()
    monkeypatch.undo()
    return target, target_tree, done


def test_killed_restore_leaves_a_journal_and_a_half_applied_tree(
        ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _target, target_tree, done = make_interrupted_restore(ws, store_dir, monkeypatch, k=3)
    assert len(journals(store_dir)) == 1
    doc = json.loads(journals(store_dir)[0].read_bytes())
    assert doc["root"] == str(ws)
    # Really half-way: the first three actions happened, the rest did not.
    assert done == ["n1.txt", "n2.txt", "a.txt"]
    now = tree(ws)
    assert "n1.txt" not in now and "n2.txt" not in now
    assert now["a.txt"] == target_tree["a.txt"]
    assert now["b.txt"] != target_tree["b.txt"]
    assert "e.txt" not in now


def test_recover_finishes_the_restore_and_leaves_paths_changed_since_alone(
        ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _target, target_tree, _done = make_interrupted_restore(ws, store_dir, monkeypatch, k=3)
    # The kill also left a temp file of a write in progress.
    (ws / f"{TMP_PREFIX}0123456789ab").write_bytes(b"half of a file")
    # Before the next run, the user edits a file the restore had not reached yet.
    write(ws, "d.txt", "the user's own edit after the crash\n")
    users_d = (ws / "d.txt").read_bytes()

    with Store.open(store_dir) as store:
        report = store.at(ws).recover()
    assert report is not None
    final = tree(ws)
    expected = {k: v for k, v in target_tree.items() if k != "d.txt"}
    assert {k: v for k, v in final.items() if k != "d.txt"} == expected
    assert (ws / "d.txt").read_bytes() == users_d
    assert [p for p, _why in report.left] == ["d.txt"]
    assert {"b.txt", "c.txt", "e.txt", "sub/f.txt"} <= set(report.finished)
    assert "d.txt" not in report.finished
    assert list(temps(ws)) == []
    assert journals(store_dir) == []
    # Nothing left to do: a second recovery is a no-op.
    with Store.open(store_dir) as store:
        assert store.at(ws).recover() is None


def test_next_capture_finishes_the_interrupted_restore_first(
        ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _target, target_tree, _done = make_interrupted_restore(ws, store_dir, monkeypatch, k=1)
    (ws / "sub" / f"{TMP_PREFIX}aaaaaaaaaaaa").write_bytes(b"junk")
    (ws / f"{TMP_PREFIX}bbbbbbbbbbbb").write_bytes(b"junk")
    write(ws, "c.txt", "user edit after crash\n")
    with Store.open(store_dir) as store:
        res = store.at(ws).capture(scope=SCOPE)
        files = store.files(res.id)
    final = tree(ws)
    assert {k: v for k, v in final.items() if k != "c.txt"} == {k: v for k, v in target_tree.items()
                                                                 if k != "c.txt"}
    assert (ws / "c.txt").read_text() == "user edit after crash\n"
    # The capture saw the finished state, including the user's edit.
    assert files["c.txt"][3] == blake3.blake3(b"user edit after crash\n").hexdigest()
    assert files["a.txt"][3] == blake3.blake3(b"target a\n").hexdigest()
    assert "n1.txt" not in files or files["n1.txt"] == ("-",)
    assert list(temps(ws)) == []
    assert journals(store_dir) == []


def test_next_restore_finishes_the_interrupted_one_and_loses_nothing(
        ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target, target_tree, _done = make_interrupted_restore(ws, store_dir, monkeypatch, k=2)
    write(ws, "b.txt", "user edit after crash\n")
    with Store.open(store_dir) as store:
        res = store.at(ws).restore(target, scope=SCOPE)
        assert res.safety_id is not None
        safety_files = store.files(res.safety_id)
    # The user asked again for the target, so the tree is the target...
    assert tree(ws) == target_tree
    # ...and the edit made after the crash is held by the new safety snapshot, not lost.
    assert safety_files["b.txt"][3] == blake3.blake3(b"user edit after crash\n").hexdigest()
    assert journals(store_dir) == []


def kill_before_writing(monkeypatch: pytest.MonkeyPatch, victim: str) -> None:
    """Die (like a kill) when the restore is about to write `victim`, after anything done before it."""
    real = SafeRoot.write_file

    def dying(self: SafeRoot, rel: str, chunks: Iterable[bytes], mode: int) -> None:
        if rel == victim:
            raise Killed(f"killed before writing {rel}")
        real(self, rel, chunks, mode)

    monkeypatch.setattr(SafeRoot, "write_file", dying)


@pytest.mark.parametrize("kill_point", ["directory-emptied", "directory-removed"])
def test_recovery_finishes_a_restore_that_replaces_a_directory_with_a_file(
        ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch, kill_point: str) -> None:
    """Killed after emptying (or removing) the directory that stands where the target has a file."""
    write(ws, "x", "x was a file\n")
    write(ws, "keep.txt", "keep\n")
    with Store.open(store_dir) as store:
        target = store.at(ws).capture(scope=SCOPE).id
    target_tree = tree(ws)
    (ws / "x").unlink()
    write(ws, "x/inner.txt", "now x is a directory\n")
    with Store.open(store_dir) as store:
        store.at(ws).capture(scope=SCOPE)
    if kill_point == "directory-emptied":
        crash_after(monkeypatch, 1)
    else:
        kill_before_writing(monkeypatch, "x")
    store = Store.open(store_dir)
    with pytest.raises(Killed):
        store.at(ws).restore(target, scope=SCOPE)
    store.close()
    monkeypatch.undo()
    assert journals(store_dir)
    assert not (ws / "x" / "inner.txt").exists()
    assert (ws / "x").is_dir() if kill_point == "directory-emptied" else not (ws / "x").exists()

    with Store.open(store_dir) as store:
        report = store.at(ws).recover()
    assert report is not None
    assert tree(ws) == target_tree
    assert journals(store_dir) == []


# ----------------------------------------------------------------------------- damaged journals


def _actions_not_a_list(doc: dict[str, object]) -> dict[str, object]:
    return {**doc, "actions": 5}


def _short_action(doc: dict[str, object]) -> dict[str, object]:
    return {**doc, "actions": [["write", "a.txt"]]}


def _valid_then_short(doc: dict[str, object]) -> dict[str, object]:
    actions = list(doc["actions"])  # type: ignore[call-overload]
    return {**doc, "actions": [actions[0], ["write"]]}


def _bad_target_entry(doc: dict[str, object]) -> dict[str, object]:
    return {**doc, "actions": [["write", "a.txt", ["f", 420], None]]}


@pytest.mark.parametrize("damage", [
    pytest.param(lambda raw: raw[: len(raw) // 2], id="truncated"),
    pytest.param(lambda raw: b"\x00\xffnot json at all", id="garbage"),
    pytest.param(lambda raw: json.dumps([1, 2, 3]).encode(), id="not-an-object"),
    pytest.param(lambda raw: json.dumps({**json.loads(raw), "safety": "../../x"}).encode(), id="bad-safety-id"),
    pytest.param(lambda raw: json.dumps(_actions_not_a_list(json.loads(raw))).encode(), id="actions-not-list"),
    pytest.param(lambda raw: json.dumps(_short_action(json.loads(raw))).encode(), id="short-action"),
    pytest.param(lambda raw: json.dumps(_valid_then_short(json.loads(raw))).encode(), id="valid-then-short"),
    pytest.param(lambda raw: json.dumps(_bad_target_entry(json.loads(raw))).encode(), id="bad-target-entry"),
])
def test_damaged_journal_is_a_clear_error_and_changes_nothing(
        ws: Path, store_dir: Path, monkeypatch: pytest.MonkeyPatch, damage: object) -> None:
    make_interrupted_restore(ws, store_dir, monkeypatch, k=0)  # journal written, nothing applied yet
    [journal] = journals(store_dir)
    damaged = damage(journal.read_bytes())  # type: ignore[operator]
    journal.write_bytes(damaged)
    before = tree(ws)
    with Store.open(store_dir) as store, pytest.raises(CorruptStore) as info:
        store.at(ws).recover()
    message = str(info.value)
    assert "journal" in message and "\n" not in message
    assert tree(ws) == before
    assert journal.read_bytes() == damaged  # kept for the user to inspect or move away
