"""The app's first frame in plain escape codes, drawn before Textual loads, so `codexr` answers at once.

Importing Textual and the app costs ~0.5 s on this project's 2-core machines, and even a bare Textual app paints
its first frame 0.5-0.9 s after exec (bench/bench_tui.py); this frame is on screen 0.15-0.3 s after exec. It draws
the layout the app is about to paint (an empty transcript, the composer with its placeholder, the status line)
on the alternate screen, which the app then paints over without a flash (entering the alternate screen again is
a no-op in xterm, VTE and tmux). Keys typed meanwhile are read by a thread of the splash, which draws the text in
the frame's composer (a word typed at launch was on screen only when the live app drew it, 1-2 s after exec under
load: bench_tui.py's live session) and keeps every byte; the app's input driver plays those bytes before anything
it reads itself (app/tui/typed_ahead.py), so nothing typed during start-up is lost, reordered or printed over the
frame, and Enter stays Enter (ICRNL off) until the app's driver sets its own. The terminal's own settings go to that
driver, which restores them when the app exits, and come back at once on any failure before the app starts. No
Textual, no Rich: that is the point.
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import termios
import threading
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

    def __init__(self, in_fd: int, out_fd: int, saved: list[Any], width: int = 0, height: int = 0) -> None:
        self.in_fd = in_fd
        self.out_fd = out_fd
        self._saved: list[Any] | None = saved
        self._on_screen = True
        self._size = (width, height)
        self.typed = b""  # every byte read from the terminal while the frame was up (the app plays them first)
        self._reader: threading.Thread | None = None
        self._wake: tuple[int, int] | None = None

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
        # no echo; each key readable at once (no line editing), as in the app; Ctrl+C still interrupts
        quiet[3] = int(saved[3]) & ~(termios.ECHO | termios.ECHONL | termios.ICANON)
        quiet[6] = list(saved[6])
        quiet[6][termios.VMIN], quiet[6][termios.VTIME] = 1, 0
        try:
            termios.tcsetattr(in_fd, termios.TCSANOW, quiet)  # TCSANOW: nothing typed is discarded
        except termios.error:
            return None
        splash = cls(in_fd, out_fd, saved, width, height)
        try:
            splash._write(_ENTER + frame(width, height))
        except OSError:
            splash.close()
            return None
        splash._start_reader()
        return splash

    def _start_reader(self) -> None:
        try:
            self._wake = os.pipe()
        except OSError:
            return  # no echo then: the keys wait in the terminal's queue for the app, as they always could
        self._reader = threading.Thread(target=self._read_keys, name="codexr-splash-keys", daemon=True)
        self._reader.start()

    def _read_keys(self) -> None:
        """Thread: keep what is typed and show it in the frame's composer until the app takes the terminal."""
        assert self._wake is not None
        wake = self._wake[0]
        decode = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
        text = ""
        shown = True  # the composer shows what was typed; the first key it cannot show (Enter, Esc …) stops that
        while True:
            try:
                ready = select.select([self.in_fd, wake], [], [])[0]
                if wake in ready:
                    return  # what is still queued is the app's to read, after what was read here
                data = os.read(self.in_fd, 4096)
            except OSError:
                return
            if not data:
                return
            self.typed += data
            if not shown:
                continue
            for ch in decode(data):
                if ch in "\x7f\x08":
                    text = text[:-1]
                elif ch.isprintable():
                    text += ch
                else:
                    shown = False
                    break
            with contextlib.suppress(OSError):
                self._write(composer_line(text, *self._size))

    def _stop_reader(self) -> None:
        """Stop reading keys (the bytes read so far are in `typed`); the terminal's queue keeps the rest."""
        if self._reader is not None and self._wake is not None:
            with contextlib.suppress(OSError):
                os.write(self._wake[1], b"x")
            self._reader.join()
        self._reader = None
        if self._wake is not None:
            for fd in self._wake:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self._wake = None

    def _write(self, text: str) -> None:
        data = text.encode("utf-8", "replace")
        while data:
            data = data[os.write(self.out_fd, data):]

    @property
    def released(self) -> bool:
        """The app has the terminal now (its driver clears the screen on exit; `close` must not then)."""
        return self._saved is None

    def hand_over(self) -> tuple[bytes, list[Any] | None]:
        """The keys typed meanwhile (the app plays them before it reads the terminal) and the terminal's own settings,
        for the app's driver to restore when it exits (app/tui/typed_ahead.py). The frame's settings stay until the
        driver sets its own: given back here, an Enter typed before the driver took the terminal became Ctrl+J (a
        newline in the composer, not a send), ICRNL on again in between (seen once in the tmux demo test, loaded).
        The caller must `give_back` the settings if its app fails before its driver takes them."""
        self._stop_reader()
        saved, self._saved = self._saved, None
        return self.typed, saved

    def give_back(self, saved: list[Any] | None) -> None:
        """The terminal's own settings back, from the caller of `hand_over` whose app never took them."""
        if saved is not None:
            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.in_fd, termios.TCSANOW, saved)

    def release(self) -> bytes:
        """Give the terminal its settings back; the app paints over the frame. Returns the keys typed meanwhile
        (the app plays them before it reads the terminal: keys typed later stay in its queue)."""
        typed, saved = self.hand_over()
        self.give_back(saved)
        return typed

    def close(self) -> None:
        """The app did not start: settings back, the frame gone, the user's screen as it was."""
        self.release()
        if self._on_screen:
            self._on_screen = False
            with contextlib.suppress(OSError):
                self._write(_LEAVE)


def composer_line(text: str, width: int, height: int) -> str:
    """Escape codes redrawing the frame's composer row with `text` (its end, if longer), or the placeholder."""
    inner = width - 4
    if not text:
        shown = PLACEHOLDER if len(PLACEHOLDER) <= inner else PLACEHOLDER[:max(0, inner - 1)] + "…"
        return f"\x1b[{height - 3};3H\x1b[2m{shown}\x1b[22m" + " " * (inner - len(shown))
    shown = text[-inner:]
    return f"\x1b[{height - 3};3H{shown}" + " " * (inner - len(shown))


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
