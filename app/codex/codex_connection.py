"""One Codex app-server process driven through the SDK: its start, calls, server requests (approvals) and notices,
and what it answers about the workspace (models, config, file search).

Why apart: turn recording, rewind and the thread listing all talk to Codex through this one connection, and none of
them needs to know how it is started, how its errors are worded or which thread drains its notifications.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from ..errors import CodexGone, SessionError
from ..shared.vocab import CLIENT_NAME
from .approval import APPROVAL_METHODS, ApprovalRequest, decision_result
from .codex_sdk import CodexClient, CodexConfig, CodexError, JsonRpcError, TransportClosedError
from .rpc_lines import RpcRefused, read_pages, read_turns
from .rpc_lines import sigint_blocked as sigint_blocked
from .turn_settings import ModelInfo, model_info

ApprovalCallback = Callable[[ApprovalRequest], str]
EventCallback = Callable[[str, dict[str, Any]], None]
#: A running turn's open item by id (None: no running turn has it): what a fileChange approval shows.
OpenItemLookup = Callable[[str], "dict[str, Any] | None"]


class AnyResponse(BaseModel):
    """A response kept as it came: the SDK has no model for Codex's experimental methods."""

    model_config = ConfigDict(extra="allow")


def dump_payload(payload: Any) -> dict[str, Any]:
    """A notification payload or Codex model as a camelCase dict."""
    if hasattr(payload, "model_dump"):
        out = payload.model_dump(by_alias=True, mode="json", exclude_none=False)
        return out if isinstance(out, dict) else {}
    params = getattr(payload, "params", None)
    return params if isinstance(params, dict) else {}


STOP_WAIT_S = 2.0  # as the SDK's close waits before it kills


def ended(proc: subprocess.Popen[Any], within: float) -> None:
    """The SDK's way to stop an app-server (stdin closed, SIGTERM), waited for by its pidfd: the SDK's
    `wait(timeout=2)` polls with sleeps doubling to 50 ms, so every command that started Codex waited for it to
    exit ~5-15 ms longer than it took (traced at the end of `codexr exec`). Where there is no pidfd (not Linux),
    the SDK's wait does it."""
    if proc.poll() is not None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    proc.terminate()
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is None:
        return
    fd = pidfd_open(proc.pid)  # a child not reaped yet: its pid cannot name another process
    try:
        select.select([fd], [], [], within)  # readable once it has exited
    finally:
        os.close(fd)


