"""Transcript blocks: one widget per thing that happened, each drawable from its event alone.

Every block starts with a text marker (▶, ●, $, ✎, !, ✓ …) so nothing relies on colour. A block can be
rebuilt from its (latest) event, which is what lets the transcript unmount old blocks and redraw a thread.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Collapsible, Static

from ..codex.events import (
    AgentDelta,
    AgentMessage,
    ApprovalDecided,
    CommandFinished,
    CommandStarted,
    ErrorNotice,
    FileChanges,
    FileDiff,
    Notice,
    Reasoning,
    TokenUsage,
    TurnFinished,
    UserPrompt,
)
from ..codex.translate import short_command
from ..shared.lines import turn_tokens
from .diffview import DiffView, stat_label

if TYPE_CHECKING:  # Textual's Markdown (markdown-it) loads with the first answer, not before the first frame
    from textual.widgets.markdown import MarkdownStream

OUTPUT_TAIL_LINES = 400  # a command's output shown in the block once it ended; the copy has all of it
# While a command runs its block shows only the newest lines, one row each, like the official TUI's live cell: a
# block that grew with every piece of output made Textual lay out and repaint the whole transcript 20 times a second
# (bench/bench_tui.py, keystroke echo while a command streams), and keys waited behind those frames.
LIVE_TAIL_LINES = 10
LIVE_ROWS = LIVE_TAIL_LINES + 1  # the live view's height while the command runs (and a line counting those above)
LIVE_REFRESH_S = 0.25  # the live output is redrawn at most this often, however fast the command prints


def _stable(widget: Block) -> bool:
    """The app hides durations and token counts (deterministic screenshots)."""
    return bool(getattr(widget.app, "stable_status", False))


class Block(Vertical):
    """A transcript block: knows its text for copying and how to expand/collapse."""


    def copy_text(self) -> str:
        """The block's text as a user would paste it."""
        return ""

    def toggle(self) -> None:
        """Expand or collapse every collapsible part of the block."""
        for c in self.query(Collapsible):
            c.collapsed = not c.collapsed


class PromptBlock(Block):
    """A prompt the user sent (a rewind can start from it)."""

    def __init__(self, ev: UserPrompt) -> None:
        super().__init__(classes="block prompt")
        self.event = ev

    @property
    def number(self) -> int:
        """1-based prompt number in the thread (0 when unknown)."""
        return self.event.number

    def compose(self) -> ComposeResult:
        ev = self.event
        head = Text("▶ ", style="bold")
        head.append(f"prompt {ev.number}" if ev.number else "prompt", style="bold")
        if ev.outside:
            head.append("  (sent outside codexr, no file snapshot: conversation-only)", style="dim")
        elif not ev.has_snapshot:
            head.append("  (no file snapshot: conversation-only)", style="dim")
        yield Static(head, classes="block-head")
        yield Static(Text(ev.text), classes="prompt-text")

    def copy_text(self) -> str:
        return self.event.text


class AgentBlock(Block):
    """An agent message as Markdown, streamed through one MarkdownStream while its deltas arrive."""

    def __init__(self, item_id: str, text: str = "") -> None:
        super().__init__(classes="block agent")
        self.item_id = item_id
        self.text = text
        self._stream: MarkdownStream | None = None

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown  # ~60-100 ms of imports, paid at the first answer (bench_tui.py)

        yield Static(Text("● codex", style="bold"), classes="block-head")
        # a streamed message mounts with its first piece: one layout pass shows the block and its text (mounted
        # empty, the first paragraph came in a second pass, a frame later: issue 20 §2, Enter -> answer)
        yield Markdown(self.text, classes="agent-md")

    async def write(self, delta: str) -> None:
        """Append a streamed piece (the stream batches pieces that arrive faster than it renders)."""
        from textual.widgets import Markdown

        self.text += delta
        if self._stream is None:
            self._stream = Markdown.get_stream(self.query_one(Markdown))
        await self._stream.write(delta)

    async def finish(self, text: str) -> None:
        """The message is complete: stop the stream; redraw only if the final text differs."""
        streamed = self.text
        if self._stream is not None:
            await self._stream.stop()
            self._stream = None
        self.text = text
        if text != streamed:
            from textual.widgets import Markdown

            await self.query_one(Markdown).update(text)

    def copy_text(self) -> str:
        return self.text


