"""The app's first frame in plain escape codes, drawn before Textual loads, so `codexr` answers at once.

Importing Textual and the app costs ~0.5 s on this project's 2-core machines, and even a bare Textual app paints
its first frame 0.5-0.9 s after exec (bench/bench_tui.py); this frame is on screen 0.15-0.3 s after exec. It draws
the layout the app is about to paint (an empty transcript, the composer with its placeholder, the status line)
on the alternate screen, which the app then paints over without a flash (entering the alternate screen again is
a no-op in xterm, VTE and tmux). Keys typed meanwhile stay in the terminal's input queue — echo is off, and Enter
is not turned into Ctrl+J (ICRNL off) — until the app reads them: nothing typed during start-up is lost or
printed over the frame. The terminal's own settings are restored before Textual saves them (it restores what
it saved when it exits), and on any failure before the app starts. No Textual, no Rich: that is the point.
"""

from __future__ import annotations

import contextlib
import os
import termios
from typing import Any

PLACEHOLDER = "Ask Codex…  (Enter sends · Ctrl+J newline · / commands · @ paths)"
"""The composer's placeholder (app/tui/composer.py shows the same text)."""
STARTING = "starting Codex…"
"""The status line while Codex starts (app/tui/status.py shows the same text)."""
DISABLE_ENV = "CODEXR_NO_SPLASH"
"""Set (to anything but empty) to start without the frame, e.g. for a terminal that mishandles it."""

_MIN_W, _MIN_H = 20, 6
_ENTER = "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J"  # alternate screen, cursor hidden, cleared
_LEAVE = "\x1b[2J\x1b[?1049l\x1b[?25h"  # what the app's driver does on exit


class Splash:
    """The frame on screen and the terminal settings to give back."""

    def __init__(self, in_fd: int, out_fd: int, saved: list[Any]) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._saved: list[Any] | None = saved
        self._on_screen = True

    @classmethod
    def show(cls, in_fd: int = 0, out_fd: int = 1, environ: dict[str, str] | None = None) -> Splash | None:
        """Draw the frame; None (and nothing changed) when there is no terminal to draw it on."""
        env = dict(os.environ) if environ is None else environ
        if env.get(DISABLE_ENV) or env.get("TERM", "dumb") in ("dumb", "") or not (
                os.isatty(in_fd) and os.isatty(out_fd)):
            return None
        try:
            width, height = os.get_terminal_size(out_fd)
            saved = termios.tcgetattr(in_fd)
        except (OSError, termios.error):
            return None
        if width < _MIN_W or height < _MIN_H:
            return None
        quiet = list(saved)
        quiet[0] = int(saved[0]) & ~termios.ICRNL  # Enter stays \r (the app's Enter, not Ctrl+J)
        quiet[3] = int(saved[3]) & ~(termios.ECHO | termios.ECHONL)
        try:
            termios.tcsetattr(in_fd, termios.TCSANOW, quiet)  # TCSANOW: nothing typed is discarded
        except termios.error:
            return None
        splash = cls(in_fd, out_fd, saved)
        try:
            splash._write(_ENTER + frame(width, height))
        except OSError:
            splash.close()
            return None
        return splash

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self.out_fd, data):]

    @property
    def released(self) -> bool:
        """The app has the terminal now (its driver clears the screen on exit; `close` must not then)."""
        return self._saved is None

    def release(self) -> None:
        """Give the terminal its settings back (keys typed so far stay queued); the app paints over the frame."""
        if self._saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.in_fd, termios.TCSANOW, self._saved)
            self._saved = None

    def close(self) -> None:
        """The app did not start: settings back, the frame gone, the user's screen as it was."""
        self.release()
        if self._on_screen:
            self._on_screen = False
            with contextlib.suppress(OSError):
                self._write(_LEAVE)


def frame(width: int, height: int) -> str:
    """Escape codes drawing the layout: the composer box, the status line under it, the footer row empty."""
    inner = width - 4
    text = PLACEHOLDER if len(PLACEHOLDER) <= inner else PLACEHOLDER[:max(0, inner - 1)] + "…"
    top = height - 4
    rows = [
        (top, "╭" + "─" * (width - 2) + "╮"),
        (top + 1, "│ \x1b[2m" + text + "\x1b[22m" + " " * (inner - len(text)) + " │"),
        (top + 2, "╰" + "─" * (width - 2) + "╯"),
        (top + 3, " " + STARTING),
    ]
    return "".join(f"\x1b[{row};1H{line}" for row, line in rows)
