"""The one action registry: keys, footer, /help, slash commands and the command palette all come from here.

Users remap keys in codexr's settings (`[tui] keys = { "rewind" = "f2" }`); an unknown action id is a
config error, never silently ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from textual.binding import Binding

from config import ConfigError


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


ACTIONS: tuple[Action, ...] = (
    # ---- app
    Action("interrupt", "escape", "Interrupt the running turn; Esc Esc on an empty composer opens the rewind picker",
           priority=True, label="Interrupt"),
    Action("interrupt_or_quit", "ctrl+c", "Interrupt the running turn; twice on an empty idle composer quits",
           priority=True, show=False),
    Action("rewind", "ctrl+r", "Rewind the conversation and the files to an earlier prompt", slash="/rewind",
           priority=True, label="Rewind"),
    Action("redo", "", "Undo the last rewind (shows what comes back and any conflicts first)", slash="/redo"),
    Action("new", "", "Start a new thread (the next prompt begins it)", slash="/new"),
    Action("resume", "", "Resume one of this workspace's threads", slash="/resume"),
    Action("threads", "", "List this workspace's threads and switch to one", slash="/threads"),
    Action("history", "", "Search every workspace's conversations; a hit here resumes its thread, another's is "
           "shown read-only", slash="/history", args="TEXT"),
    Action("diff", "", "Workspace now vs the start of the current turn (or of prompt N)", slash="/diff", args="[N]"),
    Action("status", "", "Show the session's status in the transcript", slash="/status"),
    Action("snapshots", "", "This workspace's file snapshots; restore one", slash="/snapshots"),
    Action("ps", "", "The agent's commands still running in the background (an interrupt does not stop them)",
           slash="/ps"),
    Action("stop", "", "Stop the background commands (or the one with process ID)", slash="/stop", args="[ID]"),
    Action("model", "", "Pick the model, then its reasoning effort, for the next prompts; /model NAME [EFFORT] "
           "switches at once", slash="/model", args="[NAME [EFFORT]]"),
    Action("permissions", "", "Pick the approval policy and sandbox (Read Only, Default, Full Access) for the next "
           "prompts; /permissions NAME switches at once", slash="/permissions", args="[NAME]"),
    Action("transcript", "ctrl+t", "The whole thread's transcript in a pager: every prompt, answer, command with all "
           "its output, edit; / searches, Esc or q closes", priority=True, label="Transcript"),
    Action("compact", "", "Summarise the conversation to free context (no prompt: rewind still lists every prompt)",
           slash="/compact"),
    Action("review", "", "Code review by Codex: uncommitted changes, or the changes against branch NAME, commit SHA, "
           "or your own instructions", slash="/review", args="[branch NAME | commit SHA | TEXT]"),
    Action("init", "", "Ask Codex for an AGENTS.md contributor guide (a normal prompt; skipped if one exists)",
           slash="/init"),
    Action("mention", "", "Insert a workspace file's path: @ and a fuzzy file search (typing @ does the same)",
           slash="/mention", args="[QUERY]"),
    Action("help", "f1", "Keys and slash commands", slash="/help", label="Help"),
    Action("quit", "ctrl+q", "Quit codexr", slash="/quit", priority=True, label="Quit"),
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
