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
from store_helpers import git

from app.codex.scripted_model import message, patch, shell
from app.recording.pre_edit import (
    NotRecoverable,
    PatchChange,
    pre_edit_states,
    reverse_update,
    settle_deleted,
    sibling_twin,
)
from app.rewind.targets import entries_around
from app.services.changes import plan_diffs
from snapshot_store import RetentionPolicy, Store, StoreError
from snapshot_store.maint.gc import gc
from snapshot_store.maint.verify import verify
from snapshot_store.manifest import FileEntry, LinkEntry, is_captured, witnessed_absent
from snapshot_store.states import FileState, prepare_states_restore, save_states

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


def test_deleted_files_come_back_with_the_mode_and_type_last_seen_and_unseen_ones_0600(rigs: RigFactory) -> None:
    """Issue 17 §4: a delete's pre-edit state carries no mode or type; codexr takes what a snapshot or an
    earlier record saw, creates an unseen file 0600 (the plan says so), and never turns a symlink into a file."""
    rig = rigs.make(git_repo=True, files={"README.md": "hello\n"})
    rig.write(".env", "TOKEN=1\n", 0o600)  # hidden, untracked: no snapshot ever holds it
    os.symlink("README.md", rig.ws / ".shared")  # hidden symlink, tracked only after prompt 1
    sib = rig.ws.parent / "sib"
    sib.mkdir()
    for name, text, mode in (("key", "SECRET\n", 0o600), ("run.sh", "#!/bin/sh\necho hi\n", 0o755),
                             ("target.txt", "shared target\n", 0o644)):
        (sib / name).write_text(text)
        os.chmod(sib / name, mode)
    os.symlink("target.txt", sib / "link")  # outside, never seen by anything
    model, s = rig.model, rig.session
    model.script("pe-touch", [patch(
        "*** Begin Patch\n"
        f"*** Update File: {sib}/key\n@@\n-SECRET\n+SECRET2\n"
        f"*** Update File: {sib}/run.sh\n@@\n #!/bin/sh\n-echo hi\n+echo bye\n"
        "*** End Patch\n"), message("touched")])
    model.script("pe-remove", [patch(
        "*** Begin Patch\n"
        f"*** Delete File: {sib}/key\n*** Delete File: {sib}/run.sh\n*** Delete File: {sib}/link\n"
        "*** Delete File: .env\n*** Delete File: .shared\n"
        "*** End Patch\n"), message("removed")])
    tid = s.start_thread()
    assert rig.turn(tid, "pe-touch them").status == "completed"
    git(rig.ws, "add", ".shared")  # the user tracks the link: prompt 2's snapshot sees it as a symlink
    assert rig.turn(tid, "pe-remove them").status == "completed"
    assert sorted(os.listdir(sib)) == ["target.txt"] and not (rig.ws / ".env").exists()
    assert not os.path.lexists(rig.ws / ".shared")

    dry = s.rewind(tid, 2, "files", dry_run=True)
    assert dry.restore is not None
    planned = {a.path: (a.op, a.reason) for a in dry.restore.plan.actions}
    assert planned[f"{sib}/key"][0] == "write" and "never seen" not in planned[f"{sib}/key"][1]
    assert planned[".env"][0] == "write" and "never seen" in planned[".env"][1] and "0600" in planned[".env"][1]
    op, why = planned[f"{sib}/link"]
    assert op == "leave" and "symlink" in why and f"{sib}/target.txt" in why, (op, why)

    s.rewind(tid, 2, "files", confirm=lambda _p: True)
    assert (sib / "key").read_text() == "SECRET2\n" and (sib / "key").stat().st_mode & 0o777 == 0o600
    assert (sib / "run.sh").read_text() == "#!/bin/sh\necho bye\n"
    assert (sib / "run.sh").stat().st_mode & 0o777 == 0o755
    assert (rig.ws / ".env").read_text() == "TOKEN=1\n" and (rig.ws / ".env").stat().st_mode & 0o777 == 0o600
    assert not os.path.lexists(sib / "link")  # left alone: never turned into a copy of target.txt
    assert (sib / "target.txt").read_text() == "shared target\n"

    # .shared comes back as the symlink prompt 2's snapshot holds (the user tracked it before that prompt).
    assert os.path.islink(rig.ws / ".shared") and os.readlink(rig.ws / ".shared") == "README.md"

    s.redo(tid, confirm=lambda _p: True)
    # Prompt 1's snapshot saw .shared only as a hidden name, and only prompt 2's patch recorded it: its state
    # before prompt 1 is unknown, so it is left as it is (absent) and the plan says so (issue 34).
    dry = s.rewind(tid, 1, "files", dry_run=True)
    assert dry.restore is not None
    shown = [(a.op, a.reason) for a in dry.restore.plan.actions if a.path == ".shared"]
    assert shown and all(op == "leave" for op, _ in shown) and any("before prompt 1 is unknown" in r
                                                                   for _, r in shown), shown
    s.rewind(tid, 1, "files", confirm=lambda _p: True)
    assert not os.path.lexists(rig.ws / ".shared")
    assert (sib / "key").read_text() == "SECRET\n" and (sib / "key").stat().st_mode & 0o777 == 0o600
    assert (sib / "run.sh").stat().st_mode & 0o777 == 0o755


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
    assert states["/w/d.txt"] == FileState(b"gone\n", 0o600, mode_seen=False)  # the patch carries no mode
    assert states["/w/c.txt"] == FileState(b"c1\n", 0o644)
    assert set(unknown) == {"/w/e.txt", "/w/f.txt"}


