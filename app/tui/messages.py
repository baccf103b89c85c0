"""Typed Textual messages: how the session core's events reach widgets on the UI thread."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.message import Message

from ..codex.events import AgentDelta, CommandOutput


class DriverEvents(Message):
    """The driver's threads emitted events (app/codex/events.py): the app takes every one waiting when it handles this.

    One message per batch, not per event: a command printing many lines a second otherwise queued a message and a
    transcript update per piece ahead of the user's keys (bench/bench_tui.py, keystroke echo while a command streams).
    """


def coalesce(events: Iterable[Any]) -> list[Any]:
    """The same events with each run of streamed pieces of one item (command output, agent text) joined into one."""
    out: list[Any] = []
    run: list[str] = []  # the pieces of the run that out[-1] starts

    def close_run() -> None:
        if len(run) > 1:
            out[-1] = type(out[-1])(out[-1].item_id, "".join(run))
        run.clear()

    for ev in events:
        last: Any = out[-1] if out else None
        if isinstance(ev, CommandOutput | AgentDelta) and type(last) is type(ev) and last.item_id == ev.item_id:
            run.append(ev.delta)
            continue
        close_run()
        out.append(ev)
        if isinstance(ev, CommandOutput | AgentDelta):
            run.append(ev.delta)
    close_run()
    return out
