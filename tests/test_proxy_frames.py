"""The proxy is a door (issue 30): no frame a client sends ends the relay or is read otherwise than the real
app-server reads it, no client id is taken for one of the relay's own, a client gone mid-turn leaves no traceback,
and a Codex setting that leads back to `codexr-codex` stops with one line instead of starting it forever.

A real `codexr app-server` process (stdio, `--listen ws://`, or through the `codexr-codex` shim as the IDE starts
it) with the real, pinned Codex behind it; where it matters, the real `codex app-server` gets the same frames and
both must answer alike.
"""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest
from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]

from app.codex.scripted_model import (
    ScriptedModel,
    add_file,
    last_user_text,
    message,
    shell,
    update_file,
    write_codex_home,
)

REPO = Path(__file__).parents[1]
SHIM = Path(sys.executable).parent / "codexr-codex"
PINNED = Path(bundled_codex_path())
TIMEOUT_S = 60

#: What the real app-server logs and goes on from, answering nothing (it cannot tell their ids).
FLOOD = b"\n" * 5000
DEEP = b"[" * 5000 + b"]" * 5000
DEEP_REQUEST = b'{"id":"deep","method":"model/list","params":' + b'{"a":' * 5000 + b"1" + b"}" * 5000 + b"}"
NAN_REQUEST = b'{"id":"nan","method":"model/list","params":{"limit":NaN}}'


def initialize(rid: Any, name: str = "frames") -> dict[str, Any]:
    return {"id": rid, "method": "initialize", "params": {
        "clientInfo": {"name": name, "title": name, "version": "1"}, "capabilities": {"experimentalApi": True}}}


def started_thread(client: Peer, ws: Path, *, approval: str = "never", sandbox: str = "danger-full-access",
                   name: str = "frames") -> str:
    """`initialize` (id 1, as client `name`) and `thread/start` (id 2) in `ws`: the new thread's id."""
    client.send(initialize(1, name))
    assert "result" in client.answer(1)
    client.send({"id": 2, "method": "thread/start",
                 "params": {"cwd": str(ws), "approvalPolicy": approval, "sandbox": sandbox}})
    return str(client.answer(2)["result"]["thread"]["id"])


def prompt(client: Peer, rid: int, thread: str, text: str, *, wait: bool = True) -> str:
    """`turn/start` of `text` on `thread` (id `rid`), answered; with `wait`, until that turn completes: its id."""
    client.send({"id": rid, "method": "turn/start",
                 "params": {"threadId": thread, "input": [{"type": "text", "text": text}]}})
    answer = client.answer(rid)
    assert "result" in answer, answer
    turn = str(answer["result"]["turn"]["id"])
    if wait:
        client.until(lambda m: m.get("method") == "turn/completed" and m["params"]["turn"]["id"] == turn)
    return turn


def codex_env(model: ScriptedModel, tmp_path: Path, **extra: str) -> dict[str, str]:
    """A client's environment against the scripted model (no resident server)."""
    return {**os.environ, **write_codex_home(tmp_path / "home", model.base_url), "PYTHONPATH": str(REPO),
            "CODEXR_SERVER": "0", **extra}


