"""Issue 36 §6: UUIDv7 thread ids made minutes apart share 9-12 leading characters, so "a unique prefix of 4+
characters" misled (`--thread 01a238a1` was ambiguous after one rewind): `codexr threads` and `codexr history list`
show each id's shortest unique prefix, and that prefix is what `--thread` and `history show` take."""

from __future__ import annotations

from test_cli_agent import Cli, assert_one_line_error, show
from test_cli_agent import cli as cli  # the fixture: codexr against the real Codex and the scripted model

from app.codex.scripted_model import add_file, message


def test_threads_and_history_list_show_the_prefix_that_names_each_thread(cli: Cli) -> None:
    cli.model.script("pfx-one", [add_file("one.txt", "1\n"), message("one")])
    cli.model.script("pfx-two", [add_file("two.txt", "2\n"), message("two")])
    t, _o, _trees = cli.seed(["pfx-one please", "pfx-two please"])
    fork = cli.json("rewind", "--thread", t, "--to", "2", "--yes")["thread_id"]
    rows = {r["thread_id"]: r for r in cli.json("threads")}
    assert set(rows) == {t, fork}, rows
    short = {tid: row["id_prefix"] for tid, row in rows.items()}
    for tid, prefix in short.items():
        assert tid.startswith(prefix) and len(prefix) >= 4, short
        other = fork if tid == t else t
        assert not other.startswith(prefix), short  # unique...
        assert len(prefix) == 4 or other.startswith(prefix[:-1]), short  # ...and no shorter one would be
    assert len(short[t]) > 8, short  # made seconds apart: the ids' first group alone names neither
    text = cli.ok("threads").stdout
    for tid, prefix in short.items():
        (line,) = [ln for ln in text.splitlines() if ln.startswith(tid)]
        assert line.split()[1] == prefix, text
    # the prefix shown is what --thread takes; one character less is ambiguous
    dry = cli.ok("rewind", "--thread", short[t], "--to", "2", "--dry-run")
    assert f"rewind thread {t} to prompt 2" in dry.stdout, show(dry)
    assert_one_line_error(cli.run("rewind", "--thread", short[t][:-1], "--to", "2", "--dry-run"), "ambiguous")
    listed = cli.json("history", "list")["sessions"]
    hist = {s["id"]: s["id_prefix"] for s in listed}
    assert hist == short, (hist, short)
    lines = [ln for ln in cli.ok("history", "list").stdout.splitlines() if not ln.startswith(" ")]
    assert {ln.split()[0]: ln.split()[1] for ln in lines} == short, lines
    shown = cli.ok("history", "show", short[fork])
    assert fork in shown.stdout, show(shown)
