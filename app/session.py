"""The session core: drives Codex through its app-server and binds snapshots to turns.

No UI imports: front ends supply callbacks (approvals, events, confirmations) and render results.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from config import CodexrSettings, is_codexr_key
from snapshot_store import RestorePlan, RestoreResult, Store, StoreError
from snapshot_store.errors import Interrupted
from snapshot_store.maint.gc import maybe_auto_gc
from snapshot_store.restore import DELETE, WRITE
from snapshot_store.roots import workspace_root
from snapshot_store.states import StatesRestore, prepare_states_restore

from .approval import ApprovalRequest as ApprovalRequest
from .background import BackgroundTerminal as BackgroundTerminal
from .codex_sdk import CodexClient, CodexConfig, CodexError, JsonRpcError, ThreadSourceKind, TransportClosedError
from .errors import Declined as Declined
from .errors import SessionError as SessionError
from .images import check_images, prompt_input
from .recorder import Recorder, TurnState
from .rewind_targets import (
    RewindTargets,
    inside_target,
    merged_plan,
    merged_result,
    outside_target,
    rewind_targets,
)
from .sidecar import RedoEntry, Sidecars, ThreadSidecar, TurnRecord
from .thread_label import rewound_before, thread_label
from .translate import is_prompt_turn, is_sub_turn
from .turn_settings import ModelInfo, TurnSettings, model_info
from .vocab import CLIENT_NAME, CONVERSATION_MODES, FILE_MODES, SESSION_KINDS, RewindMode, source_label
from .workspace_lock import LastThread, SessionLock

APPROVAL_METHODS = {
    "item/commandExecution/requestApproval": "command",
    "item/fileChange/requestApproval": "fileChange",
    "execCommandApproval": "command",
    "applyPatchApproval": "fileChange",
}
# `thread/list` without `sourceKinds` leaves out `codex exec` threads (and others): ask for every kind
SOURCE_KINDS = tuple(k.value for k in ThreadSourceKind)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """Spawn Codex with SIGINT blocked: Ctrl+C in the terminal is codexr's to handle (it interrupts the turn).

    SIGINT goes to the terminal's whole foreground process group; without this, a Ctrl+C in `codexr exec` or the
    line mode on a pipe also killed the Codex app-server mid-turn. The mask is inherited across exec; Codex's own
    children (the agent's commands) start with an empty mask (Rust's std resets it), so Ctrl+C still reaches them
    through codexr's interrupt. Only the calling thread's mask changes, for the time of the spawn.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@dataclass
class SessionOptions:
    """How to start Codex and what to pass through to it."""

    cwd: Path
    codex_home: Path
    settings: CodexrSettings
    model: str | None = None
    sandbox: str | None = None
    approval_policy: str | None = None
    config_overrides: tuple[str, ...] = ()
    env: dict[str, str] | None = None
    codex_bin: str | None = None


ApprovalCallback = Callable[[ApprovalRequest], str]
EventCallback = Callable[[str, dict[str, Any]], None]


class _AnyResponse(BaseModel):
    """A response kept as it came: the SDK has no model for Codex's experimental methods."""

    model_config = ConfigDict(extra="allow")


@dataclass
class TurnOutcome:
    """One finished turn, with the snapshots taken around it."""

    thread_id: str
    turn_id: str
    status: str
    final_message: str
    error: str | None
    items: list[dict[str, Any]]
    files_changed: list[str]
    pre: str | None
    post: str | None
    seconds: float
    pre_capture_seconds: float = 0.0
    post_capture_seconds: float = 0.0
    capture_error: str | None = None  # the post-turn capture failed (the turn itself is unaffected)
    notice: str | None = None  # codexr continued a thread another Codex client ran (said once per thread)

    def as_json(self) -> dict[str, Any]:
        """The stable JSON shape `codexr exec --json` prints."""
        return {
            "thread_id": self.thread_id,
            "turn_id": self.turn_id,
            "status": self.status,
            "final_message": self.final_message,
            "error": self.error,
            "files_changed": self.files_changed,
            "pre_snapshot": self.pre,
            "post_snapshot": self.post,
            "seconds": round(self.seconds, 3),
            "pre_capture_seconds": round(self.pre_capture_seconds, 4),
            "post_capture_seconds": round(self.post_capture_seconds, 4),
            "capture_error": self.capture_error,
            "notice": self.notice,
        }


@dataclass
class Prompt:
    """One prompt (turn) of a thread as Codex reports it, with codexr's snapshot for it."""

    number: int
    turn_id: str
    text: str
    status: str
    pre: str | None
    by_codexr: bool = True  # False: sent by another Codex client before codexr continued the thread
    after_turn: str | None = None  # the thread's turn just before it (a compaction or review counts): a fork ends there

    def no_snapshot_reason(self) -> str | None:
        """Why this prompt's files cannot be rewound (None when they can, as far as its record goes)."""
        if self.pre is not None:
            return None
        if not self.by_codexr:
            return f"prompt {self.number} was sent outside codexr, so it has no file snapshot"
        return f"prompt {self.number} ran without a file snapshot (file_snapshots was off)"


@dataclass
class RewindPreview:
    """What a rewind is about to do, shown for confirmation before anything changes."""

    thread_id: str
    to_prompt: int
    prompt: str
    mode: str
    plan: RestorePlan | None  # None when no files are restored


@dataclass
class RedoPreview:
    """What a redo is about to do: what changed since the rewind comes before anything is restored."""

    thread_id: str
    origin_thread: str
    mode: str
    plan: RestorePlan | None
    changed_since_rewind: list[str]
    turns_since_rewind: int


@dataclass
class RewindResult:
    """What a rewind did (or, for a dry run, would do)."""

    thread_id: str
    origin_thread: str
    mode: str
    to_prompt: int
    prompt: str
    safety_id: str | None
    restore: RestoreResult | None
    dry_run: bool = False
    no_snapshot_reason: str | None = None  # the prompt is conversation-only, and why

    def as_json(self) -> dict[str, Any]:
        """Stable JSON for `codexr rewind --json`."""
        return {
            "thread_id": self.thread_id,
            "origin_thread": self.origin_thread,
            "mode": self.mode,
            "to_prompt": self.to_prompt,
            "prompt": self.prompt,
            "safety_id": self.safety_id,
            "dry_run": self.dry_run,
            "restore": self.restore.as_json() if self.restore else None,
            "no_snapshot_reason": self.no_snapshot_reason,
        }


@dataclass
class RedoResult:
    """What a redo did (or would do)."""

    thread_id: str
    from_thread: str
    mode: str
    safety_id: str | None
    changed_since_rewind: list[str]
    turns_since_rewind: int
    restore: RestoreResult | None
    dry_run: bool = False

    def as_json(self) -> dict[str, Any]:
        """Stable JSON for `codexr redo --json`."""
        return {
            "thread_id": self.thread_id,
            "from_thread": self.from_thread,
            "mode": self.mode,
            "safety_id": self.safety_id,
            "changed_since_rewind": self.changed_since_rewind,
            "turns_since_rewind": self.turns_since_rewind,
            "dry_run": self.dry_run,
            "restore": self.restore.as_json() if self.restore else None,
        }


