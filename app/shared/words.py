"""Counted words, spelled once for every front end and command (a leaf: the service layers import it too)."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """`1 file`, `2 files`."""
    return f"{n} {word}{'' if n == 1 else 's'}"
