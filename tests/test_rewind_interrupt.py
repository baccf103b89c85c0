"""A rewind or redo stopped by Ctrl+C while it restores files rolls them back, drops what it recorded and says so.

Real processes, a real SIGINT: strace (on codexr's main thread only, not on Codex) delivers it at the 60th
`renameat` of the command, in the middle of the restore of ~200 files.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from fs_helpers import tree
from test_cli_agent import REPO, Cli, add_file, cli, message  # noqa: F401  (the fixture)

from app.codex.scripted_model import shell

STRACE = shutil.which("strace")


def _run_with_sigint(cli: Cli, *args: str) -> subprocess.CompletedProcess[str]:  # noqa: F811
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    argv = [str(STRACE), "-qq", "-o", os.devnull, "-e", "trace=renameat", "-e",
            "inject=renameat:signal=INT:when=60", sys.executable, "-m", "app.cli", *args]
    return subprocess.run(argv, cwd=cli.ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(STRACE is None, reason="needs strace")
def test_a_rewind_interrupted_mid_restore_rolls_back_and_leaves_no_redo(cli: Cli) -> None:  # noqa: F811
    for i in range(200):
        (cli.ws / f"f{i:03}.txt").write_text(f"before {i}\n")
    # the agent changes the 200 files (a rewind takes back only the agent's changes: issue 34)
    cli.model.script("p1: add", [add_file("added.txt", "a\n"),
                                 shell("for i in $(seq -w 0 199); do echo after > f$i.txt; done"),
                                 message("added")])
    t, _outcomes, _trees = cli.seed(["p1: add"])
    before = tree(cli.ws)
    res = _run_with_sigint(cli, "rewind", "--thread", t, "--to", "1", "--yes")
    assert res.returncode == 130, (res.returncode, res.stdout, res.stderr)
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("codexr: interrupted: the rewind was rolled back: files as before; its conversation "
                               "fork "), lines[0]
    assert lines[0].endswith(f"is archived; nothing changed, continue on thread {t}"), lines[0]
    assert tree(cli.ws) == before
    rows = {r["thread_id"]: r for r in cli.json("threads")}
    assert set(rows) == {t}, rows  # the fork is archived
    assert rows[t]["redo_depth"] == 0, rows
    cap = cli.ok("snapshots", "capture")
    assert "interrupted" not in cap.stderr, cap.stderr
    assert tree(cli.ws) == before


@pytest.mark.skipif(STRACE is None, reason="needs strace")
def test_a_yes_rewind_interrupted_while_it_plans_archives_the_fork_made_meanwhile(cli: Cli) -> None:  # noqa: F811
    """With --yes the conversation is forked while the files are planned (issue 35: the fork no longer waits for
    the plan); Ctrl+C in the safety capture (its first fsync, on codexr's main thread) stops the rewind before it
    takes that fork: the files and the thread as before, and the fork archived, not left in the thread list."""
    for i in range(50):
        (cli.ws / f"f{i:03}.txt").write_text(f"before {i}\n")
    cli.model.script("p1: add", [add_file("added.txt", "a\n"), message("added")])
    t, _outcomes, _trees = cli.seed(["p1: add"])
    before = tree(cli.ws)
    archived = cli.home / "archived_sessions"
    assert not archived.exists() or not any(archived.rglob("*.jsonl"))
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    argv = [str(STRACE), "-qq", "-o", os.devnull, "-e", "trace=fsync", "-e", "inject=fsync:signal=INT:when=1",
            sys.executable, "-m", "app.cli", "rewind", "--thread", t, "--to", "1", "--yes"]
    res = subprocess.run(argv, cwd=cli.ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 130, (res.returncode, res.stdout, res.stderr)
    assert res.stderr.splitlines() == ["codexr: interrupted"] and "rewound" not in res.stdout, res.stderr
    assert tree(cli.ws) == before
    rows = {r["thread_id"]: r for r in cli.json("threads")}
    assert set(rows) == {t}, rows  # no fork in the list
    assert rows[t]["redo_depth"] == 0, rows
    forks = [p for p in archived.rglob("*.jsonl") if t not in p.name]
    assert len(forks) == 1, forks  # it was made, and archived
