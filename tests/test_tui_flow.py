"""Integrated flows of the Textual app: typed keys in the order a terminal delivers them, rewind and redo through
the main app (picker, fork, composer, status bar), and the main screen mid-turn."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from e2e_helpers import processes_running, session_options, wait_gone
from test_tui_app import SIZE, drive, ready, turns_done, type_and_send
from textual import events
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.widgets import Static
from tui_helpers import WAIT_S, screen_text, until, until_shown

from app.codex.events import AgentDelta, AgentMessage, Notice, TurnFinished, UserPrompt, short_thread
from app.codex.scripted_model import ScriptedModel, add_file, message, pause, reasoning, shell
from app.shared.replay import ReplayDriver
from app.tui.app import CodexrApp
from app.tui.blocks import AgentBlock, Block, CommandBlock, PromptBlock
from app.tui.composer import Composer
from app.tui.redo_dialog import RedoDialog
from app.tui.rewind_picker import RewindPicker
from app.tui.transcript import Transcript


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

        def typed_waiting() -> int:
            """The typed characters waiting at the blocked text area (queued, or peeked at by its loop)."""
            return sum(isinstance(m, events.Key) for m in (*area._message_queue.values, area._pending_message))

        try:  # the app has seen every key (its queue is empty), the text area none of the characters
            deadline = time.monotonic() + WAIT_S
            while typed_waiting() < len(text) or not app._message_queue.empty():
                assert time.monotonic() < deadline, "the app did not hand the keys to the text area"
                await asyncio.sleep(0.01)  # not pilot.pause: that waits for the text area, which is blocked
        finally:
            gate.set()

    async def main() -> None:
        async with app.run_test(size=(80, 12)) as pilot:
            cases = (("fix the tests", None, "fix the tests"), ("/redo", None, "/redo"),
                     ("two lines", 2, "two\n lines"))
            for n, (text, newline_after, sent) in enumerate(cases, 1):
                await burst(pilot, text, newline_after)
                await until(pilot, lambda: len(app.sent) >= n, "the burst to be sent")  # noqa: B023
                assert (app.sent[-1:], app.query_one(Composer).text) == ([sent], "")

    asyncio.run(main())
    assert len(app.sent) == 3


def test_a_multi_line_paste_without_bracketed_paste_stays_one_prompt() -> None:
    """Issue 20: without bracketed paste a terminal hands over a paste as keys, Enters included: 3 lines became
    2 prompts and a line left over. As in the official TUI, an Enter with more keys right behind it is part of
    a paste (a newline); the Enter that ends a burst still sends it."""
    app = ComposerHost()

    def burst(text: str) -> None:
        for ch in text:
            app.post_message(events.Key("enter", "\r") if ch == "\r" else events.Key(ch, ch))

    async def main() -> None:
        async with app.run_test(size=(80, 12)) as pilot:
            composer = app.query_one(Composer)
            burst("first line\rsecond line\rthird")
            await until(pilot, lambda: composer.text == "first line\nsecond line\nthird", "the pasted text")
            assert app.sent == []
            composer.set_text("")
            burst("one\rtwo\r")  # a paste whose last key is Enter: sent, as one prompt
            await until(pilot, lambda: len(app.sent) == 1, "the pasted prompt to be sent")
            assert app.sent == ["one\ntwo"] and composer.text == ""  # the first paste's Enters sent nothing

    asyncio.run(main())


def test_an_enter_typed_after_a_pause_sends_at_once_and_the_next_keys_start_the_next_prompt() -> None:
    """Issue 20 §2: every Enter waited PASTE_WINDOW_S for a paste to go on, so the keys of the next prompt typed
    right behind a deliberate Enter were taken for a paste's next line and sent with it. Only an Enter in a burst
    of keys (a paste) waits now; one typed after a pause sends what is typed, and what follows is the next prompt."""
    app = CodexrApp(driver_factory=lambda emit: ReplayDriver([], emit), workspace="(replay)")
    sent: list[str] = []

    def key(ch: str, at: float) -> events.Key:
        ev = events.Key("enter", "\r") if ch == "\r" else events.Key(ch, ch)
        ev.time = at  # when the terminal handed it over
        return ev

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.driver is not None, "the app to be live")
            app.driver.submit = lambda text, *_: sent.append(text)  # type: ignore[union-attr, method-assign]
            now = time.monotonic()
            for i, ch in enumerate("first prompt"):
                app.post_message(key(ch, now + i * 0.12))  # typed: 120 ms a key
            app.post_message(key("\r", now + 12 * 0.12 + 0.3))  # Enter after a pause
            for ch in "second":  # the next prompt, typed at once
                app.post_message(key(ch, now + 12 * 0.12 + 0.31))
            await until(pilot, lambda: app.composer.text == "second", "the next prompt in the composer")
            assert sent == ["first prompt"]

    asyncio.run(main())


def status_thread(screen: str) -> str:
    """The thread as the status bar shows it (the line above the footer)."""
    return screen.splitlines()[-2].split("thread ", 1)[1].split()[0]


def prompts_shown(app: CodexrApp) -> list[str]:
    return [b.event.text for b in app.query(PromptBlock)]


def answers_shown(app: CodexrApp) -> list[str]:
    return [b.text for b in app.query(AgentBlock)]


def test_rewind_from_esc_esc_then_redo_through_the_main_app(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("flow-one", [add_file("a.txt", "one\n"), message("made a.txt")])
    model.script("flow-two", [shell("echo two >> a.txt && echo new > b.txt"), message("extended a.txt, made b.txt")])
    opts = session_options(model, tmp_path, {"keep.txt": "k\n"})
    ws = opts.cwd
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "flow-one please")
        await until(pilot, lambda: turns_done(app) == 1, "prompt 1")
        await type_and_send(pilot, "flow-two please")
        await until(pilot, lambda: turns_done(app) == 2 and not app.busy, "prompt 2")
        assert app.driver is not None
        origin = app.driver.thread_id
        assert origin is not None
        await until(pilot, lambda: f"thread {short_thread(origin)}" in screen_text(app).splitlines()[-2],
                    "the status bar's thread")
        shown_origin = status_thread(screen_text(app))
        keys = screen_text(app).splitlines()[-1]  # the main screen's footer

        await pilot.press("escape", "escape")  # on the empty composer: the picker, on the last prompt
        await until(pilot, lambda: isinstance(app.screen, RewindPicker), "the picker")
        picker = app.screen
        assert isinstance(picker, RewindPicker)
        # opaque: nothing of the main screen shows through, so Textual does not draw it beneath each frame
        assert picker.styles.background.a == 1
        # its layout for the terminal's size from the start (Textual's own breakpoints come after the first frame)
        probe = RewindPicker(app.driver)
        assert probe.has_class("-wide" if SIZE[0] >= 100 else "-narrow", "-tall" if SIZE[1] >= 30 else "-short")
        await until(pilot, lambda: picker._ready and not picker.in_flight, "the plan of prompt 2")
        await until_shown(pilot, "D delete: b.txt")
        await pilot.press("enter")
        await until(pilot, lambda: len(app.screen_stack) == 1 and app.driver is not None
                    and app.driver.thread_id != origin and app.composer.text, "the fork")
        await until(pilot, lambda: "↷ redo 1" in screen_text(app), "the status of the fork")
        fork = app.driver.thread_id
        assert fork is not None
        # the notice and the status bar are drawn as each arrives: wait for both
        text = await until_shown(pilot, "rewound to prompt 2 (files and conversation): 1 file written, 1 deleted",
                                 f"thread {short_thread(fork)}")
        # the forked conversation, read back from Codex: prompt 1 and its answer, nothing of prompt 2
        assert prompts_shown(app) == ["flow-one please"] and answers_shown(app) == ["made a.txt"]
        assert "rewound to prompt 2 (files and conversation): 1 file written, 1 deleted" in text
        status = text.splitlines()[-2]
        assert f"thread {short_thread(fork)}" in status and "↷ redo 1" in status
        assert status_thread(text) != shown_origin  # a user can tell the fork from the thread it left
        assert app.composer.text == "flow-two please" and app.focused is app.composer.area
        assert app.composer.area.selected_text == "flow-two please"  # put back selected: typing replaces it
        assert (ws / "a.txt").read_text() == "one\n" and not (ws / "b.txt").exists()

        # Issue 36: typed after the put-back prompt, `/redo` became "flow-two please/redo", sent to the agent
        await pilot.press("/", "r", "e", "d", "o", "enter")
        await until(pilot, lambda: isinstance(app.screen, RedoDialog), "the redo dialog")
        dialog = app.screen
        assert isinstance(dialog, RedoDialog)
        await until(pilot, lambda: dialog.preview is not None and not dialog.in_flight, "the redo's plan")
        await until_shown(pilot, "no conflicts: nothing changed since the rewind")
        await pilot.press("enter")
        await until(pilot, lambda: len(app.screen_stack) == 1 and app.driver is not None
                    and app.driver.thread_id == origin and len(app.query(PromptBlock)) == 2, "the original thread")
        await until(pilot, lambda: "↷ redo" not in screen_text(app).splitlines()[-2], "the status of the original")
        assert prompts_shown(app) == ["flow-one please", "flow-two please"]
        assert answers_shown(app) == ["made a.txt", "extended a.txt, made b.txt"]
        text = await until_shown(pilot, "redo: back where the rewind started (files and conversation)",
                                 f"thread {shown_origin}")
        assert status_thread(text) == shown_origin
        assert text.splitlines()[-1] == keys  # the footer's keys, left alone under the dialogs, are the main ones

    drive(app, scenario)
    assert (ws / "a.txt").read_text() == "one\ntwo\n" and (ws / "b.txt").read_text() == "new\n"


def test_snapshot_main_screen_mid_turn(model: ScriptedModel, tmp_path: Path, snap_compare: Any) -> None:
    """The turn's blocks so far while Codex still works (the model is thinking), the next prompt queued."""
    model.script("flow-busy", [reasoning("Plan: write the build script, then run it"),
                               add_file("build.sh", "echo building\n"), shell("sh build.sh"),
                               pause(15), message("built")])
    app = CodexrApp(session_options(model, tmp_path, {"README.md": "demo\n"}), stable_status=True)

    def ran() -> bool:
        blocks = app.query(CommandBlock)
        return bool(blocks) and blocks.last().finished is not None

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        app.composer.area.cursor_blink = False
        await type_and_send(pilot, "flow-busy build it")
        await until(pilot, ran, "the build command")
        await type_and_send(pilot, "flow-next then test it")
        await until(pilot, lambda: "queued (1)" in screen_text(app), "the queued prompt")
        await until(pilot, lambda: "◆ tracking 1 file " in screen_text(app).splitlines()[-2],
                    "the status bar to count README.md from the pre-turn capture")
        text = await until_shown(pilot, "● working · 1 queued", "∴ thinking: Plan: write the build script",
                                 "+echo building", "$ sh build.sh   ✓ exit 0", "⏳ queued (1): flow-next then test it")
        assert "turn completed" not in text

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


