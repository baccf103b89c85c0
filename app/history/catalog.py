"""Every Codex session on this machine: discovery, ids, fork chains, and codexr's sidecars, read-only.

A session (thread) is one or more rollout files: its own, plus — in paginated mode — the history it
inherits through `history_base` (a fork's parent up to a byte offset, or its own earlier segment after a
`thread/revert`). Nothing here writes to `$CODEX_HOME/sessions` or `archived_sessions`.
"""

from __future__ import annotations

import bisect
import datetime as dt
import json
import os
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from snapshot_store.records import asdict, record

from ..shared.vocab import CLIENT_NAME, source_label
from .rollout import Digest, Entry, Skipped

SESSIONS = "sessions"
ARCHIVED = "archived_sessions"
_NAME = re.compile(r"^rollout-(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)-([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                   r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?:_[0-9A-Za-z-]+)?\.jsonl(\.zst)?$")
MAX_CHAIN = 256


class HistoryError(Exception):
    """A user-facing history problem (unknown or ambiguous id...): one line, exit 2."""


# The classes below that need no asdict() are plain classes with __slots__, the others records
# (snapshot_store/records.py): each @dataclass costs ~1 ms to create when the module loads, which every history
# command pays (bench/HISTORY.md, the history bench's second pass).


class RolloutFile:
    """One rollout file found on disk, with the stat that tells whether a cached digest is still good."""

    __slots__ = ("archived", "mtime_ns", "name_ts", "path", "size", "thread_id")

    def __init__(self, path: str, thread_id: str, archived: bool, size: int, mtime_ns: int, name_ts: str) -> None:
        self.path, self.thread_id, self.archived = path, thread_id, archived
        self.size, self.mtime_ns, self.name_ts = size, mtime_ns, name_ts


@record
class FileSummary:
    """What listing and fork resolution need from one file (cheap to keep in the index)."""

    path: str
    archived: bool
    size: int
    mtime_ns: int
    thread_id: str
    meta: dict[str, Any]
    user_offsets: list[int]
    first_prompt: str
    last_at: str
    skipped: dict[str, int]
    sidecar: bool = False

    @staticmethod
    def of(f: RolloutFile, d: Digest) -> FileSummary:
        users = d.prompts()
        return FileSummary(f.path, f.archived, f.size, f.mtime_ns, d.meta.id or f.thread_id, asdict(d.meta),
                           [e.offset for e in users], users[0].text[:300] if users else "", d.last_at,
                           asdict(d.skipped))

    @property
    def created(self) -> str:
        return str(self.meta.get("created") or "")

    @property
    def base(self) -> dict[str, Any] | None:
        b = self.meta.get("history_base")
        return b if isinstance(b, dict) and b.get("thread_id") else None


def discover(home: Path, skipped: Skipped) -> list[RolloutFile]:
    """Rollout files under sessions/ and archived_sessions/; unreadable directories and files are counted."""
    roots = [(home / SESSIONS, False), (home / ARCHIVED, True)]
    out: list[RolloutFile] = []
    for root, is_archived in roots:
        stack = [str(root)]
        while stack:
            d = stack.pop()
            try:
                with os.scandir(d) as it:
                    entries = list(it)
            except FileNotFoundError:
                continue
            except OSError:
                skipped.unreadable += 1
                continue
            plain = {e.name for e in entries}
            for e in entries:
                try:
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                        continue
                    m = _NAME.match(e.name)
                    if m is None or not e.is_file(follow_symlinks=False):
                        continue
                    if m.group(3) and e.name[:-4] in plain:
                        continue  # Codex prefers the plain .jsonl over its compressed sibling
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    skipped.unreadable += 1
                    continue
                out.append(RolloutFile(e.path, m.group(2).lower(), is_archived, st.st_size, st.st_mtime_ns,
                                       m.group(1)))
    return out


def iso(ns: int) -> str:
    """A file time as ISO-8601 UTC (how Codex writes its own timestamps)."""
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# ----------------------------------------------------------------------------------------- sidecars


class SidecarInfo:
    """What codexr's own sidecar says about a thread (codexr threads only)."""

    __slots__ = ("forked_from", "history", "snapshots", "thread_id", "turn_pre")

    def __init__(self, thread_id: str, snapshots: int, turn_pre: dict[str, bool], forked_from: str | None,
                 history: list[dict[str, Any]]) -> None:
        self.thread_id, self.snapshots, self.turn_pre = thread_id, snapshots, turn_pre
        self.forked_from, self.history = forked_from, history


