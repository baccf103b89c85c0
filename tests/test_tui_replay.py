"""`codexr replay`: a recorded event log drives the real app without Codex; `--record` writes such a log."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_helpers import screen_text, until, until_shown

from app.codex.events import (
    AgentMessage,
    CommandFinished,
    CommandStarted,
    FileChanges,
    FileDiff,
    FileStat,
    Notice,
    ThreadLoaded,
    TurnFinished,
    UserPrompt,
    short_thread,
)
from app.shared.replay import ReplayDriver, read_log, write_log
from app.tui.app import CodexrApp
from app.tui.blocks import PromptBlock, TurnBlock

ROOT = Path(__file__).resolve().parent.parent
EVENTS: list[Any] = [
    ThreadLoaded("thread-replay-1", (
        UserPrompt("", "first: the old prompt", 1, True),
        AgentMessage("m0", "The **first** answer"),
        TurnFinished("turn-1", "completed", None, 1.0, (), "a" * 64, "b" * 64),
    ), "resumed"),
    UserPrompt("", "second: add a greeting", 2, True),
    CommandStarted("c1", "printf replayed-output", "/ws"),
    CommandFinished("c1", "printf replayed-output", "replayed-output", 0, 12, "completed"),
    FileChanges("f1", "completed", (FileDiff("hello.py", "update", "@@ -1 +1 @@\n-print('hi')\n+print('hello')\n"),)),
    AgentMessage("m1", "Added the *greeting* to `hello.py`."),
    TurnFinished("turn-2", "completed", None, 2.0, (FileStat("hello.py", "modified", 1, 1),), "c" * 64, "d" * 64),
]



async def at_top(pilot: Pilot[Any], cond: Callable[[], object], what: str) -> None:
    """Wait for `cond()` with the transcript scrolled home before each look (a repaint may move it)."""
    app = pilot.app
    assert isinstance(app, CodexrApp)

    def home_then() -> object:
        app.transcript.scroll_home(animate=False)
        return cond()

    await until(pilot, home_then, what, timeout=30)


def test_a_replayed_log_draws_its_thread_and_records_again(tmp_path: Path) -> None:
    log, again = tmp_path / "session.jsonl", tmp_path / "again.jsonl"
    write_log(log, EVENTS)
    events = read_log(log)
    app = CodexrApp(driver_factory=lambda emit: ReplayDriver(events, emit), record=again, workspace="(replay)")

    async def main() -> None:
        async with app.run_test(size=(110, 50)) as pilot:
            await until(pilot, lambda: len(app.query(TurnBlock)) >= 2 and app.status_bar.state == "ready",
                        "the replay", timeout=30)
            assert [b.number for b in app.query(PromptBlock)] == [1, 2]
            await until_shown(pilot, "first: the old prompt", "The first answer", "second: add a greeting",
                              "$ printf replayed-output", "✓ exit 0", "hello.py", "Added the greeting to hello.py",
                              f"resumed (thread {short_thread('thread-replay-1')})", timeout=30)
            app.composer.set_text("a new prompt")
            await pilot.press("enter")  # nothing is sent anywhere, and the user is told so
            await pilot.press("ctrl+r")  # neither does a rewind pretend to work
            await until_shown(pilot, "replay: not sent to any agent: a new prompt", "not available in a replay",
                              timeout=30)
            await pilot.press("ctrl+q")

    asyncio.run(main())
    *recorded, notice = read_log(again)
    assert recorded == EVENTS  # the recording is the log, plus the notice the prompt above got
    assert "not sent to any agent: a new prompt" in notice.text


@pytest.mark.parametrize("args, content, says", [
    (["replay", "LOG"], '{"type": "UserPrompt", "turn_id": "", "text": "ok", "number": 1, "has_snapshot": true}\n'
     'not json\n', "line 2 is not an event"),
    (["replay", "LOG"], None, "cannot read replay log"),
    (["--record", "LOG", "exec", "hi"], None, "--record works with the app only"),
])
def test_bad_replay_or_record_input_is_one_clear_error(tmp_path: Path, args: list[str], content: str | None,
                                                       says: str) -> None:
    log = tmp_path / "bad.jsonl"
    if content is not None:
        log.write_text(content)
    argv = [str(log) if a == "LOG" else a for a in args]
    run = subprocess.run([sys.executable, "-m", "app.cli", *argv], cwd=ROOT, capture_output=True, text=True,
                         env={"CODEX_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert run.returncode == 2
    assert run.stderr.startswith("codexr: error: ") and says in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
    assert run.stdout == "" and not (tmp_path / "home").exists() and (content is not None) == log.exists()


def test_a_long_replayed_thread_folds_old_blocks_and_brings_them_back(monkeypatch: pytest.MonkeyPatch) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from tui_log import session_log

    from app.tui.transcript import Transcript

    monkeypatch.setattr(Transcript, "MAX_MOUNTED", 20)  # the mechanism, at a size a test can afford
    monkeypatch.setattr(Transcript, "SHOW_MORE", 8)
    events = session_log(turns=8, output_mb=0.05)  # 48 blocks: more than the transcript keeps mounted
    app = CodexrApp(driver_factory=lambda emit: ReplayDriver(events, emit), workspace="(replay)")

    async def main() -> None:
        async with app.run_test(size=(110, 40)) as pilot:
            t = app.transcript

            await until(pilot, lambda: len(t.entries) >= 48 and app.status_bar.state == "ready", "the replay",
                        timeout=30)
            assert len(t.mounted_blocks()) <= Transcript.MAX_MOUNTED < len(t.entries)
            assert 1 not in [b.number for b in app.query(PromptBlock)]  # the oldest turns have no widgets
            t.focus()
            t.enter_cursor(last=False)  # the first block still mounted, then up: the folded ones come back
            await at_top(pilot, lambda: "earlier blocks folded away" in screen_text(app), "the fold notice")
            folded = t._first
            await pilot.press("up")  # on the first mounted block: the folded ones before it come back
            assert 0 < t._first < folded
            await at_top(pilot, lambda: t.scroll_y == 0, "the top")
            top = t.mounted_blocks()[0][1]  # the first block before `e`
            await pilot.press("e")
            # the view stays on what was read: the blocks shown above it are not on screen
            await until(pilot, lambda: "earlier blocks folded away" not in screen_text(app) and top.region.y <= 2,
                        "the view to stay on the block that was read", timeout=30)
            assert t.scroll_y > 0
            while t._first:
                await pilot.press("e")
            await at_top(pilot, lambda: "Prompt 1: " in screen_text(app), "the first prompt")
            assert [b.number for b in app.query(PromptBlock)][:2] == [1, 2]
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_reading_back_to_the_first_prompt_slides_a_bounded_window_and_tab_brings_the_end_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading far back used to mount every block shown on the way (the top of a 500-turn thread was out of
    reach); now the blocks at the other end are unmounted as earlier ones come back, in both directions."""
    sys.path.insert(0, str(ROOT / "bench"))
    from tui_log import session_log

    from app.tui.transcript import Transcript

    monkeypatch.setattr(Transcript, "MAX_MOUNTED", 20)
    monkeypatch.setattr(Transcript, "SHOW_MORE", 8)
    bound = Transcript.MAX_MOUNTED + Transcript.SHOW_MORE
    events = session_log(turns=10, output_mb=0.05)  # 60 blocks: over twice the bound, so the window slides both ways
    app = CodexrApp(driver_factory=lambda emit: ReplayDriver(events, emit), workspace="(replay)")

    async def main() -> None:
        async with app.run_test(size=(110, 40)) as pilot:
            t = app.transcript

            await until(pilot, lambda: len(t.entries) >= 60 and app.status_bar.state == "ready", "the replay")
            newest = t.entries[-1].widget
            assert newest is not None
            t.focus()
            t.enter_cursor(last=False)
            peak = 0
            while t._first:  # `e` all the way back to the first prompt
                await pilot.press("e")
                peak = max(peak, len(t.mounted_blocks()))
            assert peak <= bound and not newest.is_attached  # the newest blocks made room
            await at_top(pilot, lambda: "Prompt 1: " in screen_text(app), "the first prompt")
            await t.apply(Notice("news while reading far back"))  # live output does not pull the view away
            assert t.entries[-1].widget is None
            later = t.query_one("#later")
            assert later.display and t.children[-1] is later  # the count of later blocks, under the last one
            while t._end < len(t.entries):  # Down past the last mounted block, all the way to the end
                await pilot.press("down")
                peak = max(peak, len(t.mounted_blocks()))
            assert peak <= bound and t._first > 0
            t.enter_cursor(last=False)
            while t._first:
                await pilot.press("e")
            await pilot.press("tab")  # back to the composer: the newest blocks come back
            await until_shown(pilot, "news while reading far back")
            assert t._end == len(t.entries) and len(t.mounted_blocks()) <= bound
            t.focus()
            t.enter_cursor()
            await pilot.press("home")  # one key to the first prompt, however long the thread
            await until_shown(pilot, "Prompt 1: ")
            assert t._first == 0 and len(t.mounted_blocks()) <= bound
            await pilot.press("end")  # and back to the newest
            await until_shown(pilot, "news while reading far back")
            await pilot.press("ctrl+q")

    asyncio.run(main())


def test_r_on_any_block_of_a_turn_rewinds_to_that_turns_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """`r` only worked on the ▶ prompt line; on the answer or the command of a turn it only warned."""
    asked: list[int] = []
    monkeypatch.setattr(CodexrApp, "start_rewind", lambda self, number=None: asked.append(number))
    app = CodexrApp(driver_factory=lambda emit: ReplayDriver(EVENTS, emit), workspace="(replay)")

    async def main() -> None:
        async with app.run_test(size=(110, 50)) as pilot:
            await until(pilot, lambda: len(app.query(TurnBlock)) >= 2 and app.status_bar.state == "ready",
                        "the replay")
            t = app.transcript
            t.focus()
            t.enter_cursor()  # the last block: turn 2's summary
            await pilot.press("r")
            rows = [i for i, _ in t.mounted_blocks()]
            t._set_cursor(rows[2])  # turn 1's summary (after its prompt and its answer)
            await pilot.press("r")
            await until(pilot, lambda: len(asked) == 2, "both rewinds to be asked for")
            assert asked == [2, 1]
            await pilot.press("ctrl+q")

    asyncio.run(main())
