"""Streaming into the app (issue 20 §2): a command's output arrives whole and in order however the driver's pieces are
batched, the running block shows its newest lines, and keys typed meanwhile land in the composer in order.

The driver is a `ReplayDriver` playing events from its own thread, as the live Driver emits them; no timing is asserted.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual.widgets import Static
from tui_helpers import until

from app.codex.events import AgentDelta, CommandFinished, CommandOutput, CommandStarted, Notice, UserPrompt
from app.shared.replay import ReplayDriver
from app.tui.app import CodexrApp
from app.tui.blocks import LIVE_TAIL_LINES, CommandBlock, LiveTail
from app.tui.full_transcript import full_text
from app.tui.messages import coalesce
from app.tui.transcript import Entry

LINES = 600


def pieces() -> list[str]:
    """LINES lines of output cut into pieces that end mid-line as often as at a line's end."""
    text = "".join(f"output line {i:04d}\n" for i in range(LINES))
    return [text[i:i + 13] for i in range(0, len(text), 13)]


def shown(block: CommandBlock) -> str:
    """The command's output as its view shows it ("" while the block has not built its view yet)."""
    views = block.query(".command-output").results(Static)
    view = next(iter(views), None)
    if view is None:
        return ""
    content = view.content
    return str(getattr(content, "plain", content))


def test_pieces_of_one_item_are_joined_and_nothing_else_moves() -> None:
    events = [CommandOutput("a", "1"), CommandOutput("a", "2"), CommandOutput("b", "3"), CommandOutput("a", "4"),
              Notice("between"), AgentDelta("m", "he"), AgentDelta("m", "llo"), CommandOutput("a", "5")]
    assert coalesce(events) == [CommandOutput("a", "12"), CommandOutput("b", "3"), CommandOutput("a", "4"),
                                Notice("between"), AgentDelta("m", "hello"), CommandOutput("a", "5")]
    assert coalesce([]) == []


def test_the_live_view_keeps_the_newest_lines_whatever_the_pieces() -> None:
    tail = LiveTail(3)
    for piece in ["one\ntw", "o\nthree\nfo", "ur"]:
        tail.feed(piece)
    assert tail.text().plain == "… 1 earlier line (all of them when it ends)\ntwo\nthree\nfour"
    tail.feed("\rFOUR\n")  # a carriage return redraws its line, as in a terminal
    assert tail.text().plain.splitlines()[1:] == ["two", "three", "FOUR"]
    assert LiveTail().text().plain == "(no output)"


def test_streamed_output_arrives_whole_and_in_order_while_keys_land_in_the_composer() -> None:
    parts = pieces()
    events: list[Any] = [UserPrompt("", "stream a lot", 1, True), CommandStarted("c1", "make test", "/ws"),
                         *(CommandOutput("c1", p) for p in parts)]
    app = CodexrApp(driver_factory=lambda emit: ReplayDriver(events, emit, delay=0.002), workspace="(replay)")
    typed = "type-ahead while it streams"

    async def main() -> None:
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: bool(app.query(CommandBlock)), "the command's block")
            for ch in typed:  # while the pieces arrive (the replay plays them for ~2 s)
                await pilot.press(ch)
            block = app.query_one(CommandBlock)
            await until(pilot, lambda: f"output line {LINES - 1:04d}" in shown(block), "the last line in the block")
            assert app.composer.text == typed
            assert block.output == "".join(parts), "pieces were lost or reordered on the way"
            live = shown(block).splitlines()
            assert live == [f"… {LINES - LIVE_TAIL_LINES} earlier lines (all of them when it ends)",
                            *(f"output line {i:04d}" for i in range(LINES - LIVE_TAIL_LINES, LINES))]
            # the end: Codex's item carries no output of its own here, so the block keeps what streamed
            block.finish(CommandFinished("c1", "make test", "", 0, 5, "completed"))
            assert block.copy_text() == "$ make test\n" + "".join(parts)
            assert shown(block).splitlines()[-1] == f"output line {LINES - 1:04d}"

    asyncio.run(main())


def test_ctrl_t_shows_a_running_commands_output_so_far_as_text() -> None:
    """The transcript keeps a running command's output in pieces; Ctrl+T's whole transcript shows them as text."""
    entry = Entry("cmd:c1", CommandStarted("c1", "make test", "/ws"), output=["one\ntw", "o\n"])
    assert full_text([entry]).splitlines()[1:] == ["one", "two"]


def test_a_running_commands_view_keeps_one_height_while_it_runs() -> None:
    """The live view does not grow a row at a time under the user's eyes (each growth laid the screen out again): while
    the command runs it holds a full tail's rows, and once the command ends it is as tall as its output."""
    events: list[Any] = [UserPrompt("", "run it", 1, True), CommandStarted("c1", "make test", "/ws"),
                         CommandOutput("c1", "first line\n")]
    app = CodexrApp(driver_factory=lambda emit: ReplayDriver(events, emit), workspace="(replay)")

    async def main() -> None:
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: bool(app.query(CommandBlock)) and "first line" in shown(
                app.query_one(CommandBlock)), "the command's first line")
            view = app.query_one(CommandBlock).query_one(".command-output", Static)
            assert view.region.height == LIVE_TAIL_LINES + 1
            app.query_one(CommandBlock).add_output("".join(f"line {i}\n" for i in range(3)))
            await until(pilot, lambda: "line 2" in shown(app.query_one(CommandBlock)), "the next lines")
            assert view.region.height == LIVE_TAIL_LINES + 1
            app.query_one(CommandBlock).finish(CommandFinished("c1", "make test", "", 1, 5, "completed"))
            await until(pilot, lambda: view.region.height == 4, "the ended command's output at its own height")

    asyncio.run(main())


def test_an_app_that_quits_before_codex_is_up_leaves_the_collector_to_the_interpreter() -> None:
    """The app takes full garbage collections over once Codex is up and gives them back when it quits; quitting first
    must not leave them paced in a process that goes on (this suite runs many apps in one process)."""
    import gc
    import threading

    gate = threading.Event()

    class SlowStart(ReplayDriver):
        def start(self) -> bool:
            gate.wait(10)
            return super().start()

    before = gc.get_threshold()
    drivers: list[SlowStart] = []

    def make(emit: Any) -> SlowStart:
        drivers.append(SlowStart([], emit))
        return drivers[-1]

    app = CodexrApp(driver_factory=make, workspace="(replay)")

    async def main() -> None:
        async with app.run_test(size=(100, 40)) as pilot:
            await until(pilot, lambda: bool(drivers), "the driver")
        gate.set()  # Codex "comes up" once the app is gone
        await asyncio.sleep(0.3)

    asyncio.run(main())
    assert drivers[0].done.wait(5)
    assert gc.get_threshold() == before
