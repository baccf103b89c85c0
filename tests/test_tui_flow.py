"""Integrated flows of the Textual app: typed keys in the order a terminal delivers them, rewind and redo through
the main app (picker, fork, composer, status bar), and the main screen mid-turn."""

from __future__ import annotations

import asyncio
from typing import Any

from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from app.tui.composer import Composer


class ComposerHost(App[None]):
    """The composer alone, keeping what it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[str] = []

    def compose(self) -> ComposeResult:
        yield Composer(id="composer")

    def on_mount(self) -> None:
        self.query_one(Composer).focus_prompt()

    def on_composer_submitted(self, message: Composer.Submitted) -> None:
        self.sent.append(message.text)


def test_enter_waits_for_the_keys_typed_before_it() -> None:
    """A terminal hands over a fast typist's (or a paste's, or tmux's) keys in one read; Enter and Ctrl+J are
    priority keys handled by the app at once, while typed characters queue at the text area: they must not
    overtake the characters typed before them."""
    app = ComposerHost()

    async def burst(pilot: Pilot[Any], text: str, newline_after: int | None = None) -> None:
        gate = asyncio.Event()
        area = app.query_one(Composer).area
        area.call_later(gate.wait)  # the text area is busy (a slow machine): its keys wait in its queue
        for i, ch in enumerate(text):
            app.post_message(events.Key(ch, ch))
            if i == newline_after:
                app.post_message(events.Key("ctrl+j", None))
        app.post_message(events.Key("enter", "\r"))
        await asyncio.sleep(0.2)  # the app has seen every key by now; the text area has not
        gate.set()
        await pilot.pause(0.1)

    async def main() -> None:
        async with app.run_test(size=(80, 12)) as pilot:
            for text, newline_after, sent in (("fix the tests", None, "fix the tests"), ("/redo", None, "/redo"),
                                              ("two lines", 2, "two\n lines")):
                await burst(pilot, text, newline_after)
                assert (app.sent[-1:], app.query_one(Composer).text) == ([sent], "")

    asyncio.run(main())
    assert len(app.sent) == 3
