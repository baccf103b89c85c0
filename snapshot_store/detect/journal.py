"""A change journal: what a long-running process keeps between its captures, so that the next one looks only where
something changed (the fast path, fastpath.py) instead of checking every file or walking.

inotify (inotify.py) is the journal on Linux. Elsewhere it is watchdog's observer (watched.py; FSEvents on macOS),
a second implementation of `Journal` chosen by `open_journal`: it watches the whole tree at once (its `watch_dir` has
nothing to add), `drain` flushes it with a cookie file and turns its events into a `Changes` (a changed file into
`files`, a directory's creation, removal or rename into `structural`, MustScanSubDirs, dropped events or a wrapped
id into `lost`). The tests run the journal's contract against both on Linux (tests/test_journal_contract.py).
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


KINDS = ("inotify", "watchdog")


def open_journal(root: str, kind: str | None = None) -> Journal | None:
    """A journal over workspace `root`: `kind`, else this platform's (inotify on Linux, else watchdog's observer:
    FSEvents on macOS); None when there is none here or it cannot start (every capture checks the saved walk or
    walks)."""
    import sys

    if kind is None:
        kind = "inotify" if sys.platform.startswith("linux") else "watchdog"
    if kind == "watchdog":
        from . import watched  # here: watchdog and its thread are for long-running processes only

        if not watched.available():
            return None
        try:
            return watched.WatchdogJournal(root)
        except OSError:
            return None
    from .inotify import ChangeJournal  # here: inotify_simple (ctypes) is for long-running processes only

    if not ChangeJournal.available():
        return None
    try:
        return ChangeJournal(root)
    except OSError:
        return None
