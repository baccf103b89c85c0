"""One workspace's index, as git's index is one: per path the stat key and content id, per listed directory its
stat and the digest of its entries (with the files seen in it), so a capture can tell what changed without
reading file contents or walking.

Its two halves keep their on-disk files (FORMAT.md §7): the per-path stat cache (`cache/<wskey>.stat`,
statcache.py) and the per-directory saved walk (`cache/<wskey>.walk`, walkstate.py). Checking the saved walk is
one of the two sources of changed paths; a long-running process's inotify journal (watch.py) is the other; both
report a `Changes` (changes.py) that the fast path (fastpath.py) starts from.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import walkstate
from .statcache import StatCache


class WorkspaceIndex:
    """The index of one workspace: the stat cache by path and the saved walk by directory."""

    def __init__(self, stat_file: Path, walk_file: Path) -> None:
        self.stat_file = stat_file
        self.walk_file = walk_file
        self._stat: StatCache | None = None

    @property
    def stat(self) -> StatCache:
        """Path -> (stat key, blob), loaded when first asked: an unchanged capture that checks the saved walk
        never needs it (decoding it is ~10-15 ms on 11,000 files)."""
        if self._stat is None:
            self._stat = StatCache(self.stat_file)
        return self._stat

    def lookup(self, rel: str, st: os.stat_result) -> str | None:
        """The content id the index holds for this exact stat, if any."""
        return self.stat.lookup(rel, st)

    def forget(self, paths: list[str]) -> None:
        """A restore rewrote these paths: never vouch for what the index said of them."""
        self.stat.forget(paths)

    def saved_walk(self) -> walkstate.WalkState | None:
        """The directories and files the last capture saw, or None (none, or damaged: walk)."""
        return walkstate.load(self.walk_file)

    def save_walk(self, state: walkstate.WalkState) -> None:
        """Keep what this capture saw for the next process (no fsync: losing it costs a walk)."""
        walkstate.save(self.walk_file, state)

    def forget_walk(self) -> None:
        """This capture cannot vouch for its walk: the next one walks."""
        walkstate.forget(self.walk_file)

    def save(self) -> None:
        """Persist the per-path half if it was loaded (the walk is saved with each capture)."""
        if self._stat is not None:
            self._stat.save()
