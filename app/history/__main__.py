"""`python -m app.history refresh HOME`: the detached index refresh a cold search starts."""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from pathlib import Path

from .index import index_path
from .store import HistoryStore


def main(argv: list[str]) -> int:
    """Refresh the index of one CODEX_HOME, unless another refresh already runs."""
    if len(argv) != 2 or argv[0] != "refresh":
        print("usage: python -m app.history refresh CODEX_HOME", file=sys.stderr)
        return 2
    home = Path(argv[1])
    lock = index_path(home).with_suffix(".lock")
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        return 1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another refresh is at it
    with contextlib.suppress(OSError):
        os.nice(10)
    store = HistoryStore(home, background=False)
    try:
        store.refresh()
    finally:
        store.close()
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