def descendants(roots: set[int]) -> set[int]:
    """The processes whose parent is one of `roots` (one generation, from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid in roots:
                found.add(int(entry.name))
    return found


def kill_tree(root: int) -> None:
    """Stop `root` and every process below it until none is new (a stopped process forks no more), then kill
    them all: a loop that starts processes cannot outrun it."""
    seen: set[int] = set()
    new = {root}
    while new:
        for pid in new:
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP)
        seen |= new
        new = descendants(seen) - seen
    for pid in seen:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


class Peer:
    """A client of an app-server process on stdio: bytes written to its stdin, each line of its stdout a message."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], err: Path) -> None:
        self.err = err
        with err.open("wb") as sink:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=sink, bufsize=0, start_new_session=True)
        self.buf = b""
        self.seen: list[dict[str, Any]] = []

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)

    def send(self, msg: dict[str, Any]) -> None:
        self.write(json.dumps(msg).encode() + b"\n")

    def next(self) -> dict[str, Any]:
        """The next message (all are kept in `seen`)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + TIMEOUT_S
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            assert left > 0, f"no message in {TIMEOUT_S} s; stderr: {self.stderr()[-2000:]}"
            if select.select([self.proc.stdout], [], [], left)[0]:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 16)
                assert chunk, f"the app-server closed its output; stderr: {self.stderr()[-2000:]}"
                self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        msg: dict[str, Any] = json.loads(line)
        self.seen.append(msg)
        return msg

    def until(self, wanted: Callable[[dict[str, Any]], bool],
              server_request: Callable[[dict[str, Any]], Any] | None = None) -> dict[str, Any]:
        """The first message `wanted` takes; requests of the app-server on the way get `server_request`'s result."""
        while True:
            msg = self.next()
            if wanted(msg):
                return msg
            if "method" in msg and "id" in msg and server_request is not None:
                self.send({"id": msg["id"], "result": server_request(msg)})

    def answer(self, rid: Any, **kw: Any) -> dict[str, Any]:
        """The answer to the request with id `rid` (exactly: 2 is not "2")."""
        def same(msg: dict[str, Any]) -> bool:
            return "method" not in msg and type(msg.get("id")) is type(rid) and msg.get("id") == rid

        return self.until(same, **kw)

    def answers(self) -> list[Any]:
        """The ids of every answer seen so far, in order."""
        return [m.get("id") for m in self.seen if "method" not in m]

    def stderr(self) -> str:
        return self.err.read_text(errors="replace")

    def close(self) -> int:
        """Close its stdin and wait for it to exit; its exit status (it is killed, with all below it, if it hangs)."""
        assert self.proc.stdin is not None
        with suppress(BrokenPipeError):
            self.proc.stdin.close()
        try:
            return self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid)
            self.proc.wait()
            raise


@contextmanager
def peer(argv: list[str], cwd: Path, env: dict[str, str], err: Path) -> Iterator[Peer]:
    client = Peer(argv, cwd, env, err)
    try:
        yield client
    finally:
        if client.proc.poll() is None:
            kill_tree(client.proc.pid)
            client.proc.wait()


def no_traceback(text: str) -> None:
    assert "Traceback" not in text, text[-3000:]


