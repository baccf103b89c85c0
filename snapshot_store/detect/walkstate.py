"""The last walk of a workspace, kept between processes: a capture without a change journal checks it first.

A one-shot `codexr snapshots capture` or `restore` has no inotify journal. Walking 11,000 files and deciding
each one again cost 0.25-0.45 s of such a command (bench/bench_startup.py), against ~60 ms to lstat every
directory and file the last walk saw. So the walk's stats are saved (the walk half of the index, index.py) and
a later capture of the same workspace, while they still describe its newest snapshot, looks instead of walking:
a directory whose entries changed (another listing: names or types) means walking; a file whose stat moved is
re-read through the change journal's fast path; nothing moved means the newest snapshot still holds.

Trusted exactly as far as the stat cache is (index.py): size, both timestamps, inode and mode must all be
equal, and a stat taken within the timestamp granularity of the capture that recorded it is never trusted.
"""

from __future__ import annotations

import functools
import itertools
import marshal
import os
import stat
import struct
from collections.abc import Callable, Collection, Container, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ..collector import held_off
from ..dirfd import DirCache, DirChanged, SymlinkInPath
from ..manifest import WALKED, Entry, FileMap, is_captured, parent_of, valid_key
from ..reasons import Reason
from ..records import NamedTuple, astuple, field, record, replace
from ..records import fields as record_fields
from ..scope import IGNORE_FILE, Ignore, entry_kind, forbidden, hidden, listing_digest
from ..settings import ScopeSettings
from ..stamps import Key, is_racy, stat_key
from .changes import Changes

DIGEST = 16  # bytes of a listing digest (scope.listing_digest)
KEY = struct.Struct("<QqqQQ")  # a stat key, packed: (size, mtime_ns, ctime_ns, ino, mode); times may be < 0
UNTRUSTED = b"\xff" * KEY.size  # matches no stat (no file is 2**64-1 bytes): looked at again every time
#: Reasons that depend only on names, rules and the stats the state keeps: a walk that saw any other
#: (unreadable, replaced or changing paths, symlinked directories) is not saved, so the next capture walks.
STABLE_REASONS = frozenset({Reason.GIT, Reason.CODEXR_DATA, Reason.CHURN, Reason.HIDDEN, Reason.IGNORED,
                            Reason.DIRECTORY, Reason.NOT_REGULAR, Reason.TOO_LARGE})
#: Entries whose verdict can change without their directory's stat moving (a write changes only the file).
STAT_BOUND_KINDS = frozenset({"f", "l"})
WALK_VERSION = 4  # the saved walk's fields as `encode` writes them, after their version
UNVERSIONED_FIELDS = 13  # version 1: the fields before `looked_ns`, a bare tuple
V2_FIELDS = 14  # version 2: `seen` a list of groups (decoded with the rest), no `untrusted`
V3_FIELDS = 15  # version 3: no `uncaptured`
UNCAPTURED_MAX = 64  # covered paths neither Git-tracked nor captured, named in the state up to this many
UNKNOWN_GONE = 4  # gone entries with untrusted keys (type unknown) whose 2**n typings `listed_moves` tries
CHAIN_LIMIT = 16  # unchanged snapshots on top of the one the state was saved for, before it is saved again

Group = tuple[str, list[str], bytes]  # a directory, names of entries in it, their packed keys (same order)


