"""The resident codexr: imports everything once, then forks one worker per one-shot command (see app/launch.py).

The server never runs a command itself. A spare worker, forked ahead, waits in `accept()` and hands the server a
copy of the connection it took ("took"); the server then forks the next spare. Nothing is read from a caller in
the server, so a slow or hostile caller never blocks it. The worker checks the peer is this user (SO_PEERCRED),
takes the caller's streams, directory, environment, umask, niceness and limits (or refuses, and the caller runs
the command itself), answers `ok PID`, runs `app.cli.main`, does what the interpreter does at exit (non-daemon
threads joined, atexit handlers run, streams flushed), closes every fd the command held and says `exit N`; the
caller leaves then. The server reaps the worker and sends its wait status (what the caller goes by when there was
no `exit`: a worker killed by a signal). A worker whose caller dies is SIGKILLed by the server (a pidfd of the
caller), and kills itself if it sees the connection end first.

Before it lets go, a worker tells the server (over the line it said "took" on) which store files its command read;
0.15 s later the server loads them, decoded (snapshot_store/decoded.py: kept only while each file's stat is the same),
and asks its waiting spare to leave for a fresh fork that holds them. A spare leaves only from its wait: a caller
that reached it first is served, one that arrives meanwhile waits in the listen backlog for the next spare.
"""

from __future__ import annotations

import contextlib
import gc
import json
import marshal
import os
import select
import selectors
import signal
import socket
import struct
import sys
import time
from typing import Any, NoReturn

from . import confinement, decoded_cache
from .launch import HEADER, IDLE_SECONDS, command_of, take_lock

#: Seconds a client has to send its request before its worker gives up.
REQUEST_TIMEOUT = 10.0
#: How often (seconds) an idle server checks that its socket is still its own.
CHECK_EVERY = 30.0
#: Seconds a worker runs without the cyclic garbage collector (see `worker`).
GC_AFTER_S = 10.0
#: Seconds after a command ends before the server loads what it used: the stat cache and walk it just wrote are
#: kept only once past the racy window (statcache.FINE_WINDOW_NS, 100 ms), or the load would be for nothing.
WARM_DELAY = 0.15
#: Store files a worker's hint names at most.
HINT_FILES = 512
#: Bytes of a worker's hint the server reads at most (the store files its command loaded, decoded.py).
HINT_MAX = 1 << 20
#: What confines the server (app/confinement.py), read once at its start: a caller confined otherwise is refused.
OWN: tuple[str, ...] | None = None


def _fd_limit() -> int:
    limit = os.sysconf("SC_OPEN_MAX")
    return limit if limit > 0 else 65536


def warm() -> None:
    """Import what the one-shot commands use, so that a fork has nothing left to import or build.

    The SDK's models are imported here with their validators built (not deferred as `app.codex_sdk` does for a
    short-lived process): building them on first use would cost every worker 30-50 ms per model again.
    """
    import openai_codex.generated.v2_all  # noqa: F401  (before app.codex_sdk: built, not deferred)

    from config import loader  # noqa: F401
    from snapshot_store import capture, restore  # noqa: F401
    from snapshot_store.maint import gc as store_gc  # noqa: F401
    from snapshot_store.maint import verify  # noqa: F401

    from . import agent_cmds, cli, codex_sdk, config_cmds, doctor, history_cmds, session, snapshot_cmds  # noqa: F401

    for name in ("pygit2", "zstandard", "blake3", "inotify_simple", "concurrent.futures", "subprocess", "resource",
                 "threading", "traceback", "atexit", "io"):
        with contextlib.suppress(ImportError):
            __import__(name)
    for module in set(cli.COMMANDS.values()) - {"tui_cmds", "demo"}:  # the one-shot commands' parsers
        cli.narrow_parser([module], False)
    decoded_cache.hold()  # what each command decodes of a store is kept for the next (warm_store)


def idle_seconds() -> float:
    """How long an idle server waits for a command (`CODEXR_SERVER_IDLE` seconds, default 15 minutes)."""
    try:
        return max(1.0, float(os.environ.get("CODEXR_SERVER_IDLE", IDLE_SECONDS)))
    except ValueError:
        return float(IDLE_SECONDS)


