"""Which paths a capture looks at: Git-tracked, known and recent residue files, minus ignored paths."""

from __future__ import annotations

import errno
import marshal
import os
import stat
import struct
from collections.abc import Callable, Iterable
from collections.abc import Set as AbstractSet
from pathlib import Path

import blake3

from . import wildmatch
from .dirfd import DirCache, DirChanged, SymlinkInPath
from .errors import IgnoreFileError, WorkspaceError
from .fsutil import NotSmallRegular, atomic_write_parts, read_small_regular
from .manifest import ABSENT, WALKED, Entry, FileMap, SkippedEntry, UnlistedDir
from .manifest import forbidden as forbidden  # defined there, next to valid_key; named here for callers
from .names import EXACT, Folding
from .reasons import Reason, unreadable
from .records import NamedTuple, field, record
from .settings import ScopeSettings
from .stamps import Key, stat_key

IGNORE_FILE = ".codexsnapignore"
IGNORE_FILE_MAX_BYTES = 1024 * 1024  # a rule file this large is a mistake (or /dev/zero), not rules
TOO_LARGE = Reason.TOO_LARGE
OVER_LIMIT = Reason.OVER_LIMIT
HIDDEN = Reason.HIDDEN
REPLACED = Reason.REPLACED
GITLINK_MODE = 0o160000


class Ignore:
    """`.codexsnapignore` rules (gitignore syntax); the current file governs capture and restore.

    Decided as `git check-ignore` does: a path whose parent directory is ignored stays ignored
    whatever later `!` rules say; otherwise the last matching rule wins.
    """

    def __init__(self, rules: list[wildmatch.Rule] | None = None, folding: Folding = EXACT) -> None:
        self.rules = rules or []
        self._dirs: dict[str, bool] = {"": False}
        self._key = folding.key if folding.any else None  # a folding volume: rules and paths compared folded

    @classmethod
    def load(cls, root: Path, folding: Folding = EXACT) -> Ignore:
        """Read the workspace's ignore file; a bad file is an error, never silently ignored. On a volume that folds
        names the rules match every spelling of a name, as Git's do with `core.ignorecase`."""
        path = root / IGNORE_FILE
        data = _read_ignore_file(path)
        if data is None:
            return cls()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise IgnoreFileError(f"{path}: not valid UTF-8 (byte {exc.start})") from exc
        if folding.any:
            data = folding.key(text).encode("utf-8")
        try:
            return cls(wildmatch.parse_rules(data), folding)
        except ValueError as exc:
            raise IgnoreFileError(f"{path}: {exc}") from exc

    def _dir_ignored(self, rel: str) -> bool:
        """Is this directory, or one above it, ignored? (memoised; iterative, whatever the depth)"""
        known = self._dirs.get(rel)
        if known is not None:
            return known
        parts = rel.split("/")
        verdict = False
        for n in range(1, len(parts) + 1):
            sub = "/".join(parts[:n])
            hit = self._dirs.get(sub)
            if hit is None:
                hit = verdict or bool(wildmatch.last_match(self.rules, os.fsencode(sub), True))
                self._dirs[sub] = hit
            verdict = hit
        return verdict

    def file(self, rel: str) -> bool:
        """Is this file path (or one of its parents) ignored?"""
        if not self.rules:
            return False
        if self._key is not None:
            rel = self._key(rel)
        parent = rel.rpartition("/")[0]
        if parent and self._dir_ignored(parent):
            return True
        return bool(wildmatch.last_match(self.rules, os.fsencode(rel), False))

    def directory(self, rel: str) -> bool:
        """Is this directory ignored?"""
        return bool(self.rules) and self._dir_ignored(rel if self._key is None else self._key(rel))


def _read_ignore_file(path: Path) -> bytes | None:
    """The ignore file's bytes, or None if there is none; only a regular file under the size limit.

    A FIFO would block the capture (and gc behind its lock) forever, a link to /dev/zero would
    fill memory: neither is read.
    """
    try:
        return read_small_regular(path, IGNORE_FILE_MAX_BYTES, nofollow=True)
    except FileNotFoundError:
        return None
    except NotSmallRegular as exc:
        raise IgnoreFileError(f"{path}: {exc}") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise IgnoreFileError(f"{path}: is a symlink; it must be a regular file") from exc
        raise IgnoreFileError(f"{path}: cannot be read: {exc.strerror}") from exc


