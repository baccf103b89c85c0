"""Full garbage collections while nobody types: one mid-stream stalled a key 50-200 ms (bench_tui.py).

After start-up the app freezes what is alive (`gc.freeze()`), but the objects a session makes later (blocks, the
strips Textual caches, the SDK's models of each notification) still fill the oldest generation, and the interpreter
collected it in full every few seconds while a command streamed: 9 full passes in one streaming round, 50-195 ms
each on a loaded 2-core machine (timed with `gc.callbacks`), the largest of the keystroke-echo spikes. Here the
interpreter keeps its young collections (a few ms) and the app takes the full ones, when no key came for `IDLE_S`,
or at the latest every `MAX_WAIT_S` so memory stays bounded however long the user types.
"""

from __future__ import annotations

import gc
import time

IDLE_S = 1.0  # no key for this long: nobody is typing
MIN_GAP_S = 5.0  # full passes at most this often while idle (each one walks everything the session made)
MAX_WAIT_S = 60.0  # a full pass at least this often when there is something to collect, typing or not
MIN_YOUNG_PASSES = 10  # the interpreter's own trigger: a full pass after this many middle-generation ones
NEVER = 1 << 30  # a threshold the interpreter's count never reaches


class Collector:
    """Decides when the oldest generation is collected; `tick` is called by a UI timer, `typed` on each key."""

    def __init__(self) -> None:
        self.last_input = self.last_full = time.monotonic()
        self.paced = False
        self._threshold = gc.get_threshold()  # the interpreter's, given back by release()

    def pace(self) -> None:
        """Take the full collections over from the interpreter (the young generations stay automatic)."""
        if self.paced:
            return
        self._threshold = gc.get_threshold()
        young, middle, _ = self._threshold
        gc.set_threshold(young, middle, NEVER)
        self.paced = True

    def release(self) -> None:
        """Give the full collections back to the interpreter (the app is gone)."""
        if self.paced:
            gc.set_threshold(*self._threshold)
            self.paced = False

    def typed(self) -> None:
        """A key (or paste) arrived."""
        self.last_input = time.monotonic()

    def due(self) -> bool:
        """A full pass is due now: there is something to collect, and nobody types or it waited too long."""
        if not self.paced or gc.get_count()[2] < MIN_YOUNG_PASSES:
            return False
        now = time.monotonic()
        waited = now - self.last_full
        return waited >= MAX_WAIT_S or (now - self.last_input >= IDLE_S and waited >= MIN_GAP_S)

    def tick(self) -> bool:
        """Collect in full if due; True when it did."""
        if not self.due():
            return False
        gc.collect()
        self.last_full = time.monotonic()
        return True
