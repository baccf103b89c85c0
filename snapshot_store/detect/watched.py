"""The change journal from watchdog's observers (journal.py's `Journal` where inotify.py cannot run: FSEvents on
macOS). On Linux the same code runs over watchdog's inotify observer, which is how its contract is tested here.

watchdog reports on a thread of its own, later than the change. A drain must hold every change finished before it,
so it flushes as Watchman does: it makes a cookie file in the workspace's root, waits until the observer reports
it (FSEvents and inotify report in order), then removes it; a cookie not seen within COOKIE_WAIT seconds makes the
drain `lost` (the capture walks). So do events FSEvents says it dropped (MustScanSubDirs, dropped by the kernel or
the client, wrapped ids) and an observer that stopped. The whole tree is watched at once: `watch_dir` adds nothing.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any

from .changes import Changes

COOKIE_PREFIX = ".codexr-tmp-cookie-"
COOKIE_WAIT = 5.0
"""Seconds a drain waits for its cookie (FSEvents' latency is watchdog's 0.01 s by default; a loaded machine)."""

# FSEvents' kFSEventStreamEventFlag MustScanSubDirs, UserDropped, KernelDropped, EventIdsWrapped (FSEvents.h)
DROPPED_FLAGS = 0x1 | 0x2 | 0x4 | 0x8

try:
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers.api import BaseObserver

    _AVAILABLE = True
except ImportError:  # pragma: no cover - installed wherever it is the journal (macOS) and with the test extras
    _AVAILABLE = False


def available() -> bool:
    """True where watchdog is installed."""
    return _AVAILABLE


def _observer() -> Any:
    """This system's watchdog observer; on Darwin its FSEvents emitter also reports dropped events (a `_Lost`)."""
    import sys

    if sys.platform != "darwin":
        from watchdog.observers import Observer

        return Observer()
    from watchdog.observers.fsevents import FSEventsEmitter

    class _Emitter(FSEventsEmitter):
        def events_callback(self, paths: list[bytes], inodes: list[int], flags: list[int], ids: list[int]) -> None:
            if any(f & DROPPED_FLAGS for f in flags):
                self.queue_event(_Lost(self.watch.path))
            super().events_callback(paths, inodes, flags, ids)

    return BaseObserver(_Emitter)


if _AVAILABLE:
    class _Lost(FileSystemEvent):
        """A marker in the event stream: events were dropped before this point."""

        event_type = "codexr-lost"

    class _Collector(FileSystemEventHandler):
        """Gathers the observer's events for the next drain; wakes a drain waiting for its cookie."""

        def __init__(self) -> None:
            self.cond = threading.Condition()
            self.events: list[FileSystemEvent] = []
            self.cookies: set[str] = set()

        def on_any_event(self, event: FileSystemEvent) -> None:
            name = os.path.basename(os.fsdecode(event.src_path))
            with self.cond:
                if name.startswith(COOKIE_PREFIX):
                    if event.event_type == "created":
                        self.cookies.add(name)
                        self.cond.notify_all()
                    return
                self.events.append(event)


class WatchdogJournal:
    """One observer over a workspace's whole tree."""

    def __init__(self, root: str) -> None:
        if not _AVAILABLE:
            raise OSError("watchdog is not installed")
        self.root = os.path.realpath(root)
        self._collector = _Collector()
        self._observer = _observer()
        self._observer.schedule(self._collector, self.root, recursive=True)
        self._observer.start()

    def watch_dir(self, rel_dir: str) -> None:
        """Nothing to add: the observer watches the whole tree from its start."""

    def drain(self) -> Changes:
        """Everything reported before this call (flushed by a cookie), as a capture needs it."""
        out = Changes()
        if not self._flush():
            out.structural = out.lost = True
        with self._collector.cond:
            events, self._collector.events = self._collector.events, []
        if not self._observer.is_alive():
            out.structural = out.lost = True
        for ev in events:
            self._classify(ev, out)
        return out

    def _classify(self, ev: FileSystemEvent, out: Changes) -> None:
        if ev.event_type == "codexr-lost":
            out.structural = out.lost = True
            return
        if ev.event_type in ("opened", "closed_no_write"):
            return  # a read (ours too): nothing changed
        paths = [p for p in (ev.src_path, ev.dest_path) if p]
        for raw in paths:
            rel = self._rel(os.fsdecode(raw))
            if rel is None:
                out.structural = out.lost = True
                continue
            out.paths.add(rel)
            if ev.is_directory:
                if ev.event_type != "modified":  # a listing that changed is told by its entries' own events
                    out.structural = True
            else:
                out.files.add(rel)  # a file created, changed, removed or renamed: look at it again

    def _rel(self, path: str) -> str | None:
        """`path` relative to the root ("" for the root itself; None: outside it)."""
        if path == self.root:
            return ""
        if not path.startswith(self.root + os.sep):
            return None
        return path[len(self.root) + 1:]

    def _flush(self) -> bool:
        """Wait until the observer has reported everything before now (a cookie of ours came through)."""
        name = f"{COOKIE_PREFIX}{os.urandom(6).hex()}"
        path = os.path.join(self.root, name)
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
        except OSError:
            return False
        try:
            with self._collector.cond:
                seen = self._collector.cond.wait_for(lambda: name in self._collector.cookies, COOKIE_WAIT)
                self._collector.cookies.discard(name)
            return bool(seen)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(path)

    def reset(self) -> None:
        """Start over before a full walk: what was reported so far is the walk's to see."""
        with self._collector.cond:
            self._collector.events = []

    def close(self) -> None:
        """Stop the observer and its thread."""
        with contextlib.suppress(Exception):
            self._observer.stop()
            self._observer.join(timeout=5)
