"""A change monitor that outlives commands (like git's fsmonitor--daemon): the protocol, the client, and the check
a capture makes from its answer instead of lstat'ing every file the saved walk saw.

The monitor (monitor_daemon.py) watches one workspace with inotify and answers one question only: "what changed
since token T", with a fresh token; the only other request it takes is EXIT (to make room for another workspace's
monitor). It never runs a command. A capture asks before it looks at anything (so a
change made while it works is in the next answer), and binds the fresh token to the walk state it leaves
(`cache/<wskey>.mon`). The next capture, in any process, asks with that token; any doubt — no monitor, no answer
within TIMEOUT, an unknown token (the monitor restarted or forgot it), a lost event (overflow), a directory that
changed in a directory the walk listed, a garbage answer — means the full check of walkstate.py, as without a
monitor. The socket and its peer checks are the launcher's (monitor_launch.py): this module only talks to a
socket it was handed, through a `verify` that says whether the peer may be believed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..dirfd import DirCache, DirChanged, SymlinkInPath
from ..fsutil import atomic_write
from ..manifest import valid_key
from ..records import record
from ..scope import listing_digest
from ..stamps import stat_key
from .changes import Changes
from .walkstate import (
    DIGEST,
    KEY,
    Check,
    WalkState,
    listed_moves,
    listed_names,
    look_unwatched,
    note_moves,
    seen_keys,
    there_before,
    unpack_key,
)

if TYPE_CHECKING:
    import _socket

VERSION = 1
TIMEOUT = 0.5  # seconds a capture waits for an answer before it checks on its own
MAX_ANSWER = 16 << 20  # bytes; the monitor reports "lost" long before (monitor_daemon.MAX_PATHS)
MAX_CHANGED = 5000  # more reported paths than this: the full check is as cheap, and surely right


class ChangeSource(Protocol):
    """What a capture asks (MonitorClient, or the app's launcher around it)."""

    def ask(self, root: str, since: str | None) -> Answer | None:
        """The answer about workspace `root` since token `since`, or None."""


@record(frozen=True)
class Answer:
    """The monitor's reply: a fresh token, and what changed since the asked one (None: unknown token, or none)."""

    token: str
    changes: Changes | None


@record(frozen=True)
class Asked:
    """An answer as a capture got it: `identity` names the saved walk file its token was bound to (None: no token),
    `snapshot` the snapshot of the walk the binding capture saved."""

    answer: Answer
    identity: list[object] | None
    snapshot: str | None = None


def encode_request(root: str, since: str | None) -> bytes:
    """One request line."""
    return json.dumps({"v": VERSION, "root": root, "since": since}).encode() + b"\n"


def decode_request(line: bytes) -> tuple[str, str | None] | None:
    """(root, since) of a request line, or None when it is not one."""
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("v") != VERSION or not isinstance(doc.get("root"), str):
        return None
    since = doc.get("since")
    if since is not None and not isinstance(since, str):
        return None
    return doc["root"], since


EXIT = json.dumps({"v": VERSION, "exit": True}).encode() + b"\n"
"""The request to stop answering and exit (a monitor over the per-user bound makes room, monitor_launch.py)."""
EXITING = json.dumps({"v": VERSION, "exiting": True}).encode() + b"\n"
"""The monitor's reply to EXIT, sent before it stops: it answers nothing after it."""


def is_exit(line: bytes) -> bool:
    """Whether a request line is EXIT."""
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return False
    return isinstance(doc, dict) and doc.get("v") == VERSION and doc.get("exit") is True


def encode_answer(root: str, token: str, changes: Changes | None) -> bytes:
    """One answer line."""
    doc: dict[str, object] = {"v": VERSION, "root": root, "token": token, "known": changes is not None}
    if changes is not None:
        doc.update(files=sorted(changes.files), paths=sorted(changes.paths), structural=changes.structural,
                   lost=changes.lost)
    return json.dumps(doc).encode() + b"\n"


def _paths(value: object) -> set[str] | None:
    if not isinstance(value, list) or not all(isinstance(p, str) and (p == "" or valid_key(p)) for p in value):
        return None
    return set(value)


def decode_answer(line: bytes, root: str) -> Answer | None:
    """An answer about `root`, checked field by field (None: garbage, or about another workspace)."""
    try:
        doc = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("v") != VERSION or doc.get("root") != root:
        return None
    token = doc.get("token")
    if not isinstance(token, str) or not token or len(token) > 200:
        return None
    if doc.get("known") is not True:
        return Answer(token, None)
    files, paths = _paths(doc.get("files")), _paths(doc.get("paths"))
    structural, lost = doc.get("structural"), doc.get("lost")
    if files is None or paths is None or not isinstance(structural, bool) or not isinstance(lost, bool):
        return None
    if not files <= paths:
        return None
    return Answer(token, Changes(files=files, structural=structural, paths=paths, lost=lost))


class MonitorClient:
    """Asks the monitor of one workspace at `socket_path`; `verify(sock)` vouches for the peer before anything is
    sent (same user, same confinement: the caller's rule)."""

    def __init__(self, socket_path: str, verify: Callable[[_socket.socket], bool], timeout: float = TIMEOUT) -> None:
        self.socket_path = socket_path
        self.verify = verify
        self.timeout = timeout

    def ask(self, root: str, since: str | None) -> Answer | None:
        """The monitor's answer, or None (no monitor, a peer not vouched for, no answer in time, garbage)."""
        data = self._exchange(encode_request(root, since))
        return decode_answer(data, root) if data is not None else None

    def tell_exit(self) -> bool:
        """Ask the monitor to exit once it has answered what it is answering; whether it said it will."""
        return self._exchange(EXIT) == EXITING

    def _exchange(self, request: bytes) -> bytes | None:
        """Send one request line to a vouched-for peer; its one reply line (None: no monitor, or no reply)."""
        import _socket  # the C module: `socket`'s import (enum, selectors) was ~4 ms of every capture

        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM | _socket.SOCK_CLOEXEC)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
            if not self.verify(sock):
                return None
            sock.sendall(request)
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    return None
                data += chunk
                if len(data) > MAX_ANSWER:
                    return None
            return data
        except OSError:  # refused, missing, timed out
            return None
        finally:
            sock.close()


