"""Plain-text labels the dialogs share: relative times, short ids, mode names, plan lines.

Relative times and short ids keep what the dialogs show stable and readable (and their SVG
snapshots deterministic); nothing here relies on colour.
"""

from __future__ import annotations

import time

from snapshot_store.restore import DELETE, LEAVE, RMDIR, WRITE, Action

from ..codex.events import FileStat
from ..rewind.picks import BOTH, MINE, REWOUND, kind_of, short_reason
from ..shared.vocab import RewindMode
from .diffview import stat_label

MODE_NAMES: dict[str, str] = {m: m.words for m in RewindMode}
MODE_KEYS = {"both": "b", "files": "f", "conversation": "c"}
OP_LETTERS = {WRITE: "W", DELETE: "D", RMDIR: "R", LEAVE: "="}


def ago(ts: float | None, now: float | None = None) -> str:
    """`just now`, `5 min ago`, `3 h ago`, `2 days ago` — or `unknown` without a time."""
    if not ts:
        return "unknown"
    secs = max(0.0, (time.time() if now is None else now) - ts)
    if secs < 60:
        return "just now"
    if secs < 3600:
        return f"{int(secs // 60)} min ago"
    if secs < 86400:
        return f"{int(secs // 3600)} h ago"
    days = int(secs // 86400)
    return f"{days} day{'s' if days != 1 else ''} ago"


def short(ident: str | None, n: int = 8) -> str:
    """The first characters of a thread or snapshot id (enough to tell them apart)."""
    return (ident or "")[:n] or "-"


def first_line(text: str, width: int = 70) -> str:
    """A prompt's first line, shortened to `width` characters."""
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def files_label(files: tuple[FileStat, ...] | None, limit: int = 4) -> str:
    """`M a.txt +1 -0, A b.txt +2 -0` for a turn's files (`files unknown` without snapshots)."""
    if files is None:
        return "files unknown"
    if not files:
        return "no file changes"
    shown = ", ".join(stat_label(f) for f in files[:limit])
    return shown + (f", … {len(files) - limit} more" if len(files) > limit else "")


#: The rows of a plan the rule of whose change it is decided (app/rewind/owners.py): letter and verb.
KIND_LABELS = {"kept": ("K", "keep yours"), "merged": ("M", "merge"), "conflict": ("!", "conflict")}
#: A file's choice in a preview, as its row says it.
CHOICE_WORDS = {MINE: "yours kept", REWOUND: "the restored state taken", BOTH: "both kept (the restored beside it)"}


def plan_line(action: Action, stat: FileStat | None, choice: str | None = None) -> str:
    """One step of a restore plan: letter, path (with +/- when known) and the reason; then the user's choice."""
    what = stat_label(stat).split(" ", 1)[1] if stat is not None else action.path
    verb = {WRITE: "write", DELETE: "delete", RMDIR: "remove dir", LEAVE: "leave alone"}.get(action.op, action.op)
    letter, verb = KIND_LABELS.get(kind_of(action.reason) or "", (OP_LETTERS.get(action.op, "?"), verb))
    mark = f"  ← {CHOICE_WORDS[choice]} (your choice)" if choice in CHOICE_WORDS else ""
    return f"{letter} {verb}: {what} — {short_reason(action.reason)}{mark}"


