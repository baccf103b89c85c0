"""The status bar: busy, model, context left, workspace, thread, redo, other sessions, tracking, store, capture."""

from __future__ import annotations

import datetime as dt
import os
from typing import NamedTuple

from rich.text import Text
from textual.widgets import Static

from ..codex.context_window import context_left
from ..codex.events import Status, short_thread
from ..shared.words import plural
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


SEP = "  │  "


class Piece(NamedTuple):
    """One field of the bar. The higher its rank, the sooner it gives way when the bar is too narrow."""

    rank: int
    text: Text
    glue: str = SEP  # what joins it to the field before it (a detail of that field: ` · `)


def fit(pieces: list[Piece], width: int) -> Text:
    """The pieces in their order, less the least important (highest rank, the later first) the width cannot hold.

    Whole fields go, never part of one; a width of 0 (not laid out yet) keeps them all.
    """
    kept = list(pieces)

    def joined() -> Text:
        out = Text()
        for i, piece in enumerate(kept):
            if i:
                out.append(piece.glue, style="dim" if piece.glue == SEP else "")
            out.append_text(piece.text)
        return out

    line = joined()
    while width > 0 and len(kept) > 1 and line.cell_len > width:
        del kept[max(range(len(kept)), key=lambda i: (kept[i].rank, i))]
        line = joined()
    return line


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
        # one row whatever it says (app.tcss): no layout pass of the screen, which each show() cost before — four or
        # five of them, 20-30 ms each under load, between a prompt's Enter and its answer (bench_tui.py, timed)
        self.update(self.line(), layout=False)

    def model_piece(self) -> str:
        """`gpt-5.5`, with the reasoning effort when one was chosen (`gpt-5.5 high`), as the official footer."""
        s = self.status
        return (s.model or "default model") + (f" {s.effort}" if s.effort else "")

    def context_piece(self) -> str:
        """`73% context left` (the official TUI's words); "" until Codex reported the thread's usage."""
        return context_left(self.status.context_used, self.status.context_window)

    def on_resize(self) -> None:
        """A new width may hold more fields, or fewer."""
        self.update(self.line(), layout=False)

    def line(self) -> Text:
        """The bar's text at the bar's width (markers and words, never colour alone)."""
        return fit(self.pieces(), self.content_size.width)

    def pieces(self) -> list[Piece]:
        """Every field in display order with its rank: what a user must not miss has the lowest."""
        s = self.status
        if self.state == "starting":
            return [Piece(0, Text("◌ starting Codex…", style="bold"))]
        if self.state == "failed":
            return [Piece(0, Text("✗ Codex is not running", style="bold"))]
        if self.busy:
            busy = Text("● working", style="bold")
            if self.queued:
                busy.append(f" · {self.queued} queued", style="bold")
        else:
            busy = Text("○ idle")
        out = [Piece(0, busy), Piece(5, Text(self.model_piece(), style="bold"))]
        context = self.context_piece()
        if context:
            out.append(Piece(4, Text(context)))
        out += [Piece(7, Text("workspace" if self.stable else short_path(s.workspace))),
                Piece(3, Text("thread " + ("●" if self.stable else short_thread(s.thread_id))
                              if s.thread_id else "new thread"))]
        if s.redo_depth:  # what matters for /redo
            out.append(Piece(2, Text(f"↷ redo {s.redo_depth}")))
        if s.others:
            n = len(s.others)
            out.append(Piece(1, Text(f"⚠ {n} other codexr session{'s' if n != 1 else ''} here", style="bold")))
        if not s.tracking:
            out.append(Piece(6, Text("◇ tracking off")))
            return out
        if s.tracked_files is None:  # before the thread's first snapshot: no count to give (not "0 files")
            out.append(Piece(6, Text("◆ tracking on")))
        else:
            out.append(Piece(6, Text(f"◆ tracking {plural(s.tracked_files, 'file')}")))
        if not self.stable:
            out.append(Piece(8, Text(human_size(s.store_bytes)), " · "))
            if s.last_capture_at is not None:
                when = dt.datetime.fromtimestamp(s.last_capture_at).strftime("%H:%M:%S")
                took = f" {s.last_capture_seconds:.2f}s" if s.last_capture_seconds is not None else ""
                out.append(Piece(9, Text(f"snap {when}{took}"), " · "))
        return out