# ----------------------------------------------------------------------- the token bound to a saved walk


def walk_identity(index_file: Path) -> list[object] | None:
    """What names the saved walk on disk without decoding it: the index file's stat and its first 64 bytes, which
    hold the walk section's length and checksum (a rewrite is another file: atomic_write renames a new one in)."""
    try:
        fd = os.open(index_file, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        head = os.pread(fd, 64, 0)
        return [list(stat_key(os.fstat(fd))), head.hex()]
    except OSError:
        return None
    finally:
        os.close(fd)


def bind(path: Path, token: str, index_file: Path, snapshot: str,
         expected: list[object] | None = None) -> list[object] | None:
    """Remember that `token` was issued before the look that the walk saved for `snapshot` records (the file as it is
    now; a walk another capture saved in between has another snapshot, so the binding is then never used). With
    `expected`, only if the file is still that one (a capture that did not write the walk binds the one it knows).
    Returns the identity bound (None: none, the binding forgotten)."""
    identity = walk_identity(index_file)
    if identity is None or (expected is not None and identity != expected):
        forget(path)
        return None
    try:
        atomic_write(path, json.dumps({"token": token, "walk": identity, "snapshot": snapshot}).encode(), sync=False)
    except OSError:
        return None
    return identity


def bound_token(path: Path, identity: list[object] | None) -> tuple[str, str] | None:
    """The token bound to the saved walk of this identity, with the snapshot the binding capture saved it for."""
    if identity is None:
        return None
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("token"), str) or not isinstance(doc.get("snapshot"), str):
        return None
    return (doc["token"], doc["snapshot"]) if doc.get("walk") == identity else None


