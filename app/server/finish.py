"""How a one-shot command's process ends: what the interpreter does at exit that a command relies on, then no more.

The resident server's worker has always ended so (`os._exit` after this), and a command run without a server now
does too: Python's own teardown, which frees every module and object one by one, took ~9-10 ms of an unchanged
`snapshots capture` (73 ms in all; strace shows no system call in it), bench/README.md "Issue 35's rows".
"""

from __future__ import annotations

import contextlib
import sys


def finish(code: int) -> int:
    """Join non-daemon threads, run atexit handlers, flush the streams (Python's exit code 120 if that fails).

    `threading._shutdown` and `atexit._run_exitfuncs` are private, but they are what the interpreter itself calls
    at exit (Py_FinalizeEx); without them a command would skip what its process does when it ends.
    """
    import atexit

    threading = sys.modules.get("threading")  # never imported: no thread was started
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        with contextlib.suppress(Exception):
            shutdown()
    with contextlib.suppress(Exception):
        atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        if stream is None:  # a stream closed before Python started: nothing to flush, as at Python's own exit
            continue
        try:
            stream.flush()
        except Exception:
            if stream is sys.stdout:
                code = 120
    return code
