"""The transcript as an append-only log of typed events, from Codex's live stream or its stored turns.

Front ends render these and nothing else, so a live turn, a resumed thread, a fork read back from
Codex and a recorded replay all draw the same way. Every event is a plain dataclass that round-trips
through JSON (`to_json`/`from_json`) except `ApprovalAsked`, which carries the future its answer goes to.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from .approval import ApprovalRequest

# ------------------------------------------------------------------------------------ transcript


@dataclass(frozen=True)
class UserPrompt:
    """A prompt the user sent; `number` is its 1-based place in the thread (0 while not yet known)."""

    turn_id: str
    text: str
    number: int = 0
    has_snapshot: bool = False
    outside: bool = False  # sent by another Codex client before codexr continued the thread


@dataclass(frozen=True)
class TurnStarted:
    """Codex accepted a prompt and started working on it."""

    turn_id: str


@dataclass(frozen=True)
class AgentDelta:
    """A piece of an agent message as it streams (appended to the message with the same item id)."""

    item_id: str
    delta: str


@dataclass(frozen=True)
class AgentMessage:
    """A finished agent message (Markdown); replaces whatever its deltas built."""

    item_id: str
    text: str


@dataclass(frozen=True)
class Reasoning:
    """A reasoning summary (shown collapsed)."""

    item_id: str
    text: str


@dataclass(frozen=True)
class CommandStarted:
    """The agent started a shell command."""

    item_id: str
    command: str
    cwd: str = ""


@dataclass(frozen=True)
class CommandOutput:
    """Output of a running command, as it arrives."""

    item_id: str
    delta: str


@dataclass(frozen=True)
class CommandFinished:
    """A command ended; `output` is all of it (replaces the streamed deltas)."""

    item_id: str
    command: str
    output: str
    exit_code: int | None
    duration_ms: int | None
    status: str  # completed | failed | declined | interrupted | background (still running; Codex stopped waiting)


@dataclass(frozen=True)
class FileDiff:
    """One file of an agent's edit as a unified diff (or the whole text for an added/deleted file)."""

    path: str
    kind: str  # add | delete | update | move
    diff: str
    move_path: str | None = None


@dataclass(frozen=True)
class FileChanges:
    """An edit (apply_patch) the agent made or proposed."""

    item_id: str
    status: str  # inProgress | completed | failed | declined | interrupted
    changes: tuple[FileDiff, ...]


@dataclass(frozen=True)
class ErrorNotice:
    """A provider or Codex error; `will_retry` when Codex is retrying by itself."""

    message: str
    will_retry: bool = False


@dataclass(frozen=True)
class TokenUsage:
    """Tokens used by the thread so far and by the last model request (which is what fills the context window)."""

    turn_id: str
    last_total: int
    thread_total: int
    context_window: int | None = None  # the model's context window, as Codex reports it
    turn_total: int | None = None  # every request of this turn so far (services/usage.py; None: not reckoned)


@dataclass(frozen=True)
class FileStat:
    """A file a turn changed, from its pre/post snapshots (so shell-made changes count)."""

    path: str
    change: str  # added | modified | deleted | mode | type
    added: int | None = None  # lines; None for binary or oversized files
    removed: int | None = None


@dataclass(frozen=True)
class TurnFinished:
    """A turn ended; its snapshots and the files it changed."""

    turn_id: str
    status: str
    error: str | None = None
    seconds: float = 0.0
    files: tuple[FileStat, ...] = ()
    pre: str | None = None
    post: str | None = None
    capture_error: str | None = None


@dataclass(frozen=True)
class ApprovalDecided:
    """What the user (or the timeout) answered to an approval request."""

    item_id: str
    kind: str
    decision: str
    summary: str


@dataclass(frozen=True)
class Notice:
    """A line from codexr itself: a rewind, a redo, a restart, a warning."""

    text: str
    level: str = "info"  # info | warning | error


TRANSCRIPT_TYPES: tuple[type, ...] = (
    UserPrompt, TurnStarted, AgentDelta, AgentMessage, Reasoning, CommandStarted, CommandOutput,
    CommandFinished, FileChanges, ErrorNotice, TokenUsage, TurnFinished, ApprovalDecided, Notice,
)

