"""The status bar: busy, model, context left, workspace, thread, redo, other sessions, tracking, store, capture."""

from __future__ import annotations

import datetime as dt
import os

from rich.text import Text
from textual.widgets import Static

from ..context_window import context_left
from ..events import Status, short_thread
from .splash import STARTING


def human_size(n: int) -> str:
    """1536 → `1.5 KiB`."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def short_path(path: str) -> str:
    """The workspace with the home directory as ~."""
    home = os.path.expanduser("~")
    if home != "/" and (path == home or path.startswith(home + "/")):
        path = "~" + path[len(home):]
    return path if len(path) <= 28 else "…" + path[-27:]


class StatusBar(Static):
    """One line of session state; `stable` hides values that change run to run (for snapshot tests)."""

    def __init__(self, *, stable: bool = False, **kwargs: object) -> None:
        super().__init__(STARTING, **kwargs)  # type: ignore[arg-type]
        self.stable = stable
        self.status = Status()
        self.busy = False
        self.queued = 0
        self.state = "starting"  # starting | ready | failed

    def show(self, status: Status | None = None, *, busy: bool | None = None, queued: int | None = None,
             state: str | None = None) -> None:
        """Update any of the values and redraw."""
        if status is not None:
            self.status = status
        if busy is not None:
            self.busy = busy
        if queued is not None:
            self.queued = queued
        if state is not None:
            self.state = state
        self.update(self.line())

    def model_piece(self) -> str:
        """`gpt-5.5`, with the reasoning effort when one was chosen (`gpt-5.5 high`), as the official footer."""
        s = self.status
        return (s.model or "default model") + (f" {s.effort}" if s.effort else "")

    def context_piece(self) -> str:
        """`73% context left` (the official TUI's words); "" until Codex reported the thread's usage."""
        return context_left(self.status.context_used, self.status.context_window)

    def line(self) -> Text:
        """The bar's text (markers and words, never colour alone)."""
        s = self.status
        sep = ("  │  ", "dim")
        out = Text()
        if self.state == "starting":
            out.append("◌ starting Codex…", style="bold")
            return out
        if self.state == "failed":
            out.append("✗ Codex is not running", style="bold")
            return out
        if self.busy:
            out.append("● working", style="bold")
            if self.queued:
                out.append(f" · {self.queued} queued", style="bold")
        else:
            out.append("○ idle")
        out.append(*sep)
        out.append(self.model_piece(), style="bold")
        context = self.context_piece()
        if context:
            out.append(*sep)
            out.append(context)
        out.append(*sep)
        out.append("workspace" if self.stable else short_path(s.workspace))
        out.append(*sep)
        if s.thread_id:
            out.append("thread " + ("●" if self.stable else short_thread(s.thread_id)))
        else:
            out.append("new thread")
        if s.redo_depth:  # before the capture details: what matters for /redo must not be cut off
            out.append(*sep)
            out.append(f"↷ redo {s.redo_depth}")
        if s.others:
            out.append(*sep)
            n = len(s.others)
            out.append(f"⚠ {n} other codexr session{'s' if n != 1 else ''} here", style="bold")
        out.append(*sep)
        if s.tracking:
            out.append(f"◆ tracking {s.tracked_files} file{'' if s.tracked_files == 1 else 's'}")
            if not self.stable:
                out.append(f" · {human_size(s.store_bytes)}")
                if s.last_capture_at is not None:
                    when = dt.datetime.fromtimestamp(s.last_capture_at).strftime("%H:%M:%S")
                    took = f" {s.last_capture_seconds:.2f}s" if s.last_capture_seconds is not None else ""
                    out.append(f" · snap {when}{took}")
        else:
            out.append("◇ tracking off")
        return out