Place = tuple[tuple[tuple[str, int, int], ...], tuple[int, ...] | None]
"""Where Git discovery found the repository, in stats (see `git_place`): the directories from the workspace root
up to the work tree (or to `/` when there is no repository), each as (path, st_dev, st_ino), and the `.git`
directory's (st_dev, st_ino, mtime_ns, ctime_ns) followed by its `config`'s (mtime_ns, size, ino, ctime_ns)."""


class GitTracked:
    """Git-indexed paths under the workspace root, and the index signature they came from.

    A listing a previous process saved (`load`) reads its paths from the file only when they are first asked: a
    capture that grows from the workspace's newest snapshot never needs them, and decoding 100,000 paths was ~24 ms
    of each one-shot command and each turn's first capture at that size (measured; issue 35).
    """

    __slots__ = ("_paths", "_saved", "place", "reread", "root", "signature", "source")

    def __init__(self, paths: list[str] | None, signature: tuple[int, ...] | None,
                 source: tuple[str, str] = ("", ""), place: Place | None = None,
                 saved: tuple[str, int, int, bytes] | None = None) -> None:
        self._paths = paths
        self.signature = signature
        #: (index file, workspace prefix in the work tree): with `signature`, what a cached listing must match
        self.source = source
        #: what discovery saw; while `place_holds`, the listing is reused without importing pygit2
        self.place = place
        self._saved = saved  # (file, offset, length, blake3) of the paths' marshal in a saved listing, not read yet
        self.root: Path | None = None  # the workspace `git_tracked` reused it for: pygit2 reads it again if need be
        self.reread = False  # its paths came from pygit2 after all: worth saving again

    @property
    def paths(self) -> list[str]:
        """The tracked paths; a saved listing whose paths part is gone or damaged by now (another process wrote
        the file again) is read again through pygit2 from the workspace it was reused for."""
        if self._paths is None:
            got = self.saved_paths()
            if got is None:
                if self.root is None:
                    raise ValueError("a saved Git listing whose paths cannot be read")
                got, self.reread = git_tracked(self.root).paths, True
            self._paths, self._saved = got, None
        return self._paths

    def saved_paths(self) -> list[str] | None:
        """The paths as decoded, or as the saved listing still holds them (None: gone or damaged by now)."""
        if self._paths is None and self._saved is not None:
            self._paths = _saved_paths(*self._saved)
            if self._paths is not None:
                self._saved = None
        return self._paths

    def paths_marshal(self) -> bytes | None:
        """`marshal.dumps(paths, 2)` as the saved listing holds it, when its paths are not decoded yet (None: ask
        `paths`); its checksum is checked."""
        if self._paths is not None or self._saved is None:
            return None
        return _saved_blob(*self._saved)

    @classmethod
    def load(cls, path: Path) -> GitTracked | None:
        """The listing a previous process saved (see `save`), or None when absent or damaged."""
        listing: GitTracked | None = cls.read(str(path))
        return listing

    @classmethod
    def read(cls, path: str) -> GitTracked | None:
        """The saved listing's head from disk, checked (None: none, or damaged); its paths are read when asked."""
        try:
            with open(path, "rb") as f:
                start = f.read(_GIT_HEAD_AT)
                if len(start) != _GIT_HEAD_AT or not start.startswith(GIT_CACHE_MAGIC):
                    return None
                digest = start[len(GIT_CACHE_MAGIC):len(GIT_CACHE_MAGIC) + 32]
                (size,) = _GIT_HEAD_SIZE.unpack_from(start, len(GIT_CACHE_MAGIC) + 32)
                head = f.read(size)
            if len(head) != size or blake3.blake3(head).digest() != digest:
                return None
            index, prefix, signature, place, paths_size, paths_digest = marshal.loads(head)
        except (OSError, ValueError, EOFError, TypeError, struct.error):
            return None
        if not (isinstance(index, str) and isinstance(prefix, str) and _ints(signature, none=True)
                and _is_place(place) and type(paths_size) is int and type(paths_digest) is bytes):
            return None
        return cls(None, signature, (index, prefix), place, (path, _GIT_HEAD_AT + size, paths_size, paths_digest))

    def save(self, path: Path) -> None:
        """Keep the listing for the next process (disposable, checksummed, no fsync, like the stat cache).

        Reading 11,000 entries through pygit2 costs ~55 ms per one-shot command; loading them back ~3 ms
        (measured), and importing pygit2 to find the repository first 60-200 ms more (`place_holds` avoids it).
        `git_tracked` trusts it only for the same index file whose stat signature is unchanged,
        the rule it already applies to the listing it keeps in memory. The head (what `place_holds` asks) comes
        first with its own checksum, then the paths' marshal, read only when asked (FORMAT.md §7).
        """
        if self.signature is None and self.place is None:
            return
        blob = marshal.dumps(self.paths, 2)
        head = marshal.dumps((self.source[0], self.source[1], self.signature, self.place, len(blob),
                              blake3.blake3(blob).digest()), 2)
        # In parts: joined, the listing of 100,000 paths was another ~8 MB at the cold capture's peak.
        atomic_write_parts(path, (GIT_CACHE_MAGIC, blake3.blake3(head).digest(), _GIT_HEAD_SIZE.pack(len(head)), head,
                                  blob), sync=False)

    def place_holds(self, root: Path) -> bool:
        """Would pygit2 find the same repository, work tree and index (same signature) for `root` now?

        Checked with a few stats instead of importing pygit2 (60-200 ms of every one-shot capture or restore,
        measured): see `git_place` for what is compared and why it suffices.
        """
        if self.place is None:
            return False
        chain, _repo = self.place
        if not chain or chain[0][0] != os.path.realpath(root):
            return False
        if git_place(chain[0][0], chain[-1][0] if self.signature is not None else None) != self.place:
            return False
        if self.signature is None:
            return True
        try:
            st = os.stat(self.source[0])
        except OSError:
            return False
        return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == self.signature


