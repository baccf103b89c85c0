"""Verify: check every store file a reader relies on; with `full` re-hash every blob and record header.

What must be complete is what refs and pins reach (their snapshots' materialised file maps);
snapshots no ref or pin reaches are garbage awaiting gc and only need to match their hash.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import zstandard

from ..errors import StoreError
from ..fsutil import TMP_PREFIX
from ..ids import is_pack_id, is_snapshot_id
from ..repository import commits
from ..repository.packs import Location, check_headers, record_ok, scan_pack, write_index
from ..settings import RetentionPolicy
from ..vocab import UNLISTED_KINDS
from ..words import plural
from .pending import PENDING, pending_exists, read_pending
from .reach import each_needs
from .refcheck import (
    lost_history,
    lost_line,
    read_dropped,
    read_pins,
    rebuild_refs,
    ref_mismatch,
    set_aside_damaged_sidecars,
    workspace_ref_files,
)

if TYPE_CHECKING:
    from pathlib import Path

    from ..repository.repo import Repository

IN_PROGRESS_SECONDS = 10.0  # a snapshot file this young, unmarked, may belong to a capture about to append its line


@dataclass
class VerifyReport:
    """Problems are damage; warnings are leftovers a gc will clean; repairs are what --repair did."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
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
                "repaired": self.repaired, "packs": self.packs, "blobs": self.blobs,
                "snapshots": self.snapshots, "refs": self.refs}


def verify(store: Repository, *, full: bool = False, repair: bool = False,
           progress: Callable[[int, int], None] | None = None,
           retention: RetentionPolicy | None = None, in_progress: float = IN_PROGRESS_SECONDS) -> VerifyReport:
    """Check format, packs, indexes, snapshots, refs and pins; `full` re-reads every blob and header.

    `repair` (under the exclusive lock, like gc) rebuilds missing or damaged pack indexes from the
    packs' own records and drops an index whose pack is gone, reporting each. `in_progress`: how young an
    unreferenced snapshot file without a commit marker may be and still belong to a capture appending its ref
    line (one that leaves no marker, as an older codexr); 0 where the caller knows no capture runs.
    """
    lock = store.exclusive_lock() if repair else store.shared_lock()
    with lock:
        return _verify(store, full=full, repair=repair, progress=progress,
                       idle_days=retention.thread_idle_days if retention is not None else 0.0,
                       in_progress=0.0 if repair else in_progress)


def _check_format(store: Repository, report: VerifyReport) -> None:
    from ..repository.repo import STORE_FORMAT, STORE_VERSION

    want = json.dumps({"format": STORE_FORMAT, "version": STORE_VERSION}).encode() + b"\n"
    try:
        ok = (store.path / "format").read_bytes() == want
    except OSError:
        ok = False
    if not ok:
        report.problems.append("the store's format file is damaged (expected exactly " f"{want!r})")


def _check_packs(store: Repository, report: VerifyReport, pending: set[str], repair: bool) -> None:
    packs_dir = store.path / "packs"
    names = sorted(f.name for f in packs_dir.iterdir())
    pack_ids = {n[:-5] for n in names if n.endswith(".pack") and is_pack_id(n[:-5])}
    for name in names:
        stem, _, suffix = name.partition(".")
        if name.startswith(TMP_PREFIX):
            report.warnings.append(f"leftover temporary file packs/{name}")
        elif suffix == "idx" and is_pack_id(stem):
            if stem not in pack_ids:
                if repair:
                    (packs_dir / name).unlink()
                    report.repaired.append(f"removed index {name}, whose pack is gone (its blobs are lost)")
                report.problems.append(f"pack index {name} has no pack file (its blobs are lost)")
                continue
            try:
                store.blobs.load_pack(stem)
            except StoreError as exc:
                _unindexed(store, report, stem, str(exc), pending, repair)
                continue
            report.packs += 1
        elif suffix == "pack" and is_pack_id(stem):
            if not (packs_dir / f"{stem}.idx").exists():
                _unindexed(store, report, stem, None, pending, repair)
        else:
            report.warnings.append(f"unexpected file packs/{name}")
    store.blobs.refresh()


