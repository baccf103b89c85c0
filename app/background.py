"""What /ps and /stop say, shared by the app and the line mode (no UI imports: the app must not load prompt-toolkit)."""

from __future__ import annotations

import re

from .session import BackgroundTerminal

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def background_text(running: list[BackgroundTerminal]) -> str:
    """/ps's answer: each command still running, with its process id (for /stop ID)."""
    if not running:
        return "no background terminals: nothing the agent started is still running"
    lines = [f"{_plural(len(running), 'background terminal')}:"]
    lines += [f"  {t.process_id}  {_CONTROL.sub('', t.command)}  (in {t.cwd})" for t in running]
    return "\n".join(lines)


def stopped_text(stopped: list[BackgroundTerminal], pid: str | None) -> str:
    """/stop's answer: what was ended (never "stopped" for a command that was not)."""
    if not stopped:
        return f"no background terminal {pid} to stop" if pid else "no background terminals to stop"
    return (f"stopped {_plural(len(stopped), 'background terminal')}: "
            + "; ".join(_CONTROL.sub("", t.command) for t in stopped))
