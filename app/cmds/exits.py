"""How a command ends (its exit codes, a death by the stopping signal): shared by the CLI and its command modules."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from snapshot_store import RestoreResult

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


def restore_exit(res: RestoreResult | None, what: str = "restore") -> int:
    """0, or 3 (one line on stderr) when planned changes were not made; a signal after the last change ends it so.

    The safety id still undoes whatever was done; the listing above (or `failed` in --json) names the paths.
    """
    code = 0
    if res is not None and res.failed:
        print(f"codexr: error: the {what} is incomplete: {len(res.failed)} planned change(s) were not made "
              f"(listed as left: could not …, or changed meanwhile)", file=sys.stderr)
        code = EXIT_INCOMPLETE
    if res is not None and res.late_signal is not None:
        print(f"codexr: interrupted after the {what} had finished: it stands (safety snapshot "
              f"{str(res.safety_id)[:12]} undoes it)", file=sys.stderr)
        return end_by_signal(res.late_signal)
    return code
