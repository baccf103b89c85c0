"""`codexr app-server --listen unix://PATH | ws://127.0.0.1:PORT` (issue 19 §2, §5; issue 30): the protocol served to
this user only — another user, a process of this user confined otherwise, a web page (Origin), a page reached
through a rebinding name (Host), a client without the required token: each is refused in the HTTP handshake, before
an app-server starts — and a frame that is not JSON passes without breaking the conversation. The listener takes
no one's live socket, and a bad address is one line. A real `codexr app-server` process and the real Codex behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from app.codex.scripted_model import ScriptedModel, write_codex_home

REPO = Path(__file__).parents[1]
TIMEOUT_S = 60
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="connects as another user: CI runs as root")

CLIENT = """
import json, sys
from websockets.sync.client import connect, unix_connect
where, token = sys.argv[1], sys.argv[2]
headers = {"Authorization": f"Bearer {token}"} if token else None
try:
    with (unix_connect(where[len('unix://'):], additional_headers=headers) if where.startswith('unix://')
          else connect(where, additional_headers=headers)) as ws:
        for frame in sys.argv[3:]:
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


@dataclass
class Listener:
    """A running `codexr app-server --listen`: the URL it printed and its process."""

    url: str
    proc: subprocess.Popen[str]

    def children(self) -> list[str]:
        """The command lines of its child processes (an app-server started for a connection is one)."""
        return children_of(self.proc.pid)


