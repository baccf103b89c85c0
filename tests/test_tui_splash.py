"""The splash (app/tui/splash.py): the first frame before Textual loads, keys kept, the terminal given back.

The whole story in a real terminal (type under the splash, see it in the live composer, quit, check `stty`)
is tests/test_tui_tmux.py; here a pseudo-terminal pair checks the terminal settings exactly.
"""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.tui.splash import DISABLE_ENV, PLACEHOLDER, Splash, composer_line

REPO = Path(__file__).parents[1]


@pytest.fixture
def pty_pair() -> Iterator[tuple[int, int]]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    yield master, slave
    os.close(master)
    os.close(slave)


def read_all(fd: int, wait: float = 0.2) -> bytes:
    out = b""
    while select.select([fd], [], [], wait)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        out += chunk
    return out


def test_the_splash_draws_the_layout_shows_typed_keys_in_its_composer_keeps_them_and_gives_the_settings_back(
        pty_pair: tuple[int, int]) -> None:
    master, slave = pty_pair
    before = termios.tcgetattr(slave)
    splash = Splash.show(slave, slave, {"TERM": "xterm-256color"})
    assert splash is not None
    drawn = read_all(master).decode()
    assert drawn.startswith("\x1b[?1049h") and PLACEHOLDER in drawn  # the alternate screen, the composer
    quiet = termios.tcgetattr(slave)
    assert not quiet[3] & termios.ECHO and not quiet[0] & termios.ICRNL and not quiet[3] & termios.ICANON

    os.write(master, b"fix the bugg\x7f")  # typed while Textual loads (a typo taken back)
    # drawn in the frame's composer row (28 of 30: the box's middle line), at once, not echoed at the cursor
    assert read_all(master).decode().endswith(composer_line("fix the bug", 100, 30))
    assert composer_line("fix the bug", 100, 30).startswith("\x1b[27;3Hfix the bug ")
    os.write(master, b"\r")
    read_all(master)
    assert not splash.released
    assert splash.release() == b"fix the bugg\x7f\r"  # every byte, for the app to play first
    assert splash.released  # the app has the terminal: a failure after this is the app's to clean up
    assert termios.tcgetattr(slave) == before  # what Textual saves (and restores on exit) is the user's own
    os.write(master, b"more")  # typed once the app has the terminal: its own input thread reads it
    raw = termios.tcgetattr(slave)
    raw[3] &= ~(termios.ICANON | termios.ECHO)
    termios.tcsetattr(slave, termios.TCSANOW, raw)  # what the app's driver does next
    assert read_all(slave) == b"more"  # nothing the splash read is read twice
    termios.tcsetattr(slave, termios.TCSANOW, before)

    splash.close()  # the app failed to start: the user's screen comes back
    assert read_all(master).decode().endswith("\x1b[?1049l\x1b[?25h")
    assert termios.tcgetattr(slave) == before


def test_the_app_failing_before_it_starts_leaves_the_terminal_as_it_was(pty_pair: tuple[int, int]) -> None:
    master, slave = pty_pair
    before = termios.tcgetattr(slave)
    splash = Splash.show(slave, slave, {"TERM": "xterm"})
    assert splash is not None
    read_all(master)
    splash.close()
    assert termios.tcgetattr(slave) == before
    assert b"\x1b[?1049l" in read_all(master)


@pytest.mark.parametrize("why", ["disabled", "dumb terminal", "too small", "not a terminal"])
def test_no_splash_and_nothing_changed_where_it_cannot_or_should_not_draw(
        pty_pair: tuple[int, int], why: str) -> None:
    master, slave = pty_pair
    env = {"TERM": "xterm"}
    in_fd = out_fd = slave
    if why == "disabled":
        env[DISABLE_ENV] = "1"
    elif why == "dumb terminal":
        env["TERM"] = "dumb"
    elif why == "too small":
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 4, 15, 0, 0))
    before = termios.tcgetattr(slave)
    if why == "not a terminal":
        r, w = os.pipe()
        try:
            assert Splash.show(r, w, env) is None
        finally:
            os.close(r)
            os.close(w)
    else:
        assert Splash.show(in_fd, out_fd, env) is None
    assert termios.tcgetattr(slave) == before and read_all(master) == b""


def test_the_app_starts_without_pydantic_markdown_or_the_sdk() -> None:
    """What the first frame waits for: the settings, the Markdown widget and the SDK load after it."""
    code = ("import sys, app.cli, app.tui.app\n"
            "print(sorted(m for m in ('pydantic', 'markdown_it', 'pygments', 'openai_codex') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_enter_typed_between_the_hand_over_and_the_driver_stays_enter(pty_pair: tuple[int, int]) -> None:
    """The splash handed the terminal to the app with its own settings given back, so an Enter typed before the
    app's driver set raw mode went through ICRNL and arrived as Ctrl+J: a newline in the composer, not a send (the
    tmux demo test, once, loaded). Now the frame's settings stand until the driver sets its own, and the terminal's
    own go to the driver (restored at exit), or back at once if the app never takes them."""
    master, slave = pty_pair
    before = termios.tcgetattr(slave)
    splash = Splash.show(slave, slave, {"TERM": "xterm-256color"})
    assert splash is not None
    read_all(master)
    os.write(master, b"go")
    read_all(master)
    typed, saved = splash.hand_over()
    assert typed == b"go" and saved == before and splash.released
    os.write(master, b"\r")  # Enter, after the hand-over, before the driver's raw mode
    assert read_all(slave) == b"\r"
    splash.give_back(saved)  # the app failed before its driver took them
    assert termios.tcgetattr(slave) == before
