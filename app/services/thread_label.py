"""One label for a thread in the app, `codexr threads` and `codexr history`: the prompt it really holds, and for a
fork made by a rewind, where it came from (`fork of …, rewound before prompt K`).

A fork used to be labelled "(rewound to before its first prompt)" whenever Codex gave no preview for it, also
when it held prompts; now that words only for a fork that holds none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

NO_PROMPT = "(rewound to before its first prompt)"
"""The label's head for a fork that holds no prompt yet."""


def rewound_before(history: Iterable[dict[str, Any]], origin: str | None) -> int | None:
    """The prompt of `origin` that the rewind which made this fork went back before (None: not made by a rewind)."""
    if not origin:
        return None
    for h in history:
        if h.get("event") == "rewind" and str(h.get("from") or "").lower() == origin.lower():
            try:
                return int(h.get("to_prompt") or 0) or None
            except (TypeError, ValueError):
                return None
    return None


def fork_note(origin: str, before: int | None, after: int | None = None) -> str:
    """`fork of <origin>, rewound before prompt K`; a fork no rewind made says after which prompt it starts."""
    if before:
        return f"fork of {origin}, rewound before prompt {before}"
    return f"fork of {origin}" + (f", after prompt {after}" if after else "")


def thread_label(first_prompt: str, prompts: int, origin: str | None = None, before: int | None = None,
                 width: int = 80, after: int | None = None) -> str:
    """The first prompt's first line (or NO_PROMPT for a fork holding none), then its fork note; "" for a thread
    with no prompt that is no fork (callers say "(no prompt yet)" as they like)."""
    line = (first_prompt.strip().splitlines() or [""])[0]
    head = line if len(line) <= width else line[: width - 1] + "…"
    if prompts <= 0 and origin:
        head = NO_PROMPT
    if not origin:
        return head
    note = fork_note(origin, before, after)
    return f"{head} · {note}" if head else note


#: What a front end says on exit about a thread: (thread id, workspace) -> one line.
Farewell = Callable[[str, str], str]


def resume_line(thread_id: str, workspace: str) -> str:
    """What a front end says on exit, as the official TUI does: the command that continues this thread."""
    import os
    import shlex

    here = os.path.realpath(os.getcwd()) == os.path.realpath(workspace)
    where = "" if here else f" -C {shlex.quote(workspace)}"
    return f"To continue this thread, run codexr{where} resume {thread_id}"
