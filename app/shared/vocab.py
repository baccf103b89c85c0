"""The words codexr and Codex share, each spelled once: what a rewind restores, and who started a thread."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

CLIENT_NAME = "codexr"  # Codex records it as the `originator` of the threads codexr starts


class RewindMode(StrEnum):
    """What a rewind (and its redo) restores: both, or only the files, or only the conversation."""

    BOTH = "both"
    FILES = "files"
    CONVERSATION = "conversation"

    @property
    def words(self) -> str:
        """How the front ends name it: `files and conversation`, `files only`, `conversation only`."""
        return {"both": "files and conversation", "files": "files only", "conversation": "conversation only"}[self]


def mode_words(mode: str) -> str:
    """A mode's words, or the mode as stored when it is none of ours (read back from a sidecar: never refused)."""
    return RewindMode(mode).words if mode in RewindMode._value2member_map_ else mode


FILE_MODES = (RewindMode.BOTH, RewindMode.FILES)
"""The modes that restore the workspace (a mode read back from a sidecar is compared, never converted)."""
CONVERSATION_MODES = (RewindMode.BOTH, RewindMode.CONVERSATION)
"""The modes that take the conversation back (a fork before the prompt)."""


class Source(StrEnum):
    """Who started a thread, as Codex's app-server names it (rollout files spell a sub-agent `subagent`)."""

    CLI = "cli"
    VSCODE = "vscode"
    EXEC = "exec"
    APP_SERVER = "appServer"
    MCP = "mcp"
    SUB_AGENT = "subAgent"
    UNKNOWN = "unknown"


SESSION_KINDS = (Source.CLI, Source.VSCODE, Source.EXEC, Source.APP_SERVER)
"""The `thread/list` source kinds every binary knows: asked for alone when a binary rejects the others."""

SOURCE_LABELS: dict[str, str] = {Source.CLI: "CLI", Source.VSCODE: "IDE", Source.EXEC: "exec",
                                  Source.APP_SERVER: "app-server", Source.MCP: "MCP", Source.SUB_AGENT: "subagent",
                                  Source.UNKNOWN: "unknown"}


#: The originators of the official Codex TUI (its own threads, and those it starts through an app-server: through
#: `codexr codex` the app-server records its source as "vscode", the default of a client it does not know).
OFFICIAL_TUI = frozenset({"codex-tui", "codex_cli_rs"})


def source_label(source: Any, originator: Any = None) -> str:
    """Who started a thread, worded once for the app, `codexr threads`, `codexr history` and the proxy.

    `source` is Codex's SessionSource as the app-server or a rollout file gives it: a kind ("cli", "appServer"),
    or an object ({"subAgent": …}, {"custom": name}); `originator`: the client that started it, which names codexr
    and the official TUI wherever they ran (a sidecar only says codexr recorded prompts, not who started it).
    """
    if isinstance(source, dict):
        if isinstance(source.get("custom"), str):
            return str(source["custom"])
        source = next(iter(source), "")
    kind = str(source or "")
    if kind.lower() == Source.SUB_AGENT.lower():
        return SOURCE_LABELS[Source.SUB_AGENT]  # a sub-agent's thread, whichever client's agent spawned it
    if originator == CLIENT_NAME:
        return CLIENT_NAME
    if originator in OFFICIAL_TUI:
        return SOURCE_LABELS[Source.CLI]
    return SOURCE_LABELS.get(kind, kind or "unknown")