def _unindexed(store: Repository, report: VerifyReport, pack_id: str, damage: str | None, pending: set[str],
               repair: bool) -> None:
    """A pack whose index is missing (`damage` None) or damaged: classify it, and rebuild it on `repair`."""
    if pack_id in pending and damage is None:
        report.warnings.append(f"pack {pack_id} is being deleted by the interrupted gc")
        return
    scan = scan_pack(store.path / "packs", pack_id)
    if repair:
        write_index(store.path / "packs", pack_id, scan.entries)
        store.blobs.damaged.pop(pack_id, None)
        lost = (f"; {plural(len(scan.damage), 'damaged region')} left out: {'; '.join(scan.damage)}"
                if scan.damage else "")
        report.repaired.append(f"rebuilt the index of pack {pack_id} from its {len(scan.entries)} records{lost}")
        report.packs += 1
        if scan.damage:
            report.problems.extend(scan.damage)
        return
    if damage is not None:
        report.problems.append(f"{damage}; `codexr snapshots verify --repair` rebuilds it from the pack")
    elif scan.complete:
        report.warnings.append(f"pack {pack_id} has no index (an interrupted write, or a lost index); "
                               "the next gc or `verify --repair` rebuilds it from the pack")
    else:
        report.problems.append(f"pack {pack_id} has no index and {scan.damage[0]}; "
                               "`codexr snapshots verify --repair` indexes what can be read")


def _verify(store: Repository, *, full: bool, repair: bool, progress: Callable[[int, int], None] | None,
            idle_days: float, in_progress: float) -> VerifyReport:
    """Every check in the order its findings are reported: files first, then what refs reach, then leftovers."""
    report = VerifyReport(full=full)
    _check_format(store, report)
    _check_packs(store, report, _check_pending(store, report), repair)
    if repair:  # under the exclusive lock no capture is running: every marker is an interrupted commit
        report.repaired.extend(j.summary() for j in store.finish_all_commits())
        report.repaired.extend(set_aside_damaged_sidecars(store))
    snapshot_ids = _check_snapshot_files(store, report)
    roots, named = _check_roots(store, report, snapshot_ids, idle_days)
    interrupted = _interrupted_commits(store, report, named)
    reached = _check_reach(store, report, roots)
    _check_history(store, report, snapshot_ids, reached | interrupted, named, repair=repair, in_progress=in_progress)
    for journal in sorted((store.path / "journal").glob("*.json")):
        report.warnings.append(_pending_restore(journal, snapshot_ids))
    if full:
        _full(store, report, progress)
    else:
        report.blobs = len(store.blobs.locations)
    return report


def _check_pending(store: Repository, report: VerifyReport) -> set[str]:
    """Warn of an interrupted gc; the packs its marker names (being deleted, so not damage)."""
    pending = read_pending(store)
    if pending_exists(store):
        report.warnings.append("an interrupted gc is pending; the next `codexr snapshots gc` finishes it"
                               + ("" if pending else f" (its marker {PENDING} is unreadable)"))
    return set(pending["packs"]) if pending else set()


def _pending_restore(journal: Path, snapshot_ids: set[str]) -> str:
    """What a killed restore's journal means for its workspace: the next restore finishes it, unless its target is
    gone (a gc before gc kept a journal's snapshots), when only the restore of its safety snapshot gets past it, or
    its safety snapshot is gone (damage), when the target's restore does (with both gone, any restore)."""
    from ..restore.journal import parse_journal  # the reader recovery trusts, loaded where a journal is found

    try:
        doc = parse_journal(journal)
    except StoreError:  # damaged (parse_journal says so for a file it cannot read too)
        return f"an interrupted restore is pending ({journal.name}) and its journal cannot be read"
    target, safety = doc.target, doc.safety
    if target not in snapshot_ids and safety in snapshot_ids:
        return (f"an interrupted restore is pending ({journal.name}) whose target snapshot {target[:12]} is gone: "
                f"`codexr snapshots restore {safety[:12]} --yes` puts back the state before it")
    if safety not in snapshot_ids:
        way = (f"`codexr snapshots restore {target[:12]} --yes` finishes it" if target in snapshot_ids
               else "its target is gone too: any `codexr snapshots restore ID --yes` goes past it")
        return (f"an interrupted restore is pending ({journal.name}) whose safety snapshot {safety[:12]} is gone: "
                f"{way}")
    return f"an interrupted restore is pending ({journal.name}); the next restore finishes it"