GIT_CACHE_MAGIC = b"CRGIT3\n"
_GIT_HEAD_SIZE = struct.Struct("<I")  # the head's length, after the magic and the head's checksum
_GIT_HEAD_AT = len(GIT_CACHE_MAGIC) + 32 + _GIT_HEAD_SIZE.size


def _saved_blob(path: str, at: int, size: int, digest: bytes) -> bytes | None:
    """A saved listing's paths marshal, if the file still holds the one its head names (None: not, or unreadable)."""
    try:
        with open(path, "rb") as f:
            f.seek(at)
            blob = f.read(size + 1)
    except OSError:
        return None
    return blob if len(blob) == size and blake3.blake3(blob).digest() == digest else None


def _saved_paths(path: str, at: int, size: int, digest: bytes) -> list[str] | None:
    """`_saved_blob` decoded and checked: a list of strings (None: anything else)."""
    blob = _saved_blob(path, at, size, digest)
    try:
        paths = marshal.loads(blob) if blob is not None else None
    except (ValueError, EOFError, TypeError):
        return None
    return paths if isinstance(paths, list) and all(type(p) is str for p in paths) else None


def _ints(value: object, *, none: bool = False) -> bool:
    return (value is None and none) or (isinstance(value, tuple) and all(type(v) is int for v in value))


def _is_place(value: object) -> bool:
    if value is None:
        return True
    if not (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], tuple)
            and _ints(value[1], none=True)):
        return False
    return all(isinstance(d, tuple) and len(d) == 3 and type(d[0]) is str and type(d[1]) is int
               and type(d[2]) is int for d in value[0])


