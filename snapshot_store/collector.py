"""Python's cyclic garbage collector held off while a big acyclic structure is built (a decoded map, a loaded index).

Each container a decoder makes counts toward the next young collection, and every collection triggered while ~100,000
new dicts, lists and tuples pile up traverses them again as they age: decoding the 100,000-entry record took 0.47-0.60 s
with the collector running, 0.27 s with it held off (this machine, `read_record` of the generated tree's first capture).
What is built here holds no reference cycle, so nothing is left for the collector to find; it runs as usual after.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_switch = threading.Lock()  # a look at the collector and the switch that follows are one step for other threads


@contextlib.contextmanager
def held_off() -> Iterator[None]:
    """No automatic collection inside; the collector runs again on leaving if it ran on entering. Nested uses leave it
    to the outermost; a use in another thread may resume it early (only speed is at stake: nothing built here needs
    the collector), and no count is kept for the process (tests/test_process_state.py)."""
    with _switch:
        running = gc.isenabled()
        gc.disable()
    try:
        yield
    finally:
        if running:
            with _switch:
                gc.enable()