def _check_snapshot_files(store: Repository, report: VerifyReport) -> set[str]:
    """Every snapshot file must be well named and readable; the ids of those that are named so."""
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
            store.record(snap)
        except StoreError as exc:
            report.problems.append(str(exc))
    return snapshot_ids


def _check_roots(store: Repository, report: VerifyReport, snapshot_ids: set[str],
                 idle_days: float) -> tuple[set[str], set[str]]:
    """Ref lines and pins must name existing snapshots that agree with them: (roots to walk, ids ref lines name)."""
    roots: set[str] = set()
    named: set[str] = set()
    for ref in workspace_ref_files(store):
        report.problems.extend(ref.problems)
        if ref.torn:
            report.warnings.append(f"ref file {ref.name} ends in a torn line (a capture was interrupted); "
                                   "the next capture cuts it")
        for n, info in ref.lines:
            report.refs += 1
            named.add(info.id)
            if info.id not in snapshot_ids:
                report.problems.append(f"ref file {ref.name} line {n} names snapshot {info.id}, which does not exist")
                continue
            why = ref_mismatch(store, ref, n, info)
            if why is not None:
                report.problems.append(why)
            else:
                roots.add(info.id)
    pins = read_pins(store, idle_days)
    report.problems.extend(pins.problems)
    for sid, rel in sorted(pins.required.items()):
        if sid not in snapshot_ids:
            report.problems.append(f"pin file {rel} names snapshot {sid}, which does not exist")
    roots |= {s for s in pins.ids if s in snapshot_ids}
    return roots, named


def _check_reach(store: Repository, report: VerifyReport, roots: set[str]) -> set[str]:
    """Every root's chain must read and every blob it needs be held; the snapshot files the roots reach."""
    reached: set[str] = set()
    missing: dict[bytes, list[str]] = {}
    paths: dict[bytes, str] = {}
    for root in sorted(roots):
        try:
            for needs in each_needs(store, [root]):
                reached.update(needs.chain)
                for b, p in needs.blobs.items():
                    if b not in store.blobs.locations:
                        missing.setdefault(b, []).append(root)
                        paths.setdefault(b, p)
        except StoreError as exc:
            report.problems.append(str(exc))
    for b, users in sorted(missing.items()):
        more = f" and {len(users) - 1} more" if len(users) > 1 else ""
        report.problems.append(f"snapshot {users[0]}{more} needs blob {b.hex()} ({paths[b]}), which is missing")
    return reached


def _check_history(store: Repository, report: VerifyReport, snapshot_ids: set[str], kept: set[str], named: set[str],
                   *, repair: bool, in_progress: float) -> None:
    """Snapshot files no root reaches: lost workspace history (damage) or garbage awaiting gc (warnings).

    `kept`: what roots reach and interrupted commits hold; `named`: what ref lines name (not lost, maybe garbage).
    """
    # Workspace history no ref names (a deleted ref file): damage, which --repair mends from the snapshots.
    # Without the exclusive lock a capture may be between its snapshot file and its ref line: young files wait.
    lost = lost_history(store, snapshot_ids, kept | named, min_age=in_progress)
    if repair and lost:
        repaired, left = rebuild_refs(store, lost)
        report.repaired.extend(repaired)
        report.problems.extend(left)
    else:
        report.problems.extend(lost_line(store, root, ids) for root, ids in sorted(lost.items()))
    garbage = snapshot_ids - kept - {s for ids in lost.values() for s in ids}
    report.warnings.extend(_unreached(store, garbage))