class ReasoningBlock(Block):
    """A reasoning summary, collapsed."""

    def __init__(self, ev: Reasoning) -> None:
        super().__init__(classes="block reasoning")
        self.event = ev

    def compose(self) -> ComposeResult:
        first = self.event.text.strip().splitlines()[0] if self.event.text.strip() else ""
        with Collapsible(title=f"∴ thinking: {first[:80]}", collapsed=True):
            yield Static(Text(self.event.text), classes="reasoning-text")

    def copy_text(self) -> str:
        return self.event.text


def _command_title(command: str, finished: CommandFinished | None, stable: bool = False,
                   waiting: bool = False) -> str:
    if finished is None:
        return f"$ {command}   … waiting for approval" if waiting else f"$ {command}   … running"
    parts = [f"$ {command}  "]
    if finished.status == "declined":
        parts.append(" ✗ declined")
    elif finished.status == "interrupted":
        parts.append(" ✗ interrupted")
    elif finished.status == "background":
        parts.append(" ⋯ still running in the background · /ps to view · /stop to close")
    elif finished.exit_code is not None:
        parts.append(" ✓ exit 0" if finished.exit_code == 0 else f" ✗ exit {finished.exit_code}")
    elif finished.status == "failed":
        parts.append(" ✗ failed")
    if finished.duration_ms is not None and not stable:
        parts.append(f" · {finished.duration_ms / 1000:.1f}s")
    return "".join(parts)


def _tail(output: str) -> str:
    lines = output.rstrip("\n").splitlines()
    if len(lines) <= OUTPUT_TAIL_LINES:
        return "\n".join(lines) or "(no output)"
    hidden = len(lines) - OUTPUT_TAIL_LINES
    return f"… {hidden} earlier lines (copy the block for all of it)\n" + "\n".join(lines[-OUTPUT_TAIL_LINES:])


class LiveTail:
    """The newest lines of a running command's output, kept as the pieces arrive (work per piece, not per output)."""

    def __init__(self, keep: int = LIVE_TAIL_LINES) -> None:
        self.lines: deque[str] = deque(maxlen=keep)
        self.partial = ""  # the line being written (no newline yet)
        self.count = 0  # complete lines so far

    def feed(self, delta: str) -> None:
        """Take a piece of output."""
        *done, self.partial = (self.partial + delta).split("\n")
        self.lines.extend(line.rstrip("\r").rsplit("\r", 1)[-1] for line in done)  # a \r redraws its line
        self.count += len(done)

    def text(self) -> Text:
        """The newest lines, one row each; a first line counts the ones above them."""
        shown = list(self.lines)
        partial = self.partial.rsplit("\r", 1)[-1]
        if partial:
            shown.append(partial)
        shown = shown[-(self.lines.maxlen or 1):]
        hidden = self.count + (1 if partial else 0) - len(shown)
        head = [f"… {hidden} earlier line{'s' if hidden != 1 else ''} (all of them when it ends)"] if hidden else []
        return Text("\n".join(head + shown) or "(no output)", no_wrap=True, overflow="ellipsis")


