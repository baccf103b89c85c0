"""The one action registry: keys, footer, /help, slash commands and the command palette all come from here
(a slash command's words from app/shared/commands.py, which line mode reads too).

Users remap keys in codexr's settings (`[tui] keys = { "rewind" = "f2" }`); an unknown action id is a
config error, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from textual.binding import Binding

from config import ConfigError

from ..shared.commands import BY_NAME


@dataclass(frozen=True)
class Action:
    """One thing the user can do: its id (for remapping), default key(s), help text and slash command."""

    id: str
    key: str  # Textual key names, comma-separated; "" = no default key (slash command / palette only)
    description: str
    scope: str = "app"  # app | composer | transcript | approval: where the binding lives
    slash: str | None = None  # "/rewind"
    args: str = ""  # how the slash command takes an argument, for the help text: "[N]"
    show: bool = True  # shown in the footer
    priority: bool = False  # checked before the focused widget (keys a TextArea would otherwise eat)
    label: str = ""  # short footer label (defaults to the first word of the description)

    @property
    def method(self) -> str:
        """The action method name (`action_<method>`) on the widget of this scope."""
        return self.id


def _command(id: str, key: str = "", *, priority: bool = False, label: str = "") -> Action:
    """An action that is also the slash command `/<id>`: its words and argument come from app/shared/commands.py."""
    c = BY_NAME["/" + id]
    return Action(id, key, c.description, slash=c.name, args=c.args, priority=priority, label=label)


ACTIONS: tuple[Action, ...] = (
    # ---- app
    Action("interrupt", "escape", "Interrupt the running turn; Esc Esc on an empty composer opens the rewind picker",
           priority=True, label="Interrupt"),
    Action("interrupt_or_quit", "ctrl+c", "Interrupt the running turn, else clear the composer; twice on an empty idle "
           "composer quits; during a rewind, redo or restore: stop it, the files it changed put back as before",
           priority=True, show=False),
    _command("rewind", "ctrl+r", priority=True, label="Rewind"),
    _command("redo"),
    _command("new"),
    _command("resume"),
    _command("threads"),
    _command("history"),
    _command("diff"),
    _command("status"),
    _command("snapshots"),
    _command("ps"),
    _command("stop"),
    _command("model"),
    _command("permissions"),
    Action("transcript", "ctrl+t", "The whole thread's transcript in a pager: every prompt, answer, command with all "
           "its output, edit; / searches, Esc or q closes", priority=True, label="Transcript"),
    _command("compact"),
    _command("review"),
    _command("init"),
    _command("mention"),
    _command("help", "f1", label="Help"),
    _command("quit", "ctrl+q", priority=True, label="Quit"),
    # Ctrl+Up first: Textual 8 reads Alt+Up from a real terminal as Esc then Up, so Alt alone never reached it.
    Action("block_prev", "ctrl+up,alt+up", "Move the block cursor to the previous transcript block", show=False),
    Action("block_next", "ctrl+down,alt+down", "Move the block cursor to the next transcript block", show=False),
    # ---- composer
    Action("send", "enter", "Send the prompt (queued while a turn runs)", scope="composer", priority=True,
           label="Send"),
    Action("newline", "ctrl+j,shift+enter", "Insert a newline", scope="composer", priority=True, label="Newline"),
    Action("history_prev", "up", "Previous prompt from history (cursor on the first line)", scope="composer",
           priority=True, show=False),
    Action("history_next", "down", "Next prompt from history (cursor on the last line)", scope="composer",
           priority=True, show=False),
    Action("complete", "tab", "Accept the highlighted completion", scope="composer", priority=True, show=False),
    Action("delete_to_line_start", "ctrl+u", "Delete from the cursor to the start of its line, however the line wraps "
           "(at a line's start: the newline before it; a selection: the selection)", scope="composer", priority=True,
           show=False),
    # ---- transcript (block cursor)
    Action("cursor_up", "up,k,ctrl+up,alt+up", "Previous block", scope="transcript", show=False),
    Action("cursor_down", "down,j,ctrl+down,alt+down", "Next block", scope="transcript", show=False),
    Action("toggle_block", "enter,space", "Expand or collapse the block", scope="transcript", label="Expand"),
    Action("copy_block", "c,y", "Copy the block's text to the clipboard", scope="transcript", label="Copy"),
    Action("rewind_here", "r", "Rewind to the prompt of the turn under the block cursor", scope="transcript",
           label="Rewind here"),
    Action("show_earlier", "e", "Show earlier blocks that were folded away", scope="transcript", show=False),
    Action("first_block", "home,g", "First block of the thread (however long, folded blocks included)",
           scope="transcript", show=False),
    Action("last_block", "end,G", "Last block of the thread", scope="transcript", show=False),
    Action("to_composer", "i,tab", "Back to the composer", scope="transcript", label="Compose"),
    # ---- approval (inline request)
    Action("accept", "y", "Accept the request", scope="approval", label="Yes"),
    Action("accept_session", "a", "Accept, and do not ask again this session", scope="approval",
           label="Always"),
    Action("decline", "n", "Decline (the agent goes on without it)", scope="approval", label="No"),
    Action("cancel", "c,escape", "Decline and stop the turn", scope="approval", label="Cancel"),
)

BY_ID: dict[str, Action] = {a.id: a for a in ACTIONS}
SLASH: dict[str, Action] = {a.slash: a for a in ACTIONS if a.slash}


def bindings(scope: str) -> list[Binding]:
    """The Textual bindings (with ids, so the keymap can remap them) of one scope."""
    out = []
    for a in ACTIONS:
        if a.scope == scope and a.key:
            out.append(Binding(a.key, a.method, a.label or a.description.split(" ")[0], show=a.show,
                               priority=a.priority, id=a.id, tooltip=a.description))
    return out


def validate_keymap(keys: Mapping[str, str]) -> dict[str, str]:
    """The user's `[tui] keys` checked against the registry (ConfigError naming the bad id)."""
    out = {}
    for action_id, key in keys.items():
        if action_id not in BY_ID:
            known = ", ".join(sorted(BY_ID))
            raise ConfigError(f"[tui] keys: unknown action {action_id!r} (known actions: {known})")
        if not key.strip():
            raise ConfigError(f"[tui] keys: action {action_id!r} needs a key such as \"f2\" or \"ctrl+r\"")
        out[action_id] = ",".join(k.strip() for k in key.split(","))
    return out


def effective_key(action: Action, keymap: Mapping[str, str]) -> str:
    """The key(s) an action answers to with the user's remapping applied."""
    return keymap.get(action.id, action.key)


def slash_matches(prefix: str) -> list[Action]:
    """Slash commands starting with `prefix` (e.g. "/re" → /rewind, /redo, /resume)."""
    return [a for a in ACTIONS if a.slash and a.slash.startswith(prefix)]
