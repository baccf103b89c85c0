"""/permissions: pick the approval policy and sandbox (the official TUI's three presets) for the next prompts."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widget import Widget
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..codex.events import Status
from ..codex.permissions import FULL_ACCESS_QUESTION, FULL_ACCESS_WARNING, PRESETS, Preset, matching_preset
from .ask_dialog import ask_then
from .driver_screen import CallDone, DriverScreen


def preset_label(p: Preset, current: Preset | None) -> str:
    """`Read Only (current)` over its description and the approval/sandbox pair it sets."""
    mark = " (current)" if p is current else ""
    return f"{p.label}{mark}\n    {p.description}\n    approval {p.approval} · sandbox {p.sandbox}"


def confirm_then(owner: Widget, preset: Preset, go: Callable[[], None]) -> None:
    """Run `go` now, or for Full Access after an explicit yes ("Enable Full Access?", as the official TUI asks)."""
    if preset.sandbox != "danger-full-access":
        go()
        return

    ask_then(owner.app, f"{FULL_ACCESS_QUESTION} [y/N]", (FULL_ACCESS_WARNING,), go,
             lambda: owner.notify("Full Access not enabled: the permissions stay as they were"))


class PermissionsScreen(DriverScreen[str | None]):
    """Enter applies the highlighted preset from the next prompt on; Esc keeps the current settings."""

    OPAQUE = False  # a small dialog: the main screen stays in view around it

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static("Update Model Permissions", id="title")
            yield Static("", id="now", markup=False)
            yield OptionList(*(Option(Content(preset_label(p, None)), id=p.id) for p in PRESETS), id="choices")
            yield Static("", id="message", markup=False)
            yield Static("↑↓ choose · Enter apply from the next prompt on · Esc cancel", id="hint")

    def start(self) -> None:
        """Read what the next turn runs with (Codex's config before the first prompt) off the event loop."""
        self.query_one("#choices", OptionList).focus()
        self.call("status", self.driver.status_detail)

    def done(self, msg: CallDone) -> None:
        """Mark the current preset; or close once a choice was applied."""
        if msg.tag == "status":
            if msg.error is not None:
                self.say(f"cannot read the current settings: {msg.error}", error=True)
                return
            st: Status = msg.value
            current = matching_preset(st.approval.split(" (")[0], st.sandbox.split(" (")[0])
            self.query_one("#now", Static).update(f"now: approval {st.approval or 'unknown'} · sandbox "
                                                  f"{st.sandbox or 'unknown'}")
            choices = self.query_one("#choices", OptionList)
            highlighted = choices.highlighted
            choices.set_options(Option(Content(preset_label(p, current)), id=p.id) for p in PRESETS)
            choices.highlighted = PRESETS.index(current) if current is not None else highlighted or 0
            return
        if msg.error is not None:
            self.say(msg.error, error=True)
            return
        self.dismiss(None)  # the driver wrote "Permissions updated to …" into the transcript

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter: apply the preset (in a worker)."""
        event.stop()
        preset = PRESETS[event.option_index]
        confirm_then(self, preset, lambda: self.call("set", lambda: self.driver.set_permissions(preset.id)))

    def action_cancel(self) -> None:
        """Esc: nothing changes."""
        self.dismiss(None)
