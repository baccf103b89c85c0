"""Writes confined to one workspace: every path is walked with dir fds and O_NOFOLLOW.

A symlinked directory anywhere on the way stops the operation, so nothing is ever written
outside the root, and `.git` components are refused outright.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Iterable

from .scope import forbidden

TMP_PREFIX = ".codexr-tmp-"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


class UnsafePath(Exception):
    """The path cannot be written without following a symlink or leaving the root."""


class SafeRoot:
    """Directory-fd based file operations below a root."""

    def __init__(self, root: str) -> None:
        self.root = root
        self._fds: dict[str, int] = {"": os.open(root, _DIR_FLAGS)}
        self.dirs_changed = False  # a directory was created or removed (the change journal must re-walk)

    def close(self) -> None:
        """Close every directory fd."""
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds.clear()

    def __enter__(self) -> SafeRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def dir_fd(self, rel_dir: str, create: bool) -> int | None:
        """An fd for a directory below the root; None if it is missing and `create` is off."""
        fd = self._fds.get(rel_dir)
        if fd is not None:
            return fd
        parent, _, name = rel_dir.rpartition("/")
        pfd = self.dir_fd(parent, create)
        if pfd is None:
            return None
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except FileNotFoundError:
            if not create:
                return None
            os.mkdir(name, 0o777, dir_fd=pfd)
            self.dirs_changed = True
            fd = os.open(name, _DIR_FLAGS, dir_fd=pfd)
        except (NotADirectoryError, OSError) as exc:
            if isinstance(exc, NotADirectoryError) or exc.errno == errno.ELOOP:
                raise UnsafePath(f"{rel_dir} is a symlink or a file, not a directory") from exc
            raise
        self._fds[rel_dir] = fd
        return fd

    def _split(self, rel: str, create: bool) -> tuple[int | None, str]:
        if forbidden(rel):
            raise UnsafePath(f"{rel}: refusing to touch this path")
        parent, _, name = rel.rpartition("/")
        return self.dir_fd(parent, create), name

    def parent_fd(self, rel: str) -> tuple[int, str]:
        """The fd of an existing file's directory and its name there (for reads by dir fd)."""
        pfd, name = self._split(rel, False)
        if pfd is None:
            raise FileNotFoundError(rel)
        return pfd, name

    def lstat(self, rel: str) -> os.stat_result | None:
        """lstat without following links; None when absent (or its parent is)."""
        try:
            pfd, name = self._split(rel, False)
        except UnsafePath:
            return None
        if pfd is None:
            return None
        try:
            return os.stat(name, dir_fd=pfd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, rel: str) -> bytes:
        """Read a regular file without following a symlink."""
        pfd, name = self._split(rel, False)
        if pfd is None:
            raise FileNotFoundError(rel)
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=pfd)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def write_file(self, rel: str, chunks: Iterable[bytes], mode: int) -> None:
        """Write via a temp file in the same directory, set the mode, rename over the target."""
        pfd, name = self._split(rel, True)
        assert pfd is not None
        tmp = f"{TMP_PREFIX}{secrets.token_hex(6)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=pfd)
        try:
            try:
                for chunk in chunks:
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(fd, view):]
                os.fchmod(fd, mode)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=pfd)
            raise

    def write_link(self, rel: str, target: str) -> None:
        """Create a symlink (never following it) via a temp name and rename."""
        pfd, name = self._split(rel, True)
        assert pfd is not None
        tmp = f"{TMP_PREFIX}{secrets.token_hex(6)}"
        os.symlink(target, tmp, dir_fd=pfd)
        try:
            os.rename(tmp, name, src_dir_fd=pfd, dst_dir_fd=pfd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=pfd)
            raise

    def unlink(self, rel: str) -> None:
        """Remove a file or symlink (a directory is refused by the kernel)."""
        pfd, name = self._split(rel, False)
        if pfd is None:
            raise FileNotFoundError(rel)
        os.unlink(name, dir_fd=pfd)

    def rmdir(self, rel: str) -> None:
        """Remove an empty directory."""
        pfd, name = self._split(rel, False)
        if pfd is None:
            raise FileNotFoundError(rel)
        fd = self._fds.pop(rel, None)
        if fd is not None:
            os.close(fd)
        os.rmdir(name, dir_fd=pfd)
        self.dirs_changed = True

    def clean_temps(self, rel_dir: str) -> None:
        """Remove temp files a crashed restore left in one directory."""
        fd = self.dir_fd(rel_dir, False)
        if fd is None:
            return
        for name in os.listdir(fd):
            if name.startswith(TMP_PREFIX):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=fd)
