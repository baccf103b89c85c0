"""`python -m app.codex.attach SOCKET | --door DOOR`: the stdio of an app-server that already runs (Codex's managed
daemon, a `codexr codex` backend), for the SDK, which drives an app-server as a child over JSON lines; this child
turns them into the WebSocket frames its unix socket speaks (CODEX_FACTS §10) and back.

The socket is checked again here (app/codex/daemon.py: this user's, and an app-server confined as this process), so
a socket replaced between codexr's check and this connection is refused too; a door, likewise. Exit 0 when either
side closes; a refusal is one `Error:` line on stderr (what CodexConnection reports) and exit 3.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pump(src: object, dst: object) -> None:
    """Forward every message from `src` to `dst` until `src` closes."""
    while (text := await src.receive()) is not None:  # type: ignore[attr-defined]
        await dst.send(text)  # type: ignore[attr-defined]


async def relay(target: str, door: bool) -> int:
    """Bridge this process's stdio and the app-server at `target` (a unix socket; with `door`, the door of a
    `codexr codex` app-server, asked where it listens and for its token) until either side ends."""
    from pathlib import Path

    from ..proxy.endpoints import AttachedSide, stdio_side
    from .daemon import Unavailable

    try:
        server = await (AttachedSide.through_door(Path(target)) if door else AttachedSide.open(target))
    except Unavailable as exc:
        print(f"Error: {exc}", file=sys.stderr, flush=True)
        return 3
    stdio = await stdio_side()
    tasks = [asyncio.create_task(_pump(stdio, server)), asyncio.create_task(_pump(server, stdio))]
    with contextlib.suppress(ConnectionError):
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    await server.close()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--door":
        return asyncio.run(relay(argv[1], door=True))
    if len(argv) != 1:
        print("Error: usage: python -m app.codex.attach SOCKET | --door DOOR", file=sys.stderr)
        return 2
    return asyncio.run(relay(argv[0], door=False))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
