"""The resident codexr: imports everything once, then forks one worker per one-shot command (client: app/launch.py).

The shape is Mercurial's chg (`contrib/chg/` and `commandserver.py`'s forking service): the server accepts a
connection and forks; the fork, a worker, serves that one caller and exits. The server itself never reads from a
caller (a slow or hostile one cannot block it), and runs no command.

What happens, in this module's order:

1. `main` starts the server: it takes the lock, imports what the commands use (`preload`), hides that from the
   collector (`gc.freeze`), and listens.
2. `Server` accepts a connection and forks a worker for it; it watches the caller (a pidfd) and SIGKILLs the
   worker if the caller dies; it reaps the worker and sends the caller its wait status (`status N`).
3. `worker` → `_serve`: the worker checks the caller is confined exactly as the server (`_same_confinement`)
   before anything of the caller's is sent; says `hi`; takes the request and becomes the caller (`_take` /
   `_adopt`: limits, niceness, directory, environment, umask, standard streams); says `ok PID` and runs the
   command once the caller answers `go` (from then on the caller relays its signals to this pid); does what the
   interpreter does at exit (`_finish`); lets go of every descriptor the command held, and says `exit N`.
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import os
import selectors
import signal
import socket
import struct
import sys
import time
from typing import Any, NoReturn

from . import confinement
from .finish import finish as _finish
from .oneshot import command_of
from .runtime import HEADER, take_lock

#: Seconds a server with nothing to do waits for a command before it exits (`CODEXR_SERVER_IDLE` overrides).
IDLE_SECONDS = 900
#: Seconds a client has to send its request before its worker gives up.
REQUEST_TIMEOUT = 10.0
#: How often (seconds) an idle server checks that its socket is still its own.
CHECK_EVERY = 30.0
#: What confines the server (app/server/confinement.py), read once at its start: a caller confined otherwise is refused.
OWN: tuple[str, ...] | None = None


def _fd_limit() -> int:
    limit = os.sysconf("SC_OPEN_MAX")
    return limit if limit > 0 else 65536


def idle_seconds() -> float:
    """How long an idle server waits for a command (`CODEXR_SERVER_IDLE` seconds, default 15 minutes)."""
    try:
        return max(1.0, float(os.environ.get("CODEXR_SERVER_IDLE", IDLE_SECONDS)))
    except ValueError:
        return float(IDLE_SECONDS)


# ------------------------------------------------------------------------------------------------------- start


def main(path: str) -> None:
    """Serve on the socket `path` until idle for `idle_seconds()` or told to stop (SIGTERM)."""
    os.chdir("/")  # no caller's directory held (an `umount` of it would fail "target is busy")
    os.closerange(3, _fd_limit())  # nor anything else its first caller left open without close-on-exec
    lock = take_lock(path + ".lock")
    if lock is None:
        return  # another server for this codexr is starting or running
    os.ftruncate(lock, 0)
    os.write(lock, b"%d\n" % os.getpid())  # the server its lock names: a client talks to no other (launch.py)
    with contextlib.suppress(OSError):
        os.ftruncate(2, 0)  # the log (opened for appending): this server's lines only
    idle = idle_seconds()
    global OWN
    OWN = confinement.fingerprint("self")  # what a caller must share with every worker (before any fork)
    preload()
    # What is imported now lives as long as the server. Frozen, it is out of the collector's sight: a worker's
    # collections then look at its own objects only, instead of walking the server's and writing to every page
    # of them it shares (copy-on-write) — the one collector setting that pays for itself (bench/README.md).
    gc.collect()
    gc.freeze()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_umask = os.umask(0o077)
    try:
        listener.bind(path)
    finally:
        os.umask(old_umask)
    listener.listen(64)
    ino = os.stat(path).st_ino
    _write_pid(path)
    Server(path, ino, listener, lock, idle).run()


def preload() -> None:
    """Import what the one-shot commands use, so that a fork has nothing left to import or build: this is what
    the server is for (importing it is most of a short command's time in a fresh Python).

    The SDK's models are imported here with their validators built (not deferred as `app.codex_sdk` does for a
    short-lived process): deferred, every worker would build the ones its command uses again.
    """
    import openai_codex.generated.v2_all  # noqa: F401  (before app.codex.codex_sdk: built, not deferred)

    from config import loader  # noqa: F401
    from snapshot_store import capture, restore  # noqa: F401
    from snapshot_store.maint import gc as store_gc  # noqa: F401
    from snapshot_store.maint import verify  # noqa: F401

    from .. import cli, session  # noqa: F401
    from ..cmds import agent_cmds, config_cmds, doctor, history_cmds, piped, snapshot_cmds  # noqa: F401
    from ..codex import codex_sdk  # noqa: F401

    for name in ("pygit2", "zstandard", "blake3", "inotify_simple", "concurrent.futures", "subprocess", "resource",
                 "threading", "traceback", "atexit", "io", "fcntl"):
        with contextlib.suppress(ImportError):
            __import__(name)
    for module in set(cli.COMMANDS.values()) - {"tui_cmds", "demo"}:  # the one-shot commands' parsers
        cli.narrow_parser([module], False)
    from snapshot_store.records import compile_waiting

    # A record compiles its methods when first made (records.py): here, once for every worker.
    compile_waiting(m for name, m in list(sys.modules.items()) if name.split(".")[0] in ("snapshot_store", "app",
                                                                                          "config"))


def _write_pid(path: str) -> None:
    """`<socket>.pid`: the server's pid and its socket, for `codexr server status|stop` (atomic rename)."""
    tmp = f"{path}.pid.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "socket": path, "started": time.time()}, f)
    os.replace(tmp, path + ".pid")


