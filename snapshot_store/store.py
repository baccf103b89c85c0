"""Store: a repository with its capturer, and the workspace operations on it by root (the app's and tests' handle).

Each operation is one call into the layer that holds it: Workspace (workspace.py) for capture, restore, diff and
recovery, Capturer (capture.py) for the change journals, Repository (repository/repo.py) for everything on disk.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from .capture import Capturer, CaptureResult
from .manifest import Entry
from .readfiles import Progress

if TYPE_CHECKING:  # a command that only captures never loads restore's modules
    from .restore.apply import RestoreResult
    from .restore.journal import Recovery
    from .restore.plan import RestorePlan
    from .workspace import Workspace
from .diff import Change, diff_maps
from .repository.repo import (
    AUTO_GC_INTERVAL,
    GC_MARKER,
    STORE_FORMAT,
    STORE_VERSION,
    UNLISTED_KINDS,
    Repository,
    SnapshotInfo,
    read_record,
    read_ref_file,
)
from .settings import ScopeSettings
from .statcache import StatCache

__all__ = ["AUTO_GC_INTERVAL", "GC_MARKER", "STORE_FORMAT", "STORE_VERSION", "UNLISTED_KINDS", "CaptureResult",
           "Change", "SnapshotInfo", "Store", "diff_maps", "read_record", "read_ref_file"]


class Store(Repository):
    """A snapshot store at `path` (normally $CODEX_HOME/file_snapshots), able to capture and restore workspaces."""

    def __init__(self, path: Path, protected: tuple[Path, ...]) -> None:
        super().__init__(path, protected)
        self.capturer = Capturer(self)

    def close(self) -> None:
        """Save the stat caches, stop the change journals and release file descriptors."""
        self.capturer.close()
        super().close()

    def at(self, root: str | os.PathLike[str]) -> Workspace:
        """The front door for one workspace of this store."""
        from .workspace import Workspace  # here: a command that only captures never loads restore's modules

        return Workspace(self, self.capturer, root)

    # ----------------------------------------------------------------- capture and the change journal
    def capture(
        self,
        root: str | os.PathLike[str],
        *,
        label: str | None = None,
        known_paths: Iterable[str] = (),
        scope: ScopeSettings | None = None,
        kind: str = "capture",
        grow: bool = True,
        dry_run: bool = False,
        force: Callable[[str], bool] | None = None,
        progress: Progress | None = None,
        lean: bool = False,
    ) -> CaptureResult:
        """Capturer.run by its older option names (tests and benches use them): `force` is `whatever_size`,
        `lean` is `summary_only`. New callers name what they want: Capturer.capture, capture_summary, safety,
        preview."""
        return self.capturer.run(root, label=label, known_paths=known_paths, scope=scope, kind=kind, grow=grow,
                                 dry_run=dry_run, whatever_size=force, progress=progress, summary_only=lean)

    def capture_summary(self, root: str | os.PathLike[str], *, label: str | None = None,
                        scope: ScopeSettings | None = None, progress: Progress | None = None) -> CaptureResult:
        """A capture of which only the id and counts are shown (Capturer.capture_summary)."""
        return self.capturer.capture_summary(root, label=label, scope=scope, progress=progress)

    def preview(self, root: str | os.PathLike[str], *, known_paths: Iterable[str] = (),
                scope: ScopeSettings | None = None) -> CaptureResult:
        """The workspace now, hashed in memory only (Capturer.preview)."""
        return self.capturer.preview(root, known_paths=known_paths, scope=scope)

    def stat_cache(self, root: Path) -> StatCache:
        """The workspace's stat cache (a restore forgets the paths it rewrote)."""
        return self.capturer.stat_cache(root)

    def watch(self, root: str | os.PathLike[str]) -> bool:
        """Keep an inotify change journal of this workspace (long-running processes); False where there is none."""
        return self.capturer.watch(root)

    def unwatch(self, root: str | os.PathLike[str]) -> None:
        """Stop the change journal of a workspace."""
        self.capturer.unwatch(root)

    def absorb_own_changes(self, ws: Path, written: dict[str, Entry], deleted: list[str],
                           dirs_changed: bool) -> None:
        """After a restore, fold its own writes into the change journal instead of re-walking."""
        self.capturer.absorb_own_changes(ws, written, deleted, dirs_changed)

    # ----------------------------------------------------------------- diff, restore, recovery
    def diff(self, a: str, b: str | None = None, root: str | os.PathLike[str] | None = None,
             scope: ScopeSettings | None = None) -> list[Change]:
        """Per-path changes from snapshot `a` to snapshot `b` (or to the workspace now)."""
        if b is not None:
            return diff_maps(self.files(a), self.files(b))
        return self.at(root if root is not None else self.record(a).root).diff(a, scope=scope)

    def restore(
        self,
        snap_id: str,
        root: str | os.PathLike[str] | None = None,
        *,
        dry_run: bool = False,
        known_paths: Iterable[str] = (),
        scope: ScopeSettings | None = None,
        confirm: Callable[[RestorePlan], bool] | None = None,
        progress: Progress | None = None,
        into: bool = False,
    ) -> RestoreResult:
        """Workspace.restore into `root` (by default the snapshot's own workspace)."""
        from .workspace import refuse_single_files

        rec = self.record(snap_id)
        refuse_single_files(snap_id, rec.root, rec.kind)  # before the root is resolved, as the message says why
        return self.at(root if root is not None else rec.root).restore(
            snap_id, dry_run=dry_run, known_paths=known_paths, scope=scope, confirm=confirm, progress=progress,
            into=into)

    def recover(self, root: str | os.PathLike[str]) -> Recovery | None:
        """Workspace.recover: finish a restore that was interrupted in this workspace (None when there was none)."""
        return self.at(root).recover()
