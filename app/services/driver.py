"""One interactive session for any front end: Codex runs in worker threads, results arrive as events.

The Textual app and the line mode both hold a `Driver` and nothing else of the core. Every method
may block (call it from a worker thread, never from the UI's event loop) except `submit`,
`interrupt` and `close`; everything the user should see is passed to `emit` (typed events from
app/codex/events.py), which may be called from any thread. An approval arrives as `ApprovalAsked`
carrying a future the front end resolves.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from snapshot_store import RestoreResult, StoreError
from snapshot_store.errors import Interrupted
from snapshot_store.interrupts import StopRequest, stoppable
from snapshot_store.store import SnapshotInfo

from ..codex.events import (
    AgentDelta,
    AgentMessage,
    ApprovalAsked,
    ApprovalDecided,
    CodexDied,
    FileStat,
    Notice,
    Ready,
    StartFailed,
    Status,
    StatusChanged,
    ThreadLoaded,
    TokenUsage,
    TurnFinished,
    UserPrompt,
)
from ..codex.images import check_images, with_labels
from ..codex.permissions import PRESETS, Preset, find_preset
from ..codex.translate import notification_events, turn_events
from ..codex.turn_settings import ModelInfo
from ..errors import CodexGone, Declined, Stopped
from ..rewind.owners import Decision, conflicts, merged_texts
from ..rewind.picks import Picks
from ..session import (
    ApprovalRequest,
    BackgroundTerminal,
    RedoResult,
    RewindResult,
    Session,
    SessionError,
    SessionOptions,
    ThreadSummary,
)
from ..shared.lines import over_limit_line
from ..shared.vocab import CONVERSATION_MODES, RewindMode
from ..shared.words import plural
from . import changes
from .background import running_note
from .init_prompt import init_prompt
from .review_target import review_target
from .usage import TurnUsage

Emit = Callable[[Any], None]
# A pipe closes a moment before its process can be reaped; seconds a Codex whose pipe closed is given to end.
EXIT_GRACE = 2.0
LOGIN_WORDS = ("login", "log in", "api key", "apikey", "unauthorized", "401", "auth")


@dataclass(frozen=True)
class PromptRow:
    """One prompt of the thread as the rewind picker lists it."""

    number: int
    turn_id: str
    text: str
    started: float | None
    status: str
    has_snapshot: bool
    snapshot_gone: bool
    files: tuple[FileStat, ...] | None  # None: unknown (no snapshots around the turn)
    no_snapshot_reason: str | None = None  # why it is conversation-only (sent outside codexr, snapshots off)
    by_codexr: bool = True  # False: another Codex client sent it, before codexr continued the thread


@dataclass(frozen=True)
class Preview:
    """A rewind, redo or snapshot restore as it would happen: the dry run and each file's diff."""

    title: str
    result: RewindResult | RedoResult | RestoreResult
    restore: RestoreResult | None
    diffs: dict[str, tuple[FileStat, str]]
    warnings: tuple[str, ...] = ()  # another live session's work is at stake: front ends show these and ask
    notes: tuple[str, ...] = ()  # shown with the plan, nothing asked: the agent's commands that still run

    @property
    def must_ask(self) -> bool:
        """Confirming needs an explicit yes (another codexr session is live in this workspace)."""
        return bool(self.warnings)


@dataclass(frozen=True)
class Job:
    """What the queue runs on the thread, in order: a prompt (its text and images), a compaction or a review."""

    kind: str  # prompt | compact | review
    text: str  # the prompt; for the others what the queued line shows (/compact, /review ...)
    images: tuple[str, ...] = ()
    target: dict[str, Any] | None = None  # a review's target (review/start)


@dataclass
class Stoppable:
    """The rewind, redo or snapshot restore running now, which Ctrl+C asks to stop (`Driver.stop_restore`)."""

    what: str  # rewind | redo | restore
    undo: str  # how the user undoes it once it has finished
    request: StopRequest
    said_late: bool = False  # the user was told it finishes first


class Busy(SessionError):
    """The operation needs the session idle (a turn is running)."""


