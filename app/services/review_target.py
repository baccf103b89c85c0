"""`/review`'s words as the target Codex's `review/start` takes (the official TUI's presets, typed as words)."""

from __future__ import annotations

from typing import Any

from ..errors import SessionError

USAGE = "/review [branch NAME | commit SHA | INSTRUCTIONS]"
HELP = ("code review by Codex: the uncommitted changes (staged, unstaged, untracked), the changes against "
        "branch NAME, commit SHA, or your own instructions")


def review_target(words: str) -> dict[str, Any]:
    """No words: the uncommitted changes; `branch NAME`, `commit SHA`; anything else: custom review instructions."""
    text = words.strip()
    if not text:
        return {"type": "uncommittedChanges"}
    head, _, rest = text.partition(" ")
    rest = rest.strip()
    if head in ("branch", "commit"):
        if not rest or " " in rest:
            raise SessionError(f"usage: {USAGE}")
        return {"type": "baseBranch", "branch": rest} if head == "branch" else {"type": "commit", "sha": rest}
    return {"type": "custom", "instructions": text}
