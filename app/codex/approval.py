"""An agent's request for permission, as the session core hands it to a front end (no Codex imports)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ApprovalRequest:
    """What the agent asks permission for; the UI answers with a decision string."""

    kind: str
    method: str
    thread_id: str
    turn_id: str
    item_id: str
    command: str | None
    cwd: str | None
    reason: str | None
    changes: list[dict[str, Any]]
    params: dict[str, Any]