class TranscriptHost(App[None]):
    """A transcript above a panel that comes and goes (an approval request in place of the composer)."""

    CSS = "#transcript { height: 1fr; } #panel { height: 8; } .block { height: auto; }"

    def compose(self) -> ComposeResult:
        yield Transcript(id="transcript")
        yield Static("\n".join(f"request line {i}" for i in range(8)), id="panel")


async def forty_lines(pilot: Any) -> Transcript:
    """The host's transcript holding 40 lines, more than its view: laid out and shown to the end."""
    t = pilot.app.query_one(Transcript)
    for i in range(40):
        await t.note(f"line {i}")
    await until_shown(pilot, "line 39")
    return t


def test_transcript_keeps_following_when_the_space_below_it_shrinks() -> None:
    """Answering an approval gives the transcript its height back; that clamp is no scroll by the user."""
    app = TranscriptHost()

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            t = await forty_lines(pilot)  # laid out, and followed to the end
            assert t.scroll_y == t.max_scroll_y > 0
            app.query_one("#panel").display = False  # the request answered: the transcript grows
            await until(pilot, lambda: t.region.height == app.size.height, "the transcript to take the space")
            await until_shown(pilot, "line 16")  # the clamp: 8 more rows show earlier lines
            await t.note("✗ cancelled (turn stopped)")
            await until(pilot, lambda: t.max_scroll_y > 16, "the new line to be laid out")
            await until_shown(pilot, "✗ cancelled (turn stopped)")
            assert t.scroll_y == t.max_scroll_y

    asyncio.run(main())


