"""A file's stat as a key, and when a stat is too fresh to vouch for the content (the racy-timestamp rule)."""

from __future__ import annotations

import os

SECOND_NS = 1_000_000_000
FINE_WINDOW_NS = 100_000_000  # 100 ms: far above ext4/xfs/btrfs timestamp ticks
COARSE_WINDOW_NS = 2 * SECOND_NS  # file systems with whole-second (or FAT's 2 s) stamps

Key = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, ino, mode


#: The st_modes almost every file and directory has, each as one int object: a read-only table (snapshot_store keeps
#: no process-wide state that grows, tests/test_process_state.py); a rarer mode keeps the int its stat made.
_MODES: dict[int, int] = {m: m for m in (0o120777, *(kind | p for kind in (0o100000, 0o040000) for p in (
    0o644, 0o755, 0o600, 0o664, 0o775, 0o700, 0o444, 0o555, 0o640, 0o750, 0o666, 0o777)))}


def stat_key(st: os.stat_result) -> Key:
    """What must stay equal for a cached hash to remain valid.

    Its ints shared where equal: a stat makes a new int of each field, and a walk keeps a key per file (a file written
    once has its ctime equal to its mtime, and the modes are a few); ~6 MB of 100,000 keys (measured)."""
    mtime, ctime, mode = st.st_mtime_ns, st.st_ctime_ns, st.st_mode
    if ctime == mtime:
        ctime = mtime
    return (st.st_size, mtime, ctime, st.st_ino, _MODES.get(mode, mode))


def is_racy(key: Key, started_ns: int) -> bool:
    """Modified too close to (or after) the capture start to trust the timestamp."""
    newest = max(key[1], key[2])
    window = COARSE_WINDOW_NS if key[1] % SECOND_NS == 0 else FINE_WINDOW_NS
    return newest >= started_ns - window
