"""Keys that arrive in a burst (a paste, tmux send-keys, a fast typist) are composed in the order typed."""

from __future__ import annotations

import asyncio
import threading

from textual import events

from app.tui.app import CodexrApp


def _app_without_codex() -> tuple[CodexrApp, threading.Event]:
    gate = threading.Event()

    def opts() -> object:  # Codex never starts in this test: prompts stay queued in the app
        gate.wait(30)
        raise RuntimeError("no Codex in this test")

    return CodexrApp(opts), gate  # type: ignore[arg-type]


def _burst(app: CodexrApp, keys: list[str]) -> None:
    """Post key events all at once, as a terminal delivers a paste or send-keys, without waiting in between."""
    for key in keys:
        char = key if len(key) == 1 else None
        app.post_message(events.Key(key, char))


def test_a_burst_of_keys_then_enter_sends_the_whole_prompt() -> None:
    app, gate = _app_without_codex()

    async def scenario() -> tuple[list[str], str, list[str]]:
        async with app.run_test() as pilot:
            await pilot.pause()
            _burst(app, [*"create notes.txt hello there", "enter", *"line one", "ctrl+j", *"line two", "enter"])
            for _ in range(50):
                await pilot.pause(0.02)
            return list(app._early), app.composer.text, app.composer.history

    try:
        early, left, history = asyncio.run(scenario())
    finally:
        gate.set()
    assert early == ["create notes.txt hello there", "line one\nline two"]
    assert left == ""
    assert history == early
