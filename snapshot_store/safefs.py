"""Writes confined to one workspace: every path is walked with dir fds and O_NOFOLLOW.

A symlinked directory anywhere on the way stops the operation, so nothing is ever written
outside the root, and `.git` components (in any letter case) are refused outright.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

from . import lateclose
from .dirfd import DIR_FLAGS as _DIR_FLAGS
from .dirfd import REFUSED, SymlinkInPath, open_beneath, open_dir
from .fsutil import durable, libc_function, syncfs
from .scope import forbidden
from .stamps import Key, stat_key

TMP_PREFIX = ".codexr-tmp-"
ASIDE_PREFIX = TMP_PREFIX + "del-"  # then 12 hex digits, "-" and the file's own name
#: Changed directories a restore fsyncs one after the other at its end; beyond this, they are fsynced by a few threads
#: at once (ext4 and others commit concurrent fsyncs together; os.fsync releases the GIL).
SYNC_ALONE = 4
SYNC_THREADS = 8
NAME_MAX = 255
T = TypeVar("T")
R = TypeVar("R")


#: Restores seek over zero runs of at least this many bytes (aligned to the file offset): holes stay holes.
HOLE_BLOCK = 4096
_ZERO_BLOCK = bytes(HOLE_BLOCK)


def _write_all(fd: int, view: memoryview) -> None:
    while view:
        view = view[os.write(fd, view):]


def _write_sparse(fd: int, chunk: bytes, offset: int) -> None:
    """Write `chunk` at `offset` (the fd's position), seeking over its whole zero blocks instead of writing them.

    A chunk holding no zero block at all (the common case: one C-level substring search) is written as it
    is; otherwise it is compared block by block against a zero block, never byte by byte. The search costs
    0.035 ms per 1 MiB chunk of random or text data (timeit, this machine), against ~1 ms to write and fsync it.
    """
    view = memoryview(chunk)
    if len(chunk) < HOLE_BLOCK or _ZERO_BLOCK not in chunk:
        _write_all(fd, view)
        return
    start = 0  # the data not written yet begins here
    i = (-offset) % HOLE_BLOCK  # the first block boundary of the file within this chunk
    n = len(chunk)
    while i + HOLE_BLOCK <= n:
        if view[i:i + HOLE_BLOCK] != _ZERO_BLOCK:
            i += HOLE_BLOCK
            continue
        j = i + HOLE_BLOCK
        while j + HOLE_BLOCK <= n and view[j:j + HOLE_BLOCK] == _ZERO_BLOCK:
            j += HOLE_BLOCK
        _write_all(fd, view[start:i])
        os.lseek(fd, j - i, os.SEEK_CUR)
        start = i = j
    _write_all(fd, view[start:])


class UnsafePath(Exception):
    """The path cannot be written without following a symlink or leaving the root."""


RENAME_NOREPLACE = 1  # Linux's renameat2 flag
RENAME_EXCL = 0x4  # Darwin's renameatx_np flag: the same promise
_NOT_HERE = (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP)
_NO_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK, errno.EXDEV)


def _rename_noreplace(dir_fd: int, src: str, dst: str) -> bool:
    """Rename within one directory unless `dst` exists (then False); never replaces anything.

    Linux's renameat2(RENAME_NOREPLACE), else Darwin's renameatx_np(RENAME_EXCL), else a hard link (which cannot
    replace anything either) and an unlink; on a volume without hard links either (exFAT, FAT) a look, then the
    rename: a file made by another process in that instant would be replaced, the one window left there.
    """
    for name, flag in (("renameat2", RENAME_NOREPLACE), ("renameatx_np", RENAME_EXCL)):
        call = libc_function(name)
        if call is None:
            continue
        if call(dir_fd, os.fsencode(src), dir_fd, os.fsencode(dst), flag) == 0:
            return True
        import ctypes  # loaded by libc_function already; not at import: every capture imports this module

        err = ctypes.get_errno()
        if err == errno.EEXIST:
            return False
        if err not in _NOT_HERE:
            raise OSError(err, os.strerror(err), dst)
        break  # the call exists, this file system does not take the flag: the fallbacks below
    try:
        os.link(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        return False
    except OSError as exc:
        if exc.errno not in _NO_LINKS:
            raise
        try:
            os.stat(dst, dir_fd=dir_fd, follow_symlinks=False)
            return False
        except FileNotFoundError:
            os.rename(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            return True
    os.unlink(src, dir_fd=dir_fd)
    return True


def _aside_name(name: str) -> str | None:
    """The temporary name a file is renamed to before it is deleted; None if it would be too long."""
    aside = f"{ASIDE_PREFIX}{os.urandom(6).hex()}-{name}"
    return aside if len(os.fsencode(aside)) <= NAME_MAX else None


def _fill(fd: int, chunks: Iterable[bytes], mode: int) -> None:
    """A new file's content (holes kept) and mode."""
    size = 0
    for chunk in chunks:
        _write_sparse(fd, chunk, size)
        size += len(chunk)
    if os.fstat(fd).st_size != size:
        os.ftruncate(fd, size)  # the file ended in a hole the writes sought over
    os.fchmod(fd, mode)


def _at_once(fn: Callable[[T], R], items: list[T]) -> list[R]:
    """`fn` of each item, in order: a few threads at once beyond SYNC_ALONE items (each is an fsync, which releases
    the GIL and which ext4 commits together with the others)."""
    if len(items) <= SYNC_ALONE:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=min(SYNC_THREADS, len(items)), thread_name_prefix="codexr-sync") as pool:
        return list(pool.map(fn, items))


