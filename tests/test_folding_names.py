"""Names on a volume that folds letter case and Unicode form (APFS, HFS+: most Macs), on a FUSE file system that
behaves as they do (tests/foldfs.py): one file reachable under two spellings is one file to a capture, a plan and
a restore, which put back the file under its own spelling and never delete it through its other name (issue 32).

Each scenario runs `codexr snapshots` as a user does and checks the names as the directory lists them, the bytes
and the exit code; ext4's exact behaviour is what every other store test checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import RigFactory
from fold_volume import folding_volume, missing
from store_helpers import git, make_repo

from app.codex.scripted_model import message, shell, update_file
from snapshot_store import Store
from snapshot_store.manifest import is_captured
from snapshot_store.names import EXACT, Folding, probe

REPO = Path(__file__).parents[1]
NFC, NFD = unicodedata.normalize("NFC", "café.txt"), unicodedata.normalize("NFD", "café.txt")

pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


@pytest.fixture
def volume(tmp_path: Path) -> Iterator[Path]:
    with folding_volume(tmp_path) as mount:
        yield mount


def _codexr(home: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "app.cli", "-C", str(ws), *args], env=env, text=True,
                          capture_output=True, timeout=120)


def _capture(home: Path, ws: Path) -> dict[str, object]:
    done = _codexr(home, ws, "snapshots", "capture", "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def _restore(home: Path, ws: Path, snap: object) -> dict[str, object]:
    done = _codexr(home, ws, "snapshots", "restore", str(snap), "--yes", "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def _listed(ws: Path) -> dict[str, bytes]:
    """The workspace's files by the names its directories list (Git's own files aside)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(ws):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            path = Path(dirpath) / name
            out[str(path.relative_to(ws))] = path.read_bytes()
    return out


def test_the_probe_tells_a_folding_volume_from_an_exact_one(volume: Path, tmp_path: Path) -> None:
    (volume / "ws").mkdir()
    (volume / "ws" / "Readme.md").write_text("x")
    assert probe(volume / "ws") == Folding(case=True, unicode=True)
    (volume / "empty").mkdir()
    assert probe(volume / "empty") == Folding(case=True, unicode=True)  # no name to ask: a file is made and removed
    assert os.listdir(volume / "empty") == []
    (tmp_path / "exact").mkdir()
    (tmp_path / "exact" / "Readme.md").write_text("x")
    assert probe(tmp_path / "exact") == EXACT


def test_a_case_only_rename_by_git_mv_is_undone_and_redone(volume: Path, tmp_path: Path) -> None:
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {"Readme.md": "hello\n", "src/app.py": "print(1)\n"})
    before = _capture(home, ws)
    git(ws, "mv", "Readme.md", "README.md")
    after = _capture(home, ws)
    assert after["file_count"] == 2  # one file, under the spelling the directory lists

    undo = _restore(home, ws, before["id"])
    assert _listed(ws) == {"Readme.md": b"hello\n", "src/app.py": b"print(1)\n"}
    assert undo["deleted"] == []
    redo = _restore(home, ws, undo["safety_id"])
    assert _listed(ws) == {"README.md": b"hello\n", "src/app.py": b"print(1)\n"}
    assert redo["deleted"] == []


def test_a_file_deleted_and_made_again_in_another_case_comes_back_in_its_own(volume: Path, tmp_path: Path) -> None:
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {"NOTES.txt": "the user's notes\n"})
    before = _capture(home, ws)
    (ws / "NOTES.txt").unlink()
    (ws / "notes.txt").write_text("the agent's notes\n")
    _capture(home, ws)

    undo = _restore(home, ws, before["id"])
    assert _listed(ws) == {"NOTES.txt": b"the user's notes\n"}
    _restore(home, ws, undo["safety_id"])
    assert _listed(ws) == {"notes.txt": b"the agent's notes\n"}


def test_an_edit_through_another_spelling_is_undone_under_the_files_own_name(volume: Path, tmp_path: Path) -> None:
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {"Readme.md": "v1\n"})
    before = _capture(home, ws)
    (ws / "readme.md").write_text("v2\n")  # the agent's patch path, spelled otherwise: the same file
    with Store.open(home / "file_snapshots") as store:
        after = store.at(ws).capture(known_paths=["readme.md"])  # as a turn's capture is told of the patch
        assert sorted(p for p, e in (after.files or {}).items() if is_captured(e)) == ["Readme.md"]

    undo = _restore(home, ws, before["id"])
    assert _listed(ws) == {"Readme.md": b"v1\n"}
    assert undo["deleted"] == []  # nothing was deleted, and the output does not say so


