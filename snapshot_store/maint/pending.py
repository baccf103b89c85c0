"""The interrupted-gc marker (FORMAT.md §8): written before gc's first deletion, removed after its last.

Its own module because three readers need it apart from gc's execution: the plan (packs an interrupted gc had
decided to delete are finished, not refused), verify (which warns of it), and the executor that writes it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import blake3

from ..fsutil import atomic_write
from ..ids import is_pack_id

if TYPE_CHECKING:
    from ..repository.repo import Repository

PENDING = "gc.pending"  # written before gc's first deletion, removed after its last (FORMAT.md §8)


def _pending_body(doc: dict[str, Any]) -> bytes:
    return json.dumps({k: doc[k] for k in ("started", "packs", "snapshots")}, sort_keys=True).encode()


def read_pending(store: Repository) -> dict[str, Any] | None:
    """The marker of a gc that was interrupted while deleting (None if none, or if it is damaged)."""
    try:
        doc = json.loads((store.path / PENDING).read_bytes())
        if blake3.blake3(_pending_body(doc)).hexdigest() != doc["check"]:
            return None
        if not all(isinstance(p, str) and is_pack_id(p) for p in doc["packs"]):
            return None
        return dict(doc)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def pending_packs(store: Repository) -> set[str]:
    """The packs an interrupted gc had decided to delete (none without a readable marker)."""
    pending = read_pending(store)
    return set(pending["packs"]) if pending else set()


def pending_exists(store: Repository) -> bool:
    """True when a gc marker is on disk (damaged or not)."""
    return (store.path / PENDING).exists()


def write_pending(store: Repository, packs: list[str], snapshots: list[str]) -> None:
    """Name what this gc is about to delete, so an interrupted run is finished by the next one."""
    doc: dict[str, Any] = {"started": time.time(), "packs": sorted(packs), "snapshots": sorted(snapshots)}
    doc["check"] = blake3.blake3(_pending_body(doc)).hexdigest()
    atomic_write(store.path / PENDING, json.dumps(doc).encode() + b"\n")
