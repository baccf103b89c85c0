"""Background terminals and what /ps and /stop say about them, for the app and the line mode.

Imports nothing heavy: the app's first frame must not wait for pydantic, the SDK or prompt-toolkit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..shared.words import plural

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


@dataclass(frozen=True)
class BackgroundTerminal:
    """A command the agent started that still runs though its turn ended (Codex's unified-exec session)."""

    process_id: str
    item_id: str
    command: str
    cwd: str


def background_text(running: list[BackgroundTerminal]) -> str:
    """/ps's answer: each command still running, with its process id (for /stop ID)."""
    if not running:
        return "no background terminals: nothing the agent started is still running"
    lines = [f"{plural(len(running), 'background terminal')}:"]
    lines += [f"  {t.process_id}  {_CONTROL.sub('', t.command)}  (in {t.cwd})" for t in running]
    return "\n".join(lines)


def running_note(running: list[BackgroundTerminal]) -> str | None:
    """The line a rewind's or redo's plan carries while the agent's commands run on: a file one of them writes
    afterwards is not undone (and a later rewind takes it for the user's), so the user may /stop them first."""
    if not running:
        return None
    cmds = "; ".join(_CONTROL.sub("", t.command)[:80] for t in running[:3])
    if len(running) > 3:
        cmds += f" and {len(running) - 3} more"
    return (f"! {plural(len(running), 'command')} the agent started still running in the background ({cmds}): what "
            "it writes after this is not undone (/stop ends it first)")


def stopped_text(stopped: list[BackgroundTerminal], pid: str | None) -> str:
    """/stop's answer: what was ended (never "stopped" for a command that was not)."""
    if not stopped:
        return f"no background terminal {pid} to stop" if pid else "no background terminals to stop"
    return (f"stopped {plural(len(stopped), 'background terminal')}: "
            + "; ".join(_CONTROL.sub("", t.command) for t in stopped))
