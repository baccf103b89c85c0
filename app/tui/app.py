"""`CodexrApp`: the Textual front end. It holds a Driver (started in a worker) and draws what it emits.

The first frame needs neither the Codex SDK nor Codex itself: the driver module is imported and Codex
started in a thread worker after mount, while the user can already type (those prompts queue).
"""

from __future__ import annotations

import contextlib
import gc
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from textual import events
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.driver import Driver
from textual.screen import Screen

from ..codex.events import (
    ApprovalAsked,
    ApprovalDecided,
    CodexDied,
    Notice,
    Ready,
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
from ..services.background import BackgroundTerminal, background_text, stopped_text
from .actions import SLASH, bindings, validate_keymap
from .approval import ApprovalPanel
from .collector import Collector
from .composer import Composer
from .footer import AppFooter
from .messages import DriverEvents, coalesce
from .palette import ActionCommands
from .status import StatusBar
from .theme import terminal_theme
from .transcript import Transcript

if TYPE_CHECKING:
    from config import CodexrSettings

    from ..services.thread_label import Farewell
    from ..session import SessionOptions
    from ..shared.replay import Recorder
    from .splash import Splash

DOUBLE_PRESS_S = 1.5  # Esc Esc / Ctrl+C Ctrl+C
Emit = Callable[[Any], None]


class DriverLike(Protocol):
    """What the app needs of its driver: the live `Driver`, or a `ReplayDriver` playing a recorded log."""

    thread_id: str | None

    @property
    def busy(self) -> bool: ...

    @property
    def session(self) -> object | None: ...  # None: no live Codex session (yet)

    def start(self) -> bool: ...

    def submit(self, text: str, images: tuple[str, ...] | list[str] = ()) -> None: ...

    def compact(self) -> None: ...

    def review(self, words: str = "") -> None: ...

    def init(self) -> str: ...

    def find_files(self, query: str) -> list[str]: ...

    def pending(self) -> list[str]: ...

    def interrupt(self) -> bool: ...

    def close(self) -> None: ...

    def status(self) -> Status: ...

    def status_detail(self) -> Status: ...

    def new_thread(self) -> None: ...

    def models(self) -> list[str]: ...

    def set_model(self, model: str, effort: str | None = None) -> str: ...

    def set_permissions(self, name: str) -> object: ...

    def background_terminals(self) -> list[BackgroundTerminal]: ...

    def stop_terminals(self, process_id: str | None = None) -> list[BackgroundTerminal]: ...


DriverFactory = Callable[[Emit], DriverLike]


class MainScreen(Screen[int]):
    """The app's own screen: the composer has the keyboard from the first frame on, so keys typed while the app
    starts (queued by the terminal under the splash) reach the prompt rather than the transcript."""

    AUTO_FOCUS = "#prompt"


class CodexrApp(App[int]):
    """The codexr terminal UI: transcript, composer, approvals, status bar."""

    # The dialogs' stylesheet too, read with the app's: the first dialog pushed read it, parsed every stylesheet
    # again and restyled every widget of the app (~100 ms of the first Ctrl+R, bench/README "Eleventh pass").
    CSS_PATH = ["app.tcss", "dialogs.tcss"]  # noqa: RUF012 - Textual reads it once, never mutated
    TITLE = "codexr"
    BINDINGS = bindings("app")  # type: ignore[assignment]
    COMMANDS = App.COMMANDS | {ActionCommands}

    def __init__(self, opts: SessionOptions | Callable[[], SessionOptions] | None = None, *,
                 driver_factory: DriverFactory | None = None, record: Path | None = None,
                 thread_id: str | None = None, resume_last: bool = False, banner: str = "",
                 keymap: Mapping[str, str] | None = None, stable_status: bool = False,
                 workspace: str = "", prompt: str = "", images: tuple[str, ...] = ()) -> None:
        """`opts` (or a factory of them) builds a live Driver; `driver_factory` replaces it (a replay).

        `record`: append every event the driver emits to this replay log (app/shared/replay.py).
        """
        super().__init__()
        if (opts is None) == (driver_factory is None):
            raise ValueError("CodexrApp needs session options or a driver factory (one of them)")
        self._opts = opts
        self._driver_factory = driver_factory
        self._record = record
        self._recorder: Recorder | None = None
        self._resume_id = thread_id
        self._resume_last = resume_last
        self.banner = banner
        if keymap is None:  # the settings the options were made with (`[tui] keys`)
            settings = getattr(opts, "settings", None)
            keymap = settings.tui.keys if settings is not None else {}
        self.keymap = validate_keymap(keymap)
        self.stable_status = stable_status
        self.workspace = workspace or (str(getattr(opts, "cwd", "")) if not callable(opts) else "")
        self.driver: DriverLike | None = None
        # prompts and their images typed before the driver existed (`codexr -i FILE PROMPT`: the first)
        self._early: list[tuple[str, tuple[str, ...]]] = [(prompt, images)] if prompt else []
        self._first_images = () if prompt else images  # `codexr -i FILE` alone: the images wait in the composer
        self._in_turn = False
        self._approvals: deque[ApprovalAsked] = deque()
        self._reviewing: ApprovalAsked | None = None
        self._last_esc = 0.0
        self._last_ctrl_c = 0.0
        self.last_status = Status()
        self._inbox: list[Any] = []  # events emitted by the driver's threads, not yet taken by the UI
        self._inbox_lock = threading.Lock()
        self._inbox_posted = False  # a DriverEvents message is on its way for what the inbox holds
        self.collector = Collector()  # full garbage collections while nobody types
        self._unmounted = False

    # ------------------------------------------------------------------ layout and start
    typed_ahead = b""  # keys the splash read while Textual loaded: the driver plays them before its own input
    terminal_before: list[Any] | None = None  # the terminal's own settings from the splash: restored at exit
    key_times = (0.0, 0.0)  # when the last two keys arrived (Textual's event time): the composer's paste check

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:
            self.key_times = (self.key_times[1], event.time)
            self.collector.typed()
        elif isinstance(event, events.Paste):
            self.collector.typed()
        await super().on_event(event)

    def get_driver_class(self) -> type[Driver]:
        from .typed_ahead import typed_ahead_driver

        def take() -> tuple[bytes, list[Any] | None]:
            taken = self.typed_ahead, self.terminal_before
            self.typed_ahead, self.terminal_before = b"", None
            return taken

        return typed_ahead_driver(super().get_driver_class(), take)

    def get_default_screen(self) -> Screen[int]:
        return MainScreen(id="_default")

    def compose(self) -> ComposeResult:
        yield Transcript(self.banner, id="transcript")
        yield ApprovalPanel(id="approval")
        yield Composer(self.workspace, id="composer")
        yield StatusBar(stable=self.stable_status, id="status")
        yield AppFooter()

    def on_mount(self) -> None:
        theme = terminal_theme(os.environ)
        if theme is not None:
            self.theme = theme
        if self.keymap:
            self.set_keymap(self.keymap)
        panel = self.query_one(ApprovalPanel)
        panel.display = False
        panel.hide_clock = self.stable_status
        self.composer.focus_prompt()
        if self._first_images:
            self.composer.attach(self._first_images)
        # after the first frame: the worker's imports (the SDK, ~0.4 s) would hold the GIL while it paints
        self.call_after_refresh(self.run_worker, self._start, thread=True, exit_on_error=False, group="start",
                                name="start Codex")

    def _start(self) -> None:
        """Worker: import the core, make the driver, start Codex (emits Ready or StartFailed)."""
        emit: Emit = self._emit
        try:
            if self._record is not None:
                from ..shared.replay import Recorder

                self._recorder = Recorder(emit, self._record)
                emit = self._recorder
            driver = self._make_driver(emit)
        except Exception as exc:  # a bad option or environment: the start-failed screen says what
            emit(StartFailed(f"cannot start: {exc}"))
            return
        try:
            self.call_from_thread(self._attach_driver, driver)
        except RuntimeError:  # the app is already gone
            return
        if driver.start():
            # The dialogs' modules (rewind picker, plan, diff view and the highlighter they load) were imported by
            # the first Ctrl+R itself, ~0.2 s of the picker's first opening (bench_tui.py): import them here, once
            # Codex is up, off the event loop.
            import importlib

            for module in ("rewind_picker", "redo_dialog"):
                with contextlib.suppress(ImportError):
                    importlib.import_module(f"{__package__}.{module}")
            # Likewise Textual's Markdown (markdown-it and its plugins): the first answer's block imported it on the
            # event loop, 100-230 ms between the first prompt's Enter and its answer (bench_tui.py, timed)
            with contextlib.suppress(ImportError):
                importlib.import_module("textual.widgets._markdown")
        # What is alive now (Textual, the SDK's ~1,000 models, Codex's session) lives as long as the app: keep it
        # out of the collector's full passes, which took 0.25-0.45 s each under load and stalled keys and the
        # picker's first frame behind them (bench_tui.py's live session, timed with gc.callbacks)
        gc.freeze()
        try:
            self.call_from_thread(self._pace_collector)
        except RuntimeError:  # the app is already gone
            return

    def _pace_collector(self) -> None:
        """UI thread: from now on full collections wait for a pause in the typing (collector.py)."""
        if self._unmounted:  # on_unmount gave the collections back already: they stay the interpreter's
            return
        self.collector.pace()
        self.set_interval(0.5, self.collector.tick, name="collector")

    def _make_driver(self, emit: Emit) -> DriverLike:
        if self._driver_factory is not None:
            return self._driver_factory(emit)
        from ..server.oneshot import Importing

        with Importing():  # the SDK's ~1,000 models: ~195 passes of the collector, ~50 ms (app/server/oneshot.py)
            opts = self._opts() if callable(self._opts) else self._opts
            from ..services.driver import Driver
        assert opts is not None
        return Driver(opts, emit, thread_id=self._resume_id, resume_last=self._resume_last)

    def _emit(self, ev: Any) -> None:
        """The driver's emit: any thread. Events wait in the inbox; one message wakes the UI for all of them."""
        with self._inbox_lock:
            self._inbox.append(ev)
            if self._inbox_posted:
                return
            self._inbox_posted = True
        self.post_message(DriverEvents())  # thread-safe

    def _attach_driver(self, driver: DriverLike) -> None:
        """UI thread: the driver exists; hand it the prompts typed meanwhile."""
        self.driver = driver
        opts = getattr(driver, "opts", None)  # a replay has no workspace of its own
        if opts is not None:
            self.composer.workspace = str(opts.cwd)
        for text, images in self._early:
            driver.submit(text, images)
        self._early.clear()
        self.composer.file_search = self._find_files

    def on_unmount(self) -> None:
        self._unmounted = True
        self.collector.release()
        for asked in self._approvals:  # nobody will answer them now
            if not asked.future.done():
                with contextlib.suppress(Exception):
                    asked.future.set_result("cancel")
        if self.driver is not None:
            self.driver.close()
        if self._recorder is not None:
            self._recorder.close()

    # ------------------------------------------------------------------ helpers
    @property
    def composer(self) -> Composer:
        """The composer widget."""
        return self.query_one(Composer)

    @property
    def transcript(self) -> Transcript:
        """The transcript widget."""
        return self.query_one(Transcript)

    @property
    def status_bar(self) -> StatusBar:
        """The status bar widget."""
        return self.query_one(StatusBar)

    @property
    def busy(self) -> bool:
        """A turn runs or prompts wait."""
        return self._in_turn or bool(self._early) or (self.driver is not None and self.driver.busy)

    def _queued(self) -> list[str]:
        return [text for text, _ in self._early] + (self.driver.pending() if self.driver is not None else [])

    def _find_files(self, query: str) -> list[str]:
        """The composer's `@` search (a worker thread): Codex's fuzzy file search, nothing before Codex runs."""
        driver = self.driver
        if driver is None or driver.session is None:
            return []
        return driver.find_files(query)

    def _show_queue(self) -> None:
        queued = self._queued()
        self.composer.show_queued(queued)
        self.status_bar.show(busy=self.busy, queued=len(queued))

    async def say(self, text: str, level: str = "info") -> None:
        """A codexr line in the transcript."""
        await self.transcript.note(text, level)

    def _background(self, what: str, fn: Callable[[], Any], then: Callable[[Any], Any] | None = None) -> None:
        """Run a blocking driver call in a worker; failures become a transcript line, results go to `then`."""

        def work() -> None:
            from ..session import SessionError

            try:
                result = fn()
            except SessionError as exc:
                self._emit(Notice(str(exc), "error"))
                return
            except Exception as exc:  # never a traceback on screen
                self._emit(Notice(f"{what} failed: {exc}", "error"))
                return
            if then is not None:
                with contextlib.suppress(RuntimeError):
                    self.call_from_thread(then, result)

        self.run_worker(work, thread=True, exit_on_error=False, group=what, name=what)

    def _refresh_status(self) -> None:
        driver = self.driver
        if driver is not None and driver.session is not None:
            self._background("status", driver.status, self._status_arrived)

    def _status_arrived(self, st: Status) -> None:
        self.last_status = st
        self.status_bar.show(st, busy=self.busy)

    def _terminal_title(self, text: str) -> None:
        self.sub_title = text
        drv = self._driver
        if drv is not None and not self.is_headless:
            with contextlib.suppress(Exception):
                drv.write(f"\x1b]2;{text}\x07")

    # ------------------------------------------------------------------ driver events
    async def on_driver_events(self, message: DriverEvents) -> None:
        """Take every event waiting (streamed pieces of one item joined) and show them in order."""
        with self._inbox_lock:
            batch, self._inbox = self._inbox, []
            self._inbox_posted = False
        for ev in coalesce(batch):
            await self._driver_event(ev)

    async def _driver_event(self, ev: Any) -> None:
        if isinstance(ev, Ready):
            self.last_status = ev.status
            self.status_bar.show(ev.status, state="ready", busy=self.busy)
            self._terminal_title("codexr")
        elif isinstance(ev, StartFailed):
            self.status_bar.show(state="failed")
            from .start_failed import StartFailedScreen

            await self.push_screen(StartFailedScreen(ev.message, ev.login_hint))
        elif isinstance(ev, StatusChanged):
            self.last_status = ev.status
            self._in_turn = ev.status.busy
            self.status_bar.show(ev.status)
            self._show_queue()
        elif isinstance(ev, ThreadLoaded):
            await self._thread_loaded(ev)
        elif isinstance(ev, CodexDied):
            self._in_turn = False
            await self.say(ev.message, "warning" if ev.restarted else "error")
            self._show_queue()
            self._refresh_status()
        elif isinstance(ev, ApprovalAsked):
            if ev.request.kind == "command":
                self.transcript.command_waiting(ev.request.item_id, True)
            self._approvals.append(ev)
            self.bell()
            self._terminal_title("codexr: approval needed")
            self._show_next_approval()
        else:
            if isinstance(ev, UserPrompt | TurnStarted):
                self._in_turn = True
            elif isinstance(ev, ApprovalDecided):
                self.transcript.command_waiting(ev.item_id, False)
            elif isinstance(ev, TokenUsage) and ev.context_window:  # the bar's "N% context left", as it changes
                self.last_status = replace(self.last_status, context_used=ev.last_total,
                                           context_window=ev.context_window)
                self.status_bar.show(self.last_status)
            await self.transcript.apply(ev)
            if isinstance(ev, UserPrompt):
                self._show_queue()
            elif isinstance(ev, TurnStarted):
                self._refresh_status()  # the pre-turn capture is the latest one now (tracked files, store size)
            elif isinstance(ev, TurnFinished):
                self._in_turn = False
                self._show_queue()

    async def _thread_loaded(self, ev: ThreadLoaded) -> None:
        if ev.reason == "new" and not ev.events and ev.thread_id:
            self.status_bar.show(self.last_status)  # a first prompt starts the thread: keep what is shown
        else:
            await self.transcript.reset(ev.events)
            if ev.reason == "new":
                await self.say("new thread: the next prompt starts it")
            elif ev.reason:
                await self.say(f"{ev.reason} (thread {short_thread(ev.thread_id)})")
        if ev.composer:
            self.composer.put_back(ev.composer)
            self.composer.focus_prompt()
        self._refresh_status()

    # ------------------------------------------------------------------ approvals
    def _show_next_approval(self) -> None:
        while self._approvals and self._approvals[0].future.done():
            self._approvals.popleft()
        panel = self.query_one(ApprovalPanel)
        if not self._approvals:
            panel.asked = None
            panel.display = False
            self.composer.display = True
            self.set_focus(self.composer.area)
            self._terminal_title("codexr")
            return
        asked = self._approvals[0]
        if asked.request.kind == "fileChange":
            panel.display = False
            self.composer.display = True
            if self._reviewing is None:
                self._reviewing = asked
                from .approval_review import ApprovalReview

                self.push_screen(ApprovalReview(asked, self.workspace), partial(self._reviewed, asked))
            return
        panel.display = True
        self.composer.display = False
        panel.show(asked, len(self._approvals) - 1, self.composer.workspace)
        self.set_focus(panel)

    def _reviewed(self, asked: ApprovalAsked, decision: str | None) -> None:
        self._reviewing = None
        self._resolve(asked, decision)

    def on_approval_panel_decided(self, message: ApprovalPanel.Decided) -> None:
        self._resolve(message.asked, message.decision)

    def _resolve(self, asked: ApprovalAsked, decision: str | None) -> None:
        """Answer the request (unless it timed out meanwhile) and show the next one."""
        if decision is not None and not asked.future.done():
            with contextlib.suppress(Exception):  # InvalidStateError: the timeout won the race
                asked.future.set_result(decision)
        with contextlib.suppress(ValueError):
            self._approvals.remove(asked)
        self._show_next_approval()

    # ------------------------------------------------------------------ composer
    async def on_composer_submitted(self, message: Composer.Submitted) -> None:
        text = message.text
        head = text.split(maxsplit=1)[0]
        if head in SLASH:
            await self.slash(text)
            return
        if head.startswith("/") and "/" not in head[1:]:
            from ..shared.slash import unknown_command

            await self.say(unknown_command(head, SLASH), "warning")
            return
        if message.images:
            from ..codex.images import check_images
            from ..session import SessionError

            try:
                check_images(message.images)
            except SessionError as exc:  # one line; the prompt was not sent
                await self.say(str(exc), "error")
                self.composer.set_text(text)
                return
        idle = not self.busy
        if self.driver is None:
            self._early.append((text, message.images))
        else:
            from ..errors import SessionError

            try:
                self.driver.submit(text, message.images)
            except SessionError as exc:  # the thread asked for could not be opened: the text stays to send later
                await self.say(str(exc), "error")
                self.composer.set_text(text)
                return
        if not idle or self.driver is None:
            # A prompt sent while nothing runs starts at once (its UserPrompt redraws the queue): shown as queued, the
            # line flashed up and away again, two layout passes between Enter and the answer (bench_tui.py)
            self._show_queue()

    async def slash(self, text: str) -> None:
        """Run a slash command typed in the composer."""
        head, _, arg = text.partition(" ")
        action = SLASH[head]
        if action.id == "diff":
            arg = arg.strip()
            if arg and not arg.isdigit():
                await self.say("usage: /diff [N] (N: a prompt number)", "warning")
                return
            self.open_diff(int(arg) if arg else None)
            return
        if action.id == "history":
            self.open_history(arg.strip())
            return
        if action.id == "stop":
            self.action_stop(arg.strip() or None)
            return
        if action.id in ("compact", "review", "init"):
            await self._queue_job(action.id, arg)
            return
        if action.id == "mention":
            self.composer.mention(arg.strip())
            return
        if action.id == "model" and arg.strip():
            words = arg.split()
            if len(words) > 2:
                await self.say(f"usage: /model {action.args}", "warning")
                return
            driver = self._need_driver()
            if driver is not None:
                self._background("model", partial(driver.set_model, words[0], words[1] if len(words) > 1 else None))
            return
        if action.id == "permissions" and arg.strip():
            from ..codex.permissions import find_preset
            from ..session import SessionError
            from .permissions_screen import confirm_then

            try:
                preset = find_preset(arg)
            except SessionError as exc:
                await self.say(str(exc), "warning")
                return
            driver = self._need_driver()
            if driver is not None:
                confirm_then(self.screen, preset,
                             lambda: self._background("permissions", partial(driver.set_permissions, preset.id)))
            return
        await self.run_action(action.method)

    async def _queue_job(self, kind: str, arg: str) -> None:
        """/compact, /review, /init: queued like a prompt (Esc interrupts it, the queued line shows it)."""
        driver = self._need_driver()
        if driver is None:
            return
        from ..session import SessionError

        try:
            if kind == "compact":
                driver.compact()
            elif kind == "review":
                driver.review(arg)
            else:
                driver.init()
        except SessionError as exc:
            await self.say(str(exc), "warning")
            return
        self._show_queue()

    def on_transcript_rewind_here(self, message: Transcript.RewindHere) -> None:
        self.start_rewind(message.number)

    def on_transcript_leave(self, message: Transcript.Leave) -> None:
        self.composer.focus_prompt()

    # ------------------------------------------------------------------ the other helpers' screens
    def _need_driver(self) -> DriverLike | None:
        driver = self.driver
        if driver is None or driver.session is None:
            why = getattr(driver, "unavailable", None)  # a replay: for good, so a transcript line
            if why:
                self.call_later(self.say, why, "warning")
            else:
                self.notify("Codex is still starting", severity="warning")
            return None
        return driver

    def _summary(self, text: str | None) -> None:
        if text:
            self.call_later(self.say, text)

    def _push(self, module: str, name: str, *args: Any, said_by_driver: bool = False, **kwargs: Any) -> None:
        """Push one of the dialog screens (imported lazily; it does its operation via the driver); its summary goes
        into the transcript unless the driver writes the line itself (a restore, a resume: one line each)."""
        driver = self._need_driver()
        if driver is None:
            return
        import importlib

        try:
            screen_cls = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        except (ImportError, AttributeError):
            self.notify(f"{name} is not available in this build", severity="error")
            return
        self.push_screen(screen_cls(driver, *args, **kwargs), None if said_by_driver else self._summary)

    def start_rewind(self, prompt: int | None = None) -> None:
        """Open the rewind picker (on prompt `prompt` when given)."""
        self._push("rewind_picker", "RewindPicker", start_prompt=prompt)

    def open_diff(self, prompt: int | None) -> None:
        """Open the diff screen (workspace now vs the start of the current turn or of prompt N)."""
        self._push("diff_screen", "DiffScreen", prompt)

    def open_history(self, text: str) -> None:
        """Open the history search (on `text` when given)."""
        self._push("history_screen", "HistoryScreen", text)

    # ------------------------------------------------------------------ actions (keys from the registry)
    def action_history(self) -> None:
        """Search every workspace's conversations."""
        self.open_history("")

    def action_rewind(self) -> None:
        """Rewind the conversation and the files."""
        self.start_rewind(None)

    def action_redo(self) -> None:
        """Undo the last rewind."""
        self._push("redo_dialog", "RedoDialog")

    def action_resume(self) -> None:
        """Resume a thread of this workspace."""
        self._push("threads_screen", "ThreadsScreen", said_by_driver=True)

    def action_threads(self) -> None:
        """List the workspace's threads."""
        self._push("threads_screen", "ThreadsScreen", said_by_driver=True)

    def action_snapshots(self) -> None:
        """The workspace's snapshots."""
        self._push("snapshots_screen", "SnapshotsScreen", said_by_driver=True)

    def action_diff(self) -> None:
        """Workspace now vs the start of the current turn."""
        self.open_diff(None)

    def action_new(self) -> None:
        """Start a new thread."""
        driver = self._need_driver()
        if driver is not None:
            self._background("new thread", driver.new_thread)

    def action_status(self) -> None:
        """The session's status as a transcript block."""
        driver = self._need_driver()
        if driver is not None:
            self._background("status", driver.status_detail, lambda st: self._emit(Notice(status_text(st))))

    def action_ps(self) -> None:
        """The commands still running in the background, as a transcript block."""
        driver = self._need_driver()
        if driver is not None:
            self._background("ps", driver.background_terminals,
                             lambda running: self._emit(Notice(background_text(running))))

    def action_stop(self, process_id: str | None = None) -> None:
        """End the background commands (or one); the transcript says which were ended."""
        driver = self._need_driver()
        if driver is not None:
            self._background("stop", partial(driver.stop_terminals, process_id),
                             lambda stopped: self._emit(Notice(stopped_text(stopped, process_id))))

    def action_model(self) -> None:
        """Pick the model, then its reasoning effort (the official TUI's two steps)."""
        self._push("model_screen", "ModelScreen", said_by_driver=True)

    def action_permissions(self) -> None:
        """Pick the approval policy and sandbox preset."""
        self._push("permissions_screen", "PermissionsScreen", said_by_driver=True)

    def action_transcript(self) -> None:
        """The whole thread's transcript in a pager (nothing folded, nothing cut); Ctrl+T again closes it."""
        from .full_transcript import TranscriptScreen, full_text

        if isinstance(self.screen, TranscriptScreen):
            self.screen.dismiss(None)
            return
        if len(self.screen_stack) > 1:
            raise SkipAction()  # another dialog is open: its keys first
        self.push_screen(TranscriptScreen(full_text(self.transcript.entries)))

    async def action_compact(self) -> None:
        """Summarise the conversation to free context."""
        await self._queue_job("compact", "")

    async def action_review(self) -> None:
        """Code review of the uncommitted changes."""
        await self._queue_job("review", "")

    async def action_init(self) -> None:
        """Ask Codex for an AGENTS.md."""
        await self._queue_job("init", "")

    def action_mention(self) -> None:
        """Insert `@` and search the workspace's files."""
        self.composer.mention("")

    def action_help(self) -> None:
        """Keys and slash commands."""
        from .help_screen import HelpScreen

        self.push_screen(HelpScreen(self.keymap, self.banner))

    async def action_quit(self) -> None:
        """Leave codexr."""
        self.exit(0)

    def action_block_prev(self) -> None:
        """Into the transcript with the block cursor."""
        t = self.transcript
        if self.focused is not t:
            t.focus()
            t.enter_cursor(last=True)
        else:
            t.move(-1)

    def action_block_next(self) -> None:
        """Block cursor down."""
        t = self.transcript
        if self.focused is t:
            t.move(1)

    def _interrupt_turn(self) -> bool:
        """Stop the running turn and drop queued prompts; False when nothing ran."""
        if not self.busy:
            return False
        self._early.clear()
        for asked in list(self._approvals):
            self._resolve(asked, "cancel")
        driver = self.driver
        if driver is not None:
            self._background("interrupt", driver.interrupt)
        self.notify("interrupting the turn…")
        self._show_queue()
        return True

    def action_interrupt(self) -> None:
        """Esc: close a completion, interrupt a turn, leave the transcript; twice on an empty composer: rewind."""
        if len(self.screen_stack) > 1 or self.query_one(ApprovalPanel).display:
            raise SkipAction()  # a dialog or the approval request handles its own Esc
        if self.composer.completing:
            self.composer.close_completions()
            return
        if self._interrupt_turn():
            return
        if self.focused is self.transcript:
            self.composer.focus_prompt()
            return
        if self.composer.text.strip():
            return
        now = time.monotonic()
        if now - self._last_esc < DOUBLE_PRESS_S:
            self._last_esc = 0.0
            self.start_rewind(None)
        else:
            self._last_esc = now

    def action_interrupt_or_quit(self) -> None:
        """Ctrl+C: interrupt a turn, else clear the composer, else (twice) quit."""
        if len(self.screen_stack) > 1:
            raise SkipAction()
        if self._interrupt_turn():
            return
        if self.composer.display and self.composer.text:
            self.composer.set_text("")
            return
        now = time.monotonic()
        if now - self._last_ctrl_c < DOUBLE_PRESS_S:
            self.exit(0)
        else:
            self._last_ctrl_c = now
            self.notify("press Ctrl+C again to quit")


def status_text(s: Status) -> str:
    """/status as a few lines."""
    from ..shared.lines import status_lines

    return "status\n  " + "\n  ".join(status_lines(s))


def run_tui(opts: SessionOptions | Callable[[], SessionOptions] | None = None, *, thread_id: str | None = None,
            resume_last: bool = False, banner: str = "", settings: CodexrSettings | None = None,
            workspace: str = "", driver_factory: DriverFactory | None = None, record: Path | None = None,
            splash: Splash | None = None, prompt: str = "", images: tuple[str, ...] = (),
            farewell: Farewell | None = None) -> int:
    """Run the app until the user quits; `opts` may be a factory so the SDK loads after the first frame.

    `farewell(thread_id, workspace)`: the line printed after the app is gone (default: how to resume the thread).

    `splash`: the frame drawn before Textual loaded; its settings stand until the app's driver sets its own, which
    restores the terminal's own at exit (given back here if the app fails before that), and the frame is taken down
    if the app fails before it is made.
    """
    try:
        conf = settings if settings is not None else getattr(opts, "settings", None)
        keys = dict(conf.tui.keys) if conf is not None else {}
        app = CodexrApp(opts, driver_factory=driver_factory, record=record, thread_id=thread_id,
                        resume_last=resume_last, banner=banner, keymap=keys, workspace=workspace, prompt=prompt,
                        images=images)
    except BaseException:
        if splash is not None:
            splash.close()
        raise
    if splash is not None:
        app.typed_ahead, app.terminal_before = splash.hand_over()
    try:
        code = app.run()
    finally:
        if splash is not None:
            splash.give_back(app.terminal_before)  # still here: the app failed before its driver took them
    thread = app.driver.thread_id if app.driver is not None else None
    opts_now = getattr(app.driver, "opts", None)  # a replay has none: it continues nothing
    if thread and opts_now is not None:
        from ..services.thread_label import resume_line

        print((farewell or resume_line)(thread, str(opts_now.cwd)))
    return int(code or 0)
