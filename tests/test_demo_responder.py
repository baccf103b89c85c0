"""The demo's scripted model answers free text usefully: its vocabulary, run as real Codex turns through the Driver."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import session_options

from app.codex.events import AgentDelta, AgentMessage, CommandFinished, StatusChanged, TurnFinished
from app.codex.scripted_model import Message, Patch, Reasoning, ScriptedModel, Shell, responder, responder_steps
from app.services.driver import Driver


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        m.script("", [responder()])
        yield m


def _turn(d: Driver, q: queue.Queue[Any], text: str) -> list[Any]:
    """Submit a prompt; the events it produced, up to the driver's status report after it."""
    d.submit(text)
    out: list[Any] = []
    while not isinstance(out[-1] if out else None, StatusChanged):
        out.append(q.get(timeout=60))
    assert [e.status for e in out if isinstance(e, TurnFinished)] == ["completed"], out
    return out


def _answer(events: list[Any]) -> str:
    return "".join(e.text for e in events if isinstance(e, AgentMessage))


def test_the_vocabulary_drives_real_turns(model: ScriptedModel, tmp_path: Path) -> None:
    q: queue.Queue[Any] = queue.Queue()
    d = Driver(session_options(model, tmp_path, {"keep.txt": "kept\n"}), q.put)
    ws = tmp_path / "ws"
    try:
        assert d.start()
        _turn(d, q, "create notes/a.md hello there")
        assert (ws / "notes" / "a.md").read_text() == "hello there\n"

        ev = _turn(d, q, "edit notes/a.md a second line; run echo made > r.txt; list")
        assert (ws / "notes" / "a.md").read_text() == "hello there\na second line\n"
        assert (ws / "r.txt").read_text() == "made\n"
        listed = [e for e in ev if isinstance(e, CommandFinished) and e.command == "ls -A"]
        assert listed and {"keep.txt", "notes", "r.txt"} <= set(listed[0].output.split())
        assert "appended a line to `notes/a.md`" in _answer(ev) and "ran `echo made > r.txt`" in _answer(ev)

        ev = _turn(d, q, "delete keep.txt; edit missing.md")
        assert not (ws / "keep.txt").exists()
        assert "deleted `keep.txt`" in _answer(ev)
        assert "tried: appended a line to `missing.md` — it failed" in _answer(ev)  # reported, not claimed

        ev = _turn(d, q, "Please add a cache for the API")
        assert '"""Please add a cache for the API (sketched by the demo model)."""' in (
            ws / "add_cache_for.py").read_text()
        assert (ws / "TODO.md").read_text() == "- [ ] Please add a cache for the API\n"  # written by a shell command
        finished = next(e for e in ev if isinstance(e, TurnFinished))
        assert [(f.path, f.change) for f in finished.files] == [("TODO.md", "added"), ("add_cache_for.py", "added")]
        streamed = "".join(e.delta for e in ev if isinstance(e, AgentDelta))
        assert streamed == _answer(ev) and streamed.startswith("**Done.**")  # Markdown, arriving as deltas
        assert len([e for e in ev if isinstance(e, AgentDelta)]) > 3
    finally:
        d.close()


def test_clauses_parse_to_steps_and_free_text_falls_through() -> None:
    steps = responder_steps("create a.py x = 1; run make test; list", [])
    assert [type(s) for s in steps] == [Patch, Shell, Shell, Message]
    assert "*** Add File: a.py\n+x = 1\n" in steps[0].text  # type: ignore[union-attr]
    assert [s.cmd for s in steps if isinstance(s, Shell)] == ["make test", "ls -A"]
    # a NAME without a dot or slash is not a file name: the whole prompt is free text
    free = responder_steps("create a login page", [])
    assert [type(s) for s in free] == [Reasoning, Patch, Shell, Message]
    assert "*** Add File: create_login_page.py" in free[1].text  # type: ignore[union-attr]
    # the summary follows what the tools reported
    failed = responder_steps("run false", [{"type": "function_call_output", "output": "Process exited with code 1"}])
    assert "it failed" in failed[-1].text  # type: ignore[union-attr]