def test_blank_lines_and_frames_codex_cannot_read_get_what_codex_gives_them_and_the_relay_goes_on(
        model: ScriptedModel, tmp_path: Path) -> None:
    """5,000 blank lines, 5,000 nested arrays, a request nested 5,000 deep, one with a NaN: the real app-server logs
    each and goes on, answering none; through `codexr app-server` the same, and the next `initialize` is answered."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = codex_env(model, tmp_path)
    answered = {}
    for name, argv in (("codex", [str(PINNED), "app-server", "--listen", "stdio://"]),
                       ("codexr", [sys.executable, "-m", "app.cli", "app-server"])):
        with peer(argv, ws, env, tmp_path / f"{name}.err") as client:
            for frame in (FLOOD, DEEP + b"\n", DEEP_REQUEST + b"\n", NAN_REQUEST + b"\n"):
                client.write(frame)
            client.send(initialize("after"))
            assert "result" in client.answer("after")
            answered[name] = client.answers()
            assert client.close() == 0
            if name == "codexr":
                no_traceback(client.stderr())
    assert answered["codexr"] == answered["codex"] == ["after"]


class Listener:
    """An app-server process serving WebSocket on loopback; stderr is drained into `lines`."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: list[str] = []
        self.heard = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line)
            if re.search(r"listening on:? (ws://\S+)", line):
                self.heard.set()
        self.heard.set()

    def url(self) -> str:
        assert self.heard.wait(TIMEOUT_S), "it never said where it listens"
        found = [m.group(1) for line in self.lines if (m := re.search(r"listening on:? (ws://\S+)", line))]
        assert found, "".join(self.lines)
        return found[0]

    def stop(self) -> str:
        """SIGTERM, then wait; all it said on stderr."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(TIMEOUT_S)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid)
            self.proc.wait()
            raise
        return "".join(self.lines)


def ws_answers(url: str, frames: list[str]) -> list[Any]:
    """Send `frames` then `initialize` over one WebSocket connection; the ids of the answers up to its own."""
    from websockets.sync.client import connect

    seen = []
    with connect(url, max_size=None) as conn:
        for frame in frames:
            conn.send(frame)
        conn.send(json.dumps(initialize("after")))
        while True:
            msg = json.loads(conn.recv(timeout=TIMEOUT_S))
            if "method" not in msg:
                seen.append(msg.get("id"))
                if msg.get("id") == "after":
                    return seen


def test_over_websocket_a_frame_codex_cannot_read_is_not_split_nor_the_end_of_the_connection(
        model: ScriptedModel, tmp_path: Path) -> None:
    """An empty frame, 5,000 nested arrays, and two requests in one frame (a newline between them): the real
    app-server reads each frame as one message it cannot parse and answers none of them; `codexr app-server
    --listen ws://` the same (one frame stays one message on the pipe behind it), on the same connection."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = codex_env(model, tmp_path)
    two = json.dumps({"id": "a", "method": "model/list", "params": {}}) + "\n" + json.dumps(
        {"id": "b", "method": "model/list", "params": {}})
    frames = ["", DEEP.decode(), two, DEEP_REQUEST.decode()]
    answered, said = {}, {}
    for name, argv in (("codex", [str(PINNED), "app-server", "--listen", "ws://127.0.0.1:0"]),
                       ("codexr", [sys.executable, "-m", "app.cli", "app-server", "--listen", "ws://127.0.0.1:0"])):
        server = Listener(argv, ws, env)
        try:
            answered[name] = ws_answers(server.url(), frames)
        finally:
            said[name] = server.stop()
    assert answered["codexr"] == answered["codex"] == ["after"]
    no_traceback(said["codexr"])


def two_turns(client: Peer, ws: Path, model: ScriptedModel, tag: str, ids: list[Any]) -> tuple[str, str]:
    """initialize, a thread (commands need approval: each is accepted as asked), a turn that adds a.txt and runs a
    command, a turn that changes a.txt; each request with the next id of `ids`, each answer checked to carry it
    back exactly. The thread and the second turn's id."""
    model.script(f"{tag} one", [add_file("a.txt", "one\n"), shell("echo yes > b.txt"), message("added a.txt")])
    model.script(f"{tag} two", [update_file("a.txt", "one", "two"), message("changed a.txt")])
    approvals: list[Any] = []

    def accept(request: dict[str, Any]) -> dict[str, Any]:
        approvals.append(request["id"])
        return {"decision": "accept"}

    client.send(initialize(ids[0]))
    assert "result" in client.answer(ids[0])
    client.send({"id": ids[1], "method": "thread/start",
                 "params": {"cwd": str(ws), "approvalPolicy": "untrusted", "sandbox": "workspace-write"}})
    thread = str(client.answer(ids[1])["result"]["thread"]["id"])
    turns = []
    for rid, prompt in ((ids[2], f"{tag} one"), (ids[3], f"{tag} two")):
        client.send({"id": rid, "method": "turn/start",
                     "params": {"threadId": thread, "input": [{"type": "text", "text": prompt}]}})
        turn = str(client.answer(rid, server_request=accept)["result"]["turn"]["id"])
        done = client.until(lambda m, turn=turn: m.get("method") == "turn/completed"
                            and m["params"]["turn"]["id"] == turn, server_request=accept)
        assert done["params"]["turn"]["status"] == "completed", done
        turns.append(turn)
    assert approvals, "no command asked for approval: the server's own request ids went untested"
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "b.txt").read_text() == "yes\n"
    return thread, turns[1]


