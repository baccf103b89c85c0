"""The scripted Responses-API server, on its own over HTTP and end to end against the real Codex app-server."""

from __future__ import annotations

import json
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from openai_codex.client import CodexClient, CodexConfig

from app.codex.scripted_model import (
    GUARDIAN_MODEL,
    ScriptedModel,
    add_file,
    delete_file,
    fail,
    last_user_text,
    message,
    message_texts,
    move_file,
    patch,
    pause,
    reasoning,
    shell,
    shell_escalated,
    tool_outputs,
    update_file,
    user_texts,
    write_codex_home,
)

TURN_TIMEOUT_S = 20.0

# ------------------------------------------------------------------------------ HTTP-level (no Codex)


def _user(text: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def _env_ctx() -> dict[str, Any]:
    return _user("<environment_context>\n  <cwd>/x</cwd>\n</environment_context>")


def _post(model: ScriptedModel, body: dict[str, Any]) -> tuple[int, str, list[tuple[str, dict[str, Any]]]]:
    req = urllib.request.Request(model.base_url + "/responses", data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            ctype, raw = resp.headers["content-type"], resp.read().decode()
            status = resp.status
    except urllib.error.HTTPError as err:
        return err.code, err.headers["content-type"], []
    events = []
    for frame in raw.split("\n\n"):
        if frame.strip():
            head, data = frame.split("\n", 1)
            assert head.startswith("event: ") and data.startswith("data: ")
            doc = json.loads(data[len("data: "):])
            assert doc["type"] == head[len("event: "):]
            events.append((doc["type"], doc))
    return status, ctype, events


def _done_items(events: list[tuple[str, dict[str, Any]]]) -> list[dict[str, Any]]:
    return [d["item"] for t, d in events if t == "response.output_item.done"]


def _body(*items: dict[str, Any], model: str = "gpt-5.5") -> dict[str, Any]:
    return {"model": model, "stream": True, "input": list(items)}


def _output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


def test_http_rounds_triggers_and_fallback() -> None:
    with ScriptedModel() as m:
        m.script("make", [reasoning("plan"), add_file("a.txt", "x\n"), shell("cat a.txt"), message("made")])
        m.script("make it loud", [message("LOUD")])
        status, ctype, ev = _post(m, _body(_env_ctx(), _user("please make a file")))
        assert status == 200 and ctype == "text/event-stream"
        assert ev[0][0] == "response.created" and ev[-1][0] == "response.completed"
        usage = ev[-1][1]["response"]["usage"]
        assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
        assert usage["input_tokens_details"] == {"cached_tokens": 0}
        rs, call = _done_items(ev)
        assert rs["type"] == "reasoning" and rs["summary"][0]["text"] == "plan"
        assert call["type"] == "custom_tool_call" and call["name"] == "apply_patch"
        assert call["input"] == "*** Begin Patch\n*** Add File: a.txt\n+x\n*** End Patch\n"
        # one tool output after the last user message -> round 1 (the shell call)
        _, _, ev = _post(m, _body(_user("please make a file"), _output(call["call_id"])))
        (sh,) = _done_items(ev)
        assert sh["type"] == "function_call" and json.loads(sh["arguments"]) == {"cmd": "cat a.txt", "login": False}
        _, _, ev = _post(m, _body(_user("please make a file"), _output("c1"), _output("c2")))
        (msg,) = _done_items(ev)
        assert msg["content"][0]["text"] == "made"
        deltas = "".join(d["delta"] for t, d in ev if t == "response.output_text.delta")
        assert deltas == "made" and any(t == "response.output_item.added" for t, _ in ev)
        # past the end of the script
        _, _, ev = _post(m, _body(_user("please make a file"), *[_output(f"c{i}") for i in range(3)]))
        assert _done_items(ev)[0]["content"][0]["text"] == "done"
        # the longest trigger wins; tool outputs before the last user message do not count
        _, _, ev = _post(m, _body(_user("make"), _output("old"), _user("now make it loud")))
        assert _done_items(ev)[0]["content"][0]["text"] == "LOUD"
        _, _, ev = _post(m, _body(_user("something else entirely")))
        assert _done_items(ev)[0]["content"][0]["text"] == "ok: something else entirely"
        assert len(m.requests) == 6 and last_user_text(m.requests[0]) == "please make a file"
        assert user_texts(m.requests[4]) == ["make", "now make it loud"]
        assert tool_outputs(m.requests[2])[1]["call_id"] == "c2"


def test_http_ids_unique_and_fail_steps() -> None:
    with ScriptedModel() as m:
        m.script("boom", [fail(500)])
        m.script("flaky", [fail(503, times=2), pause(0.01), message("back")])
        m.script("", [shell_escalated("touch /x", "needs root"), message("m")])
        assert _post(m, _body(_user("boom")))[0] == 500
        assert _post(m, _body(_user("boom")))[0] == 500  # retries of the same round keep failing
        meta = {"client_metadata": {"turn_id": "t1"}}
        assert _post(m, {**_body(_user("flaky")), **meta})[0] == 503
        assert _post(m, {**_body(_user("flaky")), **meta})[0] == 503
        status, _, ev = _post(m, {**_body(_user("flaky")), **meta})
        assert status == 200 and _done_items(ev)[0]["content"][0]["text"] == "back"
        assert _post(m, {**_body(_user("flaky")), "client_metadata": {"turn_id": "t2"}})[0] == 503
        _, _, ev = _post(m, _body(_user("catch-all")))
        args = json.loads(_done_items(ev)[0]["arguments"])
        assert args == {"cmd": "touch /x", "sandbox_permissions": "require_escalated", "justification": "needs root",
                        "login": False}
        _, _, ev = _post(m, _body(_user("boom"), model=GUARDIAN_MODEL))
        assert json.loads(_done_items(ev)[0]["content"][0]["text"]) == {"outcome": "deny"}
        assert len(m.model_requests) == len(m.requests) - 1
        ids = [item.get("id") or item.get("call_id") for r in range(2) for item in
               _done_items(_post(m, _body(_user("catch-all"), *[_output("x")] * r))[2])]
        ids += [d["response"]["id"] for t, d in _post(m, _body(_user("zzz")))[2] if t == "response.created"]
        assert len(set(ids)) == len(ids) == 3
        req = urllib.request.Request(m.base_url + "/models")
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(req, timeout=5)
    with pytest.raises(RuntimeError):
        _ = m.base_url


def test_write_codex_home(tmp_path: Path) -> None:
    env = write_codex_home(tmp_path / "h", "http://127.0.0.1:1/v1", approvals_reviewer="user")
    assert env == {"CODEX_HOME": str(tmp_path / "h"), "MOCK_KEY": env["MOCK_KEY"]} and env["MOCK_KEY"]
    cfg = tomllib.loads((tmp_path / "h" / "config.toml").read_text())
    assert cfg["model"] == "gpt-5.5" and cfg["model_provider"] == "mock" and cfg["approvals_reviewer"] == "user"
    assert cfg["approval_policy"] == "never" and cfg["sandbox_mode"] == "danger-full-access"
    assert cfg["model_providers"]["mock"] == {
        "name": "mock", "base_url": "http://127.0.0.1:1/v1", "wire_api": "responses", "env_key": "MOCK_KEY",
        "request_max_retries": 0, "stream_max_retries": 1, "stream_idle_timeout_ms": 20000}
    with pytest.raises(ValueError):
        write_codex_home(tmp_path / "h2", "http://x/v1", approval_policy="untrusted")


# ------------------------------------------------------------------------------ end to end (real Codex)

Handler = Callable[[str, dict[str, Any] | None], dict[str, Any]]


@dataclass
class TurnRun:
    """Everything one turn produced, as plain camelCase dicts."""

    turn_id: str
    events: list[tuple[str, dict[str, Any]]]

    @property
    def completed(self) -> dict[str, Any]:
        """The ``turn/completed`` turn object."""
        return next(p["turn"] for m, p in self.events if m == "turn/completed")

    @property
    def status(self) -> str:
        """Final turn status."""
        return str(self.completed["status"])

    def items(self, kind: str) -> list[dict[str, Any]]:
        """Completed items of one type, in order."""
        return [p["item"] for m, p in self.events if m == "item/completed" and p["item"]["type"] == kind]

    def of(self, method: str) -> list[dict[str, Any]]:
        """Payloads of one notification method."""
        return [p for m, p in self.events if m == method]


@dataclass
class Harness:
    """A scripted model, a temp CODEX_HOME and a started+initialized low-level Codex client."""

    model: ScriptedModel
    ws: Path
    client: CodexClient
    approvals: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def thread(self, **params: Any) -> str:
        """Start a thread (defaults: never ask, no sandbox) and return its id."""
        base = {"cwd": str(self.ws), "approvalPolicy": "never", "sandbox": "danger-full-access"}
        return str(self.client.thread_start({**base, **params}).thread.id)

    def run(self, thread_id: str, text: str, params: dict[str, Any] | None = None,
            on_event: Callable[[str, dict[str, Any]], None] | None = None) -> TurnRun:
        """Run one turn to completion (bounded by TURN_TIMEOUT_S); ``on_event`` sees each notification."""
        turn_id = str(self.client.turn_start(thread_id, text, params).turn.id)
        events: list[tuple[str, dict[str, Any]]] = []
        errors: list[BaseException] = []

        def read() -> None:
            try:
                while True:
                    n = self.client.next_turn_notification(turn_id)
                    payload = n.payload.model_dump(by_alias=True, mode="json") if hasattr(n.payload, "model_dump") \
                        else dict(n.payload.params)
                    events.append((n.method, payload))
                    if on_event is not None:
                        on_event(n.method, payload)
                    if n.method == "turn/completed":
                        return
            except BaseException as exc:  # surfaced below
                errors.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(TURN_TIMEOUT_S)
        if reader.is_alive():
            tail = self.client._stderr_tail()
            raise AssertionError(f"turn {turn_id} did not complete in {TURN_TIMEOUT_S}s; events="
                                 f"{[m for m, _ in events]}; stderr tail:\n{tail}")
        if errors:
            raise errors[0]
        return TurnRun(turn_id, events)


@pytest.fixture
def harness_factory(tmp_path: Path) -> Iterator[Callable[[Handler | None], Harness]]:
    """Build harnesses (one per call); everything is closed at teardown."""
    cleanups: list[Callable[[], None]] = []

    def make(decide: Handler | None = None) -> Harness:
        model = ScriptedModel().start()
        cleanups.append(model.stop)
        ws = tmp_path / f"ws{len(cleanups)}"
        ws.mkdir()
        env = write_codex_home(tmp_path / f"codex-home{len(cleanups)}", model.base_url)
        approvals: list[tuple[str, dict[str, Any]]] = []

        def handler(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
            try:  # an exception here would kill the SDK's reader thread
                approvals.append((method, params or {}))
                return decide(method, params) if decide else {"decision": "decline"}
            except Exception:
                return {"decision": "decline"}

        client = CodexClient(CodexConfig(cwd=str(ws), env=env), approval_handler=handler)
        cleanups.append(client.close)
        client.start()
        client.initialize()
        return Harness(model, ws, client, approvals)

    yield make
    for cleanup in reversed(cleanups):
        cleanup()


@pytest.fixture
def h(harness_factory: Callable[[Handler | None], Harness]) -> Harness:
    """A harness whose approval handler declines everything."""
    return harness_factory(None)


def test_add_file_shell_and_streamed_message(h: Harness) -> None:
    h.model.script("make notes", [reasoning("thinking it over"), add_file("notes.txt", "alpha\nbeta\n"),
                                  shell("cat notes.txt"), message("notes are ready, see notes.txt")])
    tid = h.thread()
    run = h.run(tid, "please make notes")
    assert run.status == "completed", run.completed
    assert (h.ws / "notes.txt").read_text() == "alpha\nbeta\n"
    (fc,) = run.items("fileChange")
    assert fc["status"] == "completed" and fc["id"].startswith("call_")
    assert fc["changes"] == [{"path": str(h.ws / "notes.txt"), "kind": {"type": "add"}, "diff": "alpha\nbeta\n"}]
    (cmd,) = run.items("commandExecution")
    assert cmd["exitCode"] == 0 and cmd["aggregatedOutput"] == "alpha\nbeta\n" and cmd["status"] == "completed"
    (rs,) = run.items("reasoning")
    assert rs["summary"] == ["thinking it over"]
    (msg,) = run.items("agentMessage")
    assert msg["text"] == "notes are ready, see notes.txt" and msg["id"].startswith("msg_")
    deltas = run.of("item/agentMessage/delta")
    assert len(deltas) > 1 and "".join(d["delta"] for d in deltas) == msg["text"]
    assert all(d["itemId"] == msg["id"] for d in deltas)
    assert run.of("turn/diff/updated")[-1]["diff"].endswith("+alpha\n+beta\n")
    # three model round-trips: prompt, after the patch, after the command
    assert [len(tool_outputs(r)) for r in h.model.requests] == [0, 1, 2]
    assert all(last_user_text(r) == "please make notes" for r in h.model.requests)
    assert "Success. Updated the following files:\nA notes.txt" in tool_outputs(h.model.requests[1])[0]["output"]
    # an unscripted prompt is echoed, and the model sees the whole conversation
    run2 = h.run(tid, "what now?")
    assert run2.status == "completed" and run2.items("agentMessage")[0]["text"] == "ok: what now?"
    assert user_texts(h.model.requests[-1]) == ["please make notes", "what now?"]


def test_update_move_delete_and_shell_files(h: Harness) -> None:
    (h.ws / "a.txt").write_text("one\ntwo\nthree\n")
    (h.ws / "b.txt").write_text("keep me\n")
    (h.ws / "c.txt").write_text("doomed\n")
    (h.ws / "gone.txt").write_text("bye\n")
    h.model.script("reshape", [
        update_file("a.txt", "two", "TWO"),
        move_file("b.txt", "sub/b2.txt", "keep me"),
        delete_file("c.txt"),
        patch("*** Begin Patch\n*** Add File: d.txt\n+d\n*** Update File: a.txt\n@@\n-one\n+ONE\n*** End Patch"),
        shell("echo hi > made.txt && rm gone.txt"),
        message("reshaped"),
    ])
    run = h.run(h.thread(), "reshape the files")
    assert run.status == "completed", run.completed
    assert (h.ws / "a.txt").read_text() == "ONE\nTWO\nthree\n"
    assert (h.ws / "sub" / "b2.txt").read_text() == "keep me\n" and not (h.ws / "b.txt").exists()
    assert not (h.ws / "c.txt").exists() and (h.ws / "d.txt").read_text() == "d\n"
    assert (h.ws / "made.txt").read_text() == "hi\n" and not (h.ws / "gone.txt").exists()
    changes = [fc["changes"] for fc in run.items("fileChange")]
    assert all(fc["status"] == "completed" for fc in run.items("fileChange"))
    assert changes[0] == [{"path": str(h.ws / "a.txt"), "kind": {"type": "update", "move_path": None},
                           "diff": "@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"}]
    assert changes[1][0]["kind"] == {"type": "update", "move_path": str(h.ws / "sub" / "b2.txt")}
    assert changes[2] == [{"path": str(h.ws / "c.txt"), "kind": {"type": "delete"}, "diff": "doomed\n"}]
    assert sorted(c["kind"]["type"] for c in changes[3]) == ["add", "update"]
    (cmd,) = run.items("commandExecution")
    assert cmd["exitCode"] == 0 and cmd["status"] == "completed"


def test_provider_failure_fails_the_turn_quickly(h: Harness) -> None:
    h.model.script("explode", [fail(500)])
    h.model.script("wobble", [fail(503, times=1), message("recovered")])
    tid = h.thread()
    started = time.monotonic()
    run = h.run(tid, "please explode")
    assert time.monotonic() - started < 5
    assert run.status == "failed" and run.completed["error"]["message"]
    assert run.completed["items"] == []
    assert [e["willRetry"] for e in run.of("error")] == [True, False]  # stream_max_retries = 1
    assert len(h.model.requests) == 2 and last_user_text(h.model.requests[0]) == "please explode"
    # a transient failure is retried within the same turn and the turn recovers
    run2 = h.run(tid, "wobble a bit")
    assert run2.status == "completed" and run2.items("agentMessage")[0]["text"] == "recovered"
    assert [e["willRetry"] for e in run2.of("error")] == [True]
    assert run2.of("error")[0]["error"]["codexErrorInfo"] == {"responseStreamDisconnected": {"httpStatusCode": 503}}


def test_command_approvals_reach_the_handler(harness_factory: Callable[[Handler | None], Harness]) -> None:
    def decide(method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        return {"decision": "accept" if "accepted" in (params or {}).get("command", "") else "decline"}

    h = harness_factory(decide)
    h.model.script("write things", [shell("echo no > declined.txt"), shell("echo yes > accepted.txt"),
                                    shell_escalated("echo up > escalated.txt", "needs the network"), message("fin")])
    tid = h.thread(approvalPolicy="untrusted", approvalsReviewer="user", sandbox="workspace-write")
    run = h.run(tid, "write things")
    assert run.status == "completed", run.completed
    assert [m for m, _ in h.approvals] == ["item/commandExecution/requestApproval"] * 3
    first, _, third = (p for _, p in h.approvals)
    assert first["command"] == "/bin/bash -c 'echo no > declined.txt'" and first["cwd"] == str(h.ws)
    assert first["threadId"] == tid and first["turnId"] == run.turn_id and first["itemId"].startswith("call_")
    assert third["reason"] == "needs the network"
    statuses = {c["id"]: c["status"] for c in run.items("commandExecution")}
    assert [statuses[p["itemId"]] for _, p in h.approvals] == ["declined", "completed", "declined"]
    assert not (h.ws / "declined.txt").exists() and not (h.ws / "escalated.txt").exists()
    assert (h.ws / "accepted.txt").read_text() == "yes\n"
    assert "rejected by user" in tool_outputs(h.model.requests[1])[0]["output"]


def test_guardian_requests_do_not_break_the_server(h: Harness) -> None:
    h.model.script("escalate", [shell_escalated("echo x > g.txt", "please"), message("ok then")])
    tid = h.thread(approvalPolicy="on-request", approvalsReviewer="auto_review", sandbox="workspace-write")
    run = h.run(tid, "escalate now")
    assert run.status == "completed" and h.approvals == []
    assert [r["model"] for r in h.model.requests].count(GUARDIAN_MODEL) == 1
    assert run.of("item/autoApprovalReview/completed")[0]["review"]["status"] == "denied"
    assert run.items("commandExecution")[0]["status"] == "declined" and not (h.ws / "g.txt").exists()


def test_fork_drops_later_turns_from_the_context(h: Harness) -> None:
    tid = h.thread()
    first = h.run(tid, "first turn alpha")
    h.run(tid, "second turn beta")
    fork = h.client.thread_fork(tid, {"lastTurnId": first.turn_id})
    run = h.run(str(fork.thread.id), "third turn gamma")
    assert run.status == "completed"
    assert user_texts(h.model.requests[-1]) == ["first turn alpha", "third turn gamma"]
    assert user_texts(h.model.requests[-2]) == ["first turn alpha", "second turn beta"]


def test_interrupt_while_the_model_is_slow(h: Harness) -> None:
    h.model.script("slow", [pause(5), message("too late")])
    tid = h.thread()

    def interrupt(method: str, payload: dict[str, Any]) -> None:
        if method == "item/completed" and payload["item"]["type"] == "userMessage":
            h.client.turn_interrupt(tid, payload["turnId"])

    started = time.monotonic()
    run = h.run(tid, "be slow", on_event=interrupt)
    assert run.status == "interrupted" and time.monotonic() - started < 3
    assert run.items("agentMessage") == []
    run2 = h.run(tid, "after the interrupt")
    assert run2.status == "completed"
    # Codex adds a "<turn_aborted>" user message to the context; user_texts() leaves it out
    assert user_texts(h.model.requests[-1]) == ["be slow", "after the interrupt"]
    assert any("<turn_aborted>" in t for t in message_texts(h.model.requests[-1], "user"))
