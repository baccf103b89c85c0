"""A rewind undoes the agent's work and keeps yours (issue 34): told apart by who made each change, merged where
both touched a file. The real Codex against the scripted model; the workspace on disk is the proof."""

from __future__ import annotations

from test_cli_agent import Cli, cli  # noqa: F401  (the fixture)

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
