"""Store: a repository with the capturer that keeps its workspaces' indexes (the handle the app and tests hold).

What it adds to the Repository (repository/repo.py) is only what needs both: the front door of a workspace
(`at`, `origin`: Workspace in workspace.py captures, plans, restores, diffs and recovers) and the diff of two
snapshots. The change journals are the capturer's (`store.capturer.watch`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from .capture import Capturer, CaptureResult

if TYPE_CHECKING:  # a command that only captures never loads restore's modules
    from .workspace import Workspace
from .diff import Change, diff_maps
from .repository.listing import SnapshotInfo
from .repository.repo import (
    AUTO_GC_INTERVAL,
    GC_MARKER,
    STORE_FORMAT,
    STORE_VERSION,
    Repository,
    read_record,
    read_ref_file,
)
from .vocab import UNLISTED_KINDS

__all__ = ["AUTO_GC_INTERVAL", "GC_MARKER", "STORE_FORMAT", "STORE_VERSION", "UNLISTED_KINDS", "CaptureResult",
           "Change", "SnapshotInfo", "Store", "diff_maps", "read_record", "read_ref_file"]


class Store(Repository):
    """A snapshot store at `path` (normally $CODEX_HOME/file_snapshots), able to capture and restore workspaces."""

    def __init__(self, path: Path, protected: tuple[Path, ...]) -> None:
        super().__init__(path, protected)
        self.capturer = Capturer(self)

    def close(self) -> None:
        """Save the workspace indexes, stop the change journals and release file descriptors."""
        self.capturer.close()
        super().close()

    def at(self, root: str | os.PathLike[str]) -> Workspace:
        """The front door for one workspace of this store."""
        from .workspace import Workspace  # here: a command that only captures never loads restore's modules

        return Workspace(self, self.capturer, root)

    def origin(self, snap_id: str) -> Workspace:
        """The front door of the workspace `snap_id` was taken of (refused for a snapshot of single files)."""
        from .workspace import refuse_single_files

        rec = self.head(snap_id)
        refuse_single_files(snap_id, rec.root, rec.kind)  # before the root is resolved, as the message says why
        return self.at(rec.root)

    def diff(self, a: str, b: str) -> list[Change]:
        """Per-path changes from snapshot `a` to snapshot `b` (to the workspace now: Workspace.diff).

        When `b` was captured on top of `a` (a turn's post-turn snapshot on its pre-turn one), only the paths its
        delta records name can differ: comparing the two whole maps cost 0.5-0.7 s of a `codexr exec` at 100,000
        files (issue 35), these few paths well under a millisecond."""
        if a == b:
            return []
        return diff_maps(self.files(a), self.files(b), self.named_between(a, b))