def hint_bytes(used: list[tuple[str, str]]) -> bytes:
    """A worker's hint: the (kind, path) of every store file its command loaded, NUL-separated."""
    return b"\0".join(os.fsencode(kind) + b"\0" + os.fsencode(path) for kind, path in used)


def parse_hint(data: bytes) -> list[tuple[str, str]]:
    """The (kind, path) pairs of a hint (an odd or empty one: none)."""
    fields = [os.fsdecode(f) for f in data.split(b"\0")] if data else []
    if len(fields) % 2:
        return []
    return list(zip(fields[::2], fields[1::2], strict=True))


def warm_store(used: list[tuple[str, str]]) -> int:
    """Load (decoded, decoded.py) what the last command loaded of its store, so the next fork has it at hand.

    Read-only, never under a store lock: it only reads files, and keeps each only while its stat stays the same.
    The collector is told to leave what is kept alone, like everything else the server holds (see `main`).
    """
    kept = decoded_cache.hold().warm(used)
    gc.collect()  # only what is not frozen yet: what this load made, and any cycle it left
    gc.freeze()
    return kept


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
    warm()
    # Everything imported so far lives as long as the server: out of the collector's sight, a worker's
    # collections look at its own objects only (a full collection over the SDK's ~1,000 classes took ~100 ms
    # of a worker's restore, measured) and never write to the pages it shares with the server.
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


def _write_pid(path: str) -> None:
    """`<socket>.pid`: the server's pid and its socket, for `codexr server status|stop` (atomic rename)."""
    tmp = f"{path}.pid.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "socket": path, "started": time.time()}, f)
    os.replace(tmp, path + ".pid")