def _absent(path: str) -> bool | None:
    """True if nothing is at `path` (following symlinks, as Git discovery does); None if that is unknown."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return None
    return False


def git_place(root_real: str, workdir: str | None) -> Place | None:
    """What Git discovery from `root_real` depends on, when it is the plain case; None otherwise.

    libgit2's discovery (`find_repo_traverse`) looks in each directory from the start upwards for `.git`
    (a repository directory or a `gitdir:` file), then at the directory itself (a repository needs `HEAD`),
    and stops at a device change. So while every directory below the work tree (or, with no repository,
    up to `/`) keeps its device and inode and has neither `.git` nor `HEAD`, and the work tree's `.git` is
    the same directory, unchanged (Git renames files into it, which moves its mtime/ctime: `HEAD`, `config`,
    `index`, `commondir`) with the same `config` (it may set core.worktree or core.bare), discovery and
    opening find the same repository and work tree. Anything else (a `.git` file: worktrees, submodules)
    gets None: pygit2 decides each time.
    """
    chain: list[tuple[str, int, int]] = []
    d = root_real
    while True:
        try:
            st = os.stat(d)
        except OSError:
            return None
        chain.append((d, st.st_dev, st.st_ino))
        if d == workdir:
            break
        if _absent(os.path.join(d, ".git")) is not True or _absent(os.path.join(d, "HEAD")) is not True:
            return None
        parent = os.path.dirname(d)
        if parent == d:
            return (tuple(chain), None) if workdir is None else None
        d = parent
    dot_git = os.path.join(d, ".git")
    try:
        gst = os.lstat(dot_git)
        if not stat.S_ISDIR(gst.st_mode):
            return None
        repo: tuple[int, ...] = (gst.st_dev, gst.st_ino, gst.st_mtime_ns, gst.st_ctime_ns)
        try:
            cst = os.stat(os.path.join(dot_git, "config"))
            repo += (cst.st_mtime_ns, cst.st_size, cst.st_ino, cst.st_ctime_ns)
        except FileNotFoundError:
            repo += (-1,)
    except OSError:
        return None
    return tuple(chain), repo


def git_tracked(root: Path, cached: GitTracked | None = None) -> GitTracked:
    """Read the Git index with pygit2; the workspace may be a subdirectory of the work tree.

    `cached` (the previous listing) is returned as it is while the same index file keeps its signature,
    and without importing pygit2 while its `place` still holds.
    """
    if cached is not None and cached.place_holds(root):
        cached.root = root
        return cached
    import pygit2  # ~60-200 ms: only when the listing must be read or the repository found again

    root_real = os.path.realpath(root)
    found = pygit2.discover_repository(str(root))
    if found is None:
        return GitTracked([], None, place=git_place(root_real, None))
    try:
        repo = pygit2.Repository(found)
    except pygit2.GitError:
        return GitTracked([], None)
    workdir = repo.workdir
    if not workdir:
        return GitTracked([], None)
    index_path = Path(repo.path) / "index"
    try:
        st = index_path.stat()
        signature: tuple[int, ...] | None = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
    except FileNotFoundError:
        return GitTracked([], None)
    workdir_real = os.path.realpath(workdir)
    prefix = os.path.relpath(root_real, workdir_real).replace(os.sep, "/")
    if prefix == ".." or prefix.startswith("../"):
        return GitTracked([], signature)
    prefix = "" if prefix == "." else prefix + "/"
    source = (str(index_path), prefix)
    place = None
    if os.path.realpath(repo.path) == os.path.join(workdir_real, ".git"):
        place = git_place(root_real, workdir_real)
    if cached is not None and cached.signature == signature and cached.source == source:
        if cached.place == place:
            cached.root = root
            return cached
        kept = cached.saved_paths()
        if kept is not None:  # else (gone or damaged by now) the index is read below
            return GitTracked(kept, signature, source, place)
    cut = len(prefix)
    paths: list[str] = []
    try:
        index = repo.index
    except pygit2.GitError:
        return GitTracked([], signature)
    for entry in index:
        p = entry.path
        if entry.mode == GITLINK_MODE or not p.startswith(prefix):
            continue
        paths.append(p[cut:])
    return GitTracked(paths, signature, source, place)


@record
class Scope:
    """The result of looking at the workspace: entries that hold no content, and paths to read."""

    entries: FileMap = field(default_factory=dict)
    to_capture: dict[str, Key] = field(default_factory=dict)
    """Paths to read, with the stat key the walk saw (keys, not os.stat_result: one is ~640 bytes, a key ~90-240,
    and the 100,000-file cold capture held one per file to its end)."""
    skipped: list[tuple[str, str]] = field(default_factory=list)
    covered: AbstractSet[str] = field(default_factory=frozenset)
    """The paths covered (Git-tracked and known ones): made a frozenset at the walk's end (~96 MB at 100,000 files),
    since the copy the state after the reads took was ~4 MB beside their peak (measured)."""
    listed: dict[str, Key] = field(default_factory=dict)
    """Every directory the walk listed, parents first, with its stat key from just before the listing."""
    seen: dict[str, Key] = field(default_factory=dict)
    """Every other entry of those directories the walk stat'ed (what `walkstate` checks next time)."""
    linked: set[str] = field(default_factory=set)
    """Regular files to capture with more than one hard link (a write through another name raises no event here)."""
    listing: dict[str, bytes] = field(default_factory=dict)
    """Each listed directory's entries (names and types) as a digest: see `listing_digest`."""


