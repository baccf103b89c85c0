"""Codex's notifications and stored turns, translated into transcript events (app/codex/events.py).

One translation for the live stream and for threads read back from Codex, so a resumed or forked
thread looks exactly like the turns the user watched.
"""

from __future__ import annotations

import os
import shlex
from typing import Any

from .events import (
    AgentDelta,
    AgentMessage,
    CommandFinished,
    CommandOutput,
    CommandStarted,
    ErrorNotice,
    FileChanges,
    FileDiff,
    Notice,
    Reasoning,
    TokenUsage,
    TurnStarted,
    UserPrompt,
)
from .turn_kinds import is_prompt_turn as is_prompt_turn
from .turn_kinds import is_sub_turn as is_sub_turn

_SHELLS = ("bash", "sh", "zsh")
COMPACTED = "context compacted: the conversation so far is summarised (the rewind picker still lists every prompt)"


def prompt_text(user_item: dict[str, Any]) -> str:
    """A userMessage's text as the transcript shows it: its text parts, and `[image: name]` for each image."""
    parts = []
    for c in user_item.get("content") or []:
        if not isinstance(c, dict):
            continue
        if c.get("type") == "text" and c.get("text"):
            parts.append(str(c["text"]))
        elif c.get("type") in ("localImage", "image"):
            parts.append(f"[image: {os.path.basename(str(c.get('path') or c.get('url') or 'image'))}]")
    return "\n".join(parts)


def short_command(command: str) -> str:
    """`/bin/bash -lc 'make test'` → `make test`: the command the shell ran, unquoted once, never escaped again."""
    try:
        argv = shlex.split(command)
    except ValueError:  # not shell-quoted text: shown as Codex sent it
        return command
    if len(argv) == 3 and os.path.basename(argv[0]) in _SHELLS and argv[1] in ("-c", "-lc"):
        return argv[2]
    return command


def _rel(path: str, cwd: str) -> str:
    if cwd and os.path.isabs(path):
        try:
            rel = os.path.relpath(path, cwd)
        except ValueError:
            return path
        return path if rel.startswith("..") else rel
    return path


def file_diffs(item: dict[str, Any], cwd: str = "") -> tuple[FileDiff, ...]:
    """The changes of a fileChange item, with workspace-relative paths."""
    out = []
    for ch in item.get("changes") or []:
        if not isinstance(ch, dict):
            continue
        kind = ch.get("kind")
        name = kind.get("type") if isinstance(kind, dict) else str(kind or "update")
        move = (kind.get("move_path") or kind.get("movePath")) if isinstance(kind, dict) else None
        out.append(FileDiff(_rel(str(ch.get("path") or ""), cwd), str(name or "update"), str(ch.get("diff") or ""),
                            _rel(move, cwd) if isinstance(move, str) and move else None))
    return tuple(out)


def item_events(item: dict[str, Any], *, completed: bool, cwd: str = "") -> list[Any]:
    """The events one item stands for (`completed`: from item/completed or a stored turn)."""
    kind = item.get("type")
    iid = str(item.get("id") or "")
    if kind == "agentMessage":
        return [AgentMessage(iid, str(item.get("text") or ""))] if completed else []
    if kind == "reasoning":
        summary = item.get("summary") or []
        text = "\n\n".join(str(s) for s in summary if s) if isinstance(summary, list) else str(summary)
        return [Reasoning(iid, text)] if completed and text else []
    if kind == "commandExecution":
        command = short_command(str(item.get("command") or ""))
        if not completed:
            return [CommandStarted(iid, command, str(item.get("cwd") or ""))]
        code = item.get("exitCode")
        duration = item.get("durationMs")
        status = str(item.get("status") or "completed")
        if item.get("stillRunning"):
            status = "background"  # codexr asked Codex: the process outlived its interrupted turn
        elif status == "failed" and code is None and item.get("processId"):
            # Codex stopped waiting for a long command (its unified exec yields after ~10 s) and reports the item
            # as failed with no exit code, while the process runs on in the background: say that, not "failed".
            status = "background"
        return [CommandFinished(iid, command, str(item.get("aggregatedOutput") or ""),
                                code if isinstance(code, int) else None,
                                duration if isinstance(duration, int) else None, status)]
    if kind == "fileChange":
        return [FileChanges(iid, str(item.get("status") or ("completed" if completed else "inProgress")),
                            file_diffs(item, cwd))]
    if not completed:
        return []
    if kind == "contextCompaction":  # as the official TUI says it
        return [Notice(COMPACTED)]
    if kind == "enteredReviewMode":
        return [Notice(f">> Code review started: {item.get('review') or 'review requested'} <<")]
    if kind == "exitedReviewMode":  # no review text: it was interrupted (the turn's status says so)
        said = [AgentMessage(iid, str(item["review"]))] if item.get("review") else []
        return [*said, Notice("<< Code review finished >>")]
    return []


def notification_events(method: str, params: dict[str, Any], cwd: str = "") -> list[Any]:
    """The events a live notification of a turn stands for (most notifications stand for none)."""
    if method == "turn/started":
        turn = params.get("turn") or {}
        return [TurnStarted(str(turn.get("id") or params.get("turnId") or ""))]
    if method in ("item/started", "item/completed"):
        item = params.get("item") or {}
        if not isinstance(item, dict):
            return []
        return item_events(item, completed=method == "item/completed", cwd=cwd)
    if method == "item/agentMessage/delta":
        return [AgentDelta(str(params.get("itemId") or ""), str(params.get("delta") or ""))]
    if method == "item/commandExecution/outputDelta":
        return [CommandOutput(str(params.get("itemId") or ""), str(params.get("delta") or ""))]
    if method == "error":
        err = params.get("error") or {}
        message = err.get("message") if isinstance(err, dict) else str(err)
        return [ErrorNotice(str(message or "error"), bool(params.get("willRetry")))]
    if method == "thread/tokenUsage/updated":
        usage = params.get("tokenUsage") or {}
        last = (usage.get("last") or {}).get("totalTokens") or 0
        total = (usage.get("total") or {}).get("totalTokens") or 0
        window = usage.get("modelContextWindow")
        return [TokenUsage(str(params.get("turnId") or ""), int(last), int(total),
                           int(window) if isinstance(window, int) and window > 0 else None)]
    return []


def turn_events(turns: list[dict[str, Any]], cwd: str = "", snapshots: dict[str, bool] | None = None) -> list[Any]:
    """A stored thread's transcript: every turn's prompt and items, in order (thread/read includeTurns).

    `snapshots` maps the turns codexr ran to whether they have a file snapshot; a turn it does not
    name was sent outside codexr.
    """
    out: list[Any] = []
    number = 0
    for turn in turns:
        if is_sub_turn(turn):
            continue  # a review's inner turn: its review shows with the review turn
        items = [i for i in turn.get("items") or [] if isinstance(i, dict)]
        users = [i for i in items if i.get("type") == "userMessage"]
        review = any(i.get("type") == "exitedReviewMode" for i in items)
        tid = str(turn.get("id") or "")
        if users and is_prompt_turn(turn):
            number += 1
            out.append(UserPrompt(tid, prompt_text(users[0]), number,
                                  bool(snapshots and snapshots.get(tid)),
                                  snapshots is not None and tid not in snapshots))
        for item in items:
            if item.get("type") == "userMessage" or (review and item.get("type") == "agentMessage"):
                continue  # a review's agent message repeats the review (shown from exitedReviewMode)
            out.extend(item_events(item, completed=True, cwd=cwd))
        err = turn.get("error")
        if isinstance(err, dict) and err.get("message"):
            out.append(ErrorNotice(str(err["message"])))
    return out
