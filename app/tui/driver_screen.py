"""The base of every dialog: Driver calls run in thread workers and come back as messages, never widget touches."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar

from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from snapshot_store import StoreError

from ..errors import Stopped
from ..services.driver import Driver, Preview
from .ask_dialog import ask_then

ResultT = TypeVar("ResultT")


class CallDone(Message, bubble=False):
    """A Driver call finished: `value` on success, `error` (one line for the user) on failure."""

    def __init__(self, tag: Any, value: Any = None, error: str | None = None, stopped: bool = False) -> None:
        super().__init__()
        self.tag = tag
        self.value = value
        self.error = error
        self.stopped = stopped  # Ctrl+C stopped it (the driver said so in the transcript): nothing changed


def breakpoint_class(size: int, breakpoints: list[tuple[int, str]]) -> str:
    """The class Textual gives a screen of this size (the last breakpoint at or below it)."""
    return max((b for b in breakpoints if size >= b[0]), default=breakpoints[0])[1]


class DriverScreen(ModalScreen[ResultT]):
    """A modal dialog over a Driver: `call` runs blocking work off the event loop, `done` shows its result."""

    CSS_PATH = "dialogs.tcss"
    # Small terminals get a compact layout (dialogs.tcss): `-narrow` stacks the panes, `-short` drops the frame
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 (Screen declares it so)
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]  # noqa: RUF012
    # A dialog filling (nearly) the whole screen is drawn on an opaque background: under a see-through one Textual
    # renders the whole main screen again, tinted, at every frame of the dialog — the most of the rewind picker's
    # first frame (bench/bench_tui.py, Ctrl+R). Small dialogs (/model, /permissions) keep the tinted view around them.
    OPAQUE = True
    # Ctrl+C: the app's own (interrupt, clear, quit) skips a dialog; here it stops a rewind, redo or restore that
    # changes files (it was ignored without a word), else does what Esc does
    BINDINGS: ClassVar[list[BindingType]] = [Binding("ctrl+c", "stop", "Stop", show=False)]

    def __init__(self, driver: Driver) -> None:
        super().__init__(classes="-opaque" if self.OPAQUE else None)
        self.driver = driver
        self.in_flight = 0  # calls whose result the dialog has not shown yet
        # the breakpoint classes from the start: set by Textual only at the first resize, after the first frame,
        # they restyled every widget of the dialog and drew it all again
        with contextlib.suppress(Exception):  # no running app (a unit test building the screen alone)
            width, height = self.app.size
            self.add_class(breakpoint_class(width, self.HORIZONTAL_BREAKPOINTS),
                           breakpoint_class(height, self.VERTICAL_BREAKPOINTS))

    def on_mount(self) -> None:
        """Buttons are for the mouse (keys do the same), so Enter never lands on Cancel by focus."""
        for button in self.query(Button):
            button.can_focus = False
        self.start()

    def start(self) -> None:
        """Begin the dialog's first Driver call."""

    def call(self, tag: Any, fn: Callable[[], Any], wait: float = 0.0) -> None:
        """Run `fn` in a thread worker; its result arrives as `CallDone(tag, …)` (errors included). `wait`: the
        result that comes within that many seconds is shown before this returns (in the frame being built), a
        later one arrives as a message as usual."""
        self.in_flight += 1
        lock = threading.Lock()
        came = threading.Event()
        waiting = [wait > 0]  # the caller still waits: the result goes to `box`, not the message queue
        box: list[CallDone] = []

        def deliver(msg: CallDone) -> None:
            with lock:
                if waiting[0]:
                    box.append(msg)
                    came.set()
                    return
            self.post_message(msg)

        def run() -> None:
            try:
                value = fn()
            except StoreError as exc:  # SessionError and Busy are StoreErrors: one line for the user
                deliver(CallDone(tag, error=str(exc), stopped=isinstance(exc, Stopped)))
            except Exception as exc:  # a dialog shows every failure; it never crashes the app
                deliver(CallDone(tag, error=f"{type(exc).__name__}: {exc}"))
            else:
                deliver(CallDone(tag, value))

        if wait <= 0:
            self.run_worker(run, thread=True, group="driver", exit_on_error=False)
            return
        # A thread of its own: a Textual worker starts from the event loop, which is waiting here.
        threading.Thread(target=run, name=f"codexr-{type(self).__name__}", daemon=True).start()
        came.wait(wait)
        with lock:
            waiting[0] = False
        if box:
            self.on_call_done(box[0])

    def on_call_done(self, msg: CallDone) -> None:
        """Hand a result to `done` (on the UI thread)."""
        try:
            self.done(msg)
        finally:
            self.in_flight -= 1

    def done(self, msg: CallDone) -> None:
        """Show a finished call's result."""

    def action_stop(self) -> None:
        """Ctrl+C: stop the rewind, redo or restore this dialog runs (the files it changed go back; the transcript
        says so when it has), or say that it finishes first; with none running, what Esc does."""
        stop = getattr(self.driver, "stop_restore", None)  # a replay's driver changes no files
        line = stop() if stop is not None else None
        if line is not None:
            self.say(line)
            return
        for name in ("action_cancel", "action_back", "action_close"):  # what each dialog's Esc runs
            esc = getattr(self, name, None)
            if esc is not None:
                esc()
                return

    def ask_first(self, preview: Preview | None, what: str, go: Callable[[], None]) -> None:
        """Run `go` now, or after an explicit yes when another codexr session is live here (its work is at stake)."""
        if preview is None or not preview.must_ask:
            go()
            return

        ask_then(self.app, f"Another codexr session is live in this workspace: {what} anyway? [y/N]",
                 preview.warnings, go, lambda: self.say(f"no {what}: nothing changed"))

    def say(self, text: str, error: bool = False) -> None:
        """The dialog's one-line message (errors say so in words, not only in colour)."""
        msg = self.query_one("#message", Static)
        msg.update(("error: " if error and not text.startswith("error") else "") + text)
        msg.set_class(error, "error")
