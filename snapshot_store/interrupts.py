"""Hold the signals that end a command while a restore changes files: it stops between two steps and rolls back.

Without this, SIGINT (a KeyboardInterrupt) or SIGTERM/SIGHUP (death) hit a restore half-way and left the
workspace half-restored, with a journal the next command finished: the opposite of what Ctrl+C asks.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

#: The signals that ask a command to stop (Ctrl+C, `kill`, a closed terminal).
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class StopRequest:
    """Ctrl+C as a front end's key: no signal reaches a restore run on a worker thread (the terminal app's Ctrl+C is a
    key, and Python delivers signals to the main thread only), so the front end asks through this, from any thread.

    The first restore run under it (`stoppable`) answers it as it answers a held SIGINT: it stops between two steps
    and rolls back (Interrupted), or, asked after its last step, stands (`late_signal`). A flow's later restores (paths
    outside the workspace) do not answer it: they go with what the first did.
    """

    def __init__(self) -> None:
        self.signum: int | None = None  # asked (the signal it stands for)
        self.taken = False  # a restore under it has begun: later ones do not answer it
        self.ended = False  # that restore's steps are over: asked now, it stands

    def request(self, signum: int = signal.SIGINT) -> None:
        """Ask the restore to stop (any thread; a second ask changes nothing)."""
        if self.signum is None:
            self.signum = signum


_current = threading.local()


@contextlib.contextmanager
def stoppable(request: StopRequest) -> Iterator[StopRequest]:
    """Restores this thread runs within the block answer `request` (the first of them: see StopRequest)."""
    before = getattr(_current, "request", None)
    _current.request = request
    try:
        yield request
    finally:
        _current.request = before


class HeldSignals:
    """While entered (main thread only), a stopping signal is only noted in `pending`; the caller acts on it.

    A signal ignored on entry (nohup, a background job) stays ignored. Off the main thread nothing can be
    installed: signals then act as they always do (Python delivers them to the main thread only). A front end's
    StopRequest (`stoppable`) counts as a held signal too, on any thread.
    """

    def __init__(self) -> None:
        self._noted: int | None = None
        self._old: dict[int, Any] = {}
        self._request: StopRequest | None = None

    @property
    def pending(self) -> int | None:
        """The stopping signal noted (or asked for by the front end's request), None while none came."""
        if self._noted is None and self._request is not None:
            return self._request.signum
        return self._noted

    def _note(self, signum: int, _frame: FrameType | None) -> None:
        """The first signal counts; a second Ctrl+C while rolling back must not make things worse."""
        if self._noted is None:
            self._noted = signum

    def __enter__(self) -> HeldSignals:
        request = getattr(_current, "request", None)
        if isinstance(request, StopRequest) and not request.taken:
            request.taken = True
            self._request = request
        if threading.current_thread() is threading.main_thread():
            for sig in STOPPING:
                old = signal.getsignal(sig)
                if old is signal.SIG_IGN:
                    continue
                self._old[sig] = signal.SIG_DFL if old is None else old
                signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._request is not None:
            self._request.ended = True
        for sig, old in self._old.items():
            signal.signal(sig, old)
        self._old.clear()
