"""codexr in a Python without what Linux adds and macOS lacks (os.pipe2, os.pidfd_open, socket.SO_PEERCRED,
socket.SOCK_CLOEXEC, inotify_simple; tests/no_linux_extras/sitecustomize.py takes them away): every flow that can
work there works, the same files on disk, and what cannot says so in one line, never a traceback (issue 32 §2)."""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_proxy_listen import client, handshake
from test_proxy_tui import in_workspace, past_first_screen, send_prompt
from test_tui_tmux import Tmux

from app.codex.scripted_model import ScriptedModel, add_file, message, write_codex_home

REPO = Path(__file__).parents[1]
NO_EXTRAS = REPO / "tests" / "no_linux_extras"


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    yield t
    t.kill()


def _env(home: Path, model_url: str = "http://127.0.0.1:9", **extra: str) -> dict[str, str]:
    env = {**os.environ, **write_codex_home(home, model_url), **extra,
           "PYTHONPATH": os.pathsep.join([str(NO_EXTRAS), str(REPO)])}
    env.pop("CODEXR_SERVER", None)  # the console script's own choice: it must find no server to use here
    return env


def _one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and all(w in lines[0] for w in words), done.stderr


def test_the_python_really_lacks_them(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", "import os, socket, _socket\n"
                           "print(hasattr(os, 'pipe2'), hasattr(os, 'pidfd_open'), hasattr(socket, 'SO_PEERCRED'),"
                           " hasattr(_socket, 'SOCK_CLOEXEC'))\n"
                           "try:\n    import inotify_simple\nexcept ImportError:\n    print('no inotify')"],
                          env=_env(tmp_path / "home"), capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "False", "False", "False", "no", "inotify"], done.stderr


def test_the_demo_runs_there_through_the_console_script(tmp_path: Path) -> None:
    """exec, rewind and redo with the real Codex (the demo's story), through `codexr` as the console script runs it:
    no resident server is started where it cannot run, and nothing is lost."""
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    done = subprocess.run([sys.executable, "-m", "app", "demo"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, stdin=subprocess.DEVNULL,
                          env=_env(tmp_path / "home", CODEXR_RUNTIME_DIR=str(runtime)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "demo passed: nothing was lost" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    assert list(runtime.iterdir()) == []  # no server was spawned only to die


def test_the_resident_server_says_why_it_is_off(tmp_path: Path) -> None:
    runtime = tmp_path / "rt"
    runtime.mkdir(mode=0o700)
    env = _env(tmp_path / "home", CODEXR_RUNTIME_DIR=str(runtime))
    status = subprocess.run([sys.executable, "-m", "app", "server", "status"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=60)
    assert status.returncode == 0 and "Traceback" not in status.stderr
    assert "not available here" in status.stdout and "os.pipe2" in status.stdout, status.stdout
    _one_line_error(subprocess.run([sys.executable, "-m", "app", "server", "start"], cwd=tmp_path, env=env,
                                   capture_output=True, text=True, timeout=60), "no resident server can run here")
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "a.txt").write_text("a\n")
    capture = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture", "--json"], cwd=tmp_path / "ws",
                             env=env, capture_output=True, text=True, timeout=60)
    assert capture.returncode == 0 and '"file_count": 1' in capture.stdout, capture.stderr
    assert list(runtime.iterdir()) == []  # a one-shot command spawned no server that would only die
    doctor = subprocess.run([sys.executable, "-m", "app", "doctor"], cwd=tmp_path / "ws", env=env,
                            capture_output=True, text=True, timeout=120)
    assert "Traceback" not in doctor.stderr
    lines = doctor.stdout.splitlines()
    assert any(line.startswith("ok    resident server: off here") for line in lines), doctor.stdout
    assert any(line.startswith("ok    change journal: none on") for line in lines), doctor.stdout


def test_the_official_tui_is_served_on_loopback_with_a_per_launch_token(tmux: Tmux, tmp_path: Path) -> None:
    """Where a unix socket's peer cannot be known, `codexr codex` serves its TUI on 127.0.0.1 with a bearer token
    only that TUI is given: a prompt typed there is answered and recorded; another client, without the token or
    from a web page, is refused in the handshake and no app-server starts for it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with ScriptedModel() as model:
        model.script("mac-tui", [add_file("made.txt", "made\n"), message("Made it.")])
        env = {**_env(tmp_path / "home", model.base_url), "NO_PROXY": "127.0.0.1,localhost", "TERM": "xterm-256color"}
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # the pane stays after an early exit, showing what codexr printed and its status (it closed once under
        # load right after the first screen, "no server running", with nothing left to read)
        tmux.start(f"cd {shlex.quote(str(ws))} && env -u COLUMNS -u LINES -u CODEXR_SERVER {assign} "
                   f"{shlex.quote(sys.executable)} -m app.cli codex; echo \"codexr codex exited: $?\"; sleep 600")
        past_first_screen(tmux)
        send_prompt(tmux, "mac-tui make a file", "Made it.")
        assert (ws / "made.txt").read_text() == "made\n"
        (remote,) = [m for _, cmd in in_workspace(ws) if (m := re.search(r"--remote (ws://127\.0\.0\.1:\d+)", cmd))]
        app_servers = [p for p, cmd in in_workspace(ws) if " app-server " in cmd]
        for headers in [(), (("Authorization", "Bearer guessed"),), (("Origin", "null"),)]:
            status, _body = handshake(remote.group(1), *headers)
            assert status in (401, 403), (headers, status)
        assert [p for p, cmd in in_workspace(ws) if " app-server " in cmd] == app_servers
        sidecars = list((tmp_path / "home" / "file_snapshots" / "refs" / "threads").glob("*.json"))
        assert any("mac-tui make a file" in p.read_text() for p in sidecars), "the prompt was not recorded"


def test_the_proxy_on_a_unix_socket_refuses_in_one_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(tmp_path / "home")
    _one_line_error(subprocess.run([sys.executable, "-m", "app.cli", "app-server", "--listen",
                                    f"unix://{tmp_path}/s.sock"], cwd=ws, env=env, capture_output=True, text=True,
                                   timeout=60, stdin=subprocess.DEVNULL), "SO_PEERCRED")
    assert not (tmp_path / "s.sock").exists()


def test_listening_on_tcp_where_no_uid_can_be_read_takes_a_token(model: ScriptedModel, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(tmp_path / "home", model.base_url, CODEXR_TEST_NO_PROC_NET="1")
    _one_line_error(subprocess.run([sys.executable, "-m", "app.cli", "app-server", "--listen", "ws://127.0.0.1:0"],
                                   cwd=ws, env=env, capture_output=True, text=True, timeout=60,
                                   stdin=subprocess.DEVNULL), "--ws-auth capability-token")
    token = "per-launch-Secret_0123456789"
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "app-server", "--listen", "ws://127.0.0.1:0",
                             "--ws-auth", "capability-token", "--ws-token-sha256",
                             hashlib.sha256(token.encode()).hexdigest()],
                            cwd=ws, env=env, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "listening on ws://" in line, line
        url = line.split("listening on ", 1)[1].split()[0]
        assert "refused" in client(url, token="wrong")
        assert "answered True" in client(url, token=token)
    finally:
        proc.terminate()
        proc.wait(60)
