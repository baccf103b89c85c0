"""What the proxy does with the frames it relays: it records every turn with the SDK session's own Recorder.

`turn/start` from the client: the pre-turn capture, committed before the request is forwarded (a steer of a
running turn is forwarded as it is); the answer binds it to the turn id; the turn's notifications feed the
recorder as they pass; `turn/completed` is forwarded at once and the turn finished (pre-edit states, sidecar, the
post-turn capture) on the recorder's own thread, which the next turn's capture waits for. A capture that fails
never holds the turn hostage: the turn runs untracked and the client gets a `warning` notification saying so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .relay import Observer, Verdict

#: Methods whose `cwd` a remote TUI leaves null (the server's own cwd is then used: ours is the workspace).
CWD_METHODS = frozenset({"thread/start", "thread/resume", "thread/fork"})
T = TypeVar("T")


@dataclass
class _Turn:
    thread_id: str
    text: str
    pre: str | None
    state: Any  # recorder.TurnState (imported with the recorder, on the recorder's thread)


def input_text(params: dict[str, Any]) -> str:
    """The prompt's text: the text items of `turn/start`'s input, joined."""
    items = params.get("input") or []
    return "\n".join(str(i.get("text") or "") for i in items if isinstance(i, dict) and i.get("type") == "text")


def turn_id_of(msg: dict[str, Any]) -> str | None:
    """The turn a notification belongs to (`turnId`, or `turn.id` for turn/started and turn/completed)."""
    params = msg.get("params")
    if not isinstance(params, dict):
        return None
    if isinstance(params.get("turnId"), str):
        return str(params["turnId"])
    turn = params.get("turn")
    return str(turn["id"]) if isinstance(turn, dict) and isinstance(turn.get("id"), str) else None


class RecordingObserver(Observer):
    """The proxy's observer for one client connection in workspace `ws` (CODEX_HOME from `env`)."""

    def __init__(self, ws: Path, env: dict[str, str], settings: Any = None) -> None:
        self.ws, self.env, self.settings = ws, env, settings
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="codexr-recorder")
        self._recorder: Any = None
        self._lock: Any = None
        self._pending: dict[Any, tuple[str, str, Any, str | None]] = {}  # turn/start id -> thread, text, side, pre
        self._turns: dict[str, _Turn] = {}  # running turns by id
        self._active: dict[str, str] = {}  # thread id -> its running turn
        self._warned = False

    async def _on_recorder(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the recorder's one thread (the store is used from there only, in order)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def _open(self) -> Any:
        """The recorder, opened on first use (on the recorder's thread)."""
        if self._recorder is None:
            from config import load_settings
            from snapshot_store import Store

            from ..recorder import Recorder
            from ..sidecar import Sidecars
            from ..workspace_lock import SessionLock

            home = Path(self.env["CODEX_HOME"])
            settings = self.settings or load_settings(home)
            store_dir = home / "file_snapshots"
            store = Store.open(store_dir, protected=[home])
            tracking = bool(settings.features.file_snapshots)
            self._recorder = Recorder(store, Sidecars(store_dir), self.ws, settings.scope(), tracking)
            self._lock = SessionLock(store_dir, self.ws)
            self._lock.acquire()
            if tracking:
                store.watch(self.ws)
        return self._recorder

    async def _warn(self, message: str) -> None:
        """A `warning` notification the client renders (the official TUI shows it in its transcript)."""
        with contextlib.suppress(Exception):
            await self.relay.to_client({"method": "warning", "params": {"message": f"codexr: {message}"}})

    async def from_client(self, msg: dict[str, Any]) -> Verdict:
        method = msg.get("method")
        params = msg.get("params")
        if not isinstance(params, dict) or "id" not in msg:
            return Verdict(msg)
        if method in CWD_METHODS and params.get("cwd") is None:
            return Verdict({**msg, "params": {**params, "cwd": str(self.ws)}})
        if method == "turn/start" and isinstance(params.get("threadId"), str):
            await self._before_turn(msg["id"], str(params["threadId"]), input_text(params))
        return Verdict(msg)

    async def _before_turn(self, request_id: Any, thread_id: str, text: str) -> None:
        if thread_id in self._active:
            return  # a turn/start while a turn runs steers it: same turn, no new capture
        try:
            def begin() -> tuple[Any, str | None]:
                recorder = self._open()
                side = recorder.sidecar(thread_id)
                pre, _seconds = recorder.begin(side, text)
                return side, pre

            side, pre = await self._on_recorder(begin)
        except Exception as exc:  # a damaged store, a full disk: the turn runs untracked, and says so
            await self._warn(f"no file snapshot before this prompt ({exc}); it runs untracked")
            return
        self._pending[request_id] = (thread_id, text, side, pre)

    async def from_server(self, msg: dict[str, Any]) -> Verdict:
        if "method" not in msg:
            started = self._pending.pop(msg.get("id"), None) if "id" in msg else None
            if started is not None:
                self._started(msg, *started)
            return Verdict(msg)
        turn_id = turn_id_of(msg)
        turn = self._turns.get(turn_id) if turn_id else None
        if turn is not None and turn_id is not None:
            params = msg.get("params") or {}
            with contextlib.suppress(Exception):
                self._recorder.observe(turn.state, str(msg["method"]), params)
            if msg["method"] == "turn/completed":
                status = str((params.get("turn") or {}).get("status") or "completed")
                self._complete(turn_id, status)
        return Verdict(msg)

    def _started(self, answer: dict[str, Any], thread_id: str, text: str, side: Any, pre: str | None) -> None:
        """The server started the turn: bind its snapshot to the turn id (in order, on the recorder's thread)."""
        turn = (answer.get("result") or {}).get("turn") if isinstance(answer.get("result"), dict) else None
        if not isinstance(turn, dict) or not isinstance(turn.get("id"), str):
            return  # refused: the pre-turn snapshot stays unbound, as an unsent prompt's
        from ..recorder import TurnState

        turn_id = str(turn["id"])
        self._turns[turn_id] = _Turn(thread_id, text, pre, TurnState())
        self._active[thread_id] = turn_id
        recorder = self._recorder
        self._pool.submit(recorder.bind, thread_id, side, turn_id, text, pre)

    def _complete(self, turn_id: str, status: str) -> None:
        """Finish the turn on the recorder's thread; the notification is forwarded meanwhile."""
        turn = self._turns.pop(turn_id)
        if self._active.get(turn.thread_id) == turn_id:
            del self._active[turn.thread_id]
        recorder = self._recorder
        done = self._pool.submit(recorder.finish, turn.thread_id, turn_id, turn.text, turn.state, status, turn.pre)
        loop = asyncio.get_running_loop()

        def said(fut: concurrent.futures.Future[Any]) -> None:
            error = fut.exception()
            message = str(error) if error is not None else fut.result().capture_error
            if message:
                loop.call_soon_threadsafe(lambda: asyncio.ensure_future(self._warn(message)))

        done.add_done_callback(said)

    async def closed(self) -> None:
        """The client or the server left: turns still running are finished as interrupted, then all is let go."""
        for turn_id in list(self._turns):
            self._complete(turn_id, "interrupted")

        def close() -> None:
            if self._recorder is not None:
                with contextlib.suppress(Exception):
                    self._recorder.store.close()
            if self._lock is not None:
                with contextlib.suppress(Exception):
                    self._lock.release()

        with contextlib.suppress(Exception):
            await self._on_recorder(close)
        self._pool.shutdown(wait=True)
