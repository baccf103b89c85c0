"""`codexr server status|start|stop`: see, warm up or stop the resident codexr that runs one-shot commands."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import time
from pathlib import Path
from typing import Any

from ..server.oneshot import server_off
from ..server.runtime import RUNTIME_HOW, runtime_dir, server_unavailable, socket_path, spawn, take_lock
from ..shared.times import json_time, screen_time
from .context import Context, UsageError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `server`."""
    p = sub.add_parser("server", help="the resident codexr that runs one-shot commands fast (status, start, stop)",
                       description="One-shot commands (exec, snapshots, threads, rewind, redo, history, config, "
                                   "doctor) run in a fork of a resident codexr that has imported everything; the "
                                   "first such command starts it. CODEXR_SERVER=0 turns it off; it exits after "
                                   "CODEXR_SERVER_IDLE seconds (default 900) without a command.")
    p.add_argument("action", choices=["status", "start", "stop"], nargs="?", default="status")
    p.add_argument("--wait", type=float, default=60.0, metavar="SECONDS",
                   help="start: how long to wait for the server to listen (default 60)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=server)


def servers() -> list[dict[str, Any]]:
    """Every server of this user that left a pid file, whether it is alive, and whether it serves this codexr."""
    base = runtime_dir(create=False)
    if base is None:
        return []
    mine = socket_path(create=False)
    out = []
    for pid_file in sorted(Path(base).glob("s-*.sock.pid")):
        try:
            doc = json.loads(pid_file.read_text(encoding="utf-8"))
            pid, sock = int(doc["pid"]), str(doc["socket"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        out.append({"pid": pid, "socket": sock, "started": float(doc.get("started", 0)),
                    "alive": _is_server(pid, sock), "current": sock == mine, "rss_bytes": _rss(pid)})
    return out


def _is_server(pid: int, sock: str) -> bool:
    """Whether `pid` is a live codexr server on `sock` (a recycled pid is some other process)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return os.fsencode(sock) in cmdline and any(b"app.server.server" in part for part in cmdline)


def _rss(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _listening(path: str) -> bool:
    """Whether a server serves `path`: a worker greets this process (`hi`), which then leaves without a request."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        try:
            s.connect(path)
            return s.recv(3) == b"hi\n"
        except OSError:
            return False


def server(ctx: Context, args: argparse.Namespace) -> int:
    """Print, start or stop the resident servers."""
    if args.action == "start":
        return _start(ctx, args.wait)
    if args.action == "stop":
        return _stop(ctx)
    found = servers()
    path = socket_path(create=False)
    off = server_off()
    why = server_unavailable()
    if ctx.json:
        ctx.emit({"enabled": not off, "available": why is None, "unavailable_reason": why,
                  "runtime_dir": runtime_dir(create=False), "socket": path,
                  "servers": [{**s, "started": json_time(s["started"] or None)} for s in found]})
        return 0
    # One true statement: off, impossible here (why, and how to enable it), or running / started by the next command.
    if off:
        print("resident server: off (CODEXR_SERVER=0): every command runs by itself")
    elif why is not None:
        print(f"resident server: not available here, every command runs by itself ({why})")
    for s in found:
        state = "running" if s["alive"] else "gone"
        rss = f", {s['rss_bytes'] / 2**20:.0f} MiB" if s["rss_bytes"] else ""
        mine = " (this codexr)" if s["current"] else " (another codexr build or Python)"
        print(f"server {s['pid']}: {state}{rss}, since {screen_time(s['started'], seconds=True)}{mine}\n"
              f"  {s['socket']}")
    if not off and why is None and not any(s["alive"] and s["current"] for s in found):
        print("no resident server is running for this codexr; the next one-shot command starts one")
    return 0


def _start(ctx: Context, wait: float) -> int:
    path = socket_path()
    if path is None:
        raise UsageError(f"no resident server can run here: {server_unavailable() or RUNTIME_HOW}")
    if not _listening(path):
        spawn(path)
        deadline = time.monotonic() + wait
        while not _listening(path):
            if time.monotonic() > deadline:
                raise UsageError(f"the resident server did not start within {wait:g} s; see {path}.log")
            time.sleep(0.05)
    if ctx.json:
        ctx.emit({"socket": path, "listening": True})
    else:
        print(f"resident server listening on {path}")
    return 0


def _prune() -> None:
    """Remove the lock and log files of servers that are gone (each codexr build, every edit in development,
    leaves a pair). Only under the lock itself: a server or a starting one holds it, and is left alone."""
    base = runtime_dir(create=False)
    if base is None:
        return
    for lock in Path(base).glob("s-*.sock.lock"):
        sock = str(lock)[:-len(".lock")]
        fd = take_lock(str(lock))
        if fd is None:
            continue  # a server (or one starting) holds it
        try:
            for leftover in (sock + ".log", sock + ".pid", str(lock)):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover)
        finally:
            os.close(fd)


def _stop(ctx: Context) -> int:
    """SIGTERM every live server (each finishes the commands it runs, then exits), wait for them, and remove what
    servers that are gone left behind."""
    stopped: dict[int, int] = {}  # pid -> pidfd: readable once the server has exited (no pid reuse can fool it)
    for srv in servers():
        if srv["alive"]:
            try:
                pidfd = os.pidfd_open(srv["pid"])
            except ProcessLookupError:
                continue
            stopped[srv["pid"]] = pidfd
            signal.pidfd_send_signal(pidfd, signal.SIGTERM)  # the process _is_server looked at, not a new one
    # Its command line goes with its memory, its files (the lock) later: exited means the pidfd says so.
    deadline = time.monotonic() + 30
    waiting = dict(stopped)
    while waiting and time.monotonic() < deadline:
        ready, _w, _x = select.select(list(waiting.values()), [], [], max(0.0, deadline - time.monotonic()))
        waiting = {pid: fd for pid, fd in waiting.items() if fd not in ready}
    for fd in stopped.values():
        os.close(fd)
    left = sorted(waiting)
    _prune()
    if ctx.json:
        ctx.emit({"stopped": [pid for pid in stopped if pid not in left], "still_running": left})
    else:
        print(f"stopped {len(stopped) - len(left)} resident server(s)"
              + (f"; still finishing commands: {', '.join(map(str, left))}" if left else ""))
    return 0
