"""How a command ends (its exit codes, a death by the stopping signal): shared by the CLI and its command modules."""

from __future__ import annotations

import contextlib
import os
import sys

EXIT_USAGE = 2
#: A restore, rewind or redo that did not make every change it planned (a path it could not write or delete,
#: or one changed meanwhile): the rest was done, the line and `--json` name what was not.
EXIT_INCOMPLETE = 3


def end_by_signal(signum: int) -> int:
    """End as the stopping signal would: 130 for Ctrl+C (as before); SIGTERM and SIGHUP kill this process with it."""
    import signal

    if signum == signal.SIGINT:
        return 130
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
    return 128 + signum  # not reached: the default action of both is to terminate
