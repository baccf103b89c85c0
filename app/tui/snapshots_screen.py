"""This workspace's snapshots: pick one, see exactly what restoring it does, confirm."""

from __future__ import annotations

from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from snapshot_store import RestoreResult
from snapshot_store.store import SnapshotInfo

from ..services.driver import Driver, Preview
from ..shared.lines import files_restored, plural
from .driver_screen import CallDone, DriverScreen
from .labels import ago, short
from .lists import KeptList
from .plan_view import PlanView


def snapshot_label(s: SnapshotInfo, now: float | None = None) -> str:
    """`id 1a2b3c4d · 3 min ago · pre-turn · 12 files`, the label beneath: it may name another snapshot's id."""
    head = " · ".join([f"id {short(s.id)}", ago(s.created, now), s.kind, plural(s.file_count, "file")])
    return f"{head}\n    {s.label}" if s.label else head


def restore_summary(snap: str, res: RestoreResult) -> str:
    """The one line the main app shows after a restore (with the id that undoes it)."""
    return (f"restored snapshot {short(snap)}: {files_restored(res)}; "
            f"the state before is snapshot {short(res.safety_id)}")


class SnapshotsScreen(DriverScreen[str | None]):
    """Pick a snapshot; the preview shows its plan and diffs; Enter restores, Esc cancels."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel"),
        Binding("enter", "confirm", "Restore", priority=True),
    ]

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver)
        self.snaps: list[SnapshotInfo] = []
        self.working = False
        self._want: str | None = None
        self._ready: str | None = None
        self.preview: Preview | None = None  # the plan on screen (its warnings ask before the restore)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Snapshots of this workspace, newest first", id="title")
            with Horizontal(id="panes"):
                with Vertical(id="left"):
                    yield KeptList(id="snapshots")
                yield PlanView(id="preview")
            yield Static("loading the snapshots…", id="message", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Restore (Enter)", id="confirm", variant="primary")
                yield Button("Cancel (Esc)", id="cancel")
            yield Static("↑↓ snapshot · Tab plan · Enter restore · Esc cancel", id="hint")

    def start(self) -> None:
        """List the snapshots off the event loop."""
        self.query_one("#snapshots", OptionList).focus()
        driver = self.driver

        def snapshots() -> list[SnapshotInfo]:
            driver.require_idle("restore a snapshot")  # listing would wait for the running turn
            return driver.snapshots()

        self.call("list", snapshots)

    def done(self, msg: CallDone) -> None:
        """Show the list, a preview, or the restore's summary."""
        tag: Any = msg.tag
        if tag == "list":
            if msg.error is not None:
                self.say(f"cannot list the snapshots: {msg.error}", error=True)
                return
            self.snaps = list(msg.value)
            listing = self.query_one("#snapshots", OptionList)
            listing.set_options(Option(Content(snapshot_label(s)), id=s.id) for s in self.snaps)
            if not self.snaps:
                self.say("no snapshots of this workspace yet")
                return
            listing.highlighted = 0
            self._preview(self.snaps[0].id)
        elif isinstance(tag, tuple) and tag[0] == "preview":
            if tag[1] != self._want:
                return
            if msg.error is not None:
                self.query_one(PlanView).show(None)
                self.say(msg.error, error=True)
                return
            self._ready = tag[1]
            self.preview = msg.value
            self.query_one(PlanView).show(msg.value)
            self.say(f"restore snapshot {short(tag[1])}: a safety snapshot of the current state is taken first")
        elif isinstance(tag, tuple) and tag[0] == "restore":
            self.working = False
            if msg.stopped:  # Ctrl+C: the files are as before, the transcript says so
                self.dismiss(None)
            elif msg.error is not None:
                self.say(f"restore failed: {msg.error}", error=True)
            else:
                self.dismiss(restore_summary(tag[1], msg.value))

    def _preview(self, snap: str) -> None:
        self._want, self._ready = snap, None
        self.query_one(PlanView).show(None, "working out the plan…")
        self.call(("preview", snap), lambda: self.driver.snapshot_preview(snap))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        """A new snapshot highlighted: preview it."""
        if event.option_list.id == "snapshots" and event.option.id and event.option.id != self._want:
            self._preview(event.option.id)

    def action_confirm(self) -> None:
        """Enter: restore the previewed snapshot."""
        if self.working or self._ready is None:
            return
        snap = self._ready

        def go() -> None:
            self.working = True
            self.say(f"restoring snapshot {short(snap)}… Ctrl+C stops it (files as before)")
            self.call(("restore", snap), lambda: self.driver.restore_snapshot(snap))

        self.ask_first(self.preview, "restore", go)

    def action_cancel(self) -> None:
        """Esc: leave without restoring."""
        if not self.working:
            self.dismiss(None)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """The buttons do what Enter and Esc do."""
        event.stop()
        if event.button.id == "confirm":
            self.action_confirm()
        else:
            self.action_cancel()