def test_a_new_block_is_in_view_in_the_frame_that_lays_it_out() -> None:
    """Issue 20 §2 (Enter -> answer): once the transcript filled the screen, a new block was laid out below the view
    and the scroll to it waited for that frame, so every new block cost a second full repaint before it showed (the
    5th-8th prompt of a session under load). Now the layout pass that places the block also keeps the view at the
    end; a view the user scrolled up, or holding the block cursor, stays where it is."""
    app = TranscriptHost()

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            t = await forty_lines(pilot)
            await t.note("the newest line")
            app.screen._refresh_layout()  # one frame's layout, nothing else run (no callback after the refresh)
            assert t.max_scroll_y > 0 and t.scroll_y == t.max_scroll_y
            assert "the newest line" in screen_text(app)
            t.focus()
            await pilot.press("pageup")  # the user scrolls up: new lines do not move the view
            await until(pilot, lambda: t.scroll_y < t.max_scroll_y - 1, "the scroll")
            held = t.scroll_y
            await t.note("one more line")
            app.screen._refresh_layout()
            await pilot.pause()
            assert t.scroll_y == held
            await pilot.press("end")  # back at the end (the user's own key): following again
            await until(pilot, lambda: t.scroll_y == t.max_scroll_y, "the end")
            t.enter_cursor()  # the block cursor on the last block: new lines do not move the view either
            await pilot.pause()
            held = t.scroll_y
            for i in range(3):
                await t.note(f"under the cursor {i}")
            app.screen._refresh_layout()
            await pilot.pause()
            assert t.scroll_y == held
            t.blur()  # following again; then a thread whose blocks fit the view is drawn from its top, not its bottom
            await pilot.pause()
            await t.reset([Notice("a short thread", "info")])
            await until_shown(pilot, "a short thread")
            await until(pilot, lambda: t.query(Block).first().region.y == t.region.y, "the block at the top")
            assert t.scroll_y == 0

    asyncio.run(main())


