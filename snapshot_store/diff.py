"""Per-path differences between two file maps (snapshots, or a snapshot and the workspace now)."""

from __future__ import annotations

from collections.abc import Iterable

from .manifest import FileMap, is_captured
from .records import record


@record(frozen=True)
class Change:
    """One path's difference between two states."""

    path: str
    change: str  # added | modified | deleted | mode | type


def diff_maps(old: FileMap, new: FileMap, paths: Iterable[str] | None = None) -> list[Change]:
    """added / deleted / modified / mode / type, for captured paths only, sorted; only among `paths` when the
    caller knows which can differ (two snapshots of one delta chain)."""
    out: list[Change] = []
    if paths is None:
        paths = {p for p, e in old.items() if is_captured(e)} | {p for p, e in new.items() if is_captured(e)}
    for path in sorted(set(paths)):
        o, n = old.get(path), new.get(path)
        oc, nc = is_captured(o), is_captured(n)
        if not (oc or nc):
            continue  # held back or absent on both sides (a path a delta names need not be captured)
        if oc and not nc:
            out.append(Change(path, "deleted"))
        elif nc and not oc:
            out.append(Change(path, "added"))
        elif o != n and o is not None and n is not None:
            if o.kind != n.kind:
                out.append(Change(path, "type"))
            elif o.kind == "f" and n.kind == "f" and o.blob == n.blob:
                out.append(Change(path, "mode"))
            else:
                out.append(Change(path, "modified"))
    return out
