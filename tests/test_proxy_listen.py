"""`codexr app-server --listen unix://PATH | ws://127.0.0.1:PORT` (issue 19 §2, §5): the protocol served to this
user only — another user, or a process of this user confined otherwise, gets nothing — and a frame that is not
JSON passes without breaking the conversation. A real `codexr app-server` process and the real Codex behind it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from app.scripted_model import ScriptedModel, write_codex_home

REPO = Path(__file__).parents[1]
TIMEOUT_S = 60
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="connects as another user: CI runs as root")

CLIENT = """
import json, sys
from websockets.sync.client import connect, unix_connect
where = sys.argv[1]
try:
    ws = unix_connect(where[len('unix://'):]) if where.startswith('unix://') else connect(where)
    for frame in sys.argv[2:]:
        ws.send(frame)
    ws.send(json.dumps({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "title": "t",
            "version": "1"}, "capabilities": {"experimentalApi": True}}}))
    while True:
        answer = json.loads(ws.recv(timeout=30))
        if answer.get("id") == 1:
            print("answered", "result" in answer)
            break
except Exception as exc:
    print("refused", type(exc).__name__, exc)
"""


@contextmanager
def listening(tmp_path: Path, model: ScriptedModel, url: str) -> Iterator[str]:
    """`codexr app-server --listen URL` running; the URL it serves (the port it bound for ws://…:0)."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    env = {**os.environ, **write_codex_home(tmp_path / "home", model.base_url), "PYTHONPATH": str(REPO),
           "CODEXR_SERVER": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "app-server", "--listen", url], cwd=ws, env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"listening on (\S+)", line)
        assert found, line
        yield found.group(1)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(TIMEOUT_S)
    assert proc.returncode == 0


def client(url: str, *frames: str, wrap: tuple[str, ...] = ()) -> str:
    res = subprocess.run([*wrap, sys.executable, "-c", CLIENT, url, *frames], capture_output=True, text=True,
                         timeout=TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(REPO)})
    return res.stdout + res.stderr


@pytest.mark.parametrize("kind", ["unix", "ws"])
def test_this_user_is_served_and_a_bad_frame_breaks_nothing(model: ScriptedModel, tmp_path: Path, kind: str) -> None:
    url = f"unix://{tmp_path}/s.sock" if kind == "unix" else "ws://127.0.0.1:0"
    with listening(tmp_path, model, url) as served:
        said = client(served, "this is not json", json.dumps([1, 2]), "{\"method\": 5}")
        assert "answered True" in said, said
        if kind == "unix":
            assert (tmp_path / "s.sock").stat().st_mode & 0o077 == 0


@needs_root
@pytest.mark.parametrize("kind", ["unix", "ws"])
def test_another_user_or_a_confined_process_gets_nothing(model: ScriptedModel, tmp_path: Path, kind: str) -> None:
    tmp_path.chmod(0o755)  # the other user may reach the socket's directory: only the check may stop it
    url = f"unix://{tmp_path}/s.sock" if kind == "unix" else "ws://127.0.0.1:0"
    with listening(tmp_path, model, url) as served:
        if kind == "unix":
            (tmp_path / "s.sock").chmod(0o777)  # even a socket anyone may open serves only this user
        other = client(served, wrap=("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"))
        assert "answered" not in other and "refused" in other, other
        confined = client(served, wrap=("setpriv", "--no-new-privs"))
        if kind == "unix":
            assert "answered" not in confined and "refused" in confined, confined
        assert "answered True" in client(served), "this user's own client was refused"
