"""The transcript: a view of the thread's append-only event log, with a block cursor.

Events are folded into entries (one per block); only a window of at most `MAX_MOUNTED` entries has widgets —
normally the newest (a fresh one holds `SHOW_MORE`). The window slides: `e` (or Up on the first block)
rebuilds earlier blocks from their events and unmounts as many at the bottom, Down past the last block does
the reverse, Home and End jump, and leaving the transcript (or new output while the view follows the end)
brings the newest back. So a long session stays responsive however far back the user reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual import events
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Static

from ..codex.events import (
    AgentDelta,
    AgentMessage,
    ApprovalDecided,
    CommandFinished,
    CommandOutput,
    CommandStarted,
    ErrorNotice,
    FileChanges,
    Notice,
    Reasoning,
    TokenUsage,
    TurnFinished,
    UserPrompt,
)
from .actions import bindings
from .blocks import AgentBlock, Block, CommandBlock, FileChangeBlock, build_block


@dataclass
class Entry:
    """One block's worth of the log: the event it is drawn from (latest state) and its widget if mounted."""

    key: str
    event: Any
    usage: TokenUsage | None = None
    output: list[str] = field(default_factory=list)  # a running command's output so far, in pieces
    waiting: bool = False  # a command Codex asks the user about: not running until answered
    widget: Block | None = None


