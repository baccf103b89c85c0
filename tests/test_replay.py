"""Replay logs: what a session emitted plays back into a front end without Codex; bad logs are one clear error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.codex.events import (
    AgentMessage,
    FileChanges,
    FileDiff,
    FileStat,
    Ready,
    ThreadLoaded,
    TurnFinished,
    UserPrompt,
)
from app.errors import SessionError
from app.shared.replay import ReplayDriver, ReplayError, read_log, write_log

EVENTS: list[Any] = [
    ThreadLoaded("t-1", (UserPrompt("u0", "earlier", 1, True), AgentMessage("m0", "*done*")), "resumed", "draft"),
    UserPrompt("", "make it", 2, True),
    FileChanges("c1", "completed", (FileDiff("a.py", "update", "@@ -1 +1 @@\n-a\n+b\n"),)),
    AgentMessage("m1", "made **it**"),
    TurnFinished("turn-2", "completed", None, 1.5, (FileStat("a.py", "modified", 1, 1),), "p" * 64, "q" * 64),
]


def test_a_log_round_trips_and_replays_in_order(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    assert write_log(log, [*EVENTS, Ready.__new__(Ready)]) == len(EVENTS)  # state events are not logged
    back = read_log(log)
    assert back == EVENTS
    seen: list[Any] = []
    drv = ReplayDriver(back, seen.append)
    assert drv.start()
    assert isinstance(seen[0], Ready) and seen[1:1 + len(EVENTS)] == EVENTS
    assert drv.thread_id == "t-1"
    with pytest.raises(SessionError, match="rewind is not available in a replay"):
        drv.rewind(1)


@pytest.mark.parametrize("line", ['{"type": "Nope"}', "not json", '{"type": "UserPrompt", "bogus": 1}'])
def test_a_bad_line_is_one_clear_error(tmp_path: Path, line: str) -> None:
    log = tmp_path / "log.jsonl"
    write_log(log, EVENTS[:2])
    with log.open("a") as fh:
        fh.write(line + "\n")
    with pytest.raises(ReplayError, match=r"line 3 is not an event"):
        read_log(log)