def test_a_client_may_use_any_id_even_the_relays_own_and_gets_it_back_as_it_sent_it(
        model: ScriptedModel, tmp_path: Path) -> None:
    """Through the shim, as the IDE starts it: a client whose ids look like the relay's (`codexr-proxy-N`) is
    answered, each answer with the id as sent (2 stays a number), the app-server's approval requests are answered
    by theirs, and a revert (for which the relay asks the app-server things of its own) still rewinds the files."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with peer([str(SHIM), "app-server"], ws, codex_env(model, tmp_path), tmp_path / "shim.err") as client:
        thread, second = two_turns(client, ws, model, "frames ids",
                                   ["codexr-proxy-1", 2, "codexr-proxy-2", "codexr-proxy-3"])
        client.send({"id": "codexr-proxy-4", "method": "thread/revert",
                     "params": {"threadId": thread, "beforeTurnId": second}})
        assert "result" in client.answer("codexr-proxy-4"), client.seen[-1]
        assert (ws / "a.txt").read_text() == "one\n"
        client.send({"id": 5, "method": "thread/read", "params": {"threadId": thread, "includeTurns": False}})
        assert client.answer(5)["result"]["thread"]["id"] == thread
        assert client.close() == 0
        no_traceback(client.stderr())


def test_a_request_codex_cannot_read_is_not_acted_on(model: ScriptedModel, tmp_path: Path) -> None:
    """A `thread/revert` carrying a field nested 200 deep, a NaN, a lone surrogate, or `method` twice (Python
    keeps the last): Python could read it, the app-server cannot (it logs it and answers nothing), so codexr must
    not rewind any file for it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    with peer([sys.executable, "-m", "app.cli", "app-server"], ws, codex_env(model, tmp_path),
              tmp_path / "codexr.err") as client:
        thread, second = two_turns(client, ws, model, "frames unread", [1, 2, 3, 4])
        head = f'{{"method":"thread/revert","params":{{"threadId":"{thread}","beforeTurnId":"{second}",'
        client.write(f'{head}"x":{"[" * 200}{"]" * 200}}},"id":"deep"}}\n'.encode())
        client.write(f'{head}"x":NaN}},"id":"nan"}}\n'.encode())
        client.write(f'{head}"x":"\\ud800"}},"id":"surrogate"}}\n'.encode())
        client.write(f'{head.replace("thread/revert", "thread/read")}"x":1}},"id":"twice","method":"thread/revert"}}\n'
                     .encode())
        client.send({"id": 5, "method": "thread/read", "params": {"threadId": thread, "includeTurns": True}})
        turns = client.answer(5)["result"]["thread"]["turns"]
        assert len(turns) == 2 and (ws / "a.txt").read_text() == "two\n"
        assert not {"deep", "nan", "surrogate", "twice"} & set(client.answers()), client.answers()
        assert client.close() == 0


def test_a_client_gone_mid_turn_leaves_no_traceback(model: ScriptedModel, tmp_path: Path) -> None:
    """The client stops reading while a command streams its output (its end of the proxy's stdout closed), and
    writes on a moment before it closes its stdin too: the proxy ends quietly, exit 0."""
    ws = tmp_path / "ws"
    ws.mkdir()
    model.script("frames stream", [shell("for i in $(seq 1 3000); do echo line $i; sleep 0.005; done"),
                                   message("streamed")])
    with peer([sys.executable, "-m", "app.cli", "app-server"], ws, codex_env(model, tmp_path),
              tmp_path / "codexr.err") as client:
        client.send(initialize(1))
        client.answer(1)
        client.send({"id": 2, "method": "thread/start",
                     "params": {"cwd": str(ws), "approvalPolicy": "never", "sandbox": "danger-full-access"}})
        thread = client.answer(2)["result"]["thread"]["id"]
        client.send({"id": 3, "method": "turn/start",
                     "params": {"threadId": thread, "input": [{"type": "text", "text": "frames stream"}]}})
        for _ in range(10):
            client.until(lambda m: m.get("method") == "item/commandExecution/outputDelta")
        assert client.proc.stdout is not None
        client.proc.stdout.close()
        for i in range(100):
            try:
                client.send({"id": 10 + i, "method": "thread/loaded/list", "params": {}})
            except BrokenPipeError:
                break
            time.sleep(0.02)
        assert client.close() == 0
        no_traceback(client.stderr())


