"""`python -m app.codex.attach SOCKET`: the stdio of an app-server that already runs (Codex's managed daemon), for
the SDK, which drives an app-server as a child over JSON lines; this child turns them into the WebSocket frames the
daemon's unix socket speaks (CODEX_FACTS §10) and back.

The socket is checked again here (app/codex/daemon.py: this user's, and a daemon confined as this process), so a
socket replaced between codexr's check and this connection is refused too. Exit 0 when either side closes; a refusal
is one `Error:` line on stderr (what CodexConnection reports) and exit 3.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pump(src: object, dst: object) -> None:
    """Forward every message from `src` to `dst` until `src` closes."""
    while (text := await src.receive()) is not None:  # type: ignore[attr-defined]
        await dst.send(text)  # type: ignore[attr-defined]


async def relay(path: str) -> int:
    """Bridge this process's stdio and the daemon at `path` until either side ends."""
    from websockets.asyncio.client import unix_connect

    from ..proxy.endpoints import WebSocketSide, stdio_side
    from .daemon import Unavailable, connect

    try:
        sock, _pid = connect(path)
    except Unavailable as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 3
    ws = await unix_connect(sock=sock, uri="ws://localhost/", max_size=None, compression=None)
    daemon, stdio = WebSocketSide(ws), await stdio_side()
    tasks = [asyncio.create_task(_pump(stdio, daemon)), asyncio.create_task(_pump(daemon, stdio))]
    with contextlib.suppress(ConnectionError):
        _done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    await daemon.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("Error: usage: python -m app.codex.attach SOCKET", file=sys.stderr)
        return 2
    return asyncio.run(relay(argv[0]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
