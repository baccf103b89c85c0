"""An approval request shown inline in place of the composer: keyboard-only, with its remaining time."""

from __future__ import annotations

import os
import time
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from ..codex.events import ApprovalAsked
from ..codex.translate import short_command
from .actions import bindings


def remaining(asked: ApprovalAsked) -> str:
    """`4:59` until the session core declines by itself."""
    left = max(0, int(asked.timeout - (time.time() - asked.asked_at))) if asked.timeout else 0
    return f"{left // 60}:{left % 60:02d}"


def where(cwd: str, workspace: str) -> str:
    """`./` for the workspace itself, `./sub` inside it, the full path elsewhere."""
    if workspace:
        rel = os.path.relpath(os.path.realpath(cwd), os.path.realpath(workspace))
        if rel == ".":
            return "./ (the workspace)"
        if not rel.startswith(".."):
            return f"./{rel}"
    return cwd


class ApprovalPanel(Vertical, can_focus=True):
    """A command the agent wants to run: y accept · a accept for session · n decline · c/Esc cancel."""

    BINDINGS = bindings("approval")  # type: ignore[assignment]

    class Decided(Message):
        """The user answered (decision None: the request went away by itself, e.g. timed out)."""

        def __init__(self, asked: ApprovalAsked, decision: str | None) -> None:
            super().__init__()
            self.asked = asked
            self.decision = decision

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.asked: ApprovalAsked | None = None
        self.waiting = 0
        self.hide_clock = False  # snapshot tests: no remaining time on screen

    def compose(self) -> ComposeResult:
        yield Static("", id="approval-title")
        yield Static("", id="approval-body")
        yield Static("", id="approval-keys")

    def on_mount(self) -> None:
        self.set_interval(1.0, self._tick)

    def show(self, asked: ApprovalAsked, waiting: int = 0, workspace: str = "") -> None:
        """Show one request (`waiting`: how many more queue behind it)."""
        self.asked = asked
        self.waiting = waiting
        req = asked.request
        body = Text()
        body.append("$ ", style="bold")
        body.append(short_command(req.command) if req.command else "(no command given)")
        if req.cwd:
            body.append("\n  in ", style="dim")
            body.append(where(str(req.cwd), workspace))
        if req.reason:
            body.append("\n  why: ", style="dim")
            body.append(str(req.reason))
        self.query_one("#approval-body", Static).update(body)
        self._tick()

    def _tick(self) -> None:
        asked = self.asked
        if asked is None:
            return
        if asked.future.done():  # timed out (declined by the session core) or answered elsewhere
            self.post_message(self.Decided(asked, None))
            return
        title = Text("⚠ Codex asks to run a command", style="bold")
        if self.waiting:
            title.append(f"   (+{self.waiting} more waiting)")
        if asked.timeout and not self.hide_clock:
            title.append(f"   declines by itself in {remaining(asked)}", style="dim")
        self.query_one("#approval-title", Static).update(title)
        self.query_one("#approval-keys", Static).update(
            Text("[y] accept   [a] accept for this session   [n] decline   [c/Esc] cancel the turn"))

    def _decide(self, decision: str) -> None:
        if self.asked is not None:
            self.post_message(self.Decided(self.asked, decision))

    def action_accept(self) -> None:
        """Allow this command."""
        self._decide("accept")

    def action_accept_session(self) -> None:
        """Allow it and do not ask again this session."""
        self._decide("acceptForSession")

    def action_decline(self) -> None:
        """Refuse; the agent continues without it."""
        self._decide("decline")

    def action_cancel(self) -> None:
        """Refuse and stop the turn."""
        self._decide("cancel")
