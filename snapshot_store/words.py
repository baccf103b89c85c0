"""Counted words, spelled once for the store's messages and every front end above it (app/shared/words.py)."""

from __future__ import annotations


def plural(n: int, word: str) -> str:
    """`1 file`, `2 files`."""
    return f"{n} {word}{'' if n == 1 else 's'}"
