"""The one registry of slash commands: the app's slash commands, F1 and completion, and line mode's /help,
completion and dispatch all read it (README's check too, through the app's action registry).

Both front ends have every command. Line mode has its own argument and words where it behaves differently: it has
no picker (`/rewind 2 files` does at once what the app's picker asks), lists rather than opens, and has no keys.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    """A slash command: its name, how it takes an argument, what it does; line mode's own where they differ."""

    name: str  # "/rewind"
    args: str  # for help and completion: "[N]"
    description: str
    line_args: str | None = None  # line mode's argument where it takes more: "[N] [files|conversation]"
    line_description: str | None = None  # line mode's words where it does the thing differently

    @property
    def line(self) -> tuple[str, str]:
        """Its argument and words in line mode."""
        return (self.args if self.line_args is None else self.line_args,
                self.line_description or self.description)


COMMANDS: tuple[Command, ...] = (
    Command("/rewind", "", "Rewind the conversation and the files to an earlier prompt",
            "[N] [files|conversation]", "Go back to before prompt N: files and conversation (preview, confirm)"),
    Command("/redo", "", "Undo the last rewind (shows what comes back and any conflicts first)"),
    Command("/new", "", "Start a new thread (the next prompt begins it)"),
    Command("/resume", "", "Resume one of this workspace's threads",
            "[N]", "List this workspace's threads and load one"),
    Command("/threads", "", "List this workspace's threads and switch to one",
            line_description="List this workspace's threads"),
    Command("/history", "TEXT", "Search every workspace's conversations; a hit here resumes its thread, another's is "
            "shown read-only",
            line_description="Search every workspace's conversations, numbered; then a hit's number resumes its "
            "thread (this workspace) or prints it read-only (another)"),
    Command("/diff", "[N]", "The workspace now against the start of the last prompt (or of prompt N)"),
    Command("/status", "", "Model and reasoning effort, approval and sandbox, context left, workspace, thread, "
            "tracking, store size, redo depth"),
    Command("/snapshots", "", "This workspace's file snapshots; restore one (preview, confirm)"),
    Command("/ps", "", "The agent's commands still running in the background (an interrupt does not stop them)"),
    Command("/stop", "[ID]", "Stop the background commands (or the one with process ID)"),
    Command("/model", "[NAME [EFFORT]]", "Pick the model, then its reasoning effort, for the next prompts; /model "
            "NAME [EFFORT] switches at once",
            line_description="The model, its reasoning effort and the ones Codex offers; with NAME (and EFFORT), "
            "use them from the next prompt on"),
    Command("/permissions", "[NAME]", "Pick the approval policy and sandbox (Read Only, Default, Full Access) for the "
            "next prompts; /permissions NAME switches at once",
            line_description="Approval policy and sandbox, and the presets; with NAME (read-only, auto, "
            "full-access), use it from the next prompt on"),
    Command("/compact", "", "Summarise the conversation to free context (no prompt: rewind still lists every "
            "prompt)"),
    Command("/review", "[branch NAME | commit SHA | TEXT]", "Code review by Codex: uncommitted changes, or the "
            "changes against branch NAME, commit SHA, or your own instructions"),
    Command("/init", "", "Ask Codex for an AGENTS.md contributor guide (a normal prompt; skipped if one exists)"),
    Command("/mention", "[QUERY]", "Insert a workspace file's path: @ and a fuzzy file search (typing @ does the "
            "same)",
            "QUERY", "Find workspace files (fuzzy) and put @path into your next prompt; @QUERY and Tab complete "
            "too"),
    Command("/help", "", "Keys and slash commands"),
    Command("/quit", "", "Quit codexr", line_description="Quit codexr (or Ctrl+D)"),
)

BY_NAME: dict[str, Command] = {c.name: c for c in COMMANDS}
