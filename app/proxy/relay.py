"""The relay: frames from the client go to the app-server and back, each through an observer's hooks.

The protocol's own frames are forwarded as they came (the text, not a re-encoding), so a field this codexr does not
know about reaches the other side intact; only a frame an observer changes is re-encoded. A frame that is not a
JSON object, or one the app-server could not read (nested deeper than its parser goes, a NaN, a lone surrogate,
`method` twice), is forwarded untouched and unobserved: the app-server logs it and goes on, as it does without
codexr. The relay can also ask the app-server something of its own (`request`): its ids are `codexr-proxy-N`, and a
client's request whose id is in that space travels under another such id and is answered with its own, so no
client id is ever taken for the relay's.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..codex.approval import APPROVAL_METHODS, decision_result

#: The prefix of the ids the relay sends the app-server requests under: its own, and a client's that had this prefix.
OWN_ID = "codexr-proxy-"
#: The deepest nesting the app-server reads (serde_json's recursion limit: 127 arrays or objects pass, 128 are refused
#: with "recursion limit exceeded", tried on 0.163.0).
MAX_DEPTH = 127
#: The fields of a message the app-server refuses a frame for holding twice (tried: `id`, `method`); a field of
#: `params`, or one it does not know, may come twice (the last counts, as in Python).
ENVELOPE = frozenset({"jsonrpc", "id", "method", "params", "result", "error"})
#: The escape of a UTF-16 surrogate: one that is not half of a pair, Python reads and the app-server refuses.
SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")


class Endpoint(Protocol):
    """One side of the relay: whole JSON-RPC messages as text, in and out."""

    async def receive(self) -> str | None:
        """The next message, or None once this side has closed."""

    async def send(self, text: str) -> None:
        """Send one message (raises ConnectionError once this side has closed)."""

    async def close(self) -> None:
        """Let go of this side."""


@dataclass
class Verdict:
    """What becomes of one frame: forwarded (`forward`, possibly changed), answered here, or both."""

    forward: dict[str, Any] | None
    reply: list[dict[str, Any]] = field(default_factory=list)
    """Messages sent back to the side the frame came from (an answer, a notification)."""


def parse(text: str, *, strict: bool = False) -> dict[str, Any] | None:
    """The message as a dict, or None when it is not a JSON object (then it is forwarded untouched).

    `strict` (a client's frames, which the observer acts on): None too for one the app-server refuses to read, so
    nothing is done for a request it will never see.
    """
    try:
        msg = read_strictly(text) if strict else json.loads(text)
    except (ValueError, RecursionError):  # 5,000 nested arrays are a RecursionError, not a ValueError
        return None
    return msg if isinstance(msg, dict) else None


def read_strictly(text: str) -> Any:
    """The JSON value, where the app-server would read one: a NaN, a lone surrogate, an envelope field given twice
    or more than MAX_DEPTH levels are a ValueError, as they are a parse error to the app-server."""
    built: list[list[tuple[str, Any]]] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        built[:] = [items]  # the outermost object is built last
        return dict(items)

    value = json.loads(text, parse_constant=_refuse, object_pairs_hook=pairs)
    if isinstance(value, dict) and built:
        fields = [key for key, _ in built[0] if key in ENVELOPE]
        if len(fields) != len(set(fields)):
            raise ValueError("a field of the message given twice")
    if too_deep(value, MAX_DEPTH):
        raise ValueError(f"nested more than {MAX_DEPTH} deep")
    if SURROGATE.search(text):
        try:
            json.dumps(value, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            raise ValueError("a lone surrogate") from None
    return value


def _refuse(constant: str) -> Any:
    """NaN and Infinity: Python reads them, the app-server does not."""
    raise ValueError(f"{constant} is not JSON")


def too_deep(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def unanswerable(request: dict[str, Any]) -> dict[str, Any]:
    """The answer to a server request no client will see (it left, or left the thread): an approval is declined,
    anything else refused, so the turn goes on or ends rather than wait forever."""
    method = str(request.get("method"))
    if method in APPROVAL_METHODS:
        return {"id": request["id"], "result": decision_result(method, "decline")}
    return {"id": request["id"], "error": {"code": -32000, "message": "codexr: the client has left"}}


def relay_id(rid: Any) -> bool:
    """Whether an id is in the relay's space (`codexr-proxy-N`)."""
    return isinstance(rid, str) and rid.startswith(OWN_ID)


def kind(msg: dict[str, Any]) -> str:
    """"request", "notification" or "response" (JSON-RPC, with or without the "jsonrpc" field)."""
    if "method" in msg:
        return "request" if "id" in msg else "notification"
    return "response"


class Observer:
    """Hooks on what passes; the default passes everything unchanged. Hooks may await (a capture in a thread)."""

    relay: Relay

    async def from_client(self, msg: dict[str, Any]) -> Verdict:
        return Verdict(msg)

    async def from_server(self, msg: dict[str, Any]) -> Verdict:
        return Verdict(msg)

    def running(self) -> list[tuple[str, str]]:
        """(thread id, turn id) of each turn that has started and not ended: the relay outlives its client for them."""
        return []

    async def closed(self) -> None:
        """Both sides are done (a turn still open is finished as interrupted)."""


class Gone:
    """The side of a client that has left: whatever it would have been sent is dropped."""

    async def receive(self) -> str | None:
        return None

    async def send(self, text: str) -> None:
        return None

    async def close(self) -> None:
        return None


class Relay:
    """Forward frames between a client and an app-server until either side closes."""

    def __init__(self, client: Endpoint, server: Endpoint, observer: Observer | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.client, self.server = client, server
        self.observer = observer or Observer()
        self.observer.relay = self
        self.log = log or (lambda _line: None)
        self._ids = itertools.count(1)
        self._pending: dict[str, asyncio.Future[dict[str, Any]]] = {}
        self._on_answer: dict[str, Callable[[dict[str, Any]], None]] = {}  # own request id -> its hook
        self._aliases: dict[str, Any] = {}  # an id of the relay's space -> the client's id it stands for
        self._client_lock = asyncio.Lock()  # hooks may send to the client between forwarded frames
        self.detached = asyncio.Event()  # set once the client left with a turn still running (see run)
        self._asked: dict[Any, dict[str, Any]] = {}  # the app-server's requests the client has not answered yet
        trace = os.environ.get("CODEXR_PROXY_TRACE")  # a file to append every frame to (developing, debugging)
        self._trace = open(trace, "a", encoding="utf-8") if trace else None  # noqa: SIM115 - the relay's life

    async def run(self) -> None:
        """Relay until one side closes, then close the other."""
        up = asyncio.create_task(self._pump_client(), name="client->server")
        down = asyncio.create_task(self._pump_server(), name="server->client")
        try:
            done, _ = await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:  # a side that closed while a message was written to it is how relays end: not said
                exc = task.exception()
                if exc is not None and not isinstance(exc, ConnectionError):
                    self.log(f"relay: {task.get_name()} ended: {exc!r}")
            if up in done and not down.done() and self.observer.running():
                # The client left while a turn runs (the official TUI says "Any running work continues"): the turn
                # goes on to its end, so its files are recorded; what the client would have been sent goes nowhere.
                self.client = Gone()
                self.detached.set()
                for request in list(self._asked.values()):  # asked of the client before it left: never answered
                    await self.server.send(json.dumps(unanswerable(request)))
                self._asked.clear()
                while self.observer.running() and not down.done():
                    await asyncio.wait({down}, timeout=0.2)
        finally:
            for task in (up, down):
                task.cancel()
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("the app-server closed"))
            await self.observer.closed()
            await self.client.close()
            await self.server.close()

    async def to_client(self, msg: dict[str, Any]) -> None:
        """Send a message of the relay's own to the client (a notification it renders)."""
        async with self._client_lock:
            await self.client.send(json.dumps(msg))

    async def request(self, method: str, params: dict[str, Any], timeout: float = 60.0,
                      on_answer: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Ask the app-server (a request of the relay's own); its result, or RuntimeError with its error.

        `on_answer` sees the answer as the pump reads it, before the frames behind it pass (the caller resumes only
        later: a notification Codex sends right after its answer would otherwise reach the client first).
        """
        rid = self._new_id()
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        if on_answer is not None:
            self._on_answer[rid] = on_answer
        try:
            await self.server.send(json.dumps({"id": rid, "method": method, "params": params}))
            answer = await asyncio.wait_for(fut, timeout)
        finally:
            self._pending.pop(rid, None)
            self._on_answer.pop(rid, None)
        if "error" in answer:
            err = answer["error"] or {}
            raise RuntimeError(str(err.get("message") if isinstance(err, dict) else err))
        result = answer.get("result")
        return result if isinstance(result, dict) else {}

    def _new_id(self) -> str:
        """An id of the relay's space that no request in flight has."""
        return f"{OWN_ID}{next(self._ids)}"

    def _traced(self, direction: str, text: str | None) -> str | None:
        if self._trace is not None and text is not None:
            self._trace.write(f"{direction} {text[:2000]}\n")
            self._trace.flush()
        return text

    async def _pump_client(self) -> None:
        while (text := self._traced(">", await self.client.receive())) is not None:
            msg = parse(text, strict=True)
            if msg is None:
                await self.server.send(text)
                continue
            if kind(msg) == "response":
                self._asked.pop(msg.get("id"), None)
            verdict = await self._hook(self.observer.from_client, msg)
            for reply in verdict.reply:
                await self.to_client(reply)
            out = verdict.forward
            if out is not None and kind(out) == "request" and relay_id(out.get("id")):
                alias = self._new_id()  # the client's id is the relay's kind: it travels under another
                self._aliases[alias] = out["id"]
                out = {**out, "id": alias}
            if out is not None:
                await self.server.send(text if out is msg else json.dumps(out))

    async def _pump_server(self) -> None:
        while (text := self._traced("<", await self.server.receive())) is not None:
            msg = parse(text)
            if msg is not None and kind(msg) == "response" and relay_id(msg.get("id")):
                if msg["id"] in self._aliases:  # the answer to a client's request: with the id the client sent
                    msg = {**msg, "id": self._aliases.pop(msg["id"])}
                    text = json.dumps(msg)
                else:
                    fut = self._pending.get(msg["id"])
                    if fut is not None and not fut.done():
                        seen = self._on_answer.pop(msg["id"], None)
                        if seen is not None:
                            try:
                                seen(msg)
                            except Exception as exc:  # the caller's bug must not stop the relay
                                self.log(f"relay: on_answer failed: {exc!r}")
                        fut.set_result(msg)
                    continue  # an answer to the relay's own request: not the client's
            if msg is None:
                async with self._client_lock:
                    await self.client.send(text)
                continue
            verdict = await self._hook(self.observer.from_server, msg)
            if isinstance(self.client, Gone) and kind(msg) == "request" and verdict.forward is not None:
                verdict = Verdict(None, [unanswerable(msg)])  # an approval no client is left to give
            async with self._client_lock:
                if verdict.forward is not None:
                    if kind(verdict.forward) == "request":
                        self._asked[verdict.forward.get("id")] = verdict.forward
                    await self.client.send(text if verdict.forward is msg else json.dumps(verdict.forward))
            for reply in verdict.reply:
                await self.server.send(json.dumps(reply))

    async def _hook(self, hook: Callable[[dict[str, Any]], Awaitable[Verdict]], msg: dict[str, Any]) -> Verdict:
        """The observer's verdict; an observer that fails forwards the frame unchanged (never holds it hostage)."""
        try:
            return await hook(msg)
        except Exception as exc:  # an observer's bug must not stop the conversation
            self.log(f"relay: observer failed on {msg.get('method') or 'a response'}: {exc!r}")
            return Verdict(msg)