class Transcript(VerticalScroll, can_focus=True):
    """The scrolling list of blocks; focus it (Ctrl+Up) to move the block cursor."""

    BINDINGS = bindings("transcript")  # type: ignore[assignment]
    # Mounting is what costs: a resumed 500-turn thread (bench/bench_tui.py, 2-core VM under load 7) drew in
    # 14-20 s with 300 blocks mounted, 5 s with 100 and 2.3 s with 50 (a finished agent message, a Markdown
    # widget of ~25 widgets, is ~4x any other block); keys echo in under 10 ms either way once drawn.
    MAX_MOUNTED = 100  # the bound as the window grows: ~16 turns, ~20 screens of a 40-row terminal
    SHOW_MORE = 40  # blocks shown per step, and the size of a fresh window (a resumed thread, a jump)

    class RewindHere(Message):
        """The user asked to rewind to the prompt under the cursor."""

        def __init__(self, number: int) -> None:
            super().__init__()
            self.number = number

    class Leave(Message):
        """The user wants the composer back."""

    def __init__(self, banner: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.banner = banner
        self.entries: list[Entry] = []
        self._by_key: dict[str, Entry] = {}
        # commands Codex asks the user about; the request can arrive before the command's item/started does
        self._awaiting: set[str] = set()
        self._first = 0  # index of the first entry with a widget
        self._end = 0  # one past the last entry with a widget (len(entries) when the window holds the end)
        self._usage: TokenUsage | None = None
        self._seq = 0
        self.cursor: int | None = None
        self._stick = True
        self._sized = Size(0, 0)  # the size the blocks were last laid out for
        self._anchor: tuple[Widget, float] | None = None  # the block at the top of a scrolled-up view

    def compose(self) -> Iterable[Widget]:
        yield Static("", id="fold")
        if self.banner:  # the demo's Markdown; the plain app does not load Markdown before its first frame
            from textual.widgets import Markdown

            yield Markdown(self.banner, id="banner")
        else:
            yield Static("", id="banner")
        yield Static("", id="later")

    def on_mount(self) -> None:
        self._show_chrome()

    def _following(self) -> bool:
        """New blocks keep the view at the end unless the user scrolled up or holds the block cursor."""
        return self._stick and self.cursor is None

    def _follow(self) -> None:
        self._stick = True
        # Anchored, the view is kept at the end inside the layout pass that places a new block (Textual's
        # compositor), so the frame that lays the block out also shows it. Before, the scroll to the end waited for
        # that frame and cost one more: a full repaint per new block once the transcript filled the screen, 15-35 ms
        # of CPU each at the 5th-8th prompt and 3-5x that in wall time under load (issue 20 §2, Enter -> answer).
        if self.max_scroll_y > 0:  # (while the blocks fit, an anchored view would draw them at its bottom)
            self.anchor()
        self.call_after_refresh(self.scroll_end, animate=False, immediate=True)  # no-op when the anchor held

    def watch_virtual_size(self, size: Size) -> None:
        """Blocks that fit the view again (a new thread, a taller terminal) are drawn from its top: no anchor; blocks
        that outgrow it while the view follows are followed, however they grew."""
        fits = size.height <= self.container_size.height
        if self.is_anchored and fits:
            self._unanchor()
            self.scroll_to(y=0, animate=False, immediate=True)
        elif not fits and self.container_size.height and not self.is_anchored and self._following():
            # a reloaded thread's answers are Markdown, which lays out its paragraphs after the block is mounted (a
            # pass later, or several under load): the follow that ran when the thread was redrawn saw them fit, and
            # the view stayed at the top of a thread that had grown past it (the tmux redo test, ~1 run in 10)
            self.anchor()

    def _unanchor(self) -> None:
        """The view no longer follows the end (the user scrolled up or holds the block cursor)."""
        if self.is_anchored:
            self.anchor(False)

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if self.size != self._sized:
            return  # a new size clamping the scroll, not the user: on_resize puts the view back
        if new_value < old_value - 0.5 and new_value < self.max_scroll_y:
            self._stick = False  # the user scrolled up: stay where they are (a taller view clamping is not that)
            self._unanchor()
        elif new_value >= self.max_scroll_y - 1:
            self._stick = True
        if not self._following():
            self._anchor = self._top_block()  # what the user reads now, kept in place across a resize

    def _top_block(self) -> tuple[Widget, float] | None:
        """The first block whose top line is in view (else the one filling the view), and that line's row in it."""
        y = self.scroll_y
        shown = [w for w in self.children if w.display and w.virtual_region.bottom > y]
        first = next((w for w in shown if y <= w.virtual_region.y < y + self.size.height), shown[0] if shown else None)
        return None if first is None else (first, first.virtual_region.y - y)

    def on_resize(self, event: events.Resize) -> None:
        """A new terminal size reflows the blocks: the end stays in view, or what the user scrolled to stays put."""
        if event.size == self._sized:
            return  # only the content changed: apply() follows it
        self._sized = event.size
        if self._following():
            self._follow()
        elif self._anchor is not None and self._anchor[0].is_attached:
            widget, offset = self._anchor
            self.call_after_refresh(lambda: self.scroll_to(y=widget.virtual_region.y - offset, animate=False,
                                                           immediate=True))

    def _show_chrome(self) -> None:
        fold = self.query_one("#fold", Static)
        fold.display = self._first > 0
        if self._first:
            fold.update(Text(f"⋯ {self._first} earlier blocks folded away (Ctrl+Up, then e: show them)"))
        self.query_one("#banner").display = bool(self.banner) and not self.entries
        later = self.query_one("#later", Static)
        newer = len(self.entries) - self._end
        later.display = newer > 0
        if newer:
            later.update(Text(f"⋯ {newer} later blocks (Down on the last block shows them; Tab: back to the newest)"))
            if self.children[-1] is not later:
                self.move_child(later, after=self.children[-1])

    # ------------------------------------------------------------------ the log
    def _key(self, prefix: str, item_id: str) -> str:
        if item_id:
            return f"{prefix}:{item_id}"
        self._seq += 1
        return f"{prefix}:#{self._seq}"

    def _new(self, key: str, ev: Any) -> Entry:
        entry = Entry(key, ev)
        self.entries.append(entry)
        self._by_key[key] = entry
        return entry

    def record(self, ev: Any) -> tuple[Entry | None, bool]:
        """Fold an event into the log: (its entry, whether the entry is new). Touches no widget."""
        if isinstance(ev, TokenUsage):
            self._usage = ev
            return None, False
        if isinstance(ev, UserPrompt):
            self._usage = None
            return self._new(self._key("prompt", ""), ev), True
        if isinstance(ev, AgentDelta | AgentMessage):
            key = f"agent:{ev.item_id}"
            entry = self._by_key.get(key)
            if entry is None:
                text = ev.delta if isinstance(ev, AgentDelta) else ev.text
                return self._new(key, AgentMessage(ev.item_id, text)), True
            text = entry.event.text + ev.delta if isinstance(ev, AgentDelta) else ev.text
            entry.event = AgentMessage(ev.item_id, text)
            return entry, False
        if isinstance(ev, CommandStarted | CommandOutput | CommandFinished):
            key = f"cmd:{ev.item_id}"
            entry = self._by_key.get(key)
            if entry is None:
                if isinstance(ev, CommandOutput):
                    return None, False
                entry = self._new(key, ev)
                entry.waiting = isinstance(ev, CommandStarted) and ev.item_id in self._awaiting
                return entry, True
            if isinstance(ev, CommandOutput):
                entry.output.append(ev.delta)
            else:
                entry.event = ev
            return entry, False
        if isinstance(ev, FileChanges | Reasoning):
            key = self._key("edit" if isinstance(ev, FileChanges) else "reason", ev.item_id)
            entry = self._by_key.get(key)
            if entry is None:
                return self._new(key, ev), True
            entry.event = ev
            return entry, False
        if isinstance(ev, TurnFinished):
            entry = self._new(self._key("turn", ""), ev)
            entry.usage = self._usage
            return entry, True
        if isinstance(ev, Notice | ErrorNotice | ApprovalDecided):
            return self._new(self._key("notice", ""), ev), True
        return None, False

    def _build(self, entry: Entry) -> Block | None:
        ev = entry.event
        if isinstance(ev, CommandStarted):
            block: Block | None = CommandBlock(ev.item_id, ev.command, waiting=entry.waiting)
            if entry.output:
                assert isinstance(block, CommandBlock)
                entry.output[:] = ["".join(entry.output)]
                block.output = entry.output[0]
            return block
        return build_block(ev, entry.usage)

    # ------------------------------------------------------------------ live
    async def apply(self, ev: Any) -> None:
        """Show one live event (streaming into the block it belongs to)."""
        follow = self._following()
        if not follow:
            self._unanchor()
        await self._apply(ev, follow)
        if follow:  # scrolled once the new content is laid out, so the end is the new end
            self._follow()

    async def _apply(self, ev: Any, follow: bool) -> None:
        at_end = self._end == len(self.entries)
        entry, new = self.record(ev)
        if entry is None:
            return
        if new and not at_end:  # the user reads earlier blocks: the new one waits (counted) unless they follow
            if follow:
                await self.to_end()
            else:
                self._show_chrome()
            return
        if new:
            self._end = len(self.entries)
            if isinstance(ev, AgentDelta):
                block: Block | None = AgentBlock(ev.item_id, ev.delta)
            else:
                block = self._build(entry)
            if block is None:
                return
            entry.widget = block
            # in one batch: the frame timer fired while a block mounted (its children done, itself not) and laid the
            # screen out, then again once it was: two passes a block; a frame due meanwhile now waits (issue 20 §2)
            with self.app.batch_update():
                await self.mount(block, before=self.query_one("#later"))
            await self._fold()
            self._show_chrome()
            return
        w = entry.widget
        if w is None or not w.is_attached:
            return
        if isinstance(w, AgentBlock):
            if isinstance(ev, AgentDelta):
                await w.write(ev.delta)
            elif isinstance(ev, AgentMessage):
                await w.finish(ev.text)
        elif isinstance(w, CommandBlock):
            if isinstance(ev, CommandOutput):
                w.add_output(ev.delta)
            elif isinstance(ev, CommandFinished):
                w.finish(ev)
        elif isinstance(w, FileChangeBlock) and isinstance(ev, FileChanges):
            await w.update_event(ev)
        else:
            new_block = self._build(entry)
            if new_block is not None:
                await self.mount(new_block, after=w)
                await w.remove()
                entry.widget = new_block

    def command_waiting(self, item_id: str, waiting: bool) -> None:
        """Show a started command as waiting for the user's approval, or (answered) as running again."""
        if waiting:
            self._awaiting.add(item_id)
        else:
            self._awaiting.discard(item_id)
        entry = self._by_key.get(f"cmd:{item_id}")
        if entry is None or entry.waiting == waiting:
            return
        entry.waiting = waiting
        if isinstance(entry.widget, CommandBlock) and entry.widget.is_attached:
            entry.widget.set_waiting(waiting)

    async def note(self, text: str, level: str = "info") -> None:
        """A codexr line in the transcript (slash command results, errors)."""
        await self.apply(Notice(text, level))

    async def reset(self, events: Iterable[Any]) -> None:
        """Redraw from a whole thread's events (finished turns are drawn statically)."""
        await self.remove_children(Block)
        self.entries.clear()
        self._by_key.clear()
        self._usage = None
        self.cursor = None
        for ev in events:
            self.record(ev)
        await self._mount_end()
        self._follow()

    async def _mount_end(self) -> None:
        """Mount the newest entries (nothing is mounted when this is called).

        A fresh window (a resumed thread, a jump) holds SHOW_MORE blocks, several screens, not MAX_MOUNTED: it
        grows as the user reads on. Mounting 100 blocks of a 500-turn thread took 3.6-5.7 s (bench_tui.py).
        """
        await self._mount_window(max(0, len(self.entries) - self.SHOW_MORE), len(self.entries))

    async def _mount_window(self, start: int, end: int) -> None:
        """Mount entries [start, end) (nothing is mounted when this is called)."""
        self._first, self._end = start, end
        widgets = self._build_range(start, end)
        if widgets:
            await self.mount_all(widgets, before=self.query_one("#later"))
        self._show_chrome()

    def _build_range(self, start: int, stop: int) -> list[Block]:
        """Build the widgets of entries [start, stop) from their events (to be mounted by the caller)."""
        widgets = []
        for entry in self.entries[start:stop]:
            entry.widget = self._build(entry)
            if entry.widget is not None:
                widgets.append(entry.widget)
        return widgets

    async def _unmount_window(self) -> None:
        """Unmount every mounted block (a jump or a return to the end mounts a fresh window)."""
        old = [e.widget for e in self.entries[self._first:self._end] if e.widget is not None]
        for e in self.entries[self._first:self._end]:
            e.widget = None
        self._set_cursor(None)
        await self.remove_children(old)

    async def to_end(self) -> None:
        """Bring the window back to the newest blocks (after reading far back)."""
        if self._end == len(self.entries):
            return
        await self._unmount_window()
        await self._mount_end()

    async def to_start(self) -> None:
        """Bring the window to the oldest blocks: the thread's first prompt, however long the thread."""
        if self._first == 0:
            return
        await self._unmount_window()
        await self._mount_window(0, min(len(self.entries), self.SHOW_MORE))

    async def _fold(self) -> None:
        """Unmount the oldest blocks once too many are mounted (they are rebuilt on demand)."""
        mounted = self._end - self._first
        if mounted <= self.MAX_MOUNTED:
            return
        cut = self._first + (mounted - self.MAX_MOUNTED) + self.SHOW_MORE // 2
        cut = min(cut, self._end - 1)
        old = [e.widget for e in self.entries[self._first:cut] if e.widget is not None]
        anchor = next((e.widget for e in self.entries[cut:self._end] if e.widget is not None), None)
        offset = anchor.virtual_region.y - self.scroll_y if anchor is not None else 0.0
        for e in self.entries[self._first:cut]:
            e.widget = None
        self._first = cut
        if self.cursor is not None and self.cursor < cut:
            self.cursor = cut
        await self.remove_children(old)
        if anchor is not None and not self._following():
            # what the user reads stays where it was on screen (the blocks above it went away)
            self.call_after_refresh(lambda: self.scroll_to(y=anchor.virtual_region.y - offset, animate=False,
                                                           immediate=True))

    async def _unfold_bottom(self) -> None:
        """Unmount the newest mounted blocks once too many are mounted (reading far back)."""
        mounted = self._end - self._first
        if mounted <= self.MAX_MOUNTED:
            return
        cut = max(self._first + 1, self._end - (mounted - self.MAX_MOUNTED) - self.SHOW_MORE // 2)
        old = [e.widget for e in self.entries[cut:self._end] if e.widget is not None]
        for e in self.entries[cut:self._end]:
            e.widget = None
        self._end = cut
        if self.cursor is not None and self.cursor >= cut:
            self.cursor = cut - 1
        await self.remove_children(old)

    async def show_earlier(self) -> None:
        """Rebuild up to SHOW_MORE blocks before the first one shown."""
        if self._first == 0:
            return
        start = max(0, self._first - self.SHOW_MORE)
        widgets = self._build_range(start, self._first)
        anchor = next((e.widget for e in self.entries[self._first:] if e.widget is not None), None)
        self._first = start
        if widgets:
            if anchor is not None:
                await self.mount_all(widgets, before=anchor)
                # keep the block the user was reading in place: Page Up then walks the blocks just shown
                self.call_after_refresh(self.scroll_to_widget, anchor, animate=False, top=True)
            else:
                await self.mount_all(widgets, before=self.query_one("#later"))
        await self._unfold_bottom()
        self._show_chrome()

    async def show_later(self) -> None:
        """Rebuild up to SHOW_MORE blocks after the last one shown (the reverse of show_earlier)."""
        if self._end >= len(self.entries):
            return
        stop = min(len(self.entries), self._end + self.SHOW_MORE)
        widgets = self._build_range(self._end, stop)
        self._end = stop
        if widgets:
            await self.mount_all(widgets, before=self.query_one("#later"))
        await self._fold()
        self._show_chrome()

    # ------------------------------------------------------------------ block cursor
    def mounted_blocks(self) -> list[tuple[int, Block]]:
        """(entry index, widget) of every block on screen, in order."""
        return [(i, e.widget) for i, e in enumerate(self.entries[self._first:self._end], self._first)
                if e.widget is not None]

    def _set_cursor(self, index: int | None) -> None:
        for b in self.query(".-cursor"):
            b.remove_class("-cursor")
        self.cursor = index
        if index is None:
            return
        self._unanchor()
        w = self.entries[index].widget
        if w is not None:
            w.add_class("-cursor")
            self.scroll_to_widget(w, animate=False, top=w.outer_size.height > self.size.height)

    def current(self) -> Block | None:
        """The block under the cursor."""
        if self.cursor is None or self.cursor >= len(self.entries):
            return None
        return self.entries[self.cursor].widget

    def enter_cursor(self, last: bool = True) -> None:
        """Put the cursor on the last (or first) block shown."""
        blocks = self.mounted_blocks()
        if blocks:
            self._set_cursor(blocks[-1 if last else 0][0])

    def move(self, step: int) -> None:
        """Move the block cursor by `step` blocks."""
        blocks = [i for i, _ in self.mounted_blocks()]
        if not blocks:
            return
        if self.cursor not in blocks:
            self._set_cursor(blocks[-1])
            return
        pos = blocks.index(self.cursor) + step
        self._set_cursor(blocks[max(0, min(len(blocks) - 1, pos))])

    async def on_blur(self) -> None:
        self._set_cursor(None)
        await self.to_end()
        self._follow()

    async def action_cursor_up(self) -> None:
        """Previous block (shows folded blocks when at the top)."""
        blocks = self.mounted_blocks()
        if blocks and self.cursor == blocks[0][0] and self._first:
            await self.show_earlier()
        self.move(-1)

    async def action_cursor_down(self) -> None:
        """Next block (shows later blocks when at the bottom of what is mounted)."""
        blocks = self.mounted_blocks()
        if blocks and self.cursor == blocks[-1][0] and self._end < len(self.entries):
            await self.show_later()
        self.move(1)

    def action_toggle_block(self) -> None:
        """Expand or collapse the block under the cursor."""
        b = self.current()
        if b is not None:
            b.toggle()

    def action_copy_block(self) -> None:
        """Copy the block under the cursor to the clipboard."""
        b = self.current()
        if b is not None:
            self.app.copy_to_clipboard(b.copy_text())
            self.app.notify("copied the block to the clipboard")

    def action_rewind_here(self) -> None:
        """Start a rewind to the prompt of the turn under the cursor (the prompt itself, or any block after it)."""
        if self.cursor is not None:
            for entry in reversed(self.entries[:self.cursor + 1]):
                ev = entry.event
                if isinstance(ev, UserPrompt) and ev.number:
                    self.post_message(self.RewindHere(ev.number))
                    return
        self.app.notify("move the cursor to a prompt (▶) or a block of its turn to rewind to it", severity="warning")

    async def action_first_block(self) -> None:
        """The thread's first block (folded ones come back)."""
        await self.to_start()
        self.call_after_refresh(self.enter_cursor, False)  # once the blocks just mounted have their sizes

    async def action_last_block(self) -> None:
        """The thread's last block."""
        await self.to_end()
        self.call_after_refresh(self.enter_cursor, True)

    async def action_show_earlier(self) -> None:
        """Show blocks that were folded away."""
        await self.show_earlier()

    def action_to_composer(self) -> None:
        """Back to the composer."""
        self.post_message(self.Leave())