class Server:
    """The accept / fork / reap loop (a spare worker waits in accept() while the server waits for it)."""

    def __init__(self, path: str, ino: int, listener: socket.socket, lock: int, idle: float) -> None:
        self.path, self.ino, self.listener, self.lock, self.idle = path, ino, listener, lock, idle
        self.workers: dict[int, socket.socket] = {}
        self.callers: dict[int, int] = {}  # worker pid -> pidfd of its caller
        self.spare: tuple[int, socket.socket] | None = None  # a forked worker waiting in accept(), and its line
        self.spares_failed = 0
        self.reaped: dict[int, int] = {}  # wait status of children reaped before the server knew them as workers
        self.hints: dict[int, bytes] = {}  # what each worker's command loaded of a store, as said so far
        self.to_warm: dict[tuple[str, str], None] = {}  # what ended commands loaded, to load here (in order)
        self.warm_due: float | None = None  # when to (files written within the racy window are not kept)
        self.retiring: int | None = None  # the spare asked to leave (for a fork holding what was just loaded)
        self.closing = False  # no more spares: the listener is closing
        self.stopping = False
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    def run(self) -> None:
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        signal.signal(signal.SIGINT, self._stop)
        sel = selectors.DefaultSelector()
        sel.register(self.wake_r, selectors.EVENT_READ, "wake")
        self._fork_spare(sel)
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
                if self.warm_due is not None:
                    due = max(0.0, self.warm_due - time.monotonic())
                    if due == 0.0:
                        self._warm(sel)
                        continue
                    timeout = due if timeout is None else min(timeout, due)
                for key, _ in sel.select(timeout):
                    if isinstance(key.data, int):  # a caller died: its worker dies with it, at once
                        if key.data in self.workers:  # not reaped yet, so the pid is still the worker's
                            with contextlib.suppress(ProcessLookupError):
                                os.kill(key.data, signal.SIGKILL)
                        self._forget_caller(sel, key.data)
                    elif key.data == "wake":
                        with contextlib.suppress(BlockingIOError):
                            os.read(self.wake_r, 512)
                    elif key.data == "accept":
                        self._accept(sel)
                        last = time.monotonic()
                    elif key.data == "spare":
                        self._spare_took(sel)
                        last = time.monotonic()
                    elif isinstance(key.data, tuple):  # a worker's line: what its command loaded, at its end
                        self._hint(sel, key.fileobj, key.data[1])  # type: ignore[arg-type]
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
        self.closing = True
        if self.spare is not None:
            self._spare_took(sel, waiting=False)  # one with a caller already becomes a worker, waited for
        if self.spare is not None:
            spare_pid, line = self.spare  # still in accept(): nothing of a caller's has reached it
            self.spare = None
            with contextlib.suppress(KeyError, ValueError):
                sel.unregister(line)
            line.close()
            with contextlib.suppress(ProcessLookupError):
                os.kill(spare_pid, signal.SIGKILL)
        if self._still_ours():
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            with contextlib.suppress(OSError):
                os.unlink(self.path + ".pid")
        self.listener.close()

    def _accept(self, sel: selectors.BaseSelector) -> None:
        try:
            conn, _ = self.listener.accept()
        except (BlockingIOError, InterruptedError, ConnectionAbortedError):
            return
        pid = os.fork()
        if pid == 0:
            sel.close()
            worker(conn, None, None, [self.listener, *self.workers.values()],
                   self._private_fds())
        self.workers[pid] = conn
        self._watch_caller(sel, conn, pid)

    def _fork_spare(self, sel: selectors.BaseSelector) -> None:
        """Fork the next command's worker now, to wait in accept(): forking this process takes ~6 ms here
        (page tables of ~70 MB), which no caller then waits for. If spares keep dying unused, accept here."""
        if self.spare is not None or self.listener.fileno() < 0 or self.stopping or self.closing:
            return
        if self.spares_failed >= 3:
            with contextlib.suppress(KeyError):  # registered already
                sel.register(self.listener, selectors.EVENT_READ, "accept")
            return
        line, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:
            sel.close()
            line.close()
            worker(None, self.listener, child_end, list(self.workers.values()),
                   self._private_fds())
        child_end.close()
        self.spare = (pid, line)
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(self.listener)  # the spare accepts; this process must not race it
        sel.register(line, selectors.EVENT_READ, "spare")

    def _spare_took(self, sel: selectors.BaseSelector, waiting: bool = True) -> bool:
        """The spare took a connection (and sent a copy of it): it is a worker now; fork the next spare.

        With `waiting` False (closing), only if it has said so already; False when it has not (it is still in
        accept(), or died unused, or left when asked to: `_renew_spare`).
        """
        assert self.spare is not None
        pid, line = self.spare
        line.setblocking(waiting)
        try:
            msg, fds, _flags, _addr = socket.recv_fds(line, 16, 1)
        except BlockingIOError:
            return False
        except OSError:
            msg, fds = b"", []
        retiring, self.retiring = self.retiring == pid, None
        self.spare = None
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(line)
        took = msg[:4] == b"took" and bool(fds)
        if not took:
            line.close()
        if took:
            line.setblocking(False)
            sel.register(line, selectors.EVENT_READ, ("hint", pid))  # what its command loaded comes here
            self.hints[pid] = msg[4:]  # the start of it, if the command was over before this read
            conn = socket.socket(fileno=fds[0])
            self.spares_failed = 0
            status = self.reaped.pop(pid, None)
            if status is not None:  # it ran and ended before this process read "took" (a loaded machine)
                self._report(conn, status)
            else:
                self.workers[pid] = conn
                self._watch_caller(sel, conn, pid)
        else:  # it died without a caller (killed, out of memory, retired): reaped as an unknown child
            for fd in fds:
                os.close(fd)
            if not retiring:
                self.spares_failed += 1
        self._fork_spare(sel)
        return took

    def _hint(self, sel: selectors.BaseSelector, line: socket.socket, pid: int) -> None:
        """Read a worker's line; at its end (the command is over), load what the command used and renew the spare."""
        try:
            chunk = line.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk and len(self.hints.get(pid, b"")) < HINT_MAX:
            self.hints[pid] = self.hints.get(pid, b"") + chunk
            return
        with contextlib.suppress(KeyError, ValueError):
            sel.unregister(line)
        line.close()
        used = parse_hint(self.hints.pop(pid, b""))
        if used and not self.closing and not self.stopping:
            self.to_warm.update(dict.fromkeys(used))
            self.warm_due = time.monotonic() + WARM_DELAY

    def _warm(self, sel: selectors.BaseSelector) -> None:
        """Load what the last commands used, then renew the spare so that the next command finds it loaded."""
        used, self.to_warm, self.warm_due = list(self.to_warm), {}, None
        if not self.closing and not self.stopping:
            kept = warm_store(used)
            _log(2, f"kept {kept} of {len(used)} store files the last command read", who="server")
            self._renew_spare(sel)

    def _renew_spare(self, sel: selectors.BaseSelector) -> None:
        """Replace the waiting spare by a fork of this process as it is now (holding what `warm_store` loaded).

        The spare is asked to leave over its line; its line then ends, and `_spare_took` forks the next one as for
        any spare gone unused (not counted as a failure). If a caller reached it first it says "took" and runs that
        command: nothing is lost either way, as a spare leaves only from its wait, before it accepted anyone.
        """
        if self.spare is None:
            self._fork_spare(sel)
            return
        pid, line = self.spare
        self.retiring = pid
        with contextlib.suppress(OSError):  # gone already: its line reads EOF all the same
            line.sendall(b"retire")

    def _private_fds(self) -> list[int]:
        """The server's own fds, which a fork closes: its lock, its wake-up pipe, the pidfds of other callers."""
        return [self.lock, self.wake_r, self.wake_w, *self.callers.values()]

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
                self._report(conn, status)
            else:  # the spare: maybe a worker already, whose "took" is still to be read
                self.reaped[pid] = status
                while len(self.reaped) > 64:
                    self.reaped.pop(next(iter(self.reaped)))

    @staticmethod
    def _report(conn: socket.socket, status: int) -> None:
        """Tell a caller how its worker ended (its wait status) and let go of the connection."""
        with contextlib.suppress(OSError):
            conn.sendall(b"status %d\n" % status)
        conn.close()