def _replace(dir_fd: int, src: str, dst: str) -> None:
    """Rename `src` over `dst` in one directory, the file it replaces freed later by lateclose's thread."""
    with lateclose.held(dir_fd, dst):
        os.rename(src, dst, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)


def _same_file_but_ctime(key: Key, expect: Key) -> bool:
    """The rename aside itself sets ctime, so size, mtime, inode and mode must match."""
    return (key[0], key[1], key[3], key[4]) == (expect[0], expect[1], expect[3], expect[4])


class SafeRoot:
    """Directory-fd based file operations below a root.

    No directory fd is trusted across operations: each one opens its path's directories again from
    the root fd, so a directory moved out of the workspace (or swapped for a symlink) mid-restore
    never receives a write. Linux opens the chain in one openat2(RESOLVE_BENEATH |
    RESOLVE_NO_SYMLINKS) (dirfd.open_beneath); elsewhere, or when that refuses, it is walked one
    component at a time with O_NOFOLLOW. The walk cost ~0.11 ms of openat/close per restored file
    (3-level tree, 2,000 files profiled; a file five levels down: ~26 directory opens, 6 with
    openat2, tests/test_safe_paths.py); bench/bench_durability.py compares whole restores against
    cached fds ("cached" rows in bench/README.md).
    """

    # Restored data is made durable (fsync) before the rename that makes it count. Only
    # bench/bench_durability.py turns this off, to measure what it costs.
    sync_data: bool = True
    syncfs_beyond: int | None = None  # None: never a syncfs for many directories (see `sync`)
    stage_writes: bool = True  # restore.apply stages files' content and syncs it together (off: bench's baseline)

    def __init__(self, root: str) -> None:
        self.root = root
        self._root_fd = os.open(root, _DIR_FLAGS)
        self._lent: int | None = None
        self.dirs_changed = False  # a directory was created or removed (the change journal must re-walk)
        self.touched: set[str] = set()  # directories whose entries this object changed (see `sync`)
        self.kept_aside: list[tuple[str, str]] = []  # (path, temp name) a delete could not put back
        self._beneath = True  # until the system refuses openat2 (dirfd.open_beneath)

    def close(self) -> None:
        """Close every directory fd."""
        self._take_back()
        if self._root_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._root_fd)
            self._root_fd = -1

    def __enter__(self) -> SafeRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _made_dir_in(self, rel_dir: str) -> None:
        """A directory on the way to `rel_dir` was created: each of them, and where it was made, changed."""
        self.dirs_changed = True
        self.touched.add("")
        for i, ch in enumerate(rel_dir):
            if ch == "/":
                self.touched.add(rel_dir[:i])
        self.touched.add(rel_dir)

    def _open(self, rel_dir: str, create: bool) -> int | None:
        """A fresh fd of `rel_dir` (the caller closes it); None if it is missing and `create` is off."""
        if rel_dir and self._beneath:  # one openat2 for the chain where the kernel has it, else the walk
            fd = open_beneath(self._root_fd, rel_dir)
            if fd == REFUSED:
                self._beneath = False
            elif fd is not None:
                return fd
        try:
            return open_dir(self._root_fd, rel_dir, create=create,
                            on_mkdir=lambda: self._made_dir_in(rel_dir))
        except SymlinkInPath as exc:
            raise UnsafePath(f"{exc.rel_dir} is a symlink or a file, not a directory") from exc
        except NotADirectoryError as exc:
            raise UnsafePath(f"{exc.filename} is a symlink or a file, not a directory") from exc
        except FileNotFoundError:
            if create:
                raise
            return None

    def _take_back(self) -> None:
        if self._lent is not None:
            with contextlib.suppress(OSError):
                os.close(self._lent)
            self._lent = None

    def dir_fd(self, rel_dir: str, create: bool) -> int | None:
        """An fd for a directory below the root; None if it is missing and `create` is off.

        The fd stays valid until the next call of any SafeRoot method (do not keep it).
        """
        self._take_back()
        self._lent = self._open(rel_dir, create)
        return self._lent

    @contextlib.contextmanager
    def _parent(self, rel: str, create: bool) -> Iterator[tuple[int | None, str]]:
        """The parent directory's fd, opened for this one operation, and the last component."""
        if forbidden(rel):
            raise UnsafePath(f"{rel}: refusing to touch this path")
        self._take_back()
        parent, _, name = rel.rpartition("/")
        fd = self._open(parent, create)
        try:
            yield fd, name
        finally:
            if fd is not None:
                os.close(fd)

    def open_regular(self, rel: str) -> int | None:
        """An fd to read a regular file (the caller closes it); None if it is missing or not a regular file."""
        with self._parent(rel, False) as (pfd, name):
            if pfd is None:
                return None
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=pfd)
            except FileNotFoundError:
                return None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            return None
        return fd

    def lstat(self, rel: str) -> os.stat_result | None:
        """lstat without following links; None when absent (or its parent is)."""
        try:
            with self._parent(rel, False) as (pfd, name):
                if pfd is None:
                    return None
                return os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except (UnsafePath, FileNotFoundError, NotADirectoryError):
            return None

    def read(self, rel: str) -> bytes:
        """Read a regular file without following a symlink."""
        with self._parent(rel, False) as (pfd, name):
            if pfd is None:
                raise FileNotFoundError(rel)
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def readlink(self, rel: str) -> str:
        """A symlink's target, reached without following any other link."""
        with self._parent(rel, False) as (pfd, name):
            if pfd is None:
                raise FileNotFoundError(rel)
            return os.readlink(name, dir_fd=pfd)

    def sync(self) -> None:
        """Make the directory entries this object changed durable (each file's data was synced before its rename).

        One fsync per changed directory — a few threads at once for more than SYNC_ALONE of them — never a syncfs of
        the whole file system, which waits for every other dirty page on it, other processes' too: 377 ms of a
        100-file restore while a test suite ran (issue 35), 0.6 s of a one-file restore after a 75 MB write
        (bench_startup). Only a directory that cannot be opened again (moved or replaced by someone else since the
        restore changed it) falls back to one syncfs: whatever it became, that covers it. `syncfs_beyond` (a number
        of directories) brings back the old rule for bench/bench_durability.py's comparison.
        """
        dirs = sorted(self.touched, key=lambda d: d.count("/") if d else -1, reverse=True)
        if self.syncfs_beyond is not None and len(dirs) > self.syncfs_beyond:
            syncfs(Path(self.root))
            return
        if not all(_at_once(self._sync_dir, dirs)):  # one gone or replaced since: syncfs covers whatever it became
            syncfs(Path(self.root))

    def _sync_dir(self, rel: str) -> bool:
        """fsync one directory, opened again from the root (False: it cannot be, any more)."""
        try:
            fd = self._open(rel, False)
        except (OSError, UnsafePath):
            fd = None
        if fd is None:
            return False
        try:
            durable(fd)
        finally:
            os.close(fd)
        return True

    def write_file(self, rel: str, chunks: Iterable[bytes], mode: int) -> None:
        """Write a temp file in the same directory, set the mode, fsync it, rename it over the target.

        The fsync comes before the rename: once the new name points at the data, the data is on
        disk, so a power loss never leaves an empty or partial file that recovery would take for a
        user's change (bench/README.md: what it costs).
        """
        with self._parent(rel, True) as (pfd, name):
            assert pfd is not None
            tmp = f"{TMP_PREFIX}{os.urandom(6).hex()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=pfd)
            try:
                try:
                    _fill(fd, chunks, mode)
                    if self.sync_data:
                        durable(fd)
                finally:
                    os.close(fd)
                _replace(pfd, tmp, name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=pfd)
                raise
            finally:
                self.touched.add(rel.rpartition("/")[0])

    def stage(self, files: Iterable[tuple[str, Iterable[bytes], int]]) -> dict[str, str]:
        """Write each file's content to a temp file beside it (its directory must exist), then make them all
        durable at once: a few threads fsync them together, which ext4 and others commit together, where one fsync
        after each file paid a journal commit each (issue 35). Returned: path -> its temp's name, for
        `rename_staged`; a file that could not be staged is left out (the restore writes it the usual way). The
        caller removes what it does not use (`unstage`): a crash leaves temps only in directories the journal names,
        which recovery cleans."""
        staged: dict[str, str] = {}
        fds: list[int] = []
        try:
            for rel, chunks, mode in files:
                try:
                    with self._parent(rel, False) as (pfd, _name):
                        if pfd is None:
                            continue
                        tmp = f"{TMP_PREFIX}{os.urandom(6).hex()}"
                        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                                     0o600, dir_fd=pfd)
                        fds.append(fd)
                        staged[rel] = tmp
                        _fill(fd, chunks, mode)
                except (UnsafePath, OSError) as exc:
                    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
                        raise
                    self.unstage({rel: staged.pop(rel)} if rel in staged else {})
            if self.sync_data and fds:
                _at_once(durable, fds)
        except BaseException:
            self.unstage(staged)
            raise
        finally:
            for fd in fds:
                os.close(fd)
        return staged

    def rename_staged(self, rel: str, tmp: str) -> bool:
        """Give a staged temp its file's name (False: the temp is gone, e.g. its directory was replaced since; the
        caller writes the file the usual way)."""
        with self._parent(rel, False) as (pfd, name):
            if pfd is None:
                return False
            self.touched.add(rel.rpartition("/")[0])
            try:
                _replace(pfd, tmp, name)
            except FileNotFoundError:
                return False
            return True

    def unstage(self, staged: dict[str, str]) -> None:
        """Remove staged temps not renamed into place."""
        for rel, tmp in list(staged.items()):
            with contextlib.suppress(OSError, UnsafePath), self._parent(rel, False) as (pfd, _name):
                if pfd is not None:
                    os.unlink(tmp, dir_fd=pfd)
            del staged[rel]

    def respell(self, rel: str, spelled: str) -> None:
        """Give the file at `spelled` (another spelling of `rel` on a volume that folds names: the same entry) the
        name `rel`, within one directory; a directory spelled otherwise on the way is left as it is."""
        if spelled.rpartition("/")[0] != rel.rpartition("/")[0]:
            return
        with self._parent(rel, False) as (pfd, name):
            if pfd is None:
                return
            self.touched.add(rel.rpartition("/")[0])
            os.rename(spelled.rpartition("/")[2], name, src_dir_fd=pfd, dst_dir_fd=pfd)

    def write_link(self, rel: str, target: str) -> None:
        """Create a symlink (never following it) via a temp name and rename."""
        with self._parent(rel, True) as (pfd, name):
            assert pfd is not None
            tmp = f"{TMP_PREFIX}{os.urandom(6).hex()}"
            self.touched.add(rel.rpartition("/")[0])
            os.symlink(target, tmp, dir_fd=pfd)
            try:
                _replace(pfd, tmp, name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=pfd)
                raise

    def unlink(self, rel: str, expect: Key | None = None) -> bool:
        """Remove a file or symlink; with `expect` only if it is still that file (True if removed).

        `expect` is the stat key the safety capture saw. The name is renamed aside in the same
        directory first, so nothing can reach the file by its name between the last check and the
        unlink; a file that no longer matches goes back under its name (never over a file made
        there meanwhile) and False is returned. Without `expect`: a plain unlink.
        """
        with self._parent(rel, False) as (pfd, name):
            if pfd is None:
                raise FileNotFoundError(rel)
            self.touched.add(rel.rpartition("/")[0])
            if expect is None:
                os.unlink(name, dir_fd=pfd)
                return True
            if stat_key(os.stat(name, dir_fd=pfd, follow_symlinks=False)) != expect:
                return False
            aside = _aside_name(name)
            if aside is None:  # a name this long cannot be carried in the temp name: check, then unlink
                os.unlink(name, dir_fd=pfd)
                return True
            os.rename(name, aside, src_dir_fd=pfd, dst_dir_fd=pfd)
            try:
                same = _same_file_but_ctime(stat_key(os.stat(aside, dir_fd=pfd, follow_symlinks=False)), expect)
                if same:
                    with lateclose.held(pfd, aside):
                        os.unlink(aside, dir_fd=pfd)
                    return True
            except BaseException:
                self._put_back(pfd, aside, name, rel)
                raise
            self._put_back(pfd, aside, name, rel)
            return False

    def _put_back(self, pfd: int, aside: str, name: str, rel: str) -> None:
        if not _rename_noreplace(pfd, aside, name):
            self.kept_aside.append((rel, aside))  # a new file took the name meanwhile: keep both

    def rmdir(self, rel: str) -> None:
        """Remove an empty directory."""
        with self._parent(rel, False) as (pfd, name):
            if pfd is None:
                raise FileNotFoundError(rel)
            self.touched.add(rel.rpartition("/")[0])
            os.rmdir(name, dir_fd=pfd)
        # Gone, and with it what this object changed in it: its parent's fsync (after this) makes the removal durable.
        # Left among the directories to sync, it could not be opened again, and `sync` fell back to a syncfs.
        self.touched.discard(rel)
        self.dirs_changed = True

    def mkdir(self, rel: str, mode: int | None) -> None:
        """Create a directory a rolled-back restore had removed (with its old mode, when known)."""
        with self._parent(rel, True) as (pfd, name):
            assert pfd is not None
            self.touched.add(rel.rpartition("/")[0])
            os.mkdir(name, 0o777 if mode is None else 0o700, dir_fd=pfd)  # None: what the umask gives
            self.dirs_changed = True
            if mode is not None:
                fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=pfd)
                try:
                    os.fchmod(fd, mode)
                finally:
                    os.close(fd)

    def clean_temps(self, rel_dir: str) -> None:
        """Remove temp files a crashed restore left in one directory; put files set aside back.

        A file renamed aside for deletion when the crash came is given its name back (unless a new
        file has it): it may have changed after the safety capture, so it is never deleted here.
        """
        self._take_back()
        fd = self._open(rel_dir, False)
        if fd is None:
            return
        self.touched.add(rel_dir)
        try:
            for name in os.listdir(fd):
                if name.startswith(ASIDE_PREFIX):
                    original = name[len(ASIDE_PREFIX) + 13:]
                    if len(name) > len(ASIDE_PREFIX) + 13 and name[len(ASIDE_PREFIX) + 12] == "-":
                        with contextlib.suppress(OSError):
                            _rename_noreplace(fd, name, original)
                elif name.startswith(TMP_PREFIX):
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
