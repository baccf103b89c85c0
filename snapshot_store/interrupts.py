"""Hold the signals that end a command while a restore changes files: it stops between two steps and rolls back.

Without this, SIGINT (a KeyboardInterrupt) or SIGTERM/SIGHUP (death) hit a restore half-way and left the
workspace half-restored, with a journal the next command finished: the opposite of what Ctrl+C asks.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

#: The signals that ask a command to stop (Ctrl+C, `kill`, a closed terminal).
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class HeldSignals:
    """While entered (main thread only), a stopping signal is only noted in `pending`; the caller acts on it.

    A signal ignored on entry (nohup, a background job) stays ignored. Off the main thread nothing can be
    installed: signals then act as they always do (Python delivers them to the main thread only).
    """

    def __init__(self) -> None:
        self.pending: int | None = None
        self._old: dict[int, Any] = {}

    def _note(self, signum: int, _frame: FrameType | None) -> None:
        """The first signal counts; a second Ctrl+C while rolling back must not make things worse."""
        if self.pending is None:
            self.pending = signum

    def __enter__(self) -> HeldSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in STOPPING:
                old = signal.getsignal(sig)
                if old is signal.SIG_IGN:
                    continue
                self._old[sig] = signal.SIG_DFL if old is None else old
                signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
