"""Names as the workspace's volume sees them: whether it folds letter case and Unicode form (APFS and HFS+ by
default, exFAT, NTFS), found by a probe in the workspace and remembered per workspace and device.

On such a volume one file answers to several spellings (`lstat("readme.md")` finds `Readme.md`), so a store that
keys files by exact names must count a name as present only under the spelling its directory lists, and must
never delete a name whose fold-mate it writes or keeps (FORMAT.md §4.4). On a volume that folds nothing (ext4,
and every Linux file system without casefold) nothing here changes what a capture or a restore does.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import unicodedata
from pathlib import Path

from .records import record

PROBE_PREFIX = ".codexr-tmp-probe-"  # a temp name: never captured, and swept like the restore's own temps


def fold(name: str) -> str:
    """The key under which a folding volume takes two names for one (NFD of the case-folded NFD form)."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


@record(frozen=True)
class Folding:
    """What the volume takes for one name: names differing only in letter case, only in Unicode form."""

    case: bool = False
    unicode: bool = False

    @property
    def any(self) -> bool:
        return self.case or self.unicode

    def key(self, path: str) -> str:
        """A path's key on this volume: the same for every spelling that reaches the same file."""
        if self.case:
            return fold(path)
        return unicodedata.normalize("NFD", path) if self.unicode else path


EXACT = Folding()


def probe(root: Path, may_write: bool = True) -> Folding | None:
    """Look for an entry of `root` under another spelling: another letter case, another Unicode form.

    Asked of the names `root` already holds, so a look writes nothing; only a workspace none of whose names has a
    letter gets a file created and removed again (`probe_by_writing`; None instead when `may_write` is off). Where
    no name tells the Unicode form apart, a volume is taken to fold forms exactly when it folds case (APFS, HFS+
    and ext4's casefold fold both), and on Darwin always (APFS is normalization-insensitive even when
    case-sensitive).
    """
    case: bool | None = None
    unicode: bool | None = None
    with contextlib.suppress(OSError), os.scandir(root) as it:
        for de in it:
            if case is None and de.name.swapcase() != de.name:
                case = _same(root, de.name, de.name.swapcase())
            nfd = unicodedata.normalize("NFD", de.name)
            other = nfd if nfd != de.name else unicodedata.normalize("NFC", de.name)
            if unicode is None and other != de.name:
                unicode = _same(root, de.name, other)
            if case is not None and unicode is not None:
                break
    if case is None:
        return probe_by_writing(root) if may_write else None
    if unicode is None:
        unicode = case or sys.platform == "darwin"
    return Folding(case, unicode)


def _same(root: Path, name: str, other: str) -> bool:
    """Whether `other` reaches the very entry `name` is."""
    a, b = _ident(root / name), _ident(root / other)
    return a is not None and a == b


def probe_by_writing(root: Path) -> Folding:
    """Create a file in `root` under one spelling and look for it under the others (then remove it).

    A workspace that cannot be written to is judged by the platform's answer (`pathconf` on Darwin), else as
    exact: nothing can be restored into it anyway.
    """
    token = os.urandom(6).hex()  # not the secrets module: its import (hmac, random) was ~4.5 ms of every capture
    name = f"{PROBE_PREFIX}{token}-\u00c9"  # "É", composed (NFC)
    path = root / name
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return _platform_answer(root)
    os.close(fd)
    try:
        return Folding(_same(root, name, f"{PROBE_PREFIX}{token}-\u00e9"),  # "é": another case
                       _same(root, name, unicodedata.normalize("NFD", name)))  # "É" decomposed: another form
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _ident(path: Path) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _platform_answer(root: Path) -> Folding:
    """Darwin says whether a volume is case-sensitive; its file systems are normalization-insensitive."""
    if sys.platform == "darwin" and "PC_CASE_SENSITIVE" in os.pathconf_names:
        with contextlib.suppress(OSError):
            sensitive = os.pathconf(root, "PC_CASE_SENSITIVE")
            return Folding(case=not sensitive, unicode=True)
    return EXACT


def remembered(cache: Path, root: Path) -> Folding:
    """The workspace's folding, probed once per device it lies on and kept in `cache` (a small JSON file)."""
    dev = os.stat(root).st_dev
    with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
        data = json.loads(cache.read_text())
        if data["dev"] == dev:
            return Folding(bool(data["case"]), bool(data["unicode"]))
    found = probe(root) or EXACT
    with contextlib.suppress(OSError):
        tmp = cache.with_name(cache.name + f".{os.urandom(4).hex()}.tmp")
        tmp.write_text(json.dumps({"dev": dev, "case": found.case, "unicode": found.unicode}))
        os.replace(tmp, cache)
    return found
