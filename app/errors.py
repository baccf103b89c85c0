"""The session core's errors, importable without starting (or importing) Codex's SDK."""

from __future__ import annotations

from snapshot_store import StoreError


class SessionError(StoreError):
    """A clear, one-line failure of a session operation (nothing was changed)."""


class CodexGone(SessionError):
    """Codex's app-server went away during a call (its pipe closed): starting it again may help."""


class Declined(SessionError):
    """The user said no at the confirmation: nothing changed (the CLI exits 1)."""