# ------------------------------------------------------------------------------------------------------ server


class Server:
    """The accept / fork / reap loop."""

    def __init__(self, path: str, ino: int, listener: socket.socket, lock: int, idle: float) -> None:
        self.path, self.ino, self.listener, self.lock, self.idle = path, ino, listener, lock, idle
        self.workers: dict[int, socket.socket] = {}  # worker pid -> its caller's connection (for `status`)
        self.callers: dict[int, int] = {}  # worker pid -> pidfd of its caller
        self.stopping = False
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def run(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        sel = selectors.DefaultSelector()
        sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        sel.register(self.listener, selectors.EVENT_READ, "accept")
        last = time.monotonic()
        try:
            while True:
                self._reap(sel)
                if self.workers:
                    last = time.monotonic()
                if self.stopping or not self._still_ours():
                    self._close_listener(sel)
                    if not self.workers:
                        return
                elif time.monotonic() - last >= self.idle:
                    return
                timeout = None if self.workers else min(CHECK_EVERY, max(0.0, last + self.idle - time.monotonic()))
                for key, _ in sel.select(timeout):
                    if key.data == "accept":
                        self._accept(sel)
                        last = time.monotonic()
                    elif key.data == "wake":
                        with contextlib.suppress(BlockingIOError):
                            os.read(self.wake_r, 512)
                    elif isinstance(key.data, int):  # a caller died: its worker dies with it, at once
                        if key.data in self.workers:  # not reaped yet, so the pid is still the worker's
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(key.data, signal.SIGKILL)
                        self._forget_caller(sel, key.data)
        finally:
            self._close_listener(sel)

    def _stop(self, *_: Any) -> None:
        self.stopping = True

    def _still_ours(self) -> bool:
        """False once the socket file is gone or another file took its name (then stop taking commands)."""
        try:
            return os.stat(self.path).st_ino == self.ino
        except OSError:
            return False

    def _close_listener(self, sel: selectors.BaseSelector) -> None:
        if self.listener.fileno() < 0:
            return
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(self.listener)
        if self._still_ours():
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            with contextlib.suppress(OSError):
                os.unlink(self.path + ".pid")
        self.listener.close()

    def _accept(self, sel: selectors.BaseSelector) -> None:
        """Fork a worker for the next caller; nothing of the caller's is read here (the worker does that)."""
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        pid = os.fork()
        if pid == 0:
            sel.close()
            worker(conn, [self.listener, *self.workers.values()],
                   [self.lock, self.wake_r, self.wake_w, *self.callers.values()])
        self.workers[pid] = conn
        self._watch_caller(sel, conn, pid)

    def _watch_caller(self, sel: selectors.BaseSelector, conn: socket.socket, worker_pid: int) -> None:
        """Kill the worker the moment its caller dies (a SIGKILLed `codexr` must not go on restoring).

        The worker notices too (its connection reaches EOF), but it needs its own GIL to act; a pidfd of the
        caller (SO_PEERCRED's pid) wakes this process, which is idle, within a scheduler tick.
        """
        pidfd = confinement.peer_pidfd(conn)  # the caller as it connected: no reuse of its pid can be hit
        if pidfd is None:
            return  # no pidfd here (its worker still sees EOF and kills itself)
        self.callers[worker_pid] = pidfd
        sel.register(pidfd, selectors.EVENT_READ, worker_pid)

    def _forget_caller(self, sel: selectors.BaseSelector, worker_pid: int) -> None:
        pidfd = self.callers.pop(worker_pid, None)
        if pidfd is not None:
            with contextlib.suppress(KeyError, ValueError):
                sel.unregister(pidfd)
            os.close(pidfd)

    def _reap(self, sel: selectors.BaseSelector) -> None:
        """Reap the workers that ended and tell each one's caller how (its wait status), then let go of it.

        The status is what the caller goes by when the worker never said `exit` (killed by a signal)."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._forget_caller(sel, pid)
            conn = self.workers.pop(pid, None)
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.sendall(b"status %d\n" % status)
                conn.close()


# ------------------------------------------------------------------------------------------------------ worker


def worker(conn: socket.socket, inherited: list[socket.socket], fds: list[int]) -> NoReturn:
    """Run one caller's command in this fork of the server; never returns.

    Whatever happens, the fork ends here: an exception must not unwind into the server's loop (a second server),
    nor print a traceback on a caller's stderr (a caller killed right after connecting did, soak --server).
    """
    code = 1
    try:
        for other in inherited:  # the listener, other callers' connections: holding them would keep those waiting
            other.close()
        for fd in fds:  # the server's own: its lock, its wake-up pipe, other callers' pidfds
            os.close(fd)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        code = _serve(conn)
    finally:
        os._exit(code & 0xFF)


def _serve(conn: socket.socket) -> int:
    """Check the caller, take its request, run it; the exit code.

    The worker's own descriptors move to the top of its range first: a caller's low limit on open files
    (`ulimit -n 6`) then leaves the command the same descriptors free as in a process of its own.
    """
    conn = _high_socket(conn)
    log = _high(os.dup(2))  # the server's log: fd 2 becomes the caller's stderr
    try:
        _same_confinement(conn)  # before anything of the caller's is sent (its descriptors, its environment)
    except Exception as exc:
        return 0 if _hung_up(conn) else _refuse(conn, log, exc)  # hung up: a probe, nothing to refuse
    try:
        conn.sendall(b"hi\n")
    except OSError:
        return 0  # a probe (a test's) that connected and left: nothing to say
    try:
        request = _take(conn)
    except Exception as exc:
        return _refuse(conn, log, exc)
    try:
        conn.sendall(b"ok %d\n" % os.getpid())  # the caller signals this pid (through a pidfd)
        conn.settimeout(REQUEST_TIMEOUT)
        go = conn.recv(3)  # the caller's word that it waits for this worker (it may have gone on without it)
        conn.settimeout(None)
    except OSError:
        go = b""
    if go != b"go\n":
        _log(log, f"client {request['pid']} went on without this worker: nothing ran")
        return 1
    _log(log, f"client {request['pid']}: {command_of(request['argv'])}")
    os.close(log)
    import threading

    threading.Thread(target=_watch_caller, args=(conn,), daemon=True, name="codexr-caller").start()
    code = _run(request)
    # Everything the command held is let go before the caller hears "exit" and ends (it does not wait for this
    # process's teardown): a lock held through an fd until exit would otherwise still be held when the next
    # command starts.
    os.closerange(3, conn.fileno())
    os.closerange(conn.fileno() + 1, _fd_limit())
    with contextlib.suppress(OSError):
        conn.sendall(b"exit %d\n" % code)
    return code


def _same_confinement(conn: socket.socket) -> None:
    """Refuse a caller confined otherwise than the server: other credentials, groups, capabilities, namespaces,
    seccomp filters, `no_new_privs`, root, cgroup or LSM label (app/server/confinement.py). A command runs here only
    as it would in a process of the caller's own; else the caller runs it itself."""
    peer = confinement.peer(conn)
    if peer is None:
        raise PermissionError("the caller's process could not be named or read (gone, not this user's to read, "
                              "or a kernel without SO_PEERPIDFD, Linux 6.5)")
    if OWN is None or peer[1] != OWN:
        differ = sorted({f.split(":", 1)[0].split(" ", 1)[0] for f in set(peer[1]) ^ set(OWN or ())})
        raise PermissionError(f"client {peer[0]} is confined otherwise than the server ({', '.join(differ)[:200]})")


def _refuse(conn: socket.socket, log: int, exc: Exception) -> int:
    """Say why this caller is not served (it then runs the command itself) and end the worker."""
    _log(log, f"refused: {exc}")
    with contextlib.suppress(OSError):
        conn.sendall(b"refuse " + str(exc).encode(errors="replace")[:500] + b"\n")
    return 3


def _hung_up(conn: socket.socket) -> bool:
    """Whether the caller has closed its end (a caller sends nothing before `hi`: a live one reads as empty)."""
    try:
        return conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return True


def _take(conn: socket.socket) -> dict[str, Any]:
    """Read the request and adopt the client's streams, directory, environment, umask, niceness and limits."""
    pid, uid = _peer(conn)
    if uid != os.getuid():
        raise PermissionError(f"client uid {uid} is not the server's")
    from ..cmds import piped

    piped.caller = pid  # who started the command is the client's business (`exec`'s piped stdin)
    conn.settimeout(REQUEST_TIMEOUT)
    head, fds, flags, _ = socket.recv_fds(conn, HEADER, 8)
    if not head and not fds:
        os._exit(0)  # a probe (`codexr server start` checking the socket listens): connected, said nothing
    try:
        if flags & socket.MSG_CTRUNC or len(fds) != 4:
            raise ValueError(f"expected 4 file descriptors, got {len(fds)}")
        while len(head) < HEADER:
            more = conn.recv(HEADER - len(head))
            if not more:
                raise EOFError("request cut short")
            head += more
        if head[:4] != b"CRX1":
            raise ValueError("not a codexr request")
        size = int(head[4:])
        body = b""
        while len(body) < size:
            more = conn.recv(min(1 << 20, size - len(body)))
            if not more:
                raise EOFError("request cut short")
            body += more
        request: dict[str, Any] = marshal.loads(body)  # from a peer of this uid, confined as this process is
        if confinement.in_codex_sandbox(request["env"]):
            raise PermissionError("the caller runs in Codex's sandbox")
        _adopt(request, fds)
    finally:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
    conn.settimeout(None)
    return request


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end (SO_PEERCRED: as it was when it connected)."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                           struct.calcsize("3i")))
    return pid, uid


def _adopt(request: dict[str, Any], fds: list[int]) -> None:
    """Become the client: limits and niceness first (they may refuse), then directory, environment, streams."""
    import resource

    for name, (soft, hard) in request["rlimits"].items():
        res = getattr(resource, name, None)
        if res is not None and resource.getrlimit(res) != (soft, hard):
            resource.setrlimit(res, (soft, hard))  # raising a hard limit fails: refused, the client runs it
    nice = int(request["nice"])
    if os.getpriority(os.PRIO_PROCESS, 0) != nice:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
    cwd, stdin, stdout, stderr = fds
    os.fchdir(cwd)
    os.environ.clear()
    os.environ.update(request["env"])
    time.tzset()
    os.umask(int(request["umask"]))
    for fd, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
        os.dup2(fd, target)
    sys.argv = [request["argv0"], *request["argv"]]
    streams = request["streams"]
    for name, fd, mode, line_buffering in (("stdin", 0, "rb", False), ("stdout", 1, "wb", os.isatty(1)),
                                           ("stderr", 2, "wb", True)):
        stream = _text(fd, mode, *streams[name], line_buffering=line_buffering)
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


def _text(fd: int, mode: str, encoding: str | None, errors: str | None, *, line_buffering: bool) -> Any:
    """A standard stream on `fd` with the client's encoding and error handler."""
    import io

    buffer = open(fd, mode, closefd=False)  # noqa: SIM115 - lives as long as the process
    return io.TextIOWrapper(buffer, encoding=encoding or "utf-8", errors=errors or "strict", newline="\n",
                            line_buffering=line_buffering)


def _watch_caller(conn: socket.socket) -> None:
    """If the caller is gone (its connection ends), die as it did: SIGKILL (the server does it first, by pidfd)."""
    with contextlib.suppress(OSError):
        while conn.recv(4096):  # the caller sends nothing: signals come straight to this pid
            pass
    os.kill(os.getpid(), signal.SIGKILL)


def _run(request: dict[str, Any]) -> int:
    """`app.cli.main` on the client's arguments, then what the interpreter does at exit; the exit code."""
    import traceback

    from ..cli import main as cli_main
    from .oneshot import hold_collector

    hold_collector(request["argv"])
    code = 0
    try:
        code = int(cli_main(request["argv"]))
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        _finish(130)
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # as Python does: die of the SIGINT
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
        code = 1
    return _finish(code)


# ----------------------------------------------------------------------------------------------------- helpers


def _high(fd: int) -> int:
    """`fd` moved to the top of this process's descriptor range (close-on-exec, as before)."""
    import fcntl

    top = max(3, _fd_limit() - 64)
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top)
    os.close(fd)
    return moved


def _high_socket(sock: socket.socket) -> socket.socket:
    """`sock` on a descriptor at the top of the range (see `_high`)."""
    return socket.socket(fileno=_high(sock.detach()))


def _log(fd: int, text: str, who: str = "worker") -> None:
    """One line in the server's log (`<socket>.log`): which worker ran what for whom; never a prompt's text."""
    with contextlib.suppress(OSError):
        os.write(fd, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {who} {os.getpid()}: {text}\n".encode(errors="replace"))
