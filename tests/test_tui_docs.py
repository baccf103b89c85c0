"""Presentation rules: README keys come from the registry, the theme follows the terminal, labels stay distinct."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from app.tui.actions import ACTIONS
from app.tui.app import CodexrApp
from app.tui.theme import terminal_theme

README = Path(__file__).parents[1] / "README.md"


def _app_section() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"^## The app\n(.*?)^## ", text, re.S | re.M)
    assert match is not None, "README.md lacks its '## The app' section"
    return match.group(1)


def test_readme_lists_every_slash_command_and_app_key() -> None:
    section = _app_section()
    lowered = section.lower().replace("esc ", "escape ").replace("esc\n", "escape\n")
    for action in ACTIONS:
        if action.slash:
            assert f"`{action.slash}" in section, f"README does not document {action.slash}"
        if action.scope == "app" and action.key:
            first = action.key.split(",")[0].replace("escape", "esc")
            assert first in lowered.replace("escape", "esc"), f"README does not document the key {first} ({action.id})"


@pytest.mark.parametrize(("colorfgbg", "textual_theme", "want"), [
    ("0;15", "", "textual-light"),      # black on white
    ("15;default;7", "", "textual-light"),
    ("15;0", "", None),                  # white on black: Textual's default (dark)
    ("15;8", "", None),
    ("", "", None),                      # not reported
    ("garbage", "", None),
    ("0;15", "nord", None),              # the user's TEXTUAL_THEME always wins
])
def test_theme_follows_the_terminal_background(colorfgbg: str, textual_theme: str, want: str | None) -> None:
    assert terminal_theme({"COLORFGBG": colorfgbg, "TEXTUAL_THEME": textual_theme}) == want


def test_the_app_starts_light_on_a_light_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLORFGBG", "0;15")
    monkeypatch.delenv("TEXTUAL_THEME", raising=False)

    def no_codex() -> object:
        raise RuntimeError("no Codex in this test")

    app = CodexrApp(no_codex)  # type: ignore[arg-type]

    async def scenario() -> str:
        async with app.run_test() as pilot:
            await pilot.pause()
            return str(app.theme)

    assert asyncio.run(scenario()) == "textual-light"


def test_a_fork_made_within_a_minute_gets_a_different_short_thread_label() -> None:
    from app.codex.events import short_thread

    original, fork = "019ad0c4-7e21-7a10-9c55-3f0e2d1b8a41", "019ad0c4-9b02-7c3e-8f11-a2d4c6e8f0b3"  # UUIDv7, 8 s apart
    assert original[:8] == fork[:8]
    assert short_thread(original) != short_thread(fork)
    assert short_thread(original) == "…2d1b8a41" and short_thread("") == ""


def test_the_plan_counts_deletions_as_the_result_will() -> None:
    """The picker said "2 deleted" for one file and the directory it emptied; the result then said "1 deleted"."""
    from app.services.driver import Preview
    from app.shared.lines import files_restored
    from app.tui.plan_view import plan_summary
    from snapshot_store.restore import Action, RestorePlan, RestoreResult

    plan = RestorePlan("/ws", "t" * 64, [Action("delete", "gen/out.txt", "absent in the snapshot"),
                                         Action("rmdir", "gen", "empty after the rewind")])
    dry = RestoreResult(plan, None, dry_run=True)
    summary = plan_summary(Preview("rewind", dry, dry, {}))
    assert summary == "files: 0 files to write, 1 to delete, 0 to leave alone, 1 empty directory to remove"
    done = RestoreResult(plan, "s" * 64, written=[], deleted=["gen/out.txt"])
    assert files_restored(done) == "0 files written, 1 deleted"


def test_one_command_registry_drives_the_app_and_line_mode() -> None:
    """Line mode kept its own command table beside the app's: now both read app/shared/commands.py, and each front end
    runs every command there (the app through its action, line mode through its handler)."""
    from app.shared.commands import COMMANDS
    from app.shared.plain import COMMANDS as LINE
    from app.shared.plain import LineMode
    from app.tui.actions import SLASH

    names = {c.name for c in COMMANDS}
    assert set(SLASH) == names and set(LINE) == names
    assert set(LineMode.HANDLERS) == names - {"/quit"}
    assert all(callable(getattr(LineMode, m, None)) for m in LineMode.HANDLERS.values())
    for c in COMMANDS:
        assert (SLASH[c.name].description, SLASH[c.name].args) == (c.description, c.args)
        assert LINE[c.name] == c.line
