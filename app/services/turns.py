"""Runs turns on Codex through the SDK and records each with the shared Recorder (app/recording/recorder.py).

Why apart: this is the SDK's feeder of the recorder (the proxy, app/proxy/observer.py, is the other): capture,
`turn/start`, the turn's notifications, capture again; plus the turns that are not prompts (a compaction, a
review) and the commands a turn leaves running (background terminals).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..codex.codex_connection import AnyResponse, CodexConnection, EventCallback, dump_payload
from ..codex.codex_sdk import CodexError, JsonRpcError, TransportClosedError
from ..codex.images import check_images, prompt_input
from ..codex.rpc_lines import RpcRefused
from ..codex.turn_kinds import is_prompt_turn
from ..errors import CodexGone, SessionError
from ..recording.auto_gc import AutoGc
from ..recording.recorder import PreTurnAhead, Recorder, TurnState
from ..recording.sidecar import ThreadSidecar
from .background import BackgroundTerminal
from .choices import Choices
from .threads import Threads, thread_source


@dataclass
class TurnOutcome:
    """One finished turn, with the snapshots taken around it."""

    thread_id: str
    turn_id: str
    status: str
    final_message: str
    error: str | None
    items: list[dict[str, Any]]
    files_changed: list[str]
    pre: str | None
    post: str | None
    seconds: float
    pre_capture_seconds: float = 0.0
    post_capture_seconds: float = 0.0
    capture_error: str | None = None  # the post-turn capture failed (the turn itself is unaffected)
    notice: str | None = None  # codexr continued a thread another Codex client ran (said once per thread)

    def as_json(self) -> dict[str, Any]:
        """The stable JSON shape `codexr exec --json` prints."""
        return {
            "thread_id": self.thread_id,
            "turn_id": self.turn_id,
            "status": self.status,
            "final_message": self.final_message,
            "error": self.error,
            "files_changed": self.files_changed,
            "pre_snapshot": self.pre,
            "post_snapshot": self.post,
            "seconds": round(self.seconds, 3),
            "pre_capture_seconds": round(self.pre_capture_seconds, 4),
            "post_capture_seconds": round(self.post_capture_seconds, 4),
            "capture_error": self.capture_error,
            "notice": self.notice,
        }


class RunningTurns:
    """The states of the turns running now: an approval request (on the SDK's reader thread) looks up their items."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.states: dict[str, TurnState] = {}

    def open_item(self, item_id: str) -> dict[str, Any] | None:
        """A running turn's open item by id (None: none has it)."""
        with self.lock:
            return next((s.open_items.get(item_id) for s in self.states.values() if item_id in s.open_items), None)


class TurnRunner:
    """Turns of one workspace's threads, sent through one Codex connection and recorded by one Recorder."""

    def __init__(self, conn: CodexConnection, recorder: Recorder, threads: Threads, choices: Choices,
                 running: RunningTurns, gc: AutoGc) -> None:
        self.conn, self.recorder, self.threads, self.choices = conn, recorder, threads, choices
        self.running, self.gc = running, gc
        self.ahead: PreTurnAhead | None = None  # a new thread's first pre-turn capture, taken while Codex started

    def sidecar(self, thread_id: str) -> ThreadSidecar:
        """The thread's sidecar, created (untracked turns and all) if codexr never saw it."""
        return self.recorder.sidecar(thread_id)

    def known_paths(self, thread_id: str) -> list[str]:
        """Every path the thread's captures look at (for dry runs and diffs outside a turn)."""
        return self.recorder.known_paths(self.sidecar(thread_id))

    def run_turn(self, thread_id: str, text: str, on_event: EventCallback | None = None,
                 images: Sequence[str] = (), output_schema: dict[str, Any] | None = None) -> TurnOutcome:
        """Capture, start the turn, stream it, capture again; the sidecar binds both to the turn id (recorder.py).

        `images`: local image files sent with the prompt (checked by app/codex/images.py before anything is captured).
        `output_schema`: the JSON Schema the turn's final message must follow (`codex exec --output-schema`).
        """
        check_images(images)
        started = time.perf_counter()
        side = self.sidecar(thread_id)
        notice = None
        # A thread this session just started has no earlier turns: asking Codex (thread/read) cost 30-70 ms of
        # every `codexr exec` on a new thread (measured with bench/bench_startup.py).
        if not self.recorder.sidecars.exists(thread_id) and thread_id not in self.threads.started:
            notice = self._continuing_notice(thread_id, side)
        pre, pre_seconds = self._begin(side, text)
        turn_params = self.choices.turn_params()
        if output_schema is not None:
            turn_params = {**(turn_params or {}), "outputSchema": output_schema}
        client = self.conn.client
        resp = self.conn.rpc("cannot start the turn",
                             lambda: client.turn_start(thread_id, prompt_input(text, images), turn_params))
        turn_id = str(resp.turn.id)
        self.threads.mark_used(thread_id)
        self.recorder.bind(thread_id, side, turn_id, text, pre)
        state = TurnState()
        with self.running.lock:
            self.running.states[turn_id] = state
        status, error = "failed", None
        try:
            status, error = self._stream(thread_id, turn_id, state, on_event)
        finally:
            with self.running.lock:
                self.running.states.pop(turn_id, None)
            with contextlib.suppress(Exception):
                client.unregister_turn_notifications(turn_id)
            for item_id, item in list(state.open_items.items()):
                closed = {**item, "status": "interrupted" if status == "interrupted" else "failed"}
                if self._still_running(thread_id, closed):
                    closed["stillRunning"] = True
                state.items.append(closed)
                if on_event is not None:
                    with contextlib.suppress(Exception):
                        on_event("item/completed", {"item": closed, "turnId": turn_id, "synthetic": True})
                state.open_items.pop(item_id, None)
            done = self.recorder.finish(thread_id, turn_id, text, state, status, pre)
        self.gc.collect_later()
        return TurnOutcome(thread_id, turn_id, status, state.final, error, state.items,
                           done.changed, pre, done.post, time.perf_counter() - started,
                           pre_seconds, done.post_seconds, done.capture_error, notice)

    def _begin(self, side: ThreadSidecar, text: str) -> tuple[str | None, float]:
        """The pre-turn capture: the one taken ahead when it is this prompt's on a thread that tracks nothing yet (a
        failed one is taken again, to fail here), else taken now."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            out = ahead.result()
            if (out is not None and ahead.text == text and side.tracking and not side.turns
                    and not side.agent_touched and side.latest_snapshot() is None):
                return out
        return self.recorder.begin(side, text)

    def close(self) -> None:
        """Wait for a capture taken ahead that no turn took (the store closes after)."""
        ahead, self.ahead = self.ahead, None
        if ahead is not None:
            ahead.wait()

    def _continuing_notice(self, thread_id: str, side: ThreadSidecar) -> str | None:
        """The one line said when codexr first sends a prompt on a thread another Codex client ran.

        codexr snapshots every prompt it sends, whoever started the thread; the prompts sent before
        are conversation-only. Said once: from this turn on the thread has a sidecar.
        """
        try:
            turns = self.conn.thread_turns(thread_id)
            earlier = sum(1 for t in turns if is_prompt_turn(t))
            if not earlier:
                return None
            resp = self.conn.client.thread_read(thread_id, include_turns=False)
        except (JsonRpcError, RpcRefused):
            return None  # "no rollout"/"list_turns is not supported yet": nothing ran on it
        except (TransportClosedError, CodexError) as exc:
            raise CodexGone(f"cannot read thread {thread_id}: Codex stopped responding ({exc})") from exc
        except CodexGone as exc:
            raise CodexGone(f"cannot read thread {thread_id}: {exc}") from exc
        source = thread_source(dump_payload(resp.thread))
        side.history.append({"event": "continued", "source": source, "earlier_prompts": earlier, "at": time.time()})
        snaps = "gets file snapshots" if side.tracking else "gets no file snapshot (file_snapshots is off)"
        text = (f"thread {thread_id} was started outside codexr ({source}): its {earlier} earlier "
                f"prompt{'s are' if earlier != 1 else ' is'} conversation-only; each prompt codexr sends {snaps}")
        self.conn.notice("codexr/continued", {"threadId": thread_id, "source": source, "earlierPrompts": earlier,
                                              "message": text})
        return text

    def _stream(self, thread_id: str, turn_id: str, state: TurnState, on_event: EventCallback | None
                ) -> tuple[str, str | None]:
        while True:
            try:
                n = self.conn.client.next_turn_notification(turn_id)
            except (TransportClosedError, CodexError) as exc:
                return "failed", f"Codex stopped during the turn: {exc}"
            method, d = n.method, dump_payload(n.payload)
            with self.running.lock:  # an approval request looks up open items from the SDK's reader thread
                self.recorder.observe(state, method, d)
            item = d.get("item")
            if method == "item/completed" and isinstance(item, dict) and self._still_running(thread_id, item):
                d = {**d, "item": {**item, "stillRunning": True}}  # Codex says interrupted; the process runs on
            if on_event is not None:
                with contextlib.suppress(Exception):
                    on_event(method, d)
            if method == "turn/completed":
                turn = d.get("turn") or {}
                err = turn.get("error") or None
                return str(turn.get("status") or "completed"), (err.get("message") if isinstance(err, dict) else None)

    def interrupt(self, thread_id: str, turn_id: str) -> None:
        """Ask Codex to stop a running turn."""
        client = self.conn.client
        self.conn.rpc("cannot interrupt", lambda: client.turn_interrupt(thread_id, turn_id))

    # ------------------------------------------------------------------ turns that are not prompts
    def compact(self, thread_id: str, on_event: EventCallback | None = None) -> tuple[str, str | None]:
        """Summarise the thread's conversation to free context (Codex's `thread/compact/start`): (status, error).

        Codex runs it as a turn of its own (a `contextCompaction` item, no prompt, no file change): no snapshot is
        taken, and the rewind picker's prompts are the same before and after it.
        """
        client = self.conn.client
        return self._thread_turn(thread_id, "cannot compact the conversation",
                                 lambda: client.thread_compact(thread_id), on_event)

    def review(self, thread_id: str, target: dict[str, Any], on_event: EventCallback | None = None
               ) -> tuple[str, str | None]:
        """A code review on this thread (Codex's `review/start`, inline): (status, error).

        Codex runs it as a turn that holds no prompt of the user's (`enteredReviewMode`, the reviewer's work, then
        `exitedReviewMode` with the review): like a compaction it is not a rewind point (app/codex/translate.py).
        """
        params: dict[str, Any] = {"threadId": thread_id, "target": target, "delivery": "inline"}
        client = self.conn.client
        return self._thread_turn(thread_id, "cannot start the review",
                                 lambda: client.request("review/start", params, response_model=AnyResponse),
                                 on_event)

    def _thread_turn(self, thread_id: str, what: str, start: Callable[[], Any],
                     on_event: EventCallback | None) -> tuple[str, str | None]:
        """Start a turn Codex begins by itself and stream it to its end (its id is known only from its events).

        The SDK routes a turn's notifications by turn id; this turn's id comes with its first notification, so
        the thread's route (the SDK's thread-scoped one, made for goal turns) takes every turn notification of
        the thread from before the request on.
        """
        client = self.conn.client
        route = client.register_goal_operation(thread_id)
        try:
            resp = self.conn.rpc(what, start)
            dumped = resp.model_dump() if hasattr(resp, "model_dump") else {}
            root = (dumped.get("turn") or {}).get("id") if isinstance(dumped, dict) else None
            while True:
                try:
                    n = client.next_goal_notification(route)
                except (TransportClosedError, CodexError) as exc:
                    return "failed", f"Codex stopped during the turn: {exc}"
                method, d = n.method, dump_payload(n.payload)
                if on_event is not None:
                    with contextlib.suppress(Exception):
                        on_event(method, d)
                if method == "turn/completed":
                    turn = d.get("turn") or {}
                    if root is None or turn.get("id") == root:
                        err = turn.get("error") or None
                        return (str(turn.get("status") or "completed"),
                                err.get("message") if isinstance(err, dict) else None)
        finally:
            client.unregister_goal_operation(route)

    # ------------------------------------------------------------------ background terminals
    def _still_running(self, thread_id: str, item: dict[str, Any]) -> bool:
        """A command item that ended without an exit code while its process runs on (an interrupt leaves it)."""
        if item.get("type") != "commandExecution" or item.get("exitCode") is not None or not item.get("processId"):
            return False
        if str(item.get("status")) not in ("interrupted", "failed", "inProgress"):
            return False
        try:
            running = self.background_terminals(thread_id)
        except SessionError:
            return False
        return any(t.process_id == str(item["processId"]) or t.item_id == item.get("id") for t in running)

    def background_terminals(self, thread_id: str) -> list[BackgroundTerminal]:
        """Commands of the thread still running after their turn (Codex's `thread/backgroundTerminals/list`)."""
        out: list[BackgroundTerminal] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"threadId": thread_id, **({"cursor": cursor} if cursor else {})}
            resp = self.conn.experimental("cannot list background terminals", "thread/backgroundTerminals/list",
                                          params)
            for t in resp.get("data") or []:
                if isinstance(t, dict) and t.get("processId"):
                    out.append(BackgroundTerminal(str(t["processId"]), str(t.get("itemId") or ""),
                                                  str(t.get("command") or ""), str(t.get("cwd") or "")))
            nxt = resp.get("nextCursor")
            if not nxt or nxt == cursor:
                return out
            cursor = str(nxt)

    def stop_terminals(self, thread_id: str, process_id: str | None = None) -> list[BackgroundTerminal]:
        """End the thread's background terminals (or the one with `process_id`); the ones Codex terminated."""
        stopped = []
        for t in self.background_terminals(thread_id):
            if process_id is not None and t.process_id != process_id:
                continue
            resp = self.conn.experimental(f"cannot stop {t.command}", "thread/backgroundTerminals/terminate",
                                          {"threadId": thread_id, "processId": t.process_id})
            if resp.get("terminated"):
                stopped.append(t)
        return stopped
