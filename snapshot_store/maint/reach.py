"""What a set of root snapshots needs: their snapshot files (with every delta base) and blobs.

Blobs are taken from each root's materialised file map, not from every delta on its chain: a
blob only a dropped ancestor used is not needed by the root, so retention can free it (FORMAT.md §8).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import CorruptStore, StoreError

if TYPE_CHECKING:
    from ..repository.repo import Repository


@dataclass
class Needs:
    """What one root snapshot needs to be restored."""

    root: str
    chain: list[str]  # the root, then its parent, ... (every file that materialising it reads)
    blobs: dict[bytes, str]  # blob -> one path that holds it (for messages)


@dataclass
class Reach:
    """The union of several roots' needs."""

    snapshots: set[str] = field(default_factory=set)
    blobs: set[bytes] = field(default_factory=set)


def needs_of(store: Repository, root: str) -> Needs:
    """Materialise one root; a damaged or missing member of its chain raises StoreError naming both."""
    try:
        files = store.files(root)
        chain: list[str] = []
        current: str | None = root
        while current is not None:
            if current in chain:
                raise CorruptStore(f"snapshot {root} has a cycle in its parent chain")
            chain.append(current)
            current = store.record(current).parent
    except StoreError as exc:
        raise CorruptStore(f"snapshot {root} cannot be read: {exc}") from exc
    blobs = {bytes.fromhex(e.blob): p for p, e in files.items() if e.kind == "f"}
    return Needs(root, chain, blobs)


def each_needs(store: Repository, roots: Iterable[str]) -> Iterator[Needs]:
    """needs_of every root, oldest first (consecutive deltas reuse the cached parent map)."""
    def created(snap: str) -> float:
        try:
            return store.record(snap).created
        except StoreError:
            return 0.0

    for root in sorted(set(roots), key=lambda s: (created(s), s)):
        yield needs_of(store, root)


def reach(store: Repository, roots: Iterable[str]) -> Reach:
    """Every snapshot file and blob the roots need."""
    out = Reach()
    for n in each_needs(store, roots):
        out.snapshots.update(n.chain)
        out.blobs.update(n.blobs)
    return out
