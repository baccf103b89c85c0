"""A session as Markdown or JSON (show/export), with codexr's rewinds and redos marked where they happened."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from snapshot_store.records import asdict

from ..shared.times import json_time, screen_time
from .catalog import Catalog, Prompt, Session, rewind_marks
from .rollout import Entry

if TYPE_CHECKING:
    from .store import SearchResult

OUTPUT_LINES = 12  # command output lines shown by `show` (export json keeps all that was read)


def short_time(ts: str | None) -> str:
    """'2026-12-01T02:26:54.024Z' -> '2026-12-01 03:26 +0100': local time with its offset, as every codexr screen
    shows times (app/shared/times.py); Codex records UTC."""
    return screen_time(ts)


def rel(cwd: str, path: str) -> str:
    if cwd and os.path.isabs(path):
        r = os.path.relpath(path, cwd)
        if not r.startswith(".."):
            return r
    return path


def skipped_note(skipped: dict[str, int]) -> str:
    """' (skipped: 2 malformed, 1 partial)' — or '' when nothing was skipped."""
    parts = [f"{v} {k}" for k, v in skipped.items() if v]
    return f" (skipped: {', '.join(parts)})" if parts else ""


def nothing_found(text: str, res: SearchResult, workspace: str | None, tools: bool) -> str:
    """An empty result says which sources and how many sessions were searched."""
    where = f" of {workspace}" if workspace else ""
    kinds = "user and agent messages" + (", commands, output and file paths" if tools else "")
    return (f"no match for {text!r} in {res.searched_sessions} sessions{where} "
            f"(searched {', '.join(res.roots)}; {kinds}){skipped_note(asdict(res.skipped))}")


def session_json(s: Session, cat: Catalog) -> dict[str, Any]:
    """The stable per-session object of `history list --json` (and the header of show/export)."""
    return {
        "id": s.id,
        "workspace": s.cwd,
        "first_prompt": _first_prompt(s, cat),
        "prompts": s.inherited_prompts + s.own_prompts,
        "own_prompts": s.own_prompts,
        "created": json_time(s.files[0].created),
        "last_activity": json_time(s.last_activity),
        "source": s.source,
        "client": s.client,
        "source_label": s.source_label,
        "archived": s.archived,
        "forked_from": s.forked_from,
        "forked_at_prompt": s.forked_at,
        "has_snapshots": bool(s.sidecar and s.sidecar.snapshots),
        "snapshots": s.sidecar.snapshots if s.sidecar else 0,
        "files": [f.path for f in s.files],
    }


def _first_prompt(s: Session, cat: Catalog) -> str:
    for seg in cat.chain(s):
        f = cat.by_path.get(seg.path)
        if f is not None and f.first_prompt and (seg.end is None or (f.user_offsets and f.user_offsets[0] < seg.end)):
            return f.first_prompt
    return ""


def _marks_by_prompt(s: Session, prompts: list[Prompt]) -> dict[int, list[str]]:
    """Rewind/redo notes keyed by the prompt number they follow (0: before the first)."""
    out: dict[int, list[str]] = {}
    for m in rewind_marks(s):
        if m["event"] == "rewind":
            n = int(m.get("to_prompt") or 1)
            out.setdefault(n - 1, []).append(
                f"⟲ codexr rewind ({short_time(m['at'])}): thread {m['from_thread']} was rewound to before its "
                f"prompt {n} ({m.get('mode')}); the conversation continues here")
            continue
        after = 0
        for p in prompts:
            if p.user is not None and p.user.at and p.user.at <= m["at"]:
                after = p.number
        if m["event"] == "redo":
            out.setdefault(after, []).append(
                f"↪ codexr redo ({short_time(m['at'])}): this rewind was undone; back to thread {m['to_thread']}")
        else:
            out.setdefault(after, []).append(
                f"↩ codexr redo ({short_time(m['at'])}): came back here from the rewound thread {m['from_thread']}")
    return out


def _entry_md(e: Entry, cwd: str) -> list[str]:
    if e.kind == "user":
        return [*(f"> {line}" for line in e.text.splitlines() or [""]), ""]
    if e.kind == "agent":
        return [e.text, ""]
    if e.kind == "command":
        code = "" if e.exit_code is None else f" (exit {e.exit_code})"
        lines = [f"`$ {e.text}`{code}"]
        out = e.output.rstrip("\n").splitlines()
        if out:
            lines.append("```")
            lines.extend(out[:OUTPUT_LINES])
            if len(out) > OUTPUT_LINES:
                lines.append(f"… {len(out) - OUTPUT_LINES} more lines")
            lines.append("```")
        return [*lines, ""]
    if e.kind == "files":
        return [f"files changed: {', '.join(rel(cwd, p) for p in e.paths)}", ""]
    return [f"_{e.text}_", ""]


def markdown(s: Session, cat: Catalog, prompts: list[Prompt], only: int | None = None) -> str:
    """The conversation, readable: prompts as quotes, commands and file changes summarised."""
    head = session_json(s, cat)
    lines = [f"# Session {s.id}", "",
             f"- workspace: {s.cwd}", f"- source: {head['source_label']}",
             f"- created: {short_time(head['created'])}, last activity: {short_time(head['last_activity'])}",
             f"- prompts: {head['prompts']}"]
    if s.forked_from:
        at = f" after its prompt {s.forked_at}" if s.forked_at is not None else ""
        lines.append(f"- forked from {s.forked_from}{at} (its first {s.forked_at or 0} prompt(s) are inherited)")
    if s.archived:
        lines.append("- archived")
    lines.append("")
    marks = _marks_by_prompt(s, prompts)
    for note in marks.get(0, []) if only is None else []:
        lines += [f"**{note}**", ""]
    for p in prompts:
        if only is not None and p.number != only:
            continue
        user = p.user
        when = short_time(user.at) if user else ""
        tag = f" — inherited from {p.thread_id}" if p.inherited else ""
        lines += [f"## Prompt {p.number} ({when}){tag}", ""] if p.number else ["## Before the first prompt", ""]
        for e in p.entries:
            lines += _entry_md(e, s.cwd)
        for note in marks.get(p.number, []) if p.number else []:
            lines += [f"**{note}**", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def conversation_json(s: Session, cat: Catalog, prompts: list[Prompt]) -> dict[str, Any]:
    """`history export --format json` / `show --json`: the session and every prompt with its entries."""
    return {
        "session": session_json(s, cat),
        "prompts": [{"number": p.number, "inherited": p.inherited, "thread_id": p.thread_id,
                     "entries": [_entry_json(e) for e in p.entries]} for p in prompts],
        "rewinds": [{**m, "at": json_time(m["at"])} for m in rewind_marks(s)],
    }


def _entry_json(e: Entry) -> dict[str, Any]:
    d = asdict(e)
    d.pop("offset", None)
    d["at"] = json_time(d.get("at"))
    return d
