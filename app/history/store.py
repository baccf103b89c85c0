"""The history of every Codex session under a CODEX_HOME: listing, loading and searching, index or not.

Read-only towards Codex: rollouts are only opened for reading. The index (see index.py) is refreshed
from file sizes and mtimes; when too much changed for a quick refresh, a search scans the rollouts
directly (skipping files whose bytes cannot contain the text) and a background process refreshes the index.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import json
import os
import re
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path

from .catalog import Catalog, FileSummary, RolloutFile, Session, discover
from .index import Index, Row, open_index, split_rowid
from .rollout import Digest, Skipped, parse_bytes, read_rollout, read_zst
from .search import Match, Matcher, excerpt_spans

SYNC_REFRESH_BYTES = 32 * 1024 * 1024  # a search refreshes up to this much changed rollout data itself
BACKGROUND_ENV = "CODEXR_HISTORY_BACKGROUND"  # "0": never start the background index refresh


def same_dir(a: str, b: str) -> bool:
    """Two workspace paths name the same directory (as written, or once symlinks are resolved)."""
    if not a or not b:
        return False
    return os.path.abspath(a) == os.path.abspath(b) or os.path.realpath(a) == os.path.realpath(b)


class Filter:
    """Which sessions a command looks at (plain classes here: a dataclass costs ~1 ms to create at import)."""

    __slots__ = ("archived", "workspace")

    def __init__(self, workspace: str | None = None, archived: bool = False) -> None:
        self.workspace = workspace  # None: every workspace
        self.archived = archived  # include archived sessions

    def __repr__(self) -> str:
        return f"Filter(workspace={self.workspace!r}, archived={self.archived})"

    def keep(self, s: Session) -> bool:
        if s.archived and not self.archived:
            return False
        return self.workspace is None or same_dir(s.cwd, self.workspace)


class SessionHits:
    """A session with the places it matched."""

    __slots__ = ("matches", "session")

    def __init__(self, session: Session, matches: list[Match]) -> None:
        self.session, self.matches = session, matches


class SearchResult:
    """What a search found and what it looked through (an empty result says where it looked)."""

    __slots__ = (
        "files_decoded",
        "hits",
        "roots",
        "scanned_bytes",
        "searched_sessions",
        "skipped",
        "total_sessions",
        "used_index",
    )

    def __init__(self, hits: list[SessionHits], total_sessions: int, searched_sessions: int, roots: list[str],
                 skipped: Skipped, used_index: bool) -> None:
        self.hits = hits
        self.total_sessions = total_sessions  # sessions that matched (before -n)
        self.searched_sessions = searched_sessions
        self.roots, self.skipped, self.used_index = roots, skipped, used_index
        self.files_decoded = 0
        self.scanned_bytes = 0


def _read(path: str) -> bytes | None:
    try:
        if path.endswith(".zst"):
            return read_zst(path)
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


@functools.cache
def _first_line_patterns() -> tuple[re.Pattern[bytes], re.Pattern[bytes]]:
    """cwd and history_base in a session_meta line: compiled by the scan only (an indexed search skips ~1 ms)."""
    return (re.compile(rb'"cwd"\s*:\s*("(?:[^"\\]|\\.)*")'),
            re.compile(rb'"history_base"\s*:\s*\{[^{}]*?"thread_id"\s*:\s*"([0-9A-Fa-f-]+)"'))


def _base_thread(first_line: bytes) -> str | None:
    """The thread a rollout's history continues (its session_meta's history_base), read from the bytes."""
    m = _first_line_patterns()[1].search(first_line)
    return m.group(1).decode().lower() if m else None


def _cwd(first_line: bytes) -> str:
    """The workspace a rollout's first line (its session_meta) names, without decoding the whole line."""
    m = _first_line_patterns()[0].search(first_line)
    if m is None:
        return ""
    try:
        return str(json.loads(m.group(1).decode("utf-8", "replace")))
    except ValueError:
        return ""


def _fresh(row: Row | None, f: RolloutFile) -> bool:
    """The index holds this version of the file (rollouts grow; a rewritten one changes size or mtime)."""
    return row is not None and row.size == f.size and row.mtime_ns == f.mtime_ns


