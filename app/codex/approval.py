"""An agent's request for permission, as the session core hands it to a front end, and how the app-server is
answered (no Codex imports: the proxy declines approvals no client is left to give with it too)."""

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


#: The app-server's requests for a client's approval, and what each is about.
APPROVAL_METHODS = {
    "item/commandExecution/requestApproval": "command",
    "item/fileChange/requestApproval": "fileChange",
    "execCommandApproval": "command",
    "applyPatchApproval": "fileChange",
}
#: The legacy approvals' words for the v2 decisions.
LEGACY_DECISIONS = {"accept": "approved", "acceptForSession": "approved_for_session", "decline": "denied",
                    "cancel": "abort"}


def decision_result(method: str, decision: Any) -> dict[str, Any]:
    """The result that answers approval request `method` with `decision` (a v2 decision; the legacy requests get
    theirs, anything unknown declines)."""
    if method in ("execCommandApproval", "applyPatchApproval"):
        return {"decision": LEGACY_DECISIONS.get(decision, "denied") if isinstance(decision, str) else "denied"}
    return {"decision": decision if isinstance(decision, str | dict) else "decline"}