@record
class WalkState:
    """What a capture saw of one workspace, for the next process to check instead of walking.

    Kept compact because every one-shot capture loads it: entries are grouped by directory (one fd
    each when checked) with their stat keys packed in one bytes object; `covered` stays a marshal
    until asked for. (A dict of 11,000 key tuples took ~7 ms to load, this form ~0.7 ms.)
    """

    snapshot: str  # the workspace snapshot this describes (or one below a chain of unchanged ones)
    settings: tuple[Any, ...]  # ScopeSettings as a tuple
    git_signature: tuple[int, ...] | None
    protected: tuple[str, ...]
    packs: tuple[bytes, dict[str, int]]  # gc generation, {pack index name: inode} after the capture
    dirs: Group  # every directory the walk listed, parents first ("" = the root), under the pseudo-dir ""
    #: the marshal of `seen` as the index stores it, decoded when first asked (b"": `_seen` holds the groups)
    seen_stored: bytes
    covered_blob: bytes  # marshal of the sorted covered paths
    unwatched: dict[str, Key | None]  # covered paths below directories the walk did not list
    file_count: int
    skipped: list[tuple[str, str]]
    listings: bytes  # each of `dirs`' listing digest (scope.listing_digest), 16 bytes each, in the same order
    grows_same: bool  # every covered path is Git-tracked or captured: a walk that grows from it covers them all
    #: when the capture that saved it started: every directory listed as saved from before its look (0: unknown)
    looked_ns: int = 0
    #: the seen paths whose key is untrusted, as stored beside `seen_stored` (None: worked out from the groups)
    untrusted_stored: list[str] | None = None
    #: the covered paths neither Git-tracked nor captured, sorted (empty when `grows_same`; None: not known, more
    #: than UNCAPTURED_MAX or an older version's state)
    uncaptured: list[str] | None = None
    _seen: list[Group] | None = field(default=None, repr=False, compare=False)
    _covered: frozenset[str] | None = field(default=None, repr=False, compare=False)
    _seen_paths: SeenPaths | None = field(default=None, repr=False, compare=False)

    @property
    def seen(self) -> list[Group]:
        """The files and symlinks the walk captured or held back by size, per directory: decoded (and checked, as
        `decode` checks the rest) when first asked. The monitor's answer naming nothing never asks, and decoding
        and checking 100,000 names was ~25 ms of each one-shot command and turn at that size (issue 35). Raises
        DamagedWalk (a ValueError) for groups that are not clean (the caller walks)."""
        if self._seen is None:
            groups = _decoded_groups(self.seen_stored)
            if groups is None:
                raise DamagedWalk("damaged walk state")
            # held once, decoded (a session keeps its state between captures); `encode` marshals them again
            self._seen, self.seen_stored, self.untrusted_stored = groups, b"", None
        return self._seen

    def group(self, rel: str) -> Group | None:
        """The seen group of the listed directory `rel` (None: the walk saw no file there)."""
        return next((g for g in self.seen if g[0] == rel), None)

    def untrusted(self) -> list[str]:
        """The seen paths whose key is untrusted (never matches a stat: looked at by every check)."""
        if self._seen is None and self.untrusted_stored is not None:
            return self.untrusted_stored
        return untrusted_of(self.seen)

    @property
    def covered(self) -> list[str]:
        """Paths the saved capture covered: captured whatever the limits (Git-tracked and known ones)."""
        out = marshal.loads(self.covered_blob)
        if not isinstance(out, list):
            raise ValueError("damaged walk state")
        return out

    def covered_set(self) -> frozenset[str]:
        """`covered`, decoded once."""
        if self._covered is None:
            self._covered = frozenset(self.covered)
        return self._covered

    def seen_paths(self) -> SeenPaths:
        """Every path the check looks at in listed directories (built once)."""
        if self._seen_paths is None:
            self._seen_paths = SeenPaths(self.seen)
        return self._seen_paths

    def same_rules(self, settings: ScopeSettings, git_signature: tuple[int, ...] | None,
                   protected: tuple[str, ...]) -> bool:
        """Was it saved under these scope settings, this Git listing and these protected directories?"""
        return (self.settings == settings_key(settings) and self.git_signature == git_signature
                and self.protected == protected)


class DamagedWalk(ValueError):
    """A saved walk's groups failed the checks `decode` makes (found when first asked): walk instead."""


def made(*, seen: list[Group], **fields: Any) -> WalkState:
    """A walk state of groups made in this process (not read from an index)."""
    return WalkState(seen_stored=b"", _seen=seen, **fields)


def with_groups(state: WalkState, seen: list[Group], **fields: Any) -> WalkState:
    """`replace` of the state with other groups (and other fields): nothing stored of the old ones."""
    return replace(state, seen_stored=b"", untrusted_stored=None, _seen=seen, _seen_paths=None, **fields)


def residue_taken(state: WalkState) -> int:
    """How many files the capture that saved this walk took by the recent-file rule: its seen files outside `covered`,
    less those it held back by size. A saved walk held none back by the limit (`savable`), so a walk covering the
    same paths takes each new file too while these and the new ones together stay within it. Raises DamagedWalk."""
    covered, seen = state.covered_set(), state.seen
    outside = 0
    for parent, names, _keys in seen:
        prefix = f"{parent}/" if parent else ""
        outside += sum(1 for name in names if prefix + name not in covered)
    held = state.seen_paths()
    return outside - sum(1 for p, _why in state.skipped if p not in covered and p in held)


def covered_without(listed: Iterable[str], dropped: Container[str]) -> bytes:
    """The covered paths as stored (`covered_blob`), less `dropped`: filtered in their sorted order, as they were listed
    (sorting 100,000 paths again was ~26-35 ms, measured)."""
    return marshal.dumps([p for p in listed if p not in dropped], 2)


def seen_keys(state: WalkState, paths: Collection[str]) -> dict[str, Key | None]:
    """The stored key of each of `paths` the walk saw (one pass over its groups; None: untrusted); the others are left
    out."""
    wanted: dict[str, set[str]] = {}
    for p in paths:
        parent, _, name = p.rpartition("/")
        wanted.setdefault(parent, set()).add(name)
    out: dict[str, Key | None] = {}
    for parent, names, packed in state.seen:
        want = wanted.get(parent)
        if not want:
            continue
        prefix = f"{parent}/" if parent else ""
        for i, name in enumerate(names):
            if name in want:
                out[prefix + name] = unpack_key(KEY.unpack_from(packed, i * KEY.size))
    return out


def untrusted_of(seen: list[Group]) -> list[str]:
    """The paths of these groups whose key is untrusted."""
    out: list[str] = []
    for parent, names, packed in seen:
        if UNTRUSTED in packed:  # maybe (a match may straddle two keys): look at each
            prefix = f"{parent}/" if parent else ""
            out.extend(prefix + name for i, name in enumerate(names)
                       if packed[i * KEY.size:(i + 1) * KEY.size] == UNTRUSTED)
    return out


