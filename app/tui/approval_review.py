"""A file-change approval: the proposed edit's diffs in a review screen, answered from the keyboard."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from ..codex.events import ApprovalAsked
from ..codex.translate import file_diffs
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
        self._answered = False

    def compose(self) -> ComposeResult:
        req = self.asked.request
        with Vertical(id="review"):
            yield Static("", id="review-title")
            if req.reason:
                yield Static(Text(f"  why: {req.reason}"))
            with VerticalScroll(id="review-diffs"):
                if not self.diffs:
                    yield Static("(Codex did not say which files)")
                for d in self.diffs:
                    yield Static(Text(diff_stat(d), style="bold"))
                    yield DiffView(unified(d))
            yield Static(Text("[y] accept   [a] accept for this session   [n] decline   [c/Esc] cancel the turn"),
                         id="review-keys")
        yield Footer()

    def on_mount(self) -> None:
        self._tick()
        self.set_interval(1.0, self._tick)

    def _answer(self, decision: str | None) -> None:
        """Dismiss once (the clock may tick again before the screen is gone)."""
        if not self._answered:
            self._answered = True
            self.dismiss(decision)

    def _tick(self) -> None:
        if self._answered:
            return
        if self.asked.future.done():
            self._answer(None)
            return
        title = Text(f"⚠ Codex asks to change {len(self.diffs)} file(s)", style="bold")
        if self.asked.timeout:
            title.append(f"   declines by itself in {remaining(self.asked)}", style="dim")
        self.query_one("#review-title", Static).update(title)

    def action_accept(self) -> None:
        """Allow the edit."""
        self._answer("accept")

    def action_accept_session(self) -> None:
        """Allow it and similar edits this session."""
        self._answer("acceptForSession")

    def action_decline(self) -> None:
        """Refuse the edit."""
        self._answer("decline")

    def action_cancel(self) -> None:
        """Refuse and stop the turn."""
        self._answer("cancel")