def read_sidecars(home: Path) -> dict[str, SidecarInfo]:
    """codexr's thread sidecars (`file_snapshots/refs/threads/<id>.json`); damaged ones are ignored."""
    out: dict[str, SidecarInfo] = {}
    d = home / "file_snapshots" / "refs" / "threads"
    try:
        names = os.listdir(d)
    except OSError:
        return out
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            doc = json.loads((d / name).read_bytes())
            turns = doc.get("turns") or []
            info = SidecarInfo(str(doc["thread_id"]), sum(1 for t in turns if t.get("pre")),
                               {str(t.get("turn_id")): bool(t.get("pre")) for t in turns},
                               doc.get("forked_from"), [h for h in doc.get("history") or [] if isinstance(h, dict)])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        out[info.thread_id.lower()] = info
    return out


# ----------------------------------------------------------------------------------------- sessions


class Session:
    """One thread: its files (newest segment is the head) and where its history comes from."""

    __slots__ = ("archived", "files", "forked_at", "id", "inherited_prompts", "own_prompts", "sidecar")

    def __init__(self, id: str, files: list[FileSummary], archived: bool, sidecar: SidecarInfo | None = None,
                 inherited_prompts: int = 0, forked_at: int | None = None) -> None:
        self.id, self.files, self.archived, self.sidecar = id, files, archived, sidecar
        self.inherited_prompts = inherited_prompts
        self.own_prompts = 0  # set with inherited_prompts by Catalog.build
        self.forked_at = forked_at  # the parent's prompt count the fork starts after

    def __repr__(self) -> str:
        return f"Session({self.id!r}, {len(self.files)} files, archived={self.archived})"

    @property
    def head(self) -> FileSummary:
        return self.files[-1]

    @property
    def meta(self) -> dict[str, Any]:
        return self.head.meta

    @property
    def cwd(self) -> str:
        return str(self.files[0].meta.get("cwd") or self.head.meta.get("cwd") or "")

    @property
    def last_activity(self) -> str:
        return iso(max(f.mtime_ns for f in self.files))

    @property
    def mtime_ns(self) -> int:
        return max(f.mtime_ns for f in self.files)

    @property
    def client(self) -> str:
        """codexr when codexr ran it (its sidecar, or codexr as the SDK originator), else codex."""
        if self.sidecar is not None or any(f.meta.get("originator") == CLIENT_NAME for f in self.files):
            return CLIENT_NAME
        return "codex"

    @property
    def source(self) -> str:
        return str(self.files[0].meta.get("source") or "")

    @property
    def source_label(self) -> str:
        """Who started it, worded as everywhere else (app/shared/vocab.py)."""
        return source_label(self.source, self.files[0].meta.get("originator"))

    @property
    def forked_from(self) -> str | None:
        v = self.files[0].meta.get("forked_from_id") or (self.sidecar.forked_from if self.sidecar else None)
        return str(v) if v else None


class Segment:
    """A piece of a session's history: entries of one file before `end` (None: the whole file)."""

    __slots__ = ("end", "own", "path", "thread_id")

    def __init__(self, path: str, thread_id: str, end: int | None, own: bool) -> None:
        self.path, self.thread_id, self.end = path, thread_id, end
        self.own = own  # the session's own file (else inherited from a parent)


