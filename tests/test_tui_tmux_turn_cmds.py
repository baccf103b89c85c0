"""Issue 20 §3 in a real terminal (tmux): `codexr -i FILE PROMPT`, a pasted image path, /compact and /review."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from test_tui_tmux import REPO, Tmux, composer_text, framed, tmux  # noqa: F401  (tmux: the fixture)
from test_turn_cmds import png

from app.codex.scripted_model import ScriptedModel, message, review, write_codex_home


def test_images_compact_and_review_in_a_real_terminal(tmux: Tmux, tmp_path: Path) -> None:  # noqa: F811
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    (ws / "shot.png").write_bytes(png())
    (tmp_path / "drag me.png").write_bytes(png())
    with ScriptedModel() as model:
        model.script("tt-img", [message("A grey square, twice.")])
        model.script("Review the current code changes", [review("Nothing to flag in a real terminal.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color"}
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        codexr = (f"env -u COLUMNS -u LINES {assign} {shlex.quote(sys.executable)} -m app.cli "
                  f"-C {shlex.quote(str(ws))} -i {shlex.quote(str(ws / 'shot.png'))} 'tt-img what is this'")
        tmux.start(f"cd {shlex.quote(str(REPO))} && {codexr}; sleep 60")
        shown = tmux.wait(lambda s: "A grey square, twice." in s and "○ idle" in s, "the first prompt's answer")
        assert "tt-img what is this" in shown and "[image: shot.png]" in shown

        # a terminal pastes a dragged file as its (shell-quoted) path, in bracketed paste
        tmux.tmux("set-buffer", shlex.quote(str(tmp_path / "drag me.png")))
        tmux.tmux("paste-buffer", "-p", "-t", "codexr")
        tmux.wait(lambda s: framed(s) and composer_text(s).startswith("[image: drag me.png]"),
                  "the pasted image's label")
        tmux.type("tt-img again")
        tmux.keys("Enter")
        tmux.wait(lambda s: s.count("A grey square, twice.") == 2 and "○ idle" in s, "the second answer")
        last_user = [i for i in model.model_requests[-1]["input"] if isinstance(i, dict) and i.get("role") == "user"]
        assert [c.get("type") for c in last_user[-1]["content"]].count("input_image") == 1

        tmux.type("/compact")
        tmux.keys("Enter")
        tmux.wait(lambda s: "context compacted" in s and "○ idle" in s, "the compaction")
        tmux.type("/review")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "<< Code review finished >>" in s and "○ idle" in s, "the review")
        assert ">> Code review started: current changes <<" in shown
        assert "Nothing to flag in a real terminal." in shown and '"findings"' not in shown