def children_of(pid: int) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(f"{entry}: {cmd}")
    return found


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A directory every user may enter (pytest's tmp_path lies below a directory only its owner enters: another
    user would be stopped there, before any check of codexr's)."""
    made = Path(tempfile.mkdtemp(prefix="codexr-door-"))
    made.chmod(0o755)
    yield made
    shutil.rmtree(made, ignore_errors=True)


def codexr_env(tmp_path: Path, model: ScriptedModel) -> dict[str, str]:
    return {**os.environ, **write_codex_home(tmp_path / "home", model.base_url), "PYTHONPATH": str(REPO),
            "CODEXR_SERVER": "0"}


def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return ws


@contextmanager
def listening(tmp_path: Path, model: ScriptedModel, url: str, *flags: str) -> Iterator[Listener]:
    """`codexr app-server --listen URL FLAGS…` running; the URL it serves (the port it bound for ws://…:0)."""
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "app-server", "--listen", url, *flags],
                            cwd=workspace(tmp_path), env=codexr_env(tmp_path, model), stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"listening on (\S+)", line)
        assert found, line
        yield Listener(found.group(1), proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(TIMEOUT_S)
    assert proc.returncode == 0


def client(url: str, *frames: str, wrap: tuple[str, ...] = (), token: str = "") -> str:
    res = subprocess.run([*wrap, sys.executable, "-c", CLIENT, url, token, *frames], capture_output=True, text=True,
                         timeout=TIMEOUT_S, env={**os.environ, "PYTHONPATH": str(REPO)})
    return res.stdout + res.stderr


def handshake(url: str, *headers: tuple[str, str], host: str | None = None) -> tuple[int, str]:
    """A WebSocket upgrade written by hand, with whatever headers an attacker picks: the status and the body."""
    if url.startswith("unix://"):
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(url[len("unix://"):])
        host = host or "localhost"
    else:
        address = url[len("ws://"):]
        name, _, port = address.rpartition(":")
        sock = socket.create_connection((name.strip("[]"), int(port)))
        host = host or address
    lines = ["GET / HTTP/1.1", f"Host: {host}", "Upgrade: websocket", "Connection: Upgrade",
             "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
             *(f"{k}: {v}" for k, v in headers)]
    sock.settimeout(TIMEOUT_S)
    with sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        if int(head.split()[1]) != 101:
            while chunk := sock.recv(4096):  # a refusal closes the connection after its body
                body += chunk
    return int(head.split()[1]), body.decode(errors="replace")


@pytest.mark.parametrize("kind", ["unix", "ws"])
def test_this_user_is_served_and_a_bad_frame_breaks_nothing(model: ScriptedModel, tmp_path: Path, kind: str) -> None:
    url = f"unix://{tmp_path}/s.sock" if kind == "unix" else "ws://127.0.0.1:0"
    with listening(tmp_path, model, url) as served:
        said = client(served.url, "this is not json", json.dumps([1, 2]), "{\"method\": 5}")
        assert "answered True" in said, said
        if kind == "unix":
            assert (tmp_path / "s.sock").stat().st_mode & 0o077 == 0


@needs_root
@pytest.mark.parametrize("kind", ["unix", "ws"])
def test_another_user_or_a_confined_process_gets_nothing(model: ScriptedModel, tmp_path: Path, open_dir: Path,
                                                        kind: str) -> None:
    url = f"unix://{open_dir}/s.sock" if kind == "unix" else "ws://127.0.0.1:0"  # reachable: only the check stops
    with listening(tmp_path, model, url) as served:
        if kind == "unix":
            (open_dir / "s.sock").chmod(0o777)  # even a socket anyone may open serves only this user
        other = client(served.url, wrap=("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups"))
        assert "answered" not in other and "refused" in other and "403" in other, other
        assert served.children() == [], "an app-server was started for another user's client"
        confined = client(served.url, wrap=("setpriv", "--no-new-privs"))
        if kind == "unix":  # on TCP the kernel names the peer's uid only: a confined process of this user is served
            assert "answered" not in confined and "refused" in confined and "403" in confined, confined
            assert served.children() == [], "an app-server was started for a confined client"
        assert "answered True" in client(served.url), "this user's own client was refused"


@pytest.mark.parametrize("kind", ["unix", "ws"])
def test_a_web_page_is_refused_before_any_app_server_starts(model: ScriptedModel, tmp_path: Path, kind: str) -> None:
    """What a browser tab sends for `new WebSocket("ws://127.0.0.1:PORT")` (its Origin, or `null` from a sandboxed
    frame or a file), and a page on a name the attacker rebinds to 127.0.0.1 (its Host): 403, nothing started."""
    url = f"unix://{tmp_path}/s.sock" if kind == "unix" else "ws://127.0.0.1:0"
    with listening(tmp_path, model, url) as served:
        port = served.url.rsplit(":", 1)[1]
        attempts: list[tuple[tuple[tuple[str, str], ...], str | None]] = [
            ((("Origin", "https://evil.example"),), None),
            ((("Origin", "null"),), None),
            ((("Origin", f"http://127.0.0.1:{port}"),), None)]
        if kind == "ws":
            attempts += [((), f"evil.example:{port}"), ((), "127.0.0.1:1"), ((), "localhost.evil.example")]
        for headers, host in attempts:
            status, body = handshake(served.url, *headers, host=host)
            assert status == 403, (headers, host, status, body)
            assert body.strip() and "\n" not in body.strip(), body  # one line that says why
            assert served.children() == [], f"an app-server was started for {headers or host}"
        assert "answered True" in client(served.url), "a client without an Origin was refused"
        # after it: app-servers started at once on a fresh CODEX_HOME race to create its state database (one dies)
        for host in ([f"localhost:{port}", f"127.0.0.1:{port}"] if kind == "ws" else ["anything"]):
            status, _ = handshake(served.url, host=host)
            assert status == 101, host


@pytest.mark.parametrize(("kind", "how"), [("ws", "file"), ("unix", "sha256")])
def test_a_required_token_is_checked_before_any_app_server_starts(model: ScriptedModel, tmp_path: Path, kind: str,
                                                                  how: str) -> None:
    """`--ws-auth capability-token` as Codex's: the token in `Authorization: Bearer`, from `--ws-token-file` (its
    content, trimmed) or `--ws-token-sha256` (the token's digest); on a unix socket too, which Codex leaves open."""
    token = "per-launch-Secret_0123456789"
    (tmp_path / "token").write_text(f"{token}\n")
    flags = ["--ws-auth", "capability-token",
             *(["--ws-token-file", str(tmp_path / "token")] if how == "file"
               else ["--ws-token-sha256", hashlib.sha256(token.encode()).hexdigest()])]
    url = f"unix://{tmp_path}/s.sock" if kind == "unix" else "ws://127.0.0.1:0"
    with listening(tmp_path, model, url, *flags) as served:
        for headers, reason in [((), "missing websocket bearer token"),
                                ((("Authorization", "Bearer wrong"),), "invalid websocket bearer token"),
                                ((("Authorization", f"Bearer {token}x"),), "invalid websocket bearer token"),
                                ((("Authorization", f"Basic {token}"),), "invalid authorization header"),
                                ((("Authorization", token),), "invalid authorization header"),
                                ((("Origin", "null"), ("Authorization", f"Bearer {token}")), "Origin")]:
            status, body = handshake(served.url, *headers)
            assert status == (403 if reason == "Origin" else 401) and reason in body, (headers, status, body)
            assert served.children() == [], f"an app-server was started for {headers}"
        assert "refused" in client(served.url, token="wrong")
        assert "answered True" in client(served.url, token=token), "the token's holder was refused"


def codexr_app_server(tmp_path: Path, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    """`codexr app-server ARGS` expected to stop at once (against no model: it must start nothing)."""
    env = {**os.environ, **write_codex_home(tmp_path / "home", "http://127.0.0.1:9"), "PYTHONPATH": str(REPO),
           "CODEXR_SERVER": "0"}
    return subprocess.run([sys.executable, "-m", "app.cli", "app-server", *args], cwd=workspace(tmp_path), env=env,
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def one_error_line(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, (res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("codexr: error: "), res.stderr
    return lines[0]


@pytest.mark.parametrize(("flags", "said"), [
    (["--ws-auth", "signed-bearer-token", "--ws-shared-secret-file", "SECRET"], "not implemented"),
    (["--ws-auth", "signed-bearer-token"], "--ws-shared-secret-file"),
    (["--ws-auth", "capability-token"], "--ws-token-file"),
    (["--ws-token-file", "TOKEN"], "--ws-auth"),
    (["--ws-auth", "capability-token", "--ws-token-file", "TOKEN", "--ws-token-sha256", "0" * 64], "exclusive"),
    (["--ws-auth", "capability-token", "--ws-token-file", "TOKEN", "--ws-issuer", "me"], "signed-bearer-token"),
    (["--ws-auth", "capability-token", "--ws-token-sha256", "xyz"], "64-character hex"),
    (["--ws-auth", "capability-token", "--ws-token-file", "EMPTY"], "must not be empty"),
    (["--ws-auth", "capability-token", "--ws-token-file", "MISSING"], "No such file"),
    (["--ws-auth", "capability-token", "--ws-token-file", "DIR"], "websocket auth secret"),
])
def test_websocket_auth_flags_that_cannot_be_honoured_start_nothing(tmp_path: Path, flags: list[str],
                                                                    said: str) -> None:
    """Fail closed: a mode codexr does not implement, or a token it cannot read, is one line and no listener."""
    names = {"SECRET": "s" * 40, "TOKEN": "a-token\n", "EMPTY": " \n"}
    for name, content in names.items():
        (tmp_path / name.lower()).write_text(content)
    (tmp_path / "dir").mkdir()
    flags = [str(tmp_path / f.lower()) if f in (*names, "MISSING", "DIR") else f for f in flags]
    sock = tmp_path / "s.sock"
    line = one_error_line(codexr_app_server(tmp_path, "--listen", f"unix://{sock}", *flags))
    assert said in line, line
    assert not sock.exists(), "it listened"


def test_a_live_socket_is_never_taken_over(model: ScriptedModel, tmp_path: Path) -> None:
    """A second listener on the path of a live one says so and leaves it: the first keeps answering there."""
    sock = tmp_path / "s.sock"
    with listening(tmp_path, model, f"unix://{sock}") as first:
        inode = sock.stat().st_ino
        line = one_error_line(codexr_app_server(tmp_path, "--listen", f"unix://{sock}"))
        assert "already in use" in line, line
        assert sock.stat().st_ino == inode
        assert "answered True" in client(first.url), "the first listener no longer answers at its path"
    assert not sock.exists(), "the first listener left its socket behind"


def stale_socket(path: Path) -> None:
    """A socket file nobody listens on any more (a listener killed before it could remove it)."""
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()


def test_a_stale_socket_of_this_user_is_replaced(model: ScriptedModel, tmp_path: Path) -> None:
    sock = tmp_path / "s.sock"
    stale_socket(sock)
    with listening(tmp_path, model, f"unix://{sock}") as served:
        assert "answered True" in client(served.url)


@needs_root
@pytest.mark.parametrize("live", [False, True])
def test_another_users_socket_is_never_unlinked(tmp_path: Path, open_dir: Path, live: bool) -> None:
    """In a sticky shared directory (as /tmp), root's listener leaves another user's socket, live or stale."""
    shared = open_dir / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    sock = shared / "theirs.sock"
    owner = None
    if live:
        owner = subprocess.Popen(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                                  sys.executable, "-c", "import socket, sys, time\ns = socket.socket(socket.AF_UNIX)\n"
                                  "s.bind(sys.argv[1]); s.listen(); print('up', flush=True); time.sleep(120)",
                                  str(sock)], stdout=subprocess.PIPE, text=True)
        assert owner.stdout is not None and owner.stdout.readline().strip() == "up"
    else:
        stale_socket(sock)
        os.chown(sock, 65534, 65534)
    try:
        inode = sock.lstat().st_ino
        line = one_error_line(codexr_app_server(tmp_path, "--listen", f"unix://{sock}"))
        assert ("already in use" if live else "another user") in line, line
        assert sock.lstat().st_ino == inode and sock.lstat().st_uid == 65534, "their socket was replaced"
    finally:
        if owner is not None:
            owner.kill()
            owner.wait()


def test_bad_listen_addresses_are_one_line_and_change_nothing(tmp_path: Path) -> None:
    regular, directory = tmp_path / "notes.txt", tmp_path / "adir"
    regular.write_text("mine\n")
    directory.mkdir()
    too_long = tmp_path / ("x" * 120)
    for url, said in [("ws://127.0.0.1:99999", "port"), ("ws://[::1]:99999", "port"), ("ws://127.0.0.1:", "port"),
                      ("ws://127.0.0.1:\u00b2", "port"), ("ws://127.0.0.1:\u0663", "port"), ("ws://", "loopback"),
                      ("ws://127.0.0.1", "port"), ("ws://example.com:0", "loopback"),
                      ("ws://127.0.0.1:0/x", "ws://127.0.0.1:PORT"),
                      ("off", "expected"), ("unix://", "expected"), (f"unix://{too_long}", "too long"),
                      (f"unix://{tmp_path}/missing/s.sock", "No such file or directory"),
                      (f"unix://{regular}", "not a socket"), (f"unix://{directory}", "not a socket")]:
        res = codexr_app_server(tmp_path, "--listen", url, timeout=20)
        line = one_error_line(res)
        assert said in line, (url, line)
    assert regular.read_text() == "mine\n" and directory.is_dir() and not too_long.exists()


def test_the_ipv6_loopback_is_printed_as_a_url_a_client_can_use(model: ScriptedModel, tmp_path: Path) -> None:
    with listening(tmp_path, model, "ws://[::1]:0") as served:
        assert re.fullmatch(r"ws://\[::1\]:[1-9][0-9]*", served.url), served.url
        assert "answered True" in client(served.url)
        port = served.url.rsplit(":", 1)[1]
        assert handshake(served.url, host=f"[::1]:{port}")[0] == 101
        assert handshake(served.url, host=f"evil.example:{port}")[0] == 403
