"""A yes/no question over the app (a restore while another session is live here, Full Access): go ahead anyway?"""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class AskDialog(ModalScreen[bool]):
    """Yes/no over a dialog: `y` goes ahead, `n` or Esc does not (the default is no: it is another's work)."""

    CSS_PATH = "dialogs.tcss"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n,escape", "answer(False)", "No"),
    ]

    def __init__(self, question: str, warnings: tuple[str, ...]) -> None:
        super().__init__()
        self.question = question
        self.warnings = warnings

    def compose(self) -> ComposeResult:
        with Vertical(id="ask"):
            yield Static(self.question, id="ask-question", markup=False)
            yield Static("\n".join(self.warnings), id="ask-warnings", classes="warning", markup=False)
            with Horizontal(id="ask-buttons"):
                yield Button("Yes (y)", id="yes", variant="error")
                yield Button("No (n / Esc)", id="no", variant="primary")

    def on_mount(self) -> None:
        """Buttons are for the mouse: Enter must not answer by focus."""
        for button in self.query(Button):
            button.can_focus = False

    def action_answer(self, yes: bool) -> None:
        """Close with the answer."""
        self.dismiss(yes)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """The buttons answer as the keys do."""
        event.stop()
        self.dismiss(event.button.id == "yes")


def ask_then(app: App[object], question: str, warnings: tuple[str, ...], go: Callable[[], None],
             refused: Callable[[], None]) -> None:
    """Ask `question` over the app; `go` on an explicit yes, `refused` on no or Esc."""

    def answered(yes: bool | None) -> None:
        (go if yes else refused)()

    app.push_screen(AskDialog(question, warnings), answered)
