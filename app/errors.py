"""The session core's errors, importable without starting (or importing) Codex's SDK."""

from __future__ import annotations

from snapshot_store import StoreError


class SessionError(StoreError):
    """A clear, one-line failure of a session operation (nothing was changed)."""


class CodexGone(SessionError):
    """Codex's app-server went away during a call (its pipe closed): starting it again may help."""


class ConversationGone(SessionError):
    """Codex cannot list the turns of a thread codexr recorded prompts on (its session files deleted): its files can
    still be rewound from codexr's record alone (`--files-only`), its conversation cannot."""


class Declined(SessionError):
    """The user said no at the confirmation: nothing changed (the CLI exits 1)."""


class Stopped(SessionError):
    """A rewind, redo or restore the user stopped (Ctrl+C in a front end): its files are as before it, as the text
    says (the front end has shown it already, as a notice)."""
