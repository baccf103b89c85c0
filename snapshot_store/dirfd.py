"""Reaching paths below a root through directory fds, never following a symlink on the way.

Every component is opened with `openat(parent, name, O_DIRECTORY | O_NOFOLLOW)`, one at a time
and without recursion, so a directory swapped for a symlink is refused rather than followed, and
paths longer than PATH_MAX work (no absolute path is ever built).
"""

from __future__ import annotations

import errno
import functools
import os
import stat
import sys
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .names import EXACT, Folding

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# Linux says ENOTDIR for a symlink opened with O_DIRECTORY|O_NOFOLLOW, others ELOOP (FreeBSD: EMLINK).
_NOT_A_DIR = (errno.ENOTDIR, errno.ELOOP, errno.EMLINK)


class SymlinkInPath(Exception):
    """A directory on the way is a symlink: following it could leave the root."""

    def __init__(self, rel_dir: str) -> None:
        super().__init__(f"{rel_dir} is a symlink, not a directory")
        self.rel_dir = rel_dir


class DirChanged(Exception):
    """A directory was replaced by another one since it was first opened."""

    def __init__(self, rel_dir: str) -> None:
        super().__init__(f"{rel_dir} was replaced during the operation")
        self.rel_dir = rel_dir


def open_child(parent_fd: int, name: str, rel_dir: str) -> int:
    """Open one directory component; a symlink raises SymlinkInPath, a file NotADirectoryError."""
    try:
        return os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno not in _NOT_A_DIR:
            raise
        try:
            st = os.stat(name, dir_fd=parent_fd, follow_symlinks=False)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", rel_dir) from None
        if stat.S_ISLNK(st.st_mode):
            raise SymlinkInPath(rel_dir) from None
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", rel_dir) from None


#: openat2(2) (Linux 5.6+) is system call 437 on every architecture listed (the unified table); elsewhere (macOS,
#: other machines) the walk below is all there is.
_OPENAT2_NR = 437
_OPENAT2_MACHINES = ("x86_64", "aarch64", "arm64", "armv7l", "armv6l", "riscv64", "ppc64le", "ppc64", "s390x")
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS, _RESOLVE_BENEATH = 0x02, 0x04, 0x08
#: The kernel (or a seccomp filter, as older container runtimes install) has no openat2: the caller stops asking.
_NO_OPENAT2 = (errno.ENOSYS, errno.EPERM, errno.EINVAL, errno.E2BIG)
REFUSED = -1  # open_beneath's answer when the system has no openat2 (or refuses it): walk, and stop asking