class SeenPaths(Container[str]):
    """Is a path one of the files a walk state saw? Asked by directory and name: a set of every joined path held
    ~14 MB of a one-file restore's peak at 100,000 files (measured); these sets hold the names the state has."""

    def __init__(self, seen: list[Group]) -> None:
        # A directory's set is made when a path there is first asked: the monitor's answer asks about a few
        # directories, and sets of all 100,000 names were ~0.03 s of each such capture (issue 35).
        self._groups = {parent: names for parent, names, _k in seen}
        self._names: dict[str, frozenset[str]] = {}

    def _names_in(self, parent: str) -> frozenset[str] | None:
        names = self._names.get(parent)
        if names is None:
            listed = self._groups.get(parent)
            if listed is None:
                return None
            names = self._names[parent] = frozenset(listed)
        return names

    def __contains__(self, path: object) -> bool:
        if type(path) is not str:
            return False
        parent, sep, name = path.rpartition("/")
        if sep and not parent:
            return False  # "/name" is no path below the root ("" joins its names without a slash)
        names = self._names_in(parent)
        return names is not None and name in names

    def missing(self, paths: Iterable[str]) -> list[str]:
        """The paths that are not seen ones, asked by directory: one set difference per directory instead of a call
        per path (100,000 captured paths: ~0.2 s through `in`, measured in a one-shot restore; issue 35)."""
        by_parent: dict[str, list[str]] = {}
        out: list[str] = []
        for path in paths:
            parent, sep, name = path.rpartition("/")
            if sep and not parent:
                out.append(path)
            else:
                by_parent.setdefault(parent, []).append(name)
        empty: frozenset[str] = frozenset()
        for parent, names in by_parent.items():
            gone = set(names).difference(self._names_in(parent) or empty)
            if gone:
                prefix = parent + "/" if parent else ""
                out.extend(prefix + name for name in gone)
        return out


def settings_key(settings: ScopeSettings) -> tuple[Any, ...]:
    """The settings as a plain tuple (marshal-able, comparable across processes)."""
    return astuple(settings)


def pack_key(key: Key | None) -> bytes:
    """A stat key as stored (None, or a value out of range: untrusted)."""
    if key is None:
        return UNTRUSTED
    try:
        return KEY.pack(*key)
    except struct.error:
        return UNTRUSTED


def unpack_key(packed: tuple[int, ...]) -> Key | None:
    """A stored key back (None: untrusted)."""
    return None if packed[0] == 2**64 - 1 else (packed[0], packed[1], packed[2], packed[3], packed[4])


def group(keys: dict[str, Key | None]) -> list[Group]:
    """Entries by directory, for `check`."""
    # Packed into one buffer per directory: a bytes object per key until the join was ~7 MB more at 100,000 files.
    by_dir: dict[str, tuple[list[str], bytearray]] = {}
    for rel in sorted(keys):
        parent, _, name = rel.rpartition("/")
        names, packed = by_dir.setdefault(parent, ([], bytearray()))
        names.append(name)
        packed += pack_key(keys[rel])
    return [(parent, names, bytes(packed)) for parent, (names, packed) in by_dir.items()]


def _rekey(group: Group, change: dict[str, Key | None]) -> Group:
    """One group with the keys of the names in `change` replaced."""
    parent, names, packed = group
    if not change:
        return group
    size = KEY.size
    return parent, names, b"".join(pack_key(change[name]) if name in change else packed[i * size:(i + 1) * size]
                                   for i, name in enumerate(names))


def with_keys(groups: list[Group], keys: dict[str, Key | None]) -> list[Group]:
    """The same groups with some entries' keys replaced (paths not in a group are ignored)."""
    if not keys:
        return groups
    by_dir: dict[str, dict[str, Key | None]] = {}
    for rel, key in keys.items():
        parent, _, name = rel.rpartition("/")
        by_dir.setdefault(parent, {})[name] = key
    return [_rekey(g, by_dir[g[0]]) if g[0] in by_dir else g for g in groups]


def with_dir_keys(dirs: Group, keys: dict[str, Key | None]) -> Group:
    """The directories' group (whose names are whole paths) with some keys replaced."""
    return _rekey(dirs, keys)


def pack_signature(packs_dir: Path, generation: bytes) -> tuple[bytes, dict[str, int]]:
    """gc's generation and the pack indexes present: while both hold, every blob indexed then still is."""
    with os.scandir(packs_dir) as it:
        return generation, {e.name: e.inode() for e in it if e.name.endswith(".idx")}


def packs_hold(then: tuple[bytes, dict[str, int]], now: tuple[bytes, dict[str, int]]) -> bool:
    """Same gc generation, and every pack index seen then still there, the same file (new ones may appear)."""
    return then[0] == now[0] and all(now[1].get(name) == ino for name, ino in then[1].items())


def trusted(key: Key | None, started_ns: int) -> Key | None:
    """The key, or None when it was taken too close to the capture's start to vouch for anything."""
    return None if key is None or is_racy(key, started_ns) else key


