"""The narrow reading and writing interfaces of the repository (restic's Loader, BlobLoader and Saver).

Restore, recovery and the states of single files are written against these, not against the whole store, so
each says exactly what of the store it reads and what it may write.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from ..manifest import FileMap, SnapshotRecord
from .packs import BlobIndex, PackWriter


class SnapshotLoader(Protocol):
    """Reads snapshot records and the file maps their delta chains make."""

    def record(self, snap_id: str) -> SnapshotRecord: ...

    def files(self, snap_id: str) -> FileMap: ...


class BlobLoader(Protocol):
    """Reads blobs, verified."""

    def blob_chunks(self, blob_hex: str) -> Iterator[bytes]: ...

    def check_blob(self, blob: bytes) -> int:
        """Verify one stored blob (CorruptStore if damaged) and return its length."""
        ...

    def checked_blob(self, blob: bytes, keep: int) -> tuple[int, bytes | None]:
        """Verify one stored blob (CorruptStore if damaged): its length, and its bytes if at most `keep` long."""
        ...


class BlobSaver(Protocol):
    """Writes blobs: a pack writer whose blobs are durable once it commits."""

    def blob_writer(self) -> PackWriter: ...


class Loader(SnapshotLoader, BlobLoader, BlobSaver, Protocol):
    """What a restore needs of the repository: snapshots and blobs to read, and blobs to store again."""


class CommitJudge(SnapshotLoader, Protocol):
    """What judging an interrupted commit reads (commits.py): the store's files, its snapshots and its blob index."""

    path: Path

    def exists(self, snap_id: str) -> bool: ...

    @property
    def blobs(self) -> BlobIndex: ...
