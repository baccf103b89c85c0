"""The lines /status shows in both front ends for what the next turn runs with, worded as the official Codex TUI."""

from __future__ import annotations

from .context_window import context_detail
from .events import Status
from .permissions import matching_preset


def settings_lines(s: Status) -> list[str]:
    """Model and reasoning effort, approval policy, sandbox (with the /permissions preset they make), context."""
    model = s.model or "Codex's default (config.toml)"
    lines = [f"model: {model}, reasoning {s.effort or 'default'}"]
    approval, sandbox = s.approval or "unknown", s.sandbox or "unknown"
    preset = matching_preset(approval.split(" (")[0], sandbox.split(" (")[0])
    lines.append(f"approval: {approval}")
    lines.append(f"sandbox: {sandbox}" + (f"  (/permissions: {preset.label})" if preset else ""))
    lines.append(f"context window: {context_detail(s.context_used, s.context_window)}")
    return lines
