"""This workspace's threads, newest first (for /resume and /threads): choose one to load its transcript."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..services.driver import Driver
from ..session import ThreadSummary
from ..shared.lines import DAMAGED_RECORD, plural
from .driver_screen import CallDone, DriverScreen
from .labels import ago, first_line
from .lists import KeptList


def thread_label(t: ThreadSummary, current: str | None, now: float | None = None) -> str:
    """Its label (first prompt, fork origin), who started it, prompt and snapshot counts, redo depth, age."""
    mark = "* " if t.thread_id == current else "  "
    head = f"{mark}{t.label or '(no prompt yet)'}"
    parts = [plural(t.prompts, "prompt")]
    if t.damaged:
        parts.append(DAMAGED_RECORD)
    elif t.prompts:
        parts.append(f"{t.with_snapshots} with snapshots")
        if t.conversation_only:
            parts.append(f"{t.conversation_only} conversation-only")
    if t.source:
        parts.append(f"from {t.source}")
    if t.redo_depth:
        parts.append(f"redo {t.redo_depth}")
    parts.append(ago(t.updated, now))
    parts.append(f"id {t.thread_id}")  # Codex ids are time-ordered: their prefixes look alike
    return f"{head}\n    {' · '.join(parts)}"


class ThreadsScreen(DriverScreen[str | None]):
    """Pick a thread of this workspace; Enter loads it, Esc cancels."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver)
        self.threads: list[ThreadSummary] = []
        self.working = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Threads of this workspace, newest first (* current)", id="title")
            yield KeptList(id="threads")
            yield Static("loading the threads…", id="message", markup=False)
            yield Static("↑↓ thread · Enter resume · Esc cancel — conversation-only prompts cannot restore files",
                         id="hint")

    def start(self) -> None:
        """List the threads off the event loop."""
        self.query_one("#threads", OptionList).focus()
        driver = self.driver

        def threads() -> list[ThreadSummary]:
            driver.require_idle("switch threads")  # listing would wait for the running turn
            return driver.threads()

        self.call("list", threads)

    def done(self, msg: CallDone) -> None:
        """Show the list, or the loaded thread's summary."""
        if msg.tag == "list":
            if msg.error is not None:
                self.say(f"cannot list the threads: {msg.error}", error=True)
                return
            self.threads = list(msg.value)
            current = self.driver.thread_id
            listing = self.query_one("#threads", OptionList)
            listing.set_options(Option(Content(thread_label(t, current)), id=t.thread_id) for t in self.threads)
            if self.threads:
                listing.highlighted = 0
            self.say(f"{plural(len(self.threads), 'thread')}" if self.threads
                      else "no threads in this workspace yet")
            return
        self.working = False
        if msg.error is not None:
            self.say(f"cannot resume: {msg.error}", error=True)
            return
        t: ThreadSummary = msg.tag[1]
        self.dismiss(f"resumed thread {t.thread_id}: {first_line(t.preview, 50)}")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter (or a click): load the thread in a worker."""
        event.stop()
        if self.working or not 0 <= event.option_index < len(self.threads):
            return
        t = self.threads[event.option_index]
        self.working = True
        self.say(f"loading thread {t.thread_id}…")
        self.call(("load", t), lambda: self.driver.load(t.thread_id))

    def action_cancel(self) -> None:
        """Esc: keep the current thread."""
        if not self.working:
            self.dismiss(None)
