"""What recording one workspace's turns holds open: the store, the sidecars, the Recorder and the session lock.

Why apart: the SDK session (app/session.py) and the proxy (app/proxy/observer.py) feed the same Recorder, and open,
lock, watch and let go of what it records into the same way.
"""

from __future__ import annotations

from pathlib import Path

from config import CodexrSettings
from snapshot_store import Store

from ..codex.codex_bin import choose
from ..rewind.held import settler
from ..server.runtime import monitors_wanted
from .recorder import Recorder
from .sidecar import Sidecars
from .workspace_lock import SessionLock


class Recording:
    """The store (`CODEX_HOME/file_snapshots`), sidecars, Recorder and session lock of workspace `cwd`."""

    def __init__(self, cwd: Path, codex_home: Path, settings: CodexrSettings) -> None:
        self.cwd = cwd
        self.store_dir = codex_home / "file_snapshots"
        self.tracking = bool(settings.features.file_snapshots)
        self.store = Store.open(self.store_dir, protected=[codex_home])
        # A proxy revert a kill interrupted is settled by asking the Codex codexr runs (app/rewind/held.py).
        self.store.on_held = settler(self.store, codex_home, lambda: str(choose(None, settings).path))
        # The pre-turn capture of the next command looks only at what changed (a change monitor, unless turned off).
        self.store.capturer.use_monitors(monitors_wanted())
        self.sidecars = Sidecars(self.store_dir)
        self.recorder = Recorder(self.store, self.sidecars, cwd, settings.scope(), self.tracking)
        self.lock = SessionLock(self.store_dir, cwd)

    def start(self, watch: bool = True) -> None:
        """Say this session works here (other sessions' rewinds warn), and watch the workspace when tracking and
        `watch` (a command that captures once, a rewind or a redo, has no later capture for a journal to serve)."""
        self.lock.acquire()
        if self.tracking and watch:
            self.store.capturer.watch(self.cwd)

    def close(self) -> None:
        """Let go of the store and the lock."""
        self.store.close()
        self.lock.release()
