"""/diff [N]: the workspace now against the start of the current turn (or of prompt N), file by file."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..codex.events import FileStat
from ..services.driver import Driver
from ..shared.lines import plural
from .diffview import DiffView, stat_label
from .driver_screen import CallDone, DriverScreen
from .lists import KeptList


class DiffScreen(DriverScreen[None]):
    """A per-file list with +/- counts and the diff of the highlighted file; Esc closes."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
    ]

    def __init__(self, driver: Driver, prompt: int | None = None) -> None:
        super().__init__(driver)
        self.prompt = prompt
        self.files: list[tuple[FileStat, str]] = []

    def compose(self) -> ComposeResult:
        since = f"the start of prompt {self.prompt}" if self.prompt is not None else "the start of the last prompt"
        with Vertical(id="dialog"):
            yield Static(f"Diff — the workspace now against {since}", id="title")
            with Horizontal(id="panes"):
                with Vertical(id="left"):
                    yield KeptList(id="files")
                with VerticalScroll(id="diff-scroll"):
                    yield DiffView("", id="diff")
            yield Static("comparing…", id="message", markup=False)
            yield Static("↑↓ file · Tab diff (scroll) · Esc close", id="hint")

    def start(self) -> None:
        """Compare off the event loop."""
        self.query_one("#files", OptionList).focus()
        self.call("diff", lambda: self.driver.diff(self.prompt))

    def done(self, msg: CallDone) -> None:
        """Show the files and the first diff."""
        if msg.error is not None:
            self.say(msg.error, error=True)
            return
        self.files = list(msg.value)
        listing = self.query_one("#files", OptionList)
        listing.set_options(Option(Content(stat_label(st)), id=str(i)) for i, (st, _d) in enumerate(self.files))
        if not self.files:
            self.say("no changes")
            self.query_one("#diff", DiffView).show("(no changes)")
            return
        added = sum(st.added or 0 for st, _d in self.files)
        removed = sum(st.removed or 0 for st, _d in self.files)
        self.say(f"{plural(len(self.files), 'file')} changed, +{added} -{removed}")
        listing.highlighted = 0
        self.query_one("#diff", DiffView).show(self.files[0][1])

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """Follow the highlighted file with its diff."""
        if 0 <= event.option_index < len(self.files):
            self.query_one("#diff", DiffView).show(self.files[event.option_index][1])
            self.query_one("#diff-scroll", VerticalScroll).scroll_home(animate=False)

    def action_close(self) -> None:
        """Esc: back to the session."""
        self.dismiss(None)
