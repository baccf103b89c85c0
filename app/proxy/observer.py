"""What the proxy does with the frames it relays: it records every turn with the SDK session's own Recorder
(opened as the session opens it, app/recording/recording.py), and reverts files with the rewinder's file side
(app/rewind/revert.py).

`turn/start` from the client: the pre-turn capture, committed before the request is forwarded (a steer of a
running turn is forwarded as it is); the answer binds it to the turn id; the turn's notifications feed the
recorder as they pass; on `turn/completed` the turn is finished (pre-edit states, sidecar, the post-turn capture)
on the recorder's own thread, and the frame is forwarded once that is done (the client shows the turn ended on
it: what the user saves from then on is theirs), or after FINISH_WAIT_S if the store is held elsewhere. A capture
that fails never holds the turn hostage: the turn runs untracked and the client gets a `warning` notification
saying so.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .relay import Observer, Verdict, unanswerable

#: Methods whose `cwd` a remote TUI leaves null (the server's own cwd is then used: ours is the workspace).
CWD_METHODS = frozenset({"thread/start", "thread/resume", "thread/fork"})
#: Requests after which the server starts a turn without a turn/start: the user's shell command (`!` in the official
#: TUI), and a prompt put on or started from the server-side queue.
SERVER_STARTED = frozenset({"thread/shellCommand", "thread/queue/add", "thread/queue/start"})
T = TypeVar("T")
#: How long `turn/completed` waits for the turn's post-turn capture before it goes to the client anyway.
FINISH_WAIT_S = 10.0


def revert_line(thread_id: str, fork: str, done: Any, number: int | None) -> str:
    """The one line after the client's revert (Esc Esc in the official TUI, whose own line says it left the files
    alone): codexr put them back too, which ones, and how to undo it."""
    from ..shared.lines import files_restored, some_paths

    where = f"before prompt {number}" if number is not None else "before the prompt you went back to"
    changed = [*done.result.written, *done.result.deleted]
    what = (f"{some_paths(changed)} ({files_restored(done.result)})" if changed
            else "none of them had changed")
    decided = done.decided
    kept = sorted(p for p, d in decided.items() if d.kind == "kept")
    clash = sorted(p for p, d in decided.items() if d.kind == "conflict")
    if kept:  # the client cannot be asked: what the rule kept is named, and so is each conflict kept as it is
        what += f"; kept as you left them (not the agent's changes): {some_paths(kept)}"
    if clash:
        what += (f"; kept yours where you and the agent changed the same or adjacent lines: {some_paths(clash)} "
                 "(`codexr rewind` asks about each)")
    return (f"the files went back as well, to {where}: {what}; `codexr redo --thread {thread_id}` brings them back "
            f"(the undone prompts stay in thread {fork})")


@dataclass
class _Turn:
    thread_id: str
    text: str
    pre: str | None
    state: Any  # recorder.TurnState (imported with the recorder, on the recorder's thread)


def input_text(params: dict[str, Any]) -> str:
    """The prompt's text: the text items of `turn/start`'s input, joined."""
    items = params.get("input") or []
    return "\n".join(str(i.get("text") or "") for i in items if isinstance(i, dict) and i.get("type") == "text")


def _named(msg: dict[str, Any], what: str) -> str | None:
    """`params.<what>Id`, or `params.<what>.id`: the turn or thread a notification is about."""
    params = msg.get("params")
    if not isinstance(params, dict):
        return None
    if isinstance(params.get(f"{what}Id"), str):
        return str(params[f"{what}Id"])
    inner = params.get(what)
    return str(inner["id"]) if isinstance(inner, dict) and isinstance(inner.get("id"), str) else None


def turn_id_of(msg: dict[str, Any]) -> str | None:
    """The turn a notification belongs to (`turnId`, or `turn.id` for turn/started and turn/completed)."""
    return _named(msg, "turn")


def thread_of(msg: dict[str, Any]) -> str | None:
    """The thread a notification is about (`threadId`, or `thread.id`)."""
    return _named(msg, "thread")


class RecordingObserver(Observer):
    """The proxy's observer for one client connection in workspace `ws` (CODEX_HOME from `env`)."""

    def __init__(self, ws: Path, env: dict[str, str], settings: Any = None) -> None:
        self.ws, self.env, self.settings = ws, env, settings
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="codexr-recorder")
        self._recorder: Any = None
        self._lock: Any = None
        self._pending: dict[Any, tuple[str, str, Any, str | None]] = {}  # turn/start id -> thread, text, side, pre
        self._turns: dict[str, _Turn] = {}  # running turns by id
        self._active: dict[str, str] = {}  # thread id -> its running turn
        self._ephemeral_asks: set[Any] = set()  # thread/start requests of ephemeral threads (titles): not recorded
        self._ephemeral: set[str] = set()
        self._hidden: set[str] = set()  # forks the proxy made: their notifications are not the client's
        self._left: set[str] = set()  # threads the client unsubscribed from while a turn ran: kept until it ends
        self._resumes: dict[Any, str] = {}  # thread/resume request id -> its thread
        self._server_starts: set[Any] = set()  # requests whose turn the server starts (SERVER_STARTED)
        self._unbound: dict[str, tuple[str, Any, str | None]] = {}  # thread -> the snapshot its next turn takes
        self._queued: dict[str, int] = {}  # thread -> prompts queued behind its running turn
        # thread/revert id -> thread, turn, fork, files, the prompt's number as the client shows it
        self._reverts: dict[Any, tuple[str, str, str, Any, int | None]] = {}
        self._tasks: set[asyncio.Future[None]] = set()  # what runs after a frame was forwarded
        self._lines: dict[str, Callable[[], Any]] = {}  # reverted thread -> its line, sent after thread/reverted
        self._reverting = False  # a revert was started here (closed() settles one left unsettled)
        self._holding = False  # its restore is held, not yet settled (read and written on the recorder's thread)

    def _later(self, coro: Any) -> None:
        """Run `coro` once the frame being handled has been forwarded (kept referenced until it ends)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _on_recorder(self, fn: Callable[[], T]) -> T:
        """Run `fn` on the recorder's one thread (the store is used from there only, in order)."""
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn)

    def _open(self) -> Any:
        """The recorder, opened on first use (on the recorder's thread)."""
        if self._recorder is None:
            from config import load_settings

            from ..recording.recording import Recording

            home = Path(self.env["CODEX_HOME"])
            recording = Recording(self.ws, home, self.settings or load_settings(home))  # as the SDK session's
            self._recorder, self._lock = recording.recorder, recording.lock
            recording.start()
        return self._recorder

    async def _warn(self, message: str, thread_id: str | None = None, turn_id: str | None = None) -> None:
        """Tell the client something in one line. With a thread, an `error` notification that ends nothing
        (`willRetry` false, no turn running): the only notification the official TUI 0.163.0 writes into its
        transcript (tried in tmux: `warning`, `guardianWarning`, `configWarning` and `deprecationNotice` only
        count up in its "N warnings · F2" corner). Else a `warning`."""
        text = f"codexr: {message}"
        if thread_id is not None:
            note: dict[str, Any] = {"method": "error", "params": {
                "error": {"message": text, "codexErrorInfo": None, "additionalDetails": None},
                "threadId": thread_id, "turnId": turn_id or "", "willRetry": False}}
        else:
            note = {"method": "warning", "params": {"message": text}}
        with contextlib.suppress(Exception):
            await self.relay.to_client(note)

    async def from_client(self, msg: dict[str, Any]) -> Verdict:
        method = msg.get("method")
        params = msg.get("params")
        if not isinstance(params, dict) or "id" not in msg:
            return Verdict(msg)
        if (method == "thread/start" and params.get("ephemeral") is True) or \
                (method == "thread/fork" and params.get("attachToSource") is True):
            # an ephemeral thread (a title's), or an attached fork (Codex 0.171's hidden side conversation of a
            # thread): not the user's conversation, so neither recorded nor a rewind point
            self._ephemeral_asks.add(msg["id"])
        if method == "thread/resume" and isinstance(params.get("threadId"), str):
            self._resumes[msg["id"]] = str(params["threadId"])  # refused as held elsewhere: told what to do
        if method in CWD_METHODS and params.get("cwd") is None:
            return Verdict({**msg, "params": {**params, "cwd": str(self.ws)}})
        if method in CWD_METHODS | {"turn/start"} and params.get("cwd") is not None:
            outside = self._outside(params["cwd"])
            if outside is not None:  # the thread would work where codexr neither records nor can rewind
                return Verdict(None, [{"id": msg["id"], "error": {"code": -32600, "message": f"codexr: {outside}"}}])
        if method == "turn/start" and isinstance(params.get("threadId"), str):
            await self._before_turn(msg["id"], str(params["threadId"]), input_text(params))
        if method in SERVER_STARTED and isinstance(params.get("threadId"), str):
            # a turn no turn/start starts (the user's `!` shell command, a queued prompt): its snapshot is taken now
            # and bound to the next turn the server starts on the thread (`turn/started`)
            on = str(params["threadId"])
            if on in self._active:  # queued behind a running turn: captured when the server starts it
                self._queued[on] = self._queued.get(on, 0) + (method == "thread/queue/add")
            else:
                text = f"!{params.get('command')}" if method == "thread/shellCommand" else input_text(params)
                await self._before_turn(msg["id"], on, text or "(a queued prompt)")
                if msg["id"] in self._pending:
                    self._server_starts.add(msg["id"])
        if method == "thread/revert" and isinstance(params.get("threadId"), str) \
                and isinstance(params.get("beforeTurnId"), str):
            return await self._revert(msg, str(params["threadId"]), str(params["beforeTurnId"]))
        thread = params.get("threadId")
        if method == "thread/unsubscribe" and thread in self._active:
            # The official TUI unsubscribes as it quits, and its connection is the relay's: forwarded, the turn would
            # run on unseen and never be recorded. The client is answered here and sees no more of the thread; the
            # relay unsubscribes once the turn has ended.
            self._left.add(str(thread))
            return Verdict(None, [{"id": msg["id"], "result": {"status": "unsubscribed"}}])
        if method == "thread/resume" and thread in self._left:
            self._left.discard(str(thread))  # the client is back: the subscription it left was kept for it
        return Verdict(msg)

    def _outside(self, cwd: Any) -> str | None:
        """Why a thread may not work in `cwd` (None: the workspace or below it). Elsewhere its files would change
        unrecorded and a revert would not see them; Codex's home and the store are never a workspace."""
        from snapshot_store import StoreError
        from snapshot_store.roots import workspace_root

        if not isinstance(cwd, str) or not cwd or "\0" in cwd:
            return f"cwd {cwd!r} is not a directory path"
        real = Path(os.path.realpath(self.ws / cwd))  # a relative cwd is the workspace's, as Codex takes it
        if real != self.ws and self.ws not in real.parents:
            return (f"cwd {cwd} is outside the workspace {self.ws} this codexr records; start codexr there "
                    f"(`codexr -C {real} app-server`, or `codexr -C {real} codex`)")
        home = Path(self.env["CODEX_HOME"])
        try:
            if real.exists():  # a missing one is Codex's to refuse, as without codexr
                workspace_root(real, [home], store=home / "file_snapshots")
        except StoreError as exc:
            return str(exc)
        return None

    async def _revert(self, msg: dict[str, Any], thread_id: str, before: str) -> Verdict:
        """`thread/revert` becomes a rewind of files and conversation together, or nothing happens.

        On the recorder's thread, in the SDK rewind's order (app/rewind/revert.py): the safety snapshot and the plan;
        the decision (with another live codexr session here, a plan that would delete or overwrite a file not as
        this thread last captured it is refused: the client cannot be asked); the whole conversation kept (a fork of
        the thread, which `codexr redo` returns to); the redo entry and the journaled restore. Only then is the
        revert forwarded. Anything that stops the file side answers the request with an error and forwards nothing.
        """
        from ..rewind.held import revert_hold
        from ..rewind.records import copy_turns
        from ..rewind.revert import mark_forwarded, rewind_files, settle_files

        def refuse(why: str) -> Verdict:
            return Verdict(None, [{"id": msg["id"], "error": {"code": -32000, "message": f"codexr: {why}"}}])

        if thread_id in self._ephemeral:
            return Verdict(msg)
        try:
            side = await self._on_recorder(lambda: self._open().sidecars.load(thread_id))
        except Exception as exc:
            return refuse(f"the snapshot store cannot be read ({exc}); nothing was reverted")
        if side is None or not side.tracking:
            await self._warn("this thread has no file snapshots: only the conversation is reverted", thread_id, before)
            return Verdict(msg)
        home = Path(self.env["CODEX_HOME"])
        loop = asyncio.get_running_loop()
        kept: dict[str, str] = {}

        def keep() -> str:  # on the recorder's thread, once the plan is decided and before any file changes
            try:
                fork = asyncio.run_coroutine_threadsafe(self._keep(thread_id), loop).result(timeout=120)
            except TimeoutError as exc:
                raise RuntimeError("the conversation could not be kept before the revert (no answer)") from exc
            kept["fork"] = fork
            copy_turns(self._recorder.sidecars, thread_id, fork)
            return fork

        backend = getattr(getattr(self.relay.server, "proc", None), "pid", None)  # the app-server the revert goes to
        hold = revert_hold(thread_id, before, backend if isinstance(backend, int) else None)

        def files() -> Any:
            done = rewind_files(self._recorder, thread_id, before, home, keep=keep, hold=hold,
                                others=self._lock.others())
            self._holding = True
            try:
                mark_forwarded(self._recorder, done)  # from here a kill is settled by asking Codex (app/rewind/held.py)
            except Exception:
                self._holding = False
                settle_files(self._recorder, thread_id, done, home, reverted=False)  # it will not be sent
                raise
            return done

        self._reverting = True
        try:
            done = await self._on_recorder(files)
        except Exception as exc:
            if "fork" in kept:
                with contextlib.suppress(Exception):
                    await self.relay.request("thread/archive", {"threadId": kept["fork"]}, timeout=10)
            return refuse(f"{exc}; nothing was reverted")
        number = await self._prompt_number(thread_id, before)
        self._reverts[msg["id"]] = (thread_id, before, kept["fork"], done, number)
        return Verdict(msg)

    async def _prompt_number(self, thread_id: str, before: str) -> int | None:
        """Which prompt `before` is as the client shows the thread: its place among the thread's turns that hold a
        user message (those that ran outside codexr too, which have no snapshot), asked of Codex; None: unknown."""
        count, cursor = 0, None
        try:
            for _page in range(1000):
                page = await self.relay.request("thread/turns/list", {
                    "threadId": thread_id, "cursor": cursor, "limit": 100, "sortDirection": "asc",
                    "itemsView": "summary"}, timeout=10)
                for turn in page.get("data") or []:
                    if not isinstance(turn, dict):
                        continue
                    items = turn.get("items") or []
                    if items and not any(isinstance(i, dict) and i.get("type") == "userMessage" for i in items):
                        continue  # a turn no prompt started (a review's, a shell command's): not numbered
                    count += 1
                    if turn.get("id") == before:
                        return count
                cursor = page.get("nextCursor")
                if not cursor:
                    return None
        except (RuntimeError, ConnectionError, TimeoutError):
            return None
        return None

    async def _keep(self, thread_id: str) -> str:
        """The whole conversation kept before a revert: a fork of the thread, its notifications kept from the
        client (it is not the client's thread); RuntimeError when the app-server does not make one."""

        def hide(answer: dict[str, Any]) -> None:  # before the fork's first notification passes
            fork = ((answer.get("result") or {}).get("thread") or {}).get("id")
            if isinstance(fork, str):
                self._hidden.add(fork)

        try:
            # excludeTurns: a full-history fork answers with a deprecation notice, which would reach the client
            forked = await self.relay.request("thread/fork", {"threadId": thread_id, "cwd": str(self.ws),
                                                              "excludeTurns": True}, on_answer=hide)
        except (RuntimeError, ConnectionError, TimeoutError) as exc:
            raise RuntimeError(f"the conversation could not be kept before the revert ({exc})") from exc
        fork = str((forked.get("thread") or {}).get("id") or "")
        if not fork:
            raise RuntimeError("the conversation could not be kept before the revert")
        with contextlib.suppress(Exception):
            await self.relay.request("thread/unsubscribe", {"threadId": fork}, timeout=10)
        return fork

    async def _reverted(self, answer: dict[str, Any], thread_id: str, before: str, fork: str, done: Any) -> None:
        """The server answered a revert: on success the thread's records end before the prompt and the held restore
        stands (the client is told by `_line_after_revert`); on failure the files go back (never files without
        conversation)."""
        from ..rewind.revert import settle_files

        home = Path(self.env["CODEX_HOME"])

        def settle(reverted: bool) -> None:
            self._holding = False
            settle_files(self._recorder, thread_id, done, home, reverted=reverted)

        if "error" in answer:
            try:
                await self._on_recorder(lambda: settle(False))
            except Exception as exc:
                await self._warn(f"the conversation was not reverted, and the files were put back except: {exc}",
                                 thread_id, before)
            return
        try:
            await self._on_recorder(lambda: settle(True))
        except Exception as exc:  # the journal stays: the next codexr command settles it (Codex asked)
            self.relay.log(f"the revert's held restore is left for the next codexr command: {exc}")

    def _line_after_revert(self, thread_id: str, before: str, fork: str, done: Any, number: int | None) -> None:
        """Tell the client what happened to the files once Codex's `thread/reverted` has passed: the official TUI
        redraws the reverted thread on it, and a line that came before was drawn over (seen 3 runs in 4 when sent
        right after the answer). Without that notification within a second, the line goes anyway."""
        sent = False

        async def line() -> None:
            nonlocal sent
            if not sent:
                sent = True
                await self._warn(revert_line(thread_id, fork, done, number), thread_id, before)

        def late() -> None:
            if self._lines.get(thread_id) is line:
                del self._lines[thread_id]
            self._later(line())

        self._lines[thread_id] = line
        asyncio.get_running_loop().call_later(1.0, late)

    async def _before_turn(self, request_id: Any, thread_id: str, text: str) -> None:
        if thread_id in self._active or thread_id in self._ephemeral:
            return  # a turn/start while a turn runs steers it: same turn, no new capture
        try:
            def begin() -> tuple[Any, str | None]:
                recorder = self._open()
                side = recorder.sidecar(thread_id)
                pre, _seconds = recorder.begin(side, text)
                return side, pre

            side, pre = await self._on_recorder(begin)
        except Exception as exc:  # a damaged store, a full disk: the turn runs untracked, and says so
            await self._warn(f"no file snapshot before this prompt ({exc}); it runs untracked", thread_id)
            return
        self._pending[request_id] = (thread_id, text, side, pre)

    async def from_server(self, msg: dict[str, Any]) -> Verdict:
        if "method" not in msg:
            rid = msg.get("id")
            if rid in self._ephemeral_asks:
                self._ephemeral_asks.discard(rid)
                thread = (msg.get("result") or {}).get("thread") if isinstance(msg.get("result"), dict) else None
                if isinstance(thread, dict) and isinstance(thread.get("id"), str):
                    self._ephemeral.add(str(thread["id"]))
            started = self._pending.pop(rid, None) if rid is not None else None
            if started is not None and rid in self._server_starts:
                self._server_starts.discard(rid)
                if "error" not in msg:  # the turn comes with its turn/started
                    self._unbound[started[0]] = started[1:]
            elif started is not None:
                self._started(msg, *started)
            reverted = self._reverts.pop(rid, None) if rid is not None else None
            if reverted is not None:
                if "error" not in msg:
                    self._line_after_revert(*reverted)
                self._later(self._reverted(msg, *reverted[:4]))  # after this answer reaches the client
            resumed = self._resumes.pop(rid, None) if rid is not None else None
            if resumed is not None and "error" in msg:
                return Verdict(self._held_answer(msg, resumed))
            return Verdict(msg)
        if msg.get("method") == "thread/reverted" and thread_of(msg) in self._lines:
            self._later(self._lines.pop(str(thread_of(msg)))())  # once the client has redrawn the thread
        if thread_of(msg) in self._hidden:
            return Verdict(None)  # a fork the proxy made to keep a reverted conversation: not the client's
        turn_id = turn_id_of(msg)
        if msg.get("method") == "turn/started" and turn_id is not None and turn_id not in self._turns:
            await self._server_started(str(thread_of(msg) or ""), turn_id)
        turn = self._turns.get(turn_id) if turn_id else None
        if turn is not None and turn_id is not None:
            params = msg.get("params") or {}
            with contextlib.suppress(Exception):
                self._recorder.observe(turn.state, str(msg["method"]), params)
            if msg["method"] == "turn/completed":
                status = str((params.get("turn") or {}).get("status") or "completed")
                finished = self._complete(turn_id, status)
                # The client shows the turn done on this frame, and a file saved from then on is the user's: it
                # waits for the post-turn capture (bounded: a store another codexr holds must not hang the TUI).
                with contextlib.suppress(Exception):  # a failed capture is said by `_complete`'s warning
                    await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(finished)), FINISH_WAIT_S)
                if turn.thread_id in self._left:  # the client unsubscribed while it ran: now the relay does
                    self._left.discard(turn.thread_id)
                    self._later(self._unsubscribe(turn.thread_id))
                    return Verdict(None)
        if thread_of(msg) in self._left:  # the client left this thread: nothing of it goes to the client
            return Verdict(None, [unanswerable(msg)] if "id" in msg else [])
        return Verdict(msg)

    async def _server_started(self, thread_id: str, turn_id: str) -> None:
        """A turn no turn/start of the client's started: bound to the snapshot taken before the request that led to
        it (a shell command, a queue start), or, for a prompt queued behind a turn that has just ended, to none."""
        if thread_id in self._ephemeral or thread_id in self._hidden or not thread_id:
            return
        pending = [rid for rid, (on, *_rest) in self._pending.items() if on == thread_id]
        if any(rid not in self._server_starts for rid in pending):
            return  # a turn/start's answer is on its way: it binds this turn
        if pending:
            # Codex started the turn of a shell command or a queued prompt before answering its request (seen in a
            # full run: the turn went unrecorded, its answer then waiting for a turn/started that had passed)
            rid = pending[0]
            self._server_starts.discard(rid)
            unbound: tuple[str, Any, str | None] | None = self._pending.pop(rid)[1:]
        else:
            unbound = self._unbound.pop(thread_id, None)
        if unbound is None and self._queued.get(thread_id):
            # The server starts it the moment the turn before ends, and goes on while codexr would capture: a
            # snapshot now could already hold its first change (seen with a quick model), so it gets none. It is
            # recorded with its post-turn snapshot alone: no rewind point of its own (as a prompt sent without
            # codexr), and what it made is witnessed, so a rewind to an earlier prompt takes it back.
            self._queued[thread_id] -= 1
            try:
                side = await self._on_recorder(lambda: self._open().sidecar(thread_id))
            except Exception:
                return
            unbound = ("(a queued prompt)", side, None)
        if unbound is not None:
            self._started({"result": {"turn": {"id": turn_id}}}, thread_id, *unbound)

    def _held_answer(self, answer: dict[str, Any], thread_id: str) -> dict[str, Any]:
        """A resume Codex refused because another app-server holds the thread (the official TUI's daemon, most
        often), its message saying which and what to do (this app-server cannot take the thread over)."""
        from ..codex.daemon import STOP, held_elsewhere, holder

        error = answer.get("error")
        if not isinstance(error, dict) or not held_elsewhere(str(error.get("message") or "")):
            return answer
        who = holder(Path(self.env["CODEX_HOME"]), thread_id)
        if who is not None and who.daemon:
            what = (f"codexr: thread {thread_id} is open in Codex's app-server daemon (pid {who.pid}); quit and run "
                    f"`codexr codex resume {thread_id}`, which works through it (or `{STOP}`)")
        else:
            what = (f"codexr: thread {thread_id} is open in another Codex app-server"
                    f"{f' ({who})' if who is not None else ''}; quit what has it open, then resume it")
        return {**answer, "error": {**error, "message": what}}

    async def _unsubscribe(self, thread_id: str) -> None:
        with contextlib.suppress(RuntimeError, ConnectionError, TimeoutError):
            await self.relay.request("thread/unsubscribe", {"threadId": thread_id}, timeout=10)

    def _started(self, answer: dict[str, Any], thread_id: str, text: str, side: Any, pre: str | None) -> None:
        """The server started the turn: bind its snapshot to the turn id (in order, on the recorder's thread)."""
        turn = (answer.get("result") or {}).get("turn") if isinstance(answer.get("result"), dict) else None
        if not isinstance(turn, dict) or not isinstance(turn.get("id"), str):
            return  # refused: the pre-turn snapshot stays unbound, as an unsent prompt's
        from ..recording.recorder import TurnState

        turn_id = str(turn["id"])
        self._turns[turn_id] = _Turn(thread_id, text, pre, TurnState())
        self._active[thread_id] = turn_id
        recorder = self._recorder
        self._pool.submit(recorder.bind, thread_id, side, turn_id, text, pre)

    def _complete(self, turn_id: str, status: str) -> concurrent.futures.Future[Any]:
        """Finish the turn on the recorder's thread (pre-edit states, sidecar, the post-turn capture): its future."""
        turn = self._turns.pop(turn_id)
        if self._active.get(turn.thread_id) == turn_id:
            del self._active[turn.thread_id]
        recorder = self._recorder
        done = self._pool.submit(recorder.finish, turn.thread_id, turn_id, turn.text, turn.state, status, turn.pre)
        loop = asyncio.get_running_loop()

        def said(fut: concurrent.futures.Future[Any]) -> None:
            error = fut.exception()
            message = str(error) if error is not None else fut.result().capture_error
            if message:
                loop.call_soon_threadsafe(lambda: self._later(self._warn(message, turn.thread_id, turn_id)))

        done.add_done_callback(said)
        return done

    def running(self) -> list[tuple[str, str]]:
        return [(turn.thread_id, turn_id) for turn_id, turn in self._turns.items()]

    async def closed(self) -> None:
        """The client or the server left: turns still running are finished as interrupted, answers already come
        are handled, a revert whose answer never came (or that was still restoring) is settled as the next command
        would (app/rewind/held.py: Codex is asked once the app-server has exited), then all is let go."""
        for turn_id in list(self._turns):
            self._complete(turn_id, "interrupted")
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=30)
        if self._reverting:
            with contextlib.suppress(Exception):
                await self.relay.server.close()  # it exits as it is closed: then its record is final
            try:
                await self._on_recorder(self._settle_unanswered)  # after a restore still running on that thread
            except Exception as exc:
                self.relay.log(f"a revert is left for the next codexr command to settle: {exc}")
            self._reverts.clear()

        def close() -> None:
            if self._recorder is not None:
                with contextlib.suppress(Exception):
                    self._recorder.store.close()
            if self._lock is not None:
                with contextlib.suppress(Exception):
                    self._lock.release()

        with contextlib.suppress(Exception):
            await self._on_recorder(close)
        self._pool.shutdown(wait=True)

    def _settle_unanswered(self) -> None:
        """This connection's held revert, if one is still held, is settled by the store's judge (Codex asked)."""
        if not self._holding:
            return
        self._holding = False
        workspace = self._recorder.store.at(self.ws)
        report = workspace.recover(own_held=True)
        if report is not None:
            self.relay.log(report.summary())
