"""Thread ids as users type them: the full id, or a unique prefix of 4+ characters (as snapshot and history ids);
and the shortest such prefix of each id, which `codexr threads` and `history list` show.

Without this a short id reached Codex, whose answer was its raw parse error ("invalid length: expected length 32
for simple format..."); now a prefix that names no thread, or several, is one line (exit 2), nothing changed.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import SessionError

_FULL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}")
_PREFIX = re.compile(r"[0-9a-f][0-9a-f-]{3,}")
SHOWN = 5
"""Candidates an ambiguous prefix names."""


def resolve_thread_id(ident: str, known: Callable[[], Iterable[str]]) -> str:
    """The thread `ident` names: a full id as it is (Codex says whether it exists), else the one id of `known()`
    it begins; SessionError (one line) when it is no id, or names no thread or several."""
    key = ident.strip().lower()
    if _FULL.fullmatch(key):
        return key
    if not _PREFIX.fullmatch(key):
        raise SessionError(f"{ident!r} is not a thread id (give its id or 4+ of its first characters)")
    hits = sorted({k.lower() for k in known() if k.lower().startswith(key)})
    if not hits:
        raise SessionError(f"no thread id starts with {ident!r} (`codexr threads --all` lists them)")
    if len(hits) > 1:
        shown = ", ".join(hits[:SHOWN]) + (", …" if len(hits) > SHOWN else "")
        raise SessionError(f"thread id {ident!r} is ambiguous: it begins {len(hits)} threads: {shown}")
    return hits[0]


def unique_prefixes(ids: Iterable[str], among: Iterable[str], least: int = 4) -> dict[str, str]:
    """Each of `ids` cut to the shortest prefix (of `least`+ characters) that begins no other id of `among`, the
    prefix a user can type for it. UUIDv7 ids made minutes apart share their first 9-12 characters, so "4+"
    alone misleads: these show what is really needed. (Sorted, an id's nearest rivals are its neighbours.)"""
    everyone = sorted({i.lower() for i in among} | {i.lower() for i in ids})
    need: dict[str, int] = {}
    for a, b in itertools.pairwise(everyone):
        n = 0
        while n < min(len(a), len(b)) and a[n] == b[n]:
            n += 1
        need[a] = max(need.get(a, 0), n + 1)
        need[b] = max(need.get(b, 0), n + 1)
    return {i: i[:max(least, need.get(i.lower(), 0))] for i in ids}


def known_on_disk(home: Path) -> list[str]:
    """Thread ids without starting Codex (for `codexr resume ID`, before the app draws): every rollout Codex wrote,
    archived too (the files `thread/list` reads), and every codexr sidecar."""
    from ..history.catalog import discover
    from ..history.rollout import Skipped

    ids = [f.thread_id for f in discover(home, Skipped())]
    sidecars = home / "file_snapshots" / "refs" / "threads"
    with contextlib.suppress(OSError):
        ids += [p.stem for p in sidecars.glob("*.json")]
    return ids
