"""`codexr exec --timeout`: give up on a turn whose model has sent nothing for a while, the way Ctrl+C in the app does.

Why: when nothing answers at the model provider's address, Codex 0.163.0 waits for the network with no limit of its
own (`stream_max_retries` does not bound it), so `codexr exec` in CI or cron hung until killed. The bound is on the
model's *silence*, never on the turn's length: any notification of the turn but Codex's own retry notices is
progress, and a command, a tool or an edit the agent runs stops the clock (it is not the model that is silent). On
expiry the turn is interrupted through the session (`turn/interrupt`), so Codex ends it as it ends any interrupted
turn and the post-turn capture records what the turn changed, as after Ctrl+C in the app.
"""

from __future__ import annotations

import contextlib
import threading
import time
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..session import Session

#: Seconds of model silence after which `codexr exec` without a terminal gives up: Codex's own default
#: `stream_idle_timeout_ms` (300 000), the silence after which Codex itself takes a model stream for dead.
DEFAULT_TIMEOUT_S = 300.0
#: Item types that are the model speaking (its stream stalling is the model's silence; a compaction is the model
#: summarising); any other open item is the agent working (a command, a tool, an edit), which stops the clock.
MODEL_ITEMS = frozenset({"agentMessage", "reasoning", "userMessage", "plan", "contextCompaction"})


class StallGuard:
    """Interrupts the turn it watches once its model has been silent for `limit` seconds; `fired` says it did."""

    def __init__(self, session: Session, limit: float) -> None:
        self.session, self.limit = session, limit
        self.fired = False
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._working: set[str] = set()  # open items that are the agent's work, not the model's words
        self._turn: tuple[str, str] | None = None
        self._done = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="codexr-stall-guard", daemon=True)

    def __enter__(self) -> StallGuard:
        """Start the clock (the turn's first notification tells which turn it is)."""
        self._watcher.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """The turn is over: stop watching."""
        self._done.set()
        self._watcher.join()

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        """A turn notification (the turn's event callback): progress unless it is one of Codex's retry notices."""
        turn = params.get("turn")
        turn_id = params.get("turnId") or (turn.get("id") if isinstance(turn, dict) else None)
        with self._lock:
            if params.get("threadId") and turn_id:
                self._turn = (str(params["threadId"]), str(turn_id))
            if method == "error":  # "Reconnecting…": Codex still has nothing from the model
                return
            item = params.get("item")
            if isinstance(item, dict) and item.get("type") not in MODEL_ITEMS and item.get("id"):
                if method == "item/started":
                    self._working.add(str(item["id"]))
                elif method == "item/completed":
                    self._working.discard(str(item["id"]))
            self._last = time.monotonic()

    def _watch(self) -> None:
        """Sleep until the silence could have lasted `limit`; then interrupt the turn, once."""
        while True:
            with self._lock:
                if self._working:
                    self._last = time.monotonic()  # the clock starts again when the agent's work ends
                silent = time.monotonic() - self._last
                turn = self._turn
            if silent >= self.limit and turn is not None:
                self.fired = True
                with contextlib.suppress(Exception):  # Codex gone: the turn's stream ends by itself
                    self.session.interrupt(*turn)
                return
            if self._done.wait(max(1.0 if turn is None else 0.1, self.limit - silent)):
                return
