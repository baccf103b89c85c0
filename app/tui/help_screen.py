"""/help: every key and slash command, straight from the action registry (with the user's remapping)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .actions import ACTIONS, effective_key

SCOPES = {"app": "Anywhere", "composer": "In the composer", "transcript": "Block cursor (Ctrl+Up to enter)",
          "approval": "Approval requests"}


def help_table(keymap: Mapping[str, str]) -> Table:
    """Scope, key(s), slash command, action id and what it does."""
    t = Table(expand=True, show_edge=False, pad_edge=False)
    t.add_column("Key", no_wrap=True)
    t.add_column("Command", no_wrap=True)
    t.add_column("Id (for [tui] keys)", no_wrap=True, style="dim")
    t.add_column("What it does")
    for scope, title in SCOPES.items():
        t.add_section()
        t.add_row(f"[b]{title}[/b]", "", "", "")
        for a in ACTIONS:
            if a.scope == scope:
                slash = f"{a.slash} {a.args}".rstrip() if a.slash else ""
                t.add_row(effective_key(a, keymap) or "—", slash, a.id, a.description)
    return t


class HelpScreen(ModalScreen[None]):
    """Keys and commands; Esc or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,f1", "dismiss_help", "Close")]

    def __init__(self, keymap: Mapping[str, str], banner: str = "") -> None:
        super().__init__()
        self.keymap = keymap
        self.banner = banner  # what the session began with (the demo's words): at hand after the first prompt

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static("codexr — keys and slash commands   (Esc closes · remap keys with [tui] keys "
                         "in $CODEX_HOME/codexr.toml, e.g. keys = { rewind = \"f2\" })", id="help-title",
                         markup=False)
            if self.banner:  # first: the words a demo understands matter more than the keys
                from textual.widgets import Markdown

                yield Markdown(self.banner, id="help-banner")
            yield Static(help_table(self.keymap))

    def action_dismiss_help(self) -> None:
        """Close the screen."""
        self.dismiss(None)