def test_a_streamed_answer_shows_its_first_piece_in_the_frame_that_lays_out_its_block() -> None:
    """Issue 20 §2 (Enter -> answer): the answer's block was mounted empty and its first piece came in a later
    layout pass, a frame after the block's. Now the block mounts with it; later pieces and the final text follow."""
    app = TranscriptHost()

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            t = app.query_one(Transcript)
            await t.note("before the answer")
            await until_shown(pilot, "before the answer")
            await t.apply(AgentDelta("msg-1", "The first words"))
            app.screen._refresh_layout()  # one frame's layout, nothing else run
            assert "The first words" in screen_text(app)
            await t.apply(AgentDelta("msg-1", " and the rest."))
            await t.apply(AgentMessage("msg-1", "The first words and the rest."))
            await until_shown(pilot, "The first words and the rest.")
            assert len(t.query(AgentBlock)) == 1

    asyncio.run(main())


def test_a_frame_due_while_a_block_mounts_lays_it_out_once_whole(monkeypatch: Any) -> None:
    """Issue 20 §2 (Enter -> answer): the frame timer fired while the answer's block was still mounting (its children
    mounted, the block's own mount not done) and laid the screen out, then again once the mount was done: two passes
    for one block. Now a block mounts in one batch: a frame due meanwhile waits, and one pass shows the block."""
    app = TranscriptHost()
    passes: list[str] = []

    def on_mount(self: AgentBlock) -> None:  # the frame timer fires here, as it did in the profiled runs
        app.screen._on_timer_update()

    monkeypatch.setattr(AgentBlock, "on_mount", on_mount, raising=False)

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            t = app.query_one(Transcript)
            await t.note("before the answer")
            await until_shown(pilot, "before the answer")
            screen = app.screen
            layout = screen._refresh_layout

            def counted(*a: Any, **k: Any) -> None:
                passes.append(screen_text(app))
                layout(*a, **k)

            monkeypatch.setattr(screen, "_refresh_layout", counted)
            await t.apply(AgentDelta("msg-1", "The first words"))
            assert passes == []  # nothing laid out while the block mounted
            app.screen._refresh_layout()  # the next frame's layout
            assert "The first words" in screen_text(app)
            assert len(passes) == 1

    asyncio.run(main())


