"""A change journal: what a long-running process keeps between its captures, so that the next one looks only where
something changed (the fast path, fastpath.py) instead of checking every file or walking.

inotify (inotify.py) is the journal on Linux. Another platform's is a second implementation of `Journal`, chosen by
`open_journal`: an FSEvents stream on macOS watches the whole tree at once (its `watch_dir` has nothing to add),
`drain` turns its events into a `Changes` (a changed file into `files`, a directory's creation, removal or rename
into `structural`, MustScanSubDirs, dropped events or a wrapped id into `lost`), and `reset` restarts the stream.
Nothing of a journal is persisted; the change monitor (monitor.py) is what outlives a process.
"""

from __future__ import annotations

from typing import Protocol

from .changes import Changes


class Journal(Protocol):
    """What happened in one workspace since the last drain, as a capture needs to know it."""

    def watch_dir(self, rel_dir: str) -> None:
        """Watch this directory before a walk (or a check of the saved walk) lists it, so nothing after the listing
        goes unseen; one that cannot be watched makes the next drain `lost`."""

    def drain(self) -> Changes:
        """Everything reported since the last drain, without blocking."""

    def reset(self) -> None:
        """Start over before a full walk (a renamed directory's watch would report under its old name)."""

    def close(self) -> None:
        """Release what it holds."""


def open_journal(root: str) -> Journal | None:
    """This platform's journal over workspace `root` (None: none here, or it cannot start: every capture checks the
    saved walk or walks)."""
    from .inotify import ChangeJournal  # here: inotify_simple (ctypes) is for long-running processes only

    if not ChangeJournal.available():
        return None
    try:
        return ChangeJournal(root)
    except OSError:
        return None