class CodexConnection:
    """The app-server process of one session: started at construction, its notices drained until `close`."""

    def __init__(self, cwd: Path, codex_home: Path, *, codex_bin: str | None, env: dict[str, str] | None,
                 config_overrides: tuple[str, ...], approval: ApprovalCallback | None,
                 on_notice: EventCallback | None, approval_timeout: float, open_item: OpenItemLookup) -> None:
        self.cwd = cwd
        self._approval = approval
        self._on_notice = on_notice
        self.approval_timeout = approval_timeout
        self._open_item = open_item
        self._closed = False
        self._catalog: list[ModelInfo] | None = None
        env = dict(env or {})
        env.setdefault("CODEX_HOME", str(codex_home))
        self._config = CodexConfig(codex_bin=codex_bin, cwd=str(cwd), env=env, config_overrides=config_overrides,
                                   client_name=CLIENT_NAME, client_title="codex-rewind")
        self._own = self._config
        #: What this connection works through in place of a Codex of its own (another app-server); None: its own.
        self.attached: str | None = None
        self.client = self._start()

    def restart(self) -> None:
        """Start a new app-server in place of one that died, as the first was started (SessionError when it cannot).

        The services hold this connection, not its client, so they go on with the new one: what the session keeps
        (store, recorder, choices, threads) stays, and only Codex's own state (loaded threads, the model catalog)
        is gone; the caller resumes the thread it works on.
        """
        if self._closed:
            raise SessionError("Codex was closed")
        self._config, self.attached = self._own, None  # a daemon that went away no longer holds anything
        self._replace()

    def attach(self, what: str, *, link: Path | None = None, door: Path | None = None) -> None:
        """Work through another app-server from now on, in place of this connection's own: it holds a thread this
        one may not open (app/codex/daemon.py). `link`: its unix socket (Codex's managed daemon); `door`: the door
        of a `codexr codex` app-server. SessionError with the reason when codexr may not (a socket, a door or the
        app-server's rights fail a check, or it does not answer), this connection then back on a Codex of its own.
        """
        from .daemon import Unavailable, ask_door, reachable

        bridge: tuple[str, ...]
        try:  # checked here to say why in one line; the bridge checks its own connection again
            if door is not None:
                ask_door(door)
                bridge = (sys.executable, "-m", "app.codex.attach", "--door", str(door))
            else:
                assert link is not None
                path = reachable(link, what)
                bridge = (sys.executable, "-m", "app.codex.attach", path)
        except Unavailable as exc:
            raise SessionError(str(exc)) from None
        self._config = dataclasses.replace(self._own, launch_args_override=bridge)
        self.attached = what
        try:
            self._replace()
        except SessionError:
            self._config, self.attached = self._own, None
            self._replace()
            raise

    def _replace(self) -> None:
        """A new client in place of the current one, started from `_config`."""
        with contextlib.suppress(Exception):
            self.client.close()
        self._catalog = None  # asked again of the new process
        self.client = self._start()
        if self._closed:  # closed while it started: it goes too
            with contextlib.suppress(Exception):
                self.client.close()

    def _start(self) -> CodexClient:
        """Spawn and initialize an app-server, and drain its notices on a thread of its own."""
        cfg = self._config
        client = CodexClient(cfg, approval_handler=self._handle_server_request)
        try:
            with sigint_blocked():  # the app-server is spawned here and inherits the mask
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
        threading.Thread(target=self._drain_global, args=(client,), daemon=True, name="codexr-notices").start()
        return client

    def close(self) -> None:
        """Stop Codex (its notices stop with it)."""
        if self._closed:
            return
        self._closed = True
        proc = getattr(self.client, "_proc", None)
        if isinstance(proc, subprocess.Popen):
            with contextlib.suppress(OSError, ValueError):
                ended(proc, STOP_WAIT_S)
        with contextlib.suppress(Exception):
            self.client.close()  # the SDK's own steps, on a process that has ended (or that it then kills)

    def alive(self) -> bool:
        """Is the app-server process still running?"""
        proc = getattr(self.client, "_proc", None)
        return proc is not None and proc.poll() is None

    def exited(self, within: float) -> bool:
        """Has the app-server process ended, waiting up to `within` seconds for it (its pipe closes a moment before
        the process can be reaped, and that moment grows under load)?"""
        proc = getattr(self.client, "_proc", None)
        if proc is None:
            return True
        try:
            proc.wait(timeout=within)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _drain_global(self, client: CodexClient) -> None:
        """Thread-level notifications go to an unbounded SDK queue: keep `client`'s drained (until it closes)."""
        while not self._closed:
            try:
                n = client.next_notification()
            except Exception:
                return
            if self._on_notice is not None:
                with contextlib.suppress(Exception):
                    self._on_notice(n.method, dump_payload(n.payload))

    def rpc(self, what: str, fn: Callable[[], Any]) -> Any:
        """Call Codex; its errors become one-line SessionErrors."""
        try:
            return fn()
        except JsonRpcError as exc:
            raise SessionError(f"{what}: {getattr(exc, 'message', None) or exc}") from exc
        except (TransportClosedError, CodexError) as exc:
            raise CodexGone(f"{what}: Codex stopped responding ({exc})") from exc

    def experimental(self, what: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One call of an experimental Codex method (no SDK model for it), its result as a dict."""
        resp = self.rpc(what, lambda: self.client.request(method, params, response_model=AnyResponse))
        out = resp.model_dump()
        return out if isinstance(out, dict) else {}

    def raw(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One call read raw (the SDK's models drop fields they do not know): the result as a dict, RpcRefused for
        Codex's error answer, CodexGone when it stopped responding (rpc_lines.RawCall, shared with its reader)."""
        try:
            out = self.client.request(method, params, response_model=AnyResponse).model_dump()
        except JsonRpcError as exc:
            code = getattr(exc, "code", None)
            raise RpcRefused(method, code if isinstance(code, int) else None,
                             str(getattr(exc, "message", None) or exc)) from exc
        except (TransportClosedError, CodexError) as exc:
            raise CodexGone(f"Codex stopped responding ({exc})") from exc
        return out if isinstance(out, dict) else {}

    def thread_turns(self, thread_id: str) -> list[dict[str, Any]]:
        """Every turn of a thread with all its items, oldest first (rpc_lines.read_turns): RpcRefused for a thread
        with no rollout yet."""
        return read_turns(self.raw, thread_id)

    def pages(self, method: str, params: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        """The `data` of each page of a paginated read, read raw, to the end (rpc_lines.read_pages)."""
        return read_pages(self.raw, method, params)

    def notice(self, method: str, params: dict[str, Any]) -> None:
        """Tell the front end something that is no event of a turn (a gc, a timed-out approval...)."""
        if self._on_notice is not None:
            with contextlib.suppress(Exception):
                self._on_notice(method, params)

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
                    item = self._open_item(item_id)
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
                decision = future.result(timeout=self.approval_timeout)
            except concurrent.futures.TimeoutError:
                self.notice("approvalTimedOut", {"itemId": item_id, "seconds": self.approval_timeout})
                decision = "decline"
            return decision_result(method, decision)
        except BaseException:
            return {"decision": "decline"}

    # ------------------------------------------------------------------ what Codex answers about this workspace
    def model_catalog(self) -> list[ModelInfo]:
        """The models Codex offers with their reasoning efforts (asked once per Codex process)."""
        if self._catalog is None:
            resp = self.rpc("cannot list the models", lambda: self.client.model_list())
            self._catalog = [model_info(dump_payload(m)) for m in resp.data if not m.hidden]
        return self._catalog

    def configured(self) -> dict[str, Any]:
        """Codex's effective config.toml values for this workspace (`config/read`), {} when it cannot say."""
        try:
            out = self.experimental("cannot read Codex's config", "config/read", {"cwd": str(self.cwd)})
        except SessionError:
            return {}
        config = out.get("config")
        return config if isinstance(config, dict) else {}

    def find_files(self, query: str, limit: int = 40) -> list[str]:
        """Workspace files matching `query` fuzzily, best first, relative to the workspace (`fuzzyFileSearch`)."""
        resp = self.experimental("cannot search the workspace's files", "fuzzyFileSearch",
                                 {"query": query, "roots": [str(self.cwd)]})
        out: list[str] = []
        for f in resp.get("files") or []:
            if isinstance(f, dict) and f.get("path"):
                path = str(f["path"])
                out.append(path + "/" if f.get("match_type") == "directory" and not path.endswith("/") else path)
        return out[:limit]
