"""`codexr --plain`: the same session as the TUI in a line-mode REPL, for plain terminals, screen readers and scripts.

One thread prints: driver events land in a queue that the REPL drains while a turn runs (agent text is written
as its deltas arrive) and before each prompt, so output never tears the line being edited. A turn runs in the
foreground: Ctrl+C interrupts it, approvals are asked as prompts. On a terminal the line editor is
prompt-toolkit (history, slash-command completion with help text, the rewound prompt pre-filled); when stdin is
not a terminal, lines are read plainly from it (no editing, no completion), so piped scripts work too.
"""

from __future__ import annotations

import codecs
import datetime as dt
import os
import queue
import re
import select
import sys
import termios
import threading
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol, TextIO, TypeVar

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.filters import has_completions
from prompt_toolkit.history import InMemoryHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.keys import Keys

from snapshot_store import StoreError

from ..cmds.snapshot_cmds import when
from ..codex.events import (
    AgentDelta,
    AgentMessage,
    ApprovalAsked,
    ApprovalDecided,
    CodexDied,
    CommandFinished,
    CommandStarted,
    ErrorNotice,
    FileChanges,
    FileStat,
    Notice,
    Ready,
    Reasoning,
    StartFailed,
    Status,
    StatusChanged,
    ThreadLoaded,
    TokenUsage,
    TurnFinished,
    TurnStarted,
    UserPrompt,
    short_thread,
)
from ..codex.images import check_images, image_label, pasted_image, with_labels
from ..codex.permissions import FULL_ACCESS_QUESTION, FULL_ACCESS_WARNING, PRESETS, find_preset, matching_preset
from ..codex.translate import file_diffs, short_command
from ..errors import Stopped
from ..rewind.owners import conflicts
from ..rewind.picks import choice_hint, conflict_header, conflict_question, parse_choice
from ..services.background import background_text, stopped_text
from ..services.driver import Driver, Preview, PromptRow
from ..services.thread_label import Farewell
from ..session import RedoResult, SessionOptions
from .commands import COMMANDS as REGISTRY
from .lines import (
    plan_lines,
    plural,
    restored_counts,
    retry_line,
    settings_lines,
    show_path,
    since_rewind_lines,
    status_lines,
    thread_counts,
    turn_tokens,
    yours_kept,
)
from .vocab import CONVERSATION_MODES, FILE_MODES, RewindMode

T = TypeVar("T")
PROMPT = "codexr> "
OUTPUT_TAIL = 20
COMMANDS: dict[str, tuple[str, str]] = {c.name: c.line for c in REGISTRY}
"""Line mode's slash commands (app/shared/commands.py): name → (argument, what it does)."""
KEYS = ("Enter sends · Esc then Enter inserts a newline · Up/Down: earlier prompts · Tab completes a /command or "
        "an @file\n"
        "A pasted path to an image file (png, jpg, gif, webp) attaches the image: [image: name.png]\n"
        "Ctrl+C interrupts a running turn (at the prompt it clears the line) · Ctrl+D or /quit leaves")
ANSWERS = {"y": "accept", "yes": "accept", "a": "acceptForSession", "always": "acceptForSession",
           "n": "decline", "no": "decline", "c": "cancel", "cancel": "cancel"}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
ESCAPES = re.compile(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|O.|.)?")  # arrows, function keys: not text


def clean(text: str) -> str:
    """Text from the agent or a command without terminal control sequences (plain output only)."""
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def stat_text(st: FileStat) -> str:
    """`+3 -1` (or `binary`) for a file's line counts."""
    if st.added is None or st.removed is None:
        return "(no line counts)"
    return f"+{st.added} -{st.removed}"


# ------------------------------------------------------------------------------------------ input


_AT_WORD = re.compile(r"(?:^|\s)@(\S+)$")


class SlashCompleter(Completer):
    """Completes /commands (with their help text), the mode word of /rewind, the presets of /permissions and
    `@QUERY` with workspace files."""

    def __init__(self, files: Callable[[str], list[str]] | None = None) -> None:
        self.files = files  # Codex's fuzzy file search (asked off the editor's thread: complete_in_thread)

    def get_completions(self, document: Document, complete_event: CompleteEvent) -> Iterator[Completion]:
        """Command names while the first word is typed; rewind modes after `/rewind N `; `/permissions` presets;
        files after `@`."""
        text = document.text_before_cursor
        at = _AT_WORD.search(text)
        if at is not None and self.files is not None:
            try:
                found = self.files(at.group(1))
            except Exception:  # Codex not there (yet): no completion
                found = []
            for path in found:
                yield Completion("@" + path, -len(at.group(1)) - 1, display_meta="workspace file")
            return
        if not text.startswith("/"):
            return
        words = text.split(" ")
        if len(words) == 1:
            for name, (args, what) in COMMANDS.items():
                if name.startswith(text):
                    yield Completion(name, -len(text), display=f"{name} {args}".strip(), display_meta=what)
        elif words[0] == "/rewind" and len(words) == 3:
            for mode in RewindMode:
                if mode.startswith(words[2]):
                    yield Completion(mode, -len(words[2]), display_meta=f"restore {mode}")
        elif words[0] == "/permissions" and len(words) == 2:
            for preset in PRESETS:
                if preset.id.startswith(words[1]):
                    yield Completion(preset.id, -len(words[1]), display_meta=preset.summary())


class Reader(Protocol):
    """Where the REPL's lines come from."""

    def read(self, message: str, *, default: str = "", main: bool = False) -> str:
        """One line (EOFError at the end of input, KeyboardInterrupt on Ctrl+C)."""
        ...