def test_settle_deleted_takes_the_mode_and_type_seen_and_never_invents_a_copy_of_a_link(tmp_path: Path) -> None:
    d = tmp_path / "d"
    d.mkdir()
    (d / "target.txt").write_bytes(b"same\n")
    states = {f"{d}/{n}": FileState(b"same\n" if n.startswith("twin") else b"x\n", 0o600, mode_seen=False)
              for n in ("script", "link", "twin", "twin-seen", "plain")}
    states[f"{d}/kept"] = FileState(b"k\n", 0o640)  # an update's state: its mode was read, nothing to settle
    unknown: dict[str, str] = {}
    seen = {f"{d}/script": (FileEntry("f", 0o755, 2, "00" * 32), "a snapshot"),
            f"{d}/link": (LinkEntry("l", "target.txt"), "a snapshot"),
            f"{d}/twin-seen": (FileEntry("f", 0o640, 5, "00" * 32), "a record")}
    notes = settle_deleted(states, unknown, lambda paths: {p: seen[p] for p in paths if p in seen},
                           lambda p, c: sibling_twin(p, c, ()))
    assert states[f"{d}/script"] == FileState(b"x\n", 0o755)
    assert states[f"{d}/link"] == FileState(None, link="target.txt")
    assert states[f"{d}/twin-seen"] == FileState(b"same\n", 0o640)  # seen as a file: a twin does not matter
    assert states[f"{d}/plain"] == FileState(b"x\n", 0o600, mode_seen=False)
    assert "never seen" in notes[f"{d}/plain"] and "0600" in notes[f"{d}/plain"]
    assert f"{d}/twin" not in states and f"{d}/target.txt" in unknown[f"{d}/twin"]
    assert unknown[f"{d}/twin"].startswith("not recoverable:") and "symlink" in unknown[f"{d}/twin"]
    assert states[f"{d}/kept"] == FileState(b"k\n", 0o640) and f"{d}/kept" not in notes
    with Store.open(tmp_path / "store") as store:
        snap = save_states(store, {f"{d}/link": states[f"{d}/link"]}, label="t")
        assert store.files(snap)[f"{d}/link".lstrip("/")] == LinkEntry("l", "target.txt")


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
            store.at(tmp_path).restore(snap)  # a states snapshot is never restored as a workspace
        prep = prepare_states_restore(store, snap)
        by_path = {a.path: a for a in prep.plan.actions}
        assert by_path[f"{tmp_path}/link/f.txt".lstrip("/")].op == "leave"
        assert by_path[f"{home}/config.toml".lstrip("/")].op == "leave"
        res = prep.apply()
    assert not (real / "f.txt").exists()
    assert (home / "config.toml").read_text() == "mine\n"
    assert (tmp_path / "plain.txt").read_text() == "back\n"
    assert res.safety_id is not None


def test_a_rewind_reads_the_target_s_verdicts_on_pre_edit_paths_without_its_map(tmp_path: Path) -> None:
    """Issue 35: a rewind asks its target (the pre-turn snapshot) only whether it holds each path the agent's patches
    recorded a pre-edit state for, or saw it absent; decoding the whole target map for that was ~0.15 s of a one-file
    rewind at 100,000 files. Read from the target's records, each verdict is the map's own: captured, witnessed
    absent (a tombstone, a listed directory without it, a file where its directory would be), or neither (below a
    directory not walked, below nothing the snapshot saw)."""
    ws = tmp_path / "ws"
    for rel, text in {"a.txt": "a\n", "dir/b.txt": "b\n", "node_modules/x/y.js": "y\n", "f": "a file\n"}.items():
        (ws / rel).parent.mkdir(parents=True, exist_ok=True)
        (ws / rel).write_text(text)
    with Store.open(tmp_path / "store") as s:
        s.at(ws).capture(known_paths=["gone.txt"])
        (ws / "dir" / "b.txt").write_text("b, edited\n")
        snap = s.at(ws).capture(known_paths=["gone.txt"]).id  # a delta on the first: a chain to read
        full = dict(s.files(snap))
    paths = ["a.txt", "dir/b.txt", "dir/new.txt", "gone.txt", "node_modules/x/y.js", "nodir/deeper/z.txt",
             "new-top.txt", "f/under-a-file.txt"]
    with Store.open(tmp_path / "store") as s:
        around = entries_around(s, snap, paths)
        assert snap not in s._maps, "the target's map was decoded"
    verdicts = {p: (is_captured(around.get(p)), witnessed_absent(around, p)) for p in paths}
    assert verdicts == {p: (is_captured(full.get(p)), witnessed_absent(full, p)) for p in paths}
    assert verdicts["a.txt"] == (True, False) and verdicts["gone.txt"] == (False, True)
    assert verdicts["dir/new.txt"] == (False, True) and verdicts["node_modules/x/y.js"] == (False, False)
    assert verdicts["f/under-a-file.txt"] == (False, True)