def _interrupted_commits(store: Repository, report: VerifyReport, named: set[str]) -> set[str]:
    """Warn of each commit marker (FORMAT.md §5): a capture stopped between its snapshot file and its ref line is an
    interrupted write the next writer finishes or drops, not damage. Returns the snapshots it leaves without a line."""
    out: set[str] = set()
    then = "the next capture of the workspace, gc or `codexr snapshots verify --repair`"
    for marker in commits.markers(store.path):
        snap = marker.snapshot
        if commits.commit_running(store.path / "refs" / "workspaces" / f"{marker.wskey}.jsonl"):
            out.add(snap)
            report.warnings.append(f"snapshot {snap} is being committed by a running capture ({marker.name})")
            continue
        j = commits.judge(store, marker, named.__contains__)
        if j.action == commits.FINISH:
            assert j.info is not None
            report.warnings.append(f"snapshot {snap} of workspace {j.info.root} is an interrupted write (its capture "
                                   f"stopped between the snapshot file and its ref line), not damage; {then} "
                                   "finishes it")
        elif j.action == commits.DROP:
            assert j.info is not None
            report.warnings.append(f"snapshot {snap} of workspace {j.info.root} is an interrupted write that cannot be "
                                   f"finished ({j.why}); {then} drops it")
        else:
            report.warnings.append(f"{marker.name} marks an interrupted capture ({j.why}); {then} removes it")
        if j.action != commits.CLEAR:
            out.add(snap)
    return out


def _unreached(store: Repository, garbage: set[str]) -> list[str]:
    """Why snapshot files no ref or pin reaches are there, one warning per cause, each named exactly.

    Every rewind writes a record of its targets that only its redo entry pins: after the redo (an ordinary
    rewind and redo) nothing does. That used to be called "left by an interrupted capture" with nothing
    interrupted (issue 18).
    """
    dropped = read_dropped(store)
    retention = records = pending = 0
    for sid in garbage:
        if sid in dropped:
            retention += 1
            continue
        try:
            kind = store.record(sid).kind
        except StoreError:
            kind = ""  # reported as damage above
        if kind in UNLISTED_KINDS:
            records += 1
        else:
            pending += 1
    out = []
    grace = "gc removes them after the grace period"
    if retention:
        out.append(f"{plural(retention, 'snapshot file')} dropped by retention; {grace}")
    if records:
        out.append(f"{plural(records, 'record')} of a rewind's targets or an agent's edits no thread pins any more "
                   f"(their rewind was redone, or their thread was idle past thread_retention_days); {grace}")
    if pending:
        them, their = ("it", "its") if pending == 1 else ("them", "their")
        out.append(f"{plural(pending, 'snapshot file')} a capture wrote without adding {them} to {their} workspace's "
                   f"ref (it is running now, or was interrupted); {grace}")
    return out


def _full(store: Repository, report: VerifyReport, progress: Callable[[int, int], None] | None) -> None:
    """Cross-check every record header against its index, then re-read and re-hash every record."""
    by_pack: dict[str, list[tuple[bytes, Location]]] = {}
    for pid in sorted(store.blobs.loaded):
        with contextlib.suppress(StoreError):
            by_pack[pid] = store.blobs.load_pack(pid).entries
    for pid, entries in by_pack.items():
        report.problems.extend(check_headers(store.path / "packs", pid, entries))
    dctx = zstandard.ZstdDecompressor()
    total = sum(len(e) for e in by_pack.values())
    done = 0
    seen: set[bytes] = set()
    for pid, entries in by_pack.items():
        fd = os.open(store.path / "packs" / f"{pid}.pack", os.O_RDONLY)
        try:
            for blob, loc in sorted(entries, key=lambda e: e[1].offset):
                seen.add(blob)
                if not record_ok(dctx, fd, blob, loc):
                    report.problems.append(f"blob {blob.hex()} in pack {pid} does not match its hash")
                done += 1
                if progress is not None and (done % 500 == 0 or done == total):
                    progress(done, total)
        finally:
            os.close(fd)
    report.blobs = len(seen)
