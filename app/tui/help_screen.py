"""/help: every key and slash command, straight from the action registry (with the user's remapping)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .actions import ACTIONS, effective_key

SCOPES = {"app": "Anywhere", "composer": "In the composer", "transcript": "Block cursor (Ctrl+Up to enter)",
          "approval": "Approval requests"}


ID_HEADER = "Id (for [tui] keys)"
DESCRIPTION_MIN = 30  # narrower than this, the description column goes: each action then gets a heading line


def help_rows(keymap: Mapping[str, str]) -> list[tuple[str, list[tuple[str, str, str, str]]]]:
    """Per scope: its title and each action's key(s), slash command, id and description."""
    out = []
    for scope, title in SCOPES.items():
        rows = [(effective_key(a, keymap) or "—", f"{a.slash} {a.args}".rstrip() if a.slash else "", a.id,
                 a.description) for a in ACTIONS if a.scope == scope]
        out.append((title, rows))
    return out


def help_table(keymap: Mapping[str, str]) -> Table:
    """Scope, key(s), slash command, action id and what it does."""
    t = Table(expand=True, show_edge=False, pad_edge=False)
    t.add_column("Key", no_wrap=True)
    t.add_column("Command", no_wrap=True)
    t.add_column(Text(ID_HEADER), no_wrap=True, style="dim")
    t.add_column("What it does")
    for title, rows in help_rows(keymap):
        t.add_section()
        t.add_row(Text(title, style="bold"), "", "", "")
        for key, slash, ident, description in rows:
            t.add_row(key, slash, ident, description)
    return t


def help_list(keymap: Mapping[str, str]) -> Group:
    """The narrow form: `key  /command  (id)` on one line, what it does wrapped beneath, nothing dropped."""
    parts: list[RenderableType] = []
    for title, rows in help_rows(keymap):
        parts.append(Text(title, style="bold underline"))
        for key, slash, ident, description in rows:
            head = Text(key, style="bold")
            if slash:
                head.append(f"  {slash}")
            head.append(f"  ({ident})", style="dim")
            parts += [head, Padding(Text(description), (0, 0, 0, 4))]
        parts.append(Text(""))
    return Group(*parts)


class HelpText:
    """The help as a table where it fits, as a list where the description column would be squeezed out."""

    def __init__(self, keymap: Mapping[str, str]) -> None:
        self.keymap = keymap

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = help_rows(self.keymap)
        keys = max(cell_len(t) for t, actions in rows for t in [t, *(a[0] for a in actions)])
        slashes = max([len("Command"), *(cell_len(a[1]) for _, actions in rows for a in actions)])
        ids = max([len(ID_HEADER), *(cell_len(a[2]) for _, actions in rows for a in actions)])
        left = options.max_width - (keys + slashes + ids + 9)  # three ` │ ` separators
        yield help_table(self.keymap) if left >= DESCRIPTION_MIN else help_list(self.keymap)


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
            yield Static(HelpText(self.keymap), id="help-body")

    def action_dismiss_help(self) -> None:
        """Close the screen."""
        self.dismiss(None)
