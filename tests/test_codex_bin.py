"""Any Codex binary: `--codex-bin` > `$CODEXR_CODEX_BIN` > `file_snapshots.codex_bin` > the pinned one, and
`codexr --version` / `codexr doctor`. The "binaries" are wrapper scripts that record each run and exec the real
pinned Codex, so what runs is still the real Codex (against the scripted model where a turn is needed).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]
from test_cli_agent import REPO, TIMEOUT_S, Cli, assert_one_line_error, show

from app.cmds.doctor import protocol_check
from app.codex.scripted_model import ScriptedModel, message, write_codex_home

PINNED = Path(bundled_codex_path())


def wrapper(path: Path, log: Path, *, version: str | None = None, executable: bool = True) -> Path:
    """A stand-in Codex binary: logs its name and arguments, then runs the pinned Codex (or fakes --version)."""
    fake = f'if [ "$1" = --version ]; then echo "codex-cli {version}"; exit 0; fi\n' if version else ""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{path.name} $*" >> "{log}"\n{fake}exec "{PINNED}" "$@"\n')
    path.chmod(0o755 if executable else 0o644)
    return path


def runs(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    tmp = Path(os.path.realpath(tmp_path))
    ws = tmp / "ws"
    ws.mkdir()
    with ScriptedModel() as model:
        env = write_codex_home(tmp / "codex-home", model.base_url)
        yield Cli(model, tmp, tmp / "codex-home", ws, env)


def test_flag_beats_env_beats_config_beats_pinned_in_version(cli: Cli) -> None:
    log = cli.tmp / "runs.log"
    flag_bin = wrapper(cli.tmp / "bin" / "codex-flag", log)
    env_bin = wrapper(cli.tmp / "bin" / "codex-env", log)
    wrapper(cli.home / "bin" / "codex-config", log)  # named relative to CODEX_HOME in the setting
    with (cli.home / "config.toml").open("a") as fh:
        fh.write('\n[file_snapshots]\ncodex_bin = "bin/codex-config"\n')
    env = {"CODEXR_CODEX_BIN": str(env_bin)}
    both, env_wins = cli.many({"args": ("--codex-bin", str(flag_bin), "--version", "--json"), "home_env": env},
                              {"args": ("--version", "--json"), "home_env": env})
    config_wins, pinned = cli.many(("--version", "--json"),
                                   ("-c", "file_snapshots.codex_bin=", "--version", "--json"))
    got = [json.loads(r.stdout)["codex"] for r in (both, env_wins, config_wins, pinned)]
    assert [(g["source"], Path(g["path"]).name) for g in got] == [
        ("--codex-bin", "codex-flag"), ("CODEXR_CODEX_BIN", "codex-env"),
        ("file_snapshots.codex_bin", "codex-config"), ("pinned", "codex")], [show(r) for r in (both, pinned)]
    assert Path(got[3]["path"]) == PINNED
    assert {g["version"] for g in got} == {"0.163.0"}  # each asked its binary, which is the pinned Codex
    assert sorted(runs(log)) == ["codex-config --version", "codex-env --version", "codex-flag --version"]
    text = cli.ok("--codex-bin", str(flag_bin), "--version").stdout.splitlines()
    assert text == ["codexr 0.1.0", "openai-codex 0.163.0", f"codex 0.163.0  {flag_bin} (from --codex-bin)"]


def test_exec_runs_the_chosen_binary_a_bad_one_runs_nothing_and_doctor_is_happy(cli: Cli) -> None:
    log = cli.tmp / "runs.log"
    good = wrapper(cli.tmp / "codex-good", log)
    not_exec = wrapper(cli.tmp / "codex-noexec", log, executable=False)
    bad = [
        ({"args": ("exec", "--codex-bin", str(cli.tmp / "missing"), "cb-never")}, "no such file"),
        ({"args": ("exec", "cb-never"), "home_env": {"CODEXR_CODEX_BIN": str(not_exec)}}, "not executable"),
        ({"args": ("-c", f"file_snapshots.codex_bin={cli.tmp}", "exec", "cb-never")}, "not a regular file"),
        ({"args": ("--codex-bin", "no-such-codex-anywhere", "threads")}, "no such executable on PATH"),
    ]
    for res, (_call, needle) in zip(cli.many(*(call for call, _ in bad)), bad, strict=True):
        assert_one_line_error(res, needle)
    assert runs(log) == [] and sorted(p.name for p in cli.home.iterdir()) == ["config.toml"]  # nothing started

    cli.model.script("cb-hello", [message("hello from the chosen codex")])
    out = cli.ok("exec", "--codex-bin", str(good), "cb-hello")
    assert out.stdout == "hello from the chosen codex\n"
    assert runs(log) == ["codex-good app-server --listen stdio://"]

    doc = cli.run("--codex-bin", str(good), "doctor")
    assert doc.returncode == 0, show(doc)
    lines = doc.stdout.splitlines()
    assert all(line.startswith("ok  ") for line in lines), show(doc)
    text = doc.stdout
    assert f"pinned Codex 0.163.0: {PINNED}" in text and f"chosen Codex 0.163.0: {good} (from --codex-bin)" in text
    assert f"CODEX_HOME {cli.home}" in text and "login: not needed" in text
    # the turn changed no file: its post-turn capture is its pre-turn snapshot (one state, one snapshot)
    assert f"snapshot store {cli.home / 'file_snapshots'}: 1 snapshot, " in text and "healthy" in text


def test_doctor_names_each_problem_and_exits_1(tmp_path: Path) -> None:
    """Not logged in (and the provider needs it), an older Codex than the SDK's, a damaged store."""
    home, log = tmp_path / "home", tmp_path / "runs.log"
    old = wrapper(tmp_path / "codex-old", log, version="0.160.0")
    (home / "file_snapshots").mkdir(parents=True)
    (home / "file_snapshots" / "format").write_text("not a store\n")
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_CODEX_BIN": str(old)}
    res = subprocess.run([sys.executable, "-m", "app.cli", "doctor", "--json"], cwd=tmp_path, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 1 and "Traceback" not in res.stderr, show(res)
    doc = json.loads(res.stdout)
    by_name = {c["name"]: c for c in doc["checks"]}
    assert doc["ok"] is False
    assert by_name["chosen"]["status"] == "ok" and "0.160.0" in by_name["chosen"]["message"]
    assert by_name["protocol"]["status"] == "warn" and "0.163.0" in by_name["protocol"]["message"]
    assert by_name["app_server"]["status"] == "ok"
    assert by_name["login"]["status"] == "fail" and "codexr login" in by_name["login"]["fix"]
    assert by_name["store"]["status"] == "fail" and "codexr snapshots verify" in by_name["store"]["fix"]
    assert "codex-old app-server --listen stdio://" in runs(log)


@pytest.mark.parametrize(("version", "status"), [
    ("0.171.0", "ok"), ("0.163.0", "ok"), ("0.160.0", "warn"), ("0.0.0", "warn"), ("0.154.0-alpha.1", "warn"),
    ("0.150.9", "fail"),
])
def test_protocol_check_compares_with_the_sdk(version: str, status: str) -> None:
    assert protocol_check(version, "0.163.0", "0.151.0").status == status

