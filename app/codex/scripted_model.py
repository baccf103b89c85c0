"""A scripted, offline Responses-API server that drives the real Codex agent in tests and the offline demo.

Codex posts the whole conversation to ``POST /v1/responses`` on every model round-trip. This server picks a
script by the text of the last user message (the longest registered trigger contained in it wins; the empty
trigger ``""`` is a catch-all), then picks the step by counting the tool outputs that follow that user message:
the first request of a turn gets round 0, the request after the first tool ran gets round 1, and so on.

Each round is one action (a patch, a shell command, a final message or a failure) optionally preceded by
``reasoning(...)``, ``pause(...)``, ``usage(...)`` and transient ``fail(..., times=n)`` steps that ride along
with it. A final ``message`` ends the turn; past the end of the script the server answers ``"done"``. Unmatched
prompts get ``"ok: <first 60 chars of the prompt>"``.

Codex's own compaction request (``/compact``: no tools, its checkpoint prompt as the last user message) is never
matched against the scripts: it gets ``compaction_summary()`` of the user's prompts, so a test can see that the next
request carries that summary instead of the conversation. ``review(...)`` is the JSON a code review answers with.

A ``Respond`` step (``responder()``) decides a turn's steps from the prompt text when the turn begins: the
offline demo scripts it as the catch-all (``model.script("", [responder()])``) so free text gets a useful answer
(vocabulary in ``RESPONDER_HELP``: create / edit / delete / run / list, anything else a small multi-file edit).

Usage::

    with ScriptedModel() as model:
        model.script("make notes", [add_file("notes.txt", "hello\\n"), shell("cat notes.txt"), message("made it")])
        env = write_codex_home(tmp / "codex-home", model.base_url)
        ...  # start Codex with env, run a turn whose prompt contains "make notes"
        assert "make notes" in last_user_text(model.requests[0])
"""

from __future__ import annotations

import json
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

__all__ = [
    "GUARDIAN_MODEL",
    "MOCK_KEY_ENV",
    "RESPONDER_HELP",
    "Fail",
    "Message",
    "Patch",
    "Pause",
    "Reasoning",
    "Respond",
    "ScriptedModel",
    "Shell",
    "Step",
    "Usage",
    "add_file",
    "compaction_summary",
    "delete_file",
    "fail",
    "last_user_text",
    "message",
    "message_texts",
    "move_file",
    "patch",
    "pause",
    "reasoning",
    "responder",
    "responder_steps",
    "review",
    "shell",
    "shell_escalated",
    "tool_outputs",
    "update_file",
    "usage",
    "user_texts",
    "write_codex_home",
]

GUARDIAN_MODEL = "codex-auto-review"
MOCK_KEY_ENV = "MOCK_KEY"
#: How Codex's compaction request begins (its checkpoint prompt, sent as the last user message with no tools).
COMPACTION_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION"
SUMMARY_HEAD = "Summary of the conversation so far (scripted):"
_TOOL_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
# User-role messages Codex writes itself (environment, AGENTS.md, skills ...) start with one of these.
_INJECTED_PREFIXES = ("<environment_context", "<user_instructions", "<skill", "<user_shell_command", "<turn_aborted",
                      "# AGENTS.md instructions", "<INSTRUCTIONS>", "<permissions", "<collaboration_mode")


# --------------------------------------------------------------------------------------------- steps


@dataclass(frozen=True)
class Patch:
    """An ``apply_patch`` freeform tool call carrying a whole ``*** Begin Patch`` document."""

    text: str


@dataclass(frozen=True)
class Shell:
    """An ``exec_command`` function call."""

    cmd: str
    sandbox_permissions: str | None = None
    justification: str | None = None
    workdir: str | None = None


@dataclass(frozen=True)
class Message:
    """A final assistant message (streamed as deltas); it ends the turn."""

    text: str


@dataclass(frozen=True)
class Reasoning:
    """A reasoning item with one summary line, sent in the same response as the next action."""

    summary: str


@dataclass(frozen=True)
class Fail:
    """Answer with an HTTP error: forever at this round (``times=None``) or for the first ``times`` attempts."""

    status: int = 500
    times: int | None = None


@dataclass(frozen=True)
class Pause:
    """Sleep before answering the round it precedes (keeps a turn busy, e.g. to test interrupts)."""

    seconds: float


@dataclass(frozen=True)
class Usage:
    """Report ``input_tokens`` for the round it precedes, as a long conversation would (context-window displays)."""

    input_tokens: int