def test_a_unicode_form_only_rename_is_undone(volume: Path, tmp_path: Path) -> None:
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {NFC: "crème\n"}, commit=False)
    before = _capture(home, ws)
    os.rename(ws / NFC, ws / NFD)
    assert os.listdir(ws).count(NFD) == 1
    _capture(home, ws)

    undo = _restore(home, ws, before["id"])
    assert _listed(ws) == {NFC: "crème\n".encode()}
    assert undo["deleted"] == []
    _restore(home, ws, undo["safety_id"])
    assert _listed(ws) == {NFD: "crème\n".encode()}


def test_a_file_git_tracks_under_another_spelling_is_captured_as_tracked(volume: Path, tmp_path: Path) -> None:
    """A plain rename in case does not change Git's index on such a volume (`core.ignorecase`): the file stays
    Git-tracked, so it is captured whatever the residue limits, under the spelling its directory lists."""
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {"Readme.md": "hello\n"})
    os.rename(ws / "Readme.md", ws / "README.md")
    assert git(ws, "status", "--porcelain") == ""  # Git sees no change
    done = _codexr(home, ws, "-c", "file_snapshots.residue_max_files=0", "snapshots", "capture", "--json")
    assert done.returncode == 0, done.stderr
    with Store.open(home / "file_snapshots") as store:
        files = store.files(json.loads(done.stdout)["id"])
    assert sorted(p for p, e in files.items() if is_captured(e)) == ["README.md"]


def test_ignore_rules_match_every_spelling_on_such_a_volume(volume: Path, tmp_path: Path) -> None:
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {"keep.txt": "k\n", ".codexsnapignore": "build.log\n"})
    before = _capture(home, ws)
    (ws / "BUILD.LOG").write_text("the user's log\n")
    snap = _capture(home, ws)
    with Store.open(home / "file_snapshots") as store:
        assert "BUILD.LOG" not in {p for p, e in store.files(str(snap["id"])).items() if is_captured(e)}
    _restore(home, ws, before["id"])
    assert (ws / "BUILD.LOG").read_text() == "the user's log\n"  # ignored: never captured, restored or deleted


# ------------------------------------------------------------------ through the real Codex: rewind and redo


