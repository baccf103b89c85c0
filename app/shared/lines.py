"""Lines both front ends and the command line print alike: /status, and the plan of a restore (a snapshot's, a
rewind's, a redo's) — worded here once, so line mode, `codexr snapshots restore`, `codexr rewind` and the demo agree.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .words import plural as plural  # spelled in the leaf module, named here for the front ends

if TYPE_CHECKING:  # light on purpose: every `codexr` command imports this module (bench_startup.py)
    from snapshot_store import RestorePlan, RestoreResult

    from ..codex.events import Status, TokenUsage
    from ..session import ThreadSummary


def show_path(path: str) -> str:
    """Printable form of a path that may hold undecodable bytes."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def human_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def settings_lines(s: Status) -> list[str]:
    """Model and reasoning effort, approval policy, sandbox (with the /permissions preset they make), context."""
    # Here: every CLI command imports this module for its listings, few need the presets (~1-2 ms each).
    from ..codex.context_window import context_detail
    from ..codex.permissions import matching_preset

    model = s.model or "Codex's default (config.toml)"
    lines = [f"model: {model}, reasoning {s.effort or 'default'}"]
    approval, sandbox = s.approval or "unknown", s.sandbox or "unknown"
    preset = matching_preset(approval.split(" (")[0], sandbox.split(" (")[0])
    lines.append(f"approval: {approval}")
    lines.append(f"sandbox: {sandbox}" + (f"  (/permissions: {preset.label})" if preset else ""))
    lines.append(f"context window: {context_detail(s.context_used, s.context_window)}")
    return lines


def status_lines(s: Status) -> list[str]:
    """/status, worded as the official Codex TUI: the settings, then workspace, thread, tracking and store, the
    last capture, redo depth and the other sessions here."""
    lines = [
        *settings_lines(s),
        f"workspace: {s.workspace}",
        f"thread: {s.thread_id or '(none yet: the next prompt starts one)'}",
        f"file tracking: {'on' if s.tracking else 'off'} · "
        f"{'no snapshot yet' if s.tracked_files is None else plural(s.tracked_files, 'file') + ' tracked'} · store "
        f"{human_bytes(s.store_bytes)}",
    ]
    if s.last_capture_at is not None:
        took = f" in {s.last_capture_seconds:.2f}s" if s.last_capture_seconds is not None else ""
        lines.append(f"last capture: {time.strftime('%H:%M:%S', time.localtime(s.last_capture_at))}{took}")
    lines.append(f"redo depth: {s.redo_depth}")
    if s.others:
        lines.append("other codexr sessions here: " + "; ".join(s.others))
    return lines


#: What a thread's snapshot coverage is when codexr's sidecar of it cannot be read (every front end's words)
DAMAGED_RECORD = "snapshots unknown (codexr's record of it is damaged)"


def thread_counts(t: ThreadSummary) -> str:
    """A thread's prompts and how many have file snapshots, as `codexr threads` and /threads list it:
    `3 prompts, 2/3 with snapshots (1 conversation-only), redo 1`."""
    prompts = plural(t.prompts, "prompt")
    if t.damaged:
        return f"{prompts}, {DAMAGED_RECORD}"
    cover = f"{t.with_snapshots}/{t.prompts} with snapshots"
    if t.conversation_only:
        cover += f" ({t.conversation_only} conversation-only)"
    redo = f", redo {t.redo_depth}" if t.redo_depth else ""
    return f"{prompts}, {cover}{redo}"


def over_limit_line(count: int, limit: int) -> str:
    """Untracked files a capture held back by the recent-file limit, said where it happens (a later restore's plan
    said it first): `3,900 untracked files beyond `file_snapshots.residue_max_files` (100) not captured: …`."""
    files = "file" if count == 1 else "files"
    return (f"{count:,} untracked {files} beyond `file_snapshots.residue_max_files` ({limit}) not captured: add "
            f"{'it' if count == 1 else 'them'} to Git or raise the limit")


def turn_tokens(usage: TokenUsage) -> str:
    """A turn's tokens as its end line says them: every request of the turn summed, and the thread's total
    (`13,811 tokens this turn (thread 27,967)`); only the thread's when the turn's sum is not known (an old log)."""
    if usage.turn_total is None:
        return f"thread {usage.thread_total:,} tokens"
    return f"{usage.turn_total:,} tokens this turn (thread {usage.thread_total:,})"


