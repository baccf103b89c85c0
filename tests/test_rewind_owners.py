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