def entry_kind(de: os.DirEntry[str]) -> str:
    """A listed entry's type as the listing says it (no stat where the file system gives types)."""
    try:
        if de.is_dir(follow_symlinks=False):
            return "d"
        if de.is_symlink():
            return "l"
        return "f" if de.is_file(follow_symlinks=False) else "o"
    except OSError:
        return "?"


def hidden(rel: str, settings: ScopeSettings) -> bool:
    """Is the file at `rel` held back from a walk by its own name (a dot name, unless `include_hidden`)? Asked where a
    walk's verdict on one file is worked out without the walk (the fast path, the saved walk's checks)."""
    return rel.rpartition("/")[2].startswith(".") and not settings.include_hidden


def listing_digest(names: list[str]) -> bytes:
    """A directory's entries ("name/type") in 16 bytes: equal digests, same names of the same types.

    A directory whose stat moved but whose entries are the same (a file saved by writing a temp file and
    renaming it over the old one, as editors and restores do) can then be checked rather than walked.
    """
    return blake3.blake3("\0".join(sorted(names)).encode("utf-8", "surrogateescape")).digest()[:16]


def _is_residue_kind(mode: int) -> bool:
    return stat.S_ISREG(mode) or stat.S_ISLNK(mode)


def select(
    root: Path,
    settings: ScopeSettings,
    ignore: Ignore,
    git_paths: Iterable[str],
    known_paths: Iterable[str],
    protected: Iterable[str] = (),
    on_dir: Callable[[str], None] | None = None,
    force: Callable[[str], bool] | None = None,
    dirs: DirCache | None = None,
    protected_ids: frozenset[tuple[int, int]] = frozenset(),
) -> Scope:
    """Walk the workspace once and decide, for every path seen, whether to capture it.

    Git-tracked and `known_paths` (agent-touched, tracked before, a restore's targets) are
    captured whatever their size or name; `protected` are root-relative directories never read, and so is
    every directory whose (device, inode) is in `protected_ids` (a bind mount or another path of the store
    or Codex's home): it becomes a `codexr data` entry and nothing below it is looked at.
    `on_dir` is called for each directory just before it is listed (the change journal's hook).
    Non-hidden files found by the walk for which `force` is true are captured whatever the residue
    limits say (a restore's safety capture: it must hold everything it may delete).
    Every directory is reached through `dirs` (dir fds, O_NOFOLLOW at each component); pass the
    same DirCache to `readfiles.read_paths` so the reads see the directories the walk listed.
    """
    own_dirs = dirs is None
    tree = DirCache(str(root)) if dirs is None else dirs
    try:
        return _select(tree, root, settings, ignore, git_paths, known_paths, protected, on_dir, force, protected_ids)
    finally:
        if own_dirs:
            tree.close()


def _select(
    tree: DirCache,
    root: Path,
    settings: ScopeSettings,
    ignore: Ignore,
    git_paths: Iterable[str],
    known_paths: Iterable[str],
    protected: Iterable[str],
    on_dir: Callable[[str], None] | None,
    force: Callable[[str], bool] | None,
    protected_ids: frozenset[tuple[int, int]],
) -> Scope:
    """Walk, cover (Git-tracked and known paths), then the residue (the newest other files, within the limits)."""
    protected_rel = tuple(protected)
    git_paths = git_paths if isinstance(git_paths, list) else list(git_paths)
    # The walk names a Git-tracked file by the listing's own string: the map, the covered set and the walk's stats
    # then share one string per path (the walk's own copies were ~8.7 MB at 100,000 files, measured).
    walked = _walk(tree, root, settings, ignore, protected_rel, on_dir, protected_ids, {p: p for p in git_paths})
    covered: set[str] = set()
    for paths in (git_paths, known_paths):
        _cover(tree, walked, covered, ignore, paths, protected_rel, protected_ids)
    _residue(walked, covered, settings, force)
    walked.scope.covered = frozenset(covered)
    return walked.scope


