"""The model and permissions chosen for a session's threads and turns, and the params they make for Codex.

Why apart: starting, resuming and forking a thread (the thread listing, rewind) and starting a turn (the turn
recorder) all send the same choices; one object holds them, so /model and /permissions reach every one of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..codex.turn_settings import TurnSettings


@dataclass
class Choices:
    """What the command line asked for, what the user chose since, and the model Codex reports."""

    model: str = ""  # as Codex reports it once a thread is started or resumed
    asked_model: str | None = None  # `-m`
    sandbox: str | None = None  # `-s`
    approval_policy: str | None = None  # `-a`
    next_model: str | None = None  # chosen with /model: sent with every later turn/start
    turn_settings: TurnSettings = field(default_factory=TurnSettings)  # effort, approval and sandbox

    def thread_params(self, cwd: Path) -> dict[str, Any]:
        """The params of `thread/start`, `thread/resume` and `thread/fork` in workspace `cwd`."""
        params: dict[str, Any] = {"cwd": str(cwd), "approvalsReviewer": "user"}
        if self.next_model or self.asked_model:
            params["model"] = self.next_model or self.asked_model
        if self.sandbox:
            params["sandbox"] = self.sandbox
        if self.approval_policy:
            params["approvalPolicy"] = self.approval_policy
        params.update(self.turn_settings.thread_params())
        return params

    def turn_params(self) -> dict[str, Any] | None:
        """The overrides of `turn/start` (None: none)."""
        return {**({"model": self.next_model} if self.next_model else {}), **self.turn_settings.turn_params()} or None

    def noted(self, resp: Any, dumped: dict[str, Any]) -> None:
        """Take in what Codex reports of a started or resumed thread (its model, effort, approval, sandbox)."""
        self.model = str(getattr(resp, "model", "") or self.model)
        self.turn_settings.note(dumped)

    def use_model(self, model: str, effort: str | None = None) -> None:
        """Use `model` (and reasoning `effort`, None: the model's default) from the next turn on."""
        self.next_model = model
        self.model = model
        self.turn_settings.effort = effort

    def use_permissions(self, approval: str, sandbox: str) -> None:
        """Use this approval policy and sandbox mode from the next turn on (/permissions)."""
        self.turn_settings.approval = approval
        self.turn_settings.sandbox = sandbox
