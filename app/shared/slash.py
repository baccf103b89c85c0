"""What the front ends say about a slash command they do not know: the nearest one, and every one there is."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def unknown_command(name: str, known: Iterable[str]) -> str:
    """One line for an unknown `/name`: "did you mean" the nearest command, then the commands that exist."""
    commands = sorted(set(known))
    near = difflib.get_close_matches(name, commands, n=1, cutoff=0.6)
    hint = f"did you mean {near[0]}? " if near else ""
    return f"unknown command {name}: {hint}the commands are {' '.join(commands)}"
