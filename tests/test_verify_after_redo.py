"""`snapshots verify` after ordinary rewinds and redos names no capture as interrupted (issue 18 §1 item 7).

Each rewind writes a record of its targets (here: the hidden file the agent edited, which the pre-turn snapshot
could not hold) that only its redo entry pins; once redone, nothing does. verify called those two files "left by
an interrupted capture".
"""

from __future__ import annotations

from test_cli_agent import Cli, cli, message, update_file  # noqa: F401  (the fixture)


def test_verify_after_two_rewinds_and_redos_names_their_records_not_an_interrupted_capture(
        cli: Cli) -> None:  # noqa: F811
    (cli.ws / ".env").write_text("A=1\n")
    (cli.ws / "keep.txt").write_text("user file\n")
    cli.model.script("p1: edit env", [update_file(".env", "A=1", "A=2"), message("edited")])
    t, _outcomes, _trees = cli.seed(["p1: edit env"])
    for _ in range(2):
        new = cli.json("rewind", "--thread", t, "--to", "1", "--yes")["thread_id"]
        assert (cli.ws / ".env").read_text() == "A=1\n"
        t = cli.json("redo", "--thread", new, "--yes")["thread_id"]
        assert (cli.ws / ".env").read_text() == "A=2\n"
    res = cli.run("snapshots", "verify")
    assert res.returncode == 0, res.stdout
    assert "interrupted" not in res.stdout, res.stdout
    warnings = [line for line in res.stdout.splitlines() if line.startswith("warning:")]
    assert warnings == [
        "warning: 2 records of a rewind's targets or an agent's edits no thread pins any more (their rewind was "
        "redone, or their thread was idle past thread_retention_days); gc removes them after the grace period"], \
        res.stdout