class TerminalReader:
    """prompt-toolkit on a terminal: the main prompt has history, completion and a pre-filled default.

    A pasted path to an image file (bracketed paste) becomes `[image: name.png]` and the image an attachment:
    `attachments` maps each label to its file, for the prompt that still names it.
    """

    def __init__(self, files: Callable[[str], list[str]] | None = None, cwd: str = ".") -> None:
        keys = KeyBindings()
        self.attachments: dict[str, str] = {}

        @keys.add(Keys.BracketedPaste)
        def _paste(event: KeyPressEvent) -> None:
            data = event.data.replace("\r\n", "\n").replace("\r", "\n")
            image = pasted_image(data, cwd)
            if image is None:
                event.current_buffer.insert_text(data)
                return
            label = image_label(image)
            self.attachments[label] = image
            event.current_buffer.insert_text(label + " ")

        @keys.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @keys.add("enter", filter=~has_completions)
        def _enter(event: KeyPressEvent) -> None:
            # Without bracketed paste a terminal hands over a paste as keys, Enters included, in one read: an
            # Enter with more keys right behind it is the paste's newline (as in the official TUI), not a send.
            if any(k.key not in (Keys.ControlM, Keys.ControlJ) for k in event.app.key_processor.input_queue):
                event.current_buffer.insert_text("\n")
            else:
                event.current_buffer.validate_and_handle()

        self.main = PromptSession[str](history=InMemoryHistory(), completer=SlashCompleter(files),
                                       complete_while_typing=True, complete_in_thread=True, key_bindings=keys)
        self.answers = PromptSession[str]()

    def read(self, message: str, *, default: str = "", main: bool = False) -> str:
        """A line from the prompt-toolkit editor."""
        if main:
            return self.main.prompt(message, default=default)
        return self.answers.prompt(message)


class PipeReader:
    """Lines from a non-terminal stdin (a pipe or a file), echoed so the output reads like a session."""

    def __init__(self, stdin: TextIO, out: TextIO) -> None:
        self.stdin = stdin
        self.out = out

    def read(self, message: str, *, default: str = "", main: bool = False) -> str:
        """The next input line; EOFError at the end."""
        self.out.write(message)
        self.out.flush()
        line = self.stdin.readline()
        if not line:
            self.out.write("\n")
            raise EOFError
        self.out.write(line if line.endswith("\n") else line + "\n")
        return line.rstrip("\n")


class KeyWatch:
    """While a turn or a store operation runs, Ctrl+C reaches codexr as a key, not as SIGINT to the terminal's
    whole process group (which would also kill the Codex app-server). Other keys typed meanwhile are kept
    (`typed`): the next prompt starts with them, as the app's composer keeps what is typed during a turn."""

    def __init__(self, stdin: TextIO) -> None:
        self.fd = stdin.fileno() if stdin.isatty() else None
        self.saved: list[Any] | None = None
        self._chars: list[str] = []
        self.entered: list[str] = []  # lines typed ahead and sent with Enter, in order
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode

    def __enter__(self) -> KeyWatch:
        if self.fd is not None:
            self.saved = termios.tcgetattr(self.fd)
            mode = termios.tcgetattr(self.fd)
            mode[3] &= ~(termios.ISIG | termios.ICANON | termios.ECHO)
            mode[6][termios.VMIN] = 0
            mode[6][termios.VTIME] = 0
            termios.tcsetattr(self.fd, termios.TCSANOW, mode)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None and self.saved is not None:
            self.interrupted()  # what is still queued belongs to `typed`, not to the next reader
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self.saved)

    def interrupted(self, wait: float = 0.0) -> bool:
        """Ctrl+C was pressed since the last look (waits up to `wait` seconds for a key); keeps other keys."""
        if self.fd is None:
            return False
        ready, _, _ = select.select([self.fd], [], [], wait)
        if not ready:
            return False
        data = os.read(self.fd, 1024)
        self.keep(self._decode(data.replace(b"\x03", b"")))
        return b"\x03" in data

    def keep(self, text: str) -> None:
        """Add keys that arrived together: Backspace edits, escape sequences (arrows) are dropped, and an Enter
        ends a line (`entered`, run after the turn as a shell runs type-ahead) when it ends the chunk; an Enter
        with more keys after it in the same chunk is a newline — keys that arrive at once are a paste."""
        keys = ESCAPES.sub("", text)
        last = len(keys.rstrip("\r\n"))
        for i, ch in enumerate(keys):
            if ch in ("\x7f", "\b"):
                if self._chars:
                    self._chars.pop()
            elif ch in ("\r", "\n"):
                if i < last:
                    self._chars.append("\n")
                elif i == last:  # the Enter that ends the chunk sends the line; more Enters are empty lines
                    self.entered.append("".join(self._chars).strip("\n"))
                    self._chars.clear()
            elif ch.isprintable() or ch == "\t":
                self._chars.append(ch)

    @property
    def typed(self) -> str:
        """What was typed ahead after the last line sent with Enter: the next prompt starts with it."""
        return "".join(self._chars).strip("\n")


# ------------------------------------------------------------------------------------------ output