@dataclass(frozen=True)
class Respond:
    """Decide the turn's steps from its prompt and the tool outputs so far (asked again every round).

    ``decide`` must return the same steps for the rounds already played; only later rounds may depend on
    what the tools returned (e.g. a final message that reports a failed patch).
    """

    decide: Callable[[str, list[dict[str, Any]]], Sequence[Patch | Shell | Message | Reasoning | Fail | Pause]]


Step = Patch | Shell | Message | Reasoning | Fail | Pause | Usage | Respond


def patch(text: str) -> Patch:
    """A raw apply_patch call; ``text`` must be a full ``*** Begin Patch ... *** End Patch`` document."""
    return Patch(text if text.endswith("\n") else text + "\n")


def _lines(content: str) -> str:
    return "".join(f"+{line}\n" for line in content.splitlines())


def add_file(path: str, content: str) -> Patch:
    """Create ``path`` (relative to the turn cwd) with ``content``."""
    return Patch(f"*** Begin Patch\n*** Add File: {path}\n{_lines(content)}*** End Patch\n")


def update_file(path: str, old_line: str, new_line: str) -> Patch:
    """Replace one existing line of ``path``."""
    return Patch(f"*** Begin Patch\n*** Update File: {path}\n@@\n-{old_line}\n+{new_line}\n*** End Patch\n")


def delete_file(path: str) -> Patch:
    """Delete ``path``."""
    return Patch(f"*** Begin Patch\n*** Delete File: {path}\n*** End Patch\n")


def move_file(src: str, dst: str, old_line: str, new_line: str | None = None) -> Patch:
    """Move ``src`` to ``dst``; ``old_line`` must exist in it (kept as is unless ``new_line`` is given).

    apply_patch rejects an Update hunk without changes, so a move needs one line to anchor on.
    """
    new = old_line if new_line is None else new_line
    return Patch(f"*** Begin Patch\n*** Update File: {src}\n*** Move to: {dst}\n@@\n-{old_line}\n+{new}\n"
                 "*** End Patch\n")


def shell(cmd: str, *, workdir: str | None = None) -> Shell:
    """Run ``cmd`` through ``exec_command`` (bash, not a login shell, in the turn cwd)."""
    return Shell(cmd, workdir=workdir)


def shell_escalated(cmd: str, justification: str) -> Shell:
    """Run ``cmd`` asking to leave the sandbox (``sandbox_permissions: require_escalated``)."""
    return Shell(cmd, sandbox_permissions="require_escalated", justification=justification)


def message(text: str) -> Message:
    """The final assistant message of the turn."""
    return Message(text)


def reasoning(summary: str) -> Reasoning:
    """A reasoning summary sent ahead of the next action."""
    return Reasoning(summary)


def fail(status: int = 500, *, times: int | None = None) -> Fail:
    """Fail the request at this round with HTTP ``status`` (every retry, or only the first ``times`` attempts)."""
    return Fail(status, times)


def review(explanation: str, findings: Sequence[tuple[str, str, str, int]] = (),
           correctness: str = "patch is correct") -> Message:
    """A code review's answer: the JSON Codex's review mode expects (findings as (title, body, path, line))."""
    doc = {"findings": [{"title": title, "body": body, "confidence_score": 0.8, "priority": 1,
                         "code_location": {"absolute_file_path": path, "line_range": {"start": line, "end": line}}}
                        for title, body, path, line in findings],
           "overall_correctness": correctness, "overall_explanation": explanation, "overall_confidence_score": 0.8}
    return Message(json.dumps(doc))


def compaction_summary(body: dict[str, Any]) -> str:
    """What the scripted model answers to Codex's compaction request: the user's prompts so far, one a line."""
    asked = [t for t in user_texts(body) if not t.startswith(COMPACTION_PROMPT)]
    return "\n".join([SUMMARY_HEAD, *(f"- the user asked: {' '.join(t.split())[:80]}" for t in asked)])


def pause(seconds: float) -> Pause:
    """Delay the next round's answer by ``seconds``."""
    return Pause(seconds)


def usage(input_tokens: int) -> Usage:
    """Say the next round's request held ``input_tokens`` (its ``response.completed`` usage), whatever its size."""
    return Usage(input_tokens)


