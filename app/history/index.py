"""An on-disk cache of rollout digests with a trigram full-text index, so repeated searches skip the scan.

`$CODEX_HOME/file_snapshots/history/index.sqlite` holds, per rollout file, its size and mtime (a changed
file is re-read: rollouts only grow, and a rewritten one changes size or mtime), its summary, its digest
(zlib-compressed JSON, in a table of its own so that reading every file's row stays a few pages) and its
entries' text in an FTS5 trigram table (contentless: the text lives in the digest). The few summary fields
a search needs of every file (thread, created, workspace, the thread its history continues, skipped counts)
have their own columns: a search decodes only its hits' summaries. It is a cache: a damaged index is
deleted and rebuilt, an unusable one is simply not used, and every answer is verified against the digests,
so results never depend on it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path

from snapshot_store.records import NamedTuple, asdict

from .catalog import FileSummary, RolloutFile
from .rollout import Digest

# An index of another version is dropped and rebuilt. 2: the search's columns; digests in their own table
# (a row of `files` was ~10 KB with its digest inline: reading every file's size cost 1,000 pages), and
# zlib, not zstd, for them (zstandard and the `platform` module it imports cost a search ~5 ms to load).
SCHEMA = 2
DIGEST_LEVEL = 1  # zlib level: 13 MB of digests for 43 MB of JSON in 0.7 s (zstd level 3: 11 MB, 0.5 s)
ENTRY_BITS = 24

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS files(id INTEGER PRIMARY KEY, path TEXT UNIQUE NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, thread_id TEXT NOT NULL, created TEXT NOT NULL, cwd TEXT NOT NULL, base TEXT,
    skipped TEXT, summary TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS digests(id INTEGER PRIMARY KEY, digest BLOB NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS texts USING fts5(body, content='', tokenize='trigram');
"""


def index_path(home: Path) -> Path:
    """Beside codexr's snapshot store, never among Codex's own files."""
    return home / "file_snapshots" / "history" / "index.sqlite"


def _texts(file_id: int, d: Digest) -> Iterator[tuple[int, str]]:
    """(rowid, text) of every searchable piece of a digest: rowid = file, entry, part (0 text, 1 output)."""
    for i, e in enumerate(d.entries):
        if e.kind == "marker":
            continue
        base = (file_id << ENTRY_BITS) | (i << 1)
        if e.text:
            yield base, e.text
        if e.output:
            yield base | 1, e.output


class Row(NamedTuple):
    """One indexed file as a search sees it: freshness, and what grouping, scope and fork links need."""

    id: int
    size: int
    mtime_ns: int
    thread_id: str  # lower-case, as sessions are keyed
    created: str
    cwd: str
    base: str | None  # the thread (lower-case) its history_base names
    skipped: str | None  # FileSummary.skipped as JSON, None when nothing was skipped


def row_values(s: FileSummary) -> tuple[str, str, str, str | None, str | None]:
    """The search's columns of a file summary (see Row)."""
    base = s.base
    return (s.thread_id.lower(), s.created, str(s.meta.get("cwd") or ""),
            str(base["thread_id"]).lower() if base is not None else None,
            json.dumps(s.skipped) if any(s.skipped.values()) else None)


def split_rowid(rowid: int) -> tuple[int, int, int]:
    """(file id, entry index, part) of a text row."""
    return rowid >> ENTRY_BITS, (rowid & ((1 << ENTRY_BITS) - 1)) >> 1, rowid & 1


