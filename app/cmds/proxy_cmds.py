"""`codexr codex [ARGS…]` (the official Codex TUI through codexr) and `codexr app-server` (a drop-in for
`codex app-server`): both put codexr's relay between the client and the real app-server (app/proxy/)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import itertools
import os
import secrets
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .context import Context, UsageError

if TYPE_CHECKING:
    from ..proxy.relay import Relay

#: `codex app-server`'s flags for signed JWT bearer tokens (accepted so a drop-in's caller is understood; refused).
JWT_FLAGS = (("--ws-shared-secret-file", "PATH"), ("--ws-issuer", "ISSUER"), ("--ws-audience", "AUDIENCE"),
             ("--ws-max-clock-skew-seconds", "SECONDS"))
#: The loopback hosts `--listen ws://HOST:PORT` takes, and the address each binds.
WS_HOSTS = {"127.0.0.1": "127.0.0.1", "localhost": "127.0.0.1", "[::1]": "::1"}


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
    a.add_argument("--listen", default=None, metavar="URL",
                   help="stdio:// (default), unix://PATH or ws://127.0.0.1:PORT (also localhost, [::1])")
    a.add_argument("--stdio", action="store_true", help="the same as --listen stdio://")
    a.add_argument("tool", nargs="?", help=argparse.SUPPRESS)  # `codex app-server TOOL`: refused in one line
    real = a.add_argument_group("passed to the real app-server (codex app-server's flags)")
    real.add_argument("--analytics-default-enabled", action="store_true",
                      help="analytics on unless config.toml turns them off (the IDE extension's default)")
    real.add_argument("--strict-config", action="store_true",
                      help="Codex refuses a config.toml with fields it does not know")
    real.add_argument("--code-mode-host", metavar="URL", help="a remote code-mode host instead of a local one")
    auth = a.add_argument_group("WebSocket authentication (codex app-server's flags; --listen unix:// and ws://)")
    auth.add_argument("--ws-auth", choices=("capability-token", "signed-bearer-token"), metavar="MODE",
                      help="capability-token: require `Authorization: Bearer TOKEN` (signed-bearer-token is not "
                           "implemented: refused)")
    auth.add_argument("--ws-token-file", metavar="PATH", help="the file holding the capability token")
    auth.add_argument("--ws-token-sha256", metavar="HEX", help="the capability token's SHA-256 digest, in hex")
    for flag, metavar in JWT_FLAGS:
        auth.add_argument(flag, metavar=metavar, help="(signed-bearer-token only: not implemented)")
    a.set_defaults(handler=app_server)


def backend_argv(ctx: Context, args: argparse.Namespace) -> tuple[list[str], dict[str, str], Path]:
    """The real app-server's command line, environment and workspace (the binary chosen as for every command)."""
    from ..codex.codex_bin import choose
    from .agent_cmds import codex_overrides

    ws = ctx.workspace(args.cd)
    chosen = choose(args.codex_bin, ctx.loaded)
    config = [arg for kv in codex_overrides(args) for arg in ("--config", kv)]
    env = dict(os.environ)
    if chosen.pinned:  # as the SDK starts the pinned binary: its helpers (apply_patch) first on PATH
        with contextlib.suppress(ImportError, AttributeError):
            from codex_cli_bin import bundled_path_dir  # type: ignore[import-untyped]

            helpers = bundled_path_dir()
            if helpers is not None:
                env["PATH"] = os.pathsep.join([str(helpers), env.get("PATH", "")])
    env["CODEX_HOME"] = str(ctx.home)
    return [str(chosen.path), *config, "app-server", "--listen", "stdio://", *app_server_flags(args)], env, ws


def app_server_flags(args: argparse.Namespace) -> list[str]:
    """The flags of `codexr app-server` that are the real app-server's to act on, as given (none for `codex`)."""
    out = [flag for flag in ("--analytics-default-enabled", "--strict-config")
           if getattr(args, flag[2:].replace("-", "_"), False)]
    host = getattr(args, "code_mode_host", None)
    return [*out, "--code-mode-host", host] if host is not None else out


def private_socket_dir() -> Path:
    """A new directory (0700) for one proxy socket, where no other process can replace it (as the server's), held
    until this process ends; those of killed runs go first (app/proxy/leftovers.py)."""
    from ..proxy.leftovers import claim, sweep
    from ..server.runtime import RUNTIME_HOW, runtime_dir

    base = runtime_dir()  # the cache directory's when no XDG_RUNTIME_DIR (snapshot_store/rundir.py)
    if base is None:
        raise UsageError(f"no private directory for the proxy's socket: {RUNTIME_HOW}")
    sweep(base)
    return claim(base)


