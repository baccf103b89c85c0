"""The settings a user changes mid-session (/model's reasoning effort, /permissions) and what Codex reports of them.

A choice is sent with every later `turn/start` (Codex keeps a turn's overrides for the turns after it, but a
rewind or redo moves to another thread, so codexr sends them each time) and with `thread/start`/`resume`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .permissions import approval_name, sandbox_mode, sandbox_policy


@dataclass(frozen=True)
class ModelInfo:
    """One model of Codex's `model/list`: its reasoning efforts (with Codex's words for them) and default."""

    id: str
    display_name: str
    description: str
    efforts: tuple[tuple[str, str], ...]  # (effort, description)
    default_effort: str
    is_default: bool = False

    def supports(self, effort: str) -> bool:
        """Does the model take this effort (a model that lists none takes any)?"""
        return not self.efforts or effort in {e for e, _ in self.efforts}


def model_info(doc: dict[str, Any]) -> ModelInfo:
    """A `model/list` entry (camelCase dict) as a ModelInfo."""
    efforts = tuple((str(e.get("reasoningEffort") or ""), str(e.get("description") or ""))
                    for e in doc.get("supportedReasoningEfforts") or [] if isinstance(e, dict))
    return ModelInfo(str(doc.get("id") or ""), str(doc.get("displayName") or doc.get("id") or ""),
                     str(doc.get("description") or ""), tuple(e for e in efforts if e[0]),
                     str(doc.get("defaultReasoningEffort") or ""), bool(doc.get("isDefault")))


@dataclass
class TurnSettings:
    """Chosen values (None: Codex's own, from config.toml) and the values Codex last reported for the thread."""

    effort: str | None = None
    approval: str | None = None
    sandbox: str | None = None
    reported_effort: str = ""
    reported_approval: str = ""
    reported_sandbox: str = ""
    #: `--add-dir`: directories the agent may write besides the workspace, as `codex --add-dir` adds them to a
    #: workspace-write sandbox's writable roots (no app-server param says it: the turn's sandbox policy carries them)
    add_dirs: tuple[str, ...] = ()
    reported_policy: dict[str, Any] | None = None  # the sandbox policy Codex last reported, whole

    def turn_params(self) -> dict[str, Any]:
        """The overrides for `turn/start`."""
        out: dict[str, Any] = {}
        if self.effort:
            out["effort"] = self.effort
        if self.approval:
            out["approvalPolicy"] = self.approval
        if self.sandbox:
            out["sandboxPolicy"] = sandbox_policy(self.sandbox)
        policy = self._with_add_dirs(out.get("sandboxPolicy"))
        if policy is not None:
            out["sandboxPolicy"] = policy
        return out

    def _with_add_dirs(self, chosen: dict[str, Any] | None) -> dict[str, Any] | None:
        """The workspace-write policy the turn runs with, its writable roots extended by `add_dirs` (None: nothing
        to add, or a sandbox that is not workspace-write). Codex's reported policy keeps what config.toml set (its
        own writable roots, network access)."""
        reported = self.reported_policy or {}
        base = reported if reported.get("type") == "workspaceWrite" else chosen
        if not self.add_dirs or base is None or (chosen or base).get("type") != "workspaceWrite":
            return None
        roots = [str(r) for r in base.get("writableRoots") or []]
        return {**base, "writableRoots": roots + [d for d in self.add_dirs if d not in roots]}

    def thread_params(self) -> dict[str, Any]:
        """The overrides for `thread/start` and `thread/resume` (no effort there: each turn carries it)."""
        out: dict[str, Any] = {}
        if self.approval:
            out["approvalPolicy"] = self.approval
        if self.sandbox:
            out["sandbox"] = self.sandbox
        return out

    def note(self, resp: dict[str, Any]) -> None:
        """Keep what a `thread/start` or `thread/resume` response says the thread runs with."""
        if resp.get("approvalPolicy") is not None:
            self.reported_approval = approval_name(resp["approvalPolicy"])
        if resp.get("sandbox") is not None:
            self.reported_sandbox = sandbox_mode(resp["sandbox"])
            self.reported_policy = dict(resp["sandbox"]) if isinstance(resp["sandbox"], dict) else None
        self.reported_effort = str(resp.get("reasoningEffort") or "")

    def current(self) -> tuple[str, str, str]:
        """(effort, approval, sandbox) the next turn runs with as far as codexr knows ("" for unknown/default)."""
        return (self.effort or self.reported_effort, self.approval or self.reported_approval,
                self.sandbox or self.reported_sandbox)
