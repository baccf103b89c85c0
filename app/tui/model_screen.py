"""/model: the official TUI's two steps, a model ("Select Model and Effort") then its reasoning effort."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from ..codex.events import Status
from ..codex.turn_settings import ModelInfo
from ..services.driver import Driver
from .driver_screen import CallDone, DriverScreen

MODEL_TITLE = "Select Model and Effort"
MODEL_HINT = "↑↓ choose · Enter next: its reasoning effort · Esc cancel"
EFFORT_HINT = "↑↓ choose · Enter use from the next prompt on · Esc back to the models"


def effort_word(effort: str) -> str:
    """Codex's effort ids as the official picker words them (`xhigh` is "Extra high")."""
    return {"xhigh": "Extra high"}.get(effort, effort.capitalize())


class ModelScreen(DriverScreen[str | None]):
    """Pick a model, then one of its reasoning efforts; both apply from the next prompt on."""

    OPAQUE = False  # a small dialog: the main screen stays in view around it

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def __init__(self, driver: Driver) -> None:
        super().__init__(driver)
        self.models: list[ModelInfo] = []
        self.current = Status()
        self.chosen: ModelInfo | None = None  # the effort step is showing for this model

    def compose(self) -> ComposeResult:
        with Vertical(id="picker"):
            yield Static(MODEL_TITLE, id="title", markup=False)
            yield OptionList(id="choices")
            yield Static("asking Codex for its models…", id="message", markup=False)
            yield Static(MODEL_HINT, id="hint", markup=False)

    def start(self) -> None:
        """List Codex's models (and what runs now) off the event loop."""
        self.query_one("#choices", OptionList).focus()
        driver = self.driver
        self.call("list", lambda: (driver.model_catalog(), driver.status_detail()))

    def done(self, msg: CallDone) -> None:
        """Show the models; or close once the choice was applied."""
        if msg.error is not None:
            self.say(msg.error, error=True)
            return
        if msg.tag == "list":
            self.models, self.current = msg.value
            self.show_models()
            return
        self.dismiss(None)  # the driver wrote "model: … from the next prompt on" into the transcript

    def show_models(self) -> None:
        """Step one: every model Codex offers, the current one marked."""
        self.chosen = None
        self.query_one("#title", Static).update(MODEL_TITLE)
        self.query_one("#hint", Static).update(MODEL_HINT)
        choices = self.query_one("#choices", OptionList)
        choices.set_options(
            Option(Content(f"{m.id}{' (current)' if m.id == self.current.model else ''}\n    {m.description}"),
                   id=m.id) for m in self.models)
        at = next((i for i, m in enumerate(self.models) if m.id == self.current.model), 0)
        choices.highlighted = at if self.models else None
        self.say(f"model now: {self.current.model or 'unknown'}, reasoning {self.current.effort or 'default'}"
                 if self.models else "Codex lists no models")

    def show_efforts(self, model: ModelInfo) -> None:
        """Step two: the model's reasoning efforts with Codex's descriptions, its default and the current marked."""
        self.chosen = model
        self.query_one("#title", Static).update(f"Select Reasoning Level for {model.id}")
        self.query_one("#hint", Static).update(EFFORT_HINT)
        now = self.current.effort.split(" (")[0] if model.id == self.current.model else ""
        options = []
        for effort, description in model.efforts:
            marks = (" (default)" if effort == model.default_effort else "") + (" (current)" if effort == now else "")
            options.append(Option(Content(f"{effort_word(effort)}{marks}\n    {description}"), id=effort))
        choices = self.query_one("#choices", OptionList)
        choices.set_options(options)
        efforts = [e for e, _ in model.efforts]
        choices.highlighted = efforts.index(now) if now in efforts else (
            efforts.index(model.default_effort) if model.default_effort in efforts else 0)
        self.say("")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """Enter: a model leads to its efforts (a model without any is applied at once); an effort applies both."""
        event.stop()
        option_id = str(event.option.id or "")
        if self.chosen is None:
            model = next((m for m in self.models if m.id == option_id), None)
            if model is None:
                return
            if model.efforts:
                self.show_efforts(model)
            else:
                self.call("set", lambda: self.driver.set_model(model.id))
            return
        chosen = self.chosen
        self.call("set", lambda: self.driver.set_model(chosen.id, option_id))

    def action_back(self) -> None:
        """Esc: from the efforts back to the models; from the models, close with nothing changed."""
        if self.chosen is not None and self.models:
            self.show_models()
        else:
            self.dismiss(None)
