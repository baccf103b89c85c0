"""What a turn or a restore changes, per file, with line counts and unified diffs — from the store.

Read-only: snapshots through the store (hash-verified), the workspace through `SafeRoot` (never
following a symlink out of it). Text is compared only up to `MAX_DIFF_BYTES` per side; larger or
binary files are named without line counts.
"""

from __future__ import annotations

import difflib
import os
import stat
from collections.abc import Iterable, Mapping

from snapshot_store import RestorePlan, Store, StoreError
from snapshot_store.manifest import Entry, FileEntry, FileMap, LinkEntry
from snapshot_store.restore import DELETE, WRITE
from snapshot_store.safefs import SafeRoot, UnsafePath
from snapshot_store.store import diff_maps

from ..codex.events import FileStat

MAX_DIFF_BYTES = 512 * 1024


def blob_text(store: Store, entry: Entry | None) -> bytes | None:
    """The content an entry names (b"" for absent), or None when it cannot be diffed as text."""
    if isinstance(entry, LinkEntry):
        return entry.target.encode() + b"\n"
    if not isinstance(entry, FileEntry):
        return b""
    if entry.size > MAX_DIFF_BYTES:
        return None
    try:
        data = b"".join(store.blob_chunks(entry.blob))
    except StoreError:
        return None
    return None if b"\0" in data[:8192] else data


def _lines(data: bytes) -> list[str]:
    return data.decode("utf-8", "replace").splitlines(keepends=True)


def unified(old: bytes | None, new: bytes | None, path: str) -> str:
    """A unified diff of two versions of a file ("" when equal; a note when not text)."""
    if old is None or new is None:
        return f"(binary or larger than {MAX_DIFF_BYTES // 1024} KiB: not shown)\n"
    if old == new:
        return ""
    out = difflib.unified_diff(_lines(old), _lines(new), f"a/{path}", f"b/{path}", n=3)
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def counts(old: bytes | None, new: bytes | None) -> tuple[int | None, int | None]:
    """Lines added and removed (None, None for binary or oversized content)."""
    if old is None or new is None:
        return None, None
    added = removed = 0
    for line in difflib.unified_diff(_lines(old), _lines(new), n=0):
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return added, removed


def map_stats(store: Store, old: FileMap, new: FileMap, paths: set[str] | None = None) -> tuple[FileStat, ...]:
    """Per-file changes between two manifests (only among `paths` when known: Repository.named_between), with line
    counts."""
    out = []
    for ch in diff_maps(old, new, paths):
        a, r = counts(blob_text(store, old.get(ch.path)), blob_text(store, new.get(ch.path)))
        if ch.change == "mode":
            a, r = 0, 0
        out.append(FileStat(ch.path, ch.change, a, r))
    return tuple(out)


def turn_files(store: Store, pre: str | None, post: str | None) -> tuple[FileStat, ...]:
    """The files a turn changed, from its pre/post snapshots (so shell-made changes count too)."""
    if pre is None or post is None or pre == post:  # one snapshot for both: the turn left the files alone
        return ()
    return map_stats(store, store.files(pre), store.files(post), store.named_between(pre, post))


def snapshot_diff(store: Store, old_id: str, new_id: str) -> list[tuple[FileStat, str]]:
    """Per-file stats and unified diffs between two snapshots."""
    old, new = store.files(old_id), store.files(new_id)
    out = []
    for ch in diff_maps(old, new, store.named_between(old_id, new_id)):
        a_text, b_text = blob_text(store, old.get(ch.path)), blob_text(store, new.get(ch.path))
        a, r = counts(a_text, b_text)
        out.append((FileStat(ch.path, ch.change, a, r), unified(a_text, b_text, ch.path)))
    return out


def workspace_text(root: SafeRoot, rel: str) -> bytes | None:
    """A workspace file's content for a diff, read without following symlinks (b"" when absent)."""
    try:
        st = root.lstat(rel)
        if st is None:
            return b""
        if stat.S_ISLNK(st.st_mode):
            return root.readlink(rel).encode() + b"\n"
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_DIFF_BYTES:
            return None
        data = root.read(rel)
    except (OSError, UnsafePath):
        return None
    return None if b"\0" in data[:8192] else data


def plan_diffs(store: Store, plan: RestorePlan, paths: Iterable[str] | None = None,
               texts: Mapping[str, bytes] | None = None) -> dict[str, tuple[FileStat, str]]:
    """For each path a restore writes or deletes: its change from now to what it writes, and the diff (`texts`:
    what a merge writes, held in memory by a dry run)."""
    target = store.files(plan.target_id)
    wanted = set(paths) if paths is not None else None
    out: dict[str, tuple[FileStat, str]] = {}
    if not os.path.isdir(plan.root):
        return out
    with SafeRoot(plan.root) as root, SafeRoot("/") as top:
        for a in plan.actions:
            if a.op not in (WRITE, DELETE) or (wanted is not None and a.path not in wanted):
                continue
            # A path outside the workspace (a pre-edit state from an agent patch) is shown absolute.
            outside = os.path.isabs(a.path)
            now = workspace_text(top, a.path.lstrip("/")) if outside else workspace_text(root, a.path)
            if a.op != WRITE:
                then: bytes | None = b""
            elif texts and a.path in texts:
                then = texts[a.path]
            else:
                then = blob_text(store, a.target if outside or a.target is not None else target.get(a.path))
            added, removed = counts(now, then)
            change = "deleted" if a.op == DELETE else ("added" if now == b"" else "modified")
            out[a.path] = (FileStat(a.path, change, added, removed), unified(now, then, a.path))
    return out


def sides_diff(store: Store, root: str, path: str, theirs: Entry | None) -> str:
    """A conflict's two sides: the file now against the state a restore would put back (a path outside the workspace
    is absolute, read below `/` as plan_diffs reads it)."""
    outside = os.path.isabs(path)
    with SafeRoot("/" if outside else root) as safe:
        return unified(workspace_text(safe, path.lstrip("/") if outside else path), blob_text(store, theirs), path)


def workspace_diff(store: Store, root: str, old_id: str, now: FileMap) -> list[tuple[FileStat, str]]:
    """Per-file stats and diffs from a snapshot to the workspace as a dry-run capture `now` saw it."""
    old = store.files(old_id)
    out = []
    with SafeRoot(root) as safe:
        for st in map_stats(store, old, now):
            out.append((st, unified(blob_text(store, old.get(st.path)), workspace_text(safe, st.path), st.path)))
    return out