# ------------------------------------------------------------------------------------------------------- worker


def worker(conn: socket.socket | None, listener: socket.socket | None, ctrl: socket.socket | None,
           inherited: list[socket.socket], fds: list[int]) -> NoReturn:
    """Run one client's command in this fork of the server; never returns.

    A spare (`conn` None) first takes the next connection from the listener itself and hands the server a copy
    over `ctrl`. Whatever happens, the fork ends here: an exception must not unwind into the server's loop (a
    second server), nor print a traceback on a caller's stderr (a caller killed right after connecting did,
    soak --server).
    """
    code = 1
    try:
        for other in inherited:  # other clients' connections: holding them would keep those clients waiting
            other.close()
        for fd in fds:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if conn is None:
            assert listener is not None and ctrl is not None
            # A spare waits here, before any caller (no command waits for a fork), until a caller or its leave:
            # the server renews it after loading a store (or the server is gone: its line ends).
            decoded_cache.hold().touch()  # the copies it would make during the command, made before it
            waiting = select.poll()
            waiting.register(listener, select.POLLIN)
            waiting.register(ctrl, select.POLLIN)
            if listener.fileno() not in {fd for fd, _event in waiting.poll()}:
                os._exit(0)
            conn, _ = listener.accept()
            listener.close()
            socket.send_fds(ctrl, [b"took"], [conn.fileno()])  # the server reports this worker's exit on it
        code = _work(conn, ctrl)
    finally:
        os._exit(code & 0xFF)


def _work(conn: socket.socket, ctrl: socket.socket | None) -> int:
    """Take the caller's request and run it; the exit code. `ctrl`: the server's line (tell it what was loaded).

    The worker's own descriptors move to the top of its range first: a caller's low limit on open files
    (`ulimit -n 6`) then leaves the command the same descriptors free as in a process of its own.
    """
    conn = _high_socket(conn)
    ctrl = _high_socket(ctrl) if ctrl is not None else None
    log = _high(os.dup(2))  # the server's log: fd 2 becomes the client's stderr
    try:
        _same_confinement(conn)  # before anything of the caller's is sent (its descriptors, its environment)
    except Exception as exc:
        return 0 if _hung_up(conn) else _refuse(conn, log, exc)  # hung up: a probe, nothing to refuse
    try:
        conn.sendall(b"hi\n")
    except OSError:
        return 0  # a probe (a test's) that connected and left: nothing to say
    try:
        request = _take(conn, log)
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

    # A one-shot command allocates ~10^5 objects without cycles (maps of 11,000 files, freed by reference counts);
    # the collector's passes over them cost ~75 ms CPU of a one-file restore (500 -> 430 ms, measured in-process).
    # A long command (a Codex turn) gets the collector back after GC_AFTER_S (from the caller-watching thread).
    gc.disable()
    threading.Thread(target=_watch_caller, args=(conn,), daemon=True, name="codexr-caller").start()
    code = _run(request)
    if ctrl is not None:
        with contextlib.suppress(OSError):
            ctrl.sendall(hint_bytes(decoded_cache.hold().take_used()[:HINT_FILES]))
    # Everything the command held is let go before the caller hears "exit" and ends (it does not wait for this
    # process's teardown, ~6 ms for the server's address space): a lock held through an fd until exit would
    # otherwise still be held when the next command starts.
    os.closerange(3, conn.fileno())
    os.closerange(conn.fileno() + 1, _fd_limit())
    with contextlib.suppress(OSError):
        conn.sendall(b"exit %d\n" % code)
    return code


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


