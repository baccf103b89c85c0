"""`codexr doctor` where things do not start (issue 36): a model provider nothing answers at, a malformed settings file.

The real command line in a subprocess, the real pinned Codex; the "providers" are real sockets on 127.0.0.1: a port
nothing listens on, a server that accepts and never says a word, and the scripted model.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from test_cli_agent import REPO, assert_one_line_error, show

from app.codex.scripted_model import ScriptedModel, write_codex_home

TIMEOUT_S = 120


def closed_port() -> int:
    """A port nothing listens on (bound, then closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def silent_server() -> Iterator[int]:
    """A server that accepts every connection and never answers (a wedged proxy, a firewall that swallows)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            held.append(conn)  # read nothing, say nothing, keep it open

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield int(listener.getsockname()[1])
    finally:
        # Closing the listener does not wake a thread blocked in accept() (on Linux it waits on): one connection
        # of our own does, and the loop then sees `stop` (this teardown took the join's full 10 s before).
        stop.set()
        with socket.create_connection(listener.getsockname(), timeout=10):
            thread.join(10)
        listener.close()
        for conn in held:
            conn.close()


def doctor(home: Path, cwd: Path, *args: str, after: tuple[str, ...] = ()
           ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """`codexr ARGS doctor --json AFTER`: its result and its checks by name."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_SERVER": "0",
           "NO_PROXY": "127.0.0.1,localhost"}
    res = subprocess.run([sys.executable, "-m", "app.cli", *args, "doctor", "--json", *after], cwd=cwd, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert "Traceback" not in res.stderr, show(res)
    return res, {c["name"]: c for c in json.loads(res.stdout)["checks"]}


@pytest.mark.parametrize("provider", ["closed port", "silent server"])
def test_doctor_fails_a_provider_nothing_answers_at_and_names_its_url(tmp_path: Path, provider: str) -> None:
    """Codex's app-server starts without asking the provider, so doctor said all was well while every turn waited
    for the network forever: it now asks the provider once, with a short timeout, and names the URL. (The silent
    server is given 1 s, `--probe-timeout`, instead of the default 5 s: the message says which bound it waited.)"""
    with silent_server() as silent:
        port = closed_port() if provider == "closed port" else silent
        url = f"http://127.0.0.1:{port}/v1"
        write_codex_home(tmp_path / "home", url)
        res, checks = doctor(tmp_path / "home", tmp_path, after=("--probe-timeout", "1"))
    assert res.returncode == 1, show(res)
    assert checks["app_server"]["status"] == "ok", checks  # Codex itself starts fine: only the probe sees it
    probe = checks["provider"]
    assert probe["status"] == "fail" and url in probe["message"], probe
    why = "connection refused" if provider == "closed port" else "no answer within 1 s"
    assert why in probe["message"] and "model_providers.mock" in probe["fix"], probe
    assert [c for c in checks.values() if c["status"] == "fail"] == [probe], checks


def test_a_bad_probe_timeout_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path / "home"), "CODEXR_SERVER": "0"}
    for value in ("0", "-1", "soon", "inf"):
        res = subprocess.run([sys.executable, "-m", "app.cli", "doctor", "--probe-timeout", value], cwd=tmp_path,
                             env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
        assert_one_line_error(res, "--probe-timeout")


def test_doctor_passes_a_provider_that_answers_even_with_an_error(tmp_path: Path) -> None:
    """Any HTTP answer is a provider that is there: the scripted model answers GET /models with a 404."""
    with ScriptedModel() as model:
        write_codex_home(tmp_path / "home", model.base_url)
        res, checks = doctor(tmp_path / "home", tmp_path)
        assert model.requests == []  # a GET, not a turn: no tokens spent
        url = model.base_url
    assert checks["provider"]["status"] == "ok", show(res)
    assert url in checks["provider"]["message"] and "HTTP 404" in checks["provider"]["message"]


def test_doctor_probes_the_provider_the_flags_choose(tmp_path: Path) -> None:
    """`-c model_providers.mock.base_url=...` reaches Codex, so the probe asks that address too."""
    with ScriptedModel() as model:
        write_codex_home(tmp_path / "home", model.base_url)
        url = f"http://127.0.0.1:{closed_port()}/v1"
        res, checks = doctor(tmp_path / "home", tmp_path, "-c", f'model_providers.mock.base_url="{url}"')
    assert res.returncode == 1 and checks["provider"]["status"] == "fail", show(res)
    assert url in checks["provider"]["message"], checks["provider"]


def test_doctor_reports_a_malformed_config_first_and_runs_every_other_check(tmp_path: Path) -> None:
    """The README sends users to doctor when nothing starts; a malformed config.toml made doctor refuse to run
    (exit 2, one line). It is now doctor's first failure, and every check that needs no settings still runs."""
    home = tmp_path / "home"
    write_codex_home(home, f"http://127.0.0.1:{closed_port()}/v1")
    (home / "config.toml").write_text('model = "gpt-5.5"\n[model_providers.mock\nbase_url = "x"\n')
    res, checks = doctor(home, tmp_path)
    assert res.returncode == 1, show(res)
    first = next(iter(checks.values()))
    assert first["name"] == "config" and first["status"] == "fail", show(res)
    assert "config.toml" in first["message"] and "line 2, column" in first["message"], first
    for name in ("codexr", "sdk", "pinned", "chosen", "protocol", "codex_home", "store", "server", "path", "names",
                 "journal"):
        assert checks[name]["status"] == "ok", (name, show(res))
    # Codex reads config.toml too: what needs it is said to be skipped, not reported as a second failure
    assert checks["app_server"]["status"] == "skip" and checks["provider"]["status"] == "skip", show(res)
    text = subprocess.run([sys.executable, "-m", "app.cli", "doctor"], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_SERVER": "0"},
                          stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    assert text.stdout.splitlines()[0].startswith("FAIL  ") and "line 2, column" in text.stdout.splitlines()[0]
    # every other command still refuses in one line, and a bad flag is still a usage mistake for doctor too
    other = subprocess.run([sys.executable, "-m", "app.cli", "threads"], cwd=tmp_path, capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)},
                           stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    assert other.returncode == 2 and len(other.stderr.splitlines()) == 1 and "line 2, column" in other.stderr
    flag = subprocess.run([sys.executable, "-m", "app.cli", "-c", "no-equals-sign", "doctor"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=TIMEOUT_S,
                          env={**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path / "fresh")})
    assert flag.returncode == 2 and flag.stderr.startswith("codexr: error: -c no-equals-sign"), show(flag)


def test_doctor_with_a_malformed_codexr_toml_still_starts_codex(tmp_path: Path) -> None:
    """codexr.toml is codexr's alone: Codex does not read it, so doctor still starts Codex and asks the provider."""
    with ScriptedModel() as model:
        home = tmp_path / "home"
        write_codex_home(home, model.base_url)
        (home / "codexr.toml").write_text("[file_snapshots]\nmax_store_bytes = \n")
        res, checks = doctor(home, tmp_path)
    assert res.returncode == 1, show(res)
    first = next(iter(checks.values()))
    assert first["name"] == "config" and "codexr.toml" in first["message"] and "line 2" in first["message"], first
    assert checks["app_server"]["status"] == "ok" and checks["provider"]["status"] == "ok", show(res)
    assert [c["name"] for c in checks.values() if c["status"] == "fail"] == ["config"], show(res)
