"""The change journal's contract (snapshot_store/detect/journal.py), run against every implementation that runs on
Linux: inotify (Linux's own) and watchdog's observer (FSEvents on macOS; its inotify observer here). A change
finished before a capture is in that capture; a capture with the journal records exactly what a fresh walk records;
what the journal cannot vouch for makes the capture walk (issue 32 §3)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import write

from snapshot_store import Store
from snapshot_store import scope as scope_mod
from snapshot_store.detect.journal import KINDS, open_journal


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.open(tmp_path / "store")
    yield s
    s.close()


def _walked(tmp_path: Path, ws: Path, known: list[str]) -> dict[str, object]:
    """What a fresh process's capture (no journal: a walk) records now."""
    with Store.open(tmp_path / f"walker-{os.urandom(3).hex()}") as walker:
        return dict(walker.at(ws).capture(known_paths=known).files or {})


def _present(files: object) -> dict[str, object]:
    """A map without its absences (a store that captured a path before records its removal; a fresh one cannot)."""
    assert isinstance(files, dict)
    return {p: e for p, e in files.items() if e[0] != "-"}


def test_a_drain_holds_every_change_finished_before_it(tmp_path: Path, kind: str) -> None:
    ws = tmp_path / "ws"
    write(ws, "a.txt", "a")
    write(ws, "sub/b.txt", "b")
    journal = open_journal(str(ws), kind)
    assert journal is not None, f"the {kind} journal does not start here"
    try:
        for d in ("", "sub"):
            journal.watch_dir(d)
        assert not journal.drain().files
        (ws / "a.txt").write_text("A")
        (ws / "sub" / "c.txt").write_text("c")
        (ws / "sub" / "b.txt").unlink()
        changes = journal.drain()  # at once: no sleep between the writes and the drain
        assert {"a.txt", "sub/c.txt", "sub/b.txt"} <= changes.files, changes
        assert not changes.lost
        again = journal.drain()
        assert not again.files and not again.structural, again  # each change is told once; its own cookie never
        (ws / "sub" / "d").mkdir()
        assert journal.drain().structural  # a directory made: the capture walks
    finally:
        journal.close()


def test_captures_with_the_journal_record_what_a_walk_records(tmp_path: Path, store: Store, kind: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    walks: list[str] = []
    real_select = scope_mod.select
    monkeypatch.setattr(scope_mod, "select", lambda *a, **k: walks.append("walk") or real_select(*a, **k))
    ws = tmp_path / "ws"
    write(ws, "a.txt", "a")
    write(ws, "sub/b.txt", "b")
    write(ws, "node_modules/p/i.js", "dep")
    known = ["node_modules/p/i.js"]
    assert store.capturer.watch(ws, kind)
    first = store.at(ws).capture(known_paths=known)
    assert walks == ["walk"]
    second = store.at(ws).capture(known_paths=known)
    assert second.unchanged and second.files == first.files
    (ws / "a.txt").write_text("A!")
    (ws / "node_modules" / "p" / "i.js").write_text("patched dep")
    os.chmod(ws / "sub" / "b.txt", 0o700)
    third = store.at(ws).capture(known_paths=known)
    assert walks == ["walk"], "the journal could not vouch for changes of files alone"
    assert third.files == _walked(tmp_path, ws, known)
    write(ws, "new.txt", "new")  # a new file may change which untracked files are kept: a walk decides
    (ws / "sub" / "b.txt").rename(ws / "sub" / "moved.txt")
    after_rename = store.at(ws).capture(known_paths=known)
    assert _present(after_rename.files) == _present(_walked(tmp_path, ws, known))
    assert after_rename.files is not None and after_rename.files["sub/b.txt"][0] == "-"  # its removal recorded
    os.rename(ws / "sub", ws / "renamed")  # a directory renamed: structural
    fourth = store.at(ws).capture(known_paths=known)
    assert _present(fourth.files) == _present(_walked(tmp_path, ws, known))
    assert "renamed/moved.txt" in (fourth.files or {}) and "sub/moved.txt" not in {
        p for p, e in (fourth.files or {}).items() if e[0] == "f"}


def test_the_journal_leaves_nothing_in_the_workspace(tmp_path: Path, store: Store, kind: str) -> None:
    ws = tmp_path / "ws"
    write(ws, "a.txt", "a")
    assert store.capturer.watch(ws, kind)
    for i in range(5):
        (ws / "a.txt").write_text(str(i))
        store.at(ws).capture()
    assert sorted(os.listdir(ws)) == ["a.txt"]