def forget(path: Path) -> None:
    """No token vouches for the saved walk."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


# ----------------------------------------------------------------------- the check from an answer


def check_since(dirs: DirCache, state: WalkState, changes: Changes) -> Check | None:
    """What walkstate.check would find, looking only at what the monitor reported since the walk's look (None:
    doubt, so the full check).

    Every change after the token is reported; the state's look came after the token was issued, so a path the
    monitor did not name still has the stat the state holds — unless the state never trusted it (a racy key),
    and those are looked at as the full check does. A reported path's directory, if the walk listed it, must list
    what it listed (a temporary file renamed over one, as a restore or an editor saves), or that listing plus files
    made and less files the walk saw gone, which are named as the full check names them (a directory made or
    removed there, or an entry that changed its type, moves it otherwise: the full check decides);
    one in a directory the walk did not list is ignored (ignored trees, build outputs), as the full check would,
    unless it is a covered path there (`unwatched`), and those are all looked at anyway.
    """
    if changes.lost or len(changes.paths) > MAX_CHANGED:
        return None
    listed = set(state.dirs[1])
    moved_dirs: set[str] = set()
    look: set[str] = set()
    for p in changes.paths:
        parent = p.rpartition("/")[0]
        if p == "" or p in listed:
            return None  # a listed directory itself: created, removed, renamed or its attributes changed
        if parent not in listed:
            continue
        # Its directory is looked at too (one fstat when it did not move): its listing must stand, or be the saved
        # one plus the files made and less the walk's files gone, which names each (a file the walk saw, removed).
        moved_dirs.add(parent)
        if p in changes.files and p in state.seen_paths():  # the groups decoded only when a listed file is named
            look.add(p)
    if changes.structural and not (changes.paths - changes.files):
        return None  # structural, but said of no path
    out = Check(Changes(), {})
    position = {rel: i for i, rel in enumerate(state.dirs[1])} if moved_dirs else {}
    try:
        for rel in moved_dirs:
            i = position[rel]
            fd = dirs.dir_fd(rel)
            now = stat_key(os.fstat(fd))
            if now == unpack_key(KEY.unpack_from(state.dirs[2], i * KEY.size)):
                continue  # an untrusted key never equals
            # Listed again, as the full check does: the same names of the same types leave every verdict standing
            # (a restore's staged writes moved each directory it wrote in, and made its next check stat all
            # 100,000 files, ~300 ms, instead of the answer's few).
            entries = listed_names(fd)
            saved = state.listings[i * DIGEST:(i + 1) * DIGEST]
            if listing_digest(entries) == saved:
                out.dir_keys[rel] = now
                continue
            # Or the saved listing plus the files made, less the walk's files gone, exactly as the full check takes
            # it (walkstate.listed_moves): a file made or removed stat'ed every file (~0.3 s at 100,000 files).
            there = functools.partial(there_before, fd, state.looked_ns) if state.looked_ns else None
            moved = listed_moves(entries, saved, state.group(rel), there)
            if moved is None:
                return None
            note_moves(out, rel, *moved)
            prefix = f"{rel}/" if rel else ""
            look.difference_update(prefix + name for name in moved[1])  # the gone: nothing left there to stat
        keys = seen_keys(state, look) if look else {}
        look.update(state.untrusted())  # untrusted keys (None here) never match: looked at every time
        for p in look:
            now = stat_key(dirs.lstat(p))
            if now != keys.get(p):
                out.changes.files.add(p)
                out.changes.paths.add(p)
                out.keys[p] = now
        look_unwatched(dirs, state, out)  # as walkstate.check does
        if out.changes.structural:
            return None
    except (OSError, SymlinkInPath, DirChanged, KeyError):
        return None  # gone although the monitor said nothing of its directory (a race), or odd: full check
    return out
