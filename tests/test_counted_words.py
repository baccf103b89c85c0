"""Issue 36 §10: counted words agree with their number, a preview speaks of what is still to do, and `codexr redo`
prints what it did as `codexr rewind` does (one summary, app/shared/lines.py's `done_lines`)."""

from __future__ import annotations

import re

from test_cli_agent import Cli, show, three_prompts
from test_cli_agent import cli as cli  # the fixture: codexr against the real Codex and the scripted model

from app.shared.lines import since_rewind_lines


def test_one_file_changed_since_the_rewind_is_kept_as_it() -> None:
    """The redo's warning said "1 file changed … (the safety snapshot keeps them)"."""
    assert since_rewind_lines(["a.txt"], 0) == ["1 file changed since the rewind (the safety snapshot keeps it):",
                                                 "  a.txt"]
    assert since_rewind_lines(["a.txt", "b.txt"], 0)[0].endswith("(the safety snapshot keeps them):")


def test_the_pickers_preview_says_what_is_still_to_write() -> None:
    """The preview said "2 files written" before anything was written."""
    from app.services.driver import Preview
    from app.tui.plan_view import plan_summary
    from snapshot_store.restore import Action, RestorePlan, RestoreResult

    plan = RestorePlan("/ws", "t" * 64, [Action("write", "a.txt", "changed by the agent"),
                                         Action("delete", "gen/out.txt", "absent in the snapshot"),
                                         Action("rmdir", "gen", "empty after the rewind")])
    dry = RestoreResult(plan, None, dry_run=True)
    assert plan_summary(Preview("rewind", dry, dry, {})) == (
        "files: 1 file to write, 1 to delete, 0 to leave alone, 1 empty directory to remove")


def test_one_file_and_one_prompt_are_singular_on_the_command_line(cli: Cli) -> None:
    """`snapshots capture` said "1 files, 4 B hashed", `history export` "(1 prompts)"."""
    (cli.ws / "only.txt").write_text("one\n")
    cap = cli.ok("snapshots", "capture")
    assert re.search(r"^1 file, 4 B hashed, ", cap.stderr, re.M), show(cap)
    one, _o, _t = cli.seed(["a single prompt"])
    out = cli.tmp / "one.md"
    exp = cli.ok("history", "export", one, "--output", str(out))
    assert f"exported session {one} (1 prompt) to {out}" in exp.stdout, show(exp)


def test_redo_says_what_it_did_as_rewind_does(cli: Cli) -> None:
    """`redo --yes` printed ids where `rewind --yes` printed what it did: both now print the same summary, headed by
    what happened."""
    t, _turns, _trees = three_prompts(cli)
    rew = cli.ok("rewind", "--thread", t, "--to", "2", "--yes")
    lines = rew.stdout.splitlines()
    assert lines[0] == f"rewound thread {t} to before prompt 2 (files and conversation)", show(rew)
    fork = lines[1].removeprefix("thread ")
    assert re.fullmatch(r"safety snapshot [0-9a-f]{64}", lines[2]) and lines[3].startswith("files: "), show(rew)
    red = cli.ok("redo", "--thread", fork, "--yes")
    lines = red.stdout.splitlines()
    assert lines[0] == f"redo: back on thread {t}, where the rewind started (files and conversation)", show(red)
    assert lines[1] == f"thread {t}", show(red)
    assert re.fullmatch(r"safety snapshot [0-9a-f]{64}", lines[2]), show(red)
    assert lines[3] == "files: 3 written, 0 deleted, 0 left alone", show(red)


def agree(text: str) -> list[str]:
    """Every counted store word in `text` whose number and form disagree ("1 snapshots", "2 pack")."""
    return [m.group(0) for m in re.finditer(r"\b(\d[\d,]*) (snapshot file|pack|blob|snapshot|ref)(s?)\b", text)
            if (m.group(1) == "1") != (m.group(3) == "")]


def test_verify_and_gc_count_in_words_that_agree(cli: Cli) -> None:
    """`snapshots verify` said "1 packs, 1 blobs, 1 snapshots, 1 refs checked"; gc and `history list` counted
    snapshots the same way."""
    (cli.ws / "only.txt").write_text("one\n")
    cli.ok("snapshots", "capture")
    ver = cli.ok("snapshots", "verify")
    assert "1 snapshot," in ver.stdout and agree(ver.stdout) == [], show(ver)
    gc = cli.ok("snapshots", "gc", "--dry-run")
    assert agree(gc.stdout) == [], show(gc)


def test_the_stores_own_messages_count_their_words() -> None:
    """verify said "1 record(s) …", a lost ref "1 snapshot(s) … are named by no ref"; the store spells counts with
    the one plural() the front ends use."""
    from pathlib import Path

    from snapshot_store.maint import refcheck

    class Repo:
        path = Path("/nowhere")

    line = refcheck.lost_line(Repo(), "/ws", ["a" * 64])  # type: ignore[arg-type]
    assert line.startswith("1 snapshot of workspace /ws is named by no ref (refs/workspaces/"), line
    assert "(s)" not in line
    two = refcheck.lost_line(Repo(), "/ws", ["a" * 64, "b" * 64])  # type: ignore[arg-type]
    assert two.startswith("2 snapshots of workspace /ws are named by no ref"), two
