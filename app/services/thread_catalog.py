"""A workspace's threads as Codex lists them joined with codexr's sidecars: the listing, prompts, the last used.

Why apart from threads.py: listing only reads Codex's records (`thread/list`, `thread/turns/list`, `thread/read`), so
`codexr threads` lists through a reader that does not import the SDK (app/codex/rpc_lines.py) and starts no recording,
while a session lists through its own connection with the same code.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any

from snapshot_store import StoreError
from snapshot_store.records import record

from ..codex.rpc_lines import RawCall, RpcRefused, read_pages, read_turns
from ..codex.turn_kinds import is_prompt_turn, is_sub_turn
from ..errors import CodexGone, ConversationGone, SessionError
from ..recording.sidecar import Sidecars, ThreadSidecar
from ..recording.workspace_lock import LastThread
from ..shared.vocab import CLIENT_NAME, SESSION_KINDS, source_label
from .thread_label import rewound_before, thread_label

# `thread/list` without `sourceKinds` leaves out `codex exec` threads (and others): ask for every kind
# (the pinned binary's ThreadSourceKind, written out: the SDK is not imported to list threads, rpc_lines.py says why;
# tests/test_vocab.py checks it against the SDK's)
SOURCE_KINDS = ("cli", "vscode", "exec", "appServer", "subAgent", "subAgentReview", "subAgentCompact",
                "subAgentThreadSpawn", "subAgentOther", "unknown")
# how long to ask again for a finished turn Codex does not list yet, and how recent such a turn must be (3 s was
# not enough twice in a loaded full test run: a turn run through Codex's daemon was still unlisted; 10 s neither,
# in three loaded runs of test_codex_daemon's daemon test; only such a turn is waited for, so nothing else waits)
LIST_SETTLE_S = 30.0
LIST_SETTLE_RECENT_S = 120.0


@record
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


@record
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
    damaged: str | None = None  # why codexr's record of it (its sidecar) cannot be read: listed without snapshots

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


def _conversation_gone(thread_id: str, why: str, side: ThreadSidecar) -> str:
    """What to say when Codex lost a thread codexr recorded (its session files deleted): the files before each of its
    last prompts are still in the store, under the snapshot ids the sidecar names."""
    before = [f"prompt {n} ({' '.join(t.prompt.split())[:30]}): {t.pre[:12]}"
              for n, t in enumerate(side.turns, 1) if t.pre][-3:]
    return (f"Codex cannot list the turns of thread {thread_id} ({why}): its conversation is gone or unreadable (its "
            f"session files deleted?), its files are not: `--files-only` rewinds them from codexr's record (before "
            f"{'; '.join(before)}; `codexr snapshots restore ID` puts one back too)")


class ThreadCatalog:
    """What Codex and the sidecars say of a workspace's threads, read through one raw call (`call`)."""

    def __init__(self, call: RawCall, sidecars: Sidecars, last: LastThread, cwd: Path) -> None:
        self.call, self.sidecars, self.last, self.cwd = call, sidecars, last, cwd

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

    def thread_prefixes(self, ids: list[str]) -> dict[str, str]:
        """Each id's shortest unique prefix among every thread `resolve_thread` matches against."""
        from .thread_ids import unique_prefixes

        return unique_prefixes(ids, self.known_ids())

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

    @staticmethod
    def recorded_prompts(side: ThreadSidecar) -> list[Prompt]:
        """The prompts codexr recorded on a thread, numbered in its record's order: all there is of a thread whose
        conversation Codex can no longer list (ConversationGone)."""
        return [Prompt(n, t.turn_id, t.prompt, t.status, t.pre) for n, t in enumerate(side.turns, 1)]

    def prompts(self, thread_id: str) -> list[Prompt]:
        """Every prompt of the thread in order, from Codex itself, joined with our snapshots."""
        return self._prompts(thread_id, self.sidecars.load(thread_id))

    def _prompts(self, thread_id: str, side: ThreadSidecar | None) -> list[Prompt]:
        """`prompts` joined with the sidecar given (None: without snapshots)."""
        try:
            turns = self._listed_turns(thread_id, side)
        except RpcRefused as refused:
            if side is not None and any(t.pre for t in side.turns):  # prompts codexr recorded, Codex cannot list
                raise ConversationGone(_conversation_gone(thread_id, refused.message, side)) from refused
            # A thread with no turn yet has no rollout to list turns from; it exists if it reads.
            try:
                self.call("thread/read", {"threadId": thread_id, "includeTurns": False})
            except RpcRefused as exc:
                raise SessionError(f"unknown thread {thread_id}: {exc.message}") from exc
            except CodexGone as exc:
                raise CodexGone(f"unknown thread {thread_id}: {exc}") from exc
            return []
        except CodexGone as exc:
            raise CodexGone(f"unknown thread {thread_id}: {exc}") from exc
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
            turns = read_turns(self.call, thread_id)
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
            damaged = None
            try:
                side = self.sidecars.load(tid)
            except StoreError as exc:  # one damaged record hides no other thread: listed, and said why
                side, damaged = None, str(exc)
            out.append(self._summary(tid, side, str(t.get("preview") or ""), float(t.get("updatedAt") or 0),
                                     str(t.get("cwd") or ""), thread_source(t), damaged))
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
                for page in read_pages(self.call, "thread/list", {**params, "sourceKinds": list(kinds)}):
                    pages += 1
                    out.extend(page)
                return out
            except RpcRefused as exc:
                if kinds == SESSION_KINDS or pages:
                    raise SessionError(f"cannot list threads: {exc.message}") from exc
                kinds = SESSION_KINDS
            except CodexGone as exc:
                raise CodexGone(f"cannot list threads: {exc}") from exc

    def read_thread(self, thread_id: str) -> dict[str, Any]:
        """Codex's record of a thread without its turns ({} when Codex has none)."""
        try:
            thread = self.call("thread/read", {"threadId": thread_id, "includeTurns": False}).get("thread")
        except (RpcRefused, CodexGone):
            return {}
        return thread if isinstance(thread, dict) else {}

    def _summary(self, tid: str, side: ThreadSidecar | None, preview: str, updated: float,
                 cwd: str, source: str, damaged: str | None = None) -> ThreadSummary:
        prompts = len(side.turns) if side else 0
        snaps = sum(1 for t in side.turns if t.pre) if side else 0
        with contextlib.suppress(SessionError):
            listed = self._prompts(tid, side)
            prompts = len(listed)
            snaps = sum(1 for p in listed if p.pre)
            preview = listed[0].text if listed else ""  # what it really holds (a fork's first prompt too)
        origin = side.forked_from if side else None
        return ThreadSummary(tid, (preview.strip().splitlines() or [""])[0][:80], prompts, snaps,
                             len(side.redo) if side else 0, updated, bool(side and side.tracking),
                             origin, cwd, source, rewound_before(side.history, origin) if side else None, damaged)
