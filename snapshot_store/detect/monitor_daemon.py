"""The change monitor of one workspace (like git's fsmonitor--daemon): inotify over every directory, and a socket
that answers "what changed since token T" (monitor.py's protocol). It never runs a command and reads no file.

Correctness first, as a missed change would be a snapshot missing a file's content: every directory gets its
watch before it is listed; a directory created later gets its watch, then is listed (its entries reported as
changed) before any later token is issued; events are read right before each answer, so a change finished
before the question is in the answer. A queue overflow, a failed watch, a renamed or removed directory (its
watch would report under a stale name) make every token issued so far unknown and start the watches over; an
unknown token is answered "unknown", and the capture checks on its own. Tokens name the monitor's run, so a
restarted monitor never vouches for an earlier one's token. For the same reason a monitor may exit at any moment
between two answers (idle, asked to make room, killed): the next capture finds no monitor, or one that does not
know its token, and checks every file.

The socket, its directory and who may ask are the launcher's (monitor_launch.py): `serve` takes a bound,
listening socket and a `verify(conn)` for each connection.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import select
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING

from .changes import Changes
from .inotify import ChangeJournal
from .monitor import EXITING, decode_request, encode_answer, is_exit

if TYPE_CHECKING:
    import _socket  # the peer check's type (socket.socket is one)

try:
    from inotify_simple import flags as _F
except ImportError:  # pragma: no cover - non-Linux: ChangeJournal refuses first
    _F = None

LIVE_TOKENS = 16  # tokens answered for at once; an older one is "unknown" (its asker checks on its own)
MAX_PATHS = 20000  # changed paths kept per token before it turns into "lost"
SKIP_DIRS = frozenset({".git"})  # never captured, and written by every git command
READ_LIMIT = 4096  # bytes of a request
IDLE_TICK = 10.0  # seconds between looks at whether the socket is still this monitor's


class Monitor:
    """The watches and the changes since each live token."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.run_id = secrets.token_hex(8)
        self.seq = 0
        self.journal = ChangeJournal(root)
        self.live: OrderedDict[str, Changes] = OrderedDict()
        # Not kept here: which files have other names. A write through another name raises no event for this one;
        # the capture looks at every hard-linked file its walk found each time (fastpath.unwatched_after_walk).
        self.rescan()

    def rescan(self) -> None:
        """Start over: new watches on every directory (each before it is listed); every earlier token is lost."""
        for changes in self.live.values():
            changes.lost = changes.structural = True
        self.journal.reset()
        self._watch_tree("", [])
        if self.journal.broken:  # a watch could not be added (the user's watch limit): this monitor cannot answer
            raise OSError("inotify: a directory could not be watched")

    def _watch_tree(self, top: str, found: list[str]) -> None:
        """Watch `top` and every directory below it, each before listing it; entries listed go to `found`."""
        stack = [top]
        while stack:
            rel = stack.pop()
            self.journal.watch_dir(rel)
            path = os.path.join(self.root, rel) if rel else self.root
            try:
                with os.scandir(path) as it:
                    for de in it:
                        child = f"{rel}/{de.name}" if rel else de.name
                        found.append(child)
                        if de.is_dir(follow_symlinks=False) and de.name not in SKIP_DIRS:
                            stack.append(child)
            except OSError:
                continue  # gone meanwhile: its parent's watch reports that

    def token(self) -> str:
        """A new token: changes from now on are kept for it."""
        self.seq += 1
        token = f"{self.run_id}:{self.seq}"
        self.live[token] = Changes()
        while len(self.live) > LIVE_TOKENS:
            self.live.popitem(last=False)
        return token

    def pump(self) -> None:
        """Read every pending event into the live tokens' changes."""
        assert _F is not None
        added: list[str] = []
        for rel_dir, mask, name in self.journal.read_events():
            if mask & _F.Q_OVERFLOW or rel_dir is None or (mask & _F.IGNORED):
                self._lose()
                return
            if mask & (_F.DELETE_SELF | _F.MOVE_SELF | _F.UNMOUNT):
                self._lose()  # a watched directory went or moved: its watch (and those below) name it no more
                return
            path = f"{rel_dir}/{name}" if rel_dir and name else (name or rel_dir)
            if not name:
                self._add(path, False)  # the watched directory itself (its attributes)
                continue
            if mask & _F.ISDIR:
                if mask & (_F.MOVED_FROM | _F.MOVED_TO | _F.DELETE):
                    self._lose()  # watches below it would report under a stale name
                    return
                self._add(path, False)
                if mask & _F.CREATE and name not in SKIP_DIRS:
                    self._watch_tree(path, added)
                continue
            self._add(path, True)
        if self.journal.broken:
            self._lose()
            return
        for p in added:  # made before their directory's watch: reported, so the asker looks
            self._add(p, True)

    def _add(self, path: str, file: bool) -> None:
        for changes in self.live.values():
            if changes.lost:
                continue
            changes.paths.add(path)
            if file:
                changes.files.add(path)
            else:
                changes.structural = True
            if len(changes.paths) > MAX_PATHS:
                changes.lost = changes.structural = True
                changes.paths.clear()
                changes.files.clear()

    def _lose(self) -> None:
        self.rescan()

    def answer(self, since: str | None) -> tuple[str, Changes | None]:
        """Changes since `since` (None: unknown) and a fresh token; events are read first."""
        self.pump()
        changes = self.live.get(since) if since is not None else None
        if changes is not None and changes.lost:
            changes = None
        return self.token(), changes

    def close(self) -> None:
        self.journal.close()