def unix_peers_known() -> bool:
    """Whether this system says which process is at the other end of a unix socket (Linux: SO_PEERCRED, /proc):
    without it a socket's client cannot be told from another process of the user, so no unix socket is served
    (`codexr codex` takes loopback TCP with a token instead)."""
    import socket

    return hasattr(socket, "SO_PEERCRED") and os.path.isdir("/proc/self/fd")


def tcp_peers_known() -> bool:
    """Whether this system lists the uid of each loopback TCP connection's end (Linux: /proc/net/tcp)."""
    return os.path.isfile("/proc/net/tcp")


def codex(ctx: Context, args: argparse.Namespace) -> int:
    """The official TUI on this terminal, its app-server behind codexr's relay; nothing left running after it."""
    argv, env, ws = backend_argv(ctx, args)
    tui_args = _thread_named(ctx, tui_words(args))
    daemon = _daemon_holding(ctx, tui_args)
    sock_dir = private_socket_dir()
    try:
        return asyncio.run(_codex(argv, env, ws, sock_dir, tui_args, ctx.settings, daemon))
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)


def tui_words(args: argparse.Namespace) -> list[str]:
    """The words after `codexr codex` that are the official TUI's (app/cli.py sets them apart with `--`), then the
    TUI's flags given before `codex` (`codexr -m o3 --yolo --add-dir ../lib codex`), which the TUI takes as its own:
    they go last (before a `--` of the user's), where the TUI reads them whether its words name a subcommand or not;
    an added directory as an absolute path (the TUI starts in the workspace, not where the user stands)."""
    from .agent_cmds import added_dir_path

    words = list(args.tui_args)
    words = words[1:] if words[:1] == ["--"] else words
    given = [*(["-m", args.model] if args.model else []), *(["-p", args.profile] if args.profile else []),
             *(["-s", args.sandbox] if args.sandbox else []),
             *(["-a", args.ask_for_approval] if args.ask_for_approval else []),
             *(["--dangerously-bypass-approvals-and-sandbox"] if getattr(args, "bypass", False) else []),
             *[w for d in getattr(args, "add_dirs", None) or []
               for w in ("--add-dir", added_dir_path(d))]]
    at = words.index("--") if "--" in words else len(words)
    return [*words[:at], *given, *words[at:]]


#: The official TUI's options that take a value (the pinned `codex --help`, `codex resume --help`): skipped with it
#: when looking for the TUI's subcommand and thread id (`codexr codex -m o3 resume ID`).
TUI_VALUE_FLAGS = frozenset({"-c", "--config", "--enable", "--disable", "--remote", "--remote-auth-token-env", "-i",
                             "--image", "-m", "--model", "--local-provider", "-p", "--profile", "-s", "--sandbox",
                             "-C", "--cd", "--add-dir", "-a", "--ask-for-approval"})


def thread_word(tui_args: list[str]) -> tuple[str, int] | None:
    """The TUI's `resume ID` or `fork ID`: that subcommand, and where the thread id stands among its words (its
    options skipped, nothing after a `--`); None: no such id."""
    from .agent_cmds import positional_words

    at = positional_words(tui_args, TUI_VALUE_FLAGS.__contains__, past_dashdash=False)
    return (tui_args[at[0]], at[1]) if len(at) > 1 and tui_args[at[0]] in ("resume", "fork") else None


def _daemon_holding(ctx: Context, tui_args: list[str]) -> str | None:
    """For `resume ID` of a thread Codex's managed daemon holds (the official TUI ran it and quit): the daemon's
    checked socket, which the relay then uses as its app-server (no app-server of codexr's may open the thread).
    UsageError, one line, when codexr may not work through the daemon; None when no daemon holds the thread."""
    found = thread_word(tui_args)
    if found is None or found[0] != "resume":
        return None
    thread = tui_args[found[1]]
    from ..codex.daemon import CONTROL, STOP, Unavailable, holder, reachable

    who = holder(ctx.home, thread)
    if who is None or not who.daemon:
        return None
    try:
        path = reachable(ctx.home.joinpath(*CONTROL), "Codex's app-server daemon")  # the relay checks its own again
    except Unavailable as exc:
        raise UsageError(f"thread {thread} is open in Codex's app-server daemon (pid {who.pid}), and codexr "
                         f"does not work through it: {exc}; quit the `codex` that has it and run `{STOP}`, then "
                         "try again") from None
    say(f"thread {thread} is open in Codex's app-server daemon (pid {who.pid}): codexr codex works through it")
    return path


