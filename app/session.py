"""The session core: one Codex app-server, driven through the SDK, whose turns are recorded and rewound.

No UI imports: front ends supply callbacks (approvals, events, confirmations) and render results. `Session` is the
façade the front ends (the driver, line mode, app/tui/, the CLI) hold; the work is done by the layers below it, each
in a folder of app/: talking to Codex (app/codex/), the session's services (app/services/: threads, turns, the
driver), recording a turn (app/recording/) and rewind/redo (app/rewind/, one flow the proxy's revert runs too).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import CodexrSettings
from snapshot_store import RestorePlan, Store
from snapshot_store.restore.journal import Recovery
from snapshot_store.roots import workspace_root
from snapshot_store.settings import ScopeSettings

from .codex.approval import ApprovalRequest as ApprovalRequest
from .codex.codex_connection import ApprovalCallback as ApprovalCallback
from .codex.codex_connection import CodexConnection
from .codex.codex_connection import EventCallback as EventCallback
from .codex.codex_connection import dump_payload as dump_payload
from .codex.codex_sdk import CodexClient
from .codex.turn_settings import ModelInfo, TurnSettings
from .errors import Declined as Declined
from .errors import SessionError as SessionError
from .recording.auto_gc import AutoGc
from .recording.recorder import PreTurnAhead, Recorder, RecordsAhead
from .recording.recording import Recording
from .recording.sidecar import Sidecars, ThreadSidecar
from .recording.workspace_lock import LastThread, SessionLock
from .rewind.flow import RedoPreview as RedoPreview
from .rewind.flow import RewindPreview as RewindPreview
from .rewind.picks import Picks as Picks
from .rewind.rewinder import RedoResult as RedoResult
from .rewind.rewinder import Rewinder
from .rewind.rewinder import RewindResult as RewindResult
from .services.background import BackgroundTerminal as BackgroundTerminal
from .services.choices import Choices
from .services.threads import Prompt as Prompt
from .services.threads import Threads
from .services.threads import ThreadSummary as ThreadSummary
from .services.threads import thread_source as thread_source
from .services.turns import RunningTurns, TurnRunner
from .services.turns import TurnOutcome as TurnOutcome
from .shared.vocab import RewindMode


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
    add_dirs: tuple[str, ...] = ()  # `--add-dir`: absolute directories the agent may write besides the workspace


class Session:
    """One Codex app-server process, the snapshot store, and the sidecars of its threads: the services composed."""

    def __init__(self, opts: SessionOptions, *, approval: ApprovalCallback | None = None,
                 on_notice: EventCallback | None = None, on_recovery: Callable[[Recovery], None] | None = None,
                 ahead: str | None = None, watch: bool = True, read_ahead: bool = False) -> None:
        """`ahead`: the prompt a turn on a new thread will send at once (`codexr exec`): its pre-turn capture is taken
        while Codex starts (PreTurnAhead). `on_recovery`: says an interrupted restore a capture finished. `watch`:
        keep a change journal for the captures after the first (False: a command that captures once; the journal's
        3,000 watches at 100,000 files were ~15 ms of a one-shot rewind). `read_ahead`: read the newest snapshot's
        records while Codex starts (RecordsAhead: a rewind or redo decodes its target's map next)."""
        self.opts = opts
        # Never Codex's home or the store (nor inside them): a restore there would overwrite their files.
        self.cwd = workspace_root(opts.cwd, [opts.codex_home], store=opts.codex_home / "file_snapshots",
                                  containing=True)
        self.recording = Recording(self.cwd, opts.codex_home, opts.settings)
        self.scope: ScopeSettings = self.recording.recorder.scope
        self.tracking = self.recording.tracking
        self.store_dir: Path = self.recording.store_dir
        self.store: Store = self.recording.store
        self.sidecars: Sidecars = self.recording.sidecars
        self.recorder: Recorder = self.recording.recorder
        self.lock: SessionLock = self.recording.lock
        self.last = LastThread(self.store_dir, self.cwd)
        self.choices = Choices(asked_model=opts.model, sandbox=opts.sandbox, approval_policy=opts.approval_policy,
                               model=opts.model or "")
        self.choices.turn_settings.add_dirs = opts.add_dirs
        self._closed = False
        running = RunningTurns()
        if on_recovery is not None:
            self.store.on_recovery = on_recovery
        pre_turn = None
        if ahead is not None and self.tracking:
            self.recording.start()  # the journal watches before any capture, the one taken ahead too
            pre_turn = PreTurnAhead(self.recorder, ahead)
        records = RecordsAhead(self.store, self.cwd) if read_ahead and self.tracking else None
        try:
            self.connection = CodexConnection(
                self.cwd, opts.codex_home, codex_bin=opts.codex_bin, env=opts.env,
                config_overrides=opts.config_overrides, approval=approval, on_notice=on_notice,
                approval_timeout=opts.settings.file_snapshots.approval_timeout_seconds, open_item=running.open_item)
        except BaseException:
            if pre_turn is not None:
                pre_turn.wait()  # the store is not closed under it
            if records is not None:
                records.wait()
            raise
        if records is not None:
            records.keep()
        if pre_turn is None:
            self.recording.start(watch)
        self.gc = AutoGc(self.store_dir, opts.codex_home, opts.settings, self.tracking, self.connection.notice)
        self.thread_list = Threads(self.connection, self.choices, self.sidecars, self.last, self.cwd,
                                   opts.codex_home)
        self.turns = TurnRunner(self.connection, self.recorder, self.thread_list, self.choices, running, self.gc)
        self.turns.ahead = pre_turn
        self.rewinder = Rewinder(self.connection, self.recorder, self.thread_list, self.choices, self.lock, self.gc,
                                 opts.codex_home)

    # ------------------------------------------------------------------ lifecycle
    @property
    def client(self) -> CodexClient:
        """The SDK's client of this session's app-server."""
        return self.connection.client

    def close(self) -> None:
        """Stop Codex and release everything."""
        if self._closed:
            return
        self._closed = True
        self.connection.close()
        self.turns.close()
        self.gc.join()
        self.recording.close()

    def codex_alive(self) -> bool:
        """Is the app-server process still running?"""
        return self.connection.alive()

    def codex_exited(self, within: float) -> bool:
        """Has the app-server process ended, waiting up to `within` seconds for it?"""
        return self.connection.exited(within)

    def restart_codex(self, thread_id: str | None = None) -> None:
        """After Codex died: a new app-server for this session, and `thread_id` resumed on it (SessionError when
        either fails). The store, recorder, lock, choices (model, effort, permissions) and sidecars stay as they are."""
        self.connection.restart()
        if thread_id is not None:
            self.thread_list.resume_thread(thread_id)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _approval_timeout(self) -> float:
        """Seconds an approval waits for the front end before it is declined."""
        return self.connection.approval_timeout

    @property
    def _gc_thread(self) -> threading.Thread | None:
        """The automatic gc's thread, once one ran (tests wait for it)."""
        return self.gc.thread

    # ------------------------------------------------------------------ choices: model, effort, permissions
    @property
    def model(self) -> str:
        """The model, as Codex reports it once a thread is started or resumed (or as chosen with /model)."""
        return self.choices.model

    @property
    def next_model(self) -> str | None:
        """The model chosen with /model: sent with every later turn/start."""
        return self.choices.next_model

    @property
    def turn_settings(self) -> TurnSettings:
        """Effort (/model), approval and sandbox (/permissions), sent with every later turn."""
        return self.choices.turn_settings

    @turn_settings.setter
    def turn_settings(self, value: TurnSettings) -> None:
        self.choices.turn_settings = value

    def models(self) -> list[str]:
        """The models Codex offers (its `model/list`, hidden ones left out), by id."""
        return [m.id for m in self.model_catalog()]

    def model_catalog(self) -> list[ModelInfo]:
        """The models Codex offers with their reasoning efforts (asked once per Codex process)."""
        return self.connection.model_catalog()

    def use_model(self, model: str, effort: str | None = None) -> None:
        """Use `model` (and reasoning `effort`, None: the model's default) from the next turn on."""
        self.choices.use_model(model, effort)

    def use_permissions(self, approval: str, sandbox: str) -> None:
        """Use this approval policy and sandbox mode from the next turn on (/permissions)."""
        self.choices.use_permissions(approval, sandbox)

    def configured(self) -> dict[str, Any]:
        """Codex's effective config.toml values for this workspace (`config/read`), {} when it cannot say."""
        return self.connection.configured()

    def find_files(self, query: str, limit: int = 40) -> list[str]:
        """Workspace files matching `query` fuzzily, best first, relative to the workspace (`fuzzyFileSearch`)."""
        return self.connection.find_files(query, limit)

    # ------------------------------------------------------------------ threads (app/services/threads.py)
    def start_thread(self) -> str:
        """A new thread in this workspace; its sidecar is written with its first turn."""
        return self.thread_list.start_thread()

    def resolve_thread(self, ident: str) -> str:
        """The thread `ident` names (its id, or a unique prefix of 4+ characters)."""
        return self.thread_list.resolve_thread(ident)

    def thread_prefixes(self, ids: list[str]) -> dict[str, str]:
        """Each id's shortest unique prefix among every thread `resolve_thread` matches against."""
        return self.thread_list.thread_prefixes(ids)

    def resume_thread(self, thread_id: str) -> str:
        """Load an existing thread into this Codex process (a no-op if already loaded)."""
        return self.thread_list.resume_thread(thread_id)

    def archive_thread(self, thread_id: str) -> None:
        """Archive a thread (Codex moves its rollout; its sidecar and snapshots stay)."""
        self.thread_list.archive_thread(thread_id)

    def unarchive_thread(self, thread_id: str) -> None:
        """Bring an archived thread back."""
        self.thread_list.unarchive_thread(thread_id)

    def mark_used(self, thread_id: str) -> None:
        """The user sent a prompt on `thread_id` or switched to it: `--last` means this thread from now on."""
        self.thread_list.mark_used(thread_id)

    def last_thread(self) -> str | None:
        """The thread the user last used in this workspace (last prompt sent or switched to)."""
        return self.thread_list.last_thread()

    def prompts(self, thread_id: str) -> list[Prompt]:
        """Every prompt of the thread in order, from Codex itself, joined with our snapshots."""
        return self.thread_list.prompts(thread_id)

    def threads(self, all_workspaces: bool = False) -> list[ThreadSummary]:
        """Threads of this workspace (or all) known to Codex, whoever started them, with codexr's snapshot coverage."""
        return self.thread_list.threads(all_workspaces)

    # ------------------------------------------------------------------ turns (app/services/turns.py)
    def sidecar(self, thread_id: str) -> ThreadSidecar:
        """The thread's sidecar, created (untracked turns and all) if codexr never saw it."""
        return self.turns.sidecar(thread_id)

    def known_paths(self, thread_id: str) -> list[str]:
        """Every path the thread's captures look at (for dry runs and diffs outside a turn)."""
        return self.turns.known_paths(thread_id)

    def run_turn(self, thread_id: str, text: str, on_event: EventCallback | None = None,
                 images: Sequence[str] = (), output_schema: dict[str, Any] | None = None) -> TurnOutcome:
        """Capture, start the turn, stream it, capture again (app/services/turns.py)."""
        return self.turns.run_turn(thread_id, text, on_event, images, output_schema)

    def collect_later(self) -> None:
        """Automatic gc (at most daily), off the turn's critical path (app/recording/auto_gc.py)."""
        self.gc.collect_later()

    def interrupt(self, thread_id: str, turn_id: str) -> None:
        """Ask Codex to stop a running turn."""
        self.turns.interrupt(thread_id, turn_id)

    def compact(self, thread_id: str, on_event: EventCallback | None = None) -> tuple[str, str | None]:
        """Summarise the thread's conversation to free context (Codex's `thread/compact/start`): (status, error)."""
        return self.turns.compact(thread_id, on_event)

    def review(self, thread_id: str, target: dict[str, Any], on_event: EventCallback | None = None
               ) -> tuple[str, str | None]:
        """A code review on this thread (Codex's `review/start`, inline): (status, error)."""
        return self.turns.review(thread_id, target, on_event)

    def background_terminals(self, thread_id: str) -> list[BackgroundTerminal]:
        """Commands of the thread still running after their turn (Codex's `thread/backgroundTerminals/list`)."""
        return self.turns.background_terminals(thread_id)

    def stop_terminals(self, thread_id: str, process_id: str | None = None) -> list[BackgroundTerminal]:
        """End the thread's background terminals (or the one with `process_id`); the ones Codex terminated."""
        return self.turns.stop_terminals(thread_id, process_id)

    # ------------------------------------------------------------------ rewind / redo (app/rewind/rewinder.py)
    def resolve_prompt(self, prompts: list[Prompt], to: str | int) -> Prompt:
        """The prompt `to` names: its number (from 1) or its turn id."""
        return self.rewinder.resolve_prompt(prompts, to)

    def other_sessions(self) -> list[str]:
        """Other live codexr sessions in this workspace (their work may be overwritten)."""
        return self.rewinder.other_sessions()

    def others_warning(self, thread_id: str | None, plan: RestorePlan | None) -> list[str]:
        """Warning lines for a restore plan while another codexr session is live here (none when alone)."""
        return self.rewinder.others_warning(thread_id, plan)

    def rewind(self, thread_id: str, to: str | int, mode: str = RewindMode.BOTH, *, dry_run: bool = False,
               confirm: Callable[[RewindPreview], bool] | None = None, picks: Picks | None = None,
               resume: bool = False, yes: bool = False) -> RewindResult:
        """Fork the conversation before prompt `to` and/or restore its pre-turn files (app/rewind/rewinder.py);
        `picks`: the user's file-by-file choices (app/rewind/owners.py); `resume`: the thread is loaded into Codex
        first (a command's), while the files are planned; `yes`: `confirm` takes any plan (`--yes`), so the fork
        is made then too."""
        held = functools.partial(self.resume_thread, thread_id) if resume else None
        return self.rewinder.rewind(thread_id, to, mode, dry_run=dry_run, confirm=confirm, picks=picks, held=held,
                                    yes=yes)

    def redo(self, thread_id: str, *, dry_run: bool = False,
             confirm: Callable[[RedoPreview], bool] | None = None, picks: Picks | None = None,
             resume: bool = False) -> RedoResult:
        """Undo the last rewind that landed on this thread: its files and its conversation (app/rewind/rewinder.py);
        `resume`: the thread is loaded into Codex first (a command's), while the files are planned."""
        held = functools.partial(self.resume_thread, thread_id) if resume else None
        return self.rewinder.redo(thread_id, dry_run=dry_run, confirm=confirm, picks=picks, held=held)


def named_thread(session: Session, thread_id: str | None, last: bool, hint: str) -> str | None:
    """The full id of the thread `--thread` (a unique prefix will do) or `--last` (the workspace's last) names, None
    when neither is given; SessionError, ending with `hint`, when `--last` finds no thread."""
    if thread_id:
        return session.resolve_thread(thread_id)
    if not last:
        return None
    found = session.last_thread()
    if found is None:
        raise SessionError(f"no codexr thread in {session.cwd} yet ({hint})")
    return found


def ensure_thread(session: Session, thread_id: str | None, last: bool) -> str:
    """The thread an exec acts on: given (a unique prefix will do), the workspace's last, or a new one."""
    named = named_thread(session, thread_id, last, "drop --last to start one")
    return session.start_thread() if named is None else session.resume_thread(named)
