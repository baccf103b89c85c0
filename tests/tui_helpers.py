"""Waiting on a Textual app under test: for the state a test asserts, never a fixed pause (CI runs under load)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.app import App
from textual.pilot import Pilot

if TYPE_CHECKING:
    from app.tui.app import CodexrApp

WAIT_S = 45.0  # a bound on waiting (a slow 2-core CI box beside real Codex processes), not a timing assertion


def screen_text(app: App[Any]) -> str:
    """What the terminal shows now, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def words(text: str) -> str:
    """`text` with every run of whitespace, line ends included, as one space: a phrase however it wraps."""
    return " ".join(text.split())


async def until(pilot: Pilot[Any], cond: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    """Let the app run until `cond()` holds (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}; screen:\n{screen_text(pilot.app)}")
        await pilot.pause(0.05)
    await pilot.pause(0.05)  # let the screen repaint what the condition saw


async def until_shown(pilot: Pilot[Any], *needles: str, timeout: float = WAIT_S) -> str:
    """Let the app run until the screen shows every needle at once; that screen, for the checks that follow."""
    deadline = time.monotonic() + timeout
    while True:
        await pilot.pause(0.05)  # each pause lays out and paints what changed since the last one
        text = screen_text(pilot.app)
        missing = [n for n in needles if n not in text]
        if not missing:
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {missing} on screen; it shows:\n{text}")


async def ready(pilot: Pilot[Any]) -> CodexrApp:
    """The codexr app once Codex has started (its status bar says ready)."""
    from app.tui.app import CodexrApp  # here: the helpers stay light for tests that never start the app

    app = pilot.app
    assert isinstance(app, CodexrApp)
    await until(pilot, lambda: app.status_bar.state == "ready", "Codex to start")
    return app


async def type_and_send(pilot: Pilot[Any], text: str) -> None:
    """Put `text` in the composer and press Enter, as a user sends a prompt."""
    from app.tui.app import CodexrApp

    app = pilot.app
    assert isinstance(app, CodexrApp)
    app.composer.set_text(text)
    await pilot.press("enter")
