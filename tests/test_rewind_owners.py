"""A rewind undoes the agent's work and keeps yours (issue 34): told apart by who made each change, merged where
both touched a file. The real Codex against the scripted model; the workspace on disk is the proof."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from test_cli_agent import REPO, Cli, cli  # noqa: F401  (the fixture)

from app.codex.scripted_model import add_file, message, update_file


def test_a_rewind_keeps_hand_work_and_merges_a_file_both_changed(cli: Cli) -> None:  # noqa: F811
    (cli.ws / "b.txt").write_text("untouched by the agent\n")
    cli.model.script("own one", [add_file("a.txt", "1\n2\n3\n4\n5\n"), message("made a")])
    cli.model.script("own two", [update_file("a.txt", "1", "ONE"), add_file("k.txt", "k\n"),
                                 message("changed a, made k")])
    t, _outcomes, _trees = cli.seed(["own one", "own two"])
    assert (cli.ws / "a.txt").read_text() == "ONE\n2\n3\n4\n5\n" and (cli.ws / "k.txt").exists()
    (cli.ws / "hand.txt").write_text("mine\n")  # made by hand after the last prompt
    (cli.ws / "b.txt").write_text("edited by hand\n")  # a hand edit of a file the agent never touched
    (cli.ws / ".secret").write_text("hidden, by hand\n")
    with (cli.ws / "a.txt").open("a") as f:
        f.write("my line\n")  # the user's line in the agent's file
    dry = cli.ok("rewind", "--thread", t, "--to", "2", "--dry-run")
    assert "merged" in dry.stdout and "kept: changed by you" in dry.stdout, dry.stdout
    cli.ok("rewind", "--thread", t, "--to", "2", "--yes")
    assert not (cli.ws / "k.txt").exists(), "the agent's file of prompt 2 stayed"
    assert (cli.ws / "hand.txt").read_text() == "mine\n"
    assert (cli.ws / "b.txt").read_text() == "edited by hand\n"
    assert (cli.ws / ".secret").read_text() == "hidden, by hand\n"
    assert (cli.ws / "a.txt").read_text() == "1\n2\n3\n4\n5\nmy line\n", "not merged"


def test_a_state_codexr_never_saw_is_left_as_it_is_and_the_plan_says_why(cli: Cli) -> None:  # noqa: F811
    """A hidden file and a file outside the workspace, made by hand before the thread: no snapshot of prompt 1
    holds them, and prompt 2's agent patches both. Their state before prompt 1 is unknown: a rewind to it leaves
    them as they are now (it used to write prompt 2's pre-edit state) and says why."""
    sib = cli.workspace("sib")
    (cli.ws / ".hidden").write_text("by hand\n")  # hidden, untracked: never captured
    (sib / "x.txt").write_text("outside, by hand\n")
    cli.model.script("unseen one", [add_file("first.txt", "1\n"), message("made first")])
    cli.model.script("unseen two", [update_file(".hidden", "by hand", "by the agent"),
                                    update_file(f"{sib}/x.txt", "outside, by hand", "outside, by the agent"),
                                    message("patched both")])
    t, _outcomes, _trees = cli.seed(["unseen one", "unseen two"])
    assert (cli.ws / ".hidden").read_text() == "by the agent\n"
    assert (sib / "x.txt").read_text() == "outside, by the agent\n"
    why = "left as it is: its state before prompt 1 is unknown (codexr first saw it at prompt 2)"
    plan = cli.json("rewind", "--thread", t, "--to", "1", "--dry-run")["restore"]["plan"]
    for path in (".hidden", f"{sib}/x.txt"):
        steps = [(a["op"], a["reason"]) for a in plan if a["path"] == path]
        assert steps and all(op == "leave" for op, _ in steps) and any(r == why for _, r in steps), (path, plan)
    text = cli.ok("rewind", "--thread", t, "--to", "1", "--dry-run").stdout
    assert sum(why in ln for ln in text.splitlines()) == 2, text
    cli.ok("rewind", "--thread", t, "--to", "1", "--yes")
    assert not (cli.ws / "first.txt").exists(), "the agent's file of prompt 1 stayed"
    assert (cli.ws / ".hidden").read_text() == "by the agent\n"
    assert (sib / "x.txt").read_text() == "outside, by the agent\n"


def test_outside_the_workspace_a_rewind_keeps_what_you_changed_after_the_agents_patch(cli: Cli) -> None:  # noqa: F811
    """The agent patches files in ../victim (prompt 1), then the user edits some of them by hand. A rewind before
    prompt 1 takes back the agent's change of a file nobody touched since, merges a file where the two changed
    different lines, and keeps the user's file where they changed the same line or where the agent's file would be
    deleted (it used to write the pre-patch text over the user's). A sidecar written before each turn recorded
    what its patches left there (no `post_edit`) still loads, and its rewind restores as it always did."""
    import json

    victim = cli.workspace("victim")
    x, y, z, w = (victim / n for n in ("x.txt", "y.txt", "z.txt", "w.txt"))
    x.write_text("1\n2\n3\n4\n5\n")
    y.write_text("a\nb\n")
    z.write_text("untouched since\n")
    cli.model.script("victim one", [update_file(f"{x}", "1", "ONE"), update_file(f"{y}", "a", "A"),
                                    update_file(f"{z}", "untouched since", "by the agent"),
                                    add_file(f"{w}", "new\n"), add_file("a.txt", "a\n"), message("patched")])
    cli.model.script("victim two", [add_file("b.txt", "b\n"), message("made b")])
    t, _outcomes, _trees = cli.seed(["victim one", "victim two"])
    assert x.read_text() == "ONE\n2\n3\n4\n5\n" and y.read_text() == "A\nb\n" and w.read_text() == "new\n"
    with x.open("a") as f:
        f.write("mine\n")  # a line of the user's, away from the agent's
    y.write_text("mine\nb\n")  # the agent's very line, rewritten by the user
    w.write_text("new\nand mine\n")  # the agent's new file, edited by the user
    plan = {a["path"]: (a["op"], a["reason"])
            for a in cli.json("rewind", "--thread", t, "--to", "1", "--dry-run")["restore"]["plan"]}
    assert plan[str(x)][0] == "write" and plan[str(x)][1].startswith("merged"), plan
    assert plan[str(y)][0] == "leave" and "conflict" in plan[str(y)][1], plan
    assert plan[str(w)] == ("leave", "kept: changed by you after prompt 1's turn"), plan
    assert plan[str(z)][0] == "write", plan
    done = cli.json("rewind", "--thread", t, "--to", "1", "--yes")
    assert x.read_text() == "1\n2\n3\n4\n5\nmine\n", "not merged"
    assert y.read_text() == "mine\nb\n" and w.read_text() == "new\nand mine\n", "the user's edit was overwritten"
    assert z.read_text() == "untouched since\n", "the agent's change of a file nobody touched since stayed"
    assert not (cli.ws / "a.txt").exists() and not (cli.ws / "b.txt").exists()

    cli.ok("redo", "--thread", done["thread_id"], "--yes")  # the files as before the rewind: the user's edits
    assert y.read_text() == "mine\nb\n" and z.read_text() == "by the agent\n"
    sidecar = cli.home / "file_snapshots" / "refs" / "threads" / f"{t}.json"
    doc = json.loads(sidecar.read_text())
    assert doc["turns"][0]["post_edit"], doc["turns"][0]
    for turn in doc["turns"]:
        del turn["post_edit"]  # as written before the turns recorded it
    sidecar.write_text(json.dumps(doc))
    cli.ok("rewind", "--thread", t, "--to", "1", "--files-only", "--yes")
    assert x.read_text() == "1\n2\n3\n4\n5\n" and y.read_text() == "a\nb\n" and not w.exists()
    assert z.read_text() == "untouched since\n"


def conflicted(cli: Cli, tag: str) -> str:  # noqa: F811
    """Prompt 1 makes three files, prompt 2 changes line 3 of each and makes k.txt; then the user rewrites line 3
    of each by hand (the same line: no clean merge). The thread."""
    files = ("m.txt", "r.txt", "b.txt")
    cli.model.script(f"{tag} one", [*(add_file(f, "1\n2\n3\n4\n5\n") for f in files), message("made them")])
    cli.model.script(f"{tag} two", [*(update_file(f, "3", "THREE") for f in files), add_file("k.txt", "k\n"),
                                    message("changed line 3")])
    t, _outcomes, _trees = cli.seed([f"{tag} one", f"{tag} two"])
    for f in files:
        (cli.ws / f).write_text("1\n2\nthree, by hand\n4\n5\n")
    return t


def test_a_conflict_is_shown_with_both_sides_and_answered_each_way(cli: Cli) -> None:  # noqa: F811
    import pexpect

    t = conflicted(cli, "clash")
    dry = cli.ok("rewind", "--thread", t, "--to", "2", "--dry-run")
    assert "conflict, kept yours: changed by the agent in prompt 2 and by you after prompt 2's turn" in dry.stdout, \
        dry.stdout
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    child = pexpect.spawn(sys.executable, ["-m", "app.cli", "rewind", "--thread", t, "--to", "2"], cwd=str(cli.ws),
                          env=env, encoding="utf-8", timeout=120)
    try:
        for name, answer in (("b.txt", "b"), ("m.txt", ""), ("r.txt", "r")):  # in the plan's order
            child.expect(rf"conflict: {name} — you and the agent both changed it, with no clean merge")
            child.expect(r"-three, by hand")  # both sides shown: yours -, the rewound +
            child.expect(r"\+3")
            child.expect(rf"{name}: keep \[m\]ine, take the \[r\]ewound or keep \[b\]oth")
            child.sendline(answer)
        child.expect(r"Apply this rewind\?")
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert not (cli.ws / "k.txt").exists(), "the agent's own file stayed"
    assert (cli.ws / "m.txt").read_text() == "1\n2\nthree, by hand\n4\n5\n", "keep mine was not kept"
    assert (cli.ws / "r.txt").read_text() == "1\n2\n3\n4\n5\n", "take the rewound was not taken"
    assert (cli.ws / "b.txt").read_text() == "1\n2\nthree, by hand\n4\n5\n", "keep both lost mine"
    assert (cli.ws / "b.txt.rewound").read_text() == "1\n2\n3\n4\n5\n", "keep both wrote no .rewound"


def test_a_conflict_outside_the_workspace_is_asked_too_and_the_answer_is_taken(cli: Cli) -> None:  # noqa: F811
    """The agent patched a file in ../victim and the user then rewrote the same line: a rewind showed the conflict,
    kept the user's file and never asked (`--json` listed no conflict), and a front end's choice about a path
    outside the workspace was dropped. Now it is asked as inside, without `both` (nothing is written beside a file
    outside the workspace), and `r` takes the state before the patch; redo brings the user's back."""
    import json

    import pexpect

    victim = cli.workspace("victim-ask")
    y, z = victim / "y.txt", victim / "z.txt"
    y.write_text("a\nb\n")
    z.write_text("z\n")
    cli.model.script("ask out one", [update_file(f"{y}", "a", "A"), update_file(f"{z}", "z", "Z"),
                                     add_file("a.txt", "a\n"), message("patched")])
    t, _outcomes, _trees = cli.seed(["ask out one"])
    y.write_text("mine\nb\n")  # the agent's very line, rewritten by the user
    dry = cli.json("rewind", "--thread", t, "--to", "1", "--dry-run")
    assert dry["conflicts"] == [str(y)], dry
    # --only (workspace paths) leaves the paths outside it alone too: z.txt was written back all the same
    only = cli.json("rewind", "--thread", t, "--to", "1", "--dry-run", "--only", "a.txt")
    plan = {a["path"]: (a["op"], a["reason"]) for a in only["restore"]["plan"]}
    assert plan[str(z)] == ("leave", "left alone: not among the files chosen (--only a.txt)"), plan
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    child = pexpect.spawn(sys.executable, ["-m", "app.cli", "rewind", "--thread", t, "--to", "1"], cwd=str(cli.ws),
                          env=env, encoding="utf-8", timeout=120)
    try:
        child.expect(rf"conflict: {y} — you and the agent both changed it, with no clean merge")
        child.expect(r"-mine")  # both sides shown: yours -, the rewound +
        child.expect(rf"{y}: keep \[m\]ine or take the \[r\]ewound\? \[m\]")
        child.sendline("b")  # not an answer here
        child.expect("answer m or r")
        child.sendline("r")
        child.expect(r"Apply this rewind\?")
        child.sendline("y")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0, child.before
    assert y.read_text() == "a\nb\n", "take the rewound was not taken outside the workspace"
    assert z.read_text() == "z\n", "the agent's change of a file nobody touched since stayed"
    assert not (victim / "y.txt.rewound").exists() and not (cli.ws / "a.txt").exists()
    (fork,) = [r["thread_id"] for r in json.loads(cli.ok("threads", "--json").stdout) if r.get("forked_from") == t]
    cli.ok("redo", "--thread", fork, "--yes")
    assert y.read_text() == "mine\nb\n", "redo did not bring the user's file back"


def test_yes_keeps_yours_on_a_conflict_and_names_it(cli: Cli) -> None:  # noqa: F811
    t = conflicted(cli, "clash yes")
    res = cli.ok("rewind", "--thread", t, "--to", "2", "--yes")
    for f in ("m.txt", "r.txt", "b.txt"):
        assert (cli.ws / f).read_text() == "1\n2\nthree, by hand\n4\n5\n"
        assert f"left {f}  (conflict, kept yours: changed by the agent in prompt 2" in res.stdout, res.stdout
    assert not (cli.ws / "k.txt").exists()
    data = cli.json("rewind", "--thread", t, "--to", "1", "--dry-run")
    assert data["conflicts"] == ["b.txt", "m.txt", "r.txt"], data


def test_only_and_except_choose_files_for_rewind_redo_and_snapshots_restore(cli: Cli) -> None:  # noqa: F811
    cli.model.script("pick one", [add_file("keep.txt", "k\n"), message("one")])
    cli.model.script("pick two", [add_file("src/a.txt", "a\n"), add_file("src/b.txt", "b\n"),
                                  add_file("c.txt", "c\n"), message("two")])
    t, _outcomes, _trees = cli.seed(["pick one", "pick two"])
    res = cli.ok("rewind", "--thread", t, "--to", "2", "--files-only", "--yes", "--only", "src", "--except",
                 "src/b.txt")
    assert not (cli.ws / "src/a.txt").exists(), res.stdout
    assert (cli.ws / "src/b.txt").exists() and (cli.ws / "c.txt").exists(), res.stdout
    assert "left c.txt  (left alone: not among the files chosen (--only src; --except src/b.txt))" in res.stdout
    red = cli.ok("redo", "--thread", t, "--yes", "--except", "./src/")
    assert not (cli.ws / "src/a.txt").exists() and (cli.ws / "c.txt").exists(), red.stdout
    bad = cli.run("rewind", "--thread", t, "--to", "2", "--yes", "--only", "../elsewhere")
    assert bad.returncode == 2 and "not inside the workspace" in bad.stderr, bad.stderr
    snap = cli.json("snapshots", "capture")["id"]
    (cli.ws / "c.txt").write_text("changed\n")
    (cli.ws / "keep.txt").write_text("changed too\n")
    cli.ok("snapshots", "restore", snap, "--yes", "--only", "c.txt")
    assert (cli.ws / "c.txt").read_text() == "c\n" and (cli.ws / "keep.txt").read_text() == "changed too\n"


def test_a_merge_keeps_the_bytes_of_text_in_any_encoding(tmp_path: Path) -> None:
    """pygit2 decodes its merge as UTF-8: a Latin-1 file both sides changed must merge byte for byte (it raised
    UnicodeDecodeError, a traceback in the middle of a rewind), and UTF-8 stays UTF-8."""
    from app.rewind.owners import merge_text
    from snapshot_store import Store
    from snapshot_store.manifest import FileEntry

    with Store.open(tmp_path / "store") as store:
        def entry(data: bytes) -> FileEntry:
            w = store.blob_writer()
            blob = w.add(data).hex()
            w.commit()
            return FileEntry("f", 0o644, len(data), blob)

        for enc in ("latin-1", "utf-8"):
            base = "café\n2\n3\n4\n5\n".encode(enc)  # what the agent left
            theirs = "CAFÉ\n2\n3\n4\n5\n".encode(enc)  # what the rewind puts back
            ours = "café\n2\n3\n4\n5\nmine, déjà\n".encode(enc)  # the user's line
            merged = merge_text(store, entry(base), ours, entry(theirs))
            assert merged == "CAFÉ\n2\n3\n4\n5\nmine, déjà\n".encode(enc), (enc, merged)
        same_line = merge_text(store, entry(b"a\nb\n"), b"a\nmine\n", entry(b"a\nrewound\n"))
        assert same_line == " (the same or adjacent lines)"
        # the agent added line 2, the user line 3 below it: a conflict, as in Git, and the reason says why
        adjacent = merge_text(store, entry(b"a\nb\n"), b"a\nb\nmine\n", entry(b"a\n"))
        assert adjacent == " (the same or adjacent lines)"


def test_a_turn_whose_post_snapshot_never_came_goes_back_whole(cli: Cli) -> None:  # noqa: F811
    """codexr killed while the last turn ran leaves it with a pre-turn snapshot and no post-turn one: what changed
    since cannot be told apart, so a rewind takes it back as before the rule (it kept the agent's file as
    'not changed by the agent')."""
    import json

    cli.model.script("cut one", [add_file("a.txt", "a\n"), message("one")])
    cli.model.script("cut two", [add_file("k.txt", "k\n"), message("two")])
    t, _outcomes, _trees = cli.seed(["cut one", "cut two"])
    side = cli.home / "file_snapshots" / "refs" / "threads" / f"{t}.json"
    doc = json.loads(side.read_text())
    doc["turns"][-1]["post"] = None  # as a kill before the post-turn capture leaves it
    side.write_text(json.dumps(doc))
    cli.ok("rewind", "--thread", t, "--to", "2", "--yes")
    assert not (cli.ws / "k.txt").exists() and (cli.ws / "a.txt").exists()


def test_a_file_the_user_made_a_symlink_is_a_conflict_never_merged_through_the_link(cli: Cli) -> None:  # noqa: F811
    """Both changed a.txt, but the user's side is now a symlink out of the workspace: the merge must not read the
    link's target as the user's text (and write it into the workspace); the link stays, and the outside file too."""
    cli.model.script("ln one", [add_file("a.txt", "1\n2\n3\n4\n5\n"), message("one")])
    cli.model.script("ln two", [update_file("a.txt", "1", "ONE"), message("two")])
    t, _outcomes, _trees = cli.seed(["ln one", "ln two"])
    outside = cli.tmp / "outside.txt"
    outside.write_text("ONE\n2\n3\n4\n5\nsecret of another directory\n")
    (cli.ws / "a.txt").unlink()
    (cli.ws / "a.txt").symlink_to(outside)
    res = cli.ok("rewind", "--thread", t, "--to", "2", "--yes")
    assert "conflict, kept yours" in res.stdout, res.stdout
    assert (cli.ws / "a.txt").is_symlink() and os.readlink(cli.ws / "a.txt") == str(outside)
    assert outside.read_text() == "ONE\n2\n3\n4\n5\nsecret of another directory\n"


def test_json_keeps_stdout_for_the_json_while_it_asks_on_a_terminal(cli: Cli) -> None:  # noqa: F811
    """`codexr rewind --json` on a terminal shows the plan and asks about each conflict: on stderr, so that stdout
    is the one JSON document a script reads (the plan and questions were printed on stdout)."""
    import json
    import pty
    import subprocess

    t = conflicted(cli, "clash json")
    master, slave = pty.openpty()
    try:
        os.write(master, b"r\nm\nb\ny\n")  # the three conflicts (b.txt, m.txt, r.txt), then apply
        env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
        res = subprocess.run([sys.executable, "-m", "app.cli", "rewind", "--thread", t, "--to", "2", "--json"],
                             cwd=cli.ws, env=env, stdin=slave, capture_output=True, text=True, timeout=120)
    finally:
        os.close(slave)
        os.close(master)
    assert res.returncode == 0, (res.stdout, res.stderr)
    doc = json.loads(res.stdout)
    assert doc["conflicts"] == ["b.txt", "m.txt", "r.txt"], doc
    assert "keep [m]ine, take the [r]ewound" in res.stderr and "Apply this rewind?" in res.stderr, res.stderr
    assert (cli.ws / "b.txt").read_text() == "1\n2\n3\n4\n5\n"  # took the rewound
    assert (cli.ws / "m.txt").read_text() == "1\n2\nthree, by hand\n4\n5\n"
    assert (cli.ws / "r.txt.rewound").read_text() == "1\n2\n3\n4\n5\n"
