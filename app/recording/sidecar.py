"""Per-thread sidecar: turn id -> snapshot ids, agent-touched paths and the redo stack.

One JSON file per thread under `$CODEX_HOME/file_snapshots/refs/threads/`, so the store's gc
treats every snapshot it names as pinned. Codex's own files are never written.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from snapshot_store import StoreError
from snapshot_store.fsutil import atomic_write
from snapshot_store.locks import flocked
from snapshot_store.records import asdict, field, record

SIDECAR_VERSION = 1
_THREAD_ID = re.compile(r"[0-9A-Za-z][0-9A-Za-z_-]{7,127}")


# What the error of a sidecar that is no longer JSON says to do (snapshot_store/maint/refcheck.py does it)
SET_ASIDE_HINT = ("; `codexr snapshots verify --repair` sets it aside (the thread then goes on without its snapshots; "
                  "mended by hand and renamed back, it has them again)")


class UnknownThread(StoreError):
    """No such thread (or it has no codexr sidecar)."""


def check_thread_id(thread_id: str) -> str:
    """Thread ids become file names: validate them first."""
    if not _THREAD_ID.fullmatch(thread_id):
        raise UnknownThread(f"{thread_id!r} is not a thread id")
    return thread_id


@record
class TurnRecord:
    """One prompt of the thread and the snapshots around it."""

    turn_id: str
    prompt: str
    pre: str | None = None
    post: str | None = None
    status: str = "inProgress"
    started: float = field(default_factory=time.time)
    pre_edit: str | None = None  # states snapshot: each patched path as it was before the turn
    commands: int = 0  # shell commands the turn ran (what they changed outside the workspace is not covered)
    post_edit: str | None = None  # states snapshot: each path outside the workspace as the turn's patches left it


@record
class RedoEntry:
    """One rewind that landed on this thread; redo pops it and goes back."""

    origin_thread: str
    mode: str
    safety_id: str | None
    target_snapshot: str | None
    to_prompt: int
    prompt: str
    origin_turns: int
    at: float = field(default_factory=time.time)
    outside_safety_id: str | None = None  # states snapshot of the paths outside the workspace the rewind wrote
    outside_target: str | None = None  # what the rewind wrote there (redo compares against it)


@record
class ThreadSidecar:
    """Everything codexr knows about one Codex thread."""

    thread_id: str
    cwd: str
    tracking: bool
    created: float = field(default_factory=time.time)
    forked_from: str | None = None
    turns: list[TurnRecord] = field(default_factory=list)
    agent_touched: list[str] = field(default_factory=list)
    redo: list[RedoEntry] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)

    def turn(self, turn_id: str) -> TurnRecord | None:
        """The record of a turn, if codexr ran it."""
        for t in self.turns:
            if t.turn_id == turn_id:
                return t
        return None

    def touch(self, paths: list[str]) -> None:
        """Add agent-touched paths (tracking only grows)."""
        known = set(self.agent_touched)
        for p in paths:
            if p not in known:
                known.add(p)
                self.agent_touched.append(p)

    def latest_snapshot(self) -> str | None:
        """The newest snapshot of this thread (its tracked paths stay tracked)."""
        for t in reversed(self.turns):
            if t.post or t.pre:
                return t.post or t.pre
        return None

    def files_snapshot(self) -> str | None:
        """The snapshot the workspace's tracked files last matched: the newest turn's, else (a fork made by a
        rewind to its first prompt has no turns) the one the rewind restored."""
        latest = self.latest_snapshot()
        if latest is None:
            latest = next((r.target_snapshot for r in reversed(self.redo) if r.target_snapshot), None)
        return latest


class Sidecars:
    """Reads and writes thread sidecars atomically, under a lock per thread."""

    def __init__(self, store_dir: Path, *, create: bool = True) -> None:
        """`create=False`: only to read (`codexr threads`): a store that does not exist yet is not made."""
        self.dir = store_dir / "refs" / "threads"
        self.locks = store_dir / "locks"
        if create:
            self.dir.mkdir(parents=True, exist_ok=True)
            self.locks.mkdir(parents=True, exist_ok=True)

    def path(self, thread_id: str) -> Path:
        return self.dir / f"{check_thread_id(thread_id)}.json"

    def exists(self, thread_id: str) -> bool:
        return self.path(thread_id).exists()

    def load(self, thread_id: str) -> ThreadSidecar | None:
        """The sidecar of a thread, or None when codexr never tracked it."""
        path = self.path(thread_id)
        try:
            doc = json.loads(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise StoreError(f"thread sidecar {path} is damaged: {exc}{SET_ASIDE_HINT}") from exc
        try:
            if doc.get("version") != SIDECAR_VERSION:
                raise ValueError(f"unknown version {doc.get('version')!r}")
            return ThreadSidecar(
                thread_id=doc["thread_id"],
                cwd=doc["cwd"],
                tracking=bool(doc["tracking"]),
                created=float(doc["created"]),
                forked_from=doc.get("forked_from"),
                turns=[TurnRecord(**t) for t in doc["turns"]],
                agent_touched=list(doc["agent_touched"]),
                redo=[RedoEntry(**r) for r in doc["redo"]],
                history=list(doc.get("history", [])),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"thread sidecar {path} is damaged: {exc} (mend it by hand, or move it away: the thread "
                             "then goes on without its snapshots)") from exc

    def _lock(self, thread_id: str) -> contextlib.AbstractContextManager[None]:
        return flocked(self.locks / f"thread-{check_thread_id(thread_id)}.lock", exclusive=True)

    def _write(self, side: ThreadSidecar) -> None:
        doc = {"version": SIDECAR_VERSION, **asdict(side)}
        atomic_write(self.path(side.thread_id), json.dumps(doc, indent=1).encode())

    def save(self, side: ThreadSidecar) -> None:
        """Write a sidecar nobody else can know yet (a new fork's) atomically (temp, fsync, rename)."""
        with self._lock(side.thread_id):
            self._write(side)

    def update(self, thread_id: str, change: Callable[[ThreadSidecar], None],
               new: Callable[[], ThreadSidecar] | None = None) -> ThreadSidecar:
        """Read, change and write one sidecar under its lock, so concurrent writers never undo each other.

        `new` makes the sidecar when the thread has none yet (else that is an UnknownThread).
        """
        with self._lock(thread_id):
            side = self.load(thread_id)
            if side is None:
                if new is None:
                    raise UnknownThread(f"thread {thread_id} has no codexr sidecar")
                side = new()
            change(side)
            self._write(side)
        return side

    def ids(self) -> list[str]:
        """The thread ids codexr keeps a sidecar for, from the file names alone (to resolve an id prefix)."""
        return sorted(p.stem for p in self.dir.glob("*.json") if _THREAD_ID.fullmatch(p.stem))

    def all(self) -> list[ThreadSidecar]:
        """Every sidecar (damaged ones are skipped)."""
        out = []
        for p in sorted(self.dir.glob("*.json")):
            try:
                side = self.load(p.stem)
            except StoreError:
                continue
            if side is not None:
                out.append(side)
        return out


def relative_to(cwd: str, path: str) -> str | None:
    """A workspace-relative POSIX path for an absolute path Codex reported, or None if outside."""
    try:
        rel = os.path.relpath(os.path.abspath(path), cwd)
    except ValueError:
        return None
    if rel == "." or rel.startswith(".."):
        return None
    return rel.replace(os.sep, "/")
