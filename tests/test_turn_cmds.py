"""/compact, /review, /init, @-file search and images through the shared core (app/services/driver.py), real Codex."""

from __future__ import annotations

import dataclasses
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest
from e2e_helpers import session_options
from test_driver import Events

from app.codex.events import (
    AgentDelta,
    AgentMessage,
    Notice,
    Ready,
    StatusChanged,
    ThreadLoaded,
    TurnFinished,
    UserPrompt,
)
from app.codex.scripted_model import (
    SUMMARY_HEAD,
    ScriptedModel,
    add_file,
    last_user_text,
    message,
    pause,
    review,
    usage,
    user_texts,
)
from app.codex.translate import COMPACTED
from app.errors import SessionError
from app.services.driver import Driver
from app.services.init_prompt import INIT_PROMPT


def png(width: int = 2, height: int = 2) -> bytes:
    """A real (tiny, grey) PNG image: Codex decodes what it attaches."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def until_idle(ev: Events) -> None:
    """The queue ran dry: the driver reports its status after every job."""
    while ev.wait(StatusChanged).status.busy:
        pass


def loaded(ev: Events, thread_id: str) -> ThreadLoaded:
    got = ev.wait(ThreadLoaded)
    while got.thread_id != thread_id:
        got = ev.wait(ThreadLoaded)
    return got


def assistant_texts(body: dict[str, object]) -> list[str]:
    items = body.get("input")
    assert isinstance(items, list)
    return ["".join(str(c.get("text", "")) for c in i.get("content") or []) for i in items
            if isinstance(i, dict) and i.get("role") == "assistant"]


def test_compact_is_no_prompt_and_rewind_keeps_it_before_the_next_prompt(model: ScriptedModel,
                                                                          tmp_path: Path) -> None:
    model.script("cmp-one", [add_file("a.txt", "a\n"), message("made a-file")])
    model.script("cmp-two", [add_file("b.txt", "b\n"), message("made b-file")])
    model.script("cmp-three", [message("three done")])
    ev = Events()
    d = Driver(session_options(model, tmp_path), ev)
    ws = d.opts.cwd
    try:
        assert d.start()
        ev.wait(Ready)
        with pytest.raises(SessionError, match="nothing to compact"):
            d.compact()
        d.submit("cmp-one please")
        ev.wait(TurnFinished)
        d.compact()
        said: list[str] = []  # Codex may warn first ("Heads up: Long threads and multiple compactions ...")
        while COMPACTED not in said:  # as the official TUI says it, once Codex compacted
            said.append(ev.wait(Notice).text)
        until_idle(ev)
        d.submit("cmp-two please")
        ev.wait(TurnFinished)
        sent = model.model_requests[-1]
        assert any(SUMMARY_HEAD in t for t in user_texts(sent))  # the summary replaced the conversation
        assert "made a-file" not in assistant_texts(sent)
        rows = d.prompt_rows()  # the compaction is no prompt: numbering and the picker are as before
        assert [(r.number, r.text, r.has_snapshot) for r in rows] == [(1, "cmp-one please", True),
                                                                      (2, "cmp-two please", True)]
        assert d.thread_id is not None
        shown = d.transcript(d.thread_id)
        assert [type(e).__name__ for e in shown if isinstance(e, UserPrompt | Notice)] == [
            "UserPrompt", "Notice", "UserPrompt"]

        origin = d.thread_id
        res = d.rewind(2)  # back to just before prompt 2: the compaction came before it and stays
        fork = loaded(ev, res.thread_id)
        assert [e.text for e in fork.events if isinstance(e, UserPrompt)] == ["cmp-one please"]
        assert any(isinstance(e, Notice) and e.text == COMPACTED for e in fork.events)
        assert not (ws / "b.txt").exists() and (ws / "a.txt").read_text() == "a\n"
        d.submit("cmp-three please")
        ev.wait(TurnFinished)
        again = model.model_requests[-1]
        assert any(SUMMARY_HEAD in t for t in user_texts(again))
        assert "made a-file" not in assistant_texts(again) and "cmp-two please" not in user_texts(again)

        d.redo()
        loaded(ev, origin)
        assert (ws / "b.txt").read_text() == "b\n"
        res = d.rewind(1)  # before the first prompt: files and conversation as they began
        first = loaded(ev, res.thread_id)
        assert not [e for e in first.events if isinstance(e, UserPrompt)]
        assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()
    finally:
        d.close()


def test_a_prompt_whose_turn_codex_began_by_compacting_is_still_a_prompt(model: ScriptedModel, tmp_path: Path) -> None:
    """Codex compacts on its own when the context is full, inside the next prompt's turn (a contextCompaction item
    before its userMessage): that turn was taken for a /compact, so the prompt vanished from the rewind picker and
    every later prompt's number shifted ("prompt 3 does not exist"). It is a prompt, and rewinds like one."""
    model.script("auto-one", [add_file("a.txt", "a\n"), usage(150_000), message("one done")])  # the context full
    model.script("auto-two", [add_file("b.txt", "b\n"), message("two done")])
    opts = dataclasses.replace(session_options(model, tmp_path),
                               config_overrides=("model_auto_compact_token_limit=100000",))
    ev = Events()
    d = Driver(opts, ev)
    ws = opts.cwd
    try:
        assert d.start()
        ev.wait(Ready)
        d.submit("auto-one please")
        until_idle(ev)
        mark = len(ev.seen)
        d.submit("auto-two please")
        until_idle(ev)
        assert any(isinstance(e, Notice) and e.text == COMPACTED for e in ev.seen[mark:]), "Codex did not compact"
        assert [(r.number, r.text, r.has_snapshot) for r in d.prompt_rows()] == [(1, "auto-one please", True),
                                                                                (2, "auto-two please", True)]
        assert d.thread_id is not None
        assert [e.text for e in d.transcript(d.thread_id) if isinstance(e, UserPrompt)] == [
            "auto-one please", "auto-two please"]
        res = d.rewind(2)
        loaded(ev, res.thread_id)
        assert not (ws / "b.txt").exists() and (ws / "a.txt").read_text() == "a\n"
    finally:
        d.close()


