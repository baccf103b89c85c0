"""What a workspace's ref log holds of one snapshot: its listing, and the canonical line that records it."""

from __future__ import annotations

import json

from ..records import record


@record(frozen=True)
class SnapshotInfo:
    """What a listing shows about one snapshot."""

    id: str
    root: str
    created: float
    kind: str
    label: str | None
    file_count: int

    def line(self) -> bytes:
        """Its canonical ref line, without the newline (FORMAT.md §4): what captures, finishers and gc write."""
        return json.dumps({"id": self.id, "root": self.root, "created": self.created, "kind": self.kind,
                           "label": self.label, "file_count": self.file_count}, separators=(",", ":")).encode()