class CommandBlock(Block):
    """A shell command with its output (collapsible), exit code and duration."""

    def __init__(self, item_id: str, command: str, finished: CommandFinished | None = None,
                 waiting: bool = False) -> None:
        super().__init__(classes="block command")
        self.item_id = item_id
        self.command = command
        self.finished = finished
        self._chunks: list[str] = [finished.output] if finished else []
        self._live = LiveTail()
        self._live_rows = 0  # rows the live output had when last shown
        self._live_shown = 0.0  # when (time.monotonic) the live output was last shown
        self._live_timer: Timer | None = None  # shows the output that arrived since, LIVE_REFRESH_S after the last
        self.waiting = waiting  # Codex asked the user about it: it does not run until answered

    @property
    def output(self) -> str:
        """All the output so far."""
        if len(self._chunks) > 1:
            self._chunks = ["".join(self._chunks)]
        return self._chunks[0] if self._chunks else ""

    @output.setter
    def output(self, text: str) -> None:
        self._chunks = [text]
        self._live = LiveTail()
        self._live.feed(text)

    def _shown(self) -> Text:
        return Text(_tail(self.output)) if self.finished is not None else self._live.text()

    def compose(self) -> ComposeResult:
        failed = self.finished is not None and (self.finished.exit_code or 0) != 0
        with Collapsible(title=_command_title(self.command, self.finished, _stable(self), self.waiting),
                         collapsed=self.finished is not None and not failed):
            view = Static(self._shown(), classes="command-output", markup=False)
            if self._reserves():
                view.styles.min_height = self._live_rows = LIVE_ROWS
            yield view

    def _reserves(self) -> bool:
        """The live view holds LIVE_ROWS from the start: growing a row at a time laid the whole screen out at every
        redraw of a command's first second, and a first line arriving after the block mounted once more — the
        keystroke-echo spikes of a command's start (bench_tui.py, Screen._refresh_layout traced)."""
        return self.finished is None and not self.waiting

    def set_waiting(self, waiting: bool) -> None:
        """Waiting for the user's approval (not running yet), or answered."""
        self.waiting = waiting
        if self.finished is None:
            self.query_one(Collapsible).title = _command_title(self.command, None, _stable(self), waiting)
            self._show_live()  # running now: the live view takes its height (_reserves)

    def add_output(self, delta: str) -> None:
        """More output while the command runs."""
        self._chunks.append(delta)
        self._live.feed(delta)
        if self.finished is None and self._live_timer is None:
            wait = self._live_shown + LIVE_REFRESH_S - time.monotonic()
            if wait <= 0:
                self._show_live()
            else:  # at most LIVE_REFRESH_S apart: every repaint of the block is a frame the keys wait behind
                self._live_timer = self.set_timer(wait, self._show_live)

    def _show_live(self) -> None:
        self._live_timer = None
        if self.finished is not None:
            return
        self._live_shown = time.monotonic()
        text = self._live.text()
        view = self.query_one(".command-output", Static)
        rows = len(text.plain.split("\n"))  # one row a line (no wrapping while it runs)
        if self._reserves():
            rows = max(rows, LIVE_ROWS)
        view.styles.min_height = rows if self._reserves() else None
        # no layout pass while the block keeps its height: a layout of the whole screen per piece of output was half
        # the cost of streaming (bench_tui.py)
        view.update(text, layout=rows != self._live_rows)
        self._live_rows = rows

    def finish(self, ev: CommandFinished) -> None:
        """The command ended: its full output, exit code and duration."""
        self.finished = ev
        self.output = ev.output or self.output
        view = self.query_one(".command-output", Static)
        view.styles.min_height = None  # the live view's reserved height (_show_live)
        view.update(self._shown())
        c = self.query_one(Collapsible)
        c.title = _command_title(self.command, ev, _stable(self))
        c.collapsed = (ev.exit_code or 0) == 0 and ev.status == "completed"

    def copy_text(self) -> str:
        return f"$ {self.command}\n{self.output}"


def unified(d: FileDiff) -> str:
    """A FileDiff as a unified diff (an added/deleted file may arrive as its whole text)."""
    body = d.diff
    if d.kind in ("add", "delete") and body and not body.startswith(("---", "@@", "+", "-", "diff ")):
        sign = "+" if d.kind == "add" else "-"
        body = "".join(f"{sign}{line}\n" for line in body.splitlines())
    return body


def diff_stat(d: FileDiff) -> str:
    text = unified(d)
    added = sum(1 for ln in text.splitlines() if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in text.splitlines() if ln.startswith("-") and not ln.startswith("---"))
    letter = {"add": "A", "delete": "D", "update": "M", "move": "R"}.get(d.kind, "M")
    target = f" → {d.move_path}" if d.move_path else ""
    return f"{letter} {d.path}{target} +{added} -{removed}"


class FileChangeBlock(Block):
    """An edit the agent made: each file as a syntax-highlighted unified diff."""

    def __init__(self, ev: FileChanges) -> None:
        super().__init__(classes="block filechange")
        self.event = ev

    def _title(self) -> str:
        ev = self.event
        status = {"completed": "", "inProgress": "  … applying", "declined": "  ✗ declined",
                  "failed": "  ✗ failed", "interrupted": "  ✗ interrupted"}.get(ev.status, f"  ({ev.status})")
        n = len(ev.changes)
        return f"✎ edit: {n} file{'s' if n != 1 else ''}{status}"

    def compose(self) -> ComposeResult:
        yield Static(Text(self._title(), style="bold"), classes="block-head")
        for d in self.event.changes:
            with Collapsible(title=diff_stat(d), collapsed=False):
                yield DiffView(unified(d))

    async def update_event(self, ev: FileChanges) -> None:
        """The same edit with a new status (proposed → applied / declined)."""
        self.event = ev
        await self.recompose()

    def copy_text(self) -> str:
        return "\n".join(unified(d) for d in self.event.changes)


