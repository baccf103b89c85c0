"""The relay's two kinds of side: newline-delimited JSON over pipes (`codex app-server --listen stdio://`, or the
client of `codexr app-server` on stdio) and WebSocket text frames (the official TUI's `--remote`)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: The longest line read from a pipe: a message carrying a whole file's diff is large, never unbounded.
LINE_LIMIT = 1 << 30


class Lines:
    """One JSON message per line over a reader and a writer."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None) -> None:
        self.reader, self.writer = reader, writer

    async def receive(self) -> str | None:
        try:
            line = await self.reader.readline()
        except (ValueError, ConnectionError):  # a line beyond LINE_LIMIT, or a reset pipe
            return None
        if not line:
            return None
        text = line.decode("utf-8", "replace").rstrip("\r\n")
        return text if text.strip() else await self.receive()

    async def send(self, text: str) -> None:
        if self.writer is None or self.writer.is_closing():
            raise ConnectionError("closed")
        self.writer.write(text.encode() + b"\n")
        await self.writer.drain()

    async def close(self) -> None:
        """Stop reading (a pending `receive` returns None) and close the writing end."""
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

    @classmethod
    async def start(cls, argv: Sequence[str], *, cwd: Path, env: dict[str, str], stderr: Any = None) -> AppServer:
        proc = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=stderr, limit=LINE_LIMIT, start_new_session=True)
        return cls(proc)

    async def close(self) -> None:
        """Close its stdin (it exits in ~30 ms), then end whatever of its group is left."""
        await super().close()
        try:
            await asyncio.wait_for(self.proc.wait(), 3.0)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # its unified-exec shells, background terminals


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


async def stdio_side() -> Lines:
    """This process's stdin and stdout as one side (`codexr app-server` for the IDE or the SDK)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(0, "rb", closefd=False))
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin,
                                                        os.fdopen(1, "wb", closefd=False))
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    return Lines(reader, writer)