class Driver:
    """A Session plus a prompt queue, run off the UI thread."""

    def __init__(self, opts: SessionOptions, emit: Emit, *, thread_id: str | None = None,
                 resume_last: bool = False) -> None:
        self.opts = opts
        self.emit = emit
        self.session: Session | None = None
        self.thread_id: str | None = thread_id
        self._resume_last = resume_last
        self._queue: queue.Queue[Job | None] = queue.Queue()
        self._pending: list[Job] = []
        self._ops = threading.RLock()  # one store/Codex operation at a time (a turn holds it throughout)
        self._running: tuple[str, str] | None = None  # (thread, turn) of the running turn
        self._active = False  # a dequeued prompt is being run (from its pre-turn capture until its end)
        self._turns_begun = 0  # counts dequeued prompts: an operation that waited for the lock sees a turn ran
        self._prompt_count = 0
        self._last_capture: tuple[float, float] | None = None
        self._context: tuple[int, int] | None = None  # (tokens of the last request, window) of the current thread
        self._usage = TurnUsage()  # each turn's tokens (their sum) and the context after it
        self._said_over_limit = False  # the untracked files beyond the recent-file limit were named this session
        self._closed = False
        self._runner: threading.Thread | None = None
        # threads whose edits the user accepted "for this session": Codex would ask again for another file
        self._edits_accepted: set[str] = set()
        #: The thread the user asked for at start that could not be opened: prompts wait for /resume or /new.
        self._unopened: str | None = None
        self._stoppable: Stoppable | None = None  # the rewind, redo or restore running: Ctrl+C asks it to stop

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> bool:
        """Start Codex (slow: call from a worker). Emits Ready or StartFailed; True when ready."""
        try:
            self.session = Session(self.opts, approval=self._ask, on_notice=self._on_notice)
        except SessionError as exc:
            text = str(exc)
            self.emit(StartFailed(text, any(w in text.lower() for w in LOGIN_WORDS)))
            return False
        except Exception as exc:  # a front end must get a message, never a dead worker
            self.emit(StartFailed(f"cannot start Codex: {exc}"))
            return False
        try:
            if self.thread_id is None and self._resume_last:
                self.thread_id = self.session.last_thread()
            if self.thread_id is not None:
                self.load(self.thread_id, reason="resumed")
        except SessionError as exc:
            self.emit(Notice(str(exc), "error"))
            self._unopened, self.thread_id = self.thread_id, None  # a prompt now must not start another conversation
        self._runner = threading.Thread(target=self._run_queue, daemon=True, name="codexr-turns")
        self._runner.start()
        self.emit(Ready(self.status()))
        return True

    def close(self) -> None:
        """Stop the queue and Codex (interrupting a running turn first)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.interrupt()
        self._queue.put(None)
        if self.session is not None:
            self.session.close()

    def _need(self) -> Session:
        if self.session is None:
            raise SessionError("Codex is not running")
        return self.session

    @property
    def unopened(self) -> str | None:
        """The thread asked for at start that could not be opened (prompts are refused until /resume or /new)."""
        return self._unopened if self.thread_id is None else None

    @property
    def busy(self) -> bool:
        """A turn is running or prompts are queued."""
        return self._active or self._running is not None or bool(self._pending)

    def require_idle(self, what: str) -> None:
        """Raise Busy (with a message saying `what` must wait) while a turn runs or prompts are queued."""
        self._idle(what)

    def _idle(self, what: str) -> None:
        if self.busy:
            raise Busy(f"cannot {what} while a turn is running: wait for it, or interrupt it (Esc)")

    @contextlib.contextmanager
    def _exclusive(self, what: str) -> Iterator[Session]:
        """Hold the operation lock for a file-changing operation, refusing if a turn runs or ran meanwhile.

        The first check answers at once; the second, under the lock, catches a prompt dequeued between the
        check and the lock (its turn held the lock, so this operation would otherwise run after it, against
        files the user never previewed).
        """
        self._idle(what)
        begun = self._turns_begun
        with self._ops:
            if self._turns_begun != begun:
                raise Busy(f"cannot {what}: a prompt ran meanwhile; look at the plan again")
            self._idle(what)
            yield self._need()

    @contextlib.contextmanager
    def _stopped_by_ctrl_c(self, what: str, undo: str) -> Iterator[StopRequest]:
        """Run a rewind, redo or restore that `stop_restore` (Ctrl+C) stops as the CLI's SIGINT does: before its files
        change it does nothing (the body's `confirm` declines), while they change they go back as they were
        (snapshot_store's StopRequest), after that it finishes. A stopped one emits its one line and raises Stopped."""
        running = Stoppable(what, undo, StopRequest())
        self._stoppable = running
        try:
            with stoppable(running.request):
                yield running.request
        except Interrupted as exc:
            raise self._said_stopped(f"Ctrl+C: {exc}") from exc
        except Declined as exc:
            if running.request.signum is None:
                raise
            raise self._said_stopped(f"Ctrl+C: the {what} was stopped before any file changed; nothing changed"
                                     ) from exc
        finally:
            self._stoppable = None
        if running.request.signum is not None and not running.said_late:  # asked as its last step went
            self.emit(Notice(f"Ctrl+C came as the {what} ended: its files are restored, it stands ({undo})", "warning"))

    def _said_stopped(self, text: str) -> Stopped:
        self.emit(Notice(text, "warning"))
        self.emit(StatusChanged(self.status()))
        return Stopped(text)

    def stop_restore(self) -> str | None:
        """Ctrl+C while a rewind, redo or snapshot restore runs (any thread, never blocks): the line to show now, None
        when none runs. Its files go back as they were unless they are all restored already: then it finishes."""
        running = self._stoppable
        if running is None:
            return None
        if running.request.ended:
            running.said_late = True
            return f"the {running.what}'s files are restored already: it finishes first ({running.undo})"
        running.request.request()
        return f"stopping the {running.what}: the files it changed go back as they were…"

    # ------------------------------------------------------------------ prompts
    def submit(self, text: str, images: tuple[str, ...] | list[str] = ()) -> None:
        """Queue a prompt, with image files to send with it (runs after the current turn). Never blocks.

        SessionError (nothing queued) while the thread the user asked for at start could not be opened: the prompt
        would otherwise begin another conversation unasked."""
        if self.unopened is not None:
            raise SessionError(f"not sent: thread {self.unopened} could not be opened (see above); /resume opens it "
                               "or another, /new starts a new conversation")
        self._enqueue(Job("prompt", text, tuple(images)))

    def _enqueue(self, job: Job) -> None:
        self._pending.append(job)
        self._queue.put(job)

    def compact(self) -> None:
        """Queue a compaction of the conversation (`/compact`): Codex summarises it to free context."""
        if self.thread_id is None and not self._pending:
            raise SessionError("nothing to compact: no prompt was sent yet")
        self._enqueue(Job("compact", "/compact"))

    def review(self, words: str = "") -> None:
        """Queue a code review (`/review [branch NAME | commit SHA | INSTRUCTIONS]`; none: uncommitted changes)."""
        target = review_target(words)  # SessionError: usage
        self._enqueue(Job("review", f"/review {words.strip()}".strip(), target=target))

    def init(self) -> str:
        """Queue /init's prompt (an AGENTS.md for the workspace); SessionError when there is one already."""
        text = init_prompt(self.session.cwd if self.session is not None else self.opts.cwd)
        self.submit(text)
        return text

    def find_files(self, query: str) -> list[str]:
        """Workspace files matching `query` fuzzily, best first (Codex's file search, as `@` in the official TUI)."""
        return self._need().find_files(query)

    def pending(self) -> list[str]:
        """What waits for the running turn to end (prompts, /compact, /review), as the queued line shows it."""
        return [j.text for j in self._pending]

    def interrupt(self) -> bool:
        """Ask Codex to stop the running turn and drop queued prompts; False when nothing ran."""
        dropped = len(self._pending)
        self._pending.clear()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        running = self._running
        if running is None or self.session is None:
            return dropped > 0
        try:
            self.session.interrupt(*running)
        except SessionError as exc:
            self.emit(Notice(str(exc), "error"))
        return True

    def _run_queue(self) -> None:
        while True:
            job = self._queue.get()
            if job is None or self._closed:
                return
            self._active = True  # before leaving _pending, so `busy` never reads False in between
            self._turns_begun += 1
            if job in self._pending:
                self._pending.remove(job)
            try:
                if job.kind == "prompt":
                    self._turn(job.text, images=job.images)
                else:
                    self._thread_turn(job)
            except Exception as exc:  # the session goes on after any failure
                self.emit(Notice(f"the {'prompt' if job.kind == 'prompt' else job.text} failed: {exc}", "error"))
            finally:
                self._active = False
            self.emit(StatusChanged(self.status()))

    def _thread_turn(self, job: Job) -> None:
        """/compact or /review: a turn Codex runs on the thread that is no prompt (no snapshot, no rewind point)."""
        with self._ops:
            s = self._need()
            if self.thread_id is None:
                self.emit(Notice(f"{job.text}: no prompt was sent yet, nothing to {job.kind}", "warning"))
                return
            thread, cwd = self.thread_id, str(s.cwd)
            review = job.kind == "review"

            def on_event(method: str, params: dict[str, Any]) -> None:
                turn = params.get("turn") if isinstance(params.get("turn"), dict) else {}
                tid = params.get("turnId") or (turn or {}).get("id")
                if method == "turn/started" and (turn or {}).get("id"):
                    self._running = (thread, str((turn or {})["id"]))  # a review's reviewer turn is the active one
                elif self._running is None and tid:
                    self._running = (thread, str(tid))  # Esc interrupts it like a prompt's turn
                item = params.get("item") if isinstance(params.get("item"), dict) else {}
                for ev in notification_events(method, params, cwd):
                    if isinstance(ev, TokenUsage):
                        ev = self._usage.seen(ev)
                    if review and isinstance(ev, AgentDelta | AgentMessage) and (
                            method == "item/agentMessage/delta" or (item or {}).get("type") == "agentMessage"):
                        continue  # the reviewer's raw answer (JSON): the review shows from exitedReviewMode
                    self.emit(ev)

            try:
                if review:
                    status, error = s.review(thread, job.target or {"type": "uncommittedChanges"}, on_event)
                else:
                    status, error = s.compact(thread, on_event)
            finally:
                self._running = None
            s.mark_used(thread)
            if not review and status == "completed":
                self._context = None  # what a compacted thread holds is known with its next model response
            if status != "completed" or error:
                what = "review" if review else "compaction"
                self.emit(Notice(f"{what} {status}" + (f": {error}" if error else ""),
                                 "warning" if status == "interrupted" else "error"))

    def _turn(self, text: str, *, retry: bool = True, shown: bool = False,
              images: tuple[str, ...] = ()) -> None:
        try:
            check_images(images)  # a file gone since it was attached: one line, nothing sent
        except SessionError as exc:
            self.emit(Notice(str(exc), "error"))
            return
        with self._ops:
            s = self._need()
            if self.unopened is not None:  # typed before Codex was up, then the thread asked for failed to open
                self.emit(Notice(f"not sent: {text[:60]!r}: thread {self.unopened} could not be opened; /resume opens "
                                 "it or another, /new starts a new conversation", "error"))
                return
            if self.thread_id is None:
                try:
                    self.thread_id = s.start_thread()
                except (SessionError, OSError) as exc:  # Codex died while idle: a new thread needs it too
                    if self._after_failure(str(exc), gone=isinstance(exc, (CodexGone, OSError))) and retry:
                        self._turn(text, retry=False, shown=shown, images=images)
                    return
                self.emit(ThreadLoaded(self.thread_id, (), "new"))
            thread = self.thread_id
            self._prompt_count += 1
            if not shown:  # a retried prompt is already on screen
                self.emit(UserPrompt("", with_labels(text, images), self._prompt_count, s.tracking))
            cwd = str(s.cwd)
            started = False

            def on_event(method: str, params: dict[str, Any]) -> None:
                nonlocal started
                if method == "turn/started":
                    started = True
                    turn = params.get("turn") or {}
                    self._running = (thread, str(turn.get("id") or ""))
                for ev in notification_events(method, params, cwd):
                    if isinstance(ev, TokenUsage):
                        ev = self._usage.seen(ev)
                        if ev.context_window:
                            self._context = (ev.last_total, ev.context_window)
                    self.emit(ev)

            try:
                outcome = s.run_turn(thread, text, on_event, images)
            except (SessionError, OSError) as exc:  # OSError: a pipe to a Codex that died while idle
                self._prompt_count -= 1
                self._running = None
                restarted = self._after_failure(str(exc), gone=isinstance(exc, (CodexGone, OSError)))
                if restarted and retry and not started:  # it never reached Codex: send it to the new one
                    self.emit(Notice("sending the prompt again to the restarted Codex"))
                    self._turn(text, retry=False, shown=True, images=images)
                return
            finally:
                self._running = None
            files: tuple[FileStat, ...] = ()
            with contextlib.suppress(StoreError):
                files = changes.turn_files(s.store, outcome.pre, outcome.post)
            if not files and outcome.files_changed and (outcome.pre is None or outcome.post is None):
                # no snapshots to compare: what the agent's edits named (a declined edit names a file too)
                files = tuple(FileStat(p, "modified") for p in outcome.files_changed)
            self._last_capture = (time.time(), outcome.post_capture_seconds)
            running = self._running_after(s, thread)  # asked before the turn is reported: then it is over at once
            self.emit(TurnFinished(outcome.turn_id, outcome.status, outcome.error, outcome.seconds, files,
                                   outcome.pre, outcome.post, outcome.capture_error))
            if running:
                self.emit(Notice(f"{plural(running, 'background terminal')} running · /ps to view"
                                 " · /stop to close", "warning"))
            held, limit = s.recorder.over_limit
            if held and not self._said_over_limit:  # once a session: it holds until the files are added or the limit
                self._said_over_limit = True        # raised, and a line each turn would drown the transcript
                self.emit(Notice(over_limit_line(held, limit), "warning"))
            if outcome.error and not s.codex_alive():
                self._after_failure(outcome.error)

    def _running_after(self, s: Session, thread: str) -> int:
        """After a turn: how many of its commands run on (an interrupt does not stop them), as the official TUI says."""
        try:
            return len(s.background_terminals(thread))
        except SessionError:
            return 0

    def background_terminals(self) -> list[BackgroundTerminal]:
        """The current thread's commands still running after their turn (/ps)."""
        if self.thread_id is None:
            return []
        return self._need().background_terminals(self.thread_id)

    def stop_terminals(self, process_id: str | None = None) -> list[BackgroundTerminal]:
        """End the current thread's background terminals, or one of them (/stop); the ones that were ended."""
        if self.thread_id is None:
            return []
        return self._need().stop_terminals(self.thread_id, process_id)

    def _after_failure(self, message: str, gone: bool = False) -> bool:
        """When Codex itself died: say so, start it again and resume the thread; True when restarted.

        `gone`: the call failed because Codex's pipe closed; its process may not be reaped yet (a moment that grows
        under load), so it is given EXIT_GRACE seconds to end before it counts as alive and merely failing.
        """
        s = self.session
        if s is None or (not s.codex_exited(EXIT_GRACE) if gone else s.codex_alive()):
            self.emit(Notice(message, "error"))
            return False
        try:
            s.restart_codex(self.thread_id)  # the session's store, recorder and choices go on with the new Codex
        except SessionError as exc:
            with contextlib.suppress(Exception):
                s.close()
            self.session = None
            self.emit(CodexDied(f"Codex stopped ({message}) and could not be restarted: {exc}", False))
            return False
        self.emit(CodexDied(f"Codex stopped ({message}); restarted it and resumed the thread", True))
        return True

    # ------------------------------------------------------------------ approvals and notices
    def _ask(self, req: ApprovalRequest) -> str:
        """Runs on a session thread: hand the request to the front end and wait for its answer."""
        timeout = self.opts.settings.file_snapshots.approval_timeout_seconds
        summary = req.command or ", ".join(self._shown_path(str(c.get("path", ""))) for c in req.changes) or req.kind
        if req.kind == "fileChange" and req.thread_id in self._edits_accepted:
            self.emit(ApprovalDecided(req.item_id, req.kind, "acceptForSession", summary))
            return "acceptForSession"
        asked = ApprovalAsked(req, timeout=timeout, asked_at=time.time())
        self.emit(asked)
        try:
            decision = asked.future.result(timeout=timeout)
        except Exception:
            asked.future.cancel()
            self.emit(ApprovalDecided(req.item_id, req.kind, "decline (timed out)", summary))
            return "decline"
        if req.kind == "fileChange" and decision == "acceptForSession":
            self._edits_accepted.add(req.thread_id)
        self.emit(ApprovalDecided(req.item_id, req.kind, decision, summary))
        return decision

    def _on_notice(self, method: str, params: dict[str, Any]) -> None:
        if method == "codexr/gc":
            return
        if method == "codexr/gcFailed":
            self.emit(Notice(f"automatic gc failed: {params.get('message')}", "warning"))
        elif method in ("codexr/continued", "codexr/attached"):
            self.emit(Notice(str(params.get("message") or "")))
        elif method in ("warning", "configWarning"):
            text = params.get("message") or params.get("summary") or ""
            if text:
                self.emit(Notice(str(text), "warning"))

    # ------------------------------------------------------------------ state
    def status(self) -> Status:
        """The status bar's values now (cheap: stat calls and one sidecar read)."""
        s = self.session
        if s is None:
            return Status(workspace=str(self.opts.cwd))
        tracked: int | None = None
        redo = 0
        if self.thread_id is not None:
            with contextlib.suppress(StoreError, OSError):
                side = s.sidecars.load(self.thread_id)
                if side is not None:
                    redo = len(side.redo)
                    latest = side.files_snapshot()
                    if latest is not None:
                        tracked = s.store.info(latest).file_count
        at, secs = self._last_capture or (None, None)
        others: tuple[str, ...] = ()
        with contextlib.suppress(Exception):
            others = tuple(s.other_sessions())
        used, window = self._context or (None, None)
        effort, approval, sandbox = s.turn_settings.current()
        return Status(model=s.model, workspace=str(s.cwd), thread_id=self.thread_id or "", tracking=s.tracking,
                      tracked_files=tracked, store_bytes=store_bytes(s.store_dir), last_capture_at=at,
                      last_capture_seconds=secs, redo_depth=redo, others=others, busy=self.busy,
                      context_used=used, context_window=window, effort=effort, approval=approval, sandbox=sandbox)

    def status_detail(self) -> Status:
        """The status as /status shows it: what Codex would use where nothing was chosen or reported yet
        (config.toml's approval and sandbox, the model's default effort), each marked as such."""
        st = self.status()
        s = self.session
        if s is None:
            return st
        model, approval, sandbox, effort = st.model, st.approval, st.sandbox, st.effort
        if not model or not approval or not sandbox:  # no thread yet: what Codex's config says
            config = s.configured()
            model = model or str(config.get("model") or "")
            if not approval and config.get("approval_policy"):
                approval = f"{config['approval_policy']} (config.toml)"
            if not sandbox and config.get("sandbox_mode"):
                sandbox = f"{config['sandbox_mode']} (config.toml)"
        if not effort:
            with contextlib.suppress(SessionError):
                info = next((m for m in s.model_catalog() if m.id == model), None)
                if info is not None and info.default_effort:
                    effort = f"{info.default_effort} (the model's default)"
        return replace(st, model=model, approval=approval, sandbox=sandbox, effort=effort)

    def load(self, thread_id: str, reason: str = "resumed", composer: str = "") -> None:
        """Make `thread_id` the current thread and emit its whole transcript (from Codex's own turns)."""
        with self._ops:
            s = self._need()
            tid = s.resume_thread(thread_id)
            s.mark_used(tid)
            events = self.transcript(tid)
            if tid != self.thread_id:  # Codex reports a thread's usage with its next model response: until then, the
                # context after its last prompt's turn, when that turn ran here (a rewind's fork, a redo's original)
                last = next((e.turn_id for e in reversed(events) if isinstance(e, UserPrompt)), None)
                self._context = self._usage.context_after(last)
            self.thread_id, self._unopened = tid, None
            self._prompt_count = sum(1 for e in events if isinstance(e, UserPrompt))
            self.emit(ThreadLoaded(tid, tuple(events), reason, composer))
            self.emit(StatusChanged(self.status()))

    def transcript(self, thread_id: str) -> list[Any]:
        """A thread's transcript as events, read back from Codex."""
        s = self._need()
        try:
            turns = s.connection.thread_turns(thread_id)
        except Exception:
            return []  # a thread without a turn has no rollout to read turns from
        side = s.sidecars.load(thread_id)
        snaps = {t.turn_id: t.pre is not None for t in side.turns} if side else {}
        return turn_events(turns, str(s.cwd), snaps)

    def new_thread(self) -> None:
        """Start afresh: the next prompt begins a new thread."""
        self._idle("start a new thread")
        self.thread_id = self._unopened = None
        self._prompt_count = 0
        self._context = None
        self.emit(ThreadLoaded("", (), "new"))
        self.emit(StatusChanged(self.status()))

    def models(self) -> list[str]:
        """The models Codex offers, by id."""
        with self._ops:
            return self._need().models()

    def model_catalog(self) -> list[ModelInfo]:
        """The models Codex offers with the reasoning efforts each supports (a read: never waits for a turn)."""
        return self._need().model_catalog()

    def set_model(self, model: str, effort: str | None = None) -> str:
        """Use `model` (with reasoning `effort`; None: the model's default) from the next prompt on; refused
        (SessionError, nothing changed) when Codex does not offer the model or the model not the effort."""
        model = model.strip()
        catalog = self.model_catalog()
        info = next((m for m in catalog if m.id == model), None)
        if catalog and info is None:
            offered = ", ".join(m.id for m in catalog)
            raise SessionError(f"Codex does not offer the model {model!r}; it offers: {offered}")
        if effort is not None:
            effort = effort.strip().lower()
            if info is not None and not info.supports(effort):
                efforts = ", ".join(e for e, _ in info.efforts)
                raise SessionError(f"{model} has no reasoning effort {effort!r}; it offers: {efforts}")
        self._need().use_model(model, effort)
        said = f"{model}, reasoning {effort}" if effort else model
        self.emit(Notice(f"model: {said} from the next prompt on"))
        self.emit(StatusChanged(self.status()))
        return model

    def permission_presets(self) -> tuple[Preset, ...]:
        """The /permissions choices."""
        return PRESETS

    def set_permissions(self, name: str) -> Preset:
        """Use a preset's approval policy and sandbox from the next prompt on (SessionError: no such preset)."""
        preset = find_preset(name)
        self._need().use_permissions(preset.approval, preset.sandbox)
        self.emit(Notice(f"Permissions updated to {preset.summary()} from the next prompt on"))
        self.emit(StatusChanged(self.status()))
        return preset

    def threads(self) -> list[ThreadSummary]:
        """This workspace's threads, newest first."""
        with self._ops:
            return self._need().threads()

    # ------------------------------------------------------------------ rewind / redo
    def prompt_rows(self) -> list[PromptRow]:
        """Every prompt of the current thread, with the files each changed (from its snapshots)."""
        if self.thread_id is None:
            return []
        with self._ops:
            s = self._need()
            prompts = s.prompts(self.thread_id)
            side = s.sidecars.load(self.thread_id)
            rows = []
            for i, p in enumerate(prompts):
                rec = side.turn(p.turn_id) if side else None
                post = rec.post if rec and rec.post else (prompts[i + 1].pre if i + 1 < len(prompts) else None)
                files: tuple[FileStat, ...] | None = None
                gone = bool(p.pre) and not s.store.exists(str(p.pre))
                if p.pre and post and not gone:
                    try:
                        files = changes.turn_files(s.store, p.pre, post)
                    except StoreError:
                        files = None
                rows.append(PromptRow(p.number, p.turn_id, p.text, rec.started if rec else None, p.status,
                                      p.pre is not None, gone, files, p.no_snapshot_reason(),
                                      p.by_codexr))
            return rows

    def rewind_preview(self, to: int, mode: str = RewindMode.BOTH) -> Preview:
        """The exact plan of a rewind to prompt `to` (a dry run) and each file's diff."""
        with self._exclusive("rewind") as s:
            if self.thread_id is None:
                raise SessionError("nothing to rewind: no prompt was sent yet")
            res = s.rewind(self.thread_id, to, mode, dry_run=True)
            return Preview(f"rewind to prompt {to}", res, res.restore, _diffs(s, res.restore, res.decided),
                           self._warnings(s, res.restore), self._running_note(s, res.restore))

    def rewind(self, to: int, mode: str = RewindMode.BOTH, choices: Mapping[str, str] | None = None
               ) -> RewindResult:
        """Rewind and load the resulting thread; the chosen prompt goes back to the composer. `choices`: the
        user's per-file choices in the preview (path -> owners.MINE / REWOUND / BOTH)."""
        with self._stopped_by_ctrl_c("rewind", "/redo undoes it") as stop, self._exclusive("rewind") as s:
            if self.thread_id is None:
                raise SessionError("nothing to rewind: no prompt was sent yet")
            res = s.rewind(self.thread_id, to, mode, confirm=lambda _p: stop.signum is None,
                           picks=Picks(choice=dict(choices or {})))
            where = ("files restored to before prompt" if mode not in CONVERSATION_MODES
                     else "conversation forked before prompt")
            self.load(res.thread_id, reason=f"{where} {res.to_prompt}", composer=res.prompt)
            return res

    def redo_preview(self) -> Preview:
        """What a redo of the last rewind would bring back, and what changed since the rewind."""
        with self._exclusive("redo") as s:
            if self.thread_id is None:
                raise SessionError("nothing to redo")
            res = s.redo(self.thread_id, dry_run=True)
            return Preview("redo", res, res.restore, _diffs(s, res.restore, res.decided),
                           self._warnings(s, res.restore), self._running_note(s, res.restore))

    def redo(self, choices: Mapping[str, str] | None = None) -> RedoResult:
        """Undo the last rewind and load the thread it returns to (`choices` as for `rewind`)."""
        with self._stopped_by_ctrl_c("redo", "a rewind to the same prompt undoes it") as stop, \
                self._exclusive("redo") as s:
            if self.thread_id is None:
                raise SessionError("nothing to redo")
            res = s.redo(self.thread_id, confirm=lambda _p: stop.signum is None,
                         picks=Picks(choice=dict(choices or {})))
            self.load(res.thread_id, reason="back on the thread the rewind left")
            return res

    # ------------------------------------------------------------------ diff and snapshots
    def diff(self, prompt: int | None = None) -> list[tuple[FileStat, str]]:
        """The workspace now against the start of the current turn (or of prompt N), per file."""
        with self._ops:
            s = self._need()
            if self.thread_id is None:
                raise SessionError("no prompt was sent yet: nothing to compare against")
            prompts = s.prompts(self.thread_id)
            if not prompts:
                raise SessionError("no prompt was sent yet: nothing to compare against")
            target = prompts[-1] if prompt is None else s.resolve_prompt(prompts, prompt)
            if target.pre is None:
                raise SessionError(f"prompt {target.number} has no file snapshot")
            now = s.store.at(s.cwd).preview(known_paths=s.known_paths(self.thread_id), scope=s.scope)
            return changes.workspace_diff(s.store, str(s.cwd), target.pre, now.files)

    def snapshots(self) -> list[SnapshotInfo]:
        """This workspace's snapshots, newest first."""
        with self._ops:
            s = self._need()
            return list(reversed(s.store.list_snapshots(s.cwd)))

    def snapshot_preview(self, snap_id: str) -> Preview:
        """What restoring a snapshot would do (dry run) with each file's diff."""
        with self._exclusive("restore a snapshot") as s:
            sid = s.store.resolve(snap_id)
            res = s.store.at(s.cwd).restore(sid, dry_run=True, known_paths=self._known(s), scope=s.scope)
            return Preview(f"restore snapshot {sid[:12]}", res, res, changes.plan_diffs(s.store, res.plan),
                           self._warnings(s, res))

    def restore_snapshot(self, snap_id: str) -> RestoreResult:
        """Restore a snapshot of this workspace (after its own safety capture)."""
        with self._stopped_by_ctrl_c("restore", "its safety snapshot in /snapshots undoes it"), \
                self._exclusive("restore a snapshot") as s:
            sid = s.store.resolve(snap_id)
            res = s.store.at(s.cwd).restore(sid, known_paths=self._known(s), scope=s.scope)
            self.emit(Notice(f"restored snapshot {sid[:12]}: {len(res.written)} written, {len(res.deleted)} "
                             f"deleted; undo with /snapshots → {str(res.safety_id)[:12]}"))
            self.emit(StatusChanged(self.status()))
            return res

    def _shown_path(self, path: str) -> str:
        """A path as the user thinks of it: relative to the workspace when inside it."""
        root = str(self.session.cwd) if self.session is not None else os.path.abspath(self.opts.cwd)
        if os.path.isabs(path) and os.path.commonpath([root, path]) == root:
            return os.path.relpath(path, root)
        return path

    def _warnings(self, s: Session, restore: RestoreResult | None) -> tuple[str, ...]:
        """The plan's warning lines while another codexr session is live here (read now, not at the last turn)."""
        self.emit(StatusChanged(self.status()))  # the status bar's hint too, without waiting for a turn
        return tuple(s.others_warning(self.thread_id, restore.plan if restore is not None else None))

    def _running_note(self, s: Session, restore: RestoreResult | None) -> tuple[str, ...]:
        """The plan's line while the thread's commands run on in the background (none when files are not touched)."""
        if restore is None or self.thread_id is None:
            return ()
        try:
            note = running_note(s.background_terminals(self.thread_id))
        except SessionError:
            return ()
        return () if note is None else (note,)

    def _known(self, s: Session) -> list[str]:
        return s.known_paths(self.thread_id) if self.thread_id else []


def store_bytes(store_dir: os.PathLike[str] | str) -> int:
    """On-disk size of the store's packs and snapshots (stat calls only)."""
    total = 0
    for sub in ("packs", "snapshots"):
        for dirpath, _dirs, files in os.walk(os.path.join(store_dir, sub)):
            for f in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(dirpath, f)).st_size
    return total


def with_busy(status: Status, busy: bool) -> Status:
    """The same status with the busy flag set."""
    return replace(status, busy=busy)


def _diffs(s: Session, restore: RestoreResult | None, decided: Mapping[str, Decision]
           ) -> dict[str, tuple[FileStat, str]]:
    """Each planned file's diff: what a merge writes (held in memory by the dry run), and for a conflict its two
    sides (the file now against the state the restore would put back)."""
    if restore is None:
        return {}
    diffs = changes.plan_diffs(s.store, restore.plan, texts=merged_texts(decided))
    for path in conflicts(decided):
        text = changes.sides_diff(s.store, restore.plan.root, path, decided[path].target)
        diffs[path] = (FileStat(path, "modified"), text)
    return diffs