# ------------------------------------------------------------------------------------ session state


@dataclass(frozen=True)
class Status:
    """What the status bar shows."""

    model: str = ""
    workspace: str = ""
    thread_id: str = ""
    tracking: bool = False
    tracked_files: int | None = None  # in the thread's latest snapshot (None: the thread has none yet)
    store_bytes: int = 0
    last_capture_at: float | None = None
    last_capture_seconds: float | None = None
    redo_depth: int = 0
    others: tuple[str, ...] = ()  # other live codexr sessions in this workspace
    busy: bool = False  # a turn is running
    context_used: int | None = None  # tokens of the last model request of this thread (None: not known yet)
    context_window: int | None = None
    effort: str = ""  # reasoning effort of the next turn ("": the model's default)
    approval: str = ""  # approval policy of the next turn ("": not known yet)
    sandbox: str = ""  # sandbox mode of the next turn


@dataclass(frozen=True)
class Ready:
    """Codex started; the session can take prompts."""

    status: Status


@dataclass(frozen=True)
class StartFailed:
    """Codex could not start (not logged in, no provider, bad binary): say how to fix it."""

    message: str
    login_hint: bool = False


@dataclass(frozen=True)
class ThreadLoaded:
    """The session moved to another thread (new, resumed, forked by a rewind, back by a redo).

    `events` is the thread's whole transcript as Codex stores it; the front end redraws from it.
    `composer` is text to put back in the composer (a rewind hands back the chosen prompt).
    """

    thread_id: str
    events: tuple[Any, ...]
    reason: str = ""
    composer: str = ""


@dataclass(frozen=True)
class StatusChanged:
    """New values for the status bar."""

    status: Status


@dataclass(frozen=True)
class CodexDied:
    """The app-server stopped; `restarted` when it was started again and the thread resumed."""

    message: str
    restarted: bool


@dataclass
class ApprovalAsked:
    """The agent waits for permission; the front end answers by resolving `future` with a decision
    (`accept`, `acceptForSession`, `decline` or `cancel`). `timeout` seconds after it was asked,
    the session core declines by itself."""

    request: ApprovalRequest
    future: concurrent.futures.Future[str] = field(default_factory=concurrent.futures.Future)
    timeout: float = 0.0
    asked_at: float = 0.0


# ------------------------------------------------------------------------------------ JSON (replay logs)

_BY_NAME: dict[str, type] = {t.__name__: t for t in TRANSCRIPT_TYPES}


def to_json(event: Any) -> dict[str, Any]:
    """A transcript event as JSON (for recorded replay logs)."""
    if type(event) not in TRANSCRIPT_TYPES:
        raise TypeError(f"{type(event).__name__} is not a transcript event")
    doc = dataclasses.asdict(event)
    doc["type"] = type(event).__name__
    return doc


def from_json(doc: dict[str, Any]) -> Any:
    """The transcript event a `to_json` document describes (ValueError when it is not one)."""
    if not isinstance(doc, dict) or doc.get("type") not in _BY_NAME:
        raise ValueError(f"not a transcript event: {str(doc)[:80]}")
    kind = _BY_NAME[doc["type"]]
    fields = {f.name for f in dataclasses.fields(kind)}
    args = {k: v for k, v in doc.items() if k in fields}
    try:
        if kind is FileChanges:
            args["changes"] = tuple(FileDiff(**c) for c in args.get("changes") or ())
        if kind is TurnFinished:
            args["files"] = tuple(FileStat(**f) for f in args.get("files") or ())
        return kind(**args)
    except TypeError as exc:
        raise ValueError(f"malformed {doc['type']} event: {exc}") from exc


def short_thread(thread_id: str) -> str:
    """A thread id short enough for a status line yet distinct: `…` and its last 8 hex digits.

    Codex's thread ids are UUIDv7, whose first 8 digits are a timestamp that stays the same for 65 s, so a
    fork made right after its original would show the same prefix; the tail is random.
    """
    return "…" + thread_id.replace("-", "")[-8:] if thread_id else ""
