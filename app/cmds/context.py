"""What every command needs: CODEX_HOME, settings, the store, and output helpers."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snapshot_store.records import field, record
from snapshot_store.settings import RetentionPolicy, ScopeSettings

if TYPE_CHECKING:  # both load on first use: a one-shot command pays only for what it touches
    from config import CodexrSettings
    from snapshot_store import Store
    from snapshot_store.restore import Recovery


def say_recovery(report: Recovery) -> None:
    """An interrupted restore finished or rolled back by this command: one line on stderr, never silently."""
    from ..rewind.held import held_clause

    print(f"codexr: {report.summary()}{held_clause(report.held, report.rolled_back)}", file=sys.stderr)


class UsageError(Exception):
    """A mistake in how a command was called; shown as one line, exit 2."""


def _held_settler(store: Store, home: Path, codex_bin: Callable[[], str]) -> Callable[[dict[str, Any]], bool]:
    """The store's judge of an interrupted held restore (rewind.held.settler), loaded when one is found: its imports
    (subprocess, the sidecars) were ~5 ms of every command that opens the store."""

    def settle(hold: dict[str, Any]) -> bool:
        from ..rewind.held import settler

        return settler(store, home, codex_bin)(hold)

    return settle


@record
class Context:
    """Per-invocation state shared by command handlers."""

    home: Path
    loaded: CodexrSettings | None = None
    """The validated settings; None when no source sets a codexr key (`config.defaults_apply`): the
    defaults then hold, and pydantic loads only if a command asks for `settings` (a one-shot
    `snapshots capture` skips ~0.1-0.25 s of imports; see bench/bench_startup.py)."""
    json: bool = False
    codex_bin: Callable[[], str] | None = None
    """The Codex executable this command runs (`--codex-bin`, env, config, pinned), chosen on first use: the judge
    of a proxy revert a kill interrupted asks it (app/rewind/held.py). None: such a revert waits for a command
    that has one."""
    config_error: str | None = None
    """Why the settings files cannot be read (`doctor` runs without them and reports it); None: they can."""
    _store: Store | None = field(default=None, repr=False)

    @property
    def settings(self) -> CodexrSettings:
        """The validated settings (defaults validated on first use); never the defaults in place of a broken file."""
        if self.config_error is not None:
            from config import ConfigError

            raise ConfigError(self.config_error)
        if self.loaded is None:
            from config import load_settings

            self.loaded = load_settings(self.home)
        return self.loaded

    def scope(self) -> ScopeSettings:
        """The capture scope of `[file_snapshots]` (the defaults need no pydantic)."""
        return ScopeSettings() if self.loaded is None else self.loaded.scope()

    def retention(self) -> RetentionPolicy:
        """The gc policy of `[file_snapshots]` (the defaults need no pydantic)."""
        return RetentionPolicy() if self.loaded is None else self.loaded.retention()

    def auto_gc(self) -> bool:
        """`file_snapshots.auto_gc` (on by default)."""
        return True if self.loaded is None else self.loaded.file_snapshots.auto_gc

    @property
    def store_dir(self) -> Path:
        """Our data lives beside, never inside, Codex's own files."""
        return self.home / "file_snapshots"

    def workspace(self, path: str | Path) -> Path:
        """The workspace's real path; refused (one line, exit 2) when it is or lies inside the store or CODEX_HOME."""
        from snapshot_store.roots import workspace_root

        return workspace_root(path, [self.home], store=self.store_dir, containing=True)

    def store(self) -> Store:
        """Open the store once per command; Codex's home is protected from capture and restore."""
        if self._store is None:
            from snapshot_store import Store

            self._store = Store.open(self.store_dir, protected=[self.home])
            self._store.on_recovery = say_recovery
            if self.codex_bin is not None:
                self._store.on_held = _held_settler(self._store, self.home, self.codex_bin)
            from ..server.runtime import monitors_wanted

            # A change monitor that outlives this command (snapshot_store/detect/monitor.py), unless turned off.
            self._store.capturer.use_monitors(monitors_wanted())
            from ..server.oneshot import imports_done

            imports_done()  # what the store's work needs is imported: the collector may run again
        return self._store

    def close(self) -> None:
        """Flush caches."""
        if self._store is not None:
            self._store.close()
            self._store = None

    def emit(self, doc: Any) -> None:
        """Print one JSON document to stdout, in one write.

        json.dump(indent=2) writes piece by piece: 70,000 writes for `history list --all` of 1,000 sessions,
        0.1-0.2 s under PYTHONUNBUFFERED (bench/bench_history.py), against ~30 ms to build the string.
        """
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")

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
