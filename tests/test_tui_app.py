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
from textual.pilot import Pilot

from app.scripted_model import ScriptedModel, add_file, message, pause, reasoning, shell
from app.tui.app import CodexrApp
from app.tui.approval_review import ApprovalReview
from app.tui.blocks import AgentBlock, CommandBlock, FileChangeBlock, PromptBlock, TurnBlock
from app.tui.start_failed import StartFailedScreen

SIZE = (110, 40)
WAIT_S = 45.0


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
    await pilot.pause(0.05)  # let the screen repaint what the condition saw


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
        await until(pilot, lambda: "queued (1): tui-queued second" in screen_text(app), "the queued line")
        assert "● working · 1 queued" in screen_text(app)
        await until(pilot, lambda: turns_done(app) == 2, "both turns")
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "queued (" not in text and "○ idle" in text
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
        await pilot.pause(0.2)
        text = screen_text(app)
        assert "turn interrupted" in text and "queued (" not in text
        await type_and_send(pilot, "tui-after it")
        await until(pilot, lambda: turns_done(app) == 2, "the next turn")
        await pilot.pause(0.2)
        assert "after the interrupt" in screen_text(app)
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
        shown = screen_text(app)
        assert not app.composer.display  # the request replaces the composer
        await pilot.press(key)
        await until(pilot, lambda: turns_done(app) == n, "the turn to end")
        await pilot.pause(0.2)
        assert app.composer.display and not app.query_one("#approval").display
        return shown

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        shown = await ask(pilot, "tui-acc go", "y", 1)
        assert "Codex asks to run a command" in shown and "echo acc > acc.txt" in shown
        assert "in ./ (the workspace)" in shown and "[y] accept" in shown and "declines by itself in" in shown
        assert "✓ approved: echo acc > acc.txt" in screen_text(app)
        await ask(pilot, "tui-dec go", "n", 2)
        assert "✗ declined: echo dec > dec.txt" in screen_text(app)
        assert "went on without it" in screen_text(app)
        await ask(pilot, "tui-can go", "c", 3)
        text = screen_text(app)
        assert "✗ cancelled (turn stopped): echo can > can.txt" in text
        assert "should not be said" not in text

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
        text = screen_text(app)
        assert "Codex asks to change 1 file(s)" in text and "A new.txt +1 -0" in text and "+fresh line" in text
        assert not (opts.cwd / "new.txt").exists()
        await pilot.press("y")
        await until(pilot, lambda: turns_done(app) == 1, "the turn")
        assert "✓ approved: new.txt" in screen_text(app) and len(app.screen_stack) == 1  # workspace-relative

    drive(app, scenario)
    assert (opts.cwd / "new.txt").read_text() == "fresh line\n"


def test_slash_completion_help_and_remapped_keys(model: ScriptedModel, tmp_path: Path) -> None:
    opts = session_options(model, tmp_path, {"src/main.py": "x\n", "src/mod.py": "y\n"},
                           config_extra='[tui]\nkeys = { help = "f5", rewind = "f2" }')
    assert opts.settings.tui.keys == {"help": "f5", "rewind": "f2"}
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await pilot.press("/", "r", "e")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "/rewind  Rewind the conversation and the files to an earlier prompt" in text
        assert "/redo  Undo the last rewind" in text and "/resume" in text and "/status" not in text
        await pilot.press("down", "down", "tab")  # /resume highlighted, Tab puts it in the composer
        assert app.composer.text == "/resume"
        app.composer.set_text("look at @src/m")
        await pilot.pause(0.1)
        assert "@src/main.py" in screen_text(app) and "@src/mod.py" in screen_text(app)
        await pilot.press("tab")
        assert app.composer.text == "look at @src/main.py "
        app.composer.set_text("")
        await pilot.press("f1")  # remapped away: nothing opens
        assert len(app.screen_stack) == 1
        await pilot.press("f5")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "keys and slash commands" in text
        assert "f5" in text and "f2" in text and "/rewind" in text and "interrupt_or_quit" in text
        await pilot.press("escape")
        assert len(app.screen_stack) == 1
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
        await until(pilot, lambda: "restarted it and resumed the thread" in screen_text(app), "the restart line")
        await until(pilot, lambda: turns_done(app) == 2, "the turn after the restart")
        await pilot.pause(0.2)
        assert "second answer" in screen_text(app)
        assert driver.thread_id == thread
        assert [r.text for r in driver.prompt_rows()] == ["tui-alive one", "tui-again two"]

    drive(app, scenario)
    assert (opts.cwd / "two.txt").read_text() == "2\n"


def test_codex_that_cannot_start_gets_a_screen_saying_how_to_log_in(model: ScriptedModel, tmp_path: Path) -> None:
    opts = replace(session_options(model, tmp_path), codex_bin=str(tmp_path / "no-such-codex"))
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: isinstance(app.screen, StartFailedScreen), "the start-failed screen")
        await pilot.pause(0.1)
        text = screen_text(app)
        assert "✗ Codex could not start" in text and "no-such-codex" in text
        assert "codexr login" in text and "Traceback" not in text
        await pilot.press("q")

    drive(app, scenario)
    assert app.return_code == 0


def test_snapshot_main_screen_after_a_turn(model: ScriptedModel, tmp_path: Path, snap_compare: Any) -> None:
    model.script("tui-snap", [reasoning("Plan: add a greeting module"), add_file("hello.py", "print('hello')\n"),
                              shell("echo checked"), message("Added `hello.py`.\n\n**Next:** run it.")])
    app = CodexrApp(session_options(model, tmp_path, {"README.md": "demo\n"}), stable_status=True)

    async def run_before(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        app.composer.area.cursor_blink = False
        await type_and_send(pilot, "tui-snap add a greeting")
        await until(pilot, lambda: turns_done(app) == 1, "the turn")
        await until(pilot, lambda: not app.busy, "the session to be idle")
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


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
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
