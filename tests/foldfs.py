"""A case- and Unicode-normalization-insensitive, case-preserving file system over a directory (FUSE, mfusepy), as
APFS and HFS+ are by default: the volume most Mac users' workspaces are on, for the tests of names that differ only
in case or Unicode form (issue 32). ext4's casefold needs a kernel with CONFIG_UNICODE, which CI's lacks.

    python -m tests.foldfs BACKING MOUNTPOINT [--no-links]     (foreground; unmount: `fusermount3 -u MOUNTPOINT`)

With `--no-links` it is also a volume as exFAT and FAT are: no hard links, and no rename that refuses to replace
(renameat2's RENAME_NOREPLACE, Darwin's RENAME_EXCL).

As APFS: two names are one when their NFD forms fold to the same case; a name is created in the spelling given
and then kept (opening, creating or making a directory under another spelling reaches the existing entry); a
rename to another spelling of the same entry changes its spelling; a directory lists the spellings kept. Inode
numbers are the backing directory's (`use_ino`), and nothing is cached by the kernel, so every lookup is asked
here: a stale spelling is found exactly as on a Mac (`lstat("readme.md")` succeeds for `Readme.md`).
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import unicodedata
from typing import Any

import mfusepy
from mfusepy import FuseOSError, Operations

RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def fold(name: str) -> str:
    """The key two names share when the volume takes them for one."""
    return unicodedata.normalize("NFD", unicodedata.normalize("NFD", name).casefold())


class FoldFS(Operations):  # type: ignore[misc]
    """Pass-through to `backing`, every path component matched by its fold."""

    use_ns = True

    def __init__(self, backing: str, links: bool = True) -> None:
        self.backing = os.path.realpath(backing)
        self.links = links
        self.names = threading.Lock()  # renames and creations see one listing

    def _real(self, path: str) -> str:
        """The backing path `path` names: each component in the spelling its directory holds (or as given)."""
        real = self.backing
        for part in [p for p in path.split("/") if p]:
            candidate = os.path.join(real, part)
            if os.path.lexists(candidate):
                real = candidate
                continue
            key = fold(part)
            try:
                names = os.listdir(real)
            except (FileNotFoundError, NotADirectoryError):
                names = []
            real = os.path.join(real, next((n for n in names if fold(n) == key), part))
        return real

    def _call(self, fn: Any, *args: Any) -> Any:
        try:
            return fn(*args)
        except OSError as exc:
            raise FuseOSError(exc.errno or errno.EIO) from None

    # ---------------------------------------------------------------- metadata
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        st = self._call(os.fstat, fh) if fh is not None else self._call(os.lstat, self._real(path))
        out = {k: getattr(st, k) for k in ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_ino",
                                           "st_blocks")}
        out.update(st_atime=st.st_atime_ns, st_mtime=st.st_mtime_ns, st_ctime=st.st_ctime_ns)
        return out

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        """The spellings kept, with their inode numbers (an entry numbered 0 is one readdir(3) skips)."""
        real = self._real(path)
        st = self._call(os.lstat, real)
        out = [(".", {"st_ino": st.st_ino, "st_mode": st.st_mode}, 0), ("..", {"st_ino": 1, "st_mode": st.st_mode}, 0)]
        with self._call(os.scandir, real) as it:
            for de in it:
                st = de.stat(follow_symlinks=False)
                out.append((de.name, {"st_ino": st.st_ino, "st_mode": st.st_mode}, 0))
        return out

    def readlink(self, path: str) -> str:
        return str(self._call(os.readlink, self._real(path)))

    def chmod(self, path: str, mode: int) -> int:
        real = self._real(path)
        if not os.path.islink(real):  # Linux has no mode of a symlink to change
            self._call(os.chmod, real, mode)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        self._call(os.lchown, self._real(path), uid, gid)
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        if times is None:
            self._call(os.utime, self._real(path), None, follow_symlinks=False)
        else:
            self._call(os.utime, self._real(path), ns=times, follow_symlinks=False)
        return 0

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self.backing)
        return {k: getattr(st, k) for k in ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree",
                                            "f_files", "f_flag", "f_frsize", "f_namemax")}

    # ---------------------------------------------------------------- names
    def mkdir(self, path: str, mode: int) -> int:
        with self.names:
            self._call(os.mkdir, self._real(path), mode)
        return 0

    def rmdir(self, path: str) -> int:
        self._call(os.rmdir, self._real(path))
        return 0

    def unlink(self, path: str) -> int:
        self._call(os.unlink, self._real(path))
        return 0

    def symlink(self, target: str, source: str) -> int:
        with self.names:
            self._call(os.symlink, source, self._real(target))
        return 0

    def link(self, target: str, source: str) -> int:
        if not self.links:
            raise FuseOSError(errno.EPERM)
        with self.names:
            self._call(os.link, self._real(source), self._real(target), follow_symlinks=False)
        return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        with self.names:
            self._call(os.mknod, self._real(path), mode, dev)
        return 0

    def rename(self, old: str, new: str) -> int:
        return self.rename2(old, new, 0)

    def rename2(self, old: str, new: str, flags: int) -> int:
        if flags & RENAME_EXCHANGE or (flags and not self.links):
            raise FuseOSError(errno.EINVAL)
        with self.names:
            src = self._real(old)
            parent = self._real(os.path.dirname(new) or "/")
            leaf = os.path.basename(new)
            there = self._real(new)  # a fold-mate's spelling when one exists
            wanted = os.path.join(parent, leaf)
            if os.path.lexists(there):
                same = os.lstat(there).st_ino == self._call(os.lstat, src).st_ino
                if flags & RENAME_NOREPLACE and not same:
                    raise FuseOSError(errno.EEXIST)
                if not same:
                    self._call(os.rename, src, there)  # replaces the fold-mate, then takes the new spelling
                    src = there
            elif flags & RENAME_NOREPLACE and os.path.lexists(wanted):
                raise FuseOSError(errno.EEXIST)
            if src != wanted:
                self._call(os.rename, src, wanted)
        return 0

    # ---------------------------------------------------------------- contents
    def open(self, path: str, flags: int) -> int:
        return int(self._call(os.open, self._real(path), flags))

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY | os.O_CREAT) -> int:
        with self.names:
            return int(self._call(os.open, self._real(path), flags | os.O_CREAT, mode))

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return bytes(self._call(os.pread, fh, size, offset))

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        return int(self._call(os.pwrite, fh, data, offset))

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if fh is not None:
            self._call(os.ftruncate, fh, length)
        else:
            self._call(os.truncate, self._real(path), length)
        return 0

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        self._call(os.close, fh)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        self._call(os.fdatasync if datasync else os.fsync, fh)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        return 0


class FoldFUSE(mfusepy.FUSE):  # type: ignore[misc]
    """mfusepy drops rename's flags; the store's RENAME_NOREPLACE must be honoured, as APFS's RENAME_EXCL is."""

    def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
        ops = self.operations
        return int(ops.rename2(old.decode(self.encoding, self.errors), new.decode(self.encoding, self.errors),
                               flags))


def main(argv: list[str]) -> int:
    backing, mountpoint = argv[:2]
    FoldFUSE(FoldFS(backing, links="--no-links" not in argv[2:]), mountpoint, foreground=True, use_ino=True,
             entry_timeout=0, attr_timeout=0, negative_timeout=0, fsname="foldfs")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