@functools.cache
def _openat2_call() -> Any:
    """libc's syscall() and openat2's `struct open_how`, looked up once (None: not on this system; no disk is read)."""
    # os.uname, not platform.machine(): importing platform was ~1.3 ms of every command that captures
    if not (sys.platform.startswith("linux") and os.uname().machine in _OPENAT2_MACHINES):
        return None
    import ctypes  # not at import: every capture imports this module

    class OpenHow(ctypes.Structure):
        _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]

    call = getattr(ctypes.CDLL(None, use_errno=True), "syscall", None)
    if call is None:
        return None
    call.restype = ctypes.c_long
    how = OpenHow(DIR_FLAGS, 0, _RESOLVE_BENEATH | _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    return call, ctypes.byref(how), ctypes.sizeof(how), ctypes, how


def open_beneath(root_fd: int, rel_dir: str) -> int | None:
    """`rel_dir`'s fd in one openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS): the kernel refuses a symlink (or a
    magic link, or a way out of the root) on the whole chain, as the walk below does component by component, in one
    system call instead of one open and one close per component (a restored file five directories down: ~26
    directory opens, 6 with openat2; tests/test_safe_paths.py). None when it cannot answer alone (the chain is
    missing, not all directories, has a symlink or is too long: the walk finds out which, and says so); REFUSED
    when this system has no openat2 or refuses it."""
    found = _openat2_call()
    if found is None:
        return REFUSED
    call, how, size, ctypes, _keep = found
    fd = int(call(ctypes.c_long(_OPENAT2_NR), ctypes.c_int(root_fd), os.fsencode(rel_dir), how, ctypes.c_size_t(size)))
    if fd >= 0:
        return fd
    return REFUSED if ctypes.get_errno() in _NO_OPENAT2 else None


def open_dir(root_fd: int, rel_dir: str, *, create: bool = False,
             on_mkdir: Callable[[], None] | None = None) -> int:
    """A new fd for `rel_dir` below `root_fd` (the caller closes it); missing parts made if `create`."""
    fd = os.dup(root_fd)
    if not rel_dir:
        return fd
    done = 0
    try:
        for name in rel_dir.split("/"):
            done += len(name) + 1
            here = rel_dir[:done - 1]
            try:
                nfd = open_child(fd, name, here)
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                    if on_mkdir is not None:
                        on_mkdir()
                except FileExistsError:
                    pass  # made meanwhile by someone else: opened (and checked) below like any other
                nfd = open_child(fd, name, here)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


class DirCache:
    """Directory fds below one root, for reading during one capture.

    Caching is only for reads within one capture: the walk lists a directory through an fd and
    the reads that follow open its files through the same fd, so the walk and the reads agree on
    what they saw even if the directory is swapped for a symlink meanwhile (a swapped-in symlink
    is never followed). At most `max_open` fds are kept (least recently used go); a directory
    opened again is checked to be the same one (device and inode) and raises DirChanged if not.
    """

    def __init__(self, root: str, max_open: int = 256, folding: Folding = EXACT) -> None:
        self.root = root
        self._max = max(2, max_open)
        self._root_fd: int | None = None
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._ident: dict[str, tuple[int, int]] = {}
        # On a volume that folds names, a path is present only under the spelling its directory lists (names.py):
        # each directory a lookup goes through is listed once per capture.
        self.folding = folding
        self._listed: dict[str, frozenset[str]] = {}

    def _spelled(self, dir_fd: int, rel_dir: str, name: str, rel: str) -> None:
        """Raise FileNotFoundError unless `name` is listed as it is spelled (a folding volume only)."""
        if not self.folding.any:
            return
        if name not in self._names(dir_fd, rel_dir):
            raise FileNotFoundError(errno.ENOENT, "not listed under this spelling", rel)

    def _names(self, dir_fd: int, rel_dir: str) -> frozenset[str]:
        """The names directory `rel_dir` lists, listed once per capture."""
        names = self._listed.get(rel_dir)
        if names is None:
            names = self._listed[rel_dir] = frozenset(os.listdir(dir_fd))
        return names

    def listed_spelling(self, rel: str) -> str | None:
        """On a folding volume, `rel` with its last name as its directory lists it (None: no such entry, or the
        directory itself is not reached under this spelling)."""
        parent, _, name = rel.rpartition("/")
        try:
            fd = self.dir_fd(parent)
        except (OSError, SymlinkInPath, DirChanged):
            return None
        try:
            names = self._names(fd, parent)
        except OSError:
            return None
        if name in names:
            return rel
        key = self.folding.key(name)
        found = next((n for n in names if self.folding.key(n) == key), None)
        return None if found is None else (f"{parent}/{found}" if parent else found)

    def close(self) -> None:
        """Close every fd."""
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        if self._root_fd is not None:
            os.close(self._root_fd)
            self._root_fd = None

    def __enter__(self) -> DirCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def root_fd(self) -> int:
        """The root's fd, opened on first use (so a missing root fails where it is first read)."""
        if self._root_fd is None:
            self._root_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        return self._root_fd

    def dir_fd(self, rel_dir: str) -> int:
        """An fd of a directory below the root, valid until the next call that opens directories."""
        if not rel_dir:
            return self.root_fd()
        fd = self._fds.get(rel_dir)
        if fd is not None:
            self._fds.move_to_end(rel_dir)
            return fd
        # Start from the deepest cached ancestor, then open the rest one component at a time.
        cut = len(rel_dir)
        base_fd = None
        while base_fd is None:
            cut = rel_dir.rfind("/", 0, cut)
            if cut < 0:
                cut = 0
                base_fd = self.root_fd()
            else:
                base_fd = self._fds.get(rel_dir[:cut])
        fd = base_fd
        pos = cut + 1 if cut else 0
        while pos <= len(rel_dir):
            end = rel_dir.find("/", pos)
            if end < 0:
                end = len(rel_dir)
            here = rel_dir[:end]
            self._spelled(fd, rel_dir[:pos - 1] if pos else "", rel_dir[pos:end], here)
            nfd = open_child(fd, rel_dir[pos:end], here)
            st = os.fstat(nfd)
            ident = (st.st_dev, st.st_ino)
            seen = self._ident.setdefault(here, ident)
            if seen != ident:
                os.close(nfd)
                raise DirChanged(here)
            self._put(here, nfd)
            fd = nfd
            pos = end + 1
        return fd

    def _put(self, rel_dir: str, fd: int) -> None:
        self._fds[rel_dir] = fd
        while len(self._fds) > self._max:
            _rel, old = self._fds.popitem(last=False)
            os.close(old)

    def scandir(self, rel_dir: str) -> os._ScandirIterator[str]:  # typeshed name of the scandir type
        """List a directory through its fd (entries' stat() uses that fd: finish before other opens)."""
        return os.scandir(self.dir_fd(rel_dir))

    def lstat(self, rel: str) -> os.stat_result:
        """lstat without following any symlink on the way (on a folding volume: of the spelling listed only)."""
        parent, _, name = rel.rpartition("/")
        fd = self.dir_fd(parent)
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        self._spelled(fd, parent, name, rel)
        return st

    def readlink(self, rel: str) -> str:
        """A symlink's target, the link reached without following any other."""
        parent, _, name = rel.rpartition("/")
        return os.readlink(name, dir_fd=self.dir_fd(parent))

    def open(self, rel: str, flags: int) -> int:
        """Open a file (O_NOFOLLOW added) through its directory's fd (on a folding volume: the spelling listed)."""
        parent, _, name = rel.rpartition("/")
        fd = self.dir_fd(parent)
        self._spelled(fd, parent, name, rel)
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