@dataclass(frozen=True)
class _Round:
    """What one model request of a turn receives: prefix steps plus exactly one action."""

    prefix: tuple[Reasoning | Pause | Fail | Usage, ...]
    action: Patch | Shell | Message | Fail | Respond


def _rounds(steps: Sequence[Step]) -> list[_Round]:
    rounds: list[_Round] = []
    prefix: list[Reasoning | Pause | Fail | Usage] = []
    if any(isinstance(step, Respond) for step in steps):
        if len(steps) != 1:
            raise TypeError("a Respond step decides the whole turn: script it alone")
        return [_Round((), steps[0])]  # type: ignore[arg-type]
    for step in steps:
        if isinstance(step, Reasoning | Pause | Usage) or (isinstance(step, Fail) and step.times is not None):
            prefix.append(step)
            continue
        if not isinstance(step, Patch | Shell | Message | Fail):
            raise TypeError(f"not a script step: {step!r}")
        rounds.append(_Round(tuple(prefix), step))
        prefix = []
    if prefix:
        rounds.append(_Round(tuple(prefix), Message("done")))
    return rounds


# ------------------------------------------------------------------------------------- request helpers


def _text_of(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))


def message_texts(body: dict[str, Any], role: str | None = None) -> list[str]:
    """Texts of the ``message`` items in a request's ``input`` (optionally only one role)."""
    return [_text_of(i) for i in body.get("input", []) if isinstance(i, dict) and i.get("type", "message") == "message"
            and (role is None or i.get("role") == role)]


def _is_real_user_message(item: Any) -> bool:
    if not isinstance(item, dict) or item.get("type", "message") != "message" or item.get("role") != "user":
        return False
    return not _text_of(item).lstrip().startswith(_INJECTED_PREFIXES)


def user_texts(body: dict[str, Any]) -> list[str]:
    """Texts of the user's own messages in a request (Codex-injected context messages left out)."""
    return [_text_of(i) for i in body.get("input", []) if _is_real_user_message(i)]


def _last_user_index(items: list[Any]) -> int:
    for idx in range(len(items) - 1, -1, -1):
        if _is_real_user_message(items[idx]):
            return idx
    return -1


def last_user_text(body: dict[str, Any]) -> str:
    """Text of the last user message of a request ("" if there is none)."""
    items = body.get("input", [])
    idx = _last_user_index(items)
    return _text_of(items[idx]) if idx >= 0 else ""