def test_a_reloaded_thread_whose_answers_grow_after_the_redraw_is_shown_to_its_end() -> None:
    """The tmux redo test failed ~1 run in 10: after the redo the original thread was redrawn, but the view stayed at
    its top with the last answer and the redo's line below it. A reloaded answer is Markdown, which lays out its
    paragraphs after its block is mounted; the follow that ran at the redraw saw blocks that fit, did not anchor, and
    nothing followed the growth. Here an answer grows after the redraw, as that late layout does: the end shows; a
    view the user scrolled up does not move."""
    app = TranscriptHost()
    paragraphs = "\n\n".join(f"paragraph {i}" for i in range(30))

    async def main() -> None:
        async with app.run_test(size=(80, 24)) as pilot:
            t = app.query_one(Transcript)
            await t.reset([UserPrompt("t1", "prompt 1", 1), AgentMessage("a1", "short"),
                           TurnFinished("t1", "completed")])
            await until_shown(pilot, "short")
            assert t.max_scroll_y == 0  # it fits: drawn from the top
            from textual.widgets import Markdown

            await t.query_one(AgentBlock).query_one(Markdown).update(paragraphs)  # the late layout
            await until(pilot, lambda: t.max_scroll_y > 0, "the answer to outgrow the view")
            await until_shown(pilot, "paragraph 29")
            assert t.scroll_y == t.max_scroll_y
            t.focus()
            await pilot.press("pageup")  # the user scrolls up: later growth leaves the view where they put it
            await until(pilot, lambda: t.scroll_y < t.max_scroll_y - 1, "the scroll")
            held = t.scroll_y
            await t.query_one(AgentBlock).query_one(Markdown).update(paragraphs + "\n\nmore\n\nand more")
            await until(pilot, lambda: "and more" in t.query_one(AgentBlock).query_one(Markdown).source, "the update")
            await pilot.pause()
            assert t.scroll_y == held

    asyncio.run(main())


def test_a_resize_keeps_the_bottom_in_view_and_a_scrolled_up_view_in_place() -> None:
    """Issue 20 §4: after a resize a transcript that was at the bottom showed earlier lines (the new height or the
    reflowed text moved the end out of view). Now it stays at the bottom; one the user scrolled up keeps the
    block it showed at the top."""
    app = TranscriptHost()
    long = "word " * 24  # 120 characters: reflowed by every width change

    async def main() -> None:
        async with app.run_test(size=(100, 30)) as pilot:
            t = app.query_one(Transcript)
            for i in range(60):
                await t.note(f"line {i}: {long}")
            await until_shown(pilot, "line 59: word")
            for size in ((60, 20), (80, 24), (120, 40), (60, 20)):
                await pilot.resize_terminal(*size)
                await until(pilot, lambda s=size: t.region.width == s[0], "the new size")
                await until_shown(pilot, "line 59: word")
                assert t.scroll_y == t.max_scroll_y, size
            t.focus()
            await pilot.press("pageup", "pageup", "pageup")  # the user scrolls up
            await until(pilot, lambda: 0 < t.scroll_y < t.max_scroll_y - t.size.height, "the scroll")

            def first_shown() -> int:
                return next(i for i in range(60) if f"line {i}:" in screen_text(app))

            top = first_shown()
            for size in ((100, 30), (70, 20)):
                await pilot.resize_terminal(*size)
                await until(pilot, lambda s=size: t.region.width == s[0] and first_shown() == top,
                            f"line {top} at the top again")
            assert t.scroll_y < t.max_scroll_y - t.size.height  # still scrolled up, not following

    asyncio.run(main())