def serve(root: str, listener: socket.socket, verify: Callable[[_socket.socket], bool], idle: float,
          still_mine: Callable[[], bool] = lambda: True, asked: Callable[[], None] = lambda: None) -> None:
    """Answer on `listener` until nobody asked for `idle` seconds, `still_mine()` says its socket is gone, or a
    verified peer asks it to exit (between two answers: one at a time). The watches are in place before the first
    answer; a workspace that went, or watches that cannot all be added, end it too (OSError). `asked()` runs as
    each answer is made, before it is sent (see `_handle`)."""
    monitor = Monitor(root)
    listener.setblocking(False)
    last = time.monotonic()
    try:
        while True:
            left = idle - (time.monotonic() - last)
            if left <= 0:
                return
            ready, _w, _x = select.select([listener], [], [], min(left, IDLE_TICK))
            if not ready:
                if not still_mine():
                    return
                monitor.pump()  # keep the queue short while idle (an overflow only costs a rescan)
                continue
            try:
                conn, _addr = listener.accept()
            except (BlockingIOError, InterruptedError):
                continue
            last = time.monotonic()
            with contextlib.closing(conn):
                if _handle(monitor, conn, verify, asked) is None:
                    return
    finally:
        monitor.close()


def _handle(monitor: Monitor, conn: socket.socket, verify: Callable[[_socket.socket], bool],
            asked: Callable[[], None] = lambda: None) -> bool | None:
    """Answer one connection: whether a question was answered (None: asked to exit).

    `asked()` (the launcher's stamp of when this monitor last answered, by which the least recently asked one is
    sent away to make room) runs before the answer leaves: once stamped after it, a monitor descheduled between the
    two could be stamped after a later answer of another monitor, and the wrong one sent away (a test under load saw
    it)."""
    conn.setblocking(True)
    conn.settimeout(2.0)
    try:
        if not verify(conn):
            return False
        data = b""
        while b"\n" not in data and len(data) < READ_LIMIT:
            chunk = conn.recv(READ_LIMIT)
            if not chunk:
                return False
            data += chunk
        line = data.split(b"\n", 1)[0]
        if is_exit(line):
            with contextlib.suppress(OSError):
                conn.sendall(EXITING)
            return None
        request = decode_request(line)
        if request is None or request[0] != monitor.root:
            return False
        token, changes = monitor.answer(request[1])
        asked()
        conn.sendall(encode_answer(monitor.root, token, changes))
        return True
    except OSError:
        return False