def _high(fd: int) -> int:
    """`fd` moved to the top of this process's descriptor range (close-on-exec, as before)."""
    import fcntl

    top = max(3, _fd_limit() - 64)
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, top)
    os.close(fd)
    return moved


def _high_socket(sock: socket.socket) -> socket.socket:
    """`sock` on a descriptor at the top of the range (see `_high`)."""
    moved = socket.socket(fileno=_high(sock.detach()))
    return moved


def _peer(conn: socket.socket) -> tuple[int, int]:
    """The pid and uid of the process at the other end (SO_PEERCRED: as it was when it connected)."""
    pid, uid, _gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                           struct.calcsize("3i")))
    return pid, uid


def _log(fd: int, text: str, who: str = "worker") -> None:
    """One line in the server's log (`<socket>.log`): which worker ran what for whom; never a prompt's text."""
    with contextlib.suppress(OSError):
        os.write(fd, f"{time.strftime('%Y-%m-%d %H:%M:%S')} {who} {os.getpid()}: {text}\n".encode(errors="replace"))


def _take(conn: socket.socket, log: int) -> dict[str, Any]:
    """Read the request and adopt the client's streams, directory, environment, umask, niceness and limits."""
    _pid, uid = _peer(conn)
    if uid != os.getuid():
        raise PermissionError(f"client uid {uid} is not the server's")
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


def _same_confinement(conn: socket.socket) -> None:
    """Refuse a caller confined otherwise than the server: other credentials, groups, capabilities, namespaces,
    seccomp filters, `no_new_privs`, root, cgroup or LSM label (app/confinement.py). A command runs here only as it
    would in a process of the caller's own; else the caller runs it itself."""
    peer = confinement.peer(conn)
    if peer is None:
        raise PermissionError("the caller's process could not be named or read (gone, not this user's to read, "
                              "or a kernel without SO_PEERPIDFD, Linux 6.5)")
    if OWN is None or peer[1] != OWN:
        differ = sorted({f.split(":", 1)[0].split(" ", 1)[0] for f in set(peer[1]) ^ set(OWN or ())})
        raise PermissionError(f"client {peer[0]} is confined otherwise than the server ({', '.join(differ)[:200]})")


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
    """If the caller is gone (its connection ends), die as it did: SIGKILL (the server does it first, by pidfd).

    After GC_AFTER_S it turns the collector back on (one thread for both: a thread costs ~1 ms to start).
    """
    conn.settimeout(GC_AFTER_S)
    with contextlib.suppress(OSError):
        while True:
            try:
                if not conn.recv(4096):  # the caller sends nothing: signals come straight to this pid
                    break
            except TimeoutError:
                gc.enable()
                conn.settimeout(None)
    os.kill(os.getpid(), signal.SIGKILL)


def _run(request: dict[str, Any]) -> int:
    """`app.cli.main` on the client's arguments, then what the interpreter does at exit; the exit code."""
    import traceback

    from .cli import main as cli_main

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


def _finish(code: int) -> int:
    """Join non-daemon threads, run atexit handlers, flush the streams (Python's exit code 120 if that fails).

    `threading._shutdown` and `atexit._run_exitfuncs` are private, but they are what the interpreter itself calls
    at exit (Py_FinalizeEx); without them a worker would skip what a command's process does when it ends.
    """
    import atexit
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        with contextlib.suppress(Exception):
            shutdown()
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            if stream is sys.stdout:
                code = 120
    return code
