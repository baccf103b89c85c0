"""The screen shown when Codex cannot start: what failed and how to log in — never a traceback."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import Static

LOGIN_HELP = (
    "How to fix it:\n"
    "  • Not logged in: run  codexr login  (the bundled Codex signs you in with ChatGPT;\n"
    "    `codexr login --with-api-key` reads an API key from stdin), then start codexr again.\n"
    "  • Using another provider: set model_provider and [model_providers.<name>] in\n"
    "    $CODEX_HOME/config.toml (the same file the official codex reads).\n"
    "  • Codex itself does not run: check `codex --version` and the message above."
)


class StartFailedScreen(Screen[None]):
    """Codex did not start; q quits."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("q,escape,ctrl+c,ctrl+q,enter", "app.quit", "Quit")]

    def __init__(self, message: str, login_hint: bool) -> None:
        super().__init__()
        self.message = message
        self.login_hint = login_hint

    def compose(self) -> ComposeResult:
        with Vertical(id="start-failed"):
            yield Static(Text("✗ Codex could not start", style="bold"), id="failed-title")
            yield Static(Text(self.message), id="failed-message")
            hint = "It looks like Codex needs you to log in.\n\n" if self.login_hint else ""
            yield Static(Text(hint + LOGIN_HELP), id="failed-help")
            yield Static(Text("Press q to quit."), id="failed-keys")
