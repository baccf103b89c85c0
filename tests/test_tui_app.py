"""The Textual app end to end: real Codex, scripted model, Pilot keys; assert the screen, files and threads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import session_options
from textual.pilot import Pilot

from app.scripted_model import ScriptedModel, add_file, message, pause, shell
from app.tui.app import CodexrApp
from app.tui.blocks import AgentBlock, CommandBlock, FileChangeBlock, NoticeBlock, PromptBlock, TurnBlock

SIZE = (110, 40)
WAIT_S = 45.0


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def screen_text(app: CodexrApp) -> str:
    """What the terminal shows now, as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def until(pilot: Pilot[Any], cond: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    """Let the app run until `cond()` holds (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}; screen:\n{screen_text(pilot.app)}")  # type: ignore[arg-type]
        await pilot.pause(0.05)


async def ready(pilot: Pilot[Any]) -> CodexrApp:
    app = pilot.app
    assert isinstance(app, CodexrApp)
    await until(pilot, lambda: app.status_bar.state == "ready", "Codex to start")
    return app


async def type_and_send(pilot: Pilot[Any], text: str) -> None:
    app = pilot.app
    assert isinstance(app, CodexrApp)
    app.composer.set_text(text)
    await pilot.press("enter")


def turns_done(app: CodexrApp) -> int:
    return len(app.query(TurnBlock))


def drive(app: CodexrApp, scenario: Callable[[Pilot[Any]], Awaitable[None]]) -> None:
    """Run the app headless at a fixed size and play `scenario` against it."""

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await scenario(pilot)

    asyncio.run(main())


def test_prompt_streams_markdown_command_and_diff(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("tui-one", [add_file("notes.md", "alpha\nbeta\n"), shell("echo hi-from-shell > out.txt"),
                             message("Made **notes.md** and `out.txt`:\n\n- alpha\n- beta")])
    opts = session_options(model, tmp_path, {"keep.txt": "k\n"})
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-one please")
        await until(pilot, lambda: turns_done(app) == 1, "the turn to finish")
        await pilot.pause(0.2)
        agent = app.query(AgentBlock).last()
        assert agent.text.startswith("Made **notes.md**")
        text = screen_text(app)
        assert "▶ prompt 1" in text and "tui-one please" in text
        assert "Made notes.md and out.txt" in text  # Markdown rendered, not raw asterisks
        assert "• alpha" in text
        assert "$ echo hi-from-shell > out.txt" in text and "✓ exit 0" in text
        assert "A notes.md +2 -0" in text  # the edit block and the turn's files
        assert "A out.txt +1 -0" in text  # shell-made change counted from the snapshots
        assert "turn completed" in text
        assert len(app.query(FileChangeBlock)) == 1 and len(app.query(CommandBlock)) == 1
        assert len(app.query(PromptBlock)) == 1

    drive(app, scenario)
    assert (opts.cwd / "notes.md").read_text() == "alpha\nbeta\n"
    assert (opts.cwd / "out.txt").read_text() == "hi-from-shell\n"
