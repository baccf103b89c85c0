"""Where this user's resident server lives and how it starts (runtime directory, key, socket, lock, spawn), and
whether the user wants change monitors (the store starts them, in the same runtime directory).

Shared by the console script (app/launch.py), the server (app/server/server.py) and `codexr server` / `doctor`, so
none of them imports another's entry point. The runtime directory and its lock files are the store's
(snapshot_store/rundir.py: its change monitors live there too). Imports: C modules, `os` and that module only (the
store's package imports only its errors first), as app/launch.py's per-command cost requires.
"""

from __future__ import annotations

import marshal
import os
import sys

from snapshot_store.rundir import SOCKET_MAX as SOCKET_MAX
from snapshot_store.rundir import checked_parent, hasher, runtime_base
from snapshot_store.rundir import lock_names as lock_names
from snapshot_store.rundir import runtime_dir as runtime_dir
from snapshot_store.rundir import safe_parents as safe_parents
from snapshot_store.rundir import take_lock as take_lock

TYPE_CHECKING = False  # not `typing`'s: importing typing costs ~15 ms (it imports re); mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

PACKAGES = ("app", "snapshot_store", "config")
#: Environment variables that change what Python imports or how it decodes: part of a server's key.
KEY_VARS = ("LANG", "LC_ALL", "LC_CTYPE")
HEADER = 16
"""Bytes of the request's first message: b"CRX1" and the body's length as 12 decimal digits; the body is a
`marshal`led dict (read only from a peer of the same uid, SO_PEERCRED)."""


RUNTIME_HOW = ("set CODEXR_RUNTIME_DIR (or XDG_CACHE_HOME, whose codexr/ is used without XDG_RUNTIME_DIR) to a "
               "directory of yours, mode 700, not below /tmp or $TMPDIR, whose parents only root or you can write "
               f"(e.g. /run/user/{os.getuid()}/codexr)")
"""How to give codexr a runtime directory, for the lines that say there is none."""


def monitors_wanted() -> bool:
    """Whether the user left the change monitor on (`CODEXR_MONITOR=0` turns it off): what the app tells the store
    (Capturer.use_monitors)."""
    return os.environ.get("CODEXR_MONITOR", "1").strip().lower() not in ("0", "off", "no", "false")


def runtime_problem() -> str | None:
    """Why `runtime_dir` would find no directory (None: it has one, or makes it on first use), without making it:
    `server status` and `doctor` must not say "not available" merely because no server ran yet."""
    base = runtime_base()
    if base is None:
        return f"neither XDG_RUNTIME_DIR nor CODEXR_RUNTIME_DIR is set, and there is no home directory; {RUNTIME_HOW}"
    checked = checked_parent(base)
    if not safe_parents(checked):
        return (f"{checked} is missing, lies below a temporary directory, or a directory above it is writable by "
                f"others; {RUNTIME_HOW}")
    parent = os.path.realpath(os.path.dirname(os.path.abspath(base)))
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


def platform_problem() -> str | None:
    """Why this system cannot run the resident server at all (None: it can). It is written for Linux: its fork
    checks the caller through SO_PEERCRED and /proc, and it waits on pidfds and a pipe2 pipe; elsewhere (macOS)
    every command runs by itself until it is ported, whatever the runtime directory."""
    import _socket  # the C module: the console script decides before it imports any Python one

    missing = [name for name, there in (("os.pipe2", hasattr(os, "pipe2")),
                                        ("os.pidfd_open", hasattr(os, "pidfd_open")),
                                        ("socket.SO_PEERCRED", hasattr(_socket, "SO_PEERCRED")),
                                        ("/proc", os.path.isdir("/proc/self/fd"))) if not there]
    if sys.platform != "linux":
        return f"the resident server runs on Linux only for now (this is {sys.platform})"
    if missing:
        return f"the resident server needs {', '.join(missing)}, which this Python lacks"
    return None


def server_unavailable() -> str | None:
    """Why no resident server can serve this codexr here, in words a user can act on (None: one can)."""
    why = platform_problem()
    if why is not None:
        return why
    why = runtime_problem()
    if why is not None:
        return f"no runtime directory only you can write: {why}"
    key = server_key()
    if key is None:
        return "codexr is not installed as packages beside each other (app, snapshot_store, config)"
    base = os.path.abspath(runtime_base() or "")
    base = os.path.join(os.path.realpath(os.path.dirname(base)), os.path.basename(base))  # as runtime_dir has it
    if len(os.fsencode(os.path.join(base, f"s-{key}.sock"))) > SOCKET_MAX:
        return (f"a socket path in {base} would be longer than {SOCKET_MAX} bytes; set CODEXR_RUNTIME_DIR to a "
                "shorter one")
    return None


def _code_stats(h: Any) -> bool:
    """Feed the stat of every codexr source file to `h` (False when a package is not beside this one)."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # app/server/runtime.py
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
    h = hasher()
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
    if platform_problem() is not None:
        return None
    base = runtime_dir(create)
    key = server_key() if base else None
    if base is None or key is None:
        return None
    path = os.path.join(base, f"s-{key}.sock")
    return path if len(os.fsencode(path)) <= SOCKET_MAX else None


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
           "'CODEXR_SERVER_SYS_PATH'))); from app.server.server import main; main(sys.argv[1])"
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0),
               (os.POSIX_SPAWN_OPEN, 2, path + ".log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)]
    try:
        return os.posix_spawn(sys.executable, [sys.executable, "-c", code, path], env,
                              file_actions=actions, setsid=True)
    except OSError:
        return None
