"""Token usage per turn, from Codex's `thread/tokenUsage/updated` notifications (one after every model response,
each with the thread's running `total` and the `last` request's tokens).

A turn of several requests (a tool call and the answer after it) is their sum, not the last one's tokens: the
thread's total now less its total before the turn's first request. What the last request of a turn held is what the
context window holds after it, kept so that a rewind or a redo that lands after that turn knows it again.
"""

from __future__ import annotations

from dataclasses import replace

from ..codex.events import TokenUsage


class TurnUsage:
    """What the session has seen of each turn's usage (only turns that ran here: Codex reports no earlier ones)."""

    def __init__(self) -> None:
        self._before: dict[str, int] = {}  # turn id -> the thread's total before the turn's first request
        self._last: dict[str, tuple[int, int]] = {}  # turn id -> (its last request's tokens, the context window)

    def seen(self, ev: TokenUsage) -> TokenUsage:
        """The event with `turn_total` set: the tokens of every request of its turn so far."""
        before = self._before.setdefault(ev.turn_id, ev.thread_total - ev.last_total)
        if ev.context_window:
            self._last[ev.turn_id] = (ev.last_total, ev.context_window)
        return replace(ev, turn_total=ev.thread_total - before)

    def context_after(self, turn_id: str | None) -> tuple[int, int] | None:
        """(tokens, window) of the context after turn `turn_id`, when that turn ran in this session."""
        return self._last.get(turn_id) if turn_id else None
