"""One vocabulary: who started a thread reads the same in `codexr threads`, the app, and `codexr history`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from app.history.catalog import FileSummary, Session
from app.history.rollout import _meta
from app.session import thread_source


def _history_label(session_meta: dict[str, Any]) -> str:
    """The label `codexr history` gives a rollout whose session_meta is this."""
    meta = _meta(session_meta, "2025-06-01T10:00:00.000Z")
    summary = FileSummary("/x.jsonl", False, 1, 1, meta.id, asdict(meta), [], "", "", {})
    return Session(meta.id, [summary], archived=False).source_label


@pytest.mark.parametrize(("app_server", "rollout", "word"), [
    ("cli", "cli", "CLI"),
    ("vscode", "vscode", "IDE"),
    ("exec", "exec", "exec"),
    ({"subAgent": {"thread_spawn": {}}}, {"subagent": {"thread_spawn": {}}}, "subagent"),
])
def test_threads_and_history_name_who_started_a_thread_alike(app_server: Any, rollout: Any, word: str) -> None:
    """`codexr threads` said "cli"/"vscode"/"sub-agent" where `codexr history` said "CLI"/"IDE"/"subagent"."""
    assert thread_source({"id": "t", "source": app_server, "originator": "codex_cli_rs"}) == word
    assert _history_label({"id": "t", "source": rollout, "originator": "codex_cli_rs"}) == word


def test_codexr_custom_and_unknown_sources() -> None:
    assert thread_source({"source": "cli", "originator": "codexr"}) == "codexr"
    assert _history_label({"id": "t", "source": "cli", "originator": "codexr"}) == "codexr"
    assert thread_source({"source": "appServer"}) == "app-server"
    assert thread_source({"source": {"custom": "my-bot"}}) == "my-bot"
    assert thread_source({}) == "unknown"
