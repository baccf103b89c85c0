"""What every command needs: CODEX_HOME, settings, the store, and output helpers."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # both load on first use: a one-shot command pays only for what it touches
    from config import CodexrSettings
    from snapshot_store import Store


class UsageError(Exception):
    """A mistake in how a command was called; shown as one line, exit 2."""


@dataclass
class Context:
    """Per-invocation state shared by command handlers."""

    home: Path
    settings: CodexrSettings
    json: bool = False
    _store: Store | None = field(default=None, repr=False)

    @property
    def store_dir(self) -> Path:
        """Our data lives beside, never inside, Codex's own files."""
        return self.home / "file_snapshots"

    def store(self) -> Store:
        """Open the store once per command; Codex's home is protected from capture and restore."""
        if self._store is None:
            from snapshot_store import Store

            self._store = Store.open(self.store_dir, protected=[self.home])
        return self._store

    def close(self) -> None:
        """Flush caches."""
        if self._store is not None:
            self._store.close()
            self._store = None

    def emit(self, doc: Any) -> None:
        """Print one JSON document to stdout."""
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")

    def info(self, text: str) -> None:
        """Human output (suppressed in --json mode, where stdout carries JSON only)."""
        if not self.json:
            print(text)

    def progress(self, text: str) -> None:
        """Progress goes to stderr, and only to a terminal, rewriting one line."""
        if sys.stderr.isatty():
            sys.stderr.write(f"\r\x1b[K{text}")
            sys.stderr.flush()

    def done_progress(self) -> None:
        """Clear the progress line."""
        if sys.stderr.isatty():
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()

    def read_progress(self, done: int, total: int, nbytes: int) -> None:
        """The store's progress callback while it reads file contents."""
        self.progress(f"reading files: {done}/{total} ({nbytes / 1048576:.0f} MiB)")