@pytest.mark.parametrize("redirect", ["stdin /dev/null", "stdin a file", "stdout a file"])
def test_stdin_and_stdout_may_be_files(model: ScriptedModel, tmp_path: Path, redirect: str) -> None:
    """`codexr app-server < /dev/null`, `< requests.jsonl`, `> answers.jsonl` (asyncio cannot wait on a file or
    /dev/null): it serves (answers land in the file) and ends quietly, exit 0."""
    ws = tmp_path / "ws"
    ws.mkdir()
    requests, answers, err = tmp_path / "requests.jsonl", tmp_path / "answers.jsonl", tmp_path / "codexr.err"
    requests.write_text(json.dumps(initialize(1)) + "\n")
    argv = [sys.executable, "-m", "app.cli", "app-server"]
    with err.open("wb") as sink, answers.open("wb") as out:
        if redirect.startswith("stdin"):
            source = "/dev/null" if redirect.endswith("/dev/null") else requests
            with open(source, "rb") as given:
                code = subprocess.run(argv, cwd=ws, env=codex_env(model, tmp_path), stdin=given,
                                      stdout=subprocess.DEVNULL, stderr=sink, timeout=TIMEOUT_S).returncode
        else:
            proc = subprocess.Popen(argv, cwd=ws, env=codex_env(model, tmp_path), stdin=subprocess.PIPE, stdout=out,
                                    stderr=sink)
            try:
                assert proc.stdin is not None
                proc.stdin.write(requests.read_bytes())
                proc.stdin.flush()
                deadline = time.monotonic() + TIMEOUT_S
                while '"id":1,"result"' not in answers.read_text().replace(" ", ""):
                    assert proc.poll() is None and time.monotonic() < deadline, err.read_text()[-2000:]
                    time.sleep(0.05)
                proc.stdin.close()
                code = proc.wait(TIMEOUT_S)
            finally:
                if proc.poll() is None:
                    kill_tree(proc.pid)
                    proc.wait()
    assert code == 0, err.read_text()[-2000:]
    no_traceback(err.read_text())


#: Runs sys.argv[2:] for at most sys.argv[1] seconds as a subreaper, so every process it starts stays below it even
#: when its parent exits (a loop of `codexr app-server`s is a chain whose head keeps exiting). Past the time, or if
#: anything is left running when the command ends, all of it is stopped, then killed; exit 124, or 125.
GUARD = r"""
import ctypes, os, signal, subprocess, sys

ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER

def below():
    found, new = set(), {os.getpid()}
    while new:
        for pid in new - {os.getpid()}:
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                pass
        found |= new
        new = set()
        for entry in os.listdir("/proc"):
            try:
                stat = open(f"/proc/{entry}/stat").read()
                if int(stat.rpartition(")")[2].split()[1]) in found and int(entry) not in found \
                        and stat.rpartition(")")[2].split()[0] != "Z":
                    new.add(int(entry))
            except (OSError, ValueError, IndexError):
                pass
    return found - {os.getpid()}

def reap():
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG) == (0, 0):
                return
        except ChildProcessError:
            return

proc = subprocess.Popen(sys.argv[2:])
try:
    code = proc.wait(float(sys.argv[1]))
except subprocess.TimeoutExpired:
    code = 124
reap()
left = below()
for pid in left:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
while True:
    try:
        os.waitpid(-1, 0)
    except ChildProcessError:
        break
if left and code != 124:
    print(f"guard: {len(left)} processes left running", file=sys.stderr)
    code = 125
sys.exit(code)
"""


def run_shim(argv: list[str], env: dict[str, str], cwd: Path, stdin: bytes = b"") -> tuple[int, str]:
    """Run the shim under GUARD; its exit status and stderr (a run that loops fails the test, stopped)."""
    res = subprocess.run([sys.executable, "-c", GUARD, str(TIMEOUT_S), *argv], cwd=cwd, env=env, input=stdin,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=TIMEOUT_S * 2)
    err = res.stderr.decode(errors="replace")
    assert res.returncode != 124, f"{argv} still ran after {TIMEOUT_S} s (a loop): {err[-2000:]}"
    assert res.returncode != 125, f"{argv} left processes running: {err[-2000:]}"
    return res.returncode, err


