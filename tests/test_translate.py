"""Codex's item payloads become what the user reads: a long command Codex stopped waiting for is not 'failed'."""

from __future__ import annotations

from app.codex.events import CommandFinished
from app.codex.translate import item_events

# item/completed as the pinned Codex (0.163.0) sent it for `echo start; sleep 14; echo end` run by the scripted
# model: Codex's unified exec stopped waiting after ~10 s and reported the still-running process as failed.
STOPPED_WAITING = {
    "aggregatedOutput": None, "command": "/bin/bash -c 'echo start; sleep 14; echo end'", "cwd": "/ws",
    "durationMs": None, "exitCode": None, "id": "call_2", "pluginId": None, "processId": "18579", "scriptPath": None,
    "source": "unifiedExecStartup", "status": "failed", "type": "commandExecution",
}


def test_a_command_codex_stopped_waiting_for_is_shown_as_running_in_the_background() -> None:
    [ev] = item_events(STOPPED_WAITING, completed=True, cwd="/ws")
    assert isinstance(ev, CommandFinished) and ev.status == "background" and ev.exit_code is None


def test_a_command_that_failed_with_an_exit_code_stays_failed() -> None:
    item = {**STOPPED_WAITING, "exitCode": 2, "aggregatedOutput": "boom\n", "durationMs": 40}
    [ev] = item_events(item, completed=True, cwd="/ws")
    assert isinstance(ev, CommandFinished) and ev.status == "failed" and ev.exit_code == 2
    [never_started] = item_events({**STOPPED_WAITING, "processId": None}, completed=True, cwd="/ws")
    assert isinstance(never_started, CommandFinished) and never_started.status == "failed"