@dataclass
class ThreadSummary:
    """A row of `codexr threads`."""

    thread_id: str
    preview: str
    prompts: int
    with_snapshots: int
    redo_depth: int
    updated: float
    tracking: bool
    forked_from: str | None = None
    cwd: str = ""
    source: str = ""  # who started it, in app/vocab.py's words: codexr, CLI, exec, IDE, app-server, ...
    rewound_before: int | None = None  # a fork made by a rewind: the origin's prompt it went back before

    @property
    def label(self) -> str:
        """What it holds and where it came from, worded as everywhere else (app/thread_label.py)."""
        return thread_label(self.preview, self.prompts, self.forked_from, self.rewound_before)

    @property
    def conversation_only(self) -> int:
        """Prompts whose files cannot be rewound (sent outside codexr, or with file_snapshots off)."""
        return max(0, self.prompts - self.with_snapshots)


def thread_source(thread: dict[str, Any]) -> str:
    """Who started a thread (app-server's Thread): `codexr` for codexr's own (its client name is the originator)."""
    return source_label(thread.get("source"), by_codexr=thread.get("originator") == CLIENT_NAME)


def _text_of(user_item: dict[str, Any]) -> str:
    parts = [c.get("text", "") for c in user_item.get("content") or [] if isinstance(c, dict)]
    return "\n".join(p for p in parts if p)


def dump_payload(payload: Any) -> dict[str, Any]:
    """A notification payload or Codex model as a camelCase dict."""
    if hasattr(payload, "model_dump"):
        out = payload.model_dump(by_alias=True, mode="json", exclude_none=False)
        return out if isinstance(out, dict) else {}
    params = getattr(payload, "params", None)
    return params if isinstance(params, dict) else {}