def _thread_named(ctx: Context, tui_args: list[str]) -> list[str]:
    """`resume ID` and `fork ID` take a unique prefix of a thread id (4+ characters), as every codexr command does;
    the TUI is given the whole id. One line, nothing started, for a prefix that names no thread or several."""
    found = thread_word(tui_args)
    if found is None:
        return tui_args
    at = found[1]
    from ..errors import SessionError
    from ..services.thread_ids import known_on_disk, resolve_thread_id

    try:
        full = resolve_thread_id(tui_args[at], lambda: known_on_disk(ctx.home))
    except SessionError as exc:
        if "is not a thread id" in str(exc):  # a session name, which the TUI resolves itself
            return tui_args
        raise UsageError(str(exc)) from None
    return [*tui_args[:at], full, *tui_args[at + 1:]]


TOKEN_ENV = "CODEXR_REMOTE_TOKEN"
"""The TUI's environment variable for the per-launch token where `codexr codex` serves it on loopback TCP."""


async def _open_door(serve: Any, sock_dir: Path, note: Callable[[str], None],
                     tui_pid: Callable[[], int | None]) -> tuple[Any, list[str], dict[str, str]]:
    """The listener the TUI connects to, the TUI's `--remote` arguments and the environment they need.

    Where the kernel names a unix socket's peer (Linux), a 0600 socket in a 0700 directory that answers only the
    TUI's pid. Elsewhere (macOS) loopback TCP with a per-launch bearer token the TUI alone is given
    (`--remote-auth-token-env`; the pinned TUI takes a token only over ws://), and the Host and Origin checks.
    """
    import hashlib
    import secrets

    from websockets.asyncio.server import serve as tcp_serve
    from websockets.asyncio.server import unix_serve

    from ..proxy.door import Door, Token

    if unix_peers_known():
        def only_the_tui(sock: Any) -> str | None:
            pid, peer = tui_pid(), _peer_pid(sock)
            # the TUI codexr started, or a process it started: npm's `codex` is a node launcher whose child, the
            # native TUI, is the one that connects
            ok = pid is not None and peer is not None and (peer == pid or _descends_from(peer, pid))
            return None if ok else "not the client codexr started"

        door = Door(peer=only_the_tui, log=note)  # a unix socket: no Host check (no name leads to it)
        path = sock_dir / "app-server.sock"
        old = os.umask(0o077)
        try:
            server = await unix_serve(serve, str(path), max_size=None, compression=None,
                                      process_request=door.process_request)
        finally:
            os.umask(old)
        return server, ["--remote", f"unix://{path}"], {}
    secret = secrets.token_urlsafe(32)
    door = Door(peer=lambda _sock: None, hosts=frozenset(),  # no Host admitted until the port is known
                token=Token(hashlib.sha256(secret.encode()).digest()), log=note)
    server = await tcp_serve(serve, "127.0.0.1", 0, max_size=None, compression=None,
                             process_request=door.process_request)
    port = server.sockets[0].getsockname()[1]
    door.hosts = Door.loopback_hosts(port)
    return server, ["--remote", f"ws://127.0.0.1:{port}", "--remote-auth-token-env", TOKEN_ENV], {TOKEN_ENV: secret}


