"""The `codexr` console script: a one-shot command runs in a fork of a resident codexr that has imported everything.

Why: every `codexr` command used to be a fresh Python that imported the SDK's 1,054 generated models, pygit2,
zstandard and pydantic before doing any work; that was most of `codexr exec` (4.7x `codex exec`) and of an
unchanged `snapshots capture` / a one-file `snapshots restore` (3.2x / 5x Git's), bench/README "Fourth pass".
A resident server (`app/server.py`, one per user, Python and codexr build) has imported all of it once; for each
command it forks a worker that adopts this process's standard streams (the file descriptors themselves), working
directory (a directory fd, so a renamed or deleted one stays the same directory), environment, umask, niceness and
resource limits, runs `app.cli.main` exactly as this process would, and exits. This process only passes on the
signals it receives (Ctrl+C, SIGTERM, SIGHUP, SIGQUIT; Ctrl+Z stops both) and exits with the worker's exact
status (a worker killed by a signal makes this process die of the same signal); if this process dies (even by
SIGKILL) the server kills the worker at once, so killing a command kills it as it always did.

Only this module's imports are paid per command: C modules only (`_socket`, `_signal`, `_blake2`, `marshal`:
~1 ms; `socket`, `signal`, `json` and `hashlib` would add ~25 ms through `enum` and `re`, measured). Anything
unusual runs the command here as before: the interactive app and line mode, an unknown or abbreviated flag, a
closed standard stream, interpreter options (`-X`, `-W`, `-I`, `-E`, `-S`), `CODEXR_SERVER=0`, no private
runtime directory, a server still starting (the first command starts it in the background), or a server that
refuses (a resource limit it cannot take). A server is keyed by the interpreter, `sys.path`, the `PYTHON*` and
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

TYPE_CHECKING = False  # not `typing`'s: importing typing costs ~15 ms (it imports re); mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: The one-shot commands a server may run (the rest need this process: the app, line mode, login, replay, demo).
ONESHOT = frozenset({"snapshots", "exec", "threads", "rewind", "redo", "history", "config", "doctor"})
#: Global flags taking a value (`app/cli.py`'s `_add_global_flags`; tests/test_server.py checks they agree).
VALUE_FLAGS = frozenset({"-c", "--config", "--enable", "--disable", "-C", "--cd", "-m", "--model", "-s", "--sandbox",
                         "-a", "--ask-for-approval", "--codex-bin"})
#: Global flags without a value that a server may see before the command.
PLAIN_FLAGS = frozenset({"--json"})
#: Signals relayed to the worker while it runs.
RELAYED = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP, _signal.SIGQUIT)
#: Environment variables that change what Python imports or how it decodes: part of a server's key.
KEY_VARS = ("LANG", "LC_ALL", "LC_CTYPE")
#: Seconds a server with nothing to do waits for a command before it exits (`CODEXR_SERVER_IDLE` overrides).
IDLE_SECONDS = 900
PACKAGES = ("app", "snapshot_store", "config")
HEADER = 16
"""Bytes of the request's first message: b"CRX1" and the body's length as 12 decimal digits; the body is a
`marshal`led dict (read only from a peer of the same uid, SO_PEERCRED)."""
#: The longest socket path AF_UNIX takes (sun_path is 108 bytes with its NUL).
SOCKET_MAX = 107


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names when only known global flags come before it (else None: run here)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in VALUE_FLAGS:
            i += 2
        elif (arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in VALUE_FLAGS) or arg in PLAIN_FLAGS:
            i += 1
        elif arg.startswith("-"):
            return None
        else:
            return arg
    return None


def server_wanted(argv: Sequence[str]) -> bool:
    """Whether this command may run in the resident server."""
    if os.environ.get("CODEXR_SERVER", "1").strip().lower() in ("0", "off", "no", "false"):
        return False
    flags = sys.flags
    if (flags.dev_mode or flags.isolated or flags.ignore_environment or flags.no_site or flags.verbose
            or sys.warnoptions or getattr(sys, "_xoptions", None)):
        return False
    return command_of(argv) in ONESHOT


def runtime_dir(create: bool = True) -> str | None:
    """This user's private directory for server sockets (None when it is not private: then no server)."""
    base = os.environ.get("CODEXR_RUNTIME_DIR")
    if not base:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        base = os.path.join(xdg, "codexr") if xdg else f"/tmp/codexr-{os.getuid()}"
    if create:
        try:
            os.mkdir(base, 0o700)
        except FileExistsError:
            pass
        except OSError:
            return None
    try:
        st = os.lstat(base)
    except OSError:
        return None
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return base


def _hasher() -> Any:
    """blake2b from its C module (hashlib's import loads OpenSSL: ~5 ms)."""
    try:
        from _blake2 import blake2b
    except ImportError:
        from hashlib import blake2b
    return blake2b(digest_size=12)


