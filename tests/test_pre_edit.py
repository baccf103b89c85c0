"""Every agent edit is rewindable: outside the workspace, hidden, or in a churn directory (issue 8 §4).

The pre-turn snapshot does not hold such paths; the pre-edit state comes from the agent's own
`fileChange` items (an add was absent, a delete carries the text, an update reverses its diff).
The end-to-end tests run the real Codex against the scripted model; the rest need no Codex.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from e2e_helpers import RigFactory

from app.changes import plan_diffs
from app.pre_edit import NotRecoverable, PatchChange, pre_edit_states, reverse_update
from app.scripted_model import message, patch, shell
from snapshot_store import RetentionPolicy, Store, StoreError
from snapshot_store.gc import gc
from snapshot_store.states import FileState, prepare_states_restore, save_states
from snapshot_store.verify import verify

FROM_PATCH = "pre-edit state from the agent's patch"


def _files(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _dirs, names in os.walk(root):
        for n in names:
            p = Path(dirpath, n)
            out[p.relative_to(root).as_posix()] = p.read_bytes()
    return out


# ------------------------------------------------------------------------------------------ end to end


def test_patches_outside_hidden_and_in_build_are_undone_by_rewind_and_redone(rigs: RigFactory) -> None:
    rig = rigs.make(files={"README.md": "hello\n", ".github/workflows/ci.yml": "on: push\njobs: {}\n",
                           "build/out.txt": "built 1\nsecond\n"})
    sibling = rig.ws.parent / "sibling"
    sibling.mkdir()
    (sibling / "file.txt").write_text("one\ntwo\nthree\n")
    (sibling / "gone.txt").write_text("bye\n")
    os.chmod(sibling / "file.txt", 0o640)
    model, s = rig.model, rig.session
    model.script("pe-everywhere", [patch(
        "*** Begin Patch\n"
        "*** Update File: ../sibling/file.txt\n@@\n one\n-two\n+TWO\n three\n"
        "*** Delete File: ../sibling/gone.txt\n"
        f"*** Add File: {sibling}/new.txt\n+made outside\n"
        "*** Update File: .github/workflows/ci.yml\n@@\n-on: push\n+on: pull_request\n jobs: {}\n"
        "*** Add File: .github/dependabot.yml\n+version: 2\n"
        "*** Update File: build/out.txt\n@@\n-built 1\n+built 2\n second\n"
        "*** End Patch\n"), message("edited")])
    before_ws, before_sib = _files(rig.ws), _files(sibling)
    tid = s.start_thread()
    assert rig.turn(tid, "pe-everywhere please").status == "completed"
    after_ws, after_sib = _files(rig.ws), _files(sibling)
    assert after_sib == {"file.txt": b"one\nTWO\nthree\n", "new.txt": b"made outside\n"}
    assert after_ws[".github/workflows/ci.yml"] == b"on: pull_request\njobs: {}\n"
    # The old content of ../sibling/file.txt lives only in the turn's pre-edit record: gc keeps it.
    policy = RetentionPolicy(max_snapshots_per_workspace=1, grace_seconds=0)
    with Store.open(rig.home / "file_snapshots") as other:
        gc(other, policy)
        assert verify(other, full=True, retention=policy).ok

    dry = s.rewind(tid, 1, "files", dry_run=True)
    assert dry.restore is not None
    planned = {a.path: (a.op, a.reason) for a in dry.restore.plan.actions}
    for path, op in ((f"{sibling}/file.txt", "write"), (f"{sibling}/gone.txt", "write"),
                     (f"{sibling}/new.txt", "delete"), (".github/workflows/ci.yml", "write"),
                     (".github/dependabot.yml", "delete"), ("build/out.txt", "write")):
        assert planned[path][0] == op and FROM_PATCH in planned[path][1], (path, planned.get(path))
    assert _files(rig.ws) == after_ws and _files(sibling) == after_sib  # a dry run changes nothing
    diffs = plan_diffs(s.store, dry.restore.plan)  # what the TUI preview shows per file
    assert "-TWO\n+two\n" in diffs[f"{sibling}/file.txt"][1]

    res = s.rewind(tid, 1, "files", confirm=lambda _p: True)
    assert _files(sibling) == before_sib
    assert (sibling / "file.txt").stat().st_mode & 0o777 == 0o640
    assert _files(rig.ws) == before_ws
    assert res.restore is not None and f"{sibling}/new.txt" in res.restore.deleted

    s.redo(res.thread_id, confirm=lambda _p: True)
    assert _files(sibling) == after_sib
    assert _files(rig.ws) == after_ws


def test_a_diff_that_does_not_verify_is_named_and_nothing_is_written_for_it(rigs: RigFactory) -> None:
    rig = rigs.make(files={"a.txt": "a\n", ".env.local": "KEY=1\nOTHER=2\n", ".tool-versions": "python 3.11\n"})
    model, s = rig.model, rig.session
    # The patch changes KEY, then a command rewrites that very line: reversing the patch no longer verifies.
    # Its `Add File` of an existing file: Codex calls it an add, but the file was not absent before.
    model.script("pe-unverified", [patch("*** Begin Patch\n*** Update File: .env.local\n@@\n-KEY=1\n+KEY=2\n"
                                         " OTHER=2\n*** Add File: .tool-versions\n+python 3.12\n*** End Patch\n"),
                                   shell("sed -i 's/KEY=2/KEY=3/' .env.local"), message("done")])
    tid = s.start_thread()
    assert rig.turn(tid, "pe-unverified now").status == "completed"
    assert (rig.ws / ".env.local").read_text() == "KEY=3\nOTHER=2\n"
    assert (rig.ws / ".tool-versions").read_text() == "python 3.12\n"
    dry = s.rewind(tid, 1, "files", dry_run=True)
    assert dry.restore is not None
    shown = [(a.op, a.reason) for a in dry.restore.plan.actions if a.path == ".env.local"]
    assert shown and all(op == "leave" for op, _ in shown), shown
    assert any(r.startswith("not recoverable") for _op, r in shown), shown
    added_over = [(a.op, a.reason) for a in dry.restore.plan.actions if a.path == ".tool-versions"]
    assert added_over and all(op == "leave" for op, _ in added_over), added_over
    assert any(r.startswith("not recoverable") for _op, r in added_over), added_over
    assert any("shell commands" in n for n in dry.restore.plan.notes)
    res = s.rewind(tid, 1, "files", confirm=lambda _p: True)
    assert res.restore is not None and ".env.local" not in res.restore.written
    assert (rig.ws / ".env.local").read_text() == "KEY=3\nOTHER=2\n"
    assert (rig.ws / ".tool-versions").read_text() == "python 3.12\n"  # not deleted: it existed before


# ------------------------------------------------------------------------------------------ no Codex


def test_reverse_update_checks_the_diff_both_ways() -> None:
    diff = "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n@@ -6,2 +6,3 @@\n six\n seven\n+eight\n"
    before = "one\ntwo\nthree\nfour\nfive\nsix\nseven\n"
    after = "one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\n"
    assert reverse_update(diff, after) == before
    with pytest.raises(NotRecoverable):
        reverse_update(diff, after.replace("seven", "SEVEN"))  # changed after the patch
    with pytest.raises(NotRecoverable):
        reverse_update("@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n", "one\nTWO\n")  # counts that lie


def test_pre_edit_chain_through_moves_deletes_and_failed_patches() -> None:
    now = {"/w/b.txt": FileState(b"x\nY\n", 0o600), "/w/c.txt": FileState(b"c2\n")}
    changes = [
        PatchChange("/w/a.txt", "update", "@@ -1,2 +1,2 @@\n x\n-y\n+Y\n", "/w/b.txt"),  # edit and move a -> b
        PatchChange("/w/d.txt", "delete", "gone\n"),
        PatchChange("/w/c.txt", "update", "@@ -1 +1 @@\n-c1\n+c2\n"),
        PatchChange("/w/e.txt", "failed", ""),
        PatchChange("/w/f.txt", "delete", "bin\ufffd"),
    ]
    states, unknown = pre_edit_states(changes, lambda p: now.get(p, FileState(None)))
    assert states["/w/a.txt"] == FileState(b"x\ny\n", 0o600)
    assert states["/w/b.txt"] == FileState(None)
    assert states["/w/d.txt"] == FileState(b"gone\n", 0o644)
    assert states["/w/c.txt"] == FileState(b"c1\n", 0o644)
    assert set(unknown) == {"/w/e.txt", "/w/f.txt"}


def test_states_restore_never_writes_through_a_symlink_or_into_protected_dirs(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real, target_is_directory=True)
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("mine\n")
    with Store.open(tmp_path / "store", protected=[home]) as store:
        snap = save_states(store, {f"{tmp_path}/link/f.txt": FileState(b"old\n"),
                                   f"{home}/config.toml": FileState(b"agent's\n"),
                                   f"{tmp_path}/plain.txt": FileState(b"back\n")}, label="t")
        with pytest.raises(StoreError):
            store.restore(snap, tmp_path)  # a states snapshot is never restored as a workspace
        prep = prepare_states_restore(store, snap)
        by_path = {a.path: a for a in prep.plan.actions}
        assert by_path[f"{tmp_path}/link/f.txt".lstrip("/")].op == "leave"
        assert by_path[f"{home}/config.toml".lstrip("/")].op == "leave"
        res = prep.apply()
    assert not (real / "f.txt").exists()
    assert (home / "config.toml").read_text() == "mine\n"
    assert (tmp_path / "plain.txt").read_text() == "back\n"
    assert res.safety_id is not None
