"""Automatic gc after a turn, a rewind or a redo: at most daily, on a thread and a store of its own.

Why apart: the turn recorder and the rewinder both end with it, and neither may wait for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from config import CodexrSettings
from snapshot_store import Store, StoreError
from snapshot_store.maint.gc import maybe_auto_gc


class AutoGc:
    """Runs the retention policy's gc when due, never on a turn's critical path; `join` waits for a running one."""

    def __init__(self, store_dir: Path, codex_home: Path, settings: CodexrSettings, tracking: bool,
                 notice: Callable[[str, dict[str, Any]], None]) -> None:
        self.store_dir, self.codex_home, self.settings, self.tracking = store_dir, codex_home, settings, tracking
        self._notice = notice
        self.thread: threading.Thread | None = None

    def collect_later(self) -> None:
        """Automatic gc (at most daily), on a thread of its own with a store of its own: never on a
        turn's critical path. The session's store reloads what gc changed at its next lock."""
        if not (self.tracking and self.settings.file_snapshots.auto_gc):
            return
        if self.thread is not None and self.thread.is_alive():
            return
        policy = self.settings.retention()

        def run() -> None:
            try:
                with Store.open(self.store_dir, protected=[self.codex_home]) as store:
                    plan = maybe_auto_gc(store, policy)
                if plan is not None:
                    self._notice("codexr/gc", plan.as_json())
            except StoreError as exc:
                self._notice("codexr/gcFailed", {"message": str(exc)})

        thread = threading.Thread(target=run, daemon=True, name="codexr-gc")
        thread.start()  # before it is published: close() on another thread joins only a started thread
        self.thread = thread

    def join(self) -> None:
        """Wait for a gc that is running (at close)."""
        if self.thread is not None:
            self.thread.join()
