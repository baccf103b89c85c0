"""`codexr --plain -i FILE PROMPT`, /mention, a pasted image, /compact, /review and /init in line mode (pexpect)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_plain import Term, _env
from test_turn_cmds import png

from app.codex.scripted_model import ScriptedModel, add_file, message, review, user_texts


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        yield m


def images_in_last_request(model: ScriptedModel) -> int:
    last_user = [i for i in model.model_requests[-1]["input"] if isinstance(i, dict) and i.get("role") == "user"][-1]
    return [c.get("type") for c in last_user["content"]].count("input_image")


def test_line_mode_images_mention_compact_review_and_init(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("plain-img", [message("a grey square")])
    model.script("plain-ment", [message("mentioned")])
    model.script("Generate a file named AGENTS.md", [add_file("AGENTS.md", "# Repository Guidelines\n"),
                                                     message("wrote the guide")])
    model.script("Review the current code changes", [review("Looks fine to the line's reviewer.")])
    shot = tmp_path / "shot.png"
    shot.write_bytes(png())
    env = _env(model, tmp_path / "home-bad")
    for argv in (["--plain", "-i", "gone.png", "plain-img hi"], ["exec", "-i", "gone.png", "plain-img hi"]):
        bad = subprocess.run([sys.executable, "-m", "app.cli", *argv], cwd=tmp_path, env=env, capture_output=True,
                             text=True, stdin=subprocess.DEVNULL, timeout=60)
        assert (bad.returncode, bad.stderr) == (2, "codexr: error: cannot attach image gone.png: no such file\n")
    assert not model.requests  # nothing was sent

    t = Term(model, tmp_path, "--plain", "-i", str(shot), "plain-img what is it",
             files={"hello_world.py": "print('hi')\n"})
    out = t.until(r"-- turn completed")
    assert "codexr> plain-img what is it\n[image: shot.png]" in out and "a grey square" in out
    assert images_in_last_request(model) == 1
    t.until("codexr>")

    out = t.prompt("/mention hewo", end="is in your next prompt")
    assert "@hello_world.py is in your next prompt" in out
    t.prompt("plain-ment this file")  # typed after the pre-filled @path
    assert user_texts(model.model_requests[-1])[-1] == "@hello_world.py plain-ment this file"

    t.child.send(f"\x1b[200~{shot}\x1b[201~")  # a terminal pastes a dragged file as its path (bracketed)
    t.child.sendline("plain-img again")
    out = t.until(r"-- turn completed") + t.until("codexr>")
    assert "codexr> [image: shot.png] plain-img again" in out and images_in_last_request(model) == 1

    out = t.prompt("/compact", end="context compacted")
    out = t.prompt("/review", end="Code review finished")
    assert ">> Code review started: current changes <<" in out and "Looks fine to the line's reviewer." in out
    assert '"findings"' not in out
    out = t.prompt("/init")
    assert "/init sends: Generate a file named AGENTS.md" in out and "wrote the guide" in out
    assert t.read("AGENTS.md") == "# Repository Guidelines\n"
    out = t.prompt("/init", end="Skipping /init")
    assert "AGENTS.md already exists here" in out
    t.child.sendline("/rewind")
    out = t.until("rewind to before which prompt")
    assert "4. " in out and "Generate a file named AGENTS.md" in out and "5. " not in out  # only prompts listed
    t.child.sendline("")
    t.until("codexr>")
    t.quit()
