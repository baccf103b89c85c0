"""Why every process a test starts gets a terminal's signal defaults, however the suite itself was started.

A shell starts a background job of a script (`cmd &`, a CI runner's step) with SIGINT and SIGQUIT ignored, `nohup`
adds SIGHUP, and a runner may leave signals blocked. Ignored and blocked signals survive fork and exec, so every
codexr, Codex, pexpect or tmux process a test started inherited them: a `codexr` that ignores Ctrl+C (as it should
when a user's script runs it in the background) failed every test of Ctrl+C. A signal with a handler is reset to its
default by exec, so the runner keeps ignoring what its caller asked it to ignore (a no-op handler) while whatever it
starts, on any spawn path (subprocess, asyncio, pexpect, tmux's server), begins as a terminal's job does.
"""

from __future__ import annotations

import signal
from types import FrameType

#: Ignored by Python itself at start-up (and reset by `subprocess` in its children): not the caller's doing.
PYTHONS_OWN = frozenset({signal.SIGPIPE, signal.SIGXFSZ})
#: Signals whose default action is already to ignore them: their default is the same for the runner.
IGNORED_BY_DEFAULT = frozenset({signal.SIGCHLD, signal.SIGURG, signal.SIGWINCH, signal.SIGCONT})


def _still_ignored(_signum: int, _frame: FrameType | None) -> None:
    """The runner goes on ignoring the signal; being a handler, exec resets it to the default in every child."""


def give_children_default_signals() -> None:
    """Unblock every signal and turn each one the caller ignored into a handler, so children start with defaults."""
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for sig in signal.valid_signals():
        if sig in PYTHONS_OWN or sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if signal.getsignal(sig) is signal.SIG_IGN:
                signal.signal(sig, signal.SIG_DFL if sig in IGNORED_BY_DEFAULT else _still_ignored)
        except (OSError, ValueError):  # a signal the C library keeps for itself
            continue
