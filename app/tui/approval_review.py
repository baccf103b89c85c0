"""A file-change approval: the proposed edit's diffs in a review screen, answered from the keyboard."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ..events import ApprovalAsked
from ..translate import file_diffs
from .actions import bindings
from .approval import remaining
from .blocks import diff_stat, unified
from .diffview import DiffView


class ApprovalReview(ModalScreen[str | None]):
    """Dismisses with accept | acceptForSession | decline | cancel (None when the request went away)."""

    BINDINGS = bindings("approval")  # type: ignore[assignment]

    def __init__(self, asked: ApprovalAsked, cwd: str = "") -> None:
        super().__init__()
        self.asked = asked
        self.diffs = file_diffs({"changes": asked.request.changes}, cwd)

    def compose(self) -> ComposeResult:
        req = self.asked.request
        with Vertical(id="review"):
            head = Text(f"⚠ Codex asks to change {len(self.diffs)} file(s)", style="bold")
            if req.reason:
                head.append(f"\n  why: {req.reason}")
            yield Static(head, id="review-title")
            with VerticalScroll(id="review-diffs"):
                if not self.diffs:
                    yield Static("(Codex did not say which files)")
                for d in self.diffs:
                    yield Static(Text(diff_stat(d), style="bold"))
                    yield DiffView(unified(d))
            yield Static("", id="review-keys")
        yield Footer()

    def on_mount(self) -> None:
        self._tick()
        self.set_interval(1.0, self._tick)

    def _tick(self) -> None:
        if self.asked.future.done():
            self.dismiss(None)
            return
        keys = Text("[y] accept   [a] accept for this session   [n] decline   [c/Esc] cancel the turn")
        if self.asked.timeout:
            keys.append(f"      declines by itself in {remaining(self.asked)}", style="dim")
        self.query_one("#review-keys", Static).update(keys)

    def action_accept(self) -> None:
        """Allow the edit."""
        self.dismiss("accept")

    def action_accept_session(self) -> None:
        """Allow it and similar edits this session."""
        self.dismiss("acceptForSession")

    def action_decline(self) -> None:
        """Refuse the edit."""
        self.dismiss("decline")

    def action_cancel(self) -> None:
        """Refuse and stop the turn."""
        self.dismiss("cancel")
