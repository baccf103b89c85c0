"""`codexr exec` without a terminal gives up on a model that says nothing (issue 36 §3), and never on a slow turn.

Codex 0.163.0 waits for an unreachable provider without a limit of its own; `exec --timeout` (300 s by default off a
terminal) interrupts the turn the way Ctrl+C in the app does, so what the turn changed is captured, and exits 1 with
the provider's URL. The real command line and the real pinned Codex; the providers are real sockets on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_cli_agent import Cli, assert_one_line_error, show
from test_cli_agent import cli as cli  # the fixture: codexr against the real Codex and the scripted model
from test_doctor import closed_port, silent_server

from app.codex.scripted_model import add_file, message, pause, shell, write_codex_home
from snapshot_store import Store
from snapshot_store.manifest import captured_items


def snapshot_files(home: Path, snapshot: str) -> set[str]:
    with Store.open(home / "file_snapshots", protected=[home]) as store:
        return {path for path, _entry in captured_items(store.files(snapshot))}


@pytest.mark.parametrize("provider", ["closed port", "silent server"])
def test_exec_gives_up_on_a_provider_that_never_answers_and_names_it(cli: Cli, provider: str) -> None:
    with silent_server() as silent:
        url = f"http://127.0.0.1:{closed_port() if provider == 'closed port' else silent}/v1"
        env = write_codex_home(cli.tmp / "home-down", url)
        res = cli.run("exec", "--timeout", "1", "hello, anyone there?", home_env=env)
    assert res.returncode == 1 and res.stdout == "" and "Traceback" not in res.stderr, show(res)
    lines = res.stderr.splitlines()
    reason = [ln for ln in lines if ln.startswith("codexr: turn interrupted: no answer from the model provider")]
    assert len(reason) == 1 and f"mock at {url} for 1 s" in reason[0] and "--timeout" in reason[0], show(res)
    assert lines[-1].endswith("interrupted"), show(res)


def test_a_silent_model_is_interrupted_and_what_the_turn_changed_is_captured(cli: Cli) -> None:
    """The model made a file, then went silent: the interrupt is Codex's own, and the post-turn capture has the file."""
    cli.model.script("make then stall", [add_file("made.txt", "made before the silence\n"), pause(120),
                                         message("never said")])
    res = cli.run("exec", "--json", "--timeout", "2", "make then stall")
    assert res.returncode == 1 and "Traceback" not in res.stderr, show(res)
    doc = json.loads(res.stdout)
    assert doc["status"] == "interrupted" and "for 2 s" in doc["error"] and cli.model.base_url in doc["error"], doc
    assert (cli.ws / "made.txt").read_text() == "made before the silence\n"
    assert doc["files_changed"] == ["made.txt"] and doc["post_snapshot"], doc
    assert "made.txt" in snapshot_files(cli.home, doc["post_snapshot"])
    assert "made.txt" not in snapshot_files(cli.home, doc["pre_snapshot"])


def test_a_command_that_runs_longer_than_the_bound_is_not_silence(cli: Cli) -> None:
    """The bound is on the model's silence: a command the agent runs stops the clock, however long it takes (three
    times the bound here: a clock that ran on would interrupt the turn two seconds before the file is written)."""
    cli.model.script("slow build", [shell("sleep 3 && echo built > out.txt"), message("built it")])
    res = cli.run("exec", "--timeout", "1", "slow build")
    assert res.returncode == 0, show(res)
    assert res.stdout == "built it\n" and (cli.ws / "out.txt").read_text() == "built\n", show(res)


def test_a_model_that_answers_slowly_but_answers_is_never_cut(cli: Cli) -> None:
    """Each answer restarts the clock: four rounds 1 s apart take longer than the 3.5 s bound (their pauses alone
    do), none is silent that long, and the turn completes."""
    steps = [step for n in range(3) for step in (pause(1.0), shell(f"echo {n} >> rounds.txt"))]
    cli.model.script("slow but steady", [*steps, pause(1.0), message("all rounds done")])
    res = cli.run("exec", "--timeout", "3.5", "slow but steady")
    assert res.returncode == 0 and res.stdout == "all rounds done\n", show(res)
    assert (cli.ws / "rounds.txt").read_text() == "0\n1\n2\n"


def test_the_default_bound_off_a_terminal_is_said_with_the_first_retry_notice(cli: Cli) -> None:
    """Without a terminal (and no --timeout) the bound is 300 s, Codex's own idle limit for a model stream; the
    first "waiting for network" notice says it. `--timeout 0` is no limit, as on a terminal."""
    import subprocess
    import sys

    from test_cli_agent import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
           **write_codex_home(cli.tmp / "home-down", f"http://127.0.0.1:{closed_port()}/v1")}
    cases = (((), "codexr gives up after 300 s without an answer"), (("--timeout", "0"), "without a limit"))
    for flags, words in cases:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "exec", *flags, "anyone?"], cwd=cli.ws, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            notice = next((ln for ln in proc.stderr if "waiting for network" in ln), "")
        finally:
            proc.kill()
            proc.wait()
            assert proc.stderr is not None
            proc.stderr.close()
        assert words in notice and "Ctrl+C" in notice, notice


@pytest.mark.parametrize("value", ["-1", "soon", "nan", "inf"])
def test_a_bad_timeout_is_one_line_and_starts_nothing(cli: Cli, value: str) -> None:
    assert_one_line_error(cli.run("exec", "--timeout", value, "hello"), "--timeout")
    assert cli.model.requests == [] and not (cli.home / "file_snapshots").exists()
