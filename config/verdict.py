"""`defaults_apply`'s answer kept for a config.toml that has not changed since it was parsed.

Every one-shot command asks whether Codex's `config.toml` sets a codexr key; with a config.toml (every Codex user
has one) that was tomllib's import and the parse: ~4-6 ms of a ~50 ms one-shot `snapshots capture` without a
server (issue 35's row (e)). The answer is kept in the store's cache directory (`CODEX_HOME/file_snapshots/cache/
config.verdict`, snapshot_store/FORMAT.md), keyed by the file's device, inode, size, mtime and ctime, as Git trusts
its index: an edit or a replacement moves its ctime, which no one can set back. There it has the store's own trust:
Codex's sandbox keeps CODEX_HOME read-only even where a workspace holds it, so a sandboxed command can plant no
answer that would have codexr ignore the user's settings (a user's cache directory can lie inside a workspace: its
home). A file changed too recently to trust its timestamps is parsed again next time, as is one that changed while
it was read; no store yet, or a damaged answer, only means the file is parsed.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import time
from pathlib import Path

VERSION = 1
#: A file whose mtime or ctime is this close to now may change again within the same timestamp: not kept.
#: (Two seconds: the coarsest timestamps a local file system keeps, FAT's.)
RACY_NS = 2_000_000_000


def stat_key(st: os.stat_result) -> list[int]:
    """What identifies one version of the file."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def key_of(path: Path) -> list[int] | None:
    """The version of the config file at `path` (None: no regular file there to keep an answer for)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return stat_key(st) if stat.S_ISREG(st.st_mode) else None


def _path(home: Path) -> str:
    """Where the answer for `home`'s config.toml lives (its directory exists once the store was opened there)."""
    return os.path.join(home, "file_snapshots", "cache", "config.verdict")


def recall(home: Path, key: list[int]) -> bool | None:
    """The answer kept for the config.toml version `key` (None: none kept, or for another version)."""
    try:
        fd = os.open(_path(home), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as f:
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
    path = _path(home)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump({"v": VERSION, "home": str(home), "key": key, "apply": answer}, f)
        os.replace(tmp, path)  # not synced: after a crash it is missing or whole, and missing means parse
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
