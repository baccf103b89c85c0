"""The redo dialog: the conflicts first, then what the redo brings back, then confirm."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from ..services.driver import Driver, Preview
from ..session import RedoResult
from ..shared.lines import files_restored, plural, yours_kept
from .driver_screen import CallDone, DriverScreen
from .labels import MODE_NAMES
from .plan_view import PlanView


def conflict_lines(res: RedoResult) -> list[str]:
    """The warnings a user must see before a redo overwrites work done since the rewind."""
    out = []
    if res.changed_since_rewind:
        names = ", ".join(res.changed_since_rewind)
        out.append(f"! {plural(len(res.changed_since_rewind), 'file')} changed since the rewind and will be "
                   f"overwritten (the redo's safety snapshot keeps this version): {names}")
    kept = sorted(p for p, d in res.decided.items() if d.kind != "merged")
    if kept:
        out.append(f"! {plural(len(kept), 'file')} you changed since the rewind: kept as you left "
                   f"{'it' if len(kept) == 1 else 'them'} (Space on a file chooses it): {', '.join(kept)}")
    if res.turns_since_rewind:
        out.append(f"! {plural(res.turns_since_rewind, 'prompt')} sent on this fork since the rewind: the redo "
                   "leaves this thread (it stays listed in /threads)")
    return out


def redo_summary(res: RedoResult) -> str:
    """The one line the main app shows after a redo."""
    files = ""
    if res.restore is not None:
        files = f": {files_restored(res.restore)}{yours_kept(res.decided, res.restore)}"
    return f"redo: back where the rewind started ({MODE_NAMES.get(res.mode, res.mode)}){files}"


class RedoDialog(DriverScreen[str | None]):
    """Undo the last rewind: warn about what changed since, show the plan, apply on Enter, Esc cancels."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("enter", "confirm", "Redo", priority=True),
    ]

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver)
        self.preview: Preview | None = None
        self.working = True
        self.queued = False  # Enter came while the plan was worked out: it goes ahead once the plan is on screen

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Redo — undo the last rewind", id="title")
            yield Static("", id="conflicts", markup=False)
            yield PlanView(choosable=True, id="preview")
            yield Static("working out what the redo brings back…", id="message", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Redo (Enter)", id="confirm", variant="primary", disabled=True)
                yield Button("Cancel (Esc)", id="cancel")
            yield Static("↑↓ file · Space file in/out · Enter redo · Esc cancel", id="hint")

    def start(self) -> None:
        """Dry-run the redo off the event loop."""
        self.query_one(PlanView).show(None, "loading…")
        self.call("preview", self.driver.redo_preview)

    def done(self, msg: CallDone) -> None:
        """Show the dry run, or the redo's outcome."""
        self.working = False
        if msg.tag == "preview":
            self._previewed(msg)
        elif msg.stopped:  # Ctrl+C: the files are as before, the transcript says so
            self.dismiss(None)
        elif msg.error is not None:
            self.say(f"redo failed: {msg.error}", error=True)
        else:
            self.dismiss(redo_summary(msg.value))

    def _previewed(self, msg: CallDone) -> None:
        view = self.query_one(PlanView)
        queued, self.queued = self.queued, False
        if msg.error is not None:
            view.show(None)
            if msg.error.startswith("nothing to redo"):
                self.query_one("#title", Static).update("Nothing to redo")
                self.say("nothing to redo: no rewind on this thread to undo (Esc closes)")
            else:
                self.say(msg.error, error=True)
            return
        self.preview = msg.value
        res = msg.value.result
        assert isinstance(res, RedoResult)
        warnings = conflict_lines(res)
        conflicts = self.query_one("#conflicts", Static)
        conflicts.update("\n".join(warnings) if warnings else "no conflicts: nothing changed since the rewind")
        conflicts.set_class(bool(warnings), "warning")
        note = ("files: left exactly as they are (the rewind was conversation only)"
                if res.restore is None else "")
        view.show(msg.value, note)
        conv = ("conversation: back to the original thread with all its turns"
                if res.mode != "files" else "conversation: stays as it is (the rewind was files only)")
        self.say(conv)
        self.query_one("#confirm", Button).disabled = False
        if queued and warnings:  # what changed since the rewind is read before it is overwritten
            self.say(f"{conv} · your Enter waited for this plan: read the warnings above, then Enter redoes")
        elif queued:
            self.action_confirm()

    def action_confirm(self) -> None:
        """Enter: apply the redo; pressed while the plan is worked out, once it is on screen (it was lost)."""
        if self.working and self.preview is None:
            if not self.queued:
                self.queued = True
                self.say("Enter noted: the redo goes ahead as soon as its plan is worked out (Esc cancels)")
            return
        if self.working or self.preview is None:
            return

        def go() -> None:
            self.working = True
            self.say("redoing… Ctrl+C stops it (files as before)")
            choices, driver = dict(self.query_one(PlanView).choices), self.driver
            self.call("redo", lambda: driver.redo(choices))

        self.ask_first(self.preview, "redo", go)

    def action_cancel(self) -> None:
        """Esc: leave without redoing."""
        if not self.working or self.preview is None:
            self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """The buttons do what Enter and Esc do."""
        event.stop()
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.action_cancel()
