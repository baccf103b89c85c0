"""Recorded event logs: write what a session emitted, and play it back into a front end without Codex.

For development (a UI change seen against a real session's events) and for the responsiveness
benchmark (bench/bench_tui.py). A log is JSON Lines, one transcript event per line (events.to_json);
a `ThreadLoaded` line carries its events inline.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

from ..codex.events import TRANSCRIPT_TYPES, Notice, Ready, Status, StatusChanged, ThreadLoaded, from_json, to_json
from ..errors import SessionError

Emit = Callable[[Any], None]


class ReplayError(SessionError):
    """A replay log that cannot be read: one clear line, nothing played."""


def event_line(event: Any) -> str | None:
    """The log line of an event (None for events a log does not keep, such as approvals)."""
    if isinstance(event, ThreadLoaded):
        doc = {"type": "ThreadLoaded", "thread_id": event.thread_id, "reason": event.reason,
               "composer": event.composer, "events": [to_json(e) for e in event.events]}
    elif type(event) in TRANSCRIPT_TYPES:
        doc = to_json(event)
    else:
        return None
    return json.dumps(doc, ensure_ascii=False)


class Recorder:
    """An `emit` that also appends every loggable event to a file."""

    def __init__(self, emit: Emit, path: Path) -> None:
        self._emit = emit
        self._lock = threading.Lock()
        self._file: IO[str] = path.open("a", encoding="utf-8")

    def __call__(self, event: Any) -> None:
        line = event_line(event)
        if line is not None:
            with self._lock:
                self._file.write(line + "\n")
                self._file.flush()
        self._emit(event)

    def close(self) -> None:
        """Stop recording."""
        with self._lock:
            self._file.close()


def _decode(doc: Any) -> Any:
    if isinstance(doc, dict) and doc.get("type") == "ThreadLoaded":
        return ThreadLoaded(str(doc.get("thread_id") or ""), tuple(from_json(e) for e in doc.get("events") or ()),
                            str(doc.get("reason") or ""), str(doc.get("composer") or ""))
    return from_json(doc)


def read_log(path: Path) -> list[Any]:
    """Every event of a log, or ReplayError naming the first bad line."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ReplayError(f"cannot read replay log {path}: {exc}") from exc
    out = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append(_decode(json.loads(line)))
        except (ValueError, TypeError) as exc:
            raise ReplayError(f"replay log {path} line {n} is not an event: {exc}") from exc
    return out


def write_log(path: Path, events: Iterable[Any]) -> int:
    """Write events as a log; returns how many were kept."""
    kept = 0
    with path.open("w", encoding="utf-8") as fh:
        for ev in events:
            line = event_line(ev)
            if line is not None:
                fh.write(line + "\n")
                kept += 1
    return kept


class ReplayDriver:
    """Plays a log into a front end in place of a `Driver`: no Codex, no store, nothing written.

    Offers the Driver's interface; operations that need a live session raise a clear SessionError
    (`session` is None, and `unavailable` is what a front end tells a user who asks for one).
    `delay` seconds pass between events (0: as fast as the front end takes them).
    """

    session: None = None
    opts: None = None  # no SessionOptions: no workspace, no Codex
    unavailable = "not available in a replay (no Codex runs)"

    def __init__(self, events: list[Any], emit: Emit, *, delay: float = 0.0, workspace: str = "(replay)") -> None:
        self.events = events
        self.emit = emit
        self.delay = delay
        self.thread_id: str | None = next((e.thread_id for e in events if isinstance(e, ThreadLoaded)), "replay")
        self._status = Status(model="replay", workspace=workspace, thread_id=self.thread_id or "")
        self.busy = False
        self.done = threading.Event()

    def start(self) -> bool:
        """Emit Ready, then every event of the log."""
        self.emit(Ready(self._status))
        for ev in self.events:
            if self.delay:
                time.sleep(self.delay)
            self.emit(ev)
        self.emit(StatusChanged(self._status))
        self.done.set()
        return True

    def status(self) -> Status:
        """The replay's fixed status."""
        return self._status

    def submit(self, text: str, images: tuple[str, ...] | list[str] = ()) -> None:
        """A replay sends nothing: say so."""
        self.emit(Notice(f"replay: not sent to any agent: {text[:60]}", "warning"))

    def pending(self) -> list[str]:
        """Nothing is ever queued."""
        return []

    def new_thread(self) -> None:
        """A replay has one thread."""
        raise SessionError(f"a new thread is {self.unavailable}")

    def interrupt(self) -> bool:
        """Nothing runs to interrupt."""
        return False

    def close(self) -> None:
        """Nothing to stop."""
        return None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)

        def unavailable(*_a: Any, **_k: Any) -> Any:
            raise SessionError(f"{name.replace('_', ' ')} is not available in a replay")

        return unavailable
