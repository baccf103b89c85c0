"""The composer: a multi-line prompt with history, slash-command and @path completion, and a queue line.

Enter sends, Ctrl+J (or Shift+Enter where the terminal reports it) inserts a newline; Up/Down walk the
prompt history when the cursor is on the first/last line; Tab or Enter accepts a completion. `@` completes
workspace paths: the directory's entries at once, then Codex's fuzzy file search (`file_search`, run in a
worker). A pasted path to an image file becomes an attachment, shown as `[image: name.png]`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option
from textual.widgets.text_area import Selection

from ..codex.images import image_label, pasted_image
from .actions import bindings, slash_matches
from .splash import PLACEHOLDER

MAX_PATHS = 40
_AT_PATH = re.compile(r"(?:^|\s)@(\S*)$")


def path_completions(workspace: str, partial: str) -> list[str]:
    """Workspace paths that complete `partial` (directories end with /); .git is never offered."""
    head, _, stem = partial.rpartition("/")
    base = os.path.join(workspace, head) if head else workspace
    real_ws = os.path.realpath(workspace)
    if not os.path.realpath(base).startswith(real_ws):
        return []
    out = []
    try:
        with os.scandir(base) as it:
            for e in it:
                if e.name == ".git" or not e.name.startswith(stem):
                    continue
                if e.name.startswith(".") and not stem.startswith("."):
                    continue
                rel = f"{head}/{e.name}" if head else e.name
                out.append(rel + "/" if e.is_dir(follow_symlinks=False) else rel)
    except OSError:
        return []
    return sorted(out)[:MAX_PATHS]


PASTE_WINDOW_S = 0.05  # keys within this of an Enter: a paste; a terminal hands one over in a single read


class PromptArea(TextArea):
    """The text area itself (bindings live on the Composer around it)."""

    async def _on_paste(self, event: events.Paste) -> None:
        """A pasted path to an image file attaches the image (as the official TUI does); anything else is text."""
        composer = self.parent
        path = pasted_image(event.text, composer.workspace) if isinstance(composer, Composer) else None
        if path is None or not isinstance(composer, Composer):
            await super()._on_paste(event)
            return
        event.stop()
        event.prevent_default()
        label = image_label(path)
        composer.attachments[label] = path
        self.insert(label + " ")


class Composer(Vertical):
    """Prompt input with completion dropdown and the queued-prompts line."""

    BINDINGS = bindings("composer")  # type: ignore[assignment]

    class Submitted(Message):
        """The user sent a prompt or slash command (with the images still named in its text)."""

        def __init__(self, text: str, images: tuple[str, ...] = ()) -> None:
            super().__init__()
            self.text = text
            self.images = images

    def __init__(self, workspace: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.workspace = workspace or os.getcwd()
        self.history: list[str] = []
        self._hist_pos: int | None = None
        self._draft = ""
        self._completing = ""  # "slash" | "path" | ""
        self._completed_for = ""  # the text the dropdown was made for
        self._enter: tuple[tuple[int, int], tuple[int, int], str] | None = None  # a newline that may yet send
        self._enter_timer: Timer | None = None
        self.attachments: dict[str, str] = {}  # `[image: name.png]` -> the pasted image's path
        self.file_search: Callable[[str], list[str]] | None = None  # fuzzy search (the app sets it: Codex's)

    def compose(self) -> ComposeResult:
        yield Static("", id="queued")
        yield OptionList(id="completions")
        yield PromptArea(id="prompt", soft_wrap=True, show_line_numbers=False, compact=True,
                         placeholder=PLACEHOLDER)

    def on_mount(self) -> None:
        self.query_one("#completions", OptionList).display = False
        self.query_one("#queued", Static).display = False
        self.query_one("#completions", OptionList).can_focus = False

    @property
    def area(self) -> PromptArea:
        """The TextArea."""
        return self.query_one(PromptArea)

    @property
    def text(self) -> str:
        """What is typed."""
        return self.area.text

    def set_text(self, text: str) -> None:
        """Replace what is typed (cursor at the end)."""
        self.area.load_text(text)
        self.area.move_cursor(self.area.document.end)

    def put_back(self, text: str) -> None:
        """A rewound prompt back for editing, selected as a pre-filled field is: typed after it, `/redo` became the
        end of that prompt and was sent to the agent; typed over the selection it runs. Enter sends the prompt as it
        is, an arrow key, Home or End keeps it to edit."""
        self.area.load_text(text)
        self.area.selection = Selection((0, 0), self.area.document.end)

    def focus_prompt(self) -> None:
        """Put the keyboard focus in the text area."""
        self.area.focus()

    def show_queued(self, queued: list[str]) -> None:
        """The prompts waiting for the running turn."""
        line = self.query_one("#queued", Static)
        line.display = bool(queued)
        if queued:
            t = Text(f"⏳ queued ({len(queued)}): ", style="bold")
            t.append("  ·  ".join(q.splitlines()[0][:60] for q in queued))
            line.update(t)

    # ------------------------------------------------------------------ completion
    @property
    def completing(self) -> bool:
        """The completion dropdown is open."""
        return bool(self._completing)

    def close_completions(self) -> None:
        """Hide the dropdown."""
        self._completing = ""
        self.query_one("#completions", OptionList).display = False

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        event.stop()
        self._update_completions()

    def _update_completions(self) -> None:
        text = self._completed_for = self.text
        options: list[Option] = []
        kind = ""
        if text.startswith("/") and "\n" not in text and " " not in text:
            kind = "slash"
            for a in slash_matches(text):
                label = Text(f"{a.slash} {a.args}".rstrip(), style="bold")
                label.append(f"  {a.description}", style="dim")
                options.append(Option(label, id=a.slash))
        else:
            row, col = self.area.cursor_location
            line = self.area.document.get_line(row)[:col]
            m = _AT_PATH.search(line)
            if m is not None:
                kind = "path"
                options = [Option("@" + p, id=p) for p in path_completions(self.workspace, m.group(1))]
                if m.group(1) and self.file_search is not None:
                    self._search(m.group(1), [str(o.id) for o in options])
        ol = self.query_one("#completions", OptionList)
        if not options or (kind == "slash" and len(options) == 1 and options[0].id == text):
            self.close_completions()
            return
        self._completing = kind
        ol.clear_options()
        ol.add_options(options)
        ol.highlighted = 0
        ol.display = True

    def _at_query(self) -> str | None:
        """The `@word` being typed at the cursor (None when the cursor is not on one)."""
        row, col = self.area.cursor_location
        m = _AT_PATH.search(self.area.document.get_line(row)[:col])
        return m.group(1) if m is not None else None

    def _search(self, query: str, shown: list[str]) -> None:
        """Run the fuzzy file search in a worker; its matches join the dropdown if `@query` is still being typed."""
        search = self.file_search
        if search is None:
            return

        def work() -> None:
            try:
                found = search(query)
            except Exception:  # Codex busy or gone: the prefix matches stay
                return
            self.app.call_from_thread(self._found, query, shown, found)

        self.run_worker(work, thread=True, exclusive=True, group="file-search", exit_on_error=False)

    def _found(self, query: str, shown: list[str], found: list[str]) -> None:
        if self._at_query() != query:
            return  # typed on meanwhile: a newer search answers
        merged = list(dict.fromkeys([*shown, *found]))[:MAX_PATHS]
        if not merged:
            return
        ol = self.query_one("#completions", OptionList)
        ol.clear_options()
        ol.add_options([Option("@" + p, id=p) for p in merged])
        ol.highlighted = 0
        ol.display = True
        self._completing = "path"

    def attach(self, images: tuple[str, ...]) -> None:
        """Images attached to the prompt being written, each shown as `[image: name.png]` in the text."""
        for path in images:
            label = image_label(path)
            self.attachments[label] = path
            self.area.insert(label + " ")

    def mention(self, query: str = "") -> None:
        """/mention: `@` (and the query) at the cursor, with the file search open, as the official TUI's /mention."""
        row, col = self.area.cursor_location
        before = self.area.document.get_line(row)[:col]
        self.area.insert(("" if not before or before.endswith(" ") else " ") + "@" + query)
        self.focus_prompt()

    def _accept(self) -> str | None:
        """Put the highlighted completion into the text; returns what it inserted."""
        ol = self.query_one("#completions", OptionList)
        if ol.highlighted is None:
            self.close_completions()
            return None
        choice = ol.get_option_at_index(ol.highlighted).id or ""
        kind = self._completing
        self.close_completions()
        if kind == "slash":
            self.set_text(choice)
        else:
            row, col = self.area.cursor_location
            line = self.area.document.get_line(row)[:col]
            m = _AT_PATH.search(line)
            if m is None:
                return None
            start = (row, col - len(m.group(1)))
            tail = "" if choice.endswith("/") else " "
            self.area.replace(choice + tail, start, (row, col))
        return choice

    # ------------------------------------------------------------------ actions (keys from the registry)
    def _after_typed_keys(self, fn: Callable[[], object]) -> None:
        """Run `fn` once the text area has taken the keys typed before this one (a burst: fast typing, tmux)."""
        # Enter, Ctrl+J, Up and Down are priority keys the app handles at once, while typed characters wait in
        # the text area's queue: queued behind them, the action sees the whole text.

        def run() -> None:
            if self.text != self._completed_for:  # the dropdown must match the text the key acts on
                self._update_completions()
            fn()

        self.area.call_later(run)

    def action_send(self) -> None:
        """Send the prompt (or accept a completion: a slash command runs at once)."""
        before, enter = getattr(self.app, "key_times", (0.0, 0.0))
        typed = enter - before > PASTE_WINDOW_S  # no key right before it: typed, not the middle of a paste
        self._after_typed_keys(self._send if typed else self._send_unless_pasted)

    def _send_unless_pasted(self) -> None:
        """Enter in a burst of keys, as the official TUI takes it without bracketed paste: keys right behind it
        make it a paste's newline. It goes in as a newline at once; if nothing follows within PASTE_WINDOW_S, it
        sends instead. (An Enter typed after a pause sends at once: the wait was most of Enter -> first output's
        lead over the official TUI's, bench_tui.py.)"""
        if self._completing:
            self._send()
            return
        start = self.area.cursor_location
        self.area.insert("\n")
        self._enter = (start, self.area.cursor_location, self.text)
        if self._enter_timer is not None:
            self._enter_timer.stop()
        self._enter_timer = self.set_timer(PASTE_WINDOW_S, self._enter_settled)

    def _enter_settled(self) -> None:
        """No key came right behind the last Enter: it was typed, not pasted. Take its newline back and send."""
        enter, self._enter, self._enter_timer = self._enter, None, None
        if enter is None:
            return
        start, end, text = enter
        if self.text != text:
            return  # more keys came: a paste (its Enters stay newlines) or the user typed on
        self.area.delete(start, end)
        self._send()

    def _send(self) -> None:
        if self._completing:
            kind = self._completing
            choice = self._accept()
            if kind == "path" or choice is None:
                return
        text = self.text.strip()
        if not text:
            return
        if not text.startswith("/") and (not self.history or self.history[-1] != text):
            self.history.append(text)
        self._hist_pos = None
        images = tuple(path for label, path in self.attachments.items() if label in text)
        self.attachments.clear()
        self.set_text("")
        self.close_completions()
        self.post_message(self.Submitted(text, images))

    def action_newline(self) -> None:
        """Insert a newline at the cursor."""
        self._after_typed_keys(lambda: self.area.insert("\n"))

    def action_delete_to_line_start(self) -> None:
        """Ctrl+U, as readline and the official Codex TUI: the TextArea's own Ctrl+U stopped at the start of the
        wrapped row on screen, so a long prompt (one put back by a rewind) was never cleared."""
        self._after_typed_keys(self._delete_to_line_start)

    def _delete_to_line_start(self) -> None:
        area = self.area
        start, end = area.selection
        if start != end:  # a selection goes, as a key typed over it would
            area.delete(start, end)
            return
        row, col = end
        if col > 0:
            area.delete((row, 0), (row, col))
        elif row > 0:  # at the start of a line: join it to the line before, so Ctrl+U again goes on clearing
            area.delete((row - 1, len(area.document.get_line(row - 1))), (row, 0))

    def action_complete(self) -> None:
        """Accept the highlighted completion (Tab moves focus when none is open)."""
        if not self._completing:
            raise SkipAction()
        self._accept()

    def action_history_prev(self) -> None:
        """Previous history entry (or move the dropdown / the cursor up)."""
        self._after_typed_keys(self._history_prev)

    def _history_prev(self) -> None:
        if self._completing:
            self.query_one("#completions", OptionList).action_cursor_up()
            return
        if self.area.cursor_location[0] > 0 or not self.history:
            self.area.action_cursor_up()
            return
        if self._hist_pos is None:
            self._draft = self.text
            self._hist_pos = len(self.history)
        if self._hist_pos > 0:
            self._hist_pos -= 1
            self.set_text(self.history[self._hist_pos])
            self.close_completions()

    def action_history_next(self) -> None:
        """Next history entry (or move the dropdown / the cursor down)."""
        self._after_typed_keys(self._history_next)

    def _history_next(self) -> None:
        if self._completing:
            self.query_one("#completions", OptionList).action_cursor_down()
            return
        last_row = self.area.document.line_count - 1
        if self.area.cursor_location[0] < last_row or self._hist_pos is None:
            self.area.action_cursor_down()
            return
        self._hist_pos += 1
        if self._hist_pos >= len(self.history):
            self._hist_pos = None
            self.set_text(self._draft)
        else:
            self.set_text(self.history[self._hist_pos])
        self.close_completions()
