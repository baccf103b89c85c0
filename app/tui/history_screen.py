"""/history TEXT: every workspace's conversations searched; a hit here resumes its thread, another is read-only."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option

from ..codex.events import short_thread
from ..history.browse import Found, Hit, Shown, resume_hint, search_hits, show_session
from ..history.catalog import HistoryError
from ..history.render import short_time
from ..services.driver import Driver
from .driver_screen import CallDone, DriverScreen

MATCH_STYLE = "bold underline reverse"  # the match stands out without colour
MARKDOWN_MAX = 200_000  # longer conversations are shown as plain text (Markdown layout gets slow)


class Failed:
    """A history problem to show as one line (an unknown id, an empty search text)."""

    def __init__(self, message: str) -> None:
        self.message = message


def _guarded(fn: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        try:
            return fn()
        except HistoryError as exc:
            return Failed(str(exc))
    return run


def hit_label(hit: Hit) -> Content:
    """here/other, short id, prompt number, date, source, workspace; then the excerpt, its match marked."""
    where = "here " if hit.here else "other"  # this workspace (Enter resumes) or another (Enter reads)
    head = (f"{where}  {short_thread(hit.session_id)}  #{hit.prompt}  {short_time(hit.at)}  {hit.source}  "
            f"{hit.workspace}")
    return Content.assemble(head, "\n    ", f"{hit.kind}: ",
                            *((text, MATCH_STYLE) if match else text for text, match in hit.marked()))


class ConversationView(ModalScreen[None]):
    """A conversation of another workspace, read-only and scrollable; Esc goes back to the hits."""

    CSS_PATH = "dialogs.tcss"
    DEFAULT_CSS = """
    ConversationView #conversation { height: 1fr; }
    ConversationView #readonly { height: auto; text-style: bold; margin-bottom: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Back")]

    def __init__(self, shown: Shown) -> None:
        super().__init__()
        self.shown = shown

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(f"Session {self.shown.session_id} (read-only)", id="title", markup=False)
            yield Static(resume_hint(self.shown), id="readonly", markup=False)
            with VerticalScroll(id="conversation"):
                if len(self.shown.text) <= MARKDOWN_MAX:
                    yield Markdown(self.shown.text, id="text")
                else:
                    yield Static(self.shown.text, id="text", markup=False)
            yield Static("↑↓ PgUp PgDn scroll · Esc back to the hits", id="hint")

    def on_mount(self) -> None:
        self.query_one("#conversation", VerticalScroll).focus()

    def action_close(self) -> None:
        """Back to the hits."""
        self.dismiss(None)


class HistoryScreen(DriverScreen[str | None]):
    """Search every workspace's conversations; Enter resumes a hit of this workspace or reads another's."""

    DEFAULT_CSS = """
    HistoryScreen #hits { height: 1fr; }
    HistoryScreen #query { margin-bottom: 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, driver: Driver, text: str = "") -> None:
        super().__init__(driver)
        self.text = text.strip()
        self.hits: list[Hit] = []
        self.searches = 0  # only the newest search's result is shown
        self.working = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("History: every workspace's conversations, newest first", id="title")
            yield Input(self.text, id="query", placeholder="search text (case-insensitive; --regex, "
                        "--include tools, --archived first), Enter searches")
            yield OptionList(id="hits")
            yield Static("", id="message", markup=False)
            yield Static("Enter on a hit: resume it (here: this workspace) or read it (other: another workspace) · "
                         "Tab: search box · Esc close", id="hint")

    @property
    def here(self) -> str:
        return str(self.driver.opts.cwd)

    def start(self) -> None:
        if self.text:
            self.search(self.text)
        else:
            self.query_one("#query", Input).focus()
            self.say("type what to look for and press Enter")

    def search(self, text: str) -> None:
        """Search off the event loop (the history core reads rollouts and its index)."""
        self.searches += 1
        home, here = self.driver.opts.codex_home, self.here
        self.say(f"searching for {text!r}…")
        self.call(("search", self.searches), _guarded(lambda: search_hits(home, text, here)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if text:
            self.search(text)

    def done(self, msg: CallDone) -> None:
        kind = msg.tag[0]
        if kind == "search":
            if msg.tag[1] != self.searches:
                return
            self._listed(msg)
            return
        self.working = False
        if msg.error is not None or isinstance(msg.value, Failed):
            err = msg.error if msg.error is not None else msg.value.message
            self.say(f"cannot {'resume' if kind == 'load' else 'read'} that session: {err}", error=True)
            return
        if kind == "load":
            self.dismiss(None)  # the transcript says "resumed from history…" (ThreadLoaded)
            return
        self.say("")
        self.app.push_screen(ConversationView(msg.value))

    def _listed(self, msg: CallDone) -> None:
        listing = self.query_one("#hits", OptionList)
        if msg.error is not None or isinstance(msg.value, Failed):
            err = msg.error if msg.error is not None else msg.value.message
            self.say(f"cannot search: {err}", error=True)
            return
        found: Found = msg.value
        self.hits = found.hits
        listing.set_options(Option(hit_label(h)) for h in self.hits)
        self.say(found.summary)
        if self.hits:
            listing.highlighted = 0
            listing.focus()
        else:
            self.query_one("#query", Input).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter: a hit of this workspace loads its thread; another workspace's opens read-only."""
        event.stop()
        if self.working or not 0 <= event.option_index < len(self.hits):
            return
        hit = self.hits[event.option_index]
        self.working = True
        driver = self.driver
        if hit.here:
            self.say(f"loading thread {hit.session_id}…")

            def load() -> None:
                driver.require_idle("resume a thread")
                driver.load(hit.session_id, reason=f"resumed from history: the hit is in prompt {hit.prompt}")

            self.call(("load", hit), load)
        else:
            home, here = driver.opts.codex_home, self.here
            self.say(f"reading session {hit.session_id}…")
            self.call(("read", hit), _guarded(lambda: show_session(home, hit.session_id, here)))

    def action_cancel(self) -> None:
        """Esc: keep the current thread."""
        if not self.working:
            self.dismiss(None)