class Index:
    """The history index; every method may raise sqlite3.Error, which callers treat as 'no index'."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = self._open()

    def _open(self) -> sqlite3.Connection:
        for attempt in range(2):
            db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
            try:
                version = db.execute("PRAGMA user_version").fetchone()[0]
                if version not in (0, SCHEMA):
                    raise sqlite3.DatabaseError(f"unknown history index version {version}")
                if version == 0:  # new: set up once; WAL mode persists in the file
                    # An index already set up is only read here: writing the pragmas on every open cost a
                    # read-only command five fdatasyncs (2-7 ms each here, far more on a busy disk).
                    db.execute("PRAGMA journal_mode=WAL")
                    db.executescript(_SCHEMA_SQL)
                    db.execute(f"PRAGMA user_version={SCHEMA}")
                db.execute("SELECT count(*) FROM files").fetchone()
                return db
            except sqlite3.DatabaseError:
                db.close()
                if attempt:
                    raise
                self.drop()  # a damaged cache is rebuilt from the rollouts
        raise AssertionError("unreachable")

    def drop(self) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(str(self.path) + suffix)

    def close(self) -> None:
        self.db.close()

    def size(self) -> int:
        return sum(os.path.getsize(str(self.path) + s) for s in ("", "-wal") if os.path.exists(str(self.path) + s))

    # --------------------------------------------------------------------------------------- reading
    def rows(self) -> dict[str, Row]:
        """path -> Row of every indexed file."""
        return {r[0]: Row(*r[1:]) for r in self.db.execute(
            "SELECT path, id, size, mtime_ns, thread_id, created, cwd, base, skipped FROM files")}

    def begin(self) -> None:
        """Read from one version of the index until end(): file ids, texts and digests agree."""
        self.db.execute("BEGIN")

    def end(self) -> None:
        if self.db.in_transaction:
            self.db.execute("COMMIT")

    def stored_one(self, path: str) -> tuple[int, int] | None:
        row = self.db.execute("SELECT size, mtime_ns FROM files WHERE path = ?", (path,)).fetchone()
        return (int(row[0]), int(row[1])) if row else None

    def summaries(self) -> dict[str, FileSummary]:
        out = {}
        for path, summary in self.db.execute("SELECT path, summary FROM files"):
            out[path] = FileSummary(**json.loads(summary))
        return out

    def summaries_by_id(self, ids: Iterable[int]) -> list[FileSummary]:
        out = []
        for fid in ids:
            row = self.db.execute("SELECT summary FROM files WHERE id = ?", (fid,)).fetchone()
            if row:
                out.append(FileSummary(**json.loads(row[0])))
        return out

    def digest(self, path: str) -> Digest | None:
        row = self.db.execute("SELECT digest FROM digests WHERE id = (SELECT id FROM files WHERE path = ?)",
                              (path,)).fetchone()
        return self._load(row[0]) if row else None

    def digests_by_id(self, ids: Iterable[int]) -> dict[int, tuple[str, Digest]]:
        out = {}
        for fid in ids:
            row = self.db.execute("SELECT path, digest FROM files JOIN digests USING(id) WHERE id = ?",
                                  (fid,)).fetchone()
            if row:
                out[fid] = (row[0], self._load(row[1]))
        return out

    def all_digests(self) -> Iterator[tuple[int, str, Digest]]:
        for fid, path, blob in self.db.execute("SELECT id, path, digest FROM files JOIN digests USING(id)"):
            yield fid, path, self._load(blob)

    def _load(self, blob: bytes) -> Digest:
        return Digest.from_json(json.loads(zlib.decompress(blob)))

    def match(self, phrase: str) -> set[int]:
        """Row ids whose text contains `phrase` (case-insensitive, 3+ characters)."""
        q = '"' + phrase.replace('"', '""') + '"'
        return {r for (r,) in self.db.execute("SELECT rowid FROM texts WHERE texts MATCH ?", (q,))}

    # --------------------------------------------------------------------------------------- writing
    def update(self, changed: Iterable[tuple[RolloutFile, Digest]], removed: Iterable[str]) -> None:
        """Replace the rows of changed files and drop removed ones, in one transaction."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            for path in removed:
                self._delete(path)
            for f, d in changed:
                self._delete(f.path)
                summary = FileSummary.of(f, d)
                blob = zlib.compress(json.dumps(d.to_json(), separators=(",", ":")).encode(), DIGEST_LEVEL)
                cur = db.execute("INSERT INTO files(path, size, mtime_ns, thread_id, created, cwd, base, skipped, "
                                 "summary) VALUES(?,?,?,?,?,?,?,?,?)",
                                 (f.path, f.size, f.mtime_ns, *row_values(summary), json.dumps(asdict(summary))))
                fid = int(cur.lastrowid or 0)
                db.execute("INSERT INTO digests(id, digest) VALUES(?, ?)", (fid, blob))
                db.executemany("INSERT INTO texts(rowid, body) VALUES(?, ?)", _texts(fid, d))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def _delete(self, path: str) -> None:
        row = self.db.execute("SELECT id, digest FROM files LEFT JOIN digests USING(id) WHERE path = ?",
                              (path,)).fetchone()
        if row is None:
            return
        fid, blob = row
        if blob is not None:  # a contentless FTS row is deleted by giving its text again
            self.db.executemany("INSERT INTO texts(texts, rowid, body) VALUES('delete', ?, ?)",
                                _texts(fid, self._load(blob)))
        self.db.execute("DELETE FROM files WHERE id = ?", (fid,))
        self.db.execute("DELETE FROM digests WHERE id = ?", (fid,))


def open_index(home: Path, *, create: bool = True) -> Index | None:
    """The index, or None when it cannot be used here (read-only home, locked, no FTS5): history still works.

    With create=False a missing index stays missing (None): setting one up costs ~10 ms of writes and syncs
    that a search over much history leaves to the background refresh.
    """
    if not create and not index_path(home).exists():
        return None
    try:
        return Index(index_path(home))
    except (sqlite3.Error, OSError):
        return None
