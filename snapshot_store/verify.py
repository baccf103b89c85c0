"""Verify: a structural check of every object, and with `full` a re-hash of every blob."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import StoreError
from .fsutil import TMP_PREFIX
from .ids import is_pack_id, is_snapshot_id
from .store import read_ref_file

if TYPE_CHECKING:
    from .store import Store


@dataclass
class VerifyReport:
    """Problems are damage; warnings are leftovers a gc will clean."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    packs: int = 0
    blobs: int = 0
    snapshots: int = 0
    refs: int = 0
    full: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_json(self) -> dict[str, Any]:
        """Stable JSON for the CLI."""
        return {"ok": self.ok, "full": self.full, "problems": self.problems, "warnings": self.warnings,
                "packs": self.packs, "blobs": self.blobs, "snapshots": self.snapshots, "refs": self.refs}


def verify(store: Store, *, full: bool = False, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Check packs, indexes, snapshots and refs; `full` re-reads and re-hashes every blob."""
    report = VerifyReport(full=full)
    packs_dir = store.path / "packs"
    blob_owner: dict[bytes, str] = {}
    for f in sorted(packs_dir.iterdir()):
        stem, _, suffix = f.name.partition(".")
        if f.name.startswith(TMP_PREFIX):
            report.warnings.append(f"leftover temporary file packs/{f.name}")
        elif suffix == "idx" and is_pack_id(stem):
            try:
                info = store.blobs.load_pack(stem)
            except StoreError as exc:
                report.problems.append(str(exc))
                continue
            report.packs += 1
            for blob, _loc in info.entries:
                blob_owner.setdefault(blob, stem)
        elif suffix == "pack" and is_pack_id(stem):
            if not (packs_dir / f"{stem}.idx").exists():
                report.warnings.append(f"pack {stem} has no index (interrupted write); gc removes it")
        else:
            report.warnings.append(f"unexpected file packs/{f.name}")
    report.blobs = len(blob_owner)
    store.blobs.refresh()

    snapshot_ids: set[str] = set()
    for bucket in sorted((store.path / "snapshots").iterdir()):
        for f in sorted(bucket.iterdir()) if bucket.is_dir() else []:
            if f.name.startswith(TMP_PREFIX):
                report.warnings.append(f"leftover temporary file snapshots/{bucket.name}/{f.name}")
                continue
            if not is_snapshot_id(f.name) or f.name[:2] != bucket.name:
                report.problems.append(f"unexpected file snapshots/{bucket.name}/{f.name}")
                continue
            snapshot_ids.add(f.name)
    for snap in sorted(snapshot_ids):
        report.snapshots += 1
        try:
            rec = store.record(snap)
        except StoreError as exc:
            report.problems.append(str(exc))
            continue
        if rec.parent is not None and rec.parent not in snapshot_ids:
            report.problems.append(f"snapshot {snap} names a missing parent {rec.parent}")
        for path, entry in rec.changes.items():
            if entry is not None and entry[0] == "f" and bytes.fromhex(entry[3]) not in blob_owner:
                report.problems.append(f"snapshot {snap} needs blob {entry[3]} ({path}), which is missing")

    refs_dir = store.path / "refs" / "workspaces"
    for ref in sorted(refs_dir.glob("*.jsonl")):
        try:
            infos = read_ref_file(ref)
        except StoreError as exc:
            report.problems.append(str(exc))
            continue
        for snap_info in infos:
            report.refs += 1
            if snap_info.id not in snapshot_ids:
                report.warnings.append(f"ref {ref.name} names snapshot {snap_info.id}, which gc already removed")

    for journal in sorted((store.path / "journal").glob("*.json")):
        report.warnings.append(f"an interrupted restore is pending ({journal.name}); the next restore finishes it")

    if full:
        total = len(store.blobs.locations)
        for n, blob in enumerate(sorted(store.blobs.locations, key=lambda b: store.blobs.locations[b][:3])):
            try:
                for _chunk in store.blobs.stream(blob):
                    pass
            except StoreError as exc:
                report.problems.append(str(exc))
            if progress is not None and (n % 500 == 0 or n + 1 == total):
                progress(n + 1, total)
    return report
