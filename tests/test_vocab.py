"""One vocabulary: who started a thread reads the same in `codexr threads`, the app, and `codexr history`."""

from __future__ import annotations

from typing import Any

import pytest

from app.history.catalog import FileSummary, Session
from app.history.rollout import _meta
from app.session import thread_source
from snapshot_store.records import asdict


def _history_label(session_meta: dict[str, Any]) -> str:
    """The label `codexr history` gives a rollout whose session_meta is this."""
    meta = _meta(session_meta, "2025-06-01T10:00:00.000Z")
    summary = FileSummary("/x.jsonl", False, 1, 1, meta.id, asdict(meta), [], "", "", {})
    return Session(meta.id, [summary], archived=False).source_label


@pytest.mark.parametrize(("app_server", "rollout", "originator", "word"), [
    ("cli", "cli", "codex-tui", "CLI"),
    ("vscode", "vscode", "codex_vscode", "IDE"),
    ("exec", "exec", "codex_exec", "exec"),
    ({"subAgent": {"thread_spawn": {}}}, {"subagent": {"thread_spawn": {}}}, "codex-tui", "subagent"),
    # the official TUI through `codexr codex`: the app-server records its source as "vscode" (seen, 0.163.0);
    # `threads` said IDE, `history` codexr (codexr kept a sidecar), `history show` "codexr (vscode)"
    ("vscode", "vscode", "codex-tui", "CLI"),
    ("vscode", "vscode", "codexr", "codexr"),
])
def test_threads_and_history_name_who_started_a_thread_alike(app_server: Any, rollout: Any, originator: str,
                                                             word: str) -> None:
    """`codexr threads` said "cli"/"vscode"/"sub-agent" where `codexr history` said "CLI"/"IDE"/"subagent"."""
    assert thread_source({"id": "t", "source": app_server, "originator": originator}) == word
    assert _history_label({"id": "t", "source": rollout, "originator": originator}) == word


def test_codexr_custom_and_unknown_sources() -> None:
    assert thread_source({"source": "cli", "originator": "codexr"}) == "codexr"
    assert _history_label({"id": "t", "source": "cli", "originator": "codexr"}) == "codexr"
    assert thread_source({"source": "appServer"}) == "app-server"
    assert thread_source({"source": {"custom": "my-bot"}}) == "my-bot"
    assert thread_source({}) == "unknown"


def test_the_listing_asks_for_every_source_kind_the_pinned_protocol_has() -> None:
    """`codexr threads` lists without the SDK, so its source kinds are written out: a `thread/list` without one of
    them leaves that kind's threads out. They must be the pinned SDK's `ThreadSourceKind`, all of them."""
    from app.codex.codex_sdk import ThreadSourceKind
    from app.services.thread_catalog import SOURCE_KINDS

    assert list(SOURCE_KINDS) == [k.value for k in ThreadSourceKind]