NFD_NAME = unicodedata.normalize("NFD", "Café.md")
SCENARIOS = {
    # name: (files before, the agent's turn, the files after it)
    "git-mv": ({"Readme.md": "hello\n"}, [shell("git mv Readme.md README.md")], {"README.md": b"hello\n"}),
    "plain-rename": ({"Readme.md": "hello\n"},
                     [shell("python3 -c \"import os; os.rename('Readme.md', 'README.md')\"")],
                     {"README.md": b"hello\n"}),
    "delete-and-recreate": ({"NOTES.txt": "mine\n"}, [shell("rm NOTES.txt && echo theirs > notes.txt")],
                            {"notes.txt": b"theirs\n"}),
    "patch-another-spelling": ({"Readme.md": "one\ntwo\n"}, [update_file("readme.md", "two", "TWO")],
                               {"Readme.md": b"one\nTWO\n"}),
    "unicode-form-rename": ({"Café.md": "crème\n"},  # composed (NFC), as typed here
                            [shell(f"python3 -c \"import os; os.rename('Caf\\u00e9.md', '{NFD_NAME}')\"")],
                            {NFD_NAME: "crème\n".encode()}),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_rewind_and_redo_through_the_real_codex(volume: Path, rigs: RigFactory, scenario: str) -> None:
    """The agent changes a name's spelling (or writes through another one) in a turn; rewind before the turn gives
    back the files under their own names, deleting nothing; redo brings the turn's names back, with no conflict."""
    files, steps, after = SCENARIOS[scenario]
    rig = rigs.make(git_repo=True, files={**files, "app.py": "print(1)\n"}, ws_in=volume)
    trigger = f"fold-{scenario}"
    rigs.model.script(trigger, [*steps, message("done")])
    s = rig.session
    tid = s.start_thread()
    before = _listed(rig.ws)
    rig.turn(tid, f"{trigger}: go")
    assert _listed(rig.ws) == {**after, "app.py": b"print(1)\n"}

    r = s.rewind(tid, 1)
    assert r.restore is not None and r.restore.deleted == [], r.restore.deleted if r.restore else None
    assert _listed(rig.ws) == before
    red = s.redo(r.thread_id)
    assert red.changed_since_rewind == []  # no false conflict
    assert _listed(rig.ws) == {**after, "app.py": b"print(1)\n"}


@pytest.mark.parametrize("when", [1, 2])
def test_a_restore_killed_around_its_rename_is_finished_by_the_next_command(volume: Path, tmp_path: Path,
                                                                            when: int) -> None:
    """SIGKILL at the apply's first `renameat` (before the rename to the target's spelling) or its second (after it,
    before the content's temp file takes the name): the next command finishes the restore under the target's
    spelling, judging the renamed file by the state the safety capture saw under its old name."""
    strace = shutil.which("strace")
    assert strace is not None, "strace is part of the test set-up (Debian's strace)"
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {"Readme.md": "v1\n"})
    before = _capture(home, ws)
    git(ws, "mv", "Readme.md", "README.md")
    (ws / "README.md").write_text("v2\n")
    _capture(home, ws)
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_SERVER": "0"}
    killed = subprocess.run([strace, "-f", "-qq", "-o", os.devnull, "-e", "trace=renameat",
                             "-e", f"inject=renameat:signal=KILL:when={when}",
                             sys.executable, "-m", "app.cli", "-C", str(ws), "snapshots", "restore",
                             str(before["id"]), "--yes"], env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode != 0
    assert list((home / "file_snapshots" / "journal").glob("*.json")), "the restore was not killed mid-way"

    done = _codexr(home, ws, "snapshots", "capture", "--json")  # any command that takes the workspace finishes it
    assert done.returncode == 0, done.stderr
    assert "finished" in done.stderr or "interrupted restore" in done.stderr, done.stderr
    assert _listed(ws) == {"Readme.md": b"v1\n"}
    with Store.open(home / "file_snapshots") as store:
        safety = [i.id for i in store.list_snapshots(ws) if i.kind == "safety"][-1]
        assert b"".join(store.blob_chunks(store.files(safety)["README.md"][3])) == b"v2\n"  # nothing lost


def test_a_rename_that_must_not_replace_holds_on_a_volume_without_hard_links(tmp_path: Path) -> None:
    """exFAT and FAT (USB disks on a Mac) have neither hard links nor a rename that refuses to replace: putting a
    set-aside file back under its name still never replaces a file that holds that name."""
    from snapshot_store.safefs import _rename_noreplace

    with folding_volume(tmp_path, links=False) as mount:
        (mount / "aside").write_text("the set-aside file\n")
        (mount / "name").write_text("a file made meanwhile\n")
        fd = os.open(mount, os.O_RDONLY | os.O_DIRECTORY)
        try:
            assert _rename_noreplace(fd, "aside", "name") is False
            assert (mount / "name").read_text() == "a file made meanwhile\n"
            assert (mount / "aside").read_text() == "the set-aside file\n"
            (mount / "name").unlink()
            assert _rename_noreplace(fd, "aside", "name") is True
            assert sorted(os.listdir(mount)) == ["name"]
            assert (mount / "name").read_text() == "the set-aside file\n"
        finally:
            os.close(fd)


@pytest.mark.parametrize("told", [True, False], ids=["patch-names-it", "a-command-renamed-it"])
def test_a_file_renamed_in_case_where_no_walk_looks_is_renamed_back(volume: Path, tmp_path: Path,
                                                                     told: bool) -> None:
    """Below a directory the walk does not enter (node_modules) only known paths are captured, so the target never
    witnessed the new spelling absent. Whether the capture after the rename was told the new name (a patch) or
    not (a shell command: only the old spelling is known), the file is captured under the name its directory
    lists, and the restore renames the one file back and writes it, deleting nothing."""
    home, ws = tmp_path / "home", volume / "ws"
    make_repo(ws, {"a.txt": "a\n"})
    (ws / "node_modules" / "p").mkdir(parents=True)
    (ws / "node_modules" / "p" / "Readme.md").write_text("v1\n")
    with Store.open(home / "file_snapshots") as store:
        before = store.at(ws).capture(known_paths=["node_modules/p/Readme.md"])
        os.rename(ws / "node_modules" / "p" / "Readme.md", ws / "node_modules" / "p" / "README.md")
        (ws / "node_modules" / "p" / "README.md").write_text("v2\n")
        after = store.at(ws).capture(known_paths=["node_modules/p/README.md"] if told else [])
        held = {p: e for p, e in (after.files or {}).items() if is_captured(e)}
        assert "node_modules/p/README.md" in held and "node_modules/p/Readme.md" not in held
        done = store.at(ws).restore(before.id)
        assert done.deleted == [] and done.left == [], [(a.path, a.reason) for a in done.left]
    assert os.listdir(ws / "node_modules" / "p") == ["Readme.md"]
    assert (ws / "node_modules" / "p" / "Readme.md").read_text() == "v1\n"
