"""The standard descriptors a command starts with: /dev/null where one was closed before Python started.

Both entries call it first (the console script's launcher, `python -m app.cli`). Imports: `os` and `sys` only, as
app/launch.py's per-command cost requires.
"""

from __future__ import annotations

import os
import sys


def open_standard_fds() -> None:
    """/dev/null on a standard descriptor closed before Python started (`codexr … 2>&-`, a daemon's child).

    Left closed, the first file the command opened took its number: with stderr closed, a lock or store file became
    fd 2, where a child process (git) writes its errors, and the capture failed with exit 1 (EBADF when the stream
    Python had no object for was closed again). Python leaves `sys.std*` None then; they get a stream on /dev/null
    (`print(file=None)` would write to stdout), so output meant for a closed stream goes nowhere, as before.
    """
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDWR)  # the lowest free number: `fd` itself, the ones below it being open
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, "r" if fd == 0 else "w", closefd=False))  # noqa: SIM115 - lives as sys.std*
