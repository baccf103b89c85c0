"""The Textual app end to end: real Codex, scripted model, Pilot keys; assert the screen, files and threads."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import session_options
from textual.app import App
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import OptionList, Static
from tui_helpers import WAIT_S, ready, screen_text, type_and_send, until, until_shown, words

from app.codex.events import Status
from app.codex.scripted_model import ScriptedModel, add_file, message, pause, reasoning, shell
from app.tui.actions import ACTIONS
from app.tui.app import CodexrApp
from app.tui.approval_review import ApprovalReview
from app.tui.blocks import AgentBlock, CommandBlock, FileChangeBlock, PromptBlock, TurnBlock
from app.tui.help_screen import HelpScreen
from app.tui.start_failed import StartFailedScreen
from app.tui.status import StatusBar

SIZE = (110, 40)


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
        agent = app.query(AgentBlock).last()
        assert agent.text.startswith("Made **notes.md**")
        await until_shown(pilot, "▶ prompt 1", "tui-one please",
                          "Made notes.md and out.txt",  # Markdown rendered, not raw asterisks
                          "• alpha", "$ echo hi-from-shell > out.txt", "✓ exit 0",
                          "A notes.md +2 -0",  # the edit block and the turn's files
                          "A out.txt +1 -0",  # shell-made change counted from the snapshots
                          "turn completed")
        assert len(app.query(FileChangeBlock)) == 1 and len(app.query(CommandBlock)) == 1
        assert len(app.query(PromptBlock)) == 1

    drive(app, scenario)
    assert (opts.cwd / "notes.md").read_text() == "alpha\nbeta\n"
    assert (opts.cwd / "out.txt").read_text() == "hi-from-shell\n"


def test_prompt_sent_while_a_turn_runs_is_queued_then_runs(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("tui-slow", [pause(2.5), message("slow one done")])
    model.script("tui-queued", [add_file("q.txt", "queued ran\n"), message("queued one done")])
    opts = session_options(model, tmp_path)
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-slow first")
        await until(pilot, lambda: app._in_turn, "the first turn to start")
        await type_and_send(pilot, "tui-queued second")
        await until_shown(pilot, "queued (1): tui-queued second", "● working · 1 queued")
        await until(pilot, lambda: turns_done(app) == 2, "both turns")
        text = await until_shown(pilot, "○ idle", "queued one done")  # the status after the queue ran dry
        assert "queued (" not in text
        assert [b.event.text for b in app.query(PromptBlock)] == ["tui-slow first", "tui-queued second"]
        assert app.driver is not None
        assert [r.text for r in app.driver.prompt_rows()] == ["tui-slow first", "tui-queued second"]

    drive(app, scenario)
    assert (opts.cwd / "q.txt").read_text() == "queued ran\n"


def test_esc_interrupts_the_running_turn_and_drops_the_queue(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("tui-long", [pause(20), add_file("never.txt", "x\n"), message("never")])
    model.script("tui-dropped", [add_file("dropped.txt", "x\n"), message("dropped")])
    model.script("tui-after", [add_file("after.txt", "after\n"), message("after the interrupt")])
    opts = session_options(model, tmp_path)
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-long work")
        await until(pilot, lambda: app._in_turn, "the turn to start")
        await type_and_send(pilot, "tui-dropped never runs")
        await until(pilot, lambda: "queued (1)" in screen_text(app), "the queued line")
        await until(pilot, lambda: app.driver is not None and app.driver._running is not None, "Codex's turn id")
        await pilot.press("escape")
        await until(pilot, lambda: turns_done(app) == 1, "the interrupted turn to end")
        text = await until_shown(pilot, "turn interrupted", "○ idle")  # idle: the queue line is redrawn too
        assert "queued (" not in text
        await type_and_send(pilot, "tui-after it")
        await until(pilot, lambda: turns_done(app) == 2, "the next turn")
        await until_shown(pilot, "after the interrupt")
        assert app.driver is not None
        assert [r.text for r in app.driver.prompt_rows()] == ["tui-long work", "tui-after it"]

    drive(app, scenario)
    assert not (opts.cwd / "never.txt").exists() and not (opts.cwd / "dropped.txt").exists()
    assert (opts.cwd / "after.txt").read_text() == "after\n"


def test_approvals_accept_decline_cancel_from_the_keyboard(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("tui-acc", [shell("echo acc > acc.txt"), message("accepted ran")])
    model.script("tui-dec", [shell("echo dec > dec.txt"), message("went on without it")])
    model.script("tui-can", [shell("echo can > can.txt"), message("should not be said")])
    opts = session_options(model, tmp_path, approval_policy="untrusted", sandbox="workspace-write")
    app = CodexrApp(opts)

    async def ask(pilot: Pilot[Any], prompt: str, key: str, n: int) -> str:
        await type_and_send(pilot, prompt)
        panel = app.query_one("#approval")
        await until(pilot, lambda: panel.display and app.focused is panel, "the approval request")
        shown = await until_shown(pilot, "Codex asks to run a command", "[y] accept")
        assert not app.composer.display  # the request replaces the composer
        await pilot.press(key)
        await until(pilot, lambda: turns_done(app) == n, "the turn to end")
        assert app.composer.display and not app.query_one("#approval").display
        return shown

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        shown = await ask(pilot, "tui-acc go", "y", 1)
        assert "Codex asks to run a command" in shown and "echo acc > acc.txt" in shown
        assert "in ./ (the workspace)" in shown and "[y] accept" in shown and "declines by itself in" in shown
        await until_shown(pilot, "✓ approved: echo acc > acc.txt")
        await ask(pilot, "tui-dec go", "n", 2)
        await until_shown(pilot, "✗ declined: echo dec > dec.txt", "went on without it")
        await ask(pilot, "tui-can go", "c", 3)
        text = await until_shown(pilot, "✗ cancelled (turn stopped): echo can > can.txt", "turn interrupted")
        assert "should not be said" not in text
        assert not [b for b in app.query(AgentBlock) if "should not be said" in b.text]

    drive(app, scenario)
    assert (opts.cwd / "acc.txt").read_text() == "acc\n"
    assert not (opts.cwd / "dec.txt").exists() and not (opts.cwd / "can.txt").exists()


def test_file_change_approval_reviews_the_diff(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("tui-fc", [add_file("new.txt", "fresh line\n"), message("edited")])
    opts = session_options(model, tmp_path, approval_policy="untrusted", sandbox="read-only")
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-fc go")
        await until(pilot, lambda: isinstance(app.screen, ApprovalReview), "the review screen")
        await until_shown(pilot, "Codex asks to change 1 file(s)", "A new.txt +1 -0", "+fresh line")
        assert not (opts.cwd / "new.txt").exists()
        await pilot.press("y")
        await until(pilot, lambda: turns_done(app) == 1, "the turn")
        await until_shown(pilot, "✓ approved: new.txt")  # workspace-relative
        assert len(app.screen_stack) == 1

    drive(app, scenario)
    assert (opts.cwd / "new.txt").read_text() == "fresh line\n"


def test_slash_completion_help_and_remapped_keys(model: ScriptedModel, tmp_path: Path) -> None:
    opts = session_options(model, tmp_path, {"src/main.py": "x\n", "src/mod.py": "y\n"},
                           config_extra='[tui]\nkeys = { help = "f5", rewind = "f2" }')
    assert opts.settings.tui.keys == {"help": "f5", "rewind": "f2"}
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        completions = app.query_one("#completions", OptionList)

        def completing(text: str, n: int) -> Callable[[], bool]:
            """The dropdown is made for `text` (n rows): the keys typed before it have all arrived."""
            return lambda: app.composer.text == text and completions.display and completions.option_count == n

        await pilot.press("/", "r", "e")
        await until(pilot, completing("/re", 4), "the completions of /re")
        text = await until_shown(pilot, "/rewind  Rewind the conversation and the files to an earlier prompt",
                                 "/redo  Undo the last rewind", "/resume", "/review")
        assert "/status" not in text
        await pilot.press("down", "down", "tab")  # /resume highlighted, Tab puts it in the composer
        await until(pilot, lambda: not app.composer.completing, "Tab to take the completion")
        assert app.composer.text == "/resume"
        app.composer.set_text("look at @src/m")
        await until(pilot, completing("look at @src/m", 2), "the completions of @src/m")
        await until_shown(pilot, "@src/main.py", "@src/mod.py")
        await pilot.press("tab")
        await until(pilot, lambda: not app.composer.completing, "Tab to take the completion")
        assert app.composer.text == "look at @src/main.py "
        app.composer.set_text("")
        await pilot.press("f1")  # remapped away: nothing opens
        assert len(app.screen_stack) == 1
        await pilot.press("f5")
        text = await until_shown(pilot, "keys and slash commands", "f5", "f2", "/rewind", "interrupt_or_quit")
        assert len(app.screen_stack) == 2  # the help screen, and nothing that f1 opened late
        await pilot.press("escape")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the help screen to close")
        await until(pilot, lambda: "f5 Help" in screen_text(app).splitlines()[-1], "the main screen's footer")
        assert "f5 Help" in screen_text(app).splitlines()[-1] and "f2 Rewind" in screen_text(app).splitlines()[-1]

    drive(app, scenario)


def test_unknown_action_in_keys_is_a_config_error(tmp_path: Path, model: ScriptedModel) -> None:
    from config import ConfigError

    opts = session_options(model, tmp_path, config_extra='[tui]\nkeys = { rewnd = "f2" }')
    with pytest.raises(ConfigError, match="unknown action 'rewnd'"):
        CodexrApp(opts)


def test_codex_death_is_shown_and_the_prompt_continues_the_thread(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("tui-alive", [add_file("one.txt", "1\n"), message("first answer")])
    model.script("tui-again", [add_file("two.txt", "2\n"), message("second answer")])
    opts = session_options(model, tmp_path)
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-alive one")
        await until(pilot, lambda: turns_done(app) == 1, "the first turn")
        driver = app.driver
        assert driver is not None and driver.session is not None
        thread = driver.thread_id
        driver.session.client._proc.kill()
        await type_and_send(pilot, "tui-again two")  # reaches no Codex: sent again once it is restarted
        # the line quotes Codex's error, which may be long: the phrase can wrap
        await until(pilot, lambda: "restarted it and resumed the thread" in words(screen_text(app)),
                    "the restart line")
        await until(pilot, lambda: turns_done(app) == 2, "the turn after the restart")
        await until_shown(pilot, "second answer")
        assert driver.thread_id == thread
        assert [r.text for r in driver.prompt_rows()] == ["tui-alive one", "tui-again two"]

    drive(app, scenario)
    assert (opts.cwd / "two.txt").read_text() == "2\n"


def test_codex_that_cannot_start_gets_a_screen_saying_how_to_log_in(model: ScriptedModel, tmp_path: Path) -> None:
    opts = replace(session_options(model, tmp_path), codex_bin=str(tmp_path / "no-such-codex"))
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: isinstance(app.screen, StartFailedScreen), "the start-failed screen")
        text = await until_shown(pilot, "✗ Codex could not start", "codexr login", "Press q to quit.")
        # the binary's path, however a long temporary directory wraps it across lines
        assert str(opts.codex_bin) in "".join(line.strip() for line in text.splitlines()), text
        assert "Traceback" not in text
        await pilot.press("q")

    drive(app, scenario)
    assert app.return_code == 0


def greeting_app(model: ScriptedModel, tmp_path: Path, prompt: str) -> CodexrApp:
    """The app over a workspace with a README, whose prompt `prompt` gets the main-screen snapshots' turn: thinking,
    a new file, a command and a Markdown answer."""
    model.script(prompt, [reasoning("Plan: add a greeting module"), add_file("hello.py", "print('hello')\n"),
                          shell("echo checked"), message("Added `hello.py`.\n\n**Next:** run it.")])
    return CodexrApp(session_options(model, tmp_path, {"README.md": "demo\n"}), stable_status=True)


def test_snapshot_main_screen_after_a_turn(model: ScriptedModel, tmp_path: Path, snap_compare: Any) -> None:
    app = greeting_app(model, tmp_path, "tui-snap")

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        app.composer.area.cursor_blink = False
        await type_and_send(pilot, "tui-snap add a greeting")
        await until(pilot, lambda: turns_done(app) == 1, "the turn")
        await until(pilot, lambda: not app.busy, "the session to be idle")
        await until_shown(pilot, "∴ thinking: Plan: add a greeting module", "+print('hello')", "✓ exit 0",
                          "Next: run it.", "turn completed", "○ idle", "◆ tracking 2 files")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (60, 20)], ids=["80x24", "60x20"])
def test_snapshot_main_screen_on_a_small_terminal(model: ScriptedModel, tmp_path: Path, snap_compare: Any,
                                                  size: tuple[int, int]) -> None:
    """Issue 20 §4: the end of the turn in view, the status bar in whole fields, F1 Help still in the footer (at
    60 columns it was cut off, and a key's label was cut mid-word)."""
    app = greeting_app(model, tmp_path, "tui-small")

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        app.composer.area.cursor_blink = False
        await type_and_send(pilot, "tui-small add a greeting")
        await until(pilot, lambda: turns_done(app) == 1 and not app.busy, "the turn")
        text = await until_shown(pilot, "Next: run it.", "turn completed", "A hello.py +1 -0", "○ idle",
                                 "context left")
        assert "f1 Help" in text.splitlines()[-1], text  # the keys that do not fit give way, F1 Help last

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_snapshot_approval_request(model: ScriptedModel, tmp_path: Path, snap_compare: Any) -> None:
    model.script("tui-snap-ask", [shell("touch approved.txt"), message("ok")])
    app = CodexrApp(session_options(model, tmp_path, approval_policy="untrusted", sandbox="read-only"),
                    stable_status=True)

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        app.composer.area.cursor_blink = False
        await type_and_send(pilot, "tui-snap-ask touch it")
        panel = app.query_one("#approval")
        await until(pilot, lambda: panel.display and app.focused is panel, "the approval request")
        await until_shown(pilot, "$ touch approved.txt   … waiting for approval", "(no output)",
                          "⚠ Codex asks to run a command", "[c/Esc] cancel the turn",
                          "◆ tracking 0 files", " y Yes  a Always")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_a_command_waiting_for_approval_is_shown_waiting_not_running(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §5: Codex starts the command's item before it asks; until the answer its block says it waits."""
    model.script("tui-wait", [shell("echo waited > waited.txt"), message("ran after the wait")])
    app = CodexrApp(session_options(model, tmp_path, approval_policy="untrusted", sandbox="workspace-write"))

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-wait go")
        panel = app.query_one("#approval")
        await until(pilot, lambda: panel.display and app.focused is panel, "the approval request")
        await until(pilot, lambda: len(app.query(CommandBlock)) == 1, "the command's block")
        shown = await until_shown(pilot, "$ echo waited > waited.txt   … waiting for approval")
        assert "… running" not in shown
        await pilot.press("y")
        await until(pilot, lambda: turns_done(app) == 1, "the turn to end")
        shown = await until_shown(pilot, "✓ exit 0", "ran after the wait")
        assert "waiting for approval" not in shown

    drive(app, scenario)


def test_accept_for_this_session_on_a_file_change_is_not_asked_again(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §5: `a` on the first edit's review accepts the next edit too (another file): no second review."""
    model.script("tui-afs", [add_file("one.txt", "1\n"), add_file("two.txt", "2\n"), message("both written")])
    opts = session_options(model, tmp_path, approval_policy="untrusted", sandbox="read-only")
    app = CodexrApp(opts)
    reviews: list[str] = []

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-afs go")
        await until(pilot, lambda: isinstance(app.screen, ApprovalReview), "the first review")
        await until_shown(pilot, "A one.txt +1 -0")
        reviews.append("one")
        await pilot.press("a")
        deadline = time.monotonic() + WAIT_S  # a bound on waiting, not a timing assertion
        while turns_done(app) < 1:  # every review that comes is counted (and declined, so the test ends)
            assert time.monotonic() < deadline, screen_text(app)
            if isinstance(app.screen, ApprovalReview) and not reviews[1:]:
                reviews.append(screen_text(app))
                await pilot.press("n")
            await pilot.pause(0.05)
        await until_shown(pilot, "✓ approved for this session: one.txt", "✓ approved for this session: two.txt",
                          "both written")

    drive(app, scenario)
    assert reviews == ["one"], reviews[1:]
    assert (opts.cwd / "one.txt").read_text() == "1\n" and (opts.cwd / "two.txt").read_text() == "2\n"


def test_one_transcript_line_per_restore_and_per_resume(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §5: restoring a snapshot (/snapshots) and resuming a thread (/threads) each write one line."""
    model.script("tui-once", [add_file("once.txt", "1\n"), message("made once.txt")])
    opts = session_options(model, tmp_path)
    app = CodexrApp(opts)

    def lines(word: str) -> list[str]:
        return [ln for ln in screen_text(app).splitlines() if word in ln]

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "tui-once go")
        await until(pilot, lambda: turns_done(app) == 1, "the turn")
        await app.slash("/snapshots")
        await until_shown(pilot, "before: tui-once go")
        await pilot.press("end")  # the oldest: before the prompt ran
        await until_shown(pilot, "D delete: once.txt +0 -1")
        await pilot.press("enter")
        await until(pilot, lambda: not (opts.cwd / "once.txt").exists() and len(app.screen_stack) == 1,
                    "the restore")
        await until_shown(pilot, "restored snapshot")
        await pilot.pause()  # both would-be lines are posted before the dialog closes: let every one be drawn
        await pilot.pause()
        assert len(lines("restored snapshot")) == 1, screen_text(app)
        thread = app.driver.thread_id
        await app.slash("/new")
        await app.slash("/threads")
        await until_shown(pilot, "tui-once go")
        await pilot.press("enter")
        await until(pilot, lambda: app.driver.thread_id == thread and len(app.screen_stack) == 1, "the resume")
        await until_shown(pilot, "resumed")
        await pilot.pause()
        await pilot.pause()
        assert len(lines("resumed")) == 1, screen_text(app)

    drive(app, scenario)


def test_an_unknown_command_names_the_nearest_and_every_command(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §3: an unknown slash command says which exist (and which one was probably meant)."""
    app = CodexrApp(session_options(model, tmp_path, {"a.txt": "a\n"}))

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "/rewnid")
        text = await until_shown(pilot, "unknown command /rewnid")
        assert "did you mean /rewind?" in words(text), text
        assert all(c in words(text).split() for c in ("/redo", "/ps", "/stop", "/help", "/quit")), text

    drive(app, scenario)


def test_help_keeps_what_the_session_began_with(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §5: the demo's words (its banner) scroll away with the first prompt; F1 still shows them."""
    app = CodexrApp(session_options(model, tmp_path, {"a.txt": "a\n"}),
                    banner="**codexr demo**: try `create NAME [TEXT]` or `delete NAME`")

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("f1")
        await until_shown(pilot, "create NAME [TEXT]", "/rewind")

    drive(app, scenario)


def test_help_wraps_every_description_on_a_narrow_terminal() -> None:
    """Issue 20 §4: at 60 columns F1 dropped its description column (the no-wrap columns took the width); now each
    action's description wraps beneath its key, command and id."""

    class HelpHost(App[None]):
        def on_mount(self) -> None:
            self.push_screen(HelpScreen({}))

    app = HelpHost()

    async def main() -> None:
        async with app.run_test(size=(60, 20)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help screen")
            body = app.screen.query_one("#help-body", Static)
            text = words("\n".join(s.text for s in body.render_lines(Region(0, 0, *body.size))))  # all of it
            for action in ACTIONS:
                assert action.id in text and words(action.description) in text, (action.id, text)

    asyncio.run(main())


def test_before_the_first_snapshot_tracking_gives_no_count() -> None:
    """A new thread has no snapshot yet: the bar and /status said "tracking 0 files" in a workspace full of files."""
    from app.shared.lines import status_lines

    status = Status(workspace="/srv/w", tracking=True, tracked_files=None, store_bytes=1 << 10)

    class BarHost(App[None]):
        CSS_PATH = Path(__file__).parents[1] / "app" / "tui" / "app.tcss"

        def compose(self) -> Any:
            yield StatusBar()

        def on_mount(self) -> None:
            self.query_one(StatusBar).show(status, busy=False, queued=0, state="ready")

    app = BarHost()

    async def main() -> None:
        async with app.run_test(size=(160, 1)) as pilot:
            await pilot.pause()
            line = screen_text(app)
            assert "◆ tracking on" in line and "0 files" not in line, line

    asyncio.run(main())
    assert "file tracking: on · no snapshot yet · store 1.0 KiB" in status_lines(status), status_lines(status)
    assert "file tracking: on · 1 file tracked" in "\n".join(status_lines(Status(tracking=True, tracked_files=1)))


def test_the_status_bar_drops_whole_fields_least_important_first() -> None:
    """Issue 20 §4: a narrow terminal cut the status bar mid-field (`◆ tracking`, its count gone) and hid the redo
    depth and the other-session warning first; now whole fields give way, the least important first."""
    status = Status(model="gpt-test-model", workspace="/srv/projects/example", thread_id="0199aaaa-bbbb-7ccc-8ddd-"
                    "eeeeffff0011", tracking=True, tracked_files=12, store_bytes=3 << 20, last_capture_at=1.7e9,
                    last_capture_seconds=0.04, redo_depth=2, others=("pid 7 on host",), context_used=60_000,
                    context_window=200_000)

    class BarHost(App[None]):
        CSS_PATH = Path(__file__).parents[1] / "app" / "tui" / "app.tcss"  # the bar as the app styles it

        def compose(self) -> Any:
            yield StatusBar()

        def on_mount(self) -> None:
            self.query_one(StatusBar).show(status, busy=True, queued=1, state="ready")

    def fields(line: str) -> list[str]:
        return [f.strip() for part in line.split("│") for f in part.split(" · ") if f.strip()]

    app = BarHost()

    async def main() -> None:
        async with app.run_test(size=(240, 1)) as pilot:
            await pilot.pause()
            every = fields(screen_text(app))
            # state, queued, model, context left, workspace, thread, redo, others, tracking, size, last capture
            assert len(every) == 11 and every[3] == "74% context left", every
            important = [every[i] for i in (0, 1, 7, 6, 5, 3, 2, 8, 4, 9, 10)]  # what goes last comes first
            assert important[:4] == ["● working", "1 queued", "⚠ 1 other codexr session here", "↷ redo 2"]
            bar = app.query_one(StatusBar)
            for width in (120, 100, 80, 60, 40, 24):
                await pilot.resize_terminal(width, 1)
                await until(pilot, lambda w=width: bar.content_size.width == w - 2, "the new size")
                shown = fields(screen_text(app))
                kept = [f for f in every if f in shown]
                assert shown == kept, (width, shown)  # whole fields, in their order
                assert set(shown) == set(important[:len(shown)]), (width, shown)  # the most important ones
                assert len(shown) >= {120: 6, 100: 5, 80: 4, 60: 3, 40: 2, 24: 2}[width], (width, shown)  # all that fit

    asyncio.run(main())


def test_the_first_ctrl_r_parses_no_stylesheet_and_finds_its_module_loaded(
        model: ScriptedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20 §2 (Ctrl+R -> the picker's rows <= 0.3 s): the first dialog of a session read dialogs.tcss, parsed
    every stylesheet again and restyled every widget of the app (the first Ctrl+R 0.31 s against ~0.16 s for the
    next ones, quiet). The stylesheet is read with the app's, as the picker's module is imported once Codex is
    ready."""
    import importlib

    asked: list[str] = []
    real_import = importlib.import_module

    def import_module(name: str, package: str | None = None) -> Any:
        asked.append(name)
        return real_import(name, package)

    monkeypatch.setattr(importlib, "import_module", import_module)
    app = CodexrApp(session_options(model, tmp_path, {"keep.txt": "k\n"}))

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await until(pilot, lambda: "app.tui.rewind_picker" in asked, "the picker's module to be imported")
        parsed: list[int] = []
        real_reparse = app.stylesheet.reparse

        def reparse() -> None:
            parsed.append(1)
            real_reparse()

        monkeypatch.setattr(app.stylesheet, "reparse", reparse)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: type(app.screen).__name__ == "RewindPicker" and app.screen.is_mounted,
                    "the picker to open")
        await pilot.pause()
        assert parsed == []

    drive(app, scenario)