def _needed(cand: set[str], thread_of: dict[str, str], base_of: dict[str, str],
            paths_of: dict[str, list[str]]) -> list[str]:
    """The files whose summaries numbering and fork marks of `cand` need, in discovery order.

    Every file of the candidates' threads, of the threads inheriting from them (forks, directly or through
    other forks) and of every thread any of those inherit from: a set closed under fork chains, so the
    catalog built from it numbers prompts and marks forks as the whole catalog does.
    """
    bases: dict[str, set[str]] = {}
    heirs: dict[str, set[str]] = {}
    for p, b in base_of.items():
        t = thread_of[p]
        if b != t:
            bases.setdefault(t, set()).add(b)
            heirs.setdefault(b, set()).add(t)
    threads = {thread_of[p] for p in cand}
    todo = list(threads)
    while todo:  # the threads inheriting from a candidate's
        for t in heirs.get(todo.pop(), ()):
            if t not in threads:
                threads.add(t)
                todo.append(t)
    todo = list(threads)
    while todo:  # and those all of them inherit from
        for t in bases.get(todo.pop(), ()):
            if t not in threads:
                threads.add(t)
                todo.append(t)
    return [p for t in threads for p in paths_of.get(t, ())]


class HistoryStore:
    """One command's view of the history under `home`."""

    def __init__(self, home: Path, *, use_index: bool = True, background: bool = True) -> None:
        self.home = home
        self.skipped = Skipped()
        self.files = discover(home, self.skipped)
        self.by_path = {f.path: f for f in self.files}
        self.index: Index | None = open_index(home, create=False) if use_index else None
        self._create_index = use_index and self.index is None  # none yet: set up when a command needs it
        self.background = background and os.environ.get(BACKGROUND_ENV, "1") != "0"
        self._digests: dict[str, Digest] = {}
        self._catalog: Catalog | None = None
        self._stored: dict[str, Row] | None = None  # index.rows(), until the index changes

    def close(self) -> None:
        if self.index is not None:
            self.index.close()
            self.index = None

    def _ensure_index(self) -> None:
        """Set the index up if there is none yet (once per command)."""
        if self.index is None and self._create_index:
            self._create_index = False
            self.index = open_index(self.home)

    def _index_failed(self) -> None:
        """A cache that fails is dropped for this command: history goes on without it."""
        self._create_index = False
        if self.index is not None:
            with contextlib.suppress(sqlite3.Error):
                self.index.close()
            self.index = None

    # --------------------------------------------------------------------------------- index upkeep
    def stale(self) -> tuple[list[RolloutFile], list[str]]:
        """Files the index lacks or holds an older version of, and indexed paths that are gone."""
        if self.index is None:
            return list(self.files), []
        stored = self._stored_rows()
        changed = [f for f in self.files if not _fresh(stored.get(f.path), f)]
        removed = [p for p in stored if p not in self.by_path]
        return changed, removed

    def _stored_rows(self) -> dict[str, Row]:
        """What the index holds, read once until the index changes (~4 ms for 1,000 files)."""
        if self.index is None:
            raise sqlite3.OperationalError("no index")
        if self._stored is None:
            self._stored = self.index.rows()
        return self._stored

    def refresh(self) -> None:
        """Bring the index up to date with the rollouts (in batches, so a kill keeps what was done)."""
        self._ensure_index()
        if self.index is None:
            return
        try:
            changed, removed = self.stale()
            batch: list[tuple[RolloutFile, Digest]] = []
            for f in changed:
                batch.append((f, self.digest(f.path, use_index=False)))
                if len(batch) >= 64:
                    self._stored = None
                    self.index.update(batch, removed)
                    batch, removed = [], []
            if batch or removed:
                self._stored = None
                self.index.update(batch, removed)
        except sqlite3.Error:
            self._index_failed()

    def spawn_refresh(self) -> None:
        """Refresh the index in a detached process, so this command answers from the scan now."""
        if not self.background or (self.index is None and not self._create_index):
            return
        import subprocess  # only a search that starts the refresh pays for it

        with contextlib.suppress(OSError):
            subprocess.Popen([sys.executable, "-m", "app.history", "refresh", str(self.home)],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True, cwd=str(Path(__file__).resolve().parents[2]))

    # --------------------------------------------------------------------------------- reading
    def digest(self, path: str, *, use_index: bool = True) -> Digest:
        """One file's digest: the index's copy when it is current, else the file read now."""
        d = self._digests.get(path)
        if d is not None:
            return d
        f = self.by_path.get(path)
        if use_index and self.index is not None and f is not None:
            try:
                stored = self.index.stored_one(path)
                if stored == (f.size, f.mtime_ns):
                    d = self.index.digest(path)
            except sqlite3.Error:
                self._index_failed()
        if d is None:
            d = read_rollout(Path(path))
        self._digests[path] = d
        return d

    def catalog(self) -> Catalog:
        """Every session, from the (refreshed) index, else by reading every rollout."""
        if self._catalog is not None:
            return self._catalog
        summaries: list[FileSummary] = []
        self._ensure_index()
        if self.index is not None:
            self.refresh()
        if self.index is not None:
            try:
                stored = self.index.summaries()
                summaries = [stored[f.path] for f in self.files if f.path in stored]
                missing = [f for f in self.files if f.path not in stored]
                summaries += [FileSummary.of(f, self.digest(f.path, use_index=False)) for f in missing]
            except sqlite3.Error:
                self._index_failed()
        if self.index is None:
            summaries = [FileSummary.of(f, self.digest(f.path)) for f in self.files]
        skipped = Skipped(**vars(self.skipped))
        for s in summaries:
            skipped.add(Skipped(**s.skipped))
        self._catalog = Catalog.build(self.home, summaries, skipped)
        return self._catalog

    def roots(self, flt: Filter) -> list[str]:
        return [str(self.home / "sessions")] + ([str(self.home / "archived_sessions")] if flt.archived else [])

    # --------------------------------------------------------------------------------- search
    def search(self, matcher: Matcher, flt: Filter, limit: int, context: int = 60) -> SearchResult:
        """Sessions matching, newest activity first, at most `limit` (0: all)."""
        if self.index is None and self._create_index:
            if sum(f.size for f in self.files) > SYNC_REFRESH_BYTES:  # no index yet and much history:
                scanned = self._search_scan(matcher, flt, limit, context)  # scan now, index in the background
                self.spawn_refresh()
                return scanned
            self._ensure_index()
        if self.index is not None:
            try:
                result = self._search_index(matcher, flt, limit, context)
            except sqlite3.Error:
                self._index_failed()
            else:
                if result is not None:
                    return result
                result = self._search_scan(matcher, flt, limit, context)  # too much changed to refresh now
                self.spawn_refresh()
                return result
        return self._search_scan(matcher, flt, limit, context)

    def _search_index(self, matcher: Matcher, flt: Filter, limit: int, context: int) -> SearchResult | None:
        """The search through a current index (refreshed first when little changed); None: scan instead."""
        index = self.index
        if index is None:
            raise sqlite3.OperationalError("no index")
        index.begin()  # one version of the index throughout: a background refresh may renumber files
        try:
            self._stored = None
            changed, removed = self.stale()
            if changed or removed:
                if sum(f.size for f in changed) > SYNC_REFRESH_BYTES:
                    return None
                index.end()
                self.refresh()
                if self.index is None:
                    raise sqlite3.OperationalError("the index could not be refreshed")
                index.begin()
                self._stored = None
            return self._answer_from_index(index, matcher, flt, limit, context)
        finally:
            if self.index is not None:
                index.end()

    def _answer_from_index(self, index: Index, matcher: Matcher, flt: Filter, limit: int,
                           context: int) -> SearchResult:
        """Match through the FTS table, then build the catalog of only the sessions the hits need.

        Every file's thread, workspace, fork link and skipped counts come from the index's columns (no
        summary decoded); full summaries are read for the hit sessions, the threads their history comes
        from and the forks that inherit from them: ~40 ms less than building all 1,000 sessions.
        """
        rows = self._stored_rows()
        skipped = Skipped(**vars(self.skipped))
        summaries: dict[str, FileSummary] = {}  # of files read now (not indexed, or changed since)
        thread_of: dict[str, str] = {}
        base_of: dict[str, str] = {}
        paths_of: dict[str, list[str]] = {}
        fresh_ids: dict[int, str] = {}
        firsts: dict[str, tuple[str, str, str]] = {}  # thread -> (created, path, cwd) of its first file
        lasts: dict[str, tuple[str, str, str]] = {}  # thread -> the same of its newest file
        live: set[str] = set()  # threads with a file outside archived_sessions
        for f in self.files:
            row = rows.get(f.path)
            if _fresh(row, f):
                assert row is not None
                fresh_ids[row.id] = f.path
                tid, created, cwd, base = row.thread_id, row.created, row.cwd, row.base
                if row.skipped is not None:
                    skipped.add(Skipped(**json.loads(row.skipped)))
            else:
                s = summaries[f.path] = FileSummary.of(f, self.digest(f.path, use_index=False))
                tid, created, cwd = s.thread_id.lower(), s.created, str(s.meta.get("cwd") or "")
                b = s.base
                base = str(b["thread_id"]).lower() if b is not None else None
                skipped.add(Skipped(**s.skipped))
            thread_of[f.path] = tid
            paths_of.setdefault(tid, []).append(f.path)
            if base is not None:
                base_of[f.path] = base
            if not f.archived:
                live.add(tid)
            key = (created, f.path, cwd)
            if tid not in firsts or key < firsts[tid]:
                firsts[tid] = key
            if tid not in lasts or key > lasts[tid]:
                lasts[tid] = key
        # Sessions in scope, as Filter.keep sees them: archived when all their files are; cwd of the first file
        searched = 0
        for tid, first in firsts.items():
            if tid not in live and not flt.archived:
                continue
            if flt.workspace is None or same_dir(first[2] or lasts[tid][2], flt.workspace):
                searched += 1
        if matcher.phrase is not None:
            cand = {fresh_ids[fid] for fid in {split_rowid(r)[0] for r in index.match(matcher.phrase)}
                    if fid in fresh_ids}
        else:
            cand = set(fresh_ids.values())
        cand |= set(summaries)  # read now, not indexed yet
        need = _needed(cand, thread_of, base_of, paths_of)
        ids = {rows[p].id: p for p in need if p not in summaries}
        for s in index.summaries_by_id(sorted(ids)):
            summaries[s.path] = s
        for fid, (path, d) in index.digests_by_id(sorted(i for i in ids if ids[i] in cand)).items():
            if fresh_ids.get(fid) == path:
                self._digests[path] = d
        cat = Catalog.build(self.home, (summaries[p] for p in need if p in summaries), skipped)
        result = self._collect(cat, cand, matcher, flt, limit, context, self.digest)
        result.used_index = True
        result.searched_sessions = searched
        result.files_decoded = len(need)
        return result

    def _search_scan(self, matcher: Matcher, flt: Filter, limit: int, context: int) -> SearchResult:
        """Without the index: read every rollout's bytes, decode only those that can match, plus fork links."""
        needle = matcher.needle
        cand: set[str] = set()
        links: dict[str, str] = {}  # path -> thread its history_base names (forks, revert segments)
        scanned = 0
        in_scope: set[str] = set()
        for f in self.files:
            if f.archived and not flt.archived:
                continue
            data = _read(f.path)
            if data is None:
                self.skipped.unreadable += 1
                continue
            scanned += len(data)
            nl = data.find(b"\n")
            first = data[: nl if nl >= 0 else len(data)]
            base = _base_thread(first)
            if base:
                links[f.path] = base
            if flt.workspace is not None and not same_dir(_cwd(first), flt.workspace):
                continue
            in_scope.add(f.thread_id)
            if needle is None or needle in data.lower():
                self._digests[f.path] = parse_bytes(f.path, data)
                cand.add(f.path)
        # Decode beyond the candidates only what numbering and fork marks need: the files their history
        # comes from, and the forks (or later segments) that inherit from a candidate's thread.
        # A thread may have several files: a fork's first names its parent, a revert segment names the thread
        # itself. Every link other than to itself counts (keeping only the first met lost a fork's parent
        # whenever the directory listing gave its revert segment first).
        thread_base: dict[str, set[str]] = {}
        for p, base_tid in links.items():
            tid = self.by_path[p].thread_id
            if base_tid != tid:
                thread_base.setdefault(tid, set()).add(base_tid)
        cand_threads = {self.by_path[p].thread_id for p in cand}

        def reaches(tid: str) -> bool:
            seen: set[str] = {tid}
            todo = [tid]
            while todo and len(seen) < 256:
                for base in thread_base.get(todo.pop(), ()):
                    if base in cand_threads:
                        return True
                    if base not in seen:
                        seen.add(base)
                        todo.append(base)
            return False

        need = set(cand) | {p for p in links if reaches(self.by_path[p].thread_id)}
        summaries: dict[str, FileSummary] = {}
        todo = list(need)
        while todo:
            p = todo.pop()
            if p in summaries or p not in self.by_path:
                continue
            summaries[p] = FileSummary.of(self.by_path[p], self.digest(p, use_index=False))
            b = summaries[p].base
            if b is not None:
                tid = str(b["thread_id"]).lower()
                todo.extend(f.path for f in self.files if f.thread_id == tid and f.path not in summaries)
            tid = self.by_path[p].thread_id
            todo.extend(f.path for f in self.files if f.thread_id == tid and f.path not in summaries)
        skipped = Skipped(**vars(self.skipped))
        for s in summaries.values():
            skipped.add(Skipped(**s.skipped))
        cat = Catalog.build(self.home, summaries.values(), skipped)
        result = self._collect(cat, cand, matcher, flt, limit, context,
                               lambda p: self.digest(p, use_index=False))
        result.files_decoded = len(summaries)
        result.scanned_bytes = scanned
        result.searched_sessions = len(in_scope)
        return result

    def _collect(self, cat: Catalog, cand: set[str], matcher: Matcher, flt: Filter, limit: int, context: int,
                 load: Callable[[str], Digest]) -> SearchResult:
        """Match the candidate files' entries and number the hits as `show` numbers prompts."""
        before: dict[str, int] = {}  # path -> prompts of the session that come before this file's own
        limits: dict[str, int] = {}  # path -> where a later segment of the same thread cut it (revert)
        heirs: dict[str, list[tuple[int, str]]] = {}  # path -> (end offset, fork id) inheriting from it
        owner: dict[str, Session] = {}
        for sess in cat.sessions.values():
            count = 0
            for seg in cat.chain(sess):
                f = cat.by_path[seg.path]
                if seg.own:
                    owner[seg.path] = sess
                    before[seg.path] = count
                    if seg.end is not None:
                        limits[seg.path] = seg.end
                else:
                    heirs.setdefault(seg.path, []).append((seg.end if seg.end is not None else 1 << 62, sess.id))
                count += len(f.user_offsets) if seg.end is None else bisect.bisect_left(f.user_offsets, seg.end)
            for f in sess.files:
                owner.setdefault(f.path, sess)
                before.setdefault(f.path, 0)
        # forks named as inheriting a match: the archived ones only with --archived (as the scan, which does
        # not open archived rollouts then, sees them)
        named = {sid for sid, sess in cat.sessions.items() if flt.archived or not sess.archived}
        found: dict[str, SessionHits] = {}
        for path in cand:
            holder = owner.get(path)
            if holder is None or not flt.keep(holder):
                continue
            d = load(path)
            offsets = cat.by_path[path].user_offsets
            cut = limits.get(path)
            for e in d.entries:
                if cut is not None and e.offset >= cut:
                    break
                by_field: dict[str, list[tuple[int, int]]] = {}
                for fld, start, end in matcher.spans(e):
                    by_field.setdefault(fld, []).append((start, end))
                for fld, spans in by_field.items():  # one hit per message (and field), every match marked in it
                    text = e.text if fld == "text" else e.output
                    ex, shown = excerpt_spans(text, spans, context)
                    prompt = before.get(path, 0) + bisect.bisect_right(offsets, e.offset)
                    forks = sorted(fid for lim, fid in heirs.get(path, [])
                                   if e.offset < lim and fid != holder.id and fid in named)
                    found.setdefault(holder.id, SessionHits(holder, [])).matches.append(
                        Match(prompt, e.kind, e.at, fld, ex, shown[0][0], shown[0][1], forks, shown))
        ordered = sorted(found.values(), key=lambda h: h.session.mtime_ns, reverse=True)
        for h in ordered:
            h.matches.sort(key=lambda m: (m.prompt, m.at))
        kept = ordered if limit <= 0 else ordered[:limit]
        searched = sum(1 for s in cat.sessions.values() if flt.keep(s))
        return SearchResult(kept, len(ordered), searched, self.roots(flt), cat.skipped, False)