class _Walked(NamedTuple):
    """What the walk saw, for the cover and residue steps: the scope so far and the files it left undecided. (A
    tuple: a dataclass costs every process that imports this ~0.2 ms.)"""

    scope: Scope
    candidates: list[tuple[int, str]]  # (mtime, path): the residue's, unless covered
    hidden: list[str]  # hidden files: held back unless covered
    multi: set[str]  # regular files with more than one hard link
    looked: dict[str, bool]  # directories the walk did not list: protected ones?


def _walk(tree: DirCache, root: Path, settings: ScopeSettings, ignore: Ignore, protected_rel: tuple[str, ...],
          on_dir: Callable[[str], None] | None, protected_ids: frozenset[tuple[int, int]],
          named: dict[str, str]) -> _Walked:
    """List every directory the rules let the walk enter (each stat'ed just before it is listed, `on_dir` called
    first), deciding each entry by its name and type; the files no rule decided are left to cover and residue.
    `named`: paths by themselves, whose strings the walk uses for the paths it finds (the Git listing's)."""
    walked = _Walked(Scope(), [], [], set(), {})
    scope = walked.scope
    entries = scope.entries
    churn = set(settings.churn_dirs)
    hidden_ok = settings.include_hidden
    walk_stats = scope.seen
    listed = scope.listed
    residue_candidates, multi, hidden_seen = walked.candidates, walked.multi, walked.hidden
    same_string = named.get

    stack = [""]
    while stack:
        rel_dir = stack.pop()
        if on_dir is not None:
            on_dir(rel_dir)
        try:
            fd = tree.dir_fd(rel_dir)
            # Before listing: an entry made after it moves the directory's stat.
            listed[rel_dir] = stat_key(os.fstat(fd))
            it = os.scandir(fd)
        except (SymlinkInPath, DirChanged, NotADirectoryError) as exc:
            # Listed as a directory by its parent, something else by the time it is entered.
            entries[rel_dir] = UnlistedDir("D", REPLACED)
            scope.skipped.append((rel_dir, f"directory replaced during capture; not looked into ({exc})"))
            continue
        except OSError as exc:
            if not rel_dir:
                raise WorkspaceError(f"workspace {root} cannot be read: {exc.strerror}") from exc
            entries[rel_dir] = UnlistedDir("D", unreadable(exc.strerror))
            scope.skipped.append((rel_dir, f"directory unreadable: {exc.strerror}"))
            continue
        entries[rel_dir] = WALKED
        prefix = rel_dir + "/" if rel_dir else ""
        names: list[str] = []
        # Entries' stat() goes through the directory's cached fd: nothing else is opened in this loop.
        with it:
            for de in it:
                name = de.name
                rel = prefix + name
                rel = same_string(rel, rel)
                kind = entry_kind(de)
                names.append(f"{name}/{kind}")
                if name.lower() == ".git":  # any case: what forbidden() refuses, the walk never enters
                    entries[rel] = UnlistedDir("D", Reason.GIT)
                    continue
                is_dir = kind == "d"
                if is_dir:
                    if rel in protected_rel or (protected_ids and _same_dir(de, protected_ids)):
                        entries[rel] = UnlistedDir("D", Reason.CODEXR_DATA)
                    elif name in churn:
                        entries[rel] = UnlistedDir("D", Reason.CHURN)
                    elif name.startswith(".") and not hidden_ok:
                        entries[rel] = UnlistedDir("D", HIDDEN)
                    elif ignore.directory(rel):
                        entries[rel] = UnlistedDir("D", Reason.IGNORED)
                    else:
                        stack.append(rel)
                    continue
                try:
                    st = de.stat(follow_symlinks=False)
                except OSError as exc:
                    entries[rel] = SkippedEntry("x", unreadable(exc.strerror))
                    continue
                walk_stats[rel] = key = stat_key(st)
                if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
                    multi.add(rel)
                if not _is_residue_kind(st.st_mode):
                    entries[rel] = SkippedEntry("x", Reason.NOT_REGULAR)
                elif ignore.file(rel):
                    entries[rel] = SkippedEntry("x", Reason.IGNORED)
                elif name.startswith(".") and not hidden_ok:
                    hidden_seen.append(rel)
                else:
                    residue_candidates.append((key[1], rel))
        scope.listing[rel_dir] = listing_digest(names)
    return walked


