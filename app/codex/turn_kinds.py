"""Which turns of a thread are the user's prompts: read by the thread listing too, which must not import the event
translation (app.codex.events and its imports were ~15-40 ms of every one-shot `codexr threads`)."""

from __future__ import annotations

from typing import Any

# Not prompts of the user's: Codex's own turns for /review. A /compact turn holds no userMessage; a contextCompaction
# item beside one is Codex compacting automatically inside a prompt's turn (first, when the context was full): still
# that prompt (taking it for a compaction turn lost the prompt from the rewind picker, and every later number shifted)
_NOT_PROMPT_ITEMS = frozenset({"enteredReviewMode", "exitedReviewMode"})


def is_sub_turn(turn: dict[str, Any]) -> bool:
    """A turn run inside another (a review's reviewer turn holds the review prompt): never a prompt of its own."""
    root = turn.get("rootTurnId")
    return bool(root) and root != turn.get("id")


def is_prompt_turn(turn: dict[str, Any]) -> bool:
    """A turn the user sent a prompt for (a rewind point): not a /compact turn (no userMessage), a review, or a review's
    inner turn."""
    items = [i for i in turn.get("items") or [] if isinstance(i, dict)]
    return (not is_sub_turn(turn) and any(i.get("type") == "userMessage" for i in items)
            and not any(i.get("type") in _NOT_PROMPT_ITEMS for i in items))