def test_review_shows_the_review_and_is_no_rewind_point(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("rev-one", [add_file("calc.py", "def add(a, b):\n    return a - b\n"), message("wrote calc")])
    model.script("rev-two", [message("two done")])
    opts = session_options(model, tmp_path)
    subprocess.run(["git", "init", "-q"], cwd=opts.cwd, check=True)
    calc = str(opts.cwd / "calc.py")
    model.script("Review the current code changes", [
        review("add() subtracts.", [("[P1] add subtracts", "It returns a - b.", calc, 2)], "patch is incorrect")])
    model.script("only look at calc", [review("calc looked at, as told.")])
    model.script("slow review", [pause(30), review("never")])
    ev = Events()
    d = Driver(opts, ev)
    try:
        assert d.start()
        ev.wait(Ready)
        d.submit("rev-one please")
        until_idle(ev)
        mark = len(ev.seen)
        d.review()
        until_idle(ev)
        live = ev.seen[mark:]
        notes = [e.text for e in live if isinstance(e, Notice)]
        assert notes == [">> Code review started: current changes <<", "<< Code review finished >>"]
        said = [e.text for e in live if isinstance(e, AgentMessage)]
        assert len(said) == 1 and "[P1] add subtracts" in said[0] and "add() subtracts." in said[0]
        assert not [e for e in live if isinstance(e, AgentDelta) or '"findings"' in getattr(e, "text", "")]
        d.review("only look at calc")  # custom instructions reach the reviewer
        until_idle(ev)
        assert "only look at calc" in user_texts(model.model_requests[-1])[-1]
        with pytest.raises(SessionError, match="usage: /review"):
            d.review("branch")
        d.review("slow review")  # Esc stops a review as it stops a prompt: the reviewer's turn is the active one
        deadline = time.monotonic() + 30
        while not any("slow review" in last_user_text(r) for r in model.requests):  # the reviewer is at work
            assert time.monotonic() < deadline, "the review never reached the model"
            time.sleep(0.05)
        assert d.interrupt()
        until_idle(ev)
        assert Notice("review interrupted", "warning") in ev.seen
        d.submit("rev-two please")
        ev.wait(TurnFinished)
        assert [r.text for r in d.prompt_rows()] == ["rev-one please", "rev-two please"]  # reviews are no prompts
        res = d.rewind(2)
        fork = loaded(ev, res.thread_id)
        assert [e.text for e in fork.events if isinstance(e, UserPrompt)] == ["rev-one please"]
        assert sum(isinstance(e, Notice) and "Code review started" in e.text for e in fork.events) == 3
        assert (opts.cwd / "calc.py").exists()
    finally:
        d.close()


def test_init_mention_and_images(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("Generate a file named AGENTS.md", [add_file("AGENTS.md", "# Repository Guidelines\n"),
                                                     message("wrote AGENTS.md")])
    model.script("img-look", [message("I see a grey square")])
    opts = session_options(model, tmp_path, {"src/hello_world.py": "print('hi')\n", "notes.txt": "n\n"})
    shot = opts.cwd / "shot.png"
    shot.write_bytes(png())
    ev = Events()
    d = Driver(opts, ev)
    try:
        assert d.start()
        ev.wait(Ready)
        assert "src/hello_world.py" in d.find_files("hewo")  # fuzzy, as the official TUI's @ search

        d.init()
        prompt = ev.wait(UserPrompt)
        assert prompt.text == INIT_PROMPT and prompt.number == 1
        ev.wait(TurnFinished)
        assert user_texts(model.model_requests[-1])[-1] == INIT_PROMPT
        assert (opts.cwd / "AGENTS.md").read_text() == "# Repository Guidelines\n"
        with pytest.raises(SessionError, match=r"AGENTS\.md already exists here\. Skipping /init"):
            d.init()
        assert d.prompt_rows()[0].has_snapshot  # a normal prompt: a rewind point

        d.submit("img-look at this", [str(shot)])
        assert ev.wait(UserPrompt).text == "img-look at this\n[image: shot.png]"
        ev.wait(TurnFinished)
        until_idle(ev)
        last_user = [i for i in model.model_requests[-1]["input"]
                     if isinstance(i, dict) and i.get("role") == "user"][-1]
        kinds = [c.get("type") for c in last_user["content"]]
        assert "input_image" in kinds and "input_text" in kinds
        image = next(c for c in last_user["content"] if c.get("type") == "input_image")
        assert str(image.get("image_url", "")).startswith("data:image/")
        rows = d.prompt_rows()
        assert rows[1].text == "img-look at this"

        count = len(model.requests)
        d.submit("img-look at nothing", [str(opts.cwd / "gone.png")])
        until_idle(ev)
        errors = [e.text for e in ev.seen if isinstance(e, Notice) and e.level == "error"]
        assert errors == [f"cannot attach image {opts.cwd / 'gone.png'}: no such file"]
        assert len(model.requests) == count and len(d.prompt_rows()) == 2  # nothing sent
    finally:
        d.close()
