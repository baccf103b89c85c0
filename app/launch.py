"""The `codexr` console script: a one-shot command runs in a fork of a resident codexr that has imported everything.

Why: every `codexr` command used to be a fresh Python that imported the SDK's 1,054 generated models, pygit2,
zstandard and pydantic before doing any work; that was most of `codexr exec` (4.7x `codex exec`) and of an
unchanged `snapshots capture` / a one-file `snapshots restore` (3.2x / 5x Git's), bench/HISTORY.md "Fourth pass".
A resident server (`app/server/server.py`, one per user, Python and codexr build) has imported all of it once; for each
command it forks a worker that adopts this process's standard streams (the file descriptors themselves), working
directory (a directory fd, so a renamed or deleted one stays the same directory), environment, umask, niceness and
resource limits, runs `app.cli.main` exactly as this process would, and exits. This process only passes on the
signals it receives (Ctrl+C, SIGTERM, SIGHUP, SIGQUIT; Ctrl+Z stops both) and exits with the worker's exact
status (a worker killed by a signal makes this process die of the same signal); if this process dies (even by
SIGKILL) the server kills the worker at once, so killing a command kills it as it always did.

Only this module's imports are paid per command: C modules only (`_socket`, `_signal`, `_blake2`, `marshal`:
~1 ms; `socket`, `signal`, `json` and `hashlib` would add ~25 ms through `enum` and `re`, measured), and small
modules of ours that import no more (`app/server/oneshot.py`: which command lines run there;
`app/server/runtime.py`: where the server lives and how it starts, on the store's `rundir.py`;
`app/server/confinement.py`, on the store's `confinement.py`; `app/stdfds.py`; the store's package imports nothing
itself). Anything unusual runs the command here as before: the interactive app and line mode, an unknown or
abbreviated flag, interpreter options (`-X`, `-W`, `-I`, `-E`, `-S`), `CODEXR_SERVER=0`, no private runtime
directory, a server still starting (the first command starts it in the background), or a server that refuses (a
resource limit it cannot take). A server is keyed by the interpreter, `sys.path`, the `PYTHON*` and
locale variables and the stat of every codexr source file and of the `sys.path` directories after the first
(where installing or upgrading a package shows), so it never runs code other than what this process would
import; a stale one is never asked and exits after its idle timeout.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's import is enum's (~5 ms)
import _socket
import marshal
import os
import sys
import time  # built in, and imported by Python's start-up already

from .server.oneshot import ONESHOT, command_of, hold_collector, hold_startup, server_wanted
from .server.runtime import lock_names, socket_path, spawn
from .stdfds import open_standard_fds

TYPE_CHECKING = False  # not `typing`'s: importing typing costs ~15 ms (it imports re); mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: Signals relayed to the worker while it runs.
RELAYED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT)
#: Seconds a client waits for its worker to start (say `ok`) before it runs the command itself: a worker starts in
#: a fork's time, so only a stopped or starved server takes this long.
START_TIMEOUT = 3.0


def _request(argv: Sequence[str]) -> bytes:
    """What the worker takes from this process besides its file descriptors."""
    import resource

    limits = {}
    for name in dir(resource):
        if name.startswith("RLIMIT_"):
            try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
                limits[name] = resource.getrlimit(getattr(resource, name))
            except (OSError, ValueError):
                pass
    streams = {name: [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
               for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))}
    umask = os.umask(0o022)
    os.umask(umask)
    return marshal.dumps({
        "argv0": sys.argv[0], "argv": list(argv), "env": dict(os.environ), "umask": umask, "rlimits": limits,
        "nice": os.getpriority(os.PRIO_PROCESS, 0), "streams": streams, "pid": os.getpid(),
    })


def _status(code: int) -> int:
    """This process's exit code for the worker's wait status; a signal death is passed on as the same death."""
    result = os.waitstatus_to_exitcode(code)
    if result >= 0:
        return result
    sig = -result
    for stream in (sys.stdout, sys.stderr):
        try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
            stream.flush()
        except (OSError, ValueError):
            pass
    if sig not in (_signal.SIGKILL, _signal.SIGSTOP):  # those two have no handler to reset (and need none)
        _signal.signal(sig, _signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    return 128 + sig


def start_timeout() -> float:
    """Seconds to wait for a worker to start before running the command here (`CODEXR_SERVER_START_TIMEOUT`)."""
    try:
        return max(0.1, float(os.environ.get("CODEXR_SERVER_START_TIMEOUT", START_TIMEOUT)))
    except ValueError:
        return START_TIMEOUT


def _verified(sock: _socket.socket, path: str) -> bool:
    """Whether the peer of `sock` is the server `path`'s lock names, of this user and confined as this process is.

    Checked before anything is sent: whoever else listens there (a socket swapped by another process) must not get
    this process's environment, streams or directory.
    """
    from .server import confinement

    try:
        _pid, uid, _gid = _peercred(sock)
    except OSError:
        return False
    if uid != os.getuid():
        return False
    peer = confinement.peer(sock)
    if peer is None or peer[1] != confinement.fingerprint("self"):
        return False
    return lock_names(path + ".lock", peer[0])


def _peercred(sock: _socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the process that made the peer socket (the server's listener)."""
    raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    return (int.from_bytes(raw[0:4], sys.byteorder, signed=True), int.from_bytes(raw[4:8], sys.byteorder),
            int.from_bytes(raw[8:12], sys.byteorder))