class Session:
    """One Codex app-server process, the snapshot store, and the sidecars of its threads."""

    def __init__(self, opts: SessionOptions, *, approval: ApprovalCallback | None = None,
                 on_notice: EventCallback | None = None) -> None:
        self.opts = opts
        # Never Codex's home or the store (nor inside them): a restore there would overwrite their files.
        self.cwd = workspace_root(opts.cwd, [opts.codex_home], store=opts.codex_home / "file_snapshots",
                                  containing=True)
        self.tracking = opts.settings.features.file_snapshots
        self.scope = opts.settings.scope()
        self.store_dir = opts.codex_home / "file_snapshots"
        self.store = Store.open(self.store_dir, protected=[opts.codex_home])
        self.sidecars = Sidecars(self.store_dir)
        self.recorder = Recorder(self.store, self.sidecars, self.cwd, self.scope, self.tracking)
        self._approval = approval
        self._on_notice = on_notice
        self._approval_timeout = opts.settings.file_snapshots.approval_timeout_seconds
        self._turn_states: dict[str, TurnState] = {}
        self._items_lock = threading.Lock()
        self._closed = False
        self._gc_thread: threading.Thread | None = None
        self.model = opts.model or ""  # as Codex reports it once a thread is started or resumed
        self.next_model: str | None = None  # chosen with /model: sent with every later turn/start
        self.turn_settings = TurnSettings()  # effort (/model), approval and sandbox (/permissions): likewise
        self._catalog: list[ModelInfo] | None = None
        self.lock = SessionLock(self.store_dir, self.cwd)
        self.last = LastThread(self.store_dir, self.cwd)
        self._started: set[str] = set()  # threads this session started: no turn ran on them before ours
        self.client = self._start_codex()
        self._drain = threading.Thread(target=self._drain_global, daemon=True, name="codexr-notices")
        self._drain.start()
        if self.tracking:
            self.store.capturer.watch(self.cwd)

    # ------------------------------------------------------------------ lifecycle
    def _start_codex(self) -> CodexClient:
        env = dict(self.opts.env or {})
        env.setdefault("CODEX_HOME", str(self.opts.codex_home))
        cfg = CodexConfig(codex_bin=self.opts.codex_bin, cwd=str(self.cwd), env=env,
                          config_overrides=self.opts.config_overrides, client_name=CLIENT_NAME,
                          client_title="codex-rewind")
        client = CodexClient(cfg, approval_handler=self._handle_server_request)
        try:
            with _sigint_blocked():  # the app-server is spawned here and inherits the mask
                client.start()
            client.initialize()
        except (OSError, CodexError) as exc:
            # Codex closes stdout a moment before its last stderr line ("Error: ...") reaches the SDK's
            # reader: wait briefly for that line rather than reporting only the warnings before it.
            deadline = time.monotonic() + 2.0
            errors: list[str] = []
            while True:
                tail = client._stderr_tail(60).splitlines()
                errors = [line.strip() for line in tail if line.strip().startswith("Error:")]
                if errors or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            with contextlib.suppress(Exception):
                client.close()
            why = errors[-1].removeprefix("Error:").strip() if errors else str(exc).splitlines()[0][:200]
            raise SessionError(f"cannot start Codex: {why}") from exc
        self.lock.acquire()
        return client

    def close(self) -> None:
        """Stop Codex and release everything."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self.client.close()
        if self._gc_thread is not None:
            self._gc_thread.join()
        self.store.close()
        self.lock.release()

    def codex_alive(self) -> bool:
        """Is the app-server process still running?"""
        proc = getattr(self.client, "_proc", None)
        return proc is not None and proc.poll() is None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _drain_global(self) -> None:
        """Thread-level notifications go to an unbounded SDK queue: keep it drained."""
        while not self._closed:
            try:
                n = self.client.next_notification()
            except Exception:
                return
            if self._on_notice is not None:
                with contextlib.suppress(Exception):
                    self._on_notice(n.method, dump_payload(n.payload))

    def _rpc(self, what: str, fn: Callable[[], Any]) -> Any:
        """Call Codex; its errors become one-line SessionErrors."""
        try:
            return fn()
        except JsonRpcError as exc:
            raise SessionError(f"{what}: {getattr(exc, 'message', None) or exc}") from exc
        except (TransportClosedError, CodexError) as exc:
            raise SessionError(f"{what}: Codex stopped responding ({exc})") from exc

    # ------------------------------------------------------------------ approvals
    def _handle_server_request(self, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
        """Runs on the SDK's only reader thread: must never raise and never wait forever."""
        try:
            kind = APPROVAL_METHODS.get(method)
            if kind is None:
                return {}
            p = params or {}
            item_id = str(p.get("itemId") or p.get("callId") or "")
            changes: list[dict[str, Any]] = []
            if kind == "fileChange":
                deadline = time.monotonic() + 0.5
                while True:
                    with self._items_lock:
                        item = next((s.open_items.get(item_id) for s in self._turn_states.values()
                                     if item_id in s.open_items), None)
                    if item is not None or time.monotonic() > deadline:
                        break
                    time.sleep(0.01)
                changes = list((item or {}).get("changes") or [])
            command = p.get("command")
            if isinstance(command, list):
                command = " ".join(str(c) for c in command)
            req = ApprovalRequest(kind, method, str(p.get("threadId") or p.get("conversationId") or ""),
                                  str(p.get("turnId") or ""), item_id, command, p.get("cwd"), p.get("reason"),
                                  changes, p)
            if self._approval is None:
                return {"decision": "decline"}
            # Each request gets its own thread: one the UI never answered cannot block the next.
            future: concurrent.futures.Future[str] = concurrent.futures.Future()
            callback = self._approval

            def ask() -> None:
                try:
                    future.set_result(callback(req))
                except BaseException as exc:
                    future.set_exception(exc)

            threading.Thread(target=ask, daemon=True, name="codexr-approval").start()
            try:
                decision = future.result(timeout=self._approval_timeout)
            except concurrent.futures.TimeoutError:
                self._notice("approvalTimedOut", {"itemId": item_id, "seconds": self._approval_timeout})
                decision = "decline"
            if method in ("execCommandApproval", "applyPatchApproval"):
                legacy = {"accept": "approved", "acceptForSession": "approved_for_session",
                          "decline": "denied", "cancel": "abort"}
                return {"decision": legacy.get(decision, "denied")}
            return {"decision": decision if isinstance(decision, str | dict) else "decline"}
        except BaseException:
            return {"decision": "decline"}

    def _notice(self, method: str, params: dict[str, Any]) -> None:
        if self._on_notice is not None:
            with contextlib.suppress(Exception):
                self._on_notice(method, params)

    # ------------------------------------------------------------------ threads
    def _thread_params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"cwd": str(self.cwd), "approvalsReviewer": "user"}
        if self.next_model or self.opts.model:
            params["model"] = self.next_model or self.opts.model
        if self.opts.sandbox:
            params["sandbox"] = self.opts.sandbox
        if self.opts.approval_policy:
            params["approvalPolicy"] = self.opts.approval_policy
        params.update(self.turn_settings.thread_params())
        return params

    def models(self) -> list[str]:
        """The models Codex offers (its `model/list`, hidden ones left out), by id."""
        return [m.id for m in self.model_catalog()]

    def model_catalog(self) -> list[ModelInfo]:
        """The models Codex offers with their reasoning efforts (asked once per Codex process)."""
        if self._catalog is None:
            resp = self._rpc("cannot list the models", lambda: self.client.model_list())
            self._catalog = [model_info(dump_payload(m)) for m in resp.data if not m.hidden]
        return self._catalog

    def use_model(self, model: str, effort: str | None = None) -> None:
        """Use `model` (and reasoning `effort`, None: the model's default) from the next turn on."""
        self.next_model = model
        self.model = model
        self.turn_settings.effort = effort

    def use_permissions(self, approval: str, sandbox: str) -> None:
        """Use this approval policy and sandbox mode from the next turn on (/permissions)."""
        self.turn_settings.approval = approval
        self.turn_settings.sandbox = sandbox

    def configured(self) -> dict[str, Any]:
        """Codex's effective config.toml values for this workspace (`config/read`), {} when it cannot say."""
        try:
            out = self._experimental("cannot read Codex's config", "config/read", {"cwd": str(self.cwd)})
        except SessionError:
            return {}
        config = out.get("config")
        return config if isinstance(config, dict) else {}

    def start_thread(self) -> str:
        """A new thread in this workspace; its sidecar is written with its first turn."""
        resp = self._rpc("cannot start a thread", lambda: self.client.thread_start(self._thread_params()))
        self.model = str(getattr(resp, "model", "") or self.model)
        self.turn_settings.note(dump_payload(resp))
        self._started.add(str(resp.thread.id))
        return str(resp.thread.id)

    def resolve_thread(self, ident: str) -> str:
        """The thread `ident` names: its id, or a unique prefix of 4+ characters of a thread Codex lists (any
        workspace, every source kind, archived too) or codexr keeps a sidecar for (a fork before its first prompt)."""
        from .thread_ids import resolve_thread_id

        def known() -> list[str]:
            listed = self._list_threads({"limit": 200}) + self._list_threads({"limit": 200, "archived": True})
            return [str(t["id"]) for t in listed] + self.sidecars.ids()

        return resolve_thread_id(ident, known)

    def resume_thread(self, thread_id: str) -> str:
        """Load an existing thread into this Codex process (a no-op if already loaded)."""
        params = self._thread_params()
        params["excludeTurns"] = True
        resp = self._rpc(f"cannot resume thread {thread_id}",
                         lambda: self.client.thread_resume(thread_id, params))
        self.model = str(getattr(resp, "model", "") or self.model)
        self.turn_settings.note(dump_payload(resp))
        return str(resp.thread.id)

    def archive_thread(self, thread_id: str) -> None:
        """Archive a thread (Codex moves its rollout; its sidecar and snapshots stay)."""
        self._rpc(f"cannot archive thread {thread_id}", lambda: self.client.thread_archive(thread_id))

    def unarchive_thread(self, thread_id: str) -> None:
        """Bring an archived thread back."""
        self._rpc(f"cannot unarchive thread {thread_id}", lambda: self.client.thread_unarchive(thread_id))

    def mark_used(self, thread_id: str) -> None:
        """The user sent a prompt on `thread_id` or switched to it: `--last` means this thread from now on."""
        self.last.mark(thread_id)

    def last_thread(self) -> str | None:
        """The thread the user last used in this workspace (last prompt sent or switched to).

        Without a record (a store from before it was kept): the codexr thread created or prompted most recently.
        """
        recorded = self.last.get()
        if recorded is not None:
            side = self.sidecars.load(recorded)
            if (side is not None and side.cwd == str(self.cwd)) or self._read_thread(recorded):
                return recorded
        best: tuple[float, str] | None = None
        for side in self.sidecars.all():
            if side.cwd != str(self.cwd):
                continue
            when = max([side.created, *[t.started for t in side.turns]])
            if best is None or when > best[0]:
                best = (when, side.thread_id)
        return best[1] if best else None

    def sidecar(self, thread_id: str) -> ThreadSidecar:
        """The thread's sidecar, created (untracked turns and all) if codexr never saw it."""
        return self.recorder.sidecar(thread_id)

    def prompts(self, thread_id: str) -> list[Prompt]:
        """Every prompt of the thread in order, from Codex itself, joined with our snapshots."""
        try:
            resp = self.client.thread_read(thread_id, include_turns=True)
        except JsonRpcError:
            # A thread with no turn yet has no rollout to list turns from; it exists if it reads.
            self._rpc(f"unknown thread {thread_id}", lambda: self.client.thread_read(thread_id, include_turns=False))
            return []
        except (TransportClosedError, CodexError) as exc:
            raise SessionError(f"unknown thread {thread_id}: Codex stopped responding ({exc})") from exc
        side = self.sidecars.load(thread_id)
        out: list[Prompt] = []
        before: str | None = None
        for turn in resp.thread.turns or []:
            t = dump_payload(turn)
            if is_sub_turn(t):
                continue  # a review's inner turn: part of the review turn, never a prompt of its own
            if not is_prompt_turn(t):  # a compaction or a review: the conversation the next prompt was sent on
                before = str(t["id"])
                continue
            users = [i for i in t.get("items") or [] if i.get("type") == "userMessage"]
            rec = side.turn(t["id"]) if side else None
            out.append(Prompt(len(out) + 1, t["id"], _text_of(users[0]), str(t.get("status")),
                              rec.pre if rec else None, rec is not None, before))
            before = str(t["id"])
        return out

    # ------------------------------------------------------------------ turns
    def known_paths(self, thread_id: str) -> list[str]:
        """Every path the thread's captures look at (for dry runs and diffs outside a turn)."""
        return self.recorder.known_paths(self.sidecar(thread_id))

    def run_turn(self, thread_id: str, text: str, on_event: EventCallback | None = None,
                 images: Sequence[str] = ()) -> TurnOutcome:
        """Capture, start the turn, stream it, capture again; the sidecar binds both to the turn id (recorder.py).

        `images`: local image files sent with the prompt (checked by app/images.py before anything is captured).
        """
        check_images(images)
        started = time.perf_counter()
        side = self.sidecar(thread_id)
        notice = None
        # A thread this session just started has no earlier turns: asking Codex (thread/read) cost 30-70 ms of
        # every `codexr exec` on a new thread (measured with bench/bench_startup.py).
        if not self.sidecars.exists(thread_id) and thread_id not in self._started:
            notice = self._continuing_notice(thread_id, side)
        pre, pre_seconds = self.recorder.begin(side, text)
        turn_params: dict[str, Any] | None = {**({"model": self.next_model} if self.next_model else {}),
                                              **self.turn_settings.turn_params()} or None
        resp = self._rpc("cannot start the turn",
                         lambda: self.client.turn_start(thread_id, prompt_input(text, images), turn_params))
        turn_id = str(resp.turn.id)
        self.mark_used(thread_id)
        self.recorder.bind(thread_id, side, turn_id, text, pre)
        state = TurnState()
        with self._items_lock:
            self._turn_states[turn_id] = state
        status, error = "failed", None
        try:
            status, error = self._stream(thread_id, turn_id, state, on_event)
        finally:
            with self._items_lock:
                self._turn_states.pop(turn_id, None)
            with contextlib.suppress(Exception):
                self.client.unregister_turn_notifications(turn_id)
            for item_id, item in list(state.open_items.items()):
                closed = {**item, "status": "interrupted" if status == "interrupted" else "failed"}
                if self._still_running(thread_id, closed):
                    closed["stillRunning"] = True
                state.items.append(closed)
                if on_event is not None:
                    with contextlib.suppress(Exception):
                        on_event("item/completed", {"item": closed, "turnId": turn_id, "synthetic": True})
                state.open_items.pop(item_id, None)
            done = self.recorder.finish(thread_id, turn_id, text, state, status, pre)
        self.collect_later()
        return TurnOutcome(thread_id, turn_id, status, state.final, error, state.items,
                           done.changed, pre, done.post, time.perf_counter() - started,
                           pre_seconds, done.post_seconds, done.capture_error, notice)

    def collect_later(self) -> None:
        """Automatic gc (at most daily), on a thread of its own with a store of its own: never on a
        turn's critical path. The session's store reloads what gc changed at its next lock."""
        if not (self.tracking and self.opts.settings.file_snapshots.auto_gc):
            return
        if self._gc_thread is not None and self._gc_thread.is_alive():
            return
        policy = self.opts.settings.retention()

        def run() -> None:
            try:
                with Store.open(self.store_dir, protected=[self.opts.codex_home]) as store:
                    plan = maybe_auto_gc(store, policy)
                if plan is not None:
                    self._notice("codexr/gc", plan.as_json())
            except StoreError as exc:
                self._notice("codexr/gcFailed", {"message": str(exc)})

        thread = threading.Thread(target=run, daemon=True, name="codexr-gc")
        thread.start()  # before it is published: close() on another thread joins only a started thread
        self._gc_thread = thread

    def _continuing_notice(self, thread_id: str, side: ThreadSidecar) -> str | None:
        """The one line said when codexr first sends a prompt on a thread another Codex client ran.

        codexr snapshots every prompt it sends, whoever started the thread; the prompts sent before
        are conversation-only. Said once: from this turn on the thread has a sidecar.
        """
        try:
            resp = self.client.thread_read(thread_id, include_turns=True)
        except JsonRpcError:
            return None  # "no rollout"/"list_turns is not supported yet": nothing ran on it
        except (TransportClosedError, CodexError) as exc:
            raise SessionError(f"cannot read thread {thread_id}: Codex stopped responding ({exc})") from exc
        earlier = sum(1 for t in resp.thread.turns or [] if is_prompt_turn(dump_payload(t)))
        if not earlier:
            return None
        source = thread_source(dump_payload(resp.thread))
        side.history.append({"event": "continued", "source": source, "earlier_prompts": earlier, "at": time.time()})
        snaps = "gets file snapshots" if side.tracking else "gets no file snapshot (file_snapshots is off)"
        text = (f"thread {thread_id} was started outside codexr ({source}): its {earlier} earlier "
                f"prompt{'s are' if earlier != 1 else ' is'} conversation-only; each prompt codexr sends {snaps}")
        self._notice("codexr/continued", {"threadId": thread_id, "source": source, "earlierPrompts": earlier,
                                          "message": text})
        return text

    def _stream(self, thread_id: str, turn_id: str, state: TurnState, on_event: EventCallback | None
                ) -> tuple[str, str | None]:
        while True:
            try:
                n = self.client.next_turn_notification(turn_id)
            except (TransportClosedError, CodexError) as exc:
                return "failed", f"Codex stopped during the turn: {exc}"
            method, d = n.method, dump_payload(n.payload)
            with self._items_lock:  # an approval request looks up open items from the SDK's reader thread
                self.recorder.observe(state, method, d)
            item = d.get("item")
            if method == "item/completed" and isinstance(item, dict) and self._still_running(thread_id, item):
                d = {**d, "item": {**item, "stillRunning": True}}  # Codex says interrupted; the process runs on
            if on_event is not None:
                with contextlib.suppress(Exception):
                    on_event(method, d)
            if method == "turn/completed":
                turn = d.get("turn") or {}
                err = turn.get("error") or None
                return str(turn.get("status") or "completed"), (err.get("message") if isinstance(err, dict) else None)

    def interrupt(self, thread_id: str, turn_id: str) -> None:
        """Ask Codex to stop a running turn."""
        self._rpc("cannot interrupt", lambda: self.client.turn_interrupt(thread_id, turn_id))

    # ------------------------------------------------------------------ turns that are not prompts
    def compact(self, thread_id: str, on_event: EventCallback | None = None) -> tuple[str, str | None]:
        """Summarise the thread's conversation to free context (Codex's `thread/compact/start`): (status, error).

        Codex runs it as a turn of its own (a `contextCompaction` item, no prompt, no file change): no snapshot is
        taken, and the rewind picker's prompts are the same before and after it.
        """
        return self._thread_turn(thread_id, "cannot compact the conversation",
                                 lambda: self.client.thread_compact(thread_id), on_event)

    def review(self, thread_id: str, target: dict[str, Any], on_event: EventCallback | None = None
               ) -> tuple[str, str | None]:
        """A code review on this thread (Codex's `review/start`, inline): (status, error).

        Codex runs it as a turn that holds no prompt of the user's (`enteredReviewMode`, the reviewer's work, then
        `exitedReviewMode` with the review): like a compaction it is not a rewind point (app/translate.py).
        """
        params: dict[str, Any] = {"threadId": thread_id, "target": target, "delivery": "inline"}
        return self._thread_turn(thread_id, "cannot start the review",
                                 lambda: self.client.request("review/start", params, response_model=_AnyResponse),
                                 on_event)

    def _thread_turn(self, thread_id: str, what: str, start: Callable[[], Any],
                     on_event: EventCallback | None) -> tuple[str, str | None]:
        """Start a turn Codex begins by itself and stream it to its end (its id is known only from its events).

        The SDK routes a turn's notifications by turn id; this turn's id comes with its first notification, so
        the thread's route (the SDK's thread-scoped one, made for goal turns) takes every turn notification of
        the thread from before the request on.
        """
        route = self.client.register_goal_operation(thread_id)
        try:
            resp = self._rpc(what, start)
            dumped = resp.model_dump() if hasattr(resp, "model_dump") else {}
            root = (dumped.get("turn") or {}).get("id") if isinstance(dumped, dict) else None
            while True:
                try:
                    n = self.client.next_goal_notification(route)
                except (TransportClosedError, CodexError) as exc:
                    return "failed", f"Codex stopped during the turn: {exc}"
                method, d = n.method, dump_payload(n.payload)
                if on_event is not None:
                    with contextlib.suppress(Exception):
                        on_event(method, d)
                if method == "turn/completed":
                    turn = d.get("turn") or {}
                    if root is None or turn.get("id") == root:
                        err = turn.get("error") or None
                        return (str(turn.get("status") or "completed"),
                                err.get("message") if isinstance(err, dict) else None)
        finally:
            self.client.unregister_goal_operation(route)

    def find_files(self, query: str, limit: int = 40) -> list[str]:
        """Workspace files matching `query` fuzzily, best first, relative to the workspace (`fuzzyFileSearch`)."""
        resp = self._experimental("cannot search the workspace's files", "fuzzyFileSearch",
                                  {"query": query, "roots": [str(self.cwd)]})
        out: list[str] = []
        for f in resp.get("files") or []:
            if isinstance(f, dict) and f.get("path"):
                path = str(f["path"])
                out.append(path + "/" if f.get("match_type") == "directory" and not path.endswith("/") else path)
        return out[:limit]

    # ------------------------------------------------------------------ background terminals
    def _still_running(self, thread_id: str, item: dict[str, Any]) -> bool:
        """A command item that ended without an exit code while its process runs on (an interrupt leaves it)."""
        if item.get("type") != "commandExecution" or item.get("exitCode") is not None or not item.get("processId"):
            return False
        if str(item.get("status")) not in ("interrupted", "failed", "inProgress"):
            return False
        try:
            running = self.background_terminals(thread_id)
        except SessionError:
            return False
        return any(t.process_id == str(item["processId"]) or t.item_id == item.get("id") for t in running)

    def background_terminals(self, thread_id: str) -> list[BackgroundTerminal]:
        """Commands of the thread still running after their turn (Codex's `thread/backgroundTerminals/list`)."""
        out: list[BackgroundTerminal] = []
        cursor: str | None = None
        while True:
            params: dict[str, Any] = {"threadId": thread_id, **({"cursor": cursor} if cursor else {})}
            resp = self._experimental("cannot list background terminals", "thread/backgroundTerminals/list", params)
            for t in resp.get("data") or []:
                if isinstance(t, dict) and t.get("processId"):
                    out.append(BackgroundTerminal(str(t["processId"]), str(t.get("itemId") or ""),
                                                  str(t.get("command") or ""), str(t.get("cwd") or "")))
            nxt = resp.get("nextCursor")
            if not nxt or nxt == cursor:
                return out
            cursor = str(nxt)

    def _experimental(self, what: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One call of an experimental Codex method (no SDK model for it), its result as a dict."""
        resp = self._rpc(what, lambda: self.client.request(method, params, response_model=_AnyResponse))
        out = resp.model_dump()
        return out if isinstance(out, dict) else {}

    def stop_terminals(self, thread_id: str, process_id: str | None = None) -> list[BackgroundTerminal]:
        """End the thread's background terminals (or the one with `process_id`); the ones Codex terminated."""
        stopped = []
        for t in self.background_terminals(thread_id):
            if process_id is not None and t.process_id != process_id:
                continue
            resp = self._experimental(f"cannot stop {t.command}", "thread/backgroundTerminals/terminate",
                                      {"threadId": thread_id, "processId": t.process_id})
            if resp.get("terminated"):
                stopped.append(t)
        return stopped

    # ------------------------------------------------------------------ rewind / redo
    def resolve_prompt(self, prompts: list[Prompt], to: str | int) -> Prompt:
        if isinstance(to, int) or str(to).isdigit():
            n = int(to)
            if not 1 <= n <= len(prompts):
                raise SessionError(f"prompt {n} does not exist (the thread has {len(prompts)} prompts)")
            return prompts[n - 1]
        for p in prompts:
            if p.turn_id == to:
                return p
        raise SessionError(f"turn {to} is not in this thread")

    def other_sessions(self) -> list[str]:
        """Other live codexr sessions in this workspace (their work may be overwritten)."""
        return self.lock.others()

    def others_warning(self, thread_id: str | None, plan: RestorePlan | None) -> list[str]:
        """Warning lines for a restore plan while another codexr session is live here (none when alone).

        Names the files the plan deletes or overwrites that are not as this thread last captured them: created
        or changed since, so perhaps the other session's work (DESIGN: a restore that would overwrite another
        live session's work asks first).
        """
        others = self.other_sessions()
        if not others or plan is None:
            return []
        lines = [f"! another codexr session is live in this workspace ({'; '.join(others)}): this restore may "
                 "delete or overwrite its work (the safety snapshot keeps it)"]
        side = self.sidecars.load(thread_id) if thread_id else None
        last = side.files_snapshot() if side is not None else None
        seen = self.store.files(last) if last is not None and self.store.exists(last) else None
        created: list[str] = []
        changed: list[str] = []
        for a in plan.actions:
            if a.op not in (WRITE, DELETE) or a.current is None or a.current.kind == "-":
                continue  # nothing there now: nothing of anyone's to lose
            then = seen.get(a.path) if seen is not None else None
            if seen is not None and then == a.current:
                continue  # as this session last saw it: its own work
            (created if then is None or then.kind == "-" else changed).append(a.path)
        if seen is None and (created or changed):
            lines.append("! files it deletes or overwrites (this thread has no capture to tell whose they are): "
                         + ", ".join(created + changed))
            return lines
        if created:
            lines.append("! created since this session last looked (another session's?), deleted or overwritten "
                         "by this restore: " + ", ".join(created))
        if changed:
            lines.append("! changed since this session last looked (another session's?), overwritten by this "
                         "restore: " + ", ".join(changed))
        return lines

    def rewind(self, thread_id: str, to: str | int, mode: str = RewindMode.BOTH, *, dry_run: bool = False,
               confirm: Callable[[RewindPreview], bool] | None = None) -> RewindResult:
        """Fork the conversation before prompt `to` and/or restore its pre-turn files.

        Order (a kill at any instant leaves a rewind that did not happen, or one that redo undoes):
        safety capture, plan, `confirm`, fork, the redo entry saved (pinning the safety snapshot),
        then the journaled restore. A declined rewind changes nothing and creates no fork.
        """
        if mode not in tuple(RewindMode):
            raise SessionError(f"unknown rewind mode {mode!r}")
        side = self.sidecars.load(thread_id)
        prompts = self.prompts(thread_id)
        target = self.resolve_prompt(prompts, to)
        files = mode in FILE_MODES
        why = target.no_snapshot_reason()
        if files and why is not None:
            raise SessionError(f"{why}; rewind the conversation only with --conversation-only")
        if files and target.pre and not self.store.exists(target.pre):
            raise SessionError(
                f"prompt {target.number}'s file snapshot is gone (retention drops the snapshots of threads idle "
                "longer than file_snapshots.thread_retention_days); rewind the conversation only with "
                "--conversation-only")
        if files and target.pre:
            self._same_workspace(self.store.record(target.pre).root, "rewind")
        known = self.recorder.known_paths(side) if side else []
        restore: RestoreResult | None = None
        targets: RewindTargets | None = None
        ws_target = out_target = None
        if files and target.pre:
            # Paths the pre-turn snapshot does not hold get the pre-edit state the agent's patch recorded.
            undone = {p.turn_id: p.number for p in prompts[target.number - 1:]}
            targets = rewind_targets(self.store, str(self.cwd), side, undone, target.pre) if side else RewindTargets()
            label = f"rewind to: {target.text[:50]}"
            ws_target = inside_target(self.store, str(self.cwd), target.pre, targets, label, not dry_run)
            out_target = outside_target(self.store, targets, label, not dry_run)
        if dry_run:
            if files and ws_target:
                ws_res = self.store.at(self.cwd).restore(ws_target, dry_run=True, known_paths=known, scope=self.scope)
                out_plan = self._prepare_outside(out_target, dry_run=True)
                plan = merged_plan(ws_res.plan, out_plan.plan if out_plan else None, targets)
                restore = merged_result(ws_res, plan, None, out_plan.plan if out_plan else None, targets)
            return RewindResult(thread_id, thread_id, mode, target.number, target.text, None, restore, True, why)
        landed: dict[str, str] = {}
        outside: dict[str, StatesRestore] = {}
        shown: dict[str, RestorePlan] = {}

        def go(plan: RestorePlan | None) -> bool:
            out = self._prepare_outside(out_target, dry_run=False)
            if out is not None:
                outside["prep"] = out
            if plan is not None:
                plan = shown["plan"] = merged_plan(plan, out.plan if out else None, targets)
            if confirm is not None and not confirm(RewindPreview(thread_id, target.number, target.text, mode, plan)):
                return False
            forks = mode in CONVERSATION_MODES
            new_thread = self._fork_before(thread_id, target, prompts) if forks else thread_id
            try:
                self._record_rewind(side, new_thread, thread_id, target, prompts, mode,
                                    plan.safety_id if plan else None, ws_target,
                                    out.safety_id if out else None, out_target)
            except BaseException:
                self._drop_fork(new_thread, thread_id)
                raise
            landed["thread"] = new_thread
            saved = self.sidecars.load(new_thread)
            landed["at"] = repr(saved.redo[-1].at if saved is not None and saved.redo else 0.0)
            return True

        if files and ws_target:
            try:
                try:
                    restore = self.store.at(self.cwd).restore(ws_target, known_paths=known, scope=self.scope,
                                                          confirm=go)
                except Interrupted as exc:
                    if "thread" not in landed:
                        raise
                    raise self._rewind_interrupted(exc, landed["thread"], thread_id, float(landed["at"])) from exc
                if "thread" in landed:
                    prep = outside.get("prep")
                    try:
                        out_res = prep.apply() if prep is not None else None
                    except Interrupted as exc:
                        dest = landed["thread"]
                        raise Interrupted(
                            f"{exc} (files outside the workspace), but the workspace's files were restored and the "
                            f"rewind is recorded: the conversation continues on thread {dest}, and "
                            f"`codexr redo --thread {dest}` undoes it", exc.signum, rolled_back=False) from exc
                    restore = merged_result(restore, shown["plan"], out_res, None, targets)
            except StoreError as exc:
                if "thread" not in landed:
                    raise
                dest = landed["thread"]
                raise SessionError(f"{exc} — the rewind is recorded: the conversation continues on thread {dest}, "
                                   f"and `codexr redo --thread {dest}` undoes the files it changed") from exc
        elif not go(None):
            landed.clear()
        if "thread" not in landed:
            raise Declined("rewind cancelled; nothing changed")
        safety = restore.safety_id if restore else None
        self.mark_used(landed["thread"])
        self.collect_later()
        return RewindResult(landed["thread"], thread_id, mode, target.number, target.text, safety, restore,
                            no_snapshot_reason=why)

    def _same_workspace(self, root: str, what: str) -> None:
        """Refuse a rewind or redo whose files are another directory's: the store would suggest `--into`, which
        copies a snapshot elsewhere and is no option of theirs; the thread's workspace is where it belongs."""
        if root == str(self.cwd):
            return
        import shlex

        raise SessionError(f"this thread's files are in {root}, not in {self.cwd}: run the {what} there "
                           f"(`codexr -C {shlex.quote(root)} {what} ...`)")

    def _rewind_interrupted(self, exc: Interrupted, dest: str, origin: str, at: float) -> Interrupted:
        """A rewind whose file restore a signal stopped: the redo entry goes and the fork is archived, so that
        with its files rolled back the rewind did not happen (or, if some could not be put back, says what to do)."""
        if not exc.rolled_back:
            return Interrupted(f"the rewind was stopped: {exc}; the rewind is recorded: the conversation continues "
                               f"on thread {dest}, and `codexr redo --thread {dest}` undoes it", exc.signum, False)

        def drop(s: ThreadSidecar) -> None:
            if s.redo and s.redo[-1].at == at and s.redo[-1].origin_thread == origin:
                s.redo.pop()
            s.history.append({"event": "rewind-interrupted", "from": origin, "at": time.time()})

        self.sidecars.update(dest, drop)
        fork = ""
        if dest != origin:
            self._drop_fork(dest, origin)
            fork = f"; its conversation fork {dest} is archived"
        return Interrupted(f"the rewind was rolled back: files as before{fork}; nothing changed, "
                           f"continue on thread {origin}", exc.signum, True)

    def _prepare_outside(self, snap_id: str | None, *, dry_run: bool) -> StatesRestore | None:
        """Safety capture and plan of a restore of paths outside the workspace (None when there are none)."""
        if snap_id is None:
            return None
        return prepare_states_restore(self.store, snap_id, dry_run=dry_run, protected=[str(self.opts.codex_home)])

    def _record_rewind(self, side: ThreadSidecar | None, dest_thread: str, origin: str, target: Prompt,
                       prompts: list[Prompt], mode: str, safety_id: str | None, target_snapshot: str | None,
                       outside_safety: str | None, outside_target: str | None) -> None:
        """Save the redo entry on the destination thread before any file changes (it pins the safeties)."""
        files = mode in FILE_MODES
        entry = RedoEntry(origin_thread=origin, mode=mode, safety_id=safety_id,
                          target_snapshot=target_snapshot if files else None, to_prompt=target.number,
                          prompt=target.text, origin_turns=len(prompts), outside_safety_id=outside_safety,
                          outside_target=outside_target)
        event = {"event": "rewind", "from": origin, "to_prompt": target.number, "mode": mode,
                 "safety_id": safety_id, "outside_safety_id": outside_safety, "at": time.time()}

        def add(s: ThreadSidecar) -> None:
            s.redo.append(entry)
            s.history.append(event)

        if dest_thread == origin:
            self.sidecars.update(origin, add, new=lambda: side if side is not None else self.sidecar(origin))
        else:
            dest = self._fork_sidecar(side, dest_thread, origin, prompts[: target.number - 1])
            add(dest)
            self.sidecars.save(dest)

    def _drop_fork(self, new_thread: str, thread_id: str) -> None:
        """A rewind that failed before it was recorded leaves no stray fork behind (archived, not deleted)."""
        if new_thread != thread_id:
            with contextlib.suppress(Exception):
                self.client.thread_archive(new_thread)

    def _fork_before(self, thread_id: str, target: Prompt, prompts: list[Prompt]) -> str:
        """The conversation as it was just before `target` was sent.

        For the first prompt this is a fork *before* it (experimental `beforeTurnId`): unlike a fresh
        thread/start it is saved at once, so another codexr process can resume or redo it.
        """
        if target.number == 1:
            params = {**self._thread_params(), "beforeTurnId": target.turn_id}
        else:  # a compaction or review between the two prompts stays: it came before `target` was sent
            params = {**self._thread_params(), "lastTurnId": target.after_turn or prompts[target.number - 2].turn_id}
        resp = self._rpc(f"cannot fork thread {thread_id}", lambda: self.client.thread_fork(thread_id, params))
        return str(resp.thread.id)

    def _fork_sidecar(self, side: ThreadSidecar | None, new_thread: str, origin: str,
                      shared: list[Prompt]) -> ThreadSidecar:
        """The fork keeps the snapshots of the prompts it shares with its origin."""
        dest = ThreadSidecar(thread_id=new_thread, cwd=str(self.cwd),
                             tracking=side.tracking if side else self.tracking, forked_from=origin)
        if side is not None:
            kept = {p.turn_id for p in shared}
            dest.turns = [TurnRecord(**vars(t)) for t in side.turns if t.turn_id in kept]
            dest.agent_touched = list(side.agent_touched)
        return dest

    def _changed_outside(self, entry: RedoEntry, out: StatesRestore | None) -> list[str]:
        """Paths outside the workspace the redo overwrites or deletes that changed after the rewind."""
        if out is None or entry.outside_target is None or not self.store.exists(entry.outside_target):
            return []
        left_by_rewind = self.store.files(entry.outside_target)
        changed = []
        for a in out.plan.actions:
            then = left_by_rewind.get(a.path)
            if a.op in (WRITE, DELETE) and a.current != then and not (
                    (a.current is None or a.current.kind == "-") and (then is None or then.kind == "-")):
                changed.append("/" + a.path)
        return sorted(changed)

    def _changed_since_rewind(self, entry: RedoEntry, plan: RestorePlan) -> list[str]:
        """Paths the redo will write or delete whose state is not the one the rewind left.

        Taken from the redo's own plan, so it names everything the redo overwrites or deletes that
        changed after the rewind, also where a walk never looks (churn or ignored directories).
        """
        if entry.target_snapshot is None:
            return []
        left_by_rewind = self.store.files(entry.target_snapshot)
        out = []
        for a in plan.actions:
            if a.op not in (WRITE, DELETE):
                continue
            then = left_by_rewind.get(a.path)
            # absent then and absent now is no change, however each capture recorded the absence
            absent_now = a.current is None or a.current.kind == "-"
            if a.current != then and not (absent_now and (then is None or then.kind == "-")):
                out.append(a.path)
        return sorted(out)

    def redo(self, thread_id: str, *, dry_run: bool = False,
             confirm: Callable[[RedoPreview], bool] | None = None) -> RedoResult:
        """Undo the last rewind that landed on this thread: its files and its conversation.

        `confirm` sees what changed since the rewind before anything is restored. The redo's own
        safety snapshot is pinned in the sidecar before files change; the entry is popped after, so
        a redo killed half-way can simply be run again.
        """
        side = self.sidecars.load(thread_id)
        if side is None or not side.redo:
            raise SessionError(f"nothing to redo on thread {thread_id}")
        entry = side.redo[-1]
        # On a fork, prompts past the shared ones are new; on the same thread (files-only), past the old count.
        base = entry.to_prompt - 1 if entry.origin_thread != thread_id else entry.origin_turns
        turns_since = max(0, len(self.prompts(thread_id)) - base)
        files = entry.mode in FILE_MODES and entry.safety_id is not None
        if files and entry.safety_id and self.store.exists(entry.safety_id):
            self._same_workspace(self.store.record(entry.safety_id).root, "redo")
        known = self.recorder.known_paths(side)
        restore: RestoreResult | None = None
        out_safety = entry.outside_safety_id if files else None
        if dry_run:
            changed: list[str] = []
            if files and entry.safety_id:
                ws_res = self.store.at(self.cwd).restore(entry.safety_id, dry_run=True, known_paths=known,
                                                     scope=self.scope)
                out_prep = self._prepare_outside(out_safety, dry_run=True)
                out_plan = out_prep.plan if out_prep else None
                plan = merged_plan(ws_res.plan, out_plan, None, None)
                restore = merged_result(ws_res, plan, None, out_plan, None)
                changed = self._changed_since_rewind(entry, ws_res.plan) + self._changed_outside(entry, out_prep)
            return RedoResult(entry.origin_thread, thread_id, entry.mode, None, changed, turns_since, restore, True)
        if entry.mode in CONVERSATION_MODES and entry.origin_thread != thread_id:
            self.resume_thread(entry.origin_thread)
        seen: dict[str, list[str]] = {}
        outside: dict[str, StatesRestore] = {}
        shown: dict[str, RestorePlan] = {}

        def go(plan: RestorePlan | None) -> bool:
            out = self._prepare_outside(out_safety, dry_run=False)
            if out is not None:
                outside["prep"] = out
            changed = self._changed_since_rewind(entry, plan) if plan is not None else []
            changed += self._changed_outside(entry, out)
            seen["changed"] = changed
            if plan is not None:
                plan = shown["plan"] = merged_plan(plan, out.plan if out else None, None, None)
            preview = RedoPreview(thread_id, entry.origin_thread, entry.mode, plan, changed, turns_since)
            if confirm is not None and not confirm(preview):
                return False
            event = {"event": "redo-started", "to": entry.origin_thread, "at": time.time(),
                     "safety_id": plan.safety_id if plan else None,
                     "outside_safety_id": out.safety_id if out else None}
            self.sidecars.update(thread_id, lambda s: s.history.append(event))
            seen["accepted"] = []
            return True

        if files and entry.safety_id:
            try:
                restore = self.store.at(self.cwd).restore(entry.safety_id, known_paths=known, scope=self.scope,
                                                      confirm=go)
            except Interrupted as exc:
                if "accepted" not in seen or not exc.rolled_back:
                    raise
                # Nothing was popped or recorded as redone: the rewind can still be redone.
                self.sidecars.update(thread_id, lambda s: s.history.append(
                    {"event": "redo-interrupted", "to": entry.origin_thread, "at": time.time()}))
                raise Interrupted(f"the redo was rolled back: files as before; nothing changed, the rewind can "
                                  f"still be redone on thread {thread_id}", exc.signum, True) from exc
            if "accepted" in seen:
                prep = outside.get("prep")
                try:
                    out_res = prep.apply() if prep is not None else None
                except Interrupted as exc:
                    raise Interrupted(f"{exc} (files outside the workspace), but the workspace's files were "
                                      f"restored; `codexr redo --thread {thread_id}` again finishes the redo",
                                      exc.signum, rolled_back=False) from exc
                restore = merged_result(restore, shown["plan"], out_res, None, None)
        else:
            go(None)
        if "accepted" not in seen:
            raise Declined("redo cancelled; nothing changed")
        safety = restore.safety_id if restore else None

        def pop(s: ThreadSidecar) -> None:
            if s.redo and s.redo[-1].at == entry.at and s.redo[-1].origin_thread == entry.origin_thread:
                s.redo.pop()
            s.history.append({"event": "redo", "to": entry.origin_thread, "at": time.time(), "safety_id": safety})

        self.sidecars.update(thread_id, pop)
        if entry.origin_thread != thread_id:
            self.sidecars.update(
                entry.origin_thread,
                lambda s: s.history.append({"event": "redone", "from": thread_id, "at": time.time(),
                                            "safety_id": safety}),
                new=lambda: self.sidecar(entry.origin_thread))
        self.mark_used(entry.origin_thread if entry.mode in CONVERSATION_MODES else thread_id)
        self.collect_later()
        return RedoResult(entry.origin_thread, thread_id, entry.mode, safety, seen["changed"], turns_since, restore)

    # ------------------------------------------------------------------ listing
    def threads(self, all_workspaces: bool = False) -> list[ThreadSummary]:
        """Threads of this workspace (or all) known to Codex, whoever started them, with codexr's snapshot coverage."""
        params: dict[str, Any] = {"limit": 200}
        if not all_workspaces:
            params["cwd"] = str(self.cwd)
        listed = self._list_threads(params)
        archived = self._list_threads({**params, "archived": True})
        out: list[ThreadSummary] = []
        seen: set[str] = {str(t["id"]) for t in archived}  # archived threads are not listed
        for t in listed:
            tid = str(t["id"])
            if tid in seen:
                continue
            seen.add(tid)
            side = self.sidecars.load(tid)
            out.append(self._summary(tid, side, str(t.get("preview") or ""), float(t.get("updatedAt") or 0),
                                     str(t.get("cwd") or ""), thread_source(t)))
        for side in self.sidecars.all():
            if side.thread_id in seen or (not all_workspaces and side.cwd != str(self.cwd)):
                continue
            if not side.turns and not side.redo:
                continue
            # Codex did not list it (e.g. a fork before its first prompt): its own record still names the
            # first prompt and who started it.
            t = self._read_thread(side.thread_id)
            preview = str(t.get("preview") or "")
            updated = max([side.created, *[r.started for r in side.turns]])
            out.append(self._summary(side.thread_id, side, preview, updated, side.cwd,
                                     thread_source(t) if t else CLIENT_NAME))
        out.sort(key=lambda s: s.updated, reverse=True)
        return out

    def _list_threads(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every page of `thread/list` for every source kind (a binary that rejects some kinds gets the usual four)."""
        kinds: tuple[str, ...] = SOURCE_KINDS
        out: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            page = {**params, "sourceKinds": list(kinds), **({"cursor": cursor} if cursor else {})}
            try:
                resp = self.client.thread_list(page)
            except JsonRpcError as exc:
                if kinds == SESSION_KINDS or cursor is not None:
                    raise SessionError(f"cannot list threads: {getattr(exc, 'message', None) or exc}") from exc
                kinds = SESSION_KINDS
                continue
            except (TransportClosedError, CodexError) as exc:
                raise SessionError(f"cannot list threads: Codex stopped responding ({exc})") from exc
            out.extend(dump_payload(th) for th in resp.data)
            nxt = getattr(resp, "next_cursor", None)
            if not nxt or nxt == cursor or not resp.data:
                return out
            cursor = str(nxt)

    def _read_thread(self, thread_id: str) -> dict[str, Any]:
        """Codex's record of a thread without its turns ({} when Codex has none)."""
        try:
            return dump_payload(self.client.thread_read(thread_id, include_turns=False).thread)
        except (JsonRpcError, TransportClosedError, CodexError):
            return {}

    def _summary(self, tid: str, side: ThreadSidecar | None, preview: str, updated: float,
                 cwd: str, source: str) -> ThreadSummary:
        prompts = len(side.turns) if side else 0
        snaps = sum(1 for t in side.turns if t.pre) if side else 0
        with contextlib.suppress(SessionError):
            listed = self.prompts(tid)
            prompts = len(listed)
            snaps = sum(1 for p in listed if p.pre)
            preview = listed[0].text if listed else ""  # what it really holds (a fork's first prompt too)
        origin = side.forked_from if side else None
        return ThreadSummary(tid, (preview.strip().splitlines() or [""])[0][:80], prompts, snaps,
                             len(side.redo) if side else 0, updated, bool(side and side.tracking),
                             origin, cwd, source, rewound_before(side.history, origin) if side else None)


def ensure_thread(session: Session, thread_id: str | None, last: bool) -> str:
    """The thread an exec/rewind/redo acts on: given (a unique prefix will do), the workspace's last, or a new one."""
    if thread_id:
        return session.resume_thread(session.resolve_thread(thread_id))
    if last:
        found = session.last_thread()
        if found is None:
            raise SessionError(f"no codexr thread in {session.cwd} yet (drop --last to start one)")
        return session.resume_thread(found)
    return session.start_thread()


def split_overrides(overrides: Iterable[str]) -> tuple[str, ...]:
    """`-c` overrides meant for Codex: codexr's own keys (`file_snapshots.*`, `tui.keys`...) would make it warn."""
    out = []
    for kv in overrides:
        key = kv.split("=", 1)[0].strip()
        if is_codexr_key(tuple(part.strip() for part in key.split("."))):
            continue
        out.append(kv)
    return tuple(out)
