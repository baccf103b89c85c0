"""Ctrl+T: the whole thread as text in a pager, as the official TUI's transcript overlay.

The transcript on the main screen folds early blocks away and shows a long output's tail; this screen shows
every prompt, answer, reasoning summary, command with all of its output, edit and notice, drawn from the
transcript's event log (not its widgets), so nothing folded or unmounted is missing. `/` searches.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static, TextArea
from textual.widgets.text_area import Document, Selection

from ..codex.events import (
    AgentMessage,
    ApprovalDecided,
    CommandFinished,
    CommandStarted,
    ErrorNotice,
    FileChanges,
    Notice,
    Reasoning,
    TokenUsage,
    TurnFinished,
    UserPrompt,
)
from .blocks import NOTICE_MARK, _command_title, _turn_line, diff_stat, notice_text, unified

HINT = "/ search · n next · N previous · g top · G end · ↑↓ PgUp PgDn scroll · Esc or q closes"


def event_text(ev: Any, usage: TokenUsage | None = None, output: str = "") -> str:
    """One transcript entry as plain text: its marker line, then everything it holds ("" if it draws nothing)."""
    if isinstance(ev, UserPrompt):
        return f"▶ prompt {ev.number}\n{ev.text}" if ev.number else f"▶ prompt\n{ev.text}"
    if isinstance(ev, AgentMessage):
        return f"● codex\n{ev.text}"
    if isinstance(ev, Reasoning):
        return f"∴ thinking\n{ev.text}"
    if isinstance(ev, CommandFinished):
        return f"{_command_title(ev.command, ev)}\n{ev.output or output}".rstrip("\n")
    if isinstance(ev, CommandStarted):
        return f"{_command_title(ev.command, None)}\n{output}".rstrip("\n")
    if isinstance(ev, FileChanges):
        n = len(ev.changes)
        state = "" if ev.status == "completed" else f" ({ev.status})"
        parts = [f"✎ edit: {n} file{'s' if n != 1 else ''}{state}"]
        for d in ev.changes:
            parts.append(diff_stat(d))
            parts.append(unified(d).rstrip("\n"))
        return "\n".join(parts)
    if isinstance(ev, TurnFinished):
        return _turn_line(ev, usage).plain
    if isinstance(ev, Notice | ErrorNotice | ApprovalDecided):
        text, level = notice_text(ev)
        return text if isinstance(ev, ApprovalDecided) else f"{NOTICE_MARK.get(level, '•')} {text}"
    return ""


def full_text(entries: Iterable[Any]) -> str:
    """Every entry of the transcript's log (objects with `event`, `usage`, `output` in pieces), blank lines between."""
    parts = [event_text(e.event, getattr(e, "usage", None), "".join(getattr(e, "output", ()))) for e in entries]
    return "\n\n".join(p for p in parts if p) or "(nothing in this thread yet)"


class TranscriptScreen(ModalScreen[None]):
    """The whole transcript, read-only and scrollable; `/` finds text, `n`/`N` the next/previous match."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close"),
        Binding("slash", "search", "Search"),
        Binding("n", "find(1)", "Next", show=False),
        Binding("N", "find(-1)", "Previous", show=False),
        Binding("g", "edge(0)", "Top", show=False),
        Binding("G", "edge(1)", "End", show=False),
    ]
    DEFAULT_CSS = """
    TranscriptScreen { background: $background; }
    TranscriptScreen #pager { width: 100%; height: 100%; }
    TranscriptScreen #pager-title { height: 1; text-style: bold; }
    TranscriptScreen TextArea { height: 1fr; border: none; }
    TranscriptScreen #pager-search { display: none; }
    TranscriptScreen #pager-search.open { display: block; }
    TranscriptScreen #pager-hint { height: 1; color: $text-muted; }
    """

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.query_text = ""
        self.document = Document(text)  # offsets to (row, column) and back, for the search

    def compose(self) -> ComposeResult:
        lines = self.text.count("\n") + 1
        with Vertical(id="pager"):
            yield Static(f"Transcript — the whole thread, {lines} lines", id="pager-title", markup=False)
            yield TextArea(self.text, read_only=True, soft_wrap=True, show_cursor=True,
                           highlight_cursor_line=False, id="pager-text")
            yield Input(placeholder="search the transcript (Enter finds, Esc closes the search)", id="pager-search")
            yield Static(HINT, id="pager-hint", markup=False)

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)  # open at the end, where the user was reading, as the official pager

    def action_close(self) -> None:
        """Esc or q: close the search box if it is open, else the pager."""
        search = self.query_one("#pager-search", Input)
        if search.has_class("open"):
            search.remove_class("open")
            self.query_one(TextArea).focus()
            return
        self.dismiss(None)

    def action_edge(self, end: int) -> None:
        """`g` / `G`: the first or the last line, as in less."""
        area = self.query_one(TextArea)
        area.move_cursor(area.document.end if end else (0, 0))
        area.scroll_cursor_visible()

    def action_search(self) -> None:
        """`/`: open the search box."""
        search = self.query_one("#pager-search", Input)
        search.add_class("open")
        search.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the search box: find the text from the cursor on."""
        event.stop()
        self.query_text = event.value
        self.query_one("#pager-search", Input).remove_class("open")
        self.query_one(TextArea).focus()
        self.action_find(1)

    def action_find(self, step: int) -> None:
        """Select the next (`step` 1) or previous (-1) match of the search, wrapping around; say if none."""
        if not self.query_text:
            return
        area = self.query_one(TextArea)
        doc = self.document
        haystack, needle = self.text.lower(), self.query_text.lower()
        here = doc.get_index_from_location(area.selection.end if step > 0 else area.selection.start)
        at = haystack.find(needle, here) if step > 0 else haystack.rfind(needle, 0, max(0, here))
        if at < 0:
            at = haystack.find(needle) if step > 0 else haystack.rfind(needle)
        if at < 0:
            self.notify(f"not found: {self.query_text}", severity="warning")
            return
        start, end = doc.get_location_from_index(at), doc.get_location_from_index(at + len(needle))
        area.selection = Selection(start, end)
        area.scroll_cursor_visible(center=True)