def savable(unstable: int, skipped: list[tuple[str, str]]) -> bool:
    """Only a walk whose every verdict the kept stats can re-check is saved: no skip but by size, and no entry
    of a reason outside STABLE_REASONS (`unstable` counts them: mapfacts.MapFacts)."""
    # Files over the recent-file limit are not stable: the next capture covers what this one took, which frees
    # room under the limit, so a walk would take some of them then.
    return unstable == 0 and all(why.startswith(str(Reason.TOO_LARGE)) for _p, why in skipped)


def same_map(covered_then: frozenset[str], covered_now: set[str], files: FileMap, captured: set[str],
             settings: ScopeSettings, ignore: Ignore, dropped: set[str] | None = None) -> bool:
    """Would a walk covering `covered_now` give the map a walk covering `covered_then` gave (`files`), stats equal?

    Paths covered now and not then are the fast path's to settle (newly known) when the walk saw them; one it
    did not see (absent, or below a directory it did not list) would get an entry of its own from a walk. A path
    covered then and not now becomes a recent-residue candidate: the same entry only if it is a captured,
    visible, unignored file of a listed directory within the size limit; and every captured file no longer
    covered must fit the residue's count, or which of them stay would be the walk's choice. `captured`: the paths
    of `files` that are files or symlinks. (Set differences: three passes over 11,000 paths in Python were ~12 ms.)
    With `dropped`, a tombstone covered then and not now (a removed file no longer captured, so no longer known) is
    added to it: a walk would record nothing there, and the caller's fast path drops it (else such a walk followed
    every removal of an untracked file).
    """
    if any(p not in files and not forbidden(p) for p in covered_now - covered_then):
        return False
    if len(captured - covered_now) > settings.residue_max_files:
        return False
    for p in covered_then - covered_now:
        e = files.get(p)
        if dropped is not None and e is not None and e.kind == "-":
            dropped.add(p)
            continue
        if not is_captured(e) or files.get(parent_of(p)) != WALKED:
            return False
        if hidden(p, settings) or ignore.file(p):
            return False
        if e.kind == "f" and e.size > settings.residue_max_file_bytes:
            return False
    return True


def uncaptured(covered: frozenset[str], git_paths: Collection[str], files: Mapping[str, Entry],
               among: Iterable[str] | None = None) -> list[str]:
    """The covered paths neither Git-tracked nor captured, sorted: none, and a capture that grows from `files` covers
    every one again (`grows_same`); a tombstone among them it covers no more (`Look.tombstones_only`).

    `among`: only these paths are asked (the entries a capture moved, when the answer for the rest is none). A map
    given only in part (a capture that read only changed files) can only name a path wrongly, never miss one: the
    next capture decodes, or finds that path's entry no tombstone.
    """
    if among is not None:
        # git_paths is the listing as a list: asked last, and only of a covered path that is not captured
        return sorted(p for p in among if p in covered and not is_captured(files.get(p)) and p not in git_paths)
    return sorted(p for p in covered.difference(git_paths) if not is_captured(files.get(p)))


def named(paths: list[str]) -> list[str] | None:
    """`uncaptured` as the state keeps it: None beyond UNCAPTURED_MAX paths (a capture then does as before)."""
    return paths if len(paths) <= UNCAPTURED_MAX else None


def stat_bound(files: Mapping[str, Entry], rel: str) -> bool:
    """Must this entry's stat be checked? Captured files, those held back by their size, and the ignore file.

    Every other verdict a walk gives (hidden, ignored, a churn directory, not a regular file) follows from
    names, rules and file types, which cannot change without the directory's stat moving.
    """
    if rel == IGNORE_FILE:
        return True  # its rules decide every other verdict; the fast path walks when it changes
    e = files.get(rel)
    return e is not None and (e.kind in STAT_BOUND_KINDS or (e.kind == "x" and e.reason == Reason.TOO_LARGE))


@record
class Check:
    """The outcome of looking at the saved stats again: what a change journal would have reported."""

    changes: Changes
    keys: dict[str, Key]  # the current stat of every changed file
    dir_keys: dict[str, Key] = field(default_factory=dict)  # directories whose stat moved, listing the same
    #: directories listing the saved entries plus new files or symlinks, which `changes` names: {dir: {name: type}}
    added: dict[str, dict[str, str]] = field(default_factory=dict)
    #: directories listing the saved entries less files or symlinks the walk saw, which `changes` names (the same)
    gone: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        """Nothing moved: no directory, no file."""
        return not self.changes.structural and not self.changes.files

    def gone_paths(self) -> set[str]:
        """The paths of the walk's files and symlinks found gone from their listed directories (`gone`)."""
        return _joined(self.gone)

    def made_paths(self) -> set[str]:
        """The paths of the files and symlinks found made in listed directories (`added`)."""
        return _joined(self.added)


def _joined(by_dir: Mapping[str, Mapping[str, str]]) -> set[str]:
    """{directory: {name: type}} as the paths they name."""
    return {f"{rel}/{name}" if rel else name for rel, names in by_dir.items() for name in names}


