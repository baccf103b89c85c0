"""Issue 20 §3 in the app: context left, /permissions, /model with its effort, Ctrl+T's whole transcript.

Real Codex, scripted model, Pilot keys. What a choice changes is asserted on what Codex did: the files a command
could write, the sandbox's words in the command output the model got, the effort in the model requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import session_options
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import TextArea
from tui_helpers import ready, screen_text, type_and_send, until, until_shown, words

from app.codex.context_window import percent_left
from app.codex.scripted_model import ScriptedModel, last_user_text, message, shell, tool_outputs, usage
from app.tui.app import CodexrApp
from app.tui.blocks import TurnBlock
from app.tui.full_transcript import TranscriptScreen
from app.tui.help_screen import help_table
from app.tui.transcript import Transcript

SIZE = (110, 40)


async def until_said(pilot: Pilot[Any], *phrases: str) -> str:
    """Until the screen holds every phrase, however the transcript wrapped it."""
    await until(pilot, lambda: all(p in words(screen_text(pilot.app)) for p in phrases), f"{phrases} on screen")
    return words(screen_text(pilot.app))


def turns_done(app: CodexrApp) -> int:
    return len(app.query(TurnBlock))


def requests_of(model: ScriptedModel, trigger: str) -> list[dict[str, Any]]:
    """The model requests of the turn whose prompt holds `trigger` (each request carries the whole thread)."""
    return [r for r in model.model_requests if trigger in last_user_text(r)]


def test_context_left_follows_the_official_reckoning() -> None:
    """A fresh thread shows 100% (Codex's own instructions are not the user's), a full window 0%."""
    assert percent_left(8_000, 258_400) == 100
    assert percent_left(130_001, 258_400) == 52
    assert percent_left(258_400, 258_400) == 0 and percent_left(999_999, 258_400) == 0


def test_permissions_and_effort_chosen_in_the_app_reach_codex_from_the_next_prompt(model: ScriptedModel,
                                                                                  tmp_path: Path) -> None:
    model.script("set-one", [shell("touch first.txt"), message("first done")])
    model.script("set-two", [shell("touch second.txt"), usage(130_000), message("second done")])
    opts = session_options(model, tmp_path, {"a.txt": "a\n"})
    app = CodexrApp(opts)

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "/status")  # before any prompt: Codex's config, and no usage to reckon with
        said = await until_said(pilot, "context window: unknown")
        assert "approval: never (config.toml)" in said and "sandbox: danger-full-access (config.toml)" in said
        assert "model: gpt-5.5, reasoning medium (the model's default)" in said
        assert "context left" not in app.status_bar.line().plain  # the bar says nothing rather than guess

        await type_and_send(pilot, "set-one go")  # Full Access: the command writes
        await until(pilot, lambda: turns_done(app) == 1, "the first turn")
        assert "100% context left" in app.status_bar.line().plain

        await type_and_send(pilot, "/permissions")
        await until_shown(pilot, "Update Model Permissions", "Full Access (current)", "Read Only", "Default")
        await pilot.press("home", "enter")  # Read Only
        await until_said(pilot, "Permissions updated to Read Only (approval on-request, sandbox read-only)")

        await type_and_send(pilot, "/permissions full-access")  # asks first, as the official TUI; n keeps Read Only
        await until_shown(pilot, "Enable Full Access? [y/N]", "Codex will run without sandboxing")
        await pilot.press("n")
        await until(pilot, lambda: len(app.screen_stack) == 1, "the question to close")

        await type_and_send(pilot, "/model")  # two steps, as the official TUI: the model, then its effort
        await until_shown(pilot, "Select Model and Effort", "gpt-5.5 (current)")
        await pilot.press("enter")
        await until_shown(pilot, "Select Reasoning Level for gpt-5.5", "Medium (default) (current)", "Extra high")
        await pilot.press("down", "enter")  # High
        await until_said(pilot, "model: gpt-5.5, reasoning high from the next prompt on")

        await type_and_send(pilot, "set-two go")
        await until(pilot, lambda: turns_done(app) == 2, "the second turn")
        await until(pilot, lambda: "52% context left" in app.status_bar.line().plain, "the bar's context left")
        assert "gpt-5.5 high" in app.status_bar.line().plain
        await type_and_send(pilot, "/status")
        said = await until_said(pilot, "context window: 52% left (130K used / 258K)")
        assert "approval: on-request" in said and "sandbox: read-only (/permissions: Read Only)" in said
        assert "model: gpt-5.5, reasoning high" in said

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await scenario(pilot)

    asyncio.run(main())
    assert (opts.cwd / "first.txt").exists()
    assert not (opts.cwd / "second.txt").exists()  # Codex ran it in the read-only sandbox
    out = "".join(str(o.get("output")) for r in requests_of(model, "set-two") for o in tool_outputs(r))
    assert "Read-only file system" in out
    assert {r["reasoning"]["effort"] for r in requests_of(model, "set-one")} == {"medium"}
    assert {r["reasoning"]["effort"] for r in requests_of(model, "set-two")} == {"high"}


def test_ctrl_t_shows_the_whole_thread_folded_blocks_and_full_output_included(
        model: ScriptedModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Transcript, "MAX_MOUNTED", 4)  # a long thread, in two turns: the first one folds away
    monkeypatch.setattr(Transcript, "SHOW_MORE", 4)
    model.script("pager-one", [shell("seq 1 450"), message("counted to 450")])
    model.script("pager-two", [message("second answer")])
    app = CodexrApp(session_options(model, tmp_path, {"a.txt": "a\n"}))

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "pager-one count")
        await until(pilot, lambda: turns_done(app) == 1, "the first turn")
        await type_and_send(pilot, "pager-two again")
        await until_shown(pilot, "second answer", "earlier blocks folded away")
        await pilot.press("ctrl+t")
        await until(pilot, lambda: isinstance(app.screen, TranscriptScreen), "the transcript pager")
        text = app.screen.query_one(TextArea).text
        assert text.startswith("▶ prompt 1\npager-one count")  # folded on the main screen, here in full
        assert "$ seq 1 450   ✓ exit 0" in text and "\n1\n2\n3\n" in text and "\n450\n" in text  # not a tail
        assert "● codex\ncounted to 450" in text
        assert "▶ prompt 2\npager-two again" in text
        await pilot.press("slash", *"COUNTED", "enter")  # case-insensitive, from the cursor (the end) round
        area = app.screen.query_one(TextArea)
        assert area.selected_text == "counted"
        await pilot.press("q")
        await until(pilot, lambda: not isinstance(app.screen, TranscriptScreen), "the pager to close")

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await scenario(pilot)

    asyncio.run(main())
    console = Console(width=200, record=True)  # F1 lists it (and the palette: both come from the registry)
    console.print(help_table({}))
    row = next(ln for ln in console.export_text().splitlines() if "ctrl+t" in ln)
    assert "The whole thread's transcript in a pager" in row