def test_esc_on_a_command_that_runs_on_says_so_and_stop_ends_it(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20: Esc showed `✗ interrupted` while the command ran on. Now the block says it still runs, a line
    counts the background terminals, /ps lists them and /stop ends them."""
    cmd = "sleep 30 && echo done > late-tui.txt"
    model.script("bgt-run", [shell(cmd), message("never reached")])
    opts = session_options(model, tmp_path)
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "bgt-run please")
        await until_shown(pilot, "… running")
        await until(pilot, lambda: bool(processes_running(cmd)), "the command to start")
        await pilot.press("escape")
        text = await until_shown(pilot, "still running in the background",
                                 "1 background terminal running · /ps to view · /stop to close")
        assert "✗ interrupted" not in text.split("still running in the background")[0].split(cmd)[-1], text
        await until(pilot, lambda: not app.busy, "the turn to end")
        # a rewind's plan says the command runs on: what it writes afterwards is not undone
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, RewindPicker), "the picker")
        picker = app.screen
        assert isinstance(picker, RewindPicker)
        await until(pilot, lambda: picker.preview is not None, "the plan")
        assert picker.preview is not None and picker.preview.notes == (
            f"! 1 command the agent started still running in the background ({cmd}): what it writes after this is "
            "not undone (/stop ends it first)",), picker.preview
        await until_shown(pilot, "! 1 command the agent started still running in the", "(/stop ends it")
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the picker closed")
        await type_and_send(pilot, "/ps")
        await until_shown(pilot, "1 background terminal:")
        await type_and_send(pilot, "/stop")
        await until_shown(pilot, "stopped 1 background terminal")
        await until(pilot, lambda: not processes_running(cmd), "the command to end")

    drive(app, scenario)
    wait_gone(cmd)
    assert not (opts.cwd / "late-tui.txt").exists()


def test_ctrl_u_deletes_to_the_start_of_the_line_however_it_wraps() -> None:
    """Issue 36: Ctrl+U was the TextArea's own, which stops at the start of the row on screen: a prompt that wraps
    (a long one a rewind put back) was never cleared. Now it deletes to the start of the line, as readline and the
    official Codex TUI do, and at a line's start the newline before it; /help lists it (one registry)."""
    from app.tui.actions import BY_ID
    from app.tui.help_screen import help_rows

    app = ComposerHost()
    long = "a long prompt put back by a rewind, " * 4  # wraps over three rows at 60 columns

    async def main() -> None:
        async with app.run_test(size=(60, 14)) as pilot:
            composer = app.query_one(Composer)
            composer.set_text(long.strip())
            await pilot.pause()
            assert composer.area.wrapped_document.height > 1  # it does wrap
            await pilot.press("ctrl+u")
            await until(pilot, lambda: composer.text == "", "Ctrl+U to clear the wrapped line")
            composer.set_text("first line\nsecond line")
            await pilot.press("left", "left", "left", "left", "ctrl+u")  # the cursor before "line"
            await until(pilot, lambda: composer.text == "first line\nline", "the line's start to go")
            await pilot.press("ctrl+u")  # at the line's start: the newline before it
            await until(pilot, lambda: composer.text == "first lineline", "the newline to go")
            await pilot.press("end", "ctrl+u")
            await until(pilot, lambda: composer.text == "", "the rest to go")

    asyncio.run(main())
    assert BY_ID["delete_to_line_start"].key == "ctrl+u"
    assert any(key == "ctrl+u" for _title, rows in help_rows({}) for key, *_ in rows)


def test_a_prompt_put_back_by_a_rewind_is_replaced_by_typing_and_kept_by_an_arrow_key() -> None:
    """Issue 36: the put-back prompt is selected, as a pre-filled field is: typed keys replace it (a `/redo` runs),
    End (or an arrow key) keeps it to edit, Enter alone sends it as it is."""
    app = ComposerHost()

    async def main() -> None:
        async with app.run_test(size=(80, 12)) as pilot:
            composer = app.query_one(Composer)
            composer.put_back("fix the tests")
            await pilot.press("/", "r", "e", "d", "o", "enter")
            await until(pilot, lambda: app.sent == ["/redo"], "/redo to be sent alone")
            composer.put_back("fix the tests")
            await pilot.press("end", "!", "enter")
            await until(pilot, lambda: app.sent[1:] == ["fix the tests!"], "the edited prompt")
            composer.put_back("fix the tests")
            await pilot.press("enter")
            await until(pilot, lambda: app.sent[2:] == ["fix the tests"], "the prompt as it was")

    asyncio.run(main())
