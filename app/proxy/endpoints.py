"""The relay's two kinds of side: newline-delimited JSON over pipes (`codex app-server --listen stdio://`, or the
client of `codexr app-server` on stdio) and WebSocket text frames (the official TUI's `--remote`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import stat
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol, SupportsIndex

#: The longest line read from a pipe: a message carrying a whole file's diff is large, never unbounded.
LINE_LIMIT = 1 << 30


class StoppableReader(asyncio.StreamReader):
    """A stream reader that can be stopped while its pipe still delivers: `feed_eof` makes a pending read end,
    and what arrives after it is dropped (asyncio's own reader fails with "feed_data after feed_eof")."""

    _stopped = False

    def feed_eof(self) -> None:
        self._stopped = True
        super().feed_eof()

    def feed_data(self, data: Iterable[SupportsIndex]) -> None:
        if not self._stopped:
            super().feed_data(data)


class Writer(Protocol):
    """What Lines writes with: an asyncio StreamWriter, or a FileWriter."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def is_closing(self) -> bool: ...

    def close(self) -> None: ...


class FileWriter:
    """stdout redirected to a file (`codexr app-server > answers.jsonl`): asyncio cannot watch a file, and a file
    takes what it is given, so each message is written at once."""

    def __init__(self, fd: int) -> None:
        self.fd, self.closed = fd, False

    def write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]

    async def drain(self) -> None:
        return None

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


class Lines:
    """One JSON message per line over a reader and a writer."""

    def __init__(self, reader: asyncio.StreamReader, writer: Writer | None) -> None:
        self.reader, self.writer = reader, writer

    async def receive(self) -> str | None:
        """The next line that is not blank (a blank line is no message: skipped, however many come)."""
        while True:
            try:
                line = await self.reader.readline()
            except (ValueError, ConnectionError):  # a line beyond LINE_LIMIT, or a reset pipe
                return None
            if not line:
                return None
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text.strip():
                return text

    async def send(self, text: str) -> None:
        """One message, one line: a newline inside it (JSON whitespace, or a frame that is no JSON) is a space."""
        if self.writer is None or self.writer.is_closing():
            raise ConnectionError("closed")
        self.writer.write(text.replace("\n", " ").encode() + b"\n")
        await self.writer.drain()

    async def close(self) -> None:
        """Stop reading (a pending `receive` on a StoppableReader returns None) and close the writing end."""
        if isinstance(self.reader, StoppableReader):
            self.reader.feed_eof()
        if self.writer is not None and not self.writer.is_closing():
            with contextlib.suppress(OSError, RuntimeError):
                self.writer.close()


class AppServer(Lines):
    """The real `codex app-server` over stdio, in a process group of its own (its shells die with it)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None and proc.stdin is not None
        super().__init__(proc.stdout, proc.stdin)
        self.proc = proc
        self.killed = False  # codexr had to SIGKILL it: it did not exit when its stdin closed

    @classmethod
    async def start(cls, argv: Sequence[str], *, cwd: Path, env: dict[str, str], stderr: Any = None) -> AppServer:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=stderr, limit=LINE_LIMIT, start_new_session=True)
        return cls(proc)

    async def close(self) -> None:
        """Close its stdin (it exits in ~30 ms), then end whatever of its group is left."""
        await super().close()
        self.killed = await _reap(self.proc)

    def failure(self) -> tuple[str, int] | None:
        """How it ended, in words, and the exit status that says so, when it failed of itself (a nonzero status, a
        signal codexr did not send); None while it runs, when it ended well, or when codexr ended it."""
        rc = self.proc.returncode
        if rc is None or rc == 0 or self.killed:
            return None
        if rc > 0:
            return f"the Codex app-server exited with status {rc}", rc
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return f"the Codex app-server was killed by {name}", 128 - rc


class WebSocketSide:
    """A WebSocket connection (websockets' asyncio API): one JSON-RPC message per text frame."""

    def __init__(self, ws: Any) -> None:
        self.ws = ws

    async def receive(self) -> str | None:
        from websockets.exceptions import ConnectionClosed

        try:
            data = await self.ws.recv()
        except ConnectionClosed:
            return None
        return data if isinstance(data, str) else data.decode("utf-8", "replace")

    async def send(self, text: str) -> None:
        from websockets.exceptions import ConnectionClosed

        try:
            await self.ws.send(text)
        except ConnectionClosed as exc:
            raise ConnectionError("closed") from exc

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()