@pytest.mark.parametrize(("command", "setting", "runs"), [
    ("--version", "env", "exec"),
    ("--version", "env", "child"),
    ("app-server", "env", "exec"),
    ("app-server", "config", "exec"),
])
def test_a_codex_setting_that_leads_back_to_the_shim_is_named_in_one_line(
        model: ScriptedModel, tmp_path: Path, command: str, setting: str, runs: str) -> None:
    """`codex` a wrapper script that runs `codexr-codex` again (by exec, or as its child), named by
    `CODEXR_CODEX_BIN` or by `file_snapshots.codex_bin`: the shim, or `codexr app-server` behind it, would start it
    forever; instead one line names that setting, and nothing is left running."""
    wrapper = tmp_path / "bin" / "codex"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\n{"exec " if runs == "exec" else ""}"{SHIM}" "$@"\n')
    wrapper.chmod(0o755)
    ws = tmp_path / "ws"
    ws.mkdir()
    env = codex_env(model, tmp_path)
    if setting == "env":
        env["CODEXR_CODEX_BIN"] = str(wrapper)
        named = f"CODEXR_CODEX_BIN={wrapper}"
    else:
        with (tmp_path / "home" / "config.toml").open("a") as fh:
            fh.write(f'\n[file_snapshots]\ncodex_bin = "{wrapper}"\n')
        named = f'file_snapshots.codex_bin = "{wrapper}"'
    code, err = run_shim([str(SHIM), command], env, ws, json.dumps(initialize(1)).encode() + b"\n")
    lines = [line for line in err.splitlines() if "codexr-codex" in line]
    assert lines == [f"codexr-codex: error: {named} leads back to codexr-codex, which would start itself forever: "
                     "point it at the real Codex binary"], err
    no_traceback(err)
    if command == "--version":
        assert code == 2