class Catalog:
    """All sessions, with fork/segment links resolved over file summaries."""

    __slots__ = ("_chains", "by_path", "home", "sessions", "skipped")

    def __init__(self, home: Path, skipped: Skipped | None = None) -> None:
        self.home = home
        self.sessions: dict[str, Session] = {}
        self.by_path: dict[str, FileSummary] = {}
        self.skipped = skipped if skipped is not None else Skipped()
        self._chains: dict[str, list[Segment]] = {}

    @staticmethod
    def build(home: Path, summaries: Iterable[FileSummary], skipped: Skipped) -> Catalog:
        cat = Catalog(home, skipped=skipped)
        groups: dict[str, list[FileSummary]] = {}
        for s in summaries:
            cat.by_path[s.path] = s
            groups.setdefault(s.thread_id.lower(), []).append(s)
        sides = read_sidecars(home)
        for tid, files in groups.items():
            files.sort(key=lambda f: (f.created, f.path))
            cat.sessions[tid] = Session(tid, files, all(f.archived for f in files), sides.get(tid))
        for sess in cat.sessions.values():
            chain = cat.chain(sess)
            inherited = [s for s in chain if not s.own]
            sess.inherited_prompts = sum(cat._count(s) for s in inherited)
            # every segment as far as a later one cut it (a revert starts a new file that cuts the one before):
            # the prompts `show` prints
            sess.own_prompts = sum(cat._count(s) for s in chain if s.own)
            if sess.forked_from and inherited:
                sess.forked_at = sess.inherited_prompts
        return cat

    def _count(self, seg: Segment) -> int:
        f = self.by_path.get(seg.path)
        if f is None:
            return 0
        return len(f.user_offsets) if seg.end is None else bisect.bisect_left(f.user_offsets, seg.end)

    def _base_file(self, thread_id: str, before: FileSummary) -> FileSummary | None:
        """The file a `history_base` names: the thread's newest file created before `before`."""
        sess = self.sessions.get(thread_id.lower())
        if sess is None:
            return None
        cands = [f for f in sess.files if f.path != before.path and (f.created, f.path) <= (before.created,
                                                                                           before.path)]
        return cands[-1] if cands else None

    def chain(self, sess: Session) -> list[Segment]:
        """The session's history in order: inherited pieces (parents, earlier segments) then its own file.

        Built once per session (list, search and show each walk every session's chain: ~10 ms per walk of
        1,000 sessions); the list returned is shared, not to be changed.
        """
        known = self._chains.get(sess.id)
        if known is not None:
            return known
        out: list[Segment] = [Segment(sess.head.path, sess.id, None, True)]
        cur = sess.head
        seen = {cur.path}
        while cur.base is not None and len(out) < MAX_CHAIN:
            base = cur.base
            nxt = self._base_file(str(base["thread_id"]), cur)
            if nxt is None or nxt.path in seen:
                break
            end = base.get("end_byte_offset")
            own = nxt.thread_id.lower() == sess.id
            out.append(Segment(nxt.path, nxt.thread_id.lower(), int(end) if isinstance(end, int) else None, own))
            seen.add(nxt.path)
            cur = nxt
        out.reverse()
        self._chains[sess.id] = out
        return out

    def forks_of(self, thread_id: str) -> list[Session]:
        return [s for s in self.sessions.values() if s.forked_from and s.forked_from.lower() == thread_id]

    def resolve(self, ident: str) -> Session:
        """A session by UUID or unambiguous prefix of 4+ characters (never a list index)."""
        key = ident.strip().lower()
        if len(key) < 4 or not re.fullmatch(r"[0-9a-f-]+", key):
            raise HistoryError(f"{ident!r} is not a session id (give a UUID or 4+ of its first characters)")
        if key in self.sessions:
            return self.sessions[key]
        hits = sorted(k for k in self.sessions if k.startswith(key))
        if not hits:
            raise HistoryError(f"no session {ident!r} in {self.home / SESSIONS} or {self.home / ARCHIVED}")
        if len(hits) > 1:
            shown = ", ".join(hits[:8]) + (", …" if len(hits) > 8 else "")
            raise HistoryError(f"session id {ident!r} is ambiguous: it matches {len(hits)} sessions: {shown}")
        return self.sessions[hits[0]]


# ----------------------------------------------------------------------------------------- conversations


class Prompt:
    """One prompt of a conversation with everything that followed it."""

    __slots__ = ("entries", "inherited", "number", "thread_id")

    def __init__(self, number: int, entries: list[Entry], thread_id: str, inherited: bool) -> None:
        self.number, self.entries, self.inherited = number, entries, inherited
        self.thread_id = thread_id  # the session whose file holds it

    @property
    def user(self) -> Entry | None:
        return self.entries[0] if self.entries and self.entries[0].kind == "user" else None


def conversation(cat: Catalog, sess: Session, load: Callable[[str], Digest]) -> list[Prompt]:
    """The session's prompts, the inherited ones first (resolved through the fork chain)."""
    prompts: list[Prompt] = []
    preamble: list[Entry] = []
    for seg in cat.chain(sess):
        d = load(seg.path)
        for e in d.entries:
            if seg.end is not None and e.offset >= seg.end:
                break
            if e.kind == "user":
                prompts.append(Prompt(len(prompts) + 1, [e], seg.thread_id, not seg.own))
            elif prompts:
                prompts[-1].entries.append(e)
            else:
                preamble.append(e)
    if preamble:
        prompts.insert(0, Prompt(0, preamble, sess.id, False))
    return prompts


def rewind_marks(sess: Session) -> list[dict[str, Any]]:
    """codexr's rewinds and redos that touched this thread, from the sidecars, oldest first."""
    out: list[dict[str, Any]] = []
    side = sess.sidecar
    if side is None:
        return out
    for h in side.history:
        ev = h.get("event")
        at = h.get("at")
        when = iso(int(float(at) * 1e9)) if isinstance(at, int | float) else ""
        if ev == "rewind":
            out.append({"event": "rewind", "at": when, "from_thread": h.get("from"),
                        "to_prompt": h.get("to_prompt"), "mode": h.get("mode")})
        elif ev == "redo":
            out.append({"event": "redo", "at": when, "to_thread": h.get("to")})
        elif ev == "redone":
            out.append({"event": "redone", "at": when, "from_thread": h.get("from")})
    return out