def _turn_line(ev: TurnFinished, usage: TokenUsage | None, stable: bool = False) -> Text:
    ok = ev.status == "completed"
    line = Text("── " + ("✓ " if ok else "✗ "), style="dim")
    line.append(f"turn {ev.status}", style="dim" if ok else "bold")
    if not stable:
        line.append(f" in {ev.seconds:.1f}s", style="dim")
    if usage is not None and not stable:
        line.append(f" · {turn_tokens(usage)}", style="dim")
    if ev.error:
        line.append(f"\n   ! {ev.error}")
    if ev.capture_error:
        line.append(f"\n   ! snapshot: {ev.capture_error}")
    if ev.files:
        line.append(f"\n   files changed: {len(ev.files)}", style="dim")
        for st in ev.files:
            line.append(f"\n     {stat_label(st)}")
    return line


class TurnBlock(Block):
    """The end of a turn: status, duration, token usage and the files the turn changed."""

    def __init__(self, ev: TurnFinished, usage: TokenUsage | None = None) -> None:
        super().__init__(classes="block turn")
        self.event = ev
        self.usage = usage

    def compose(self) -> ComposeResult:
        yield Static(_turn_line(self.event, self.usage, _stable(self)))

    def copy_text(self) -> str:
        return _turn_line(self.event, self.usage).plain


NOTICE_MARK = {"info": "•", "warning": "⚠", "error": "!"}
DECISION_WORDS = {"accept": "✓ approved", "acceptForSession": "✓ approved for this session",
                  "decline": "✗ declined", "cancel": "✗ cancelled (turn stopped)"}


def notice_text(ev: Any) -> tuple[str, str]:
    """(text, level) of a notice-like event: Notice, ErrorNotice, ApprovalDecided."""
    if isinstance(ev, ErrorNotice):
        return (f"{ev.message} (retrying…)" if ev.will_retry else ev.message), "warning" if ev.will_retry else "error"
    if isinstance(ev, ApprovalDecided):
        word = DECISION_WORDS.get(ev.decision, f"• {ev.decision}")
        return f"{word}: {short_command(ev.summary)}", "info"
    if isinstance(ev, Notice):
        return ev.text, ev.level
    return str(ev), "info"


class NoticeBlock(Block):
    """A line from codexr or Codex: errors, retries, approval decisions, restarts, /status output."""

    def __init__(self, ev: Any) -> None:
        self.text, self.level = notice_text(ev)
        super().__init__(classes=f"block notice -{self.level}")
        self.event = ev

    def compose(self) -> ComposeResult:
        mark = "" if isinstance(self.event, ApprovalDecided) else NOTICE_MARK.get(self.level, "•") + " "
        yield Static(Text(mark + self.text))

    def copy_text(self) -> str:
        return self.text


def build_block(ev: Any, usage: TokenUsage | None = None) -> Block | None:
    """The static block for an event in its final state (None for events that draw no block)."""
    if isinstance(ev, UserPrompt):
        return PromptBlock(ev)
    if isinstance(ev, AgentMessage):
        return AgentBlock(ev.item_id, ev.text)
    if isinstance(ev, AgentDelta):
        return AgentBlock(ev.item_id, ev.delta)
    if isinstance(ev, Reasoning):
        return ReasoningBlock(ev)
    if isinstance(ev, CommandFinished):
        return CommandBlock(ev.item_id, ev.command, ev)
    if isinstance(ev, CommandStarted):
        return CommandBlock(ev.item_id, ev.command)
    if isinstance(ev, FileChanges):
        return FileChangeBlock(ev)
    if isinstance(ev, TurnFinished):
        return TurnBlock(ev, usage)
    if isinstance(ev, Notice | ErrorNotice | ApprovalDecided):
        return NoticeBlock(ev)
    return None
