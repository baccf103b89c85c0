"""A read-only app-server client over stdio without the SDK: what `codexr threads` needs of Codex, and the paging and
error words every reader of Codex's records shares.

Why its own client: `codexr threads` only lists (`thread/list`, `thread/turns/list`, `thread/read`), yet importing the
official SDK builds its ~1,000 generated protocol models first: ~0.5 s of a one-shot `codexr threads` that took
~1.0 s on a warm 2-core machine (`-X importtime`: `openai_codex` 534 ms; bench/bench_noxdg.py has the whole command).
Everything that starts, resumes, forks or runs a thread still goes through the SDK (codex_connection.py). The frames
are the protocol's own (JSON-RPC 2.0 lines without the "jsonrpc" member, as the SDK writes them), the binary and its
flags are chosen as for the SDK, and the `initialize` handshake says the same client name.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import CodexGone, SessionError
from ..shared.vocab import CLIENT_NAME

#: One raw call: (method, params) -> its result. Raises RpcRefused for an error answer, CodexGone when Codex went.
RawCall = Callable[[str, dict[str, Any]], dict[str, Any]]


class RpcRefused(SessionError):
    """Codex answered a call with a JSON-RPC error (an unknown thread, a thread with no rollout yet, a bad param)."""

    def __init__(self, method: str, code: int | None, message: str) -> None:
        super().__init__(message)
        self.method, self.code, self.message = method, code, message


@contextlib.contextmanager
def sigint_blocked() -> Iterator[None]:
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


def read_pages(call: RawCall, method: str, params: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
    """The `data` of each page of a paginated read, read raw (the SDK's models drop fields they do not know),
    following `nextCursor` to the end."""
    cursor: str | None = None
    while True:
        page = call(method, {**params, **({"cursor": cursor} if cursor else {})})
        data = [item for item in page.get("data") or [] if isinstance(item, dict)]
        yield data
        nxt = page.get("nextCursor")
        if not nxt or nxt == cursor or not data:
            return
        cursor = str(nxt)


def read_turns(call: RawCall, thread_id: str) -> list[dict[str, Any]]:
    """Every turn of a thread with all its items, oldest first, page by page (`thread/turns/list`): a full-history
    `thread/read` is deprecated for paginated threads (0.163.0 and 0.171.0 answer it with a deprecation notice).
    RpcRefused for a thread with no rollout yet."""
    params = {"threadId": thread_id, "limit": 100, "sortDirection": "asc", "itemsView": "full"}
    return [turn for page in read_pages(call, "thread/turns/list", params) for turn in page]


def app_server_argv(codex_bin: Path, config_overrides: tuple[str, ...]) -> list[str]:
    """The app-server's command line, as the SDK builds it (openai_codex.client.CodexClient.start)."""
    argv = [str(codex_bin)]
    for kv in config_overrides:
        argv += ["--config", kv]
    return [*argv, "app-server", "--listen", "stdio://"]


def _sdk_version() -> str:
    """The installed SDK's version, which the SDK's own `initialize` names (read from its metadata, not imported):
    the name of its `.dist-info` directory on sys.path, as installers write it, else `importlib.metadata` (whose
    import, with the email parser it loads, was ~20 ms of every one-shot `codexr threads`)."""
    for entry in sys.path:
        try:
            found = [n for n in os.listdir(entry or ".") if n.startswith(_SDK_INFO) and n.endswith(".dist-info")]
        except OSError:
            continue
        if len(found) == 1:
            return found[0][len(_SDK_INFO):-len(".dist-info")]
        if found:
            break  # more than one: let the metadata reader choose, as importing the SDK would
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("openai-codex")
    except PackageNotFoundError:
        return "0"


_SDK_INFO = "openai_codex-"  # the distribution's normalized name, then its version


class ReadOnlyAppServer:
    """An app-server process spoken to one call at a time: started and initialized at construction, `close`d after.

    Server requests (approvals) are refused: a listing starts no turn. Notifications are skipped.
    """

    def __init__(self, codex_bin: Path, *, cwd: Path, env: Mapping[str, str],
                 config_overrides: tuple[str, ...] = (), path_dirs: tuple[Path, ...] = ()) -> None:
        full = dict(os.environ)
        full.update(env)
        if path_dirs:  # the pinned binary's helpers first on PATH, as the SDK does for it
            full["PATH"] = os.pathsep.join([*map(str, path_dirs), full.get("PATH", "")])
        self._stderr: deque[str] = deque(maxlen=60)
        self._next_id = 0
        try:
            with sigint_blocked():  # Ctrl+C is codexr's (codex_connection.sigint_blocked)
                self._proc = subprocess.Popen(app_server_argv(codex_bin, config_overrides), cwd=cwd, env=full,
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                              stderr=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        except OSError as exc:
            raise SessionError(f"cannot start Codex: {exc.strerror or exc}: {codex_bin}") from None
        self._stderr_thread = threading.Thread(target=self._drain_stderr, daemon=True, name="codexr-codex-stderr")
        self._stderr_thread.start()
        try:
            self.call("initialize", {"clientInfo": {"name": CLIENT_NAME, "title": "codex-rewind",
                                                    "version": _sdk_version()},
                                     "capabilities": {"experimentalApi": True}})
            self._send({"method": "initialized"})
        except SessionError as exc:
            self.close()  # its stderr is read to the end first: Codex's last line says why
            errors = [line.strip() for line in self._stderr if line.strip().startswith("Error:")]
            rc = self._proc.returncode
            why = (errors[-1].removeprefix("Error:").strip() if errors
                   else f"{codex_bin} exited with status {rc} before answering" if rc else str(exc))
            raise SessionError(f"cannot start Codex: {why}") from None

    def _drain_stderr(self) -> None:
        """Keep Codex's stderr read (a full pipe would stall it) and its last lines for an error message."""
        assert self._proc.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for line in self._proc.stderr:
                self._stderr.append(line.rstrip("\n"))

    def _send(self, message: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        try:
            self._proc.stdin.write(json.dumps(message) + "\n")
            self._proc.stdin.flush()
        except (OSError, ValueError) as exc:
            raise CodexGone(f"Codex stopped responding ({exc})") from None

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One request and its answer's result (RpcRefused for an error answer, CodexGone when Codex went)."""
        self._next_id += 1
        rid = self._next_id
        self._send({"id": rid, "method": method, "params": params})
        assert self._proc.stdout is not None
        while True:
            try:
                line = self._proc.stdout.readline()
            except (OSError, ValueError) as exc:
                raise CodexGone(f"Codex stopped responding ({exc})") from None
            if not line:
                self._proc.poll()
                tail = "; ".join(list(self._stderr)[-3:])
                raise CodexGone("Codex stopped responding (its output closed" + (f": {tail})" if tail else ")"))
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                raise CodexGone(f"Codex sent a line that is not JSON: {line[:120]!r}") from None
            if not isinstance(msg, dict):
                continue
            if "method" in msg:  # a notification, or a server request this reader cannot grant
                if "id" in msg:
                    self._send({"id": msg["id"], "error": {"code": -32601,
                                                           "message": "codexr threads only reads"}})
                continue
            if msg.get("id") != rid:
                continue  # an answer to no call of ours
            if "error" in msg:
                err = msg["error"] if isinstance(msg["error"], dict) else {"message": str(msg["error"])}
                code = err.get("code")
                raise RpcRefused(method, code if isinstance(code, int) else None, str(err.get("message") or err))
            result = msg.get("result")
            return result if isinstance(result, dict) else {}

    def close(self) -> None:
        """End the app-server: its input closed first (it exits by itself), then terminated if it lingers."""
        with contextlib.suppress(OSError, ValueError):
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._stderr_thread.join(timeout=0.5)
        for pipe in (self._proc.stdout, self._proc.stderr):
            with contextlib.suppress(OSError, ValueError):
                if pipe is not None:
                    pipe.close()

    def __enter__(self) -> ReadOnlyAppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
