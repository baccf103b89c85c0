"""`codexr codex [ARGS…]` (the official Codex TUI through codexr) and `codexr app-server` (a drop-in for
`codex app-server`): both put codexr's relay between the client and the real app-server (app/proxy/)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from .context import Context, UsageError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `codex` and `app-server`."""
    p = sub.add_parser("codex", help="the official Codex TUI, through codexr (its Esc Esc rewinds files too)",
                       description="Runs the official Codex TUI (the chosen Codex binary, `--remote`) against a "
                                   "private codexr proxy in front of the real app-server, in the workspace. "
                                   "Arguments after `codex` go to the TUI.")
    p.add_argument("tui_args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for the official TUI")
    p.set_defaults(handler=codex)
    a = sub.add_parser("app-server", help="a drop-in for `codex app-server`: the same protocol, through codexr",
                       description="Serves the app-server protocol on stdio (default) or --listen, relaying every "
                                   "message to the real `codex app-server` started in the workspace.")
    a.add_argument("--listen", default="stdio://", metavar="URL",
                   help="stdio:// (default), unix://PATH or ws://127.0.0.1:PORT")
    a.set_defaults(handler=app_server)


def backend_argv(ctx: Context, args: argparse.Namespace) -> tuple[list[str], dict[str, str], Path]:
    """The real app-server's command line, environment and workspace (the binary chosen as for every command)."""
    from .codex_bin import choose
    from .session import split_overrides

    ws = ctx.workspace(args.cd)
    chosen = choose(args.codex_bin, ctx.loaded)
    overrides = list(split_overrides(args.overrides))
    overrides += [f"features.{f}=true" for f in args.enable if f != "file_snapshots"]
    overrides += [f"features.{f}=false" for f in args.disable if f != "file_snapshots"]
    config = [arg for kv in overrides for arg in ("--config", kv)]
    env = dict(os.environ)
    if chosen.pinned:  # as the SDK starts the pinned binary: its helpers (apply_patch) first on PATH
        with contextlib.suppress(ImportError, AttributeError):
            from codex_cli_bin import bundled_path_dir  # type: ignore[import-untyped]

            helpers = bundled_path_dir()
            if helpers is not None:
                env["PATH"] = os.pathsep.join([str(helpers), env.get("PATH", "")])
    env["CODEX_HOME"] = str(ctx.home)
    return [str(chosen.path), *config, "app-server", "--listen", "stdio://"], env, ws


def private_socket_dir() -> Path:
    """A new directory (0700) for one proxy socket, where no other process can replace it (as the server's)."""
    from .launch import runtime_dir

    base = runtime_dir()
    if base is None:
        home = Path.home() / ".cache" / "codexr"
        with contextlib.suppress(OSError):
            home.mkdir(mode=0o700, parents=True, exist_ok=True)
        from .launch import _safe_parents

        if not home.is_dir() or not _safe_parents(os.path.realpath(home)):
            raise UsageError("no private directory for the proxy's socket: set XDG_RUNTIME_DIR or "
                             "CODEXR_RUNTIME_DIR to a directory of yours, mode 700, not below /tmp")
        base = str(home)
    return Path(tempfile.mkdtemp(prefix="proxy-", dir=base))


def codex(ctx: Context, args: argparse.Namespace) -> int:
    """The official TUI on this terminal, its app-server behind codexr's relay; nothing left running after it."""
    argv, env, ws = backend_argv(ctx, args)
    tui_args = [a for a in args.tui_args if a != "--"] if args.tui_args[:1] == ["--"] else list(args.tui_args)
    sock_dir = private_socket_dir()
    try:
        return asyncio.run(_codex(argv, env, ws, sock_dir, tui_args, ctx.settings))
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


async def _codex(argv: list[str], env: dict[str, str], ws: Path, sock_dir: Path, tui_args: list[str],
                 ctx_settings: Any) -> int:
    from websockets.asyncio.server import unix_serve

    from .proxy.endpoints import AppServer, WebSocketSide
    from .proxy.observer import RecordingObserver
    from .proxy.relay import Relay

    path = sock_dir / "app-server.sock"
    log = open(sock_dir / "app-server.log", "ab")  # noqa: SIM115 - the backend's stderr, off the TUI's screen
    tui: asyncio.subprocess.Process | None = None
    relays: set[asyncio.Task[None]] = set()

    async def serve(ws_conn: Any) -> None:
        peer = _peer_pid(ws_conn)
        if tui is None or peer != tui.pid:  # only the TUI this command started (the socket is 0600 in a 0700 dir)
            await ws_conn.close(1008, "not the client codexr started")
            return
        backend = await AppServer.start(argv, cwd=ws, env=env, stderr=log)
        relay = Relay(WebSocketSide(ws_conn), backend, RecordingObserver(ws, env, ctx_settings))
        task = asyncio.current_task()
        assert task is not None
        relays.add(task)
        try:
            await relay.run()
        finally:
            relays.discard(task)

    old = os.umask(0o077)
    try:
        server = await unix_serve(serve, str(path), max_size=None, compression=None)
    finally:
        os.umask(old)
    try:
        tui_env = {**env, "CODEX_HOME": env["CODEX_HOME"]}
        tui = await asyncio.create_subprocess_exec(argv[0], "--remote", f"unix://{path}", *tui_args, cwd=ws,
                                                   env=tui_env)
        loop = asyncio.get_running_loop()

        def pass_on(sig: int) -> None:  # a SIGTERM or SIGHUP of codexr ends the TUI, which restores the terminal
            if tui is not None and tui.returncode is None:
                tui.send_signal(sig)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, pass_on, sig)
        loop.add_signal_handler(signal.SIGINT, lambda: None)  # the TUI has the terminal: Ctrl+C is its key
        code = await tui.wait()
    finally:
        server.close()
        for task in list(relays):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
        log.close()
    return code if code >= 0 else 128 - code


def _peer_pid(ws_conn: Any) -> int | None:
    """The pid of the process at the other end of a unix-socket WebSocket connection (SO_PEERCRED)."""
    import socket
    import struct

    sock = ws_conn.transport.get_extra_info("socket")
    if sock is None:
        return None
    try:
        pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except OSError:
        return None
    return int(pid)


def app_server(ctx: Context, args: argparse.Namespace) -> int:
    """`codex app-server`, through codexr: stdio by default (the IDE extension, the SDK), or --listen."""
    argv, env, ws = backend_argv(ctx, args)
    listen = str(args.listen)
    if listen == "stdio://":
        return asyncio.run(_stdio(argv, env, ws, ctx.settings))
    raise UsageError(f"--listen {listen}: only stdio:// is served so far")


async def _stdio(argv: list[str], env: dict[str, str], ws: Path, ctx_settings: Any) -> int:
    from .proxy.endpoints import AppServer, stdio_side
    from .proxy.observer import RecordingObserver
    from .proxy.relay import Relay

    client = await stdio_side()
    backend = await AppServer.start(argv, cwd=ws, env=env, stderr=sys.stderr)
    relay = Relay(client, backend, RecordingObserver(ws, env, ctx_settings),
                  log=lambda line: print(f"codexr: {line}", file=sys.stderr))
    task = asyncio.ensure_future(relay.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # as stdin closing: finish what is being recorded
        loop.add_signal_handler(sig, client.reader.feed_eof)
    await task
    return 0
