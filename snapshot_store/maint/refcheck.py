"""Strict reading of refs (workspace ref logs and pin files) for gc and verify.

gc trusts refs to decide what to delete, so it reads them more strictly than a listing does:
every newline-terminated line must parse, name an existing snapshot and agree with it, and a
damaged pin file stops gc instead of unpinning what it named (FORMAT.md §4).
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StoreError
from ..fsutil import TMP_PREFIX, atomic_write, fsync_dir
from ..ids import is_snapshot_id, workspace_key
from ..locks import flocked
from ..repository import dropped as dropped_file
from ..repository.listing import SnapshotInfo
from ..vocab import UNLISTED_KINDS
from ..words import plural
from .reach import needs_of

if TYPE_CHECKING:
    from ..repository.repo import Repository

ID_RE = re.compile(r"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")
REF_KEYS = frozenset({"id", "root", "created", "kind", "label", "file_count"})
#: In a JSON pin file, a value under one of these keys is a snapshot id that MUST exist (or be null).
PIN_KEYS = frozenset({"pre", "post", "safety_id", "target_snapshot", "snapshot", "snapshot_id", "pre_edit",
                      "post_edit", "outside_safety_id", "outside_target"})
#: The only `version` a JSON pin file may declare; any other stops gc (FORMAT.md §4).
PIN_VERSION = 1
_WSKEY_RE = re.compile(r"[0-9a-f]{32}")


@dataclass
class RefFile:
    """One workspace ref log as gc and verify see it."""

    path: Path
    lines: list[tuple[int, SnapshotInfo]] = field(default_factory=list)  # (line number, info)
    problems: list[str] = field(default_factory=list)
    torn: bool = False  # an unterminated final fragment (a crash mid-append): ignored

    @property
    def name(self) -> str:
        return f"refs/workspaces/{self.path.name}"

    @property
    def infos(self) -> list[SnapshotInfo]:
        return [i for _n, i in self.lines]


def _parse_line(raw: bytes) -> SnapshotInfo:
    d = json.loads(raw)
    if not isinstance(d, dict) or set(d) != REF_KEYS:
        raise ValueError("wrong keys")
    sid, root, created, kind, label, count = (d[k] for k in ("id", "root", "created", "kind", "label", "file_count"))
    if not (isinstance(sid, str) and is_snapshot_id(sid) and isinstance(root, str) and isinstance(kind, str)
            and isinstance(created, (int, float)) and not isinstance(created, bool)
            and (label is None or isinstance(label, str))
            and isinstance(count, int) and not isinstance(count, bool) and count >= 0):
        raise ValueError("wrong types")
    info = SnapshotInfo(sid, root, float(created), kind, label, count)
    if ref_line(info) != raw:
        # Writers emit one canonical form; another spelling of the same values (say, a last digit
        # of `created` that rounds to the same float) is a changed byte all the same.
        raise ValueError("not in canonical form")
    return info


def ref_line(info: SnapshotInfo) -> bytes:
    """The canonical bytes of one ref line (without its newline), as captures and gc write it."""
    return info.line()


def check_ref_file(path: Path) -> RefFile:
    """Parse a workspace ref log strictly; every damaged line is a problem naming the file and line."""
    ref = RefFile(path)
    stem, dot, suffix = path.name.rpartition(".")
    if suffix != "jsonl" or not dot or not _WSKEY_RE.fullmatch(stem):
        ref.problems.append(f"unexpected file {ref.name}")
        return ref
    try:
        data = path.read_bytes()
    except OSError as exc:
        ref.problems.append(f"ref file {ref.name} cannot be read: {exc.strerror}")
        return ref
    *lines, fragment = data.split(b"\n")
    for n, raw in enumerate(lines, 1):
        try:
            info = _parse_line(raw)
        except (ValueError, KeyError, TypeError, RecursionError):
            ref.problems.append(f"ref file {ref.name} line {n} is damaged")
            continue
        if workspace_key(info.root) != stem:
            ref.problems.append(f"ref file {ref.name} line {n} names workspace {info.root!r}, "
                                "whose key is not this file's name (damaged)")
            continue
        ref.lines.append((n, info))
    if fragment:
        # A crash mid-append leaves a prefix of one line. A complete object followed by anything
        # but the newline cannot come from an append: that is a damaged line, not a torn one.
        try:
            _value, end = json.JSONDecoder().raw_decode(fragment.decode("utf-8", "replace"))
        except ValueError:
            ref.torn = True
        else:
            if end < len(fragment.decode("utf-8", "replace")):
                ref.problems.append(f"ref file {ref.name} line {len(lines) + 1} is damaged")
            else:
                ref.torn = True
    return ref


def workspace_ref_files(store: Repository) -> list[RefFile]:
    """Every workspace ref log, checked (temporary files are ignored)."""
    out = []
    for path in sorted((store.path / "refs" / "workspaces").iterdir()):
        if path.name.startswith(TMP_PREFIX) or path.is_dir():
            continue
        out.append(check_ref_file(path))
    return out


def ref_mismatch(store: Repository, ref: RefFile, n: int, info: SnapshotInfo) -> str | None:
    """Why a ref line disagrees with the snapshot it names (None when it agrees)."""
    try:
        rec = store.record(info.id)
    except StoreError as exc:
        return f"ref file {ref.name} line {n} names snapshot {info.id}, which cannot be read: {exc}"
    want = (rec.root, rec.created, rec.kind, rec.label, int(rec.meta.get("file_count", 0)))
    if want != (info.root, info.created, info.kind, info.label, info.file_count):
        return f"ref file {ref.name} line {n} does not match snapshot {info.id} (damaged line)"
    return None


@dataclass
class Pins:
    """Snapshot ids named by pin files (every file under refs/ outside refs/workspaces)."""

    ids: set[str] = field(default_factory=set)  # every 64-hex id in any pin file: never dropped
    required: dict[str, str] = field(default_factory=dict)  # id -> pin file that names it structurally
    problems: list[str] = field(default_factory=list)
    files: int = 0
    expired: int = 0  # thread sidecars idle past retention: they pin nothing


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")  # cannot tell: keep pinning


def _structured_ids(value: Any, key: str | None = None) -> Iterator[tuple[str, Any]]:
    """(key, value) of every PIN_KEYS entry anywhere in a JSON document (iteratively: no recursion)."""
    stack: list[tuple[str | None, Any]] = [(key, value)]
    while stack:
        k, v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.items())
        elif isinstance(v, list):
            stack.extend((None, x) for x in v)
        elif k in PIN_KEYS:
            yield k, v


def journal_pins(store: Repository) -> tuple[set[str], list[str]]:
    """Every snapshot an interrupted restore's journal names (its target, its safety snapshot, a rewind's snapshot of
    the paths outside the workspace), and the problems: the next command in that workspace finishes the restore or
    rolls it back from them, so gc keeps them whatever retention says. Dropped, the target left every later capture
    and restore of the workspace failing on a journal nothing could finish. A journal that cannot be read or parsed
    is a problem (gc stops), never no pin."""
    ids: set[str] = set()
    problems: list[str] = []
    folder = store.path / "journal"  # Repository.journal_file's, FORMAT.md
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return ids, problems
    except OSError as exc:
        return ids, [f"the restore journals in {folder} cannot be listed ({exc}); the snapshots they need are "
                     "unprotected"]
    for name in names:
        if not name.endswith(".json") or name.startswith(TMP_PREFIX):
            continue
        try:
            text = (folder / name).read_bytes().decode("utf-8")
            json.loads(text)
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            problems.append(f"restore journal journal/{name} cannot be read ({exc}); the snapshots it needs are "
                            "unprotected")
            continue
        ids.update(ID_RE.findall(text))
    return ids, problems


SET_ASIDE = ".damaged"  # a damaged thread sidecar's suffix once `verify --repair` set it aside


def set_aside_damaged_sidecars(store: Repository) -> list[str]:
    """`verify --repair`: each thread sidecar that is not a JSON object is renamed `<id>.json.damaged`, under the
    sidecar's own lock (FORMAT.md §10), so the thread lists and runs again, without its snapshots, while the file
    itself, every id in it read as a pin, still keeps those snapshots from gc. What was done, one line each."""
    threads = store.path / "refs" / "threads"
    out: list[str] = []
    for path in sorted(threads.glob("*.json")) if threads.is_dir() else []:
        if path.name.startswith(TMP_PREFIX):
            continue
        with flocked(store.path / "locks" / f"thread-{path.stem}.lock", exclusive=True,
                     what=f"thread {path.stem}'s sidecar"):
            try:
                doc = json.loads(path.read_bytes())
            except OSError:
                continue  # unreadable is not damaged: `verify` names it, nothing is moved
            except (ValueError, RecursionError):
                doc = None
            if isinstance(doc, dict):
                continue
            aside = path.with_name(path.name + SET_ASIDE)
            n = 1
            while aside.exists():
                n += 1
                aside = path.with_name(f"{path.name}{SET_ASIDE}-{n}")
            os.rename(path, aside)
            fsync_dir(threads)
        out.append(f"set aside the damaged thread sidecar refs/threads/{path.name} as {aside.name}: thread "
                   f"{path.stem} is listed without its snapshots until that file is mended and renamed back; it "
                   "still keeps the snapshots it names from gc")
    return out


def read_pins(store: Repository, idle_days: float = 0.0, now: float | None = None) -> Pins:
    """Read every pin file; a file that cannot be read or parsed is a problem, never an empty pin.

    A thread sidecar (`refs/threads/*.json`) not written for more than `idle_days` (0: never)
    pins nothing any more: the thread's snapshots then follow the workspace retention rules.
    """
    pins = Pins()
    refs = store.path / "refs"
    cutoff = (time.time() if now is None else now) - idle_days * 86400 if idle_days > 0 else None
    for path in sorted(refs.rglob("*")):
        rel = path.relative_to(store.path).as_posix()
        if path.is_dir() or path.name.startswith(TMP_PREFIX) or path.parent == refs / "workspaces":
            continue
        if cutoff is not None and path.parent == refs / "threads" and _mtime(path) < cutoff:
            pins.expired += 1
            continue
        pins.files += 1
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            pins.problems.append(f"pin file {rel} cannot be read ({exc}); its snapshots are unprotected")
            continue
        pins.ids.update(ID_RE.findall(text))
        if path.suffix != ".json":
            continue
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            pins.problems.append(f"pin file {rel} is not valid JSON (damaged)")
            continue
        version = doc.get("version", PIN_VERSION) if isinstance(doc, dict) else PIN_VERSION
        if version != PIN_VERSION or isinstance(version, bool):
            # A newer writer may pin in ways this reader cannot see (restic refuses unknown versions too).
            pins.problems.append(f"pin file {rel} has format version {version!r}, which this codexr does not know; "
                                 "upgrade codexr (gc will not run until then)")
            continue
        for k, v in _structured_ids(doc):
            if v is None:
                continue
            if not isinstance(v, str) or not is_snapshot_id(v):
                pins.problems.append(f"pin file {rel} has a damaged snapshot id under {k!r}: {v!r}")
                continue
            pins.required.setdefault(v, rel)
    return pins


# ----------------------------------------------------------------------------- history no ref names


def read_dropped(store: Repository) -> set[str]:
    """Snapshots gc dropped from their workspace ref on purpose (a missing or damaged file drops nothing)."""
    return dropped_file.read_dropped(store.path)


def write_dropped(store: Repository, ids: Iterable[str]) -> None:
    """Replace the list of deliberately dropped snapshots (atomically; empty: the file goes)."""
    dropped_file.write_dropped(store.path, set(ids))


def prune_dropped(store: Repository) -> None:
    """Forget dropped ids whose snapshot files gc has deleted: the list stays as small as the leftovers."""
    before = read_dropped(store)
    keep = {s for s in before if (store.path / "snapshots" / s[:2] / s).is_file()}
    if keep != before:
        write_dropped(store, keep)


def ref_path(store: Repository, root: str) -> Path:
    """The ref log of the workspace at `root`."""
    return store.path / "refs" / "workspaces" / f"{workspace_key(root)}.jsonl"


def lost_history(store: Repository, ids: Iterable[str], named: set[str], *, min_age: float = 0.0,
                 now: float | None = None) -> dict[str, list[str]]:
    """{workspace root: snapshot ids} of workspace history that no ref names, reaches or dropped on purpose.

    Such a snapshot lost its ref line (a deleted or truncated ref file): it is no garbage, and gc must not
    collect it until `verify --repair` has put it back in its workspace's ref. `named`: ids a ref line
    names or a ref or pin reaches. Files younger than `min_age` seconds are left out (a capture holding
    the shared lock may be about to append its line).
    """
    dropped = read_dropped(store)
    now = time.time() if now is None else now
    out: dict[str, list[str]] = {}
    for sid in sorted(ids):
        if sid in named or sid in dropped:
            continue
        try:
            rec = store.record(sid)
            if min_age > 0 and now - os.stat(store.path / "snapshots" / sid[:2] / sid).st_mtime < min_age:
                continue
        except (StoreError, OSError):
            continue  # damage is verify's to report; a vanished file is nobody's history
        if rec.root == "/" or rec.kind in UNLISTED_KINDS:
            continue
        out.setdefault(rec.root, []).append(sid)
    return out


def lost_line(store: Repository, root: str, ids: list[str]) -> str:
    """One line naming the workspace whose ref lost these snapshots."""
    path = ref_path(store, root)
    how = "is missing" if not path.exists() else f"has lost {'its line' if len(ids) == 1 else 'their lines'}"
    return (f"{plural(len(ids), 'snapshot')} of workspace {root} {'is' if len(ids) == 1 else 'are'} named by no ref "
            f"(refs/workspaces/{path.name} {how}); "
            "`codexr snapshots verify --repair` rebuilds it from the snapshots")


def rebuild_refs(store: Repository, lost: dict[str, list[str]]) -> tuple[list[str], list[str]]:
    """Put lost snapshots back in their workspace refs (exclusive lock held): (repairs, problems left).

    A snapshot whose blobs are no longer all held (a delta base an earlier gc dropped) is recorded as
    dropped instead: it cannot be restored, and listing it would be damage.
    """
    repaired: list[str] = []
    problems: list[str] = []
    gone: set[str] = set()
    for root, ids in sorted(lost.items()):
        path = ref_path(store, root)
        existing = check_ref_file(path) if path.exists() else RefFile(path)
        if existing.problems:
            problems.append(f"{lost_line(store, root, ids)}, once its damaged ref file is mended")
            continue
        infos = list(existing.infos)
        complete = 0
        for sid in ids:
            try:
                needs = needs_of(store, sid)
            except StoreError:
                gone.add(sid)
                continue
            if any(b not in store.blobs.locations for b in needs.blobs):
                gone.add(sid)
                continue
            rec = store.record(sid)
            infos.append(SnapshotInfo(sid, rec.root, rec.created, rec.kind, rec.label,
                                      int(rec.meta.get("file_count", 0))))
            complete += 1
        infos.sort(key=lambda i: (i.created, i.id))
        if complete:
            atomic_write(path, b"".join(ref_line(i) + b"\n" for i in infos))
        left = len(ids) - complete
        incomplete = f", {left} incomplete {'one' if left == 1 else 'ones'} (blobs already collected) left out"
        repaired.append(f"rebuilt refs/workspaces/{path.name} of workspace {root}: {plural(complete, 'snapshot')} "
                        "named again" + (incomplete if left else ""))
    if gone:
        write_dropped(store, read_dropped(store) | gone)
    return repaired, problems
