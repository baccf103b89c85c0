"""The change journal from inotify (journal.py's `Journal` on Linux): lets a capture in a long-running session skip
the walk. The change monitor's process (monitor_daemon.py) reads its raw events too.

Every directory the capture walks gets a watch *before* it is listed, so no change after the
listing is missed. A capture that sees no events reuses the previous result; file events only
say where to look again (each named path is lstat'ed and classified as the walk would). Anything
about directories (created, removed, renamed), a queue overflow, a watch that could not be
added, or a change to which residue files are kept falls back to the full walk.
A restore's own writes are absorbed (door.ChangeDetector.absorb); its safety capture may use
the journal because every write is re-checked against the file's lstat before it happens.
"""

from __future__ import annotations

import contextlib
import os

from .changes import Changes

try:  # Linux only; elsewhere every capture walks.
    from inotify_simple import INotify
    from inotify_simple import flags as _F

    _CONTENT = _F.MODIFY | _F.ATTRIB | _F.CLOSE_WRITE
    _STRUCTURE = _F.CREATE | _F.DELETE | _F.MOVED_FROM | _F.MOVED_TO | _F.DELETE_SELF | _F.MOVE_SELF
    _MASK = _CONTENT | _STRUCTURE | _F.DONT_FOLLOW | _F.ONLYDIR | _F.EXCL_UNLINK
    _AVAILABLE = True
except (ImportError, OSError):  # pragma: no cover - non-Linux
    _AVAILABLE = False


class ChangeJournal:
    """inotify watches over one workspace's walked directories."""

    def __init__(self, root: str) -> None:
        if not _AVAILABLE:
            raise OSError("inotify is not available on this system")
        self.root = root
        self._ino = INotify(nonblocking=True)
        self._wd_dir: dict[int, str] = {}
        self._dir_wd: dict[str, int] = {}
        self.broken = False

    @staticmethod
    def available() -> bool:
        """True where inotify can be used."""
        return _AVAILABLE

    def watch_dir(self, rel_dir: str) -> None:
        """Watch a directory before it is listed; a failure (watch limit) disables the fast path."""
        if rel_dir in self._dir_wd:
            return
        path = os.path.join(self.root, rel_dir) if rel_dir else self.root
        try:
            wd = self._ino.add_watch(path, _MASK)
        except OSError:
            self.broken = True
            return
        self._wd_dir[wd] = rel_dir
        self._dir_wd[rel_dir] = wd

    def drain(self) -> Changes:
        """Read every pending event without blocking."""
        out = Changes(structural=self.broken, lost=self.broken)
        while True:
            try:
                events = self._ino.read(timeout=0)
            except OSError:
                out.structural = out.lost = True
                break
            if not events:
                break
            for ev in events:
                if ev.mask & _F.Q_OVERFLOW:
                    out.structural = out.lost = True
                    continue
                rel_dir = self._wd_dir.get(ev.wd)
                if ev.mask & _F.IGNORED:
                    if rel_dir is not None:
                        self._wd_dir.pop(ev.wd, None)
                        self._dir_wd.pop(rel_dir, None)
                    out.structural = out.lost = True
                    continue
                if rel_dir is None:
                    out.structural = out.lost = True
                    continue
                path = f"{rel_dir}/{ev.name}" if rel_dir and ev.name else (ev.name or rel_dir)
                out.paths.add(path)
                if ev.mask & (_F.ISDIR | _F.DELETE_SELF | _F.MOVE_SELF) or not ev.name:
                    out.structural = True
                    continue
                out.files.add(path)  # a file created, changed, removed or renamed: look at it again
        return out

    def read_events(self) -> list[tuple[str | None, int, str]]:
        """Every pending event without blocking, as (watched directory or None if unknown, mask, name): for the change
        monitor (monitor_daemon.py), which classifies them itself. A read error is reported as an overflow."""
        out: list[tuple[str | None, int, str]] = []
        while True:
            try:
                events = self._ino.read(timeout=0)
            except OSError:
                out.append((None, int(_F.Q_OVERFLOW), ""))
                return out
            if not events:
                return out
            for ev in events:
                rel_dir = self._wd_dir.get(ev.wd)
                if ev.mask & _F.IGNORED and rel_dir is not None:
                    self._wd_dir.pop(ev.wd, None)
                    self._dir_wd.pop(rel_dir, None)
                out.append((rel_dir, int(ev.mask), ev.name))

    def reset(self) -> None:
        """Start over before a full walk: a renamed directory keeps its watch under the old name."""
        with contextlib.suppress(OSError):
            self._ino.close()
        self._ino = INotify(nonblocking=True)
        self._wd_dir.clear()
        self._dir_wd.clear()
        self.broken = False

    def close(self) -> None:
        """Release the inotify descriptor."""
        with contextlib.suppress(OSError):
            self._ino.close()