def _cover(tree: DirCache, walked: _Walked, covered: set[str], ignore: Ignore, paths: Iterable[str],
           protected_rel: tuple[str, ...], protected_ids: frozenset[tuple[int, int]]) -> None:
    """Cover `paths` (Git-tracked or known): captured whatever their size or name, agreeing with what the walk saw
    of them or of a directory on their way; one below a directory the walk did not list is looked at through the
    directory fds."""
    scope = walked.scope
    entries, walk_stats, multi = scope.entries, scope.seen, walked.multi

    def walk_verdict(rel: str) -> Entry | None:
        """What the walk saw at the nearest non-directory ancestor: the capture must agree with it."""
        anc = rel.rpartition("/")[0]
        while anc:
            if entries.get(anc) == WALKED:
                return None
            key = walk_stats.get(anc)
            if key is not None:
                return SkippedEntry("x", Reason.BEHIND_SYMLINK) if stat.S_ISLNK(key[4]) else ABSENT
            anc = anc.rpartition("/")[0]
        return None

    # On a folding volume a path Git or the agent spells otherwise than the directory lists is that listed file.
    listed = {tree.folding.key(p): p for p in walk_stats} if tree.folding.any else None
    for rel in paths:
        if listed is not None and rel not in walk_stats:
            rel = listed.get(tree.folding.key(rel)) or tree.listed_spelling(rel) or rel
        if rel in covered:
            continue
        covered.add(rel)
        if forbidden(rel) or _behind_protected(tree, entries, rel, protected_rel, protected_ids, walked.looked):
            continue
        if ignore.file(rel):
            entries[rel] = SkippedEntry("x", Reason.IGNORED)
            continue
        key = walk_stats.get(rel)
        if key is None:
            seen = entries.get(rel)
            if seen is not None and seen.kind in ("d", "D"):
                continue  # the walk saw a directory here; a later look must not contradict it
            verdict = walk_verdict(rel)
            if verdict is not None:
                if verdict.kind == "x":
                    entries[rel] = verdict
                    scope.skipped.append((rel, "behind a symlinked directory"))
                elif rel not in entries:
                    entries[rel] = verdict
                continue
            # Not seen by the walk (below a directory it does not enter): look through the dir fds.
            key = _look_unlisted(tree, scope, multi, rel)
            if key is None:
                continue
        if stat.S_ISDIR(key[4]):
            entries.setdefault(rel, UnlistedDir("D", Reason.DIRECTORY))
            continue
        if not _is_residue_kind(key[4]):
            entries[rel] = SkippedEntry("x", Reason.NOT_REGULAR)
            continue
        scope.to_capture[rel] = key


def _look_unlisted(tree: DirCache, scope: Scope, multi: set[str], rel: str) -> Key | None:
    """The stat of a covered path the walk did not see, through the directory fds (None: its entry is decided)."""
    entries = scope.entries
    try:
        st = tree.lstat(rel)
    except SymlinkInPath:
        entries[rel] = SkippedEntry("x", Reason.BEHIND_SYMLINK)
        scope.skipped.append((rel, "behind a symlinked directory"))
        return None
    except DirChanged:
        entries[rel] = SkippedEntry("x", REPLACED)
        scope.skipped.append((rel, "a directory on its path was replaced during capture"))
        return None
    except (FileNotFoundError, NotADirectoryError):
        entries[rel] = ABSENT
        return None
    except OSError as exc:
        entries[rel] = SkippedEntry("x", unreadable(exc.strerror))
        scope.skipped.append((rel, f"unreadable: {exc.strerror}"))
        return None
    if st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
        multi.add(rel)
    return stat_key(st)


