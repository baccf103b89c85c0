"""/mention, a pasted image, /compact, /review and /init in the Textual app, one real Codex session for all."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from e2e_helpers import session_options
from test_tui_app import drive, ready, type_and_send
from test_turn_cmds import png
from textual import events
from textual.pilot import Pilot
from textual.widgets import OptionList
from tui_helpers import until, until_shown

from app.codex.scripted_model import ScriptedModel, add_file, message, review
from app.tui.app import CodexrApp
from app.tui.blocks import PromptBlock


def test_mention_image_compact_review_and_init_in_the_app(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("app-img", [message("a grey square")])
    model.script("Generate a file named AGENTS.md", [add_file("AGENTS.md", "# Repository Guidelines\n"),
                                                     message("wrote the guide")])
    model.script("Review the current code changes", [review("Looks fine to the app's reviewer.")])
    opts = session_options(model, tmp_path, {"src/hello_world.py": "print('hi')\n"})
    subprocess.run(["git", "init", "-q"], cwd=opts.cwd, check=True)
    shot = opts.cwd / "shot.png"
    shot.write_bytes(png())
    app = CodexrApp(opts)

    async def idle(pilot: Pilot[Any]) -> None:
        await until(pilot, lambda: not app.busy and app.last_status is not None and not app.last_status.busy,
                    "the session to be idle")

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "/mention hewo")  # as the official TUI: @ and a fuzzy file search
        await until(pilot, lambda: app.composer.text == "@hewo", "@ and the query in the composer")
        options = app.composer.query_one("#completions", OptionList)
        await until(pilot, lambda: options.display and options.option_count > 0
                    and str(options.get_option_at_index(0).id) == "src/hello_world.py", "the fuzzy match")
        await pilot.press("tab")
        assert app.composer.text == "@src/hello_world.py "

        app.composer.set_text("")
        app.composer.area.post_message(events.Paste(str(shot)))  # a terminal pastes a dragged file as its path
        await until(pilot, lambda: app.composer.text == "[image: shot.png] ", "the image's label")
        app.composer.area.insert("app-img what is it")
        await pilot.press("enter")
        await until_shown(pilot, "a grey square")
        assert app.query(PromptBlock).last().event.text == "[image: shot.png] app-img what is it"
        sent = [i for i in model.model_requests[-1]["input"] if isinstance(i, dict) and i.get("role") == "user"][-1]
        assert [c.get("type") for c in sent["content"]].count("input_image") == 1
        await idle(pilot)

        await type_and_send(pilot, "/compact")
        await until_shown(pilot, "context compacted")
        await idle(pilot)
        await type_and_send(pilot, "/review")
        text = await until_shown(pilot, ">> Code review started: current changes <<",
                                 "Looks fine to the app's reviewer.", "<< Code review finished >>")
        assert '"findings"' not in text  # the reviewer's raw JSON is not shown
        await idle(pilot)

        await type_and_send(pilot, "/init")
        await until_shown(pilot, "wrote the guide")
        assert app.query(PromptBlock).last().event.text.startswith("Generate a file named AGENTS.md")
        await idle(pilot)
        await type_and_send(pilot, "/init")
        await until_shown(pilot, "AGENTS.md already exists here. Skipping /init to avoid overwriting it.")
        assert app.driver is not None
        assert [r.text.split("\n")[0][:32] for r in app.driver.prompt_rows()] == [
            "[image: shot.png] app-img what i", "Generate a file named AGENTS.md "]

    drive(app, scenario)
    assert (opts.cwd / "AGENTS.md").read_text() == "# Repository Guidelines\n"
