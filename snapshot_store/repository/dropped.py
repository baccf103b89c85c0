"""The `dropped` file: snapshots taken out of (or never put in) a workspace ref on purpose whose files remain.

gc writes it for retention's drops, `verify --repair` and the finisher of an interrupted commit for snapshots that
cannot be restored (FORMAT.md §4, §5). What it lists is no lost history; gc sweeps the files after the grace period.
"""

from __future__ import annotations

from pathlib import Path

from ..fsutil import atomic_write
from ..ids import is_snapshot_id
from ..locks import flocked

DROPPED = "dropped"  # store root; one snapshot id per line, written atomically


def read_dropped(store: Path) -> set[str]:
    """Snapshots dropped on purpose (a missing or damaged file drops nothing)."""
    try:
        text = (store / DROPPED).read_text("ascii", "replace")
    except OSError:
        return set()
    return {line for line in text.split() if is_snapshot_id(line)}


def write_dropped(store: Path, ids: set[str]) -> None:
    """Replace the list (atomically; empty: the file goes)."""
    keep = sorted(ids)
    if keep:
        atomic_write(store / DROPPED, "".join(f"{s}\n" for s in keep).encode())
    else:
        (store / DROPPED).unlink(missing_ok=True)


def add_dropped(store: Path, ids: set[str]) -> None:
    """Add to the list under its own lock: a writer that drops holds the store lock only shared, as writers of other
    workspaces do, who may drop at the same time (gc and `verify --repair` hold it exclusive and need no more)."""
    with flocked(store / "locks" / "dropped.lock", exclusive=True):
        write_dropped(store, read_dropped(store) | ids)