async def _codex(argv: list[str], env: dict[str, str], ws: Path, sock_dir: Path, tui_args: list[str],
                 ctx_settings: Any, daemon: str | None = None) -> int:
    from ..codex.daemon import DOOR_ENV, Unavailable
    from ..proxy.endpoints import AttachedSide, ListeningAppServer, WebSocketSide
    from ..proxy.observer import RecordingObserver
    from ..proxy.relay import Relay

    log = open(sock_dir / "app-server.log", "ab")  # noqa: SIM115 - the backend's stderr, off the TUI's screen
    backends = itertools.count(1)
    token = secrets.token_urlsafe(32)  # the backends admit only this codexr and those it hands the token to
    tui: asyncio.subprocess.Process | None = None
    relays: dict[asyncio.Task[None], Relay] = {}

    def note(line: str) -> None:
        log.write(f"codexr: {line}\n".encode())
        log.flush()

    async def serve(ws_conn: Any) -> None:
        # listening, not on stdio: `codexr redo` while the TUI is open works through it (app/codex/daemon.py), told
        # where and with which token by this backend's door, whose path is in the backend's environment
        door_path = sock_dir / f"door-{next(backends)}.sock"
        backend: AttachedSide | ListeningAppServer
        door = None
        try:
            if daemon is not None:  # the thread asked for is the daemon's: the daemon is the app-server
                backend = await AttachedSide.open(daemon)
            else:
                assert argv[-2:] == ["--listen", "stdio://"]  # as backend_argv builds it: a listener instead
                backend = await ListeningAppServer.start(argv[:-2], token, cwd=ws,
                                                         env={**env, DOOR_ENV: str(door_path)}, log=log)
                door = await _backend_door(door_path, f"{backend.url} {token}", note)
        except (ConnectionError, OSError, Unavailable) as exc:
            note(f"the app-server did not start: {exc}")
            return
        relay = Relay(WebSocketSide(ws_conn), backend, RecordingObserver(ws, env, ctx_settings))
        task = asyncio.current_task()
        assert task is not None
        relays[task] = relay
        try:
            await relay.run()
        finally:
            relays.pop(task, None)
            if door is not None:
                door.close()

    server, remote, tui_env = await _open_door(serve, sock_dir, note, lambda: tui.pid if tui is not None else None)
    try:
        tui = await asyncio.create_subprocess_exec(argv[0], *remote, *tui_args, cwd=ws, env={**env, **tui_env})
        loop = asyncio.get_running_loop()

        def pass_on(sig: int) -> None:  # a SIGTERM or SIGHUP of codexr ends the TUI, which restores the terminal
            if tui is not None and tui.returncode is None:
                tui.send_signal(sig)

        for sig in (signal.SIGTERM, signal.SIGHUP):
            loop.add_signal_handler(sig, pass_on, sig)
        loop.add_signal_handler(signal.SIGINT, lambda: None)  # the TUI has the terminal: Ctrl+C is its key
        code = await tui.wait()
        await _outlive_the_tui(relays)
    finally:
        server.close()
        for task in list(relays):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 5)
        log.close()
    return code if code >= 0 else 128 - code