def run_in_server(argv: Sequence[str]) -> int | None:
    """Run `argv` in the resident server: its exit code, or None when it must run here (nothing was done)."""
    path = socket_path()
    if path is None:
        return None
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.setblocking(False)  # a full backlog (a stopped server) answers EAGAIN instead of blocking
        sock.connect(path)
        sock.setblocking(True)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        spawn(path)
        return None
    except OSError:
        sock.close()
        return None
    if not _verified(sock, path) or not _greeted(sock):
        sock.close()
        return None
    cwd = None
    try:
        cwd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        body = _request(argv)
        fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (cwd, 0, 1, 2))
        sock.sendmsg([b"CRX1" + b"%012d" % len(body)], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
        sock.sendall(body)
    except OSError:
        sock.close()
        return None
    finally:
        if cwd is not None:
            os.close(cwd)
    return _wait(sock)


def _greeted(sock: _socket.socket) -> bool:
    """Whether a worker took this connection and accepts this caller (`hi`) within `start_timeout()`.

    Nothing of this process's (streams, directory, environment) is sent before: a stopped server would otherwise
    hold them in its queue (a pipe on this process's stdout would stay open after it exited)."""
    limit = start_timeout()
    sock.settimeout(limit)
    said = b""
    try:
        while not said.endswith(b"\n") and len(said) < 1024:
            chunk = sock.recv(1024)
            if not chunk:
                break
            said += chunk
    except TimeoutError:
        print(f"codexr: note: the resident server did not answer within {limit:g} s; running the command here "
              "(`codexr server stop` ends it)", file=sys.stderr)
        return False
    except OSError:
        return False
    return said == b"hi\n"  # else a refusal (this caller is confined otherwise): the command runs here


class _Abandoned(Exception):
    """A signal arrived before the worker started: the command is given up, nothing having run."""


def _wait(sock: _socket.socket) -> int | None:
    """Pass signals to the worker until the server reports its exit; its exit code (None: it never started).

    The worker says `ok PID` when it has taken the request, and runs the command only once this process answers
    `go`: a worker that does not start within `start_timeout()` (a stopped or overloaded server) is left, and the
    command runs here; a signal before `go` (Ctrl+C) ends this process as it would a command of its own, and the
    worker runs nothing either way. After `go`, signals go straight to the worker through a pidfd (no reuse of a
    dead worker's pid can be hit, and a busy worker gets them at once). Ctrl+Z stops the worker too (SIGSTOP: it
    has no terminal, so a SIGTSTP would be discarded) and `fg` continues it.
    """
    worker: list[int] = []  # the worker's pidfd, once it said "ok" and was told "go"

    def send(signum: int) -> None:
        try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
            _signal.pidfd_send_signal(worker[0], signum)
        except OSError:
            pass  # it has exited

    def relay(signum: int, _frame: object) -> None:
        if not started:
            raise _Abandoned(signum)
        if worker:
            send(signum)

    def suspend(_signum: int, _frame: object) -> None:
        if worker:
            send(_signal.SIGSTOP)
        _signal.signal(_signal.SIGTSTP, _signal.SIG_DFL)
        os.kill(os.getpid(), _signal.SIGTSTP)  # this process stops here until `fg` / `bg`
        _signal.signal(_signal.SIGTSTP, suspend)
        if worker:
            send(_signal.SIGCONT)

    handlers: dict[int, Any] = {sig: relay for sig in RELAYED}
    handlers[_signal.SIGTSTP] = suspend
    started = False
    for sig, handler in handlers.items():
        if _signal.getsignal(sig) is not _signal.SIG_IGN:  # ignored here (nohup, a background job): not passed on
            _signal.signal(sig, handler)
    status = exited = None
    abandoned: int | None = None
    buffered = b""
    limit = start_timeout()
    try:
        deadline = time.monotonic() + limit
        while exited is None:  # until "exit" (the worker let go of all else), or EOF: the server's status is in
            if not started:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                sock.settimeout(left)
            chunk = sock.recv(4096)
            if not chunk:
                break
            *lines, buffered = (buffered + chunk).split(b"\n")
            for line in lines:
                word, _, rest = line.strip().partition(b" ")
                if word == b"ok" and not started:
                    try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
                        worker.append(os.pidfd_open(int(rest)))
                    except (OSError, ValueError):
                        pass  # gone already: its status follows
                    sock.settimeout(None)
                    sock.sendall(b"go\n")  # from here on the command runs there: nothing may run here
                    started = True
                elif word == b"status" and started:
                    status = int(rest)
                elif word == b"exit" and started:
                    exited = int(rest)
    except _Abandoned as exc:
        abandoned = exc.args[0]
    except TimeoutError:
        if not started:
            print(f"codexr: note: the resident server did not answer within {limit:g} s; running the command here "
                  "(`codexr server stop` ends it)", file=sys.stderr)
    except OSError:
        pass
    finally:
        sock.close()
        for sig, handler in handlers.items():
            if _signal.getsignal(sig) is handler:
                _signal.signal(sig, _signal.default_int_handler if sig == _signal.SIGINT else _signal.SIG_DFL)
        for fd in worker:
            os.close(fd)
    if abandoned is not None:  # nothing ran: end as this command would have at that signal
        if abandoned == _signal.SIGINT:
            print("codexr: interrupted", file=sys.stderr)
            return 130
        _signal.signal(abandoned, _signal.SIG_DFL)
        os.kill(os.getpid(), abandoned)
        return 128 + abandoned
    if not started:
        return None
    if status is not None:
        return _status(status)
    if exited is not None:
        return exited
    print("codexr: error: the resident server stopped before reporting how the command ended", file=sys.stderr)
    return 1


def main() -> int:
    """Entry point of the `codexr` console script."""
    open_standard_fds()
    argv = sys.argv[1:]
    if server_wanted(argv):
        try:
            code = run_in_server(argv)
        except KeyboardInterrupt:  # Ctrl+C before the command started anywhere: nothing ran
            print("codexr: interrupted", file=sys.stderr)
            code = 130
        if code is not None:
            # Nothing here to clean up: skip the interpreter's own shutdown (~5-7 ms, measured under strace).
            for stream in (sys.stdout, sys.stderr):
                try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code & 0xFF)
    oneshot = command_of(argv) in ONESHOT
    if oneshot:
        hold_startup(argv)
        hold_collector(argv)
    from .cli import main as cli_main

    code = cli_main(argv)
    if oneshot:  # a command a server could have run ends as its worker does: no teardown
        from .server.finish import finish

        os._exit(finish(code) & 0xFF)
    return code


if __name__ == "__main__":
    sys.exit(main())
