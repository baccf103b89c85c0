"""Light or dark: follow the terminal's background as it reports it, since Textual cannot ask the terminal."""

from __future__ import annotations

from collections.abc import Mapping

LIGHT = "textual-light"


def terminal_theme(env: Mapping[str, str]) -> str | None:
    """The theme matching the terminal's background, from `COLORFGBG` ("fg;bg", set by rxvt, Konsole, iTerm2…).

    None leaves Textual's choice: its default (dark) or the user's `TEXTUAL_THEME`, which always wins.
    By the rxvt convention background colours 7 and 9-15 are light, 0-6 and 8 dark.
    """
    if env.get("TEXTUAL_THEME"):
        return None
    bg = env.get("COLORFGBG", "").rsplit(";", 1)[-1].strip()
    if not bg.isdigit():
        return None
    n = int(bg)
    return LIGHT if n == 7 or 9 <= n <= 15 else None
