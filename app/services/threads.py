"""A workspace's threads as Codex lists them and codexr's sidecars record them: start, resume, list, prompts, last.

Why apart: the rewinder and the front ends ask which thread and which prompt; that answer joins Codex's record
(`thread/list`, `thread/read`) with the sidecars, and it is the same whoever ran the turns.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..codex.codex_connection import CodexConnection, dump_payload
from ..codex.codex_sdk import CodexError, JsonRpcError, ThreadSourceKind, TransportClosedError
from ..codex.daemon import CONTROL, STOP, Holder, held_elsewhere, holder
from ..codex.translate import is_prompt_turn, is_sub_turn
from ..errors import CodexGone, SessionError
from ..recording.sidecar import Sidecars, ThreadSidecar
from ..recording.workspace_lock import LastThread
from ..shared.vocab import CLIENT_NAME, SESSION_KINDS, source_label
from .choices import Choices
from .thread_label import rewound_before, thread_label

# `thread/list` without `sourceKinds` leaves out `codex exec` threads (and others): ask for every kind
SOURCE_KINDS = tuple(k.value for k in ThreadSourceKind)
# how long to ask again for a finished turn Codex does not list yet, and how recent such a turn must be
LIST_SETTLE_S = 3.0
LIST_SETTLE_RECENT_S = 120.0


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
    source: str = ""  # who started it, in app/shared/vocab.py's words: codexr, CLI, exec, IDE, app-server, ...
    rewound_before: int | None = None  # a fork made by a rewind: the origin's prompt it went back before

    @property
    def label(self) -> str:
        """What it holds and where it came from, worded as everywhere else (app/services/thread_label.py)."""
        return thread_label(self.preview, self.prompts, self.forked_from, self.rewound_before)

    @property
    def conversation_only(self) -> int:
        """Prompts whose files cannot be rewound (sent outside codexr, or with file_snapshots off)."""
        return max(0, self.prompts - self.with_snapshots)


def thread_source(thread: dict[str, Any]) -> str:
    """Who started a thread (app-server's Thread): `codexr` for codexr's own (its client name is the originator)."""
    return source_label(thread.get("source"), thread.get("originator"))


def _text_of(user_item: dict[str, Any]) -> str:
    parts = [c.get("text", "") for c in user_item.get("content") or [] if isinstance(c, dict)]
    return "\n".join(p for p in parts if p)


class Threads:
    """The threads of one workspace, through one Codex connection."""

    def __init__(self, conn: CodexConnection, choices: Choices, sidecars: Sidecars, last: LastThread,
                 cwd: Path, home: Path) -> None:
        self.conn, self.choices, self.sidecars, self.last, self.cwd = conn, choices, sidecars, last, cwd
        self.home = home  # CODEX_HOME: where Codex's daemon and its writer locks are
        self.started: set[str] = set()  # threads this session started: no turn ran on them before ours

    def start_thread(self) -> str:
        """A new thread in this workspace; its sidecar is written with its first turn."""
        client = self.conn.client
        resp = self.conn.rpc("cannot start a thread",
                             lambda: client.thread_start(self.choices.thread_params(self.cwd)))
        self.choices.noted(resp, dump_payload(resp))
        self.started.add(str(resp.thread.id))
        return str(resp.thread.id)

    def resolve_thread(self, ident: str) -> str:
        """The thread `ident` names: its id, or a unique prefix of 4+ characters of a thread Codex lists (any
        workspace, every source kind, archived too) or codexr keeps a sidecar for (a fork before its first prompt)."""
        from .thread_ids import resolve_thread_id

        return resolve_thread_id(ident, self.known_ids)

    def known_ids(self) -> list[str]:
        """Every thread id a prefix is matched against: what Codex lists (any workspace, archived too) and every
        thread codexr keeps a sidecar for."""
        listed = self._list_threads({"limit": 200}) + self._list_threads({"limit": 200, "archived": True})
        return [str(t["id"]) for t in listed] + self.sidecars.ids()

    def resume_thread(self, thread_id: str) -> str:
        """Load an existing thread into this Codex process (a no-op if already loaded).

        A thread another app-server holds and serves on a unix socket (Codex's managed daemon, where the official TUI
        runs its threads, CODEX_FACTS §11; another `codexr codex`'s) is worked on through that app-server from then
        on, as one more client of it (app/codex/daemon.py); where codexr may not, or the holder serves no socket, one
        line says which process has it and what to do.
        """
        try:
            return self._resume(thread_id)
        except SessionError as exc:
            if not held_elsewhere(str(exc)):
                raise
            who = holder(self.home, thread_id)
            door = who.door if who is not None else None
            # no holder known (no /proc/locks off Linux): the daemon is the one that keeps threads open
            link = None if door else who.socket(self.home) if who is not None else self.home.joinpath(*CONTROL)
            if self.conn.attached or (door is None and link is None):
                raise self._held_line(thread_id, who) from exc
            daemon = who is None or who.daemon
            what = ("Codex's app-server daemon" if daemon else "the app-server of a codexr codex" if door
                    else "another Codex app-server") + (f" (pid {who.pid})" if who is not None else "")
            try:
                self.conn.attach(what, link=link, door=door)
            except SessionError as why:
                fix = f"quit the `codex` that has it and run `{STOP}`" if daemon else "quit what has it open"
                raise SessionError(f"thread {thread_id} is open in {what}, and codexr does not work through it: "
                                   f"{why}; {fix}, then try again") from exc
            self.conn.notice("codexr/attached", {"threadId": thread_id, "message": (
                f"thread {thread_id} is open in {what}: codexr works through it")})
            try:
                return self._resume(thread_id)
            except SessionError as again:
                if not held_elsewhere(str(again)):
                    raise
                raise self._held_line(thread_id, holder(self.home, thread_id)) from again

    def _resume(self, thread_id: str) -> str:
        params = self.choices.thread_params(self.cwd)
        params["excludeTurns"] = True
        client = self.conn.client
        resp = self.conn.rpc(f"cannot resume thread {thread_id}", lambda: client.thread_resume(thread_id, params))
        self.choices.noted(resp, dump_payload(resp))
        return str(resp.thread.id)

    @staticmethod
    def _held_line(thread_id: str, who: Holder | None) -> SessionError:
        """A thread another app-server has open, said so a user knows which one and what to do."""
        where = f" ({who})" if who else ""
        return SessionError(f"thread {thread_id} is open in another Codex app-server{where}: quit the codex or "
                            f"codexr that has it open (for Codex's daemon: `{STOP}`), then try again")

    def archive_thread(self, thread_id: str) -> None:
        """Archive a thread (Codex moves its rollout; its sidecar and snapshots stay)."""
        client = self.conn.client
        self.conn.rpc(f"cannot archive thread {thread_id}", lambda: client.thread_archive(thread_id))

    def unarchive_thread(self, thread_id: str) -> None:
        """Bring an archived thread back."""
        client = self.conn.client
        self.conn.rpc(f"cannot unarchive thread {thread_id}", lambda: client.thread_unarchive(thread_id))

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
            if (side is not None and side.cwd == str(self.cwd)) or self.read_thread(recorded):
                return recorded
        best: tuple[float, str] | None = None
        for side in self.sidecars.all():
            if side.cwd != str(self.cwd):
                continue
            when = max([side.created, *[t.started for t in side.turns]])
            if best is None or when > best[0]:
                best = (when, side.thread_id)
        return best[1] if best else None

    def prompts(self, thread_id: str) -> list[Prompt]:
        """Every prompt of the thread in order, from Codex itself, joined with our snapshots."""
        client = self.conn.client
        side = self.sidecars.load(thread_id)
        try:
            turns = self._listed_turns(thread_id, side)
        except JsonRpcError:
            # A thread with no turn yet has no rollout to list turns from; it exists if it reads.
            self.conn.rpc(f"unknown thread {thread_id}", lambda: client.thread_read(thread_id, include_turns=False))
            return []
        except (TransportClosedError, CodexError) as exc:
            raise CodexGone(f"unknown thread {thread_id}: Codex stopped responding ({exc})") from exc
        out: list[Prompt] = []
        before: str | None = None
        for t in turns:
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

    def _listed_turns(self, thread_id: str, side: ThreadSidecar | None) -> list[dict[str, Any]]:
        """The thread's turns as Codex lists them, asked again for a moment while a turn codexr saw finish just now
        is not listed yet: Codex's app-server daemon (0.171) answered a `codexr rewind` run right after the
        `codexr exec` it had served with the turns before that one (CI, once), and the rewind said the prompt did
        not exist."""
        deadline = time.monotonic() + LIST_SETTLE_S
        while True:
            turns = self.conn.thread_turns(thread_id)
            listed = {str(t.get("id")) for t in turns}
            recent = time.time() - LIST_SETTLE_RECENT_S
            missing = [r for r in (side.turns if side else []) if r.post and r.turn_id not in listed
                       and r.started > recent]
            if not missing or time.monotonic() > deadline:
                return turns
            time.sleep(0.1)

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
            if tid in seen or t.get("attachedToThreadId"):  # an attached fork: a hidden side conversation (0.171)
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
            t = self.read_thread(side.thread_id)
            preview = str(t.get("preview") or "")
            updated = max([side.created, *[r.started for r in side.turns]])
            out.append(self._summary(side.thread_id, side, preview, updated, side.cwd,
                                     thread_source(t) if t else CLIENT_NAME))
        out.sort(key=lambda s: s.updated, reverse=True)
        return out

    def _list_threads(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        """Every page of `thread/list` for every source kind (a binary that rejects some kinds gets the usual four)."""
        kinds: tuple[str, ...] = SOURCE_KINDS
        while True:
            out: list[dict[str, Any]] = []
            pages = 0
            try:  # read raw: the SDK's model drops fields it does not know (attachedToThreadId)
                for page in self.conn.pages("thread/list", {**params, "sourceKinds": list(kinds)}):
                    pages += 1
                    out.extend(page)
                return out
            except JsonRpcError as exc:
                if kinds == SESSION_KINDS or pages:
                    raise SessionError(f"cannot list threads: {getattr(exc, 'message', None) or exc}") from exc
                kinds = SESSION_KINDS
            except (TransportClosedError, CodexError) as exc:
                raise CodexGone(f"cannot list threads: Codex stopped responding ({exc})") from exc

    def read_thread(self, thread_id: str) -> dict[str, Any]:
        """Codex's record of a thread without its turns ({} when Codex has none)."""
        try:
            return dump_payload(self.conn.client.thread_read(thread_id, include_turns=False).thread)
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