class ListeningAppServer(WebSocketSide):
    """The real `codex app-server --listen ws://127.0.0.1:0`, in a process group of its own, reached over WebSocket
    with a capability token: other codexr commands may be its clients too (`codexr redo` while the TUI is open: a
    thread this app-server holds is worked on through it, app/codex/daemon.py), which one on stdio would lock out.

    Why loopback TCP with a token and not a unix socket: Codex links a `--listen unix://` socket into
    `/tmp/codex-daemon-<uid>/`, where every process of the user reaches it, a sandboxed agent's too, and 0.163.0
    does not ask a unix client for the token (tried: 101 without one); on ws:// it does (401), and an agent in
    Codex's sandbox has no network to try. The token is never written down: codexr hands it out through a door that
    answers only processes confined as itself (app/cmds/proxy_cmds.py).
    """

    LISTENING = re.compile(rb"listening on: (ws://127\.0\.0\.1:\d+)")

    def __init__(self, proc: asyncio.subprocess.Process, ws: Any, url: str, copying: asyncio.Task[None]) -> None:
        super().__init__(ws)
        self.proc, self.url, self._copying = proc, url, copying

    @classmethod
    async def start(cls, argv: Sequence[str], token: str, *, cwd: Path, env: dict[str, str],
                    log: Any) -> ListeningAppServer:
        """Start it and connect once it says where it listens (its stderr, copied to `log` from then on);
        ConnectionError when it ends or does not listen within a minute."""
        import hashlib

        from websockets.asyncio.client import connect

        proc = await asyncio.create_subprocess_exec(
            *argv, "--listen", "ws://127.0.0.1:0", "--ws-auth", "capability-token", "--ws-token-sha256",
            hashlib.sha256(token.encode()).hexdigest(), cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, limit=LINE_LIMIT,
            start_new_session=True)
        assert proc.stderr is not None
        url = None
        try:
            async with asyncio.timeout(60.0):
                while url is None and (line := await proc.stderr.readline()):
                    log.write(line)
                    found = cls.LISTENING.search(line)
                    url = found.group(1).decode() if found else None
            if url is None:
                raise ConnectionError("the app-server ended before it listened")
            ws = await connect(url, max_size=None, compression=None,
                               additional_headers={"Authorization": f"Bearer {token}"})
        except (TimeoutError, OSError, ConnectionError) as exc:
            await _end(proc)
            raise ConnectionError(str(exc) or "the app-server did not listen within a minute") from None
        log.flush()
        return cls(proc, ws, url, asyncio.create_task(_copy(proc.stderr, log)))

    async def close(self) -> None:
        """Let go of it, then end it and whatever of its group is left."""
        await super().close()
        await _end(self.proc)
        with contextlib.suppress(Exception):
            await self._copying


class AttachedSide(WebSocketSide):
    """An app-server codexr did not start, as the relay's (or the attach bridge's) other side: Codex's managed daemon
    on its checked unix socket (`codexr codex resume ID` of a thread the daemon holds), or a `codexr codex`
    app-server told by its door (app/codex/daemon.py). Closing lets go of the connection and leaves it running."""

    proc = None  # no process of codexr's: a revert's hold names none (app/rewind/held.py asks Codex at once)

    @classmethod
    async def open(cls, path: str) -> AttachedSide:
        """Connect to the unix socket `path` (checked as app/codex/daemon.py checks it; Unavailable if not)."""
        from websockets.asyncio.client import unix_connect

        from ..codex.daemon import connect

        sock, _pid = connect(path)
        return cls(await unix_connect(sock=sock, uri="ws://localhost/", max_size=None, compression=None))

    @classmethod
    async def through_door(cls, door: Path) -> AttachedSide:
        """Connect where the door of a `codexr codex` app-server says, with the token it gives (Unavailable if it
        gives none)."""
        from websockets.asyncio.client import connect

        from ..codex.daemon import ask_door

        url, token = ask_door(door)
        return cls(await connect(url, max_size=None, compression=None,
                                 additional_headers={"Authorization": f"Bearer {token}"}))


async def _copy(stream: asyncio.StreamReader, log: Any) -> None:
    """The app-server's stderr into the log, to its end."""
    with contextlib.suppress(Exception):
        while chunk := await stream.read(1 << 16):
            log.write(chunk)
            log.flush()


async def _end(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM (a listening app-server has no stdin to close), then as `_reap`."""
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
    await _reap(proc)


async def _reap(proc: asyncio.subprocess.Process) -> bool:
    """Three seconds for an app-server asked to exit, then SIGKILL; then its whole process group (its unified-exec
    shells, background terminals). Whether it had to be killed."""
    killed = False
    try:
        await asyncio.wait_for(proc.wait(), 3.0)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
            killed = True
        await proc.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    return killed


async def stdio_side() -> Lines:
    """This process's stdin and stdout as one side (`codexr app-server` for the IDE or the SDK); either may be a
    file (`< requests.jsonl`, `> answers.jsonl`), which asyncio cannot watch."""
    loop = asyncio.get_running_loop()
    reader = StoppableReader(limit=LINE_LIMIT)
    if watchable(0):
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", closefd=False))
    else:
        read_in_thread(reader, 0)
    if not watchable(1):
        return Lines(reader, FileWriter(1))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(1, "wb", closefd=False))
    return Lines(reader, asyncio.StreamWriter(transport, protocol, reader, loop))


def watchable(fd: int) -> bool:
    """Whether asyncio can wait on the descriptor: a pipe, a socket or a terminal (not a file, not /dev/null)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or (stat.S_ISCHR(mode) and os.isatty(fd))


def read_in_thread(reader: StoppableReader, fd: int) -> None:
    """Feed `reader` from a descriptor asyncio cannot wait on, in a thread of its own, to its end."""
    loop = asyncio.get_running_loop()

    def run() -> None:
        try:
            while chunk := os.read(fd, 1 << 16):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)
        except (OSError, RuntimeError):  # a read error, or the loop is gone: the relay has ended
            return

    threading.Thread(target=run, name="codexr-stdin", daemon=True).start()
