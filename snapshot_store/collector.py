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

_lock = threading.Lock()
_holders = 0  # threads inside `held_off` now
_resume = False  # the collector was running when the first of them came in


@contextlib.contextmanager
def held_off() -> Iterator[None]:
    """No automatic collection inside (nested and concurrent uses resume it once the last one leaves)."""
    global _holders, _resume
    with _lock:
        if _holders == 0:
            _resume = gc.isenabled()
            gc.disable()
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0 and _resume:
                gc.enable()
