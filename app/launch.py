"""The `codexr` console script: a one-shot command runs in a fork of a resident codexr that has imported everything.

Why: every `codexr` command used to be a fresh Python that imported the SDK's 1,054 generated models, pygit2,
zstandard and pydantic before doing any work; that was most of `codexr exec` (4.7x `codex exec`) and of an
unchanged `snapshots capture` / a one-file `snapshots restore` (3.2x / 5x Git's), bench/HISTORY.md "Fourth pass".
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
import time  # built in, and imported by Python's start-up already

TYPE_CHECKING = False  # not `typing`'s: importing typing costs ~15 ms (it imports re); mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

#: The one-shot commands a server may run (the rest need this process: the app, line mode, login, replay, demo).
ONESHOT = frozenset({"snapshots", "exec", "threads", "rewind", "redo", "history", "config", "doctor"})
#: Global flags taking a value (`app/cli.py`'s `_add_global_flags`; tests/test_server.py checks they agree).
VALUE_FLAGS = frozenset({"-c", "--config", "--enable", "--disable", "-C", "--cd", "-m", "--model", "-s", "--sandbox",
                         "-a", "--ask-for-approval", "--codex-bin", "-i", "--image"})
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
#: Seconds a client waits for its worker to start (say `ok`) before it runs the command itself: a worker starts in
#: a fork's time, so only a stopped or starved server takes this long.
START_TIMEOUT = 3.0


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
    if server_off():
        return False
    flags = sys.flags
    if (flags.dev_mode or flags.isolated or flags.ignore_environment or flags.no_site or flags.verbose
            or sys.warnoptions or getattr(sys, "_xoptions", None)):
        return False
    if confinement_vars_set():
        return False  # a command Codex runs in its sandbox: never a server's (issue 17)
    return command_of(argv) in ONESHOT


def confinement_vars_set() -> bool:
    """Whether this process runs inside Codex's sandbox, by the variables Codex sets there (`CODEX_SANDBOX*`)."""
    from .confinement import in_codex_sandbox

    return in_codex_sandbox(os.environ)


def runtime_dir(create: bool = True) -> str | None:
    """This user's private directory for server sockets (None when there is none: then no server).

    `CODEXR_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/codexr`; nothing else (the old `/tmp/codexr-UID` was writable by
    every process of the user's that Codex sandboxes, issue 17). Used only where no other process can replace the
    socket: the directory is this user's, mode 700, not below `/tmp` or `$TMPDIR` (which Codex's sandbox lets a
    command write), and each directory above it belongs to root or this user and is writable by no one else, as
    OpenSSH requires of the files it trusts.
    """
    base = os.environ.get("CODEXR_RUNTIME_DIR")
    if not base:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if not xdg or not os.path.isabs(xdg):
            return None
        base = os.path.join(xdg, "codexr")
    parent = os.path.realpath(os.path.dirname(os.path.abspath(base)))
    if not safe_parents(parent):
        return None
    base = os.path.join(parent, os.path.basename(os.path.abspath(base)))
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


RUNTIME_HOW = ("set CODEXR_RUNTIME_DIR to a directory of yours, mode 700, not below /tmp or $TMPDIR, whose parents "
               f"only root or you can write (e.g. /run/user/{os.getuid()}/codexr)")
"""How to give codexr a runtime directory, for the lines that say there is none."""


def server_off() -> bool:
    """Whether the user turned the resident server off (`CODEXR_SERVER=0`)."""
    return os.environ.get("CODEXR_SERVER", "1").strip().lower() in ("0", "off", "no", "false")


def runtime_problem() -> str | None:
    """Why `runtime_dir` would find no directory (None: it has one, or makes it on first use), without making it:
    `server status` and `doctor` must not say "not available" merely because no server ran yet."""
    base = os.environ.get("CODEXR_RUNTIME_DIR")
    if not base:
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if not xdg:
            return f"neither XDG_RUNTIME_DIR nor CODEXR_RUNTIME_DIR is set; {RUNTIME_HOW}"
        if not os.path.isabs(xdg):
            return f"XDG_RUNTIME_DIR={xdg} is not an absolute path; {RUNTIME_HOW}"
        base = os.path.join(xdg, "codexr")
    parent = os.path.realpath(os.path.dirname(os.path.abspath(base)))
    if not safe_parents(parent):
        return (f"{parent} is missing, lies below a temporary directory, or a directory above it is writable by "
                f"others; {RUNTIME_HOW}")
    full = os.path.join(parent, os.path.basename(os.path.abspath(base)))
    try:
        st = os.lstat(full)
    except FileNotFoundError:
        return None  # the first server makes it (mode 700)
    except OSError as exc:
        return f"{full}: {exc.strerror}; {RUNTIME_HOW}"
    import stat

    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return f"{full} is not a directory of yours with mode 700; {RUNTIME_HOW}"
    return None


def server_unavailable() -> str | None:
    """Why no resident server can serve this codexr here, in words a user can act on (None: one can)."""
    why = runtime_problem()
    if why is not None:
        return f"no runtime directory only you can write: {why}"
    key = server_key()
    if key is None:
        return "codexr is not installed as packages beside each other (app, snapshot_store, config)"
    base = os.path.abspath(os.environ.get("CODEXR_RUNTIME_DIR")
                           or os.path.join(os.environ.get("XDG_RUNTIME_DIR", ""), "codexr"))
    base = os.path.join(os.path.realpath(os.path.dirname(base)), os.path.basename(base))  # as runtime_dir has it
    if len(os.fsencode(os.path.join(base, f"s-{key}.sock"))) > SOCKET_MAX:
        return (f"a socket path in {base} would be longer than {SOCKET_MAX} bytes; set CODEXR_RUNTIME_DIR to a "
                "shorter one")
    return None


def safe_parents(real: str) -> bool:
    """Whether `real` (a resolved path) and every directory above it belong to root or this user, are writable by
    no one else, and are not a temporary directory a sandboxed command may write."""
    temps = []
    for tmp in ("/tmp", "/var/tmp", "/dev/shm", os.environ.get("TMPDIR") or "/tmp"):
        try:
            st = os.stat(tmp)
        except OSError:
            continue
        temps.append((st.st_dev, st.st_ino))
    uid = os.getuid()
    path = real
    while True:
        try:
            st = os.lstat(path)
        except OSError:
            return False
        if st.st_uid not in (0, uid) or st.st_mode & 0o022 or (st.st_dev, st.st_ino) in temps:
            return False
        if path == "/":
            return True
        path = os.path.dirname(path)


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
                    h.update(f"{entry.path}\0{st.st_mtime_ns}\0{st.st_ctime_ns}\0{st.st_size}\0{st.st_ino}\n".encode(
                        errors="replace"))  # ctime: an edit that puts size and mtime back still shows
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
    # Absolute: the server runs in "/" (it must hold no caller's directory), yet imports what this process would.
    env["CODEXR_SERVER_SYS_PATH"] = marshal.dumps([os.path.abspath(p) if p else os.getcwd() for p in sys.path]).hex()
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
    from . import confinement

    try:
        _pid, uid, _gid = _peercred(sock)
    except OSError:
        return False
    if uid != os.getuid():
        return False
    peer = confinement.peer(sock)
    if peer is None or peer[1] != confinement.fingerprint("self"):
        return False
    try:
        fd = os.open(path + ".lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        named = os.read(fd, 32).strip()
        owner = os.fstat(fd).st_uid
    finally:
        os.close(fd)
    return owner == os.getuid() and named.isdigit() and int(named) == peer[0]


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
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            return None  # a closed standard stream: the worker could not take it
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
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    sys.exit(main())
