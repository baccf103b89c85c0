"""Live-session registry per workspace: two codexr sessions in one workspace see each other."""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from snapshot_store.fsutil import atomic_write
from snapshot_store.ids import workspace_key
from snapshot_store.locks import host_name


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class SessionLock:
    """A file per live session (pid, host, start time) under the store's locks directory."""

    def __init__(self, store_dir: Path, workspace: Path) -> None:
        self.dir = store_dir / "locks" / "sessions" / workspace_key(str(workspace))
        self.workspace = workspace
        self.path = self.dir / f"{host_name()}-{os.getpid()}.json"

    def acquire(self) -> None:
        """Register this process as a live session of the workspace."""
        self.dir.mkdir(parents=True, exist_ok=True)
        doc = {"pid": os.getpid(), "host": host_name(), "since": time.time(),
               "workspace": str(self.workspace)}
        atomic_write(self.path, json.dumps(doc).encode(), sync=False)

    def release(self) -> None:
        """Unregister."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def others(self) -> list[str]:
        """Descriptions of other live sessions in this workspace; stale entries are removed."""
        out = []
        host = host_name()
        for f in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else []:
            if f == self.path:
                continue
            try:
                doc = json.loads(f.read_text())
                pid, their_host = int(doc["pid"]), str(doc["host"])
            except (OSError, ValueError, KeyError, TypeError):
                continue
            if their_host == host and not _alive(pid):
                with contextlib.suppress(OSError):
                    f.unlink()
                continue
            started = time.strftime("%H:%M", time.localtime(float(doc.get("since", 0))))
            out.append(f"pid {pid} on {their_host} (since {started})")
        return out


class LastThread:
    """The thread the user last used in a workspace (last prompt sent or last switched to).

    `resume --last` and `exec --last` go back to it: the thread created or written most recently is not it
    (a redo returns to an older thread, leaving a newer fork behind).
    """

    def __init__(self, store_dir: Path, workspace: Path) -> None:
        self.path = store_dir / "workspaces" / f"{workspace_key(str(workspace))}.json"
        self.workspace = workspace

    def mark(self, thread_id: str) -> None:
        """Remember `thread_id` as the last used (best effort: losing it only makes `--last` guess)."""
        doc = {"workspace": str(self.workspace), "thread_id": thread_id, "at": time.time()}
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, json.dumps(doc).encode(), sync=False)

    def get(self) -> str | None:
        """The recorded thread id (None when none was recorded or the record is unreadable)."""
        try:
            doc = json.loads(self.path.read_text())
            tid = doc["thread_id"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return tid if isinstance(tid, str) and tid else None