class Printer:
    """Renders driver events as plain lines (no colour, no cursor movement); agent text streams as it comes."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.at_line_start = True
        self.streamed: set[str] = set()
        self.started_commands: set[str] = set()
        self.tokens: TokenUsage | None = None  # the turn's latest usage

    def write(self, text: str) -> None:
        """Raw text, flushed at once (deltas show as they arrive)."""
        if text:
            self.out.write(text)
            self.out.flush()
            self.at_line_start = text.endswith("\n")

    def end_line(self) -> None:
        """Make sure the next output starts a line."""
        if not self.at_line_start:
            self.write("\n")

    def line(self, text: str = "") -> None:
        """A whole line, started on a fresh line."""
        self.end_line()
        self.write(text + "\n")

    def block(self, text: str, indent: str = "  ") -> None:
        """Several lines, indented."""
        for ln in text.rstrip("\n").split("\n"):
            self.line(indent + ln)

    def show(self, ev: Any) -> None:
        """Print one event (ApprovalAsked is the REPL's to ask)."""
        if isinstance(ev, AgentDelta):
            if ev.item_id not in self.streamed:
                self.streamed.add(ev.item_id)
                self.end_line()
                self.write("codex: ")
            self.write(clean(ev.delta))
        elif isinstance(ev, AgentMessage):
            if ev.item_id in self.streamed:
                self.end_line()
            else:
                self.line("codex: " + clean(ev.text).strip())
        elif isinstance(ev, UserPrompt):
            mark = ("" if ev.has_snapshot else
                    "  [sent outside codexr: no file snapshot]" if ev.outside else "  [no file snapshot]")
            self.line(f"you ({ev.number}): {clean(ev.text)}{mark}")
        elif isinstance(ev, Reasoning):
            self.line(f"thinking: {clean(ev.text)}")
        elif isinstance(ev, CommandStarted):
            self.started_commands.add(ev.item_id)
            self.line(f"$ {clean(ev.command)}")
        elif isinstance(ev, CommandFinished):
            self._command(ev)
        elif isinstance(ev, FileChanges):
            self._file_changes(ev)
        elif isinstance(ev, ErrorNotice):
            self.line(f"warning: {retry_line(clean(ev.message))}" if ev.will_retry else f"error: {clean(ev.message)}")
        elif isinstance(ev, TokenUsage):
            self.tokens = ev
        elif isinstance(ev, TurnFinished):
            self._turn_finished(ev)
        elif isinstance(ev, ApprovalDecided):
            self.line(f"approval: {ev.decision} ({clean(ev.summary)})")
        elif isinstance(ev, Notice):
            self.line(f"{'note' if ev.level == 'info' else ev.level}: {clean(ev.text)}")
        elif isinstance(ev, ThreadLoaded):
            self._thread_loaded(ev)
        elif isinstance(ev, Ready):
            self.line("ready: " + status_line(ev.status))
        elif isinstance(ev, StartFailed):
            self.line(f"error: {clean(ev.message)}")
            if ev.login_hint:
                self.line("log in first: `codex login` (or configure a model provider in $CODEX_HOME/config.toml)")
        elif isinstance(ev, CodexDied):
            self.line(f"{'note' if ev.restarted else 'error'}: {clean(ev.message)}")
        # TurnStarted, CommandOutput (shown at the end), StatusChanged: nothing to print

    def _command(self, ev: CommandFinished) -> None:
        if ev.item_id not in self.started_commands:
            self.line(f"$ {clean(ev.command)}")
        lines = clean(ev.output).rstrip("\n").split("\n") if ev.output.strip() else []
        if len(lines) > OUTPUT_TAIL:
            self.line(f"  ... {len(lines) - OUTPUT_TAIL} earlier lines")
            lines = lines[-OUTPUT_TAIL:]
        for ln in lines:
            self.line("  " + ln)
        took = f", {ev.duration_ms / 1000:.1f} s" if ev.duration_ms is not None else ""
        if ev.status == "completed" or ev.exit_code is not None:
            self.line(f"  [exit {ev.exit_code if ev.exit_code is not None else '?'}{took}]")
        elif ev.status == "background":
            self.line("  [still running in the background: /ps to view, /stop to close]")
        else:
            self.line(f"  [{ev.status}]")

    def _file_changes(self, ev: FileChanges) -> None:
        if ev.status == "inProgress":
            return
        for ch in ev.changes:
            target = f" -> {ch.move_path}" if ch.move_path else ""
            verb = "edited" if ev.status == "completed" else f"edit {ev.status}"
            self.line(f"{verb}: {show_path(ch.path)}{target} ({ch.kind})")

    def _turn_finished(self, ev: TurnFinished) -> None:
        parts = [f"turn {ev.status}", f"{ev.seconds:.1f} s",
                 f"{plural(len(ev.files), 'file')} changed"]
        if self.tokens is not None:
            parts.append(turn_tokens(self.tokens))
        self.tokens = None
        self.streamed.clear()
        self.started_commands.clear()
        self.line("-- " + ", ".join(parts))
        for st in ev.files:
            self.line(f"   {st.change:<9} {show_path(st.path)}  {stat_text(st)}")
        if ev.error:
            self.line(f"error: {clean(ev.error)}")
        if ev.capture_error:
            self.line(f"warning: {clean(ev.capture_error)}")

    def _thread_loaded(self, ev: ThreadLoaded) -> None:
        if not ev.thread_id:
            self.line("new thread: your next prompt starts it")
            return
        if ev.reason == "new" and not ev.events:
            self.line(f"thread {ev.thread_id}")
            return
        self.streamed.clear()  # a stored turn's items keep their live ids: print them whole
        self.started_commands.clear()
        prompts = sum(1 for e in ev.events if isinstance(e, UserPrompt))
        self.line()
        self.line(f"== {ev.reason}: thread {ev.thread_id}, {plural(prompts, 'prompt')} ==")
        for e in ev.events:
            self.show(e)
        self.line(f"== end of thread {short_thread(ev.thread_id)} ==")


def status_line(s: Status) -> str:
    """The status bar as one line."""
    parts = [f"model {s.model}"] if s.model else []
    parts += [f"workspace {show_path(s.workspace)}",
             f"thread {short_thread(s.thread_id) if s.thread_id else '(none yet)'}",
             f"tracking {'on' if s.tracking else 'off'}"
             + (f" ({plural(s.tracked_files, 'file')})" if s.tracking and s.tracked_files is not None else "")]
    return ", ".join(parts)


# ------------------------------------------------------------------------------------------ the REPL


def typed_after(line: str, offered: str) -> str | None:
    """The slash command typed at the end of a prompt offered on the line (the one a rewind put back), or None.

    A rewind says "/redo undoes this rewind" and offers its prompt for editing: `/redo` typed then went to the agent
    as the end of that prompt, which ran it again. Only a command name (a unique prefix will do, as `command` takes
    it) after the offered text counts; anything else is the prompt as typed."""
    if not offered or not line.startswith(offered):
        return None
    rest = line[len(offered):].strip()
    if not rest.startswith("/"):
        return None
    name = rest.split()[0]
    return rest if name in COMMANDS or len([c for c in COMMANDS if c.startswith(name)]) == 1 else None


class LineMode:
    """The REPL: prompts go to the driver, slash commands to its rewind/redo/... methods."""

    HANDLERS: ClassVar[dict[str, str]] = {
        "/rewind": "rewind", "/redo": "redo", "/new": "new", "/resume": "resume", "/threads": "list_threads",
        "/history": "history", "/diff": "diff", "/status": "status", "/snapshots": "snapshots", "/help": "help",
        "/model": "model", "/ps": "ps", "/stop": "stop", "/permissions": "permissions", "/compact": "compact",
        "/review": "review", "/init": "init", "/mention": "mention",
    }
    """The method that runs each slash command of the registry (/quit ends the loop)."""

    def __init__(self, opts: SessionOptions, *, banner: str = "", reader: Reader | None = None,
                 out: TextIO | None = None, thread_id: str | None = None, resume_last: bool = False,
                 prompt: str = "", images: tuple[str, ...] = (), farewell: Farewell | None = None) -> None:
        self.out = out or sys.stdout
        self.farewell = farewell  # the exit line for a thread (None: how to resume it)
        self.first = (prompt, images)  # `codexr --plain [-i FILE] [PROMPT]`: sent once Codex runs
        self.attach_next: tuple[str, ...] = ()  # images for the next prompt sent (`-i FILE` without a prompt)
        self.printer = Printer(self.out)
        self.events: queue.Queue[Any] = queue.Queue()
        self.driver = Driver(opts, self.events.put, thread_id=thread_id, resume_last=resume_last)
        self.resuming = thread_id is not None or resume_last
        self.stdin = sys.stdin
        self.reader = reader or (TerminalReader(self._find_files, str(opts.cwd)) if sys.stdin.isatty()
                                 else PipeReader(sys.stdin, self.out))
        self.banner = banner
        self.composer = ""  # text for the next prompt (a rewind hands back the chosen prompt)
        self.typed_ahead = ""  # typed while a turn or an operation ran: follows the composer's text
        self.ahead_lines: list[str] = []  # lines typed ahead with their Enter: run next, in order, as a shell does

    # ---------------------------------------------------------------- loop
    def run(self) -> int:
        """Start Codex, then read prompts and commands until Ctrl+D or /quit."""
        p = self.printer
        if self.banner:
            p.block(self.banner, indent="")
        p.line("starting Codex...")
        try:
            ok = self.driver.start()
            self.drain()
            if not ok:
                return 1
            if self.resuming and self.driver.thread_id is None:
                if isinstance(self.reader, PipeReader):  # a script's prompts never go to a thread it did not name
                    p.line("error: no thread was resumed: nothing is read from the input")
                    return 2
                unopened = getattr(self.driver, "unopened", None)
                p.line(f"thread {unopened} was not opened: /resume opens it or another, /new starts a new "
                       "conversation" if unopened else "no thread was resumed: your first prompt starts a new one")
            p.line("type a prompt, or /help")
            if self.first[0]:  # shown as if typed at the prompt
                p.line(PROMPT + with_labels(*self.first))
                self.turn(*self.first)
            elif self.first[1]:  # `codexr --plain -i FILE` alone: the images go with the first prompt typed
                self.composer = " ".join(image_label(p) for p in self.first[1])
                self.attach_next = self.first[1]
            while True:
                self.drain()
                if self.ahead_lines:  # typed during the last turn with its Enter: runs now, shown as typed
                    line = self.ahead_lines.pop(0)
                    p.line(PROMPT + line)
                else:
                    default = "\n".join(t for t in (self.composer, self.typed_ahead) if t)
                    self.composer = self.typed_ahead = ""
                    try:
                        line = self.reader.read(PROMPT, default=default, main=True)
                    except KeyboardInterrupt:
                        continue
                    except EOFError:
                        break
                    typed = typed_after(line, default)
                    if typed is not None:  # `/redo` typed after a prompt a rewind put back: the command runs,
                        line, self.composer = typed, default  # and the prompt stays offered for the next line
                self.drain()
                text = line.strip()
                if not text:
                    continue
                if text.startswith("/"):
                    if not self.command(text):
                        break
                else:
                    attached = getattr(self.reader, "attachments", {})
                    images = tuple(path for label, path in attached.items() if label in line)
                    self.turn(line, self.attach_next + images)
                    self.attach_next = ()
                    attached.clear()
        finally:
            self.driver.close()
        if self.driver.thread_id:
            from ..services.thread_label import resume_line

            p.line((self.farewell or resume_line)(self.driver.thread_id, str(self.driver.opts.cwd)))
        p.line("bye")
        return 0

    def drain(self) -> None:
        """Print every event that arrived (approvals cannot be pending here: turns run in the foreground)."""
        while True:
            try:
                ev = self.events.get_nowait()
            except queue.Empty:
                return
            self.handle(ev)

    def handle(self, ev: Any) -> None:
        """One event: approvals are asked, everything else printed."""
        if isinstance(ev, ApprovalAsked):
            self.approve(ev)
            return
        if isinstance(ev, ThreadLoaded) and ev.composer:
            self.composer = ev.composer
        self.printer.show(ev)

    def turn(self, text: str, images: tuple[str, ...] = ()) -> None:
        """Send a prompt (with its images) and stay with it until it ends; Ctrl+C interrupts it."""
        try:
            check_images(images)
            self.driver.submit(text, images)  # refused while the thread asked for at start could not be opened
        except StoreError as exc:  # one line, nothing sent; the text comes back to be sent again
            self.printer.line(f"error: {exc}")
            self.composer = text
            return
        self._follow_job()

    def _job(self, start: Callable[[], object]) -> None:
        """Queue a prompt, /compact or /review on the driver and follow it to its end (Ctrl+C interrupts it)."""
        start()
        self._follow_job()

    def _follow_job(self) -> None:
        """Follow what was queued to its end (Ctrl+C interrupts it), keeping what was typed meanwhile."""
        with KeyWatch(self.stdin) as keys:
            self._follow(keys)
        self.type_ahead(keys)

    def _find_files(self, query: str) -> list[str]:
        """Codex's fuzzy file search for `@` completion (none before Codex runs)."""
        return self.driver.find_files(query) if self.driver.session is not None else []

    def type_ahead(self, keys: KeyWatch) -> None:
        """Keep what was typed while codexr worked: lines sent with Enter run next, the rest starts the prompt."""
        for line in keys.entered:
            if self.typed_ahead:  # the start of this line was typed during an earlier turn
                line, self.typed_ahead = f"{self.typed_ahead}\n{line}", ""
            if line.strip():
                self.ahead_lines.append(line)
        keys.entered.clear()
        if keys.typed:
            self.typed_ahead = f"{self.typed_ahead}\n{keys.typed}" if self.typed_ahead else keys.typed

    def _follow(self, keys: KeyWatch) -> None:
        started = stopping = False
        idle = 0
        while True:
            try:
                if keys.interrupted():
                    raise KeyboardInterrupt
                try:
                    ev = self.events.get(timeout=0.1)
                except queue.Empty:
                    # Interrupted before the turn began: the driver dropped the prompt, no turn will report.
                    if stopping and not started and not self.driver.busy and not self.driver.pending():
                        idle += 1
                        if idle >= 5:
                            self.printer.line("interrupted before the prompt was sent")
                            return
                    continue
                if isinstance(ev, UserPrompt):
                    started = True
                    continue  # the user just typed it
                if isinstance(ev, TurnStarted) and stopping:
                    self.driver.interrupt()
                self.handle(ev)
                if isinstance(ev, StatusChanged):
                    return  # the driver reports status after every prompt, whatever became of it
            except KeyboardInterrupt:  # Ctrl+C as a key (terminal) or SIGINT (pipe)
                stopping = True
                self.printer.line("interrupting...")
                self.driver.interrupt()

    def approve(self, ev: ApprovalAsked) -> None:
        """Show what the agent asks to do and resolve the request's future with the answer."""
        req = ev.request
        p = self.printer
        if req.kind == "command":
            p.line("approval needed: the agent wants to run a command")
            p.line(f"  $ {clean(short_command(req.command or '?'))}")
            if req.cwd:
                p.line(f"  in {show_path(req.cwd)}")
        else:
            p.line("approval needed: the agent wants to change files")
            for ch in file_diffs({"changes": req.changes}, str(self.driver.opts.cwd)):
                p.line(f"  {ch.kind}: {show_path(ch.path)}")
                if ch.diff:
                    p.block(clean(ch.diff), indent="    ")
        if req.reason:
            p.line(f"  reason: {clean(req.reason)}")
        p.line(f"  (declined by itself after {ev.timeout:.0f} s)")
        while True:
            try:
                answer = self.reader.read("approve? [y]es / [a]lways / [n]o / [c]ancel turn: ").strip().lower()
            except KeyboardInterrupt:
                answer = "c"
            except EOFError:
                answer = "n"
            if answer in ANSWERS:
                break
            p.line("answer y, a, n or c")
        if ev.future.done():
            p.line("too late: the request timed out and was declined")
            return
        ev.future.set_result(ANSWERS[answer])

    # ---------------------------------------------------------------- commands
    def command(self, text: str) -> bool:
        """Run one slash command; False means quit."""
        name, *args = text.split()
        if name not in COMMANDS:  # a unique prefix will do: /red is /redo
            found = [c for c in COMMANDS if c.startswith(name)]
            name = found[0] if len(found) == 1 else name
        if name in ("/quit", "/exit"):
            return False
        method = self.HANDLERS.get(name)
        handler: Callable[[list[str]], object] | None = getattr(self, method) if method else None
        if handler is None:
            from .slash import unknown_command

            self.printer.line(unknown_command(name, COMMANDS))
            return True
        try:
            handler(args)
        except Stopped:  # Ctrl+C stopped a rewind, redo or restore: the driver's notice said how things are
            pass
        except StoreError as exc:  # SessionError, Busy: one line for the user
            self.printer.line(f"error: {str(exc).strip().splitlines()[0] if str(exc).strip() else 'failed'}")
        except Exception as exc:  # the session goes on after any failure
            self.printer.line(f"error: {type(exc).__name__}: {exc}")
        self.drain()
        return True

    def blocking(self, fn: Callable[[], T]) -> T:
        """Run a store/Codex operation on a worker; Ctrl+C cannot tear a restore in half: it stops a rewind, redo or
        restore (the files it changed go back, the driver says so), or says that the step runs on."""
        box: dict[str, Any] = {}

        def work() -> None:
            try:
                box["out"] = fn()
            except BaseException as exc:
                box["err"] = exc

        t = threading.Thread(target=work, daemon=True, name="codexr-plain-op")
        t.start()
        with KeyWatch(self.stdin) as keys:
            while t.is_alive():
                try:
                    t.join(0.1)
                    if keys.interrupted():
                        raise KeyboardInterrupt
                except KeyboardInterrupt:
                    said = self.driver.stop_restore()
                    self.printer.line(said or "(working: this step cannot be interrupted, a moment please)")
        self.type_ahead(keys)
        if "err" in box:
            raise box["err"]
        result: T = box["out"]
        return result

    def ask(self, question: str) -> str:
        """A one-line answer ('' on Ctrl+C or end of input)."""
        try:
            return self.reader.read(question).strip()
        except (KeyboardInterrupt, EOFError):
            return ""

    def confirm(self, what: str, preview: Preview) -> bool:
        """y/N, with `d` to show the per-file diffs first (another live session here is named in the question)."""
        question = f"{what}? [y/N, d = show diffs] "
        if preview.must_ask:
            question = f"another codexr session is live in this workspace: {what} anyway? [y/N, d = show diffs] "
        while True:
            answer = self.ask(question).lower()
            if answer in ("d", "diff", "diffs"):
                for path, (st, diff) in sorted(preview.diffs.items()):
                    self.printer.line(f"--- {show_path(path)} ({st.change}, {stat_text(st)})")
                    self.printer.block(clean(diff) or "(no text diff)", indent="  ")
                continue
            return answer in ("y", "yes")

    def ask_conflicts(self, preview: Preview, suffix: str) -> dict[str, str]:
        """Each conflict (the agent and the user changed the same or adjacent lines): its two sides, then keep mine /
        take the restored state / keep both, as the CLI asks; the answers by path."""
        decided = getattr(preview.result, "decided", {})
        out: dict[str, str] = {}
        for path in conflicts(decided):
            self.printer.line(conflict_header(show_path(path), suffix))
            self.printer.block(clean(preview.diffs.get(path, (None, ""))[1]) or "(no text diff)", indent="  ")
            while (choice := parse_choice(self.ask(conflict_question(show_path(path), suffix)), suffix, path)) is None:
                self.printer.line(choice_hint(path))
            out[path] = choice
        return out

    def print_plan(self, preview: Preview) -> None:
        """Files written, deleted and left alone, each with its reason and line counts."""
        p = self.printer
        for warning in (*preview.warnings, *preview.notes):
            p.line(f"  {warning}")
        restore = preview.restore
        if restore is None:
            p.line("  files: left as they are")
            return
        counts = {path: f"  {stat_text(st)}" for path, (st, _diff) in preview.diffs.items()}
        for line in plan_lines(restore.plan, "  ", counts):
            p.line(line)

    def rows(self) -> list[PromptRow]:
        """The thread's prompts, or a message when there are none."""
        rows = self.blocking(self.driver.prompt_rows)
        if not rows:
            self.printer.line("no prompt was sent on this thread yet")
        return rows

    def print_rows(self, rows: list[PromptRow]) -> None:
        """The numbered prompt list of the rewind picker."""
        self.printer.line("prompts of this thread:")
        for r in rows:
            at = dt.datetime.fromtimestamp(r.started).strftime("%H:%M:%S") if r.started else "--:--:--"
            if r.snapshot_gone:
                files = "file snapshot gone (conversation only)"
            elif not r.by_codexr:
                files = "sent outside codexr: no file snapshot (conversation only)"
            elif not r.has_snapshot:
                files = "no file snapshot (conversation only)"
            elif r.files is None:
                files = "files unknown"
            else:
                files = ", ".join(f"{show_path(f.path)} {f.change} {stat_text(f)}" for f in r.files) or "no files"
            text = " ".join(clean(r.text).split())
            self.printer.line(f"  {r.number}. {at}  {text[:70]}{'...' if len(text) > 70 else ''}")
            self.printer.line(f"       {files}")

    def rewind(self, args: list[str]) -> None:
        """/rewind [N] [files|conversation]: list, preview the plan, confirm, rewind."""
        mode = RewindMode.BOTH
        number: int | None = None
        for a in args:
            if a.isdigit():
                number = int(a)
            elif a in tuple(RewindMode):
                mode = RewindMode(a)
            else:
                self.printer.line(f"usage: /rewind {COMMANDS['/rewind'][0]}")
                return
        rows = self.rows()
        if not rows:
            return
        if number is None:
            self.print_rows(rows)
            answer = self.ask("rewind to before which prompt? (number, Enter cancels) ")
            if not answer.isdigit():
                self.printer.line("no rewind")
                return
            number = int(answer)
        to = number
        preview = self.blocking(lambda: self.driver.rewind_preview(to, mode))
        self.printer.line(f"{preview.title} ({mode.words}):")
        prompt = getattr(preview.result, "prompt", "")
        self.printer.line(f"  prompt {to}: {' '.join(clean(prompt).split())[:200]}")
        why = getattr(preview.result, "no_snapshot_reason", None)
        if why:
            self.printer.line(f"  {why}: the rewind is conversation only")
        if mode in FILE_MODES:
            self.print_plan(preview)
        if mode in CONVERSATION_MODES:
            self.printer.line(f"  the conversation continues on a fork that ends just before prompt {to}")
        choices = self.ask_conflicts(preview, "rewound") if mode in FILE_MODES else {}
        if not self.confirm("rewind", preview):
            self.printer.line("no rewind: nothing changed")
            return
        res = self.blocking(lambda: self.driver.rewind(to, mode, choices))
        self.drain()
        if res.restore is not None:
            self.printer.line(f"rewound: {restored_counts(res.restore)}{yours_kept(res.decided, res.restore)}")
        if res.safety_id:
            self.printer.line(f"safety snapshot {res.safety_id[:12]}; /redo undoes this rewind")
        self.printer.line(f"prompt {res.to_prompt} is back at the prompt: edit it and press Enter, or clear it")
        self.composer = res.prompt

    def redo(self, args: list[str]) -> None:
        """/redo: what it brings back and what changed since the rewind, confirm, redo."""
        preview = self.blocking(self.driver.redo_preview)
        res = preview.result
        p = self.printer
        p.line("redo: back to where the last rewind started")
        if isinstance(res, RedoResult):
            for line in since_rewind_lines(res.changed_since_rewind, res.turns_since_rewind, "  "):
                p.line(line)
            p.line(f"  returns to thread {res.thread_id}")
        self.print_plan(preview)
        choices = self.ask_conflicts(preview, "redone")
        if not self.confirm("redo", preview):
            p.line("no redo: nothing changed")
            return
        done = self.blocking(lambda: self.driver.redo(choices))
        self.drain()
        if done.restore is not None:
            p.line(f"redone: {restored_counts(done.restore)}{yours_kept(done.decided, done.restore)}")
        self.composer = ""

    def new(self, args: list[str]) -> None:
        """/new: the next prompt starts a new thread."""
        self.driver.new_thread()

    def list_threads(self, args: list[str]) -> list[str]:
        """/threads: this workspace's threads, numbered, newest first."""
        rows = self.blocking(self.driver.threads)
        if not rows:
            self.printer.line("no threads in this workspace yet")
        for i, r in enumerate(rows, 1):
            here = "*" if r.thread_id == self.driver.thread_id else " "
            at = when(r.updated) if r.updated else "?"
            self.printer.line(f"{here}{i}. {r.thread_id}  {at}  {r.source}  {thread_counts(r)}")
            self.printer.line(f"     {' '.join(clean(r.preview).split())[:90]}")
        return [r.thread_id for r in rows]

    def resume(self, args: list[str]) -> None:
        """/resume [N]: pick a thread and load its transcript."""
        ids = self.list_threads([])
        if not ids:
            return
        choice = args[0] if args else self.ask("resume which thread? (number or id, Enter cancels) ")
        if not choice:
            return
        if choice.isdigit() and 1 <= int(choice) <= len(ids):
            tid = ids[int(choice) - 1]
        else:
            found = [t for t in ids if t.startswith(choice)]
            if len(found) != 1:
                self.printer.line(f"no single thread matches {choice!r}")
                return
            tid = found[0]
        self.blocking(lambda: self.driver.load(tid))

    def history(self, args: list[str]) -> None:
        """/history TEXT: numbered hits from every workspace; a number resumes one here or prints it read-only."""
        from ..history.browse import resume_hint, search_hits, show_session  # imported when first used
        from ..history.catalog import HistoryError
        from ..history.render import short_time

        p = self.printer
        if not args:
            p.line("usage: /history [--regex] [--include tools] [--archived] TEXT (searches every workspace's "
                   "conversations)")
            return
        home, here = self.driver.opts.codex_home, str(self.driver.opts.cwd)
        try:
            found = self.blocking(lambda: search_hits(home, " ".join(args), here))
        except HistoryError as exc:
            p.line(f"error: {exc}")
            return
        for i, h in enumerate(found.hits, 1):
            mark = "here" if h.here else "other"
            ex = clean("".join(f"**{text}**" if match else text for text, match in h.marked()))
            p.line(f"  {i}. {h.session_id}  #{h.prompt}  {short_time(h.at)}  {h.source}  [{mark}] {h.workspace}")
            p.line(f"       {h.kind}: {ex}")
        p.line(found.summary)
        if not found.hits:
            return
        answer = self.ask("open which hit? (number; this workspace's resume, others print read-only; "
                          "Enter for none) ")
        if not answer.isdigit() or not 1 <= int(answer) <= len(found.hits):
            return
        hit = found.hits[int(answer) - 1]
        if hit.here:
            self.blocking(lambda: self.driver.load(hit.session_id,
                                                   reason=f"resumed from history: the hit is in prompt {hit.prompt}"))
            return
        try:
            shown = self.blocking(lambda: show_session(home, hit.session_id, here))
        except HistoryError as exc:
            p.line(f"error: {exc}")
            return
        p.block(clean(shown.text), indent="  ")
        p.line(resume_hint(shown))

    def diff(self, args: list[str]) -> None:
        """/diff [N]: per-file changes since the start of the last prompt (or of prompt N)."""
        number = int(args[0]) if args and args[0].isdigit() else None
        items = self.blocking(lambda: self.driver.diff(number))
        since = f"prompt {number}" if number else "the last prompt"
        if not items:
            self.printer.line(f"no changes since the start of {since}")
        for st, text in items:
            self.printer.line(f"--- {show_path(st.path)} ({st.change}, {stat_text(st)})")
            self.printer.block(clean(text) or "(no text diff)")
        if items:
            self.printer.line(f"{plural(len(items), 'file')} changed since the start of {since}")

    def status(self, args: list[str]) -> None:
        """/status: the lines the app shows (app/shared/lines.py)."""
        s = self.blocking(self.driver.status_detail)
        for line in status_lines(s):
            self.printer.line(line)

    def model(self, args: list[str]) -> None:
        """/model [NAME [EFFORT]]: the model, its effort and the offered ones; or switch from the next prompt on."""
        if len(args) > 2:
            self.printer.line(f"usage: /model {COMMANDS['/model'][0]}")
            return
        if args:
            name, effort = args[0], (args[1] if len(args) > 1 else None)
            self.blocking(lambda: self.driver.set_model(name, effort))
            return
        catalog = self.blocking(self.driver.model_catalog)
        st = self.blocking(self.driver.status_detail)
        self.printer.line(settings_lines(st)[0])
        if not catalog:
            self.printer.line("offered: (Codex lists none)")
        for m in catalog:
            efforts = ", ".join(e + (" (default)" if e == m.default_effort else "") for e, _ in m.efforts)
            mark = "*" if m.id == st.model else " "
            self.printer.line(f"  {mark} {m.id:<22} {m.description}" + (f"  [reasoning: {efforts}]" if efforts else ""))
        self.printer.line("/model NAME [EFFORT] switches from the next prompt on")

    def permissions(self, args: list[str]) -> None:
        """/permissions [NAME]: the approval policy, the sandbox and the presets, or switch to one."""
        if args:
            preset = find_preset(" ".join(args))
            if preset.sandbox == "danger-full-access":  # asks first, as the official TUI does
                self.printer.line(f"{FULL_ACCESS_QUESTION} {FULL_ACCESS_WARNING}")
                if self.ask("enable it? [y/N] ").lower() not in ("y", "yes"):
                    self.printer.line("no change: the permissions stay as they were")
                    return
            self.blocking(lambda: self.driver.set_permissions(preset.id))
            return
        st = self.blocking(self.driver.status_detail)
        current = matching_preset(st.approval.split(" (")[0], st.sandbox.split(" (")[0])
        self.printer.line(f"approval: {st.approval or 'unknown'}, sandbox: {st.sandbox or 'unknown'}")
        for preset in self.driver.permission_presets():
            mark = "*" if preset is current else " "
            self.printer.line(f"  {mark} {preset.id:<12} {preset.label}: {preset.description}")
        self.printer.line("/permissions NAME switches from the next prompt on")

    def snapshots(self, args: list[str]) -> None:
        """/snapshots: list them; restore one through the same preview and confirm."""
        snaps = self.blocking(self.driver.snapshots)
        if not snaps:
            self.printer.line("no snapshots of this workspace yet")
            return
        for i, s in enumerate(snaps, 1):
            label = f"  {s.label}" if s.label else ""
            self.printer.line(f"  {i}. {s.id[:12]}  {when(s.created)}  {s.kind}  {plural(s.file_count, 'file')}{label}")
        answer = self.ask("restore which? (number, Enter for none) ")
        if not answer.isdigit() or not 1 <= int(answer) <= len(snaps):
            return
        sid = snaps[int(answer) - 1].id
        preview = self.blocking(lambda: self.driver.snapshot_preview(sid))
        self.printer.line(f"{preview.title}:")
        self.print_plan(preview)
        if not self.confirm("restore", preview):
            self.printer.line("no restore: nothing changed")
            return
        self.blocking(lambda: self.driver.restore_snapshot(sid))

    def compact(self, args: list[str]) -> None:
        """/compact: Codex summarises the conversation (no prompt of its own; the rewind list stays the same)."""
        self._job(self.driver.compact)

    def review(self, args: list[str]) -> None:
        """/review [branch NAME | commit SHA | TEXT]: Codex reviews the changes; the review is printed."""
        self._job(lambda: self.driver.review(" ".join(args)))

    def init(self, args: list[str]) -> None:
        """/init: send the AGENTS.md prompt (a normal prompt, rewindable); refused when AGENTS.md exists."""

        def start() -> None:
            text = self.driver.init()
            self.printer.line(f"/init sends: {text.splitlines()[0]} (...)")

        self._job(start)

    def mention(self, args: list[str]) -> None:
        """/mention QUERY: workspace files matching QUERY (fuzzy); the one picked goes into the next prompt as @path."""
        if not args:
            self.printer.line(f"usage: /mention {COMMANDS['/mention'][0]} (or type @QUERY and Tab)")
            return
        query = " ".join(args)
        found = self.blocking(lambda: self.driver.find_files(query))[:20]
        if not found:
            self.printer.line(f"no workspace file matches {query!r}")
            return
        if len(found) > 1:
            for i, path in enumerate(found, 1):
                self.printer.line(f"  {i}. {path}")
            answer = self.ask("mention which? (number, Enter for none) ")
            if not answer.isdigit() or not 1 <= int(answer) <= len(found):
                return
            found = [found[int(answer) - 1]]
        self.composer = f"{self.composer} @{found[0]} ".lstrip()
        self.printer.line(f"@{found[0]} is in your next prompt")

    def ps(self, args: list[str]) -> None:
        """/ps: the commands still running in the background, with their process ids."""
        running = self.blocking(self.driver.background_terminals)
        self.printer.line(background_text(running))

    def stop(self, args: list[str]) -> None:
        """/stop [ID]: end the background commands (or one); says what was ended."""
        pid = args[0] if args else None
        stopped = self.blocking(lambda: self.driver.stop_terminals(pid))
        self.printer.line(stopped_text(stopped, pid))

    def help(self, args: list[str]) -> None:
        """/help: commands and keys."""
        for name, (arg, what) in COMMANDS.items():
            self.printer.line(f"  {(name + ' ' + arg).strip():<36} {what}")
        self.printer.block(KEYS)
        if self.banner:  # what the session began with (the demo's words): still at hand after the first prompt
            self.printer.block(self.banner, indent="")


def run_plain(opts: SessionOptions, *, banner: str = "", thread_id: str | None = None,
              resume_last: bool = False, prompt: str = "", images: tuple[str, ...] = (),
              farewell: Farewell | None = None) -> int:
    """`codexr --plain [resume ID|--last]`: the session in line mode until Ctrl+D or /quit (a pipe works too).

    `farewell(thread_id, workspace)`: the line said on exit (default: how to resume the thread)."""
    return LineMode(opts, banner=banner, thread_id=thread_id, resume_last=resume_last, prompt=prompt,
                    images=images, farewell=farewell).run()