def _code_stats(h: Any) -> bool:
    """Feed the stat of every codexr source file to `h` (False when a package is not beside this one)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    stack = []
    for pkg in PACKAGES:
        path = os.path.join(root, pkg)
        if not os.path.isfile(os.path.join(path, "__init__.py")):
            return False
        stack.append(path)
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith((".py", ".tcss")):
                    st = entry.stat(follow_symlinks=False)
                    h.update(f"{entry.path}\0{st.st_mtime_ns}\0{st.st_size}\0{st.st_ino}\n".encode(errors="replace"))
    return True


def server_key() -> str | None:
    """What a server must share with this process to run its command (None: no server for this codexr)."""
    h = _hasher()
    h.update(repr((sys.executable, sys.version, sys.path, os.getuid(), sys.getfilesystemencoding())).encode(
        errors="replace"))
    for name in sorted(os.environ):
        if name.startswith("PYTHON") or name in KEY_VARS:
            h.update(f"{name}={os.environ[name]}\n".encode(errors="replace"))
    for entry in sys.path[1:]:  # [0] is the script's or the current directory: its files come and go
        try:
            st = os.stat(entry or ".")
        except OSError:
            h.update(b"-\n")
        else:
            h.update(f"{st.st_ino}:{st.st_mtime_ns}\n".encode())
    if not _code_stats(h):
        return None
    return str(h.hexdigest())


def socket_path(create: bool = True) -> str | None:
    """The socket of the server for this codexr (None when none can be used)."""
    base = runtime_dir(create)
    key = server_key() if base else None
    if base is None or key is None:
        return None
    path = os.path.join(base, f"s-{key}.sock")
    return path if len(os.fsencode(path)) <= SOCKET_MAX else None


def take_lock(lock: str) -> int | None:
    """The fd holding `lock` (a server's `<socket>.lock`) exclusively, or None when someone holds it (a server,
    for its whole life, or one starting) or it cannot be opened (never through a symlink)."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def spawn(path: str) -> int | None:
    """Start a server on `path` in the background, unless one is starting (its pid, or None)."""
    fd = take_lock(path + ".lock")
    if fd is None:
        return None
    os.close(fd)  # released: the server takes it
    env = dict(os.environ)
    env["CODEXR_SERVER_SYS_PATH"] = marshal.dumps(sys.path).hex()
    code = "import sys, os, marshal; sys.path[:] = marshal.loads(bytes.fromhex(os.environ.pop(" \
           "'CODEXR_SERVER_SYS_PATH'))); from app.server import main; main(sys.argv[1])"
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, path + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)]
    try:
        return os.posix_spawn(sys.executable, [sys.executable, "-c", code, path], env,
                              file_actions=actions, setsid=True)
    except OSError:
        return None


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
    sys.stdout.flush()
    _signal.signal(sig, _signal.SIG_DFL)
    os.kill(os.getpid(), sig)
    return 128 + sig


def run_in_server(argv: Sequence[str]) -> int | None:
    """Run `argv` in the resident server: its exit code, or None when it must run here (nothing was done)."""
    path = socket_path()
    if path is None:
        return None
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            return None  # a closed standard stream: the worker could not take it
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        spawn(path)
        return None
    except OSError:
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


def _wait(sock: _socket.socket) -> int | None:
    """Pass signals to the worker until the server reports its exit; its exit code (None: it never started).

    Signals go straight to the worker through a pidfd (no reuse of a dead worker's pid can be hit, and a busy
    worker gets them at once). Ctrl+Z stops the worker too (SIGSTOP: it has no terminal, so a SIGTSTP would be
    discarded) and `fg` continues it.
    """
    worker: list[int] = []  # the worker's pidfd, once it said "ok"
    pending: list[int] = []

    def send(signum: int) -> None:
        try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
            _signal.pidfd_send_signal(worker[0], signum)
        except OSError:
            pass  # it has exited

    def relay(signum: int, _frame: object) -> None:
        if worker:
            send(signum)
        else:
            pending.append(signum)

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
    for sig, handler in handlers.items():
        if _signal.getsignal(sig) is not _signal.SIG_IGN:  # ignored here (nohup, a background job): not passed on
            _signal.signal(sig, handler)
    started = False
    status = exited = None
    buffered = b""
    try:
        while exited is None:  # until "exit" (the worker let go of all else), or EOF: the server's status is in
            chunk = sock.recv(4096)
            if not chunk:
                break
            *lines, buffered = (buffered + chunk).split(b"\n")
            for line in lines:
                word, _, rest = line.strip().partition(b" ")
                if word == b"ok":
                    started = True
                    try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
                        worker.append(os.pidfd_open(int(rest)))
                    except (OSError, ValueError):
                        pass  # gone already: its status follows
                    for signum in pending:
                        relay(signum, None)
                    pending.clear()
                elif word == b"status" and started:
                    status = int(rest)
                elif word == b"exit" and started:
                    exited = int(rest)
    except OSError:
        pass
    finally:
        sock.close()
        for sig, handler in handlers.items():
            if _signal.getsignal(sig) is handler:
                _signal.signal(sig, _signal.default_int_handler if sig == _signal.SIGINT else _signal.SIG_DFL)
        for fd in worker:
            os.close(fd)
    if not started:
        for signum in pending:  # it never ran: the signal is this process's again (it runs the command itself)
            _signal.raise_signal(signum)
        return None
    if status is not None:
        return _status(status)
    if exited is not None:
        return exited
    print("codexr: error: the resident server stopped before reporting how the command ended", file=sys.stderr)
    return 1


def main() -> int:
    """Entry point of the `codexr` console script."""
    argv = sys.argv[1:]
    if server_wanted(argv):
        code = run_in_server(argv)
        if code is not None:
            # Nothing here to clean up: skip the interpreter's own shutdown (~5-7 ms, measured under strace).
            for stream in (sys.stdout, sys.stderr):
                try:  # noqa: SIM105 - contextlib's import is a cost this module avoids
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os._exit(code & 0xFF)
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