@pytest.mark.parametrize("how", ["shim", "codexr"])
def test_the_shim_itself_is_never_the_codex_codexr_runs(model: ScriptedModel, tmp_path: Path, how: str) -> None:
    """`CODEXR_CODEX_BIN` naming `codexr-codex` itself: `codexr app-server` (reached through the shim or not) would
    start the shim as its app-server, which starts `codexr app-server` again; it says so in one line, exit 2."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = codex_env(model, tmp_path, CODEXR_CODEX_BIN=str(SHIM))
    argv = [str(SHIM), "app-server"] if how == "shim" else [sys.executable, "-m", "app.cli", "app-server"]
    code, err = run_shim(argv, env, ws, json.dumps(initialize(1)).encode() + b"\n")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert f"CODEXR_CODEX_BIN={SHIM}: that is codexr-codex" in err, err


def test_the_shim_takes_codex_app_server_flags_after_the_subcommand_as_the_ide_gives_them(
        model: ScriptedModel, tmp_path: Path) -> None:
    """The IDE extension starts `codex app-server --analytics-default-enabled` (Codex's help: "first-party use cases
    like the VSCode IDE extension"), and other clients put `-c k=v` after `app-server`: through `codexr-codex` each
    was "unrecognized arguments" and the client had no app-server at all. Now `-c`, `--enable`, `--disable` count
    as before the subcommand, Codex's own app-server flags reach the real app-server, and the turn is recorded."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = codex_env(model, tmp_path)
    model.script("ide prompt", [add_file("ide.txt", "from the ide\n"), message("done")])
    argv = [str(SHIM), "app-server", "-c", 'model="gpt-5.5"', "--disable", "apps", "--analytics-default-enabled",
            "--strict-config"]
    with peer(argv, ws, env, tmp_path / "shim.err") as client:
        thread = started_thread(client, ws)
        prompt(client, 3, thread, "ide prompt")
        codex = [pid for pid in descendants({client.proc.pid})
                 if Path(f"/proc/{pid}/exe").resolve().name == PINNED.name]
        assert len(codex) == 1, descendants({client.proc.pid})
        real = Path(f"/proc/{codex[0]}/cmdline").read_bytes().split(b"\0")[:-1]
        assert client.close() == 0
        no_traceback(client.stderr())
    app_server = real.index(b"app-server")
    assert b"--analytics-default-enabled" in real[app_server:] and b"--strict-config" in real[app_server:], real
    assert b"features.apps=false" in real[:app_server], real
    requests = [r for r in model.model_requests if last_user_text(r) == "ide prompt"]
    assert requests and all(r["model"] == "gpt-5.5" for r in requests), [r.get("model") for r in requests]
    assert (ws / "ide.txt").read_text() == "from the ide\n"
    sidecar = tmp_path / "home" / "file_snapshots" / "refs" / "threads" / f"{thread}.json"
    turns = json.loads(sidecar.read_text())["turns"]
    assert len(turns) == 1 and turns[0].get("pre") and turns[0].get("post"), turns


def test_app_server_refuses_stdio_beside_listen_as_codex_does(model: ScriptedModel, tmp_path: Path) -> None:
    """`--stdio` is `--listen stdio://`; with a --listen too, one line and exit 2, as `codex app-server` refuses it."""
    ws = tmp_path / "ws"
    ws.mkdir()
    res = subprocess.run([sys.executable, "-m", "app.cli", "app-server", "--stdio", "--listen", "ws://127.0.0.1:0"],
                         cwd=ws, env=codex_env(model, tmp_path), stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=TIMEOUT_S)
    assert res.returncode == 2 and res.stderr.splitlines() == [
        "codexr: error: --stdio cannot be used with --listen: both choose the transport (--stdio is --listen "
        "stdio://)"], res.stderr


def test_the_shim_hands_codex_app_server_tools_to_the_real_codex(model: ScriptedModel, tmp_path: Path) -> None:
    """`app-server generate-json-schema` (and generate-ts, daemon, help) serve no protocol: through the shim they are
    the real Codex's, as every other command (`codexr app-server` took the word for an unknown argument)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    res = subprocess.run([str(SHIM), "app-server", "generate-json-schema", "--out", str(tmp_path / "schema")],
                         cwd=ws, env=codex_env(model, tmp_path), stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "schema" / "codex_app_server_protocol.v2.schemas.json").is_file(), res.stderr


def test_app_server_proxy_is_refused_in_one_line_by_the_shim_and_by_codexr(model: ScriptedModel,
                                                                           tmp_path: Path) -> None:
    """`codex app-server proxy` bridges stdio to Codex's app-server daemon, whose turns codexr cannot snapshot: a
    client that starts it through the shim gets one line saying so and what to start instead (it was "unrecognized
    arguments: proxy"; handing it to the real Codex would run every turn without a snapshot, silently)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = codex_env(model, tmp_path)
    sent = len(model.model_requests)  # the module's model: earlier tests' requests are there
    for argv, who, start in (([str(SHIM), "app-server", "proxy", "--sock", str(tmp_path / "s")], "codexr-codex",
                              "codexr-codex app-server"),
                             ([sys.executable, "-m", "app.cli", "app-server", "proxy"], "codexr", "codexr app-server")):
        res = subprocess.run(argv, cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=TIMEOUT_S)
        assert res.returncode == 2 and res.stderr.splitlines() == [
            f"{who}: error: `app-server proxy` connects to Codex's app-server daemon, whose turns codexr cannot "
            f"snapshot: start `{start}` (codexr's app-server, on stdio) instead, or the real `codex` to use the "
            "daemon without rewind"], res.stderr
    assert len(model.model_requests) == sent, "nothing reached the model"
    res = subprocess.run([sys.executable, "-m", "app.cli", "app-server", "generate-ts"], cwd=ws, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 2 and res.stderr.splitlines() == [
        "codexr: error: `app-server generate-ts` serves no protocol, so codexr has nothing to add: run `codex "
        "app-server generate-ts`"], res.stderr