def _behind_protected(tree: DirCache, entries: FileMap, rel: str, protected_rel: tuple[str, ...],
                      protected_ids: frozenset[tuple[int, int]], looked: dict[str, bool]) -> bool:
    """Is `rel` at or below a protected directory, by path or, where the walk did not look, by identity? (`looked`:
    the directories the walk did not list, asked before.)"""
    if protected_rel and _under(rel, protected_rel):
        return True
    anc = ""
    for part in rel.split("/")[:-1]:
        anc = f"{anc}/{part}" if anc else part
        e = entries.get(anc)
        if e is not None and e.kind == "D" and e.reason == Reason.CODEXR_DATA:
            return True
        if e == WALKED or (e is not None and e.kind == "D" and e.reason != Reason.DIRECTORY):
            continue  # a directory of a listed one: the walk checked its identity there
        if not protected_ids:
            return False
        hit = looked.get(anc)
        if hit is None:
            try:
                st = os.fstat(tree.dir_fd(anc))
            except (OSError, SymlinkInPath, DirChanged):
                return False  # nothing below can be reached either: the look at `rel` says so
            hit = looked[anc] = (st.st_dev, st.st_ino) in protected_ids
        if hit:
            entries[anc] = UnlistedDir("D", Reason.CODEXR_DATA)
            return True
    return False


def _residue(walked: _Walked, covered: AbstractSet[str], settings: ScopeSettings,
             force: Callable[[str], bool] | None) -> None:
    """What no rule covered: hidden files are held back; of the rest, the newest `residue_max_files` within the size
    limit are captured (all of them where `force` says so), the others held back."""
    scope = walked.scope
    entries, walk_stats = scope.entries, scope.seen
    for rel in walked.hidden:
        if rel not in covered:
            entries[rel] = SkippedEntry("x", HIDDEN)
    limit = settings.residue_max_files
    max_bytes = settings.residue_max_file_bytes
    # Newest first; the covered (tracked, known) files drop out before the sort rather than after it.
    residue = sorted(((mtime, rel) for mtime, rel in walked.candidates if rel not in covered), reverse=True)
    taken = 0
    for _mtime, rel in residue:
        key = walk_stats[rel]
        if force is not None and force(rel):
            scope.to_capture[rel] = key
        elif stat.S_ISREG(key[4]) and key[0] > max_bytes:
            entries[rel] = SkippedEntry("x", TOO_LARGE)
        elif taken >= limit:
            entries[rel] = SkippedEntry("x", OVER_LIMIT)
        else:
            taken += 1
            scope.to_capture[rel] = key
    scope.linked = {rel for rel in walked.multi if rel in scope.to_capture}


def too_large_skipped(too_large: Iterable[str], skipped: list[tuple[str, str]], limit: int) -> list[tuple[str, str]]:
    """Untracked files held back by the size limit, for the capture's `skipped` report (docs/architecture.md says so).

    Taken from the finished map (`too_large`: its paths held back by size, mapfacts.MapFacts), so the walk and the
    change journal's fast path report the same.
    """
    listed = {p for p, _why in skipped}
    reason = f"{TOO_LARGE} ({limit} bytes); not captured"
    return [(p, reason) for p in sorted(p for p in too_large if p not in listed)]


def over_limit_skipped(files: FileMap, count: int, limit: int, sample: int) -> list[tuple[str, str]]:
    """A few of the untracked files the recent-file limit held back, for the capture's `skipped` report: the first
    `sample` the map names, sorted (`count`: how many it holds, mapfacts.MapFacts, so no pass when there are none)."""
    if not count:
        return []
    reason = f"{OVER_LIMIT} ({limit} files); not captured"
    named: list[str] = []
    for p, e in files.items():  # stops at the sample: a map of 100,000 held-back files is not walked through
        if e.kind == "x" and e.reason == OVER_LIMIT:
            named.append(p)
            if len(named) >= sample:
                break
    return [(p, reason) for p in sorted(named)]


def _same_dir(de: os.DirEntry[str], ids: frozenset[tuple[int, int]]) -> bool:
    """Is this directory entry one of the protected directories (a bind mount shows their identity)?"""
    try:
        st = de.stat(follow_symlinks=False)
    except OSError:
        return False  # the walk then fails to enter it too, and says so
    return (st.st_dev, st.st_ino) in ids


def _under(rel: str, dirs: tuple[str, ...]) -> bool:
    return any(rel == d or rel.startswith(d + "/") for d in dirs)
