"""A command run through the resident server never has more than its caller (issue 17 §1, §2).

Each test is an attack from the issue, or a way the client hung or died: a process in Codex's own sandbox, one
with capabilities or groups dropped, one in a mount namespace of its own, a socket taken over, a stopped or
killed server or worker. With the server on, each must end exactly as it does without it. Every command here is a
real process (`python -m app` is what the `codexr` console script runs); the sandbox is the pinned Codex binary's
own `codex sandbox`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]
from test_cli_agent import show
from test_server import REPO, START_S, Servers, children, private_base, slow_exec, wait_until

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="sets credentials and mounts: CI runs as root")


@pytest.fixture
def servers() -> Servers:  # type: ignore[misc]
    s = Servers()
    yield s
    s.stop()


def codexr(servers: Servers, *args: str, cwd: Path, env: dict[str, str] | None = None,
           wrap: tuple[str, ...] = (), **kw: object) -> subprocess.CompletedProcess[str]:
    """`codexr ARGS` with the server on (in `servers.dir`), run under `wrap` (a sandbox, setpriv, unshare)."""
    full = {**os.environ, **servers.env, **(env or {})}
    kw.setdefault("timeout", START_S)
    return subprocess.run([*wrap, sys.executable, "-m", "app", *args], env=full, cwd=cwd, capture_output=True,
                          text=True, **kw)  # type: ignore[call-overload]


def sandboxed(home: Path, network: bool = True) -> tuple[str, ...]:
    """Codex's own sandbox as an agent's command runs in it (workspace-write: the cwd and /tmp writable)."""
    return (str(bundled_codex_path()), "sandbox", "-c", 'sandbox_mode="workspace-write"',
            "-c", f"sandbox_workspace_write.network_access={'true' if network else 'false'}", "--")


# ------------------------------------------------------------------------------------------ §1: the caller's rights


def test_a_command_in_codexs_sandbox_does_not_leave_it_through_the_server(servers: Servers, tmp_path: Path) -> None:
    """`restore --into` a directory the sandbox cannot write, and a `--codex-bin` script, from inside `codex
    sandbox`: both stay in the sandbox (EROFS; the script runs with no capabilities, seccomp on) as without a
    server."""
    servers.start()
    ws = tmp_path / "ws"  # below /tmp: the sandbox may write it
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    home = tmp_path / "home"
    env = {"CODEX_HOME": str(home)}
    res = codexr(servers, "snapshots", "capture", "--json", cwd=ws, env=env)
    assert res.returncode == 0, show(res)
    snap = json.loads(res.stdout)["id"]
    outside = Path(servers.dir.parent) / f"outside-{os.getpid()}"  # under the home directory: read-only there
    outside.mkdir()
    try:
        res = codexr(servers, "snapshots", "restore", snap, "--into", str(outside), "--yes", cwd=ws, env=env,
                     wrap=sandboxed(home))
        assert "Read-only file system" in res.stdout + res.stderr and "Traceback" not in res.stderr, show(res)
        assert list(outside.iterdir()) == [], "a sandboxed command wrote outside its sandbox through the server"
    finally:
        for p in outside.iterdir():
            p.unlink()
        outside.rmdir()
    evil = ws / "evil.sh"
    evil.write_text(f"#!/bin/sh\ngrep -E '^(NoNewPrivs|Seccomp|CapEff):' /proc/self/status > {ws}/seen.txt\n"
                    "exit 1\n")
    evil.chmod(0o755)
    codexr(servers, "--codex-bin", str(evil), "doctor", cwd=ws, env=env, wrap=sandboxed(home))
    seen = dict(line.split(":\t") for line in (ws / "seen.txt").read_text().splitlines())
    assert seen == {"NoNewPrivs": "1", "Seccomp": "2", "CapEff": "0000000000000000"}, seen
    assert [cmd for _w, _c, cmd in servers.served()] == ["snapshots"], servers.log()  # the capture alone


def test_the_socket_is_never_where_a_sandbox_can_write(tmp_path: Path) -> None:
    """A runtime directory below /tmp (Codex's sandbox writes there), or below a directory others may write, is
    no place for a socket: no server is started or used there."""
    # A parent anyone may write (someone could swap the directory itself): one of this test's own, never the
    # shared private_base(), which other tests' servers (another xdist worker) use meanwhile.
    open_parent = private_base() / f"open-{os.getpid()}"
    open_parent.mkdir(exist_ok=True)
    for parent in (tmp_path, open_parent):
        runtime = parent / f"rt-{os.getpid()}"
        runtime.mkdir(mode=0o700)
        if parent == open_parent:
            os.chmod(parent, 0o777)
        try:
            env = {**os.environ, "CODEXR_SERVER": "1", "CODEXR_RUNTIME_DIR": str(runtime), "PYTHONSAFEPATH": "1",
                   "PYTHONPATH": str(REPO), "CODEX_HOME": str(tmp_path / "home")}
            ws = tmp_path / "ws"
            ws.mkdir(exist_ok=True)
            res = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws, env=env,
                                 capture_output=True, text=True, timeout=START_S)
            assert res.returncode == 0, show(res)
            time.sleep(0.5)
            assert list(runtime.iterdir()) == [], f"a server was started in {runtime}"
            code = "from app.server import runtime; print(runtime.runtime_dir())"
            probe = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
            assert probe.stdout.strip() == "None", probe.stdout
        finally:
            os.chmod(parent, 0o700)
            runtime.rmdir()
    open_parent.rmdir()
    # Neither CODEXR_RUNTIME_DIR nor XDG_RUNTIME_DIR, and a home below /tmp: no server (it used to be
    # /tmp/codexr-UID; the cache directory's fallback of issue 35 must not bring that back)
    env = {k: v for k, v in os.environ.items() if k not in ("CODEXR_RUNTIME_DIR", "XDG_RUNTIME_DIR",
                                                             "XDG_CACHE_HOME")}
    code = "from app.server import runtime; print(runtime.runtime_dir())"
    probe = subprocess.run([sys.executable, "-c", code], env={**env, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
                           capture_output=True, text=True, check=True)
    assert probe.stdout.strip() == "None", probe.stdout
    assert not (tmp_path / ".cache" / "codexr").exists()


def test_without_xdg_runtime_dir_the_server_lives_in_the_cache_directory_if_only_you_can_write_there(
        tmp_path: Path) -> None:
    """Issue 35 §3: with no XDG_RUNTIME_DIR (containers, ssh, su, every Mac) every command ran by itself, 4.4x the
    server's `threads`. Now the runtime directory falls back to `~/.cache/codexr/run-HOST` (mode 700) — and a
    cache directory others may write is refused as any runtime directory is: the command runs by itself."""
    home = Path(tempfile.mkdtemp(prefix="home-", dir=private_base()))  # outside /tmp, as a real home is
    os.chmod(home, 0o755)
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("CODEXR_RUNTIME_DIR", "XDG_RUNTIME_DIR",
                                                             "XDG_CACHE_HOME")}
    env.update(HOME=str(home), CODEXR_SERVER="1", PYTHONSAFEPATH="1", PYTHONPATH=str(REPO),
               CODEX_HOME=str(tmp_path / "codex-home"), CODEXR_SERVER_START_TIMEOUT="60")
    run = home / ".cache" / "codexr" / f"run-{os.uname().nodename}"
    try:
        res = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws, env=env,
                             capture_output=True, text=True, timeout=START_S)
        assert res.returncode == 0, show(res)  # the first command starts a server there, and runs by itself
        assert run.is_dir() and (run.stat().st_mode & 0o777) == 0o700, sorted(home.rglob("*"))
        wait_until(lambda: list(run.glob("s-*.sock")), START_S, "the server's socket in the cache directory")
        res = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws, env=env,
                             capture_output=True, text=True, timeout=START_S)
        assert res.returncode == 0, show(res)
        log = "".join(p.read_text(errors="replace") for p in run.glob("s-*.log"))
        assert re.search(r"worker \d+: client \d+: snapshots", log), log  # served there
        subprocess.run([sys.executable, "-m", "app", "server", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(home / ".cache")
        (home / ".cache").mkdir()
        os.chmod(home / ".cache", 0o777)  # a cache directory anyone may write: no place for a socket
        res = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws, env=env,
                             capture_output=True, text=True, timeout=START_S)
        assert res.returncode == 0, show(res)
        assert not (home / ".cache" / "codexr").exists(), sorted(home.rglob("*"))
    finally:
        subprocess.run([sys.executable, "-m", "app", "server", "stop"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(home, ignore_errors=True)


def test_a_sandboxed_process_cannot_replace_or_remove_the_socket(servers: Servers, tmp_path: Path) -> None:
    servers.start()
    (sock,) = servers.dir.glob("*.sock")
    script = ("import os, socket, sys\n"
              "p = sys.argv[1]\n"
              "for what in ('unlink', 'rename'):\n"
              "    try:\n"
              "        os.unlink(p) if what == 'unlink' else os.rename(p, p + '.x')\n"
              "        print(what, 'ok')\n"
              "    except OSError as e:\n"
              "        print(what, e.errno)\n"
              "s = socket.socket(socket.AF_UNIX)\n"
              "try:\n"
              "    s.bind(p + '.evil')\n"
              "    print('bind ok')\n"
              "except OSError as e:\n"
              "    print('bind', e.errno)\n")
    for network in (True, False):
        res = subprocess.run([*sandboxed(tmp_path / "home", network), sys.executable, "-c", script, str(sock)],
                             cwd=tmp_path, capture_output=True, text=True, timeout=START_S)
        said = dict(line.split() for line in res.stdout.splitlines())
        assert said["unlink"] == said["rename"] == "30" and said["bind"] != "ok", show(res)  # EROFS
    assert sock.exists()


class FakeServer:
    """A listener on the socket a client would use, recording every byte a client sends it."""

    def __init__(self, path: Path, wrap: tuple[str, ...] = ()) -> None:
        script = ("import socket, sys, os\n"
                  "l = socket.socket(socket.AF_UNIX); l.bind(sys.argv[1]); l.listen(8)\n"
                  "open(sys.argv[1] + '.lock', 'w').write(str(os.getpid()))\n"
                  "print('ready', flush=True)\n"
                  "while True:\n"
                  "    c, _ = l.accept(); c.settimeout(3)\n"
                  "    try:\n"
                  "        msg, fds, _f, _a = socket.recv_fds(c, 1 << 16, 8)\n"
                  "        if msg or fds:\n"
                  "            print('got', len(msg), len(fds), flush=True)\n"
                  "    except OSError:\n"
                  "        pass\n"
                  "    c.close()\n")
        self.proc = subprocess.Popen([*wrap, sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE,
                                     text=True)
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def said(self) -> str:
        self.proc.kill()
        out, _ = self.proc.communicate(10)
        return out


@pytest.mark.parametrize("who", ["unnamed", "confined"])
def test_the_client_sends_nothing_to_a_server_it_cannot_verify(servers: Servers, tmp_path: Path, who: str) -> None:
    """Whoever listens on the socket gets no request (environment, streams, directory) unless it is the server its
    lock file names and it is confined exactly as the client: else the command runs here."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, **servers.env}
    path = subprocess.run([sys.executable, "-c", "from app.server import runtime; print(runtime.socket_path())"],
                          env=env, capture_output=True, text=True, check=True).stdout.strip()
    assert path.startswith(str(servers.dir)), path
    wrap = ("setpriv", "--no-new-privs") if who == "confined" else ()
    fake = FakeServer(Path(path), wrap)
    if who == "unnamed":
        Path(path + ".lock").write_text("1")  # names another process
    res = codexr(servers, "snapshots", "capture", cwd=ws, env={"CODEX_HOME": str(tmp_path / "home"),
                                                                "SECRET_TOKEN": "s3cr3t"})
    said = fake.said()
    assert res.returncode == 0, show(res)
    assert "got" not in said, f"the client sent its request to a server it could not verify: {said!r}"


RAW_CLIENT = """
import os, socket, sys
from app import launch
body = launch._request(['snapshots', 'capture'])
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
cwd = os.open('.', os.O_RDONLY | os.O_DIRECTORY)
got = b''
try:  # a client that checks nothing: it sends its request at once and says go to whatever comes back
    socket.send_fds(s, [b'CRX1' + b'%012d' % len(body)], [cwd, 0, 1, 2])
    s.sendall(body)
    s.settimeout(30)
    while True:
        chunk = s.recv(4096)
        if not chunk:
            break
        got += chunk
        if b'ok ' in got:
            s.sendall(b'go\\n')
except OSError as exc:
    print('error', exc)
print('answer', repr(got))
"""


def test_the_worker_refuses_a_caller_confined_otherwise_whatever_the_client_checks(servers: Servers,
                                                                                    tmp_path: Path) -> None:
    """A hostile client skips every check of its own: the worker itself refuses a caller with `no_new_privs` set
    (as in Codex's sandbox) that the server does not have, and nothing runs."""
    servers.start()
    (sock,) = servers.dir.glob("*.sock")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    home = tmp_path / "home"
    env = {**os.environ, **servers.env, "CODEX_HOME": str(home)}
    res = subprocess.run(["setpriv", "--no-new-privs", sys.executable, "-c", RAW_CLIENT, str(sock)], cwd=ws, env=env,
                         capture_output=True, text=True, timeout=START_S)
    assert "answer" in res.stdout and "ok " not in res.stdout, show(res)
    assert servers.served() == [] and not (home / "file_snapshots").exists(), servers.log()
    assert "refused: client" in servers.log() and "NoNewPrivs" in servers.log(), servers.log()


@needs_root
def test_dropped_capabilities_are_not_regained_through_the_server(servers: Servers, tmp_path: Path) -> None:
    """Root with every capability dropped cannot read a directory only `nobody` may read; nor through the server."""
    servers.start()
    private = tmp_path / "nobodys"
    private.mkdir()
    (private / "secret.txt").write_text("only nobody reads this\n")
    os.chown(private, 65534, 65534)
    os.chown(private / "secret.txt", 65534, 65534)
    private.chmod(0o700)
    env = {"CODEX_HOME": str(tmp_path / "home")}
    drop = ("setpriv", "--bounding-set=-all", "--inh-caps=-all")
    res = codexr(servers, "snapshots", "capture", "-C", str(private), "--json", cwd=tmp_path, env=env, wrap=drop)
    local = codexr(servers, "snapshots", "capture", "-C", str(private), "--json", cwd=tmp_path,
                   env={**env, "CODEXR_SERVER": "0"}, wrap=drop)
    assert local.returncode != 0, show(local)
    assert res.returncode == local.returncode and res.stderr == local.stderr, (show(res), show(local))
    assert servers.served() == [], servers.log()


@needs_root
def test_files_a_restore_writes_belong_to_the_callers_group(servers: Servers, tmp_path: Path) -> None:
    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    ws.chmod(0o777)
    (ws / "a.txt").write_text("one\n")
    env = {"CODEX_HOME": str(tmp_path / "home")}
    res = codexr(servers, "snapshots", "capture", "--json", cwd=ws, env=env)
    assert res.returncode == 0, show(res)
    snap = json.loads(res.stdout)["id"]
    (ws / "a.txt").unlink()
    res = codexr(servers, "snapshots", "restore", snap, "--yes", cwd=ws, env=env,
                 wrap=("setpriv", "--regid", "65534", "--clear-groups"))
    assert res.returncode == 0, show(res)
    assert (ws / "a.txt").read_text() == "one\n"
    assert (ws / "a.txt").stat().st_gid == 65534, "the restored file belongs to the server's group"


@needs_root
def test_a_capture_sees_the_callers_mounts(servers: Servers, tmp_path: Path) -> None:
    """After `unshare -m` and a tmpfs over the workspace, the caller's files are captured, not the host's."""
    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "host.txt").write_text("the host's file\n")
    env = {"CODEX_HOME": str(tmp_path / "home")}
    inner = (f"mount -t tmpfs none {ws} && echo mine > {ws}/mine.txt && cd {ws} && "
             f"{sys.executable} -m app snapshots capture --json")
    full = {**os.environ, **servers.env, **env}
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", inner], cwd=tmp_path, env=full,
                         capture_output=True, text=True, timeout=START_S)
    assert res.returncode == 0, show(res)
    snap = json.loads(res.stdout)["id"]
    shown = codexr(servers, "snapshots", "show", snap, "--json", cwd=ws, env=env)
    assert shown.returncode == 0, show(shown)
    assert "mine.txt" in shown.stdout and "host.txt" not in shown.stdout, shown.stdout