async def _backend_door(path: Path, answer_with: str, note: Callable[[str], None]) -> asyncio.AbstractServer | None:
    """The door of one backend (app/codex/daemon.py's DOOR_ENV): it tells a process confined exactly as this codexr
    where the backend listens and its token (`codexr redo` in another shell, or as the TUI's `!` command where Codex
    runs it unsandboxed), compared as the resident server compares its callers; anyone else gets nothing. None
    where the kernel cannot name a unix socket's peer: then no other command works through it (fails closed)."""
    if not unix_peers_known():
        return None
    from snapshot_store.confinement import fingerprint, peer

    ours = fingerprint("self")

    async def answer(_reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            found = peer(writer.get_extra_info("socket"))
            if found is not None and ours is not None and found[1] == ours:
                writer.write(answer_with.encode() + b"\n")
                await writer.drain()
            else:
                note(f"refused the backend's door to {f'pid {found[0]}' if found else 'a process'}: confined "
                     "otherwise than this codexr")
        finally:
            writer.close()

    old = os.umask(0o077)
    try:
        return await asyncio.start_unix_server(answer, path=str(path))
    finally:
        os.umask(old)


async def _outlive_the_tui(relays: dict[asyncio.Task[None], Relay]) -> None:
    """The TUI quit with a turn still running ("Any running work continues", it says): the turn goes on to its end
    and is recorded (its post-turn snapshot), codexr saying so on the terminal; Ctrl+C (or SIGTERM) interrupts it,
    a second one stops waiting. Then the command to go on with the thread, in place of the TUI's `codex --remote`
    line, whose socket is gone with this codexr."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 3.0  # the TUI's connection closes as it exits: each relay sees it a moment later
    while loop.time() < deadline and any(not t.done() and not r.detached.is_set() for t, r in relays.items()):
        await asyncio.sleep(0.05)
    staying = {t: r for t, r in relays.items() if not t.done() and r.detached.is_set()}
    threads = sorted({thread for r in staying.values() for thread, _turn in r.observer.running()})
    if not threads:
        return
    say(f"a turn is still running on thread {', '.join(threads)}: it goes on to its end and its files are "
        "recorded (Ctrl+C here interrupts it; the `codex --remote` lines above no longer reach it)")
    asked = False
    asking: set[asyncio.Task[None]] = set()

    async def interrupt(relay: Relay, thread: str, turn: str) -> None:
        with contextlib.suppress(Exception):
            await relay.request("turn/interrupt", {"threadId": thread, "turnId": turn}, timeout=10)

    def stop() -> None:
        nonlocal asked
        if asked:  # a second Ctrl+C: stop waiting (the turn is finished as interrupted)
            for task in staying:
                task.cancel()
            return
        asked = True
        say("interrupting the turn (Ctrl+C again stops waiting)")
        for relay in staying.values():
            for thread, turn in relay.observer.running():
                task = loop.create_task(interrupt(relay, thread, turn))
                asking.add(task)
                task.add_done_callback(asking.discard)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop)
    loop.add_signal_handler(signal.SIGHUP, lambda: None)  # the terminal closed: the work still goes on
    await asyncio.wait(staying)
    say(f"the turn ended and its files are recorded; to go on: codexr codex resume {threads[0]}")


def say(line: str) -> None:
    """One line of codexr's own on the terminal the TUI has left (it may be gone: then nowhere)."""
    with contextlib.suppress(OSError):
        print(f"codexr: {line}", file=sys.stderr, flush=True)


def _descends_from(pid: int, ancestor: int) -> bool:
    """Whether process `pid` was started by `ancestor`, or by a process it started (Linux's /proc; False when it
    cannot be read)."""
    from snapshot_store.procstat import ancestors

    return ancestor in ancestors(pid)


def _peer_pid(sock: Any) -> int | None:
    """The pid of the process at the other end of a connected unix socket (SO_PEERCRED)."""
    import socket
    import struct

    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None  # unknown: refused (`codex` does not start where it is missing)
    try:
        pid, _uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    except OSError:
        return None
    return int(pid)


def app_server(ctx: Context, args: argparse.Namespace) -> int:
    """`codex app-server`, through codexr: stdio by default (the IDE extension, the SDK), or --listen."""
    from ..proxy.door import token_from_flags

    if args.tool is not None:
        from ..shim import APP_SERVER_TOOLS, PROXY_REFUSED

        if args.tool == "proxy":
            raise UsageError(PROXY_REFUSED.replace("codexr-codex app-server", "codexr app-server"))
        if args.tool in APP_SERVER_TOOLS:
            raise UsageError(f"`app-server {args.tool}` serves no protocol, so codexr has nothing to add: run "
                             f"`codex app-server {args.tool}`")
        raise UsageError(f"unknown app-server command {args.tool!r} (codexr app-server takes flags only)")
    if args.stdio and args.listen is not None:  # as codex app-server refuses them together
        raise UsageError("--stdio cannot be used with --listen: both choose the transport (--stdio is --listen stdio://)")
    listen = str(args.listen or "stdio://")
    jwt = [flag for flag, _ in JWT_FLAGS if getattr(args, flag[2:].replace("-", "_")) is not None]
    if listen == "stdio://":
        token_from_flags(args.ws_auth, args.ws_token_file, args.ws_token_sha256, jwt, load=False)
        argv, env, ws = backend_argv(ctx, args)
        return asyncio.run(_stdio(argv, env, ws, ctx.settings))
    where = parse_listen(listen)
    token = token_from_flags(args.ws_auth, args.ws_token_file, args.ws_token_sha256, jwt, load=True)
    if where[0] == "unix" and not unix_peers_known():
        raise UsageError(f"--listen {listen}: this system cannot tell which process connects to a unix socket "
                         "(Linux's SO_PEERCRED); use --listen ws://127.0.0.1:PORT with --ws-auth capability-token")
    if where[0] == "tcp" and token is None and not tcp_peers_known():
        raise UsageError(f"--listen {listen}: this system cannot tell which user a TCP connection comes from "
                         "(Linux's /proc/net/tcp), so a token must: add --ws-auth capability-token "
                         "--ws-token-file FILE")
    argv, env, ws = backend_argv(ctx, args)
    try:
        return asyncio.run(_listen(argv, env, ws, ctx.settings, where, token))
    except KeyboardInterrupt:
        return 130


def parse_listen(listen: str) -> tuple[str, Any]:
    """`--listen unix://PATH | ws://HOST:PORT` as ("unix", absolute path) or ("tcp", (address, port)); anything
    else, a port out of range or a path a unix socket cannot have is a usage error."""
    from ..server.runtime import SOCKET_MAX

    if listen.startswith("unix://") and len(listen) > len("unix://"):
        path = Path(listen[len("unix://"):]).expanduser().absolute()
        if len(os.fsencode(path)) > SOCKET_MAX:
            raise UsageError(f"--listen {listen}: the path is too long for a unix socket "
                             f"({len(os.fsencode(path))} bytes, at most {SOCKET_MAX})")
        return "unix", path
    if listen.startswith("ws://"):
        import re

        found = re.fullmatch(r"(\[[^\]]*\]|[^:/\[\]]*)(?::([^/]*))?/?", listen[len("ws://"):])
        if found is None or found[1].lower() not in WS_HOSTS:
            raise UsageError(f"--listen {listen}: codexr serves WebSocket on the loopback only (ws://127.0.0.1:PORT, "
                             "ws://localhost:PORT or ws://[::1]:PORT); use unix://PATH for anything else")
        port = found[2]
        if port is None or not re.fullmatch(r"[0-9]{1,5}", port) or int(port) > 65535:
            raise UsageError(f"--listen {listen}: the port must be a number from 0 to 65535 (0: any free port)")
        return "tcp", (WS_HOSTS[found[1].lower()], int(port))
    raise UsageError(f"--listen {listen}: expected stdio://, unix://PATH or ws://127.0.0.1:PORT")


def claim_socket_path(path: Path) -> None:
    """Make room for a new socket at `path`: nothing there, or a stale socket of this user's (removed). A socket
    something answers on, another user's, or a file of another kind is refused, never unlinked (as root in a
    sticky /tmp, an unlink would take another user's live socket)."""
    import socket
    import stat

    def refuse(why: str) -> UsageError:
        return UsageError(f"cannot listen on unix://{path}: {why}")

    try:
        before = path.lstat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise refuse(str(exc.strerror)) from exc
    if not stat.S_ISSOCK(before.st_mode):
        raise refuse("it exists and is not a socket (codexr replaces only a socket an earlier run left)")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(5)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        pass  # nothing listens there: stale
    except OSError as exc:  # not ours to open, or too busy to answer: as good as live
        raise refuse(f"cannot tell whether it is in use ({exc.strerror or exc}); not replaced") from exc
    else:
        raise refuse("already in use (a listener answers there)")
    finally:
        probe.close()
    if before.st_uid != os.geteuid():
        raise refuse(f"a stale socket of another user's (uid {before.st_uid}) is there; codexr does not remove it")
    now = path.lstat()
    if (now.st_dev, now.st_ino) != (before.st_dev, before.st_ino):
        raise refuse("it was replaced while codexr looked at it; try again")
    try:
        path.unlink()
    except OSError as exc:
        raise refuse(f"cannot remove the stale socket there: {exc.strerror or exc}") from exc


def _bind(where: tuple[str, Any]) -> Any:
    """The listening socket for `where`, bound here (not by asyncio, whose unix server first removes any socket
    at the path: a live one too). A unix socket is 0600; binding fails, changing nothing, if the path is taken."""
    import socket

    if where[0] == "tcp":
        host, port = where[1]
        try:
            return socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
        except OSError as exc:
            raise UsageError(f"cannot listen on ws://{_url_host(host)}:{port}: {exc.strerror or exc}") from exc
    path: Path = where[1]
    claim_socket_path(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o077)
    try:
        sock.bind(str(path))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        why = "already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise UsageError(f"cannot listen on unix://{path}: {why}") from exc
    finally:
        os.umask(old)
    return sock


def _url_host(address: str) -> str:
    """An address as a URL writes it (an IPv6 address in brackets)."""
    return f"[{address}]" if ":" in address else address


async def _listen(argv: list[str], env: dict[str, str], ws: Path, ctx_settings: Any, where: tuple[str, Any],
                  token: Any) -> int:
    """Serve WebSocket clients until SIGINT/SIGTERM: each connection gets its own app-server behind a relay. Who
    is served is decided in the handshake, before an app-server starts (app/proxy/door.py): no web page, on TCP no
    Host but the one bound, only a client of this user confined as this process is (app/server/confinement.py), and the
    token when `--ws-auth` asks for one."""
    from websockets.asyncio.server import serve, unix_serve

    from ..proxy.door import Door
    from ..proxy.endpoints import AppServer, WebSocketSide
    from ..proxy.observer import RecordingObserver
    from ..proxy.relay import Relay

    async def handle(conn: Any) -> None:
        backend = await AppServer.start(argv, cwd=ws, env=env, stderr=sys.stderr)
        await Relay(WebSocketSide(conn), backend, RecordingObserver(ws, env, ctx_settings),
                    log=lambda line: print(f"codexr: {line}", file=sys.stderr)).run()
        failed = backend.failure()
        if failed is not None:  # that client's connection ended with it; the others, and the listener, go on
            print(f"codexr app-server: {failed[0]} (a client's connection ended with it)", file=sys.stderr)

    def same_user(sock: Any) -> str | None:
        if where[0] == "tcp" and not tcp_peers_known():
            return None  # the token decides alone (required above where the uid cannot be read)
        return None if _same_user(sock) else "not this user's, or confined otherwise"

    door = Door(peer=same_user, token=token, log=lambda line: print(f"codexr app-server: {line}", file=sys.stderr))
    sock = _bind(where)
    if where[0] == "unix":
        ours = os.lstat(where[1])
        server = await unix_serve(handle, sock=sock, max_size=None, compression=None,
                                  process_request=door.process_request)
        url = f"unix://{where[1]}"
    else:
        host, bound = sock.getsockname()[:2]
        door.hosts = Door.loopback_hosts(bound)
        server = await serve(handle, sock=sock, max_size=None, compression=None, process_request=door.process_request)
        url = f"ws://{_url_host(host)}:{bound}"
    print(f"codexr app-server: listening on {url}", file=sys.stderr, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    server.close()
    await server.wait_closed()
    if where[0] == "unix":
        with contextlib.suppress(OSError):
            now = os.lstat(where[1])
            if (now.st_dev, now.st_ino) == (ours.st_dev, ours.st_ino):  # still our socket: never another's
                os.unlink(where[1])
    return 0


def _same_user(sock: Any) -> bool:
    """Whether the client on `sock` is this user's and confined as this process is (unix: its pidfd; loopback
    TCP: the uid the kernel lists for its end of the connection, /proc/net/tcp)."""
    import socket

    if sock is None:
        return False
    if sock.family == socket.AF_UNIX:
        from ..server import confinement

        peer = confinement.peer(sock)
        return peer is not None and peer[1] == confinement.fingerprint("self")
    return _tcp_peer_uid(sock) == os.getuid()


def _tcp_peer_uid(sock: Any) -> int | None:
    """The uid owning the client's end of a loopback TCP connection (its row in /proc/net/tcp or tcp6)."""
    import ipaddress

    try:
        peer_host, peer_port = sock.getpeername()[:2]
        own_port = sock.getsockname()[1]
    except OSError:
        return None
    six = ":" in peer_host
    try:
        rows = Path("/proc/net/tcp6" if six else "/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None  # unknown: refused
    for line in rows:
        fields = line.split()
        local, remote, uid = fields[1], fields[2], fields[7]
        l_host, l_port = local.split(":")
        if int(l_port, 16) != peer_port or int(remote.split(":")[1], 16) != own_port:
            continue
        raw = bytes.fromhex(l_host)
        if six:  # each 32-bit word in host order
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
            addr = str(ipaddress.IPv6Address(raw))
        else:
            addr = str(ipaddress.IPv4Address(raw[::-1]))
        if ipaddress.ip_address(addr) == ipaddress.ip_address(peer_host):
            return int(uid)
    return None


async def _stdio(argv: list[str], env: dict[str, str], ws: Path, ctx_settings: Any) -> int:
    from ..proxy.endpoints import AppServer, stdio_side
    from ..proxy.observer import RecordingObserver
    from ..proxy.relay import Relay

    client = await stdio_side()
    backend = await AppServer.start(argv, cwd=ws, env=env, stderr=sys.stderr)
    relay = Relay(client, backend, RecordingObserver(ws, env, ctx_settings),
                  log=lambda line: print(f"codexr: {line}", file=sys.stderr))
    task = asyncio.ensure_future(relay.run())
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):  # as stdin closing: finish what is being recorded
        loop.add_signal_handler(sig, client.reader.feed_eof)
    await task
    failed = backend.failure()
    if failed is None:
        return 0
    say(failed[0])  # the IDE or script that started us reads the exit status as Codex's own
    return failed[1]