def retry_line(message: str, details: str = "") -> str:
    """Codex retrying a failing provider by itself: `Codex retries: Reconnecting... 2/5 (details)`."""
    text = " ".join(message.split()) or "retrying"
    details = " ".join(details.split())
    return f"Codex retries: {text}" + (f" ({details})" if details and details not in text else "")


def since_rewind_lines(changed: list[str], turns: int, indent: str = "") -> list[str]:
    """What a redo would overwrite: the files changed since the rewind, and the prompts sent on the fork since."""
    out = []
    if changed:
        them = "it" if len(changed) == 1 else "them"
        out.append(f"{indent}{plural(len(changed), 'file')} changed since the rewind "
                   f"(the safety snapshot keeps {them}):")
        out += [f"{indent}  {show_path(p)}" for p in changed]
    if turns:
        out.append(f"{indent}{plural(turns, 'prompt')} sent on this fork since the rewind (it stays as it is)")
    return out


def restored_counts(res: RestoreResult) -> str:
    """What a restore, rewind or redo did to the files, as line mode says it: `2 written, 1 deleted, 0 left
    alone`."""
    return f"{len(res.written)} written, {len(res.deleted)} deleted, {len(res.left)} left alone"


def done_lines(headline: str, thread_id: str, safety_id: str | None, res: RestoreResult | None,
               no_snapshot_reason: str | None = None) -> list[str]:
    """What a rewind or a redo did, as `codexr rewind` and `codexr redo` print it alike: what happened, the thread to
    go on with, the safety snapshot, the files' counts and each file left alone (failed ones too) with its reason."""
    out = [headline, f"thread {thread_id}"]
    if safety_id:
        out.append(f"safety snapshot {safety_id}")
    if res is not None:
        out.append(f"files: {restored_counts(res)}")
        out += [f"  left {show_path(a.path)}  ({a.reason})" for a in res.left]  # `left` holds the failed too
    elif no_snapshot_reason:
        out.append(f"files: left as they are ({no_snapshot_reason}: conversation only)")
    return out


def some_paths(paths: Sequence[str], shown: int = 3) -> str:
    """A few paths, then how many more: `a.txt, b.txt and 4 more` (`no file` for none)."""
    if not paths:
        return "no file"
    names = [show_path(p) for p in paths[:shown]]
    rest = len(paths) - len(names)
    if rest:
        return f"{', '.join(names)} and {rest} more"
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def files_restored(res: RestoreResult) -> str:
    """The same, as the app's one-line notices say it: `2 files written, 1 deleted`."""
    return f"{plural(len(res.written), 'file')} written, {len(res.deleted)} deleted"


def yours_kept(decided: Mapping[str, Any], res: RestoreResult) -> str:
    """`; merged with yours: a.txt; kept as you left them: b.txt` — what the rule did not simply put back, for the
    one-line notices after a rewind or a redo (a conflict whose other side was chosen was written: not named)."""
    done = {*res.written, *res.deleted}
    merged = sorted(p for p, d in decided.items() if d.kind == "merged" and p in done)
    kept = sorted(p for p, d in decided.items() if d.kind == "kept" and p not in done)
    clash = sorted(p for p, d in decided.items() if d.kind == "conflict" and p not in done)
    out = f"; merged with yours: {some_paths(merged)}" if merged else ""
    if kept:
        out += f"; kept as you left {'it' if len(kept) == 1 else 'them'}: {some_paths(kept)}"
    if clash:
        out += f"; kept yours in {'a conflict' if len(clash) == 1 else 'conflicts'}: {some_paths(clash)}"
    return out


def plan_lines(plan: RestorePlan, indent: str = "", after: Mapping[str, str] | None = None) -> list[str]:
    """What a restore will do: each file written, deleted or left alone with its reason (and `after[path]`: line
    counts, a diff), the totals, the planner's notes. Directories it removes are counted, not listed."""
    from snapshot_store.restore import RMDIR  # loaded already: the plan came from it

    after = after or {}
    shown = [a for a in plan.actions if a.op != RMDIR]
    out = [] if shown else [f"{indent}nothing to do: the workspace already matches the snapshot"]
    out += [f"{indent}{a.op:<6} {show_path(a.path)}  ({a.reason}){after.get(a.path, '')}" for a in shown]
    out.append(f"{indent}{len(plan.writes)} to write, {len(plan.deletes)} to delete, {len(plan.left)} left alone")
    out += [f"{indent}note: {note}" for note in plan.notes]
    return out