# ------------------------------------------------------------------------------------------ §2: hangs and deaths


def waiting_on_a_socket(pid: int) -> bool:
    """Whether `pid` has a socket open (to the server: its streams are pipes) and sleeps in poll() (Python's wait on
    a socket with a timeout): started, connected, waiting for an answer."""
    try:
        fds = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False
    return any(fd.startswith("socket:") for fd in fds) and "poll" in wchan


def test_a_stopped_server_means_the_command_runs_here_and_ctrl_c_ends_the_wait(servers: Servers,
                                                                                tmp_path: Path) -> None:
    """With the server stopped (SIGSTOP), a command does not wait forever: it runs here after a short bound; and
    Ctrl+C while it waits ends it at once (exit 130), running nothing."""
    servers.start()
    (server,) = servers.pids()
    stopped = [server, *children(server)]
    for pid in stopped:
        os.kill(pid, signal.SIGSTOP)
    try:
        ws = tmp_path / "ws"
        ws.mkdir()
        (ws / "a.txt").write_text("a\n")
        env = {"CODEX_HOME": str(tmp_path / "home"), "CODEXR_SERVER_START_TIMEOUT": "1"}
        res = codexr(servers, "snapshots", "capture", cwd=ws, env=env, timeout=60)
        assert res.returncode == 0 and "1 file, " in res.stderr, show(res)
        assert "did not answer" in res.stderr, show(res)
        full = {**os.environ, **servers.env, **env, "CODEXR_SERVER_START_TIMEOUT": "60"}
        proc = subprocess.Popen([sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws, env=full,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_until(lambda: waiting_on_a_socket(proc.pid), 30, "the command to wait for the stopped server")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err, (out, err)
    finally:
        for pid in stopped:
            os.kill(pid, signal.SIGCONT)
    time.sleep(2)
    assert servers.served() == [], f"a continued worker ran an abandoned command:\n{servers.log()}"


def test_a_worker_killed_by_sigkill_ends_its_caller_the_same_way(servers: Servers, tmp_path: Path) -> None:
    """The OOM killer or `kill -9` of the worker: the caller dies of SIGKILL too (exit 137 in a shell), with no
    traceback."""
    with slow_exec(servers, tmp_path, "kill my worker") as (proc, _model):
        worker = next(w for w, c, _cmd in servers.served() if c == proc.pid)
        os.kill(worker, signal.SIGKILL)
        assert proc.wait(20) == -signal.SIGKILL


def test_a_low_open_files_limit_behaves_as_without_the_server(servers: Servers, tmp_path: Path) -> None:
    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    results = {}
    for name in ("local", "server"):
        env = {"CODEX_HOME": str(tmp_path / f"home-{name}")}
        if name == "local":
            env["CODEXR_SERVER"] = "0"
        results[name] = codexr(servers, "snapshots", "capture", cwd=ws, env=env, preexec_fn=lambda: __import__(
            "resource").setrlimit(__import__("resource").RLIMIT_NOFILE, (6, 6)))
        assert results[name].returncode == 0, (name, show(results[name]))
    assert [cmd for _w, _c, cmd in servers.served()] == ["snapshots"], servers.log()


def test_the_server_holds_no_callers_directory(servers: Servers, tmp_path: Path) -> None:
    """`umount` of the file system a first command ran in must not fail with "target is busy"."""
    ws = tmp_path / "ws"
    ws.mkdir()
    res = codexr(servers, "snapshots", "capture", cwd=ws, env={"CODEX_HOME": str(tmp_path / "home")})
    assert res.returncode == 0, show(res)
    wait_until(lambda: bool(servers.pids()), START_S, "the first command to start a server")
    (server,) = servers.pids()
    for pid in (server, *children(server)):
        assert os.readlink(f"/proc/{pid}/cwd") == "/", f"{pid} holds {os.readlink(f'/proc/{pid}/cwd')}"
        held = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        assert not [h for h in held if h.startswith(str(tmp_path))], held


def test_an_edit_that_keeps_size_and_mtime_gets_a_new_server(tmp_path: Path) -> None:
    from test_server import copied_codexr

    server_key = copied_codexr(tmp_path)
    first = server_key()
    source = tmp_path / "snapshot_store" / "restore" / "apply.py"
    st = source.stat()
    data = bytearray(source.read_bytes())
    at = data.index(b"\"\"\"") + 3
    data[at:at + 1] = data[at:at + 1].swapcase()  # the docstring's first letter: same size
    source.write_bytes(bytes(data))
    os.utime(source, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert source.stat().st_size == st.st_size and source.stat().st_mtime_ns == st.st_mtime_ns
    edited = server_key()
    assert edited != first
