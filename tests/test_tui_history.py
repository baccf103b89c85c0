"""/history in the app against the real Codex: hits from every workspace; here resumes, elsewhere reads only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e_helpers import official_codex_exec, rollout_hashes, session_options
from test_tui_app import drive, ready, turns_done, type_and_send
from textual.pilot import Pilot
from textual.widgets import Input, OptionList, Static
from tui_helpers import screen_text, until, until_shown

from app.codex.events import short_thread
from app.codex.scripted_model import ScriptedModel, add_file, message
from app.tui.app import CodexrApp
from app.tui.blocks import PromptBlock
from app.tui.history_screen import MATCH_STYLE, ConversationView, HistoryScreen


def test_history_lists_every_workspace_resumes_a_hit_here_and_reads_another_only(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.script("hx-far", [message("far away answer")])
    model.script("hx-one", [add_file("one.txt", "1\n"), message("first done")])
    model.script("hx-two", [message("second done")])
    opts = session_options(model, tmp_path, {"keep.txt": "k\n"})
    assert opts.env is not None
    far = tmp_path / "far ws"
    far.mkdir()
    far_id = official_codex_exec(opts.env, far, "hx-far about the Zebra crossing")
    app = CodexrApp(opts)
    ids: dict[str, str] = {}

    async def history_hits(pilot: Pilot[Any]) -> HistoryScreen:
        await type_and_send(pilot, "/history zebra")
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen) and bool(app.screen.hits), "the hits")
        screen = app.screen
        assert isinstance(screen, HistoryScreen)
        return screen

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        assert app.driver is not None
        await type_and_send(pilot, "hx-one the zebra stripes")
        await until(pilot, lambda: turns_done(app) == 1 and not app.busy, "the first turn")
        ids["one"] = str(app.driver.thread_id)
        await type_and_send(pilot, "/new")
        await until(pilot, lambda: app.driver is not None and app.driver.thread_id is None, "a new thread")
        await type_and_send(pilot, "hx-two more ZEBRA facts")
        await until(pilot, lambda: turns_done(app) == 1 and not app.busy and app.driver is not None
                    and app.driver.thread_id not in (None, ids["one"]), "the second turn")
        ids["two"] = str(app.driver.thread_id)

        screen = await history_hits(pilot)
        by_id = {h.session_id: h for h in screen.hits}
        assert set(by_id) == {ids["one"], ids["two"], far_id}, screen.hits
        assert by_id[ids["one"]].here and by_id[ids["two"]].here and not by_id[far_id].here
        assert all(h.prompt == 1 and h.kind == "user" for h in screen.hits)
        rows = screen.query_one("#hits", OptionList).options
        far_row = rows[screen.hits.index(by_id[far_id])].prompt
        assert str(far_row).startswith(f"other  {short_thread(far_id)}  #1  ") and str(far) in str(far_row)
        # the match is marked by style (bold underline reverse), not by colour alone
        marked = [str(far_row)[s.start:s.end] for s in far_row.spans if s.style == MATCH_STYLE]  # type: ignore[union-attr]
        assert marked == ["Zebra"], marked
        assert "3 hits in 3 of 3 sessions" in str(screen.query_one("#message", Static).content)

        # this workspace's older thread: Enter resumes it
        await pilot.press(*["down"] * screen.hits.index(by_id[ids["one"]]), "enter")
        await until(pilot, lambda: not isinstance(app.screen, HistoryScreen), "the screen to close")
        await until(pilot, lambda: app.driver is not None and app.driver.thread_id == ids["one"]
                    and [b.event.text for b in app.query(PromptBlock)] == ["hx-one the zebra stripes"],
                    "the thread to load")
        await until(pilot, lambda: short_thread(ids["one"]) in screen_text(app), "the status bar's thread id")
        await until_shown(pilot, "resumed from history: the hit is in prompt 1")

        # another workspace's thread: read-only, nothing changes
        before = rollout_hashes(opts.codex_home)
        screen = await history_hits(pilot)
        await pilot.press(*["down"] * [h.session_id for h in screen.hits].index(far_id), "enter")
        await until(pilot, lambda: isinstance(app.screen, ConversationView), "the read-only view")
        view = app.screen
        assert isinstance(view, ConversationView)
        note = str(view.query_one("#readonly", Static).content)
        assert f"codexr -C '{far}' resume {far_id}" in note and "another workspace" in note, note
        assert "> hx-far about the Zebra crossing" in view.shown.text and "far away answer" in view.shown.text
        await until_shown(pilot, "hx-far about the Zebra crossing")  # rendered on screen
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, HistoryScreen), "back to the hits")
        # a search that finds nothing says where it looked
        query = app.screen.query_one("#query", Input)
        query.value = "no-such-words-anywhere"
        query.focus()
        await pilot.press("enter")
        msg = app.screen.query_one("#message", Static)
        await until(pilot, lambda: "no match" in str(msg.content), "the empty result")
        assert (f"no match for 'no-such-words-anywhere' in 3 sessions (searched {opts.codex_home / 'sessions'}; "
                "user and agent messages)") == str(msg.content)
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, HistoryScreen), "the screen to close")
        assert app.driver.thread_id == ids["one"]
        assert [b.event.text for b in app.query(PromptBlock)] == ["hx-one the zebra stripes"]
        assert rollout_hashes(opts.codex_home) == before

    drive(app, scenario)
    assert not (far / "one.txt").exists() and (opts.cwd / "one.txt").read_text() == "1\n"
