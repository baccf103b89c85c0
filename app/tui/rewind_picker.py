"""The rewind picker: every prompt of the thread, the exact plan of the rewind, a mode, confirm."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from ..services.driver import Driver, Preview, PromptRow
from ..session import RewindResult
from ..shared.lines import files_restored, plural, yours_kept
from ..shared.vocab import RewindMode
from .driver_screen import CallDone, DriverScreen
from .labels import MODE_KEYS, MODE_NAMES, ago, files_label, first_line
from .lists import KeptList
from .plan_view import PlanView

MODES = tuple(RewindMode)
ROWS_WAIT_S = 0.15  # the longest the picker's first frame waits for its rows (Codex's thread/read: ~6 ms quiet)


def row_label(row: PromptRow, now: float | None = None) -> str:
    """`2  just now  [snapshot]  fix the tests` and the files that turn changed on a second line."""
    snap = "snapshot gone" if row.snapshot_gone else ("snapshot" if row.has_snapshot else "no snapshot")
    if not row.by_codexr:
        snap = "no snapshot: sent outside codexr"
    return (f"{row.number:>2}  {ago(row.started, now)}  [{snap}]  {first_line(row.text)}\n"
            f"    {files_label(row.files)}")


def unavailable(row: PromptRow, mode: str) -> str | None:
    """Why `mode` cannot apply to this prompt (None when it can)."""
    if mode == "conversation":
        return None
    if row.snapshot_gone:
        return f"prompt {row.number}'s file snapshot is gone"
    if not row.has_snapshot:
        return row.no_snapshot_reason or f"prompt {row.number} ran without a file snapshot"
    return None


def mode_label(mode: str, reason: str | None, chosen: bool) -> str:
    """`(•) [b] files and conversation` — the chosen one marked in text, an unavailable one with why."""
    text = f"{'(•)' if chosen else '( )'} [{MODE_KEYS[mode]}] {MODE_NAMES[mode]}"
    return text if reason is None else f"{text} — unavailable: {reason}"


def rewind_summary(res: RewindResult) -> str:
    """The one line the main app shows after a rewind."""
    files = ""
    if res.restore is not None:
        files = f": {files_restored(res.restore)}{yours_kept(res.decided, res.restore)}"
    return f"rewound to prompt {res.to_prompt} ({MODE_NAMES.get(res.mode, res.mode)}){files}; /redo brings it back"


class RewindPicker(DriverScreen[str | None]):
    """Pick a prompt and a mode, see exactly what the rewind will do, confirm (Enter) or cancel (Esc)."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("enter", "confirm", "Rewind", priority=True),
        Binding("b", "mode('both')", "Files and conversation"),
        Binding("f", "mode('files')", "Files only"),
        Binding("c", "mode('conversation')", "Conversation only"),
    ]

    def __init__(self, driver: Driver, start_prompt: int | None = None) -> None:
        super().__init__(driver)
        self.start_prompt = start_prompt
        self.rows: list[PromptRow] = []
        self.mode = "both"  # the mode in effect for the highlighted prompt
        self.chosen = "both"  # the user's choice, back in effect on a prompt that allows it
        self.working = False
        self._ready = False  # the plan of (prompt, mode) is on screen: confirming rewinds exactly that
        self._want: tuple[int, str] | None = None
        self._queued: tuple[int, str] | None = None  # Enter came before this plan was on screen: it goes ahead then
        self._enter_early = False  # Enter came before the prompts were listed: for the plan of the one highlighted
        self.preview: Preview | None = None  # the plan on screen (its warnings ask before the rewind)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Rewind — choose the prompt to go back to (before it ran)", id="title")
            with Horizontal(id="panes"):
                with Vertical(id="left"):
                    yield KeptList(id="prompts")
                    yield Static("Mode", classes="label")
                    choices = [Option(Content(mode_label(m, None, m == "both")), id=m) for m in MODES]
                    yield KeptList(*choices, id="modes")
                yield PlanView(choosable=True, id="preview")
            yield Static("loading the prompts…", id="message", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Rewind (Enter)", id="confirm", variant="primary")
                yield Button("Cancel (Esc)", id="cancel")
            yield Static("↑↓ prompt · Tab next pane · b/f/c mode · Space file in/out · Enter rewind · Esc cancel",
                         id="hint")

    def start(self) -> None:
        """List the prompts off the event loop, waiting a moment for them: shown in the picker's first frame, not in
        a second one after a frame that says "loading" (~60 ms of Ctrl+R at load 9, bench/README "Eleventh pass")."""
        self.query_one("#prompts", OptionList).focus()
        driver = self.driver

        def rows() -> list[PromptRow]:
            driver.require_idle("rewind")  # listing would wait for the running turn
            return driver.prompt_rows()

        self.call("rows", rows, wait=ROWS_WAIT_S)

    # ------------------------------------------------------------------ results
    def done(self, msg: CallDone) -> None:
        """Show a Driver result (or its error) in the dialog."""
        tag: Any = msg.tag
        if tag == "rows":
            self._rows_loaded(msg)
        elif isinstance(tag, tuple) and tag[0] == "preview":
            if tag[1:] == self._want:
                self._preview_loaded(msg)
        elif tag == "rewind":
            self.working = False
            if msg.stopped:  # Ctrl+C: the files are as before, the transcript says so
                self.dismiss(None)
            elif msg.error is not None:
                self.say(f"rewind failed: {msg.error}", error=True)
            else:
                self.dismiss(rewind_summary(msg.value))

    def _rows_loaded(self, msg: CallDone) -> None:
        if msg.error is not None:
            self.say(f"cannot list the prompts: {msg.error}", error=True)
            return
        self.rows = list(msg.value)
        listing = self.query_one("#prompts", OptionList)
        listing.set_options(Option(Content(row_label(r)), id=str(r.number)) for r in self.rows)
        if not self.rows:
            self.say("nothing to rewind: no prompt was sent in this thread yet", error=True)
            return
        numbers = [r.number for r in self.rows]
        start = self.start_prompt if self.start_prompt in numbers else numbers[-1]
        listing.highlighted = numbers.index(start)
        self._select(start)
        if self._enter_early:
            self._enter_early = False
            self._queue_enter()

    def _preview_loaded(self, msg: CallDone) -> None:
        view = self.query_one(PlanView)
        row = self.current_row()
        queued, self._queued = self._queued == self._want, None
        if msg.error is not None:
            view.show(None)
            self.say(msg.error, error=True)
            return
        self._ready = True
        self.preview = msg.value
        note = ""
        if self.mode == "conversation":
            note = "files: left exactly as they are (conversation only)"
        view.show(msg.value if self.mode != "conversation" else None, note)
        conv = ("conversation: forks the thread before this prompt; its text goes back to the composer"
                if self.mode != "files" else "conversation: stays as it is (files only)")
        self.say(f"prompt {row.number if row else '?'} · {MODE_NAMES[self.mode]} · {conv}")
        if not queued:
            return
        res = msg.value.result
        asked = sum(1 for d in getattr(res, "decided", {}).values() if d.kind == "conflict")
        if asked and self.mode != "conversation":  # a conflict is the user's to choose: the Enter does not pass it
            self.say(f"your Enter waited for this plan: it has {plural(asked, 'conflict')} (listed first; Space "
                     "chooses) — look, then Enter rewinds")
        else:
            self.action_confirm()

    # ------------------------------------------------------------------ choices
    def current_row(self) -> PromptRow | None:
        """The highlighted prompt."""
        listing = self.query_one("#prompts", OptionList)
        idx = listing.highlighted
        return self.rows[idx] if idx is not None and 0 <= idx < len(self.rows) else None

    def _select(self, number: int) -> None:
        row = next((r for r in self.rows if r.number == number), None)
        if row is None:
            return
        self.mode = self.chosen if unavailable(row, self.chosen) is None else "conversation"
        self._show_modes(row)
        self._preview()

    def _show_modes(self, row: PromptRow) -> None:
        """Mark the chosen mode in text; disable, with the reason, the modes this prompt cannot use."""
        modes = self.query_one("#modes", OptionList)
        for m in MODES:
            reason = unavailable(row, m)
            modes.replace_option_prompt(m, Content(mode_label(m, reason, m == self.mode)))
            if modes.get_option(m).disabled != (reason is not None):  # toggling moves the highlight
                (modes.enable_option if reason is None else modes.disable_option)(m)
        modes.highlighted = MODES.index(self.mode)

    def _preview(self) -> None:
        row = self.current_row()
        if row is None:
            return
        self._want = (row.number, self.mode)
        self._ready = False
        self._queued = None  # an Enter pressed for another prompt or mode does not carry over to this one
        self.query_one(PlanView).show(None, "working out the plan…")
        driver, number, mode = self.driver, row.number, self.mode
        self.call(("preview", number, mode), lambda: driver.rewind_preview(number, mode))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """A new prompt or mode: preview it."""
        if event.option_list.id == "prompts" and self.rows:
            row = self.current_row()
            if row is not None and (self._want is None or self._want[0] != row.number):
                self._select(row.number)
        elif (event.option_list.id == "modes" and event.option_list.has_focus  # the user moved, not the code
              and event.option.id in MODES and event.option.id != self.mode):
            self.action_mode(str(event.option.id))

    def action_mode(self, mode: str) -> None:
        """Pick a mode by its key (ignored, with the reason shown, when it cannot apply)."""
        row = self.current_row()
        if row is None or self.working:
            return
        reason = unavailable(row, mode)
        if reason is not None:
            self.say(f"{MODE_NAMES[mode]} is unavailable: {reason}", error=True)
            return
        self.chosen = mode
        if mode != self.mode:
            self.mode = mode
            self._show_modes(row)
            self._preview()

    # ------------------------------------------------------------------ confirm / cancel
    def action_confirm(self) -> None:
        """Enter: rewind to the highlighted prompt in the chosen mode."""
        row = self.current_row()
        if self.working:
            return
        if row is None:
            self._enter_early = not self.rows and self.in_flight > 0  # the prompts are still being listed
            if self._enter_early:
                self.say("Enter noted: it rewinds once the prompts are listed and the plan is worked out (Esc cancels)")
            return
        if not self._ready:  # the plan is still being worked out: the Enter waits for it (it was lost)
            if self._want is not None and self.in_flight > 0:
                self._queue_enter()
            return
        driver, number, mode = self.driver, row.number, self.mode
        choices = dict(self.query_one(PlanView).choices)

        def go() -> None:
            self.working = True
            self.say(f"rewinding to prompt {number} ({MODE_NAMES[mode]})… Ctrl+C stops it (files as before)")
            self.call("rewind", lambda: driver.rewind(number, mode, choices))

        self.ask_first(self.preview if mode != "conversation" else None, "rewind", go)

    def _queue_enter(self) -> None:
        """Confirm the plan being worked out once it is on screen (unless it holds a conflict to choose)."""
        if self._want is None or self._queued == self._want:
            return
        self._queued = self._want
        number, mode = self._want
        self.say(f"Enter noted: rewinding to prompt {number} ({MODE_NAMES[mode]}) as soon as its plan is worked out "
                 "(Esc cancels)")

    def action_cancel(self) -> None:
        """Esc: leave without rewinding."""
        if not self.working:
            self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """The buttons do what Enter and Esc do."""
        event.stop()
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.action_cancel()