def tool_outputs(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool-output items that follow the last user message (what the tools returned this turn)."""
    items = body.get("input", [])
    tail = items[_last_user_index(items) + 1:]
    return [i for i in tail if isinstance(i, dict) and i.get("type") in _TOOL_OUTPUT_TYPES]


def _turn_key(body: dict[str, Any]) -> str:
    meta = body.get("client_metadata")
    if isinstance(meta, dict) and isinstance(meta.get("turn_id"), str):
        return str(meta["turn_id"])
    return f"{len(user_texts(body))}:{last_user_text(body)}"


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps({'type': event, **data})}\n\n".encode()


def _chunks(text: str, size: int = 12) -> Iterator[str]:
    for start in range(0, len(text), size):
        yield text[start:start + size]


# ------------------------------------------------------------------------------------------- server


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("content-length") or 0))

    def _send(self, status: int, body: bytes, content_type: str) -> None:
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (interrupt, timeout)
            pass

    def do_POST(self) -> None:
        """Answer ``/v1/responses``; anything else is a 404."""
        raw = self._read_body()
        if self.path.rstrip("/") != "/v1/responses":
            self._send(404, b'{"error":{"message":"not found"}}', "application/json")
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, b'{"error":{"message":"body is not JSON"}}', "application/json")
            return
        status, payload = self.server.model._respond(body if isinstance(body, dict) else {})
        self._send(status, payload, "text/event-stream" if status == 200 else "application/json")

    def do_GET(self) -> None:
        """Codex does not GET anything from the provider; say so."""
        self._send(404, b'{"error":{"message":"not found"}}', "application/json")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    model: ScriptedModel


class ScriptedModel:
    """A local Responses-API server whose answers are scripted per prompt trigger."""

    def __init__(self, port: int = 0) -> None:
        """Create a stopped server; ``start()`` or ``with`` binds it to 127.0.0.1:``port`` (0: a free one)."""
        self._port = port
        self.requests: list[dict[str, Any]] = []
        self._scripts: dict[str, list[_Round]] = {}
        self._fail_counts: dict[tuple[str, int, int], int] = {}
        self._lock = threading.Lock()
        self._next_id = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> ScriptedModel:
        """Bind to a free port and serve in a daemon thread (idempotent)."""
        if self._server is None:
            server = _Server(("127.0.0.1", self._port), _Handler)
            server.model = self
            self._server = server
            self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=f"scripted-model:{self.port}", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None

    def __enter__(self) -> ScriptedModel:
        """Start the server."""
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Stop the server."""
        self.stop()

    @property
    def port(self) -> int:
        """The bound TCP port."""
        if self._server is None:
            raise RuntimeError("ScriptedModel is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The provider ``base_url`` for config.toml (Codex posts to ``{base_url}/responses``)."""
        return f"http://127.0.0.1:{self.port}/v1"

    # scripting

    def script(self, trigger: str, steps: Sequence[Step]) -> None:
        """Use ``steps`` for turns whose last user message contains ``trigger`` (longest trigger wins)."""
        rounds = _rounds(steps)
        with self._lock:
            self._scripts[trigger] = rounds

    def clear(self) -> None:
        """Forget all scripts and recorded requests."""
        with self._lock:
            self._scripts.clear()
            self._fail_counts.clear()
            self.requests.clear()

    @property
    def model_requests(self) -> list[dict[str, Any]]:
        """Recorded requests of the agent itself (guardian reviews left out)."""
        return [r for r in self.requests if r.get("model") != GUARDIAN_MODEL]

    # answering

    def _new_id(self, prefix: str) -> str:
        with self._lock:
            self._next_id += 1
            return f"{prefix}_{self._next_id}"

    def _pick(self, prompt: str) -> list[_Round] | None:
        with self._lock:
            matches = [t for t in self._scripts if t in prompt]
            return self._scripts[max(matches, key=len)] if matches else None

    def _respond(self, body: dict[str, Any]) -> tuple[int, bytes]:
        with self._lock:
            self.requests.append(body)
        prompt = last_user_text(body)
        if body.get("model") == GUARDIAN_MODEL:
            return 200, self._stream(body, [], Message('{"outcome":"deny"}'))
        if prompt.startswith(COMPACTION_PROMPT) and not body.get("tools"):
            return 200, self._stream(body, [], Message(compaction_summary(body)))
        rounds = self._pick(prompt)
        if rounds is None:
            return 200, self._stream(body, [], Message(f"ok: {prompt[:60]}"))
        if rounds and isinstance(rounds[0].action, Respond):
            rounds = _rounds(rounds[0].action.decide(prompt, tool_outputs(body)))
        position = len(tool_outputs(body))
        if position >= len(rounds):
            return 200, self._stream(body, [], Message("done"))
        current = rounds[position]
        extras: list[Reasoning] = []
        tokens: int | None = None
        for index, step in enumerate(current.prefix):
            if isinstance(step, Pause):
                time.sleep(step.seconds)
            elif isinstance(step, Reasoning):
                extras.append(step)
            elif isinstance(step, Usage):
                tokens = step.input_tokens
            elif step.times is not None:
                key = (_turn_key(body), position, index)
                with self._lock:
                    seen = self._fail_counts.get(key, 0)
                    self._fail_counts[key] = seen + 1
                if seen < step.times:
                    return self._error(step.status)
        if isinstance(current.action, Fail):
            return self._error(current.action.status)
        if isinstance(current.action, Respond):  # decide() returned another Respond: a scripting mistake
            return 200, self._stream(body, extras, Message("a Respond step may not return another Respond"))
        return 200, self._stream(body, extras, current.action, tokens)

    @staticmethod
    def _error(status: int) -> tuple[int, bytes]:
        doc = {"error": {"message": f"scripted failure (HTTP {status})", "type": "server_error", "code": None}}
        return status, json.dumps(doc).encode()

    def _stream(self, body: dict[str, Any], extras: list[Reasoning], action: Patch | Shell | Message,
                input_tokens: int | None = None) -> bytes:
        response_id = self._new_id("resp")
        frames = [_sse("response.created", {"response": {"id": response_id}})]
        out_index = 0
        out_text = ""
        for item in extras:
            done = {"type": "reasoning", "id": self._new_id("rs"),
                    "summary": [{"type": "summary_text", "text": item.summary}],
                    "content": None, "encrypted_content": None}
            frames.append(_sse("response.output_item.done", {"output_index": out_index, "item": done}))
            out_index += 1
            out_text += item.summary
        if isinstance(action, Message):
            msg_id = self._new_id("msg")
            added = {"type": "message", "role": "assistant", "id": msg_id, "content": []}
            frames.append(_sse("response.output_item.added", {"output_index": out_index, "item": added}))
            for piece in _chunks(action.text):
                frames.append(_sse("response.output_text.delta", {"item_id": msg_id, "output_index": out_index,
                                                                  "content_index": 0, "delta": piece}))
            full = {**added, "content": [{"type": "output_text", "text": action.text, "annotations": []}]}
            frames.append(_sse("response.output_item.done", {"output_index": out_index, "item": full}))
            out_text += action.text
        elif isinstance(action, Patch):
            call = {"type": "custom_tool_call", "name": "apply_patch", "call_id": self._new_id("call"),
                    "input": action.text}
            frames.append(_sse("response.output_item.done", {"output_index": out_index, "item": call}))
            out_text += action.text
        else:
            # Not a login shell: a login profile can block (a stale `pyenv rehash` lock left by a killed
            # shell made every `bash -l` here wait 60 s), and scripted commands need no profile.
            args: dict[str, Any] = {"cmd": action.cmd, "login": False}
            for key in ("workdir", "sandbox_permissions", "justification"):
                if getattr(action, key) is not None:
                    args[key] = getattr(action, key)
            arguments = json.dumps(args)
            call = {"type": "function_call", "name": "exec_command", "call_id": self._new_id("call"),
                    "arguments": arguments}
            frames.append(_sse("response.output_item.done", {"output_index": out_index, "item": call}))
            out_text += arguments
        if input_tokens is None:
            input_tokens = max(1, len(json.dumps(body.get("input", []))) // 4)
        output_tokens = max(1, len(out_text) // 4)
        usage = {"input_tokens": input_tokens, "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": input_tokens + output_tokens}
        frames.append(_sse("response.completed", {"response": {"id": response_id, "usage": usage}}))
        return b"".join(frames)


# ---------------------------------------------------------------------------------- the demo's responder

RESPONDER_HELP = (
    "create NAME [TEXT] adds a file · edit NAME [TEXT] appends a line · delete NAME · run COMMAND · list\n"
    "(NAME has a dot or a slash; join several with ;) — anything else gets a small multi-file edit"
)
_FILE_WORDS = ("create", "edit", "delete")
_EDIT_LINE = "a line added by the demo model"


def responder() -> Respond:
    """The demo's catch-all: free text answered usefully (see ``RESPONDER_HELP`` and ``responder_steps``)."""
    return Respond(responder_steps)


def _tool_failed(output: dict[str, Any]) -> str | None:
    """The first line of a failed tool call's output (None when it succeeded)."""
    raw = output.get("output")
    text = raw if isinstance(raw, str) else json.dumps(raw)
    exit_code = re.search(r"(?:Process exited with code|Exit code:)\s*(-?\d+)", text)
    if exit_code is not None:
        return None if exit_code.group(1) == "0" else text.strip().splitlines()[-1][:200]
    if "Success" in text or not text.strip():
        return None
    return text.strip().splitlines()[0][:200]


def _clause(part: str) -> tuple[str, str, str] | None:
    """(verb, name, rest) of one vocabulary clause; None when the clause is free text."""
    words = part.split(maxsplit=2)
    if not words:
        return None
    verb = words[0].lower()
    if verb == "list" and len(words) == 1:
        return ("list", "", "")
    if verb == "run" and len(words) > 1:
        return ("run", "", part.split(maxsplit=1)[1])
    if verb in _FILE_WORDS and len(words) > 1 and ("." in words[1] or "/" in words[1]):
        return (verb, words[1], words[2] if len(words) > 2 else "")
    return None


def _slug(text: str) -> str:
    words = [w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in ("a", "an", "the", "please")]
    slug = "_".join(words[:3]) or "sketch"
    return slug if slug[0].isalpha() else f"m_{slug}"


def _free_text(prompt: str) -> tuple[list[Patch | Shell | Reasoning], list[str]]:
    """A plausible multi-file edit for any request: a small module plus a TODO line (added by a shell command)."""
    said = " ".join(prompt.split())[:120]
    safe = said.replace("\\", "").replace('"', "'")
    name = _slug(said)
    module = (f'"""{safe} (sketched by the demo model)."""\n\n\ndef {name}() -> str:\n'
              f'    """A placeholder for the real thing."""\n    return "todo: {name}"\n')
    todo = shlex.quote(f"- [ ] {said}")
    steps: list[Patch | Shell | Reasoning] = [
        reasoning(f"Plan: sketch {name}.py and note the request in TODO.md"),
        add_file(f"{name}.py", module),
        shell(f"printf '%s\\n' {todo} >> TODO.md"),
    ]
    done = [f"added `{name}.py` with a placeholder `{name}()`",
            "noted the request in `TODO.md` (with a shell command: a rewind restores shell-made changes too)"]
    return steps, done


def responder_steps(prompt: str, outputs: list[dict[str, Any]]) -> list[Patch | Shell | Message | Reasoning]:
    """The demo model's answer to ``prompt``: one tool call per clause, then a Markdown summary of what happened."""
    text = prompt.strip()
    clauses = [c.strip() for c in re.split(r"[;\n]", text) if c.strip()]
    parsed = [_clause(c) for c in clauses]
    steps: list[Patch | Shell | Message | Reasoning] = []
    done: list[str] = []
    if not clauses or any(p is None for p in parsed):
        free, done = _free_text(text or "something")
        steps.extend(free)
    else:
        for verb, name, rest in (p for p in parsed if p is not None):
            if verb == "create":
                steps.append(add_file(name, rest or f"{name}: created by the demo model"))
                done.append(f"created `{name}`")
            elif verb == "edit":
                steps.append(patch(f"*** Begin Patch\n*** Update File: {name}\n@@\n+{rest or _EDIT_LINE}\n"
                                   "*** End Patch"))
                done.append(f"appended a line to `{name}`")
            elif verb == "delete":
                steps.append(delete_file(name))
                done.append(f"deleted `{name}`")
            elif verb == "run":
                steps.append(shell(rest))
                done.append(f"ran `{rest}`")
            else:
                steps.append(shell("ls -A"))
                done.append("listed the workspace")
    actions = [s for s in steps if isinstance(s, Patch | Shell)]
    lines = ["**Done.** Here is what I did:", ""]
    for i, what in enumerate(done):
        failure = _tool_failed(outputs[i]) if i < len(outputs) and i < len(actions) else None
        lines.append(f"- {what}" if failure is None else f"- tried: {what} — it failed: {failure}")
    lines += ["", "Try `/rewind` to put files and conversation back, then `/redo`."]
    steps.append(message("\n".join(lines)))
    return steps


# ------------------------------------------------------------------------------------------ CODEX_HOME


def write_codex_home(home: Path, base_url: str, *, approval_policy: str = "never",
                     sandbox_mode: str = "danger-full-access", approvals_reviewer: str | None = None,
                     model: str = "gpt-5.5") -> dict[str, str]:
    """Write ``home/config.toml`` pointing Codex at ``base_url``; return the env vars Codex needs."""
    if approval_policy == "untrusted":
        raise ValueError('approval_policy = "untrusted" in config.toml makes app-server exit; pass it per thread/turn')
    home.mkdir(parents=True, exist_ok=True)
    lines = [
        f"model = {json.dumps(model)}",
        'model_provider = "mock"',
        f"approval_policy = {json.dumps(approval_policy)}",
        f"sandbox_mode = {json.dumps(sandbox_mode)}",
    ]
    if approvals_reviewer is not None:
        lines.append(f"approvals_reviewer = {json.dumps(approvals_reviewer)}")
    lines += [
        "",
        "[model_providers.mock]",
        'name = "mock"',
        f"base_url = {json.dumps(base_url)}",
        'wire_api = "responses"',
        f'env_key = "{MOCK_KEY_ENV}"',
        "request_max_retries = 0",
        "stream_max_retries = 1",
        "stream_idle_timeout_ms = 20000",
        "",
        # Codex snapshots the user's login-shell environment at every start (`bash -lc` sourcing their profile).
        # The scripted model's commands need none of it, and a profile that runs `pyenv init` makes every start a
        # `pyenv rehash` under a lock file: an app-server ended mid-rehash (every test that kills or closes one)
        # leaves the lock behind, and from then on each start's rehash waits 60 s for it, outliving the test.
        "[features]",
        "shell_snapshot = false",
        "",
    ]
    (home / "config.toml").write_text("\n".join(lines))
    return {"CODEX_HOME": str(home), MOCK_KEY_ENV: "scripted-model-key"}
