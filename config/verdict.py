"""`defaults_apply`'s answer kept for a config.toml that has not changed since it was parsed.

Every one-shot command asks whether Codex's `config.toml` sets a codexr key; with a config.toml (every Codex user
has one) that was tomllib's import and the parse: ~4-6 ms of a ~50 ms one-shot `snapshots capture` without a
server (issue 35's row (e)). The answer is kept in `config.verdict` (for the CODEX_HOME last asked about: one small
file, never many) in this user's private runtime directory (snapshot_store/rundir.py: mode 700, which Codex's
sandbox cannot write, so a sandboxed command cannot plant an answer), keyed by the file's device, inode, size, mtime
and ctime, as Git trusts its index: an edit or a replacement moves its ctime, which no one can set back. A file
changed too recently to trust its timestamps is parsed again next time, as is a file that changed while it was
read; no place to keep the answer, or a damaged one, only means the file is parsed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path

from snapshot_store.rundir import runtime_dir

VERSION = 1
#: A file whose mtime or ctime is this close to now may change again within the same timestamp: not kept.
#: (Two seconds: the coarsest timestamps a local file system keeps, FAT's.)
RACY_NS = 2_000_000_000


def stat_key(st: os.stat_result) -> list[int]:
    """What identifies one version of the file."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _path() -> str | None:
    """One file per user and runtime directory, for the CODEX_HOME last asked about: kept small, never many."""
    base = runtime_dir()
    return None if base is None else os.path.join(base, "config.verdict")


def recall(home: Path, key: list[int]) -> bool | None:
    """The answer kept for the config.toml version `key` (None: none kept, or for another version)."""
    path = _path()
    if path is None:
        return None
    try:
        with open(path, "rb") as f:
            kept = json.loads(f.read(4096))
        if kept["v"] == VERSION and kept["home"] == str(home) and kept["key"] == key:
            answer = kept["apply"]
            return answer if isinstance(answer, bool) else None
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return None


def remember(home: Path, key: list[int], answer: bool) -> None:
    """Keep `answer` for the config.toml version `key`, unless its timestamps are too recent to trust."""
    if max(key[3], key[4]) >= time.time_ns() - RACY_NS:
        return
    path = _path()
    if path is None:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"v": VERSION, "home": str(home), "key": key, "apply": answer}, f)
        os.replace(tmp, path)  # not synced: after a crash it is missing or whole, and missing means parse
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