def check(dirs: DirCache, state: WalkState) -> Check:
    """lstat every directory (through its fd, never following a symlink) and every file the state saw.

    Directories go parents first, each one's files right after it through the fd just opened (one open per
    directory). A directory that moved and lists differently ends the look (the capture walks). Files are
    compared a directory at a time, packed as stored (a third faster than comparing tuples one by one).
    """
    changes = Changes()
    out = Check(changes, {})
    groups = {group[0]: group for group in state.seen}
    lstat, pack, size = os.lstat, KEY.pack, KEY.size
    _root, names, packed = state.dirs
    for i, (rel, stored) in enumerate(zip(names, KEY.iter_unpack(packed), strict=True)):
        try:
            fd = dirs.dir_fd(rel)
            now = stat_key(os.fstat(fd))
            # Moved: entries made, removed or renamed, or one renamed over another (an editor's or a restore's
            # save). Listed again: the same names of the same types leave every verdict of the walk standing.
            if now != unpack_key(stored):  # an untrusted key never equals
                entries = listed_names(fd)
                saved = state.listings[i * DIGEST:(i + 1) * DIGEST]
                if listing_digest(entries) == saved:
                    out.dir_keys[rel] = now
                else:
                    there = functools.partial(there_before, fd, state.looked_ns) if state.looked_ns else None
                    moved = listed_moves(entries, saved, groups.get(rel), there)
                    if moved is None:
                        changes.structural = True
                        return out
                    note_moves(out, rel, *moved)
            group = groups.pop(rel, None)
            if group is not None and rel in out.gone:
                group = _without_names(group, out.gone[rel])  # gone: the fast path settles them
            if group is None or not group[1]:
                continue
            _parent, files, keys = group
            stats = [lstat(name, dir_fd=fd) for name in files]
            now_packed = b"".join([pack(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
                                   for st in stats])
        except (OSError, SymlinkInPath, DirChanged, struct.error):
            changes.structural = True  # gone although its directory lists the same (a race), or odd: walk
            return out
        if now_packed == keys:
            continue
        for j, (name, st) in enumerate(zip(files, stats, strict=True)):
            if now_packed[j * size:(j + 1) * size] != keys[j * size:(j + 1) * size]:
                path = f"{rel}/{name}" if rel else name
                changes.files.add(path)
                changes.paths.add(path)
                out.keys[path] = stat_key(st)
    if groups:
        changes.structural = True  # files of a directory the walk did not list: never saved so; walk
        return out
    look_unwatched(dirs, state, out)
    return out


def look_unwatched(dirs: DirCache, state: WalkState, out: Check) -> None:
    """Covered paths below directories the walk did not list (no directory watch reports on them): a path that
    appeared or went needs the walk (`structural`), as in the journal's fast path (fastpath.select); a changed one is
    read again."""
    changes = out.changes
    for p, key in state.unwatched.items():
        try:
            found: Key | None = stat_key(dirs.lstat(p))
        except FileNotFoundError:
            found = None
        except (OSError, SymlinkInPath, DirChanged):
            changes.structural = True
            return
        if found != key:
            if key is None or found is None:
                changes.structural = True
                return
            changes.files.add(p)
            changes.paths.add(p)
            out.keys[p] = found


def note_moves(out: Check, rel: str, added: dict[str, str], gone: dict[str, str]) -> None:
    """The files made in directory `rel` and the walk's files gone from it (`listed_moves`), as a check's changes."""
    if added:
        out.added[rel] = added
    if gone:
        out.gone[rel] = gone
    prefix = f"{rel}/" if rel else ""
    out.changes.files.update(prefix + name for name in (*added, *gone))
    out.changes.paths.update(prefix + name for name in (*added, *gone))


def there_before(fd: int, looked_ns: int, name: str) -> bool:
    """Was this entry in its directory when the saved walk's capture looked (its listing then the saved one)? Its
    inode's status changed last before that capture started: one made, renamed or linked there since changed it
    later. (A wrong guess costs nothing but the walk: the listing digest decides.)"""
    try:
        return os.lstat(name, dir_fd=fd).st_ctime_ns <= looked_ns
    except OSError:
        return False


def listed_moves(entries: list[str], saved: bytes, group: Group | None,
                  there: Callable[[str], bool] | None = None) -> tuple[dict[str, str], dict[str, str]] | None:
    """The files and symlinks made in a directory since its listing was saved, and those of the walk's that are gone
    ({name: type} each), when its listing now is exactly the saved one plus the first less the second (None: anything
    else moved, so the check cannot say what: walk).

    The saved listing is a digest, not names: the entries it may have held are the files and symlinks the walk saw
    (the state's group of the directory, whose keys give their types; an untrusted key's entry is tried as either,
    for a few) and every directory; a file or symlink not among them is taken as new, one of them missing as gone,
    and the digest of the listing less the new, plus the gone, must be the saved one. A file or symlink the state
    does not see (an ignored or hidden file) is taken as there before when `there` says so (by its ctime), not as
    new: a file made at a workspace's root, beside its `.env`, made the next capture walk. Where a directory was made
    or removed, an entry changed its type, or an unseen entry went or changed since, it lists otherwise and walks,
    as before. A file the user made or removed between turns made the next one-shot capture walk the whole tree
    (~2.5 s at 100,000 files, issue 35); now the fast path settles it as a walk would."""
    seen: dict[str, str | None] = {}
    if group is not None:
        for j, name in enumerate(group[1]):
            key = unpack_key(KEY.unpack_from(group[2], j * KEY.size))
            seen[name] = None if key is None else ("l" if stat.S_ISLNK(key[4]) else "f")
    listed: set[str] = set()
    added: dict[str, str] = {}
    kept: list[str] = []
    for entry in entries:
        name, _, kind = entry.rpartition("/")
        listed.add(name)
        if kind in ("f", "l") and name not in seen and not (there is not None and there(name)):
            added[name] = kind
        else:
            kept.append(entry)
    gone = {name: kind for name, kind in seen.items() if name not in listed}
    unknown = [name for name, kind in gone.items() if kind is None]  # untrusted keys: a file or a symlink
    if not (added or gone) or len(unknown) > UNKNOWN_GONE:
        return None
    kept.extend(f"{name}/{kind}" for name, kind in gone.items() if kind is not None)
    for kinds in itertools.product("fl", repeat=len(unknown)):
        if listing_digest([*kept, *(f"{n}/{k}" for n, k in zip(unknown, kinds, strict=True))]) == saved:
            typed = {n: k for n, k in gone.items() if k is not None}
            typed.update(zip(unknown, kinds, strict=True))
            return added, typed
    return None


def _without_names(group: Group, names: Container[str]) -> Group:
    """A group less some of its entries."""
    parent, group_names, packed = group
    keep = [j for j, name in enumerate(group_names) if name not in names]
    size = KEY.size
    return parent, [group_names[j] for j in keep], b"".join(packed[j * size:(j + 1) * size] for j in keep)


class Checked(NamedTuple):
    """A loaded state, what a look at its stats found, and how many unchanged snapshots it lies below."""

    state: WalkState
    check: Check
    chain: int


def listed_names(fd: int) -> list[str]:
    """A directory's entries now as its listing digest takes them ("name/type"), read through its fd."""
    with os.scandir(fd) as it:
        return [f"{de.name}/{entry_kind(de)}" for de in it]


def with_listed(state: WalkState, made: dict[str, dict[str, tuple[str, Key | None]]],
                listed: Callable[[str], list[str] | None],
                also: Mapping[str, Mapping[str, str]] | None = None,
                gone: Mapping[str, Mapping[str, str]] | None = None) -> WalkState | None:
    """`state` with files made in directories it listed: each such directory listed again (`listed`), its entries
    must be the saved ones plus exactly the files made ({dir: {name: (type, key)}}) and the entries `also` names
    ({dir: {name: type}}: made too, but nothing the check looks at, e.g. an ignored file), less those `gone` names
    (files of its group no longer there), then the new listing is kept, the directory's key is untrusted (the next
    check lists it again), the files made join its group and the gone ones leave it. None where a directory is not
    listed by the state, cannot be listed, or lists anything else (something appeared meanwhile: walk)."""
    names = state.dirs[1]
    at = {rel: i for i, rel in enumerate(names)}
    listings = bytearray(state.listings)
    keys: dict[str, Key | None] = {}
    also, gone = also or {}, gone or {}
    moved = made.keys() | also.keys() | gone.keys()
    for rel in moved:
        files = made.get(rel, {})
        i = at.get(rel)
        now = listed(rel) if i is not None else None
        if i is None or now is None:
            return None
        listed_made = {f"{name}/{kind}" for name, (kind, _k) in files.items()}
        listed_made.update(f"{name}/{kind}" for name, kind in also.get(rel, {}).items())
        before = [n for n in now if n not in listed_made]
        if len(before) != len(now) - len(listed_made) or listing_digest(
                before + [f"{name}/{kind}" for name, kind in gone.get(rel, {}).items()]) != \
                bytes(listings[i * DIGEST:(i + 1) * DIGEST]):
            return None
        listings[i * DIGEST:(i + 1) * DIGEST] = listing_digest(now)
        keys.update((f"{rel}/{name}" if rel else name, key) for name, (_kind, key) in files.items())
    regrouped = made.keys() | gone.keys()
    seen = {f"{parent}/{name}" if parent else name: unpack_key(KEY.unpack_from(packed, j * KEY.size))
            for parent, group_names, packed in state.seen if parent in regrouped
            for j, name in enumerate(group_names) if name not in gone.get(parent, {})}
    seen.update(keys)
    groups = [g for g in state.seen if g[0] not in regrouped] + group(seen)
    return with_groups(state, groups, dirs=with_dir_keys(state.dirs, dict.fromkeys(moved)), listings=bytes(listings))


class CapturedStats(Mapping[str, Key]):
    """The stat of every captured file as the state saw it, unpacked only when asked (a restore asks for a few).

    Building the whole map cost ~20-30 ms of every one-shot capture or restore on 11,000 files (unpacking every
    key alone ~15), though only the paths a restore touches are ever looked up.
    """

    def __init__(self, captured: set[str], state: WalkState, fresh: Mapping[str, Key] | None = None) -> None:
        self._captured = captured
        self._state = state
        self._fresh = fresh or {}  # keys taken since (files read again), which the state's own do not stand for
        self._groups = {parent: (names, packed) for parent, names, packed in state.seen}
        self._indexes: dict[str, dict[str, int]] = {}

    def _seen_key(self, path: str) -> Key | None:
        parent, _, name = path.rpartition("/")
        group = self._groups.get(parent)
        if group is None:
            return None
        names, packed = group
        index = self._indexes.get(parent)
        if index is None:
            index = self._indexes[parent] = {n: i for i, n in enumerate(names)}
        i = index.get(name)
        return None if i is None else unpack_key(KEY.unpack_from(packed, i * KEY.size))

    def _key(self, path: str) -> Key | None:
        if path not in self._captured:
            return None
        fresh = self._fresh.get(path)
        return fresh if fresh is not None else (self._seen_key(path) or self._state.unwatched.get(path))

    def __getitem__(self, path: str) -> Key:
        key = self._key(path)
        if key is None:
            raise KeyError(path)
        return key

    def __iter__(self) -> Iterator[str]:
        """Captured paths with a key (one the check found changed may have none: it is read again)."""
        return (p for p in self._captured if self._key(p) is not None)

    def __len__(self) -> int:
        return sum(1 for _p in self)


def all_seen(state: WalkState, paths: Collection[str]) -> bool:
    """Whether every one of `paths` (distinct) is a path the state saw, counted from its groups without building a
    set of them: as many seen paths among `paths` as there are `paths` (each seen path counted once: parents are
    distinct and each group's names strictly sorted, as `group` writes them; a state otherwise says False, and
    SeenPaths.missing decides). ~0.03 s at 100,000 captured paths against ~0.16 s for SeenPaths and `missing`
    (measured in a one-shot restore's safety capture; issue 35)."""
    if len({parent for parent, _names, _k in state.seen}) != len(state.seen):
        return False
    held = 0
    for parent, names, _k in state.seen:
        if not all(map(str.__lt__, names, itertools.islice(names, 1, None))):
            return False
        if parent:
            prefix = parent + "/"
            held += sum(1 for name in names if prefix + name in paths)
        else:
            held += sum(1 for name in names if name in paths)
    return held == len(paths)


def captured_stats(captured: set[str], state: WalkState, changed: set[str]) -> Mapping[str, Key] | None:
    """The stat of every captured path (files and symlinks of the map), as the state saw it; None if one has none
    it can vouch for (then walk).

    A captured file needs a trusted key in its directory's group, or one among the unwatched paths, unless the
    check found it `changed` (it is read again; an untrusted key never matches, so the check always names those).
    A file written just before a capture (its key untrusted) used to make the next capture walk (~0.3-0.45 s of
    a one-shot restore on 11,000 files, bench_startup). Groups are looked at whole: one without any untrusted
    key is settled by a single bytes search.
    """
    untrusted = set(untrusted_of(state.seen))
    unwatched = state.unwatched
    doubtful = [] if all_seen(state, captured) else state.seen_paths().missing(captured)
    doubtful.extend(untrusted & captured)
    if any(unwatched.get(p) is None and p not in changed for p in doubtful):
        return None
    return CapturedStats(captured, state)


def decode(body: bytes | memoryview) -> WalkState | None:
    """The walk half of the index (index.py), checked (None: damaged or foreign; a disposable cache: then walk). The
    groups of seen files are checked when first asked (`WalkState.seen`), the rest here."""
    try:
        doc = marshal.loads(body)
        if (isinstance(doc, tuple) and len(doc) == 2 and isinstance(doc[1], tuple)
                and (doc[0], len(doc[1])) in ((WALK_VERSION, V3_FIELDS + 1), (3, V3_FIELDS))):
            state = WalkState(*doc[1])  # version 3: `uncaptured` None (not known)
            if not (isinstance(state.seen_stored, bytes) and isinstance(state.untrusted_stored, list)
                    and all(isinstance(p, str) and p and valid_key(p) for p in state.untrusted_stored)
                    and (state.uncaptured is None or (isinstance(state.uncaptured, list) and all(
                        isinstance(p, str) and p and valid_key(p) for p in state.uncaptured)))):
                return None
        elif (isinstance(doc, tuple) and len(doc) == 2 and doc[0] == 2 and isinstance(doc[1], tuple)
                and len(doc[1]) == V2_FIELDS):
            state = _with_seen(doc[1])
        elif isinstance(doc, tuple) and len(doc) == UNVERSIONED_FIELDS:
            state = _with_seen(doc)  # version 1: no `looked_ns` (0)
        else:
            return None  # another version's, or damaged
        if not (isinstance(state.snapshot, str) and isinstance(state.dirs, tuple)
                and isinstance(state.listings, bytes) and len(state.listings) == DIGEST * len(state.dirs[1])
                and isinstance(state.looked_ns, int)
                and clean_paths(state)):
            return None
        return state
    except (ValueError, EOFError, TypeError):
        return None


def _with_seen(fields: tuple[Any, ...]) -> WalkState:
    """A state of version 1 or 2 (its groups a list among the fields), checked as version 3's are when asked."""
    seen = fields[6]
    if not (isinstance(seen, list) and clean_groups(seen)):
        raise ValueError("damaged walk state")
    names = [f.name for f in record_fields(WalkState)]
    return WalkState(**dict(zip(names, (*fields[:SEEN_FIELD], b"", *fields[SEEN_FIELD + 1:]), strict=False)),
                     _seen=seen)


def _decoded_groups(stored: bytes) -> list[Group] | None:
    """Stored groups, decoded and checked (None: damaged or not clean)."""
    try:
        with held_off():  # a list and a tuple per directory: collections as they piled up, 35-138 ms at 100k files
            seen = marshal.loads(stored)
    except (ValueError, EOFError, TypeError):
        return None
    return seen if isinstance(seen, list) and clean_groups(seen) else None


def clean_paths(state: WalkState) -> bool:
    """Every path the check looks at, or the fast path may read, is a clean relative one (no `..`, no `.git`).

    The file is checksummed against damage, not forged: a crafted `../x` would have the capture look (and read)
    outside the workspace. The groups of seen files are checked when first decoded (`clean_groups`).
    """
    if not all(isinstance(rel, str) and valid_key(rel) for rel in state.dirs[1]):
        return False
    return all(isinstance(p, str) and p and valid_key(p) for p in state.unwatched)


def clean_groups(seen: list[Any]) -> bool:
    """`clean_paths` of the groups of seen files, checked a directory at a time with string operations (11,000
    names: ~1 ms)."""
    for g in seen:
        if not (isinstance(g, tuple) and len(g) == 3):
            return False
        parent, names, packed = g
        if not (isinstance(parent, str) and valid_key(parent) and isinstance(names, list) and names
                and all(type(n) is str for n in names)
                and isinstance(packed, bytes) and len(packed) == KEY.size * len(names)):
            return False
        joined = "/".join(names)  # a name holding "/" would add one; NUL, ".", "..", ".git" are refused outright
        if (joined.count("/") != len(names) - 1 or "\0" in joined or not _BAD_NAMES.isdisjoint(names)
                or "/.git/" in f"/{joined.lower()}/"):
            return False
    return True


_BAD_NAMES = frozenset({"", ".", ".."})


SEEN_FIELD, COVERED_FIELD = 6, 7  # where `_fields` puts the groups' marshal and the covered paths'


def _fields(state: WalkState, *, streamed: bool = False) -> tuple[Any, ...]:
    """The fields `encode` writes, in their order (the groups and the untrusted paths made from `_seen` if decoded
    or made here, else as stored; `streamed`: groups to be made are left to the caller, b"" in their place)."""
    decoded = state._seen is not None
    seen_at = (b"" if streamed else marshal.dumps(state._seen, 2)) if decoded else state.seen_stored
    untrusted = state.untrusted()
    return (state.snapshot, state.settings, state.git_signature, state.protected, state.packs, state.dirs,
            seen_at, state.covered_blob, state.unwatched, state.file_count, state.skipped, state.listings,
            state.grows_same, state.looked_ns, untrusted, state.uncaptured)


def encode(state: WalkState) -> bytes | None:
    """The state as the index stores it (None: a field marshal cannot write; the next capture walks): the fields
    with their version (an older reader finds no state it knows in it, and walks)."""
    try:
        return marshal.dumps((WALK_VERSION, _fields(state)), 2)
    except ValueError:
        return None


_COUNT = struct.Struct("<i")  # marshal's count of a tuple's or list's items, or a string's bytes
#: Where `encode`'s bytes hold the snapshot's id (its first field's text): after the version's tuple, the version and
#: the fields' tuple with their counts, and the text's length.
ID_AT = len(marshal.dumps((WALK_VERSION, ("",)), 2))
PLACEHOLDER = "0" * 64  # a snapshot id not known yet, written over in place (`encode_parts`)


def encode_parts(state: WalkState, covered: list[str] | None = None) -> Iterator[bytes]:
    """`encode`'s bytes in pieces, never joined (raises ValueError where `encode` gives None): marshal's version 2
    writes no references, so a container is its header and its items' own marshals. `covered`: the sorted covered
    paths, written as the marshal that `covered_blob` holds (which is then not read). The whole state's marshal, and
    the covered paths' inside it, were ~20 MB of the cold 100,000-file capture (measured)."""
    fields = _fields(state, streamed=True)
    yield b"(" + _COUNT.pack(2) + marshal.dumps(WALK_VERSION, 2) + b"(" + _COUNT.pack(len(fields))
    for i, value in enumerate(fields):
        if i == SEEN_FIELD and state._seen is not None:  # marshal.dumps(groups, 2) as a bytes field, group by group
            groups = state._seen
            size = 1 + _COUNT.size + sum(len(marshal.dumps(g, 2)) for g in groups)
            yield b"s" + _COUNT.pack(size) + b"[" + _COUNT.pack(len(groups))
            yield from (marshal.dumps(g, 2) for g in groups)
        elif i == COVERED_FIELD and covered is not None:  # covered_blob: marshal.dumps(covered, 2) as a bytes field
            size = 1 + _COUNT.size + sum(len(marshal.dumps(p, 2)) for p in covered)
            yield b"s" + _COUNT.pack(size) + b"[" + _COUNT.pack(len(covered))
            yield from (marshal.dumps(p, 2) for p in covered)
        else:
            yield marshal.dumps(value, 2)
