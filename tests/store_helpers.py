"""Shared helpers for the snapshot-store tests (test_store_*.py): repos, tree listings, clocks."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import subprocess
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest

from snapshot_store import ScopeSettings

#: Residue large enough that every ordinary untracked file in a small test tree is captured.
WIDE = ScopeSettings(residue_max_files=1000)

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a throw-away identity; return stdout. Extra `-c key=value` may lead `args`."""
    out = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "core.autocrlf=false", *args],
        cwd=repo, env=GIT_ENV, check=True, capture_output=True,
    )
    return out.stdout.decode("utf-8", "surrogateescape")


def write(root: Path, rel: str | bytes, data: bytes | str = b"", mode: int | None = None) -> Path:
    """Create (or overwrite) a file below `root`, making parent directories."""
    path = Path(os.fsdecode(os.path.join(os.fsencode(root), rel))) if isinstance(rel, bytes) else root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    if mode is not None:
        os.chmod(path, mode)
    return path


def make_repo(root: Path, files: Mapping[str, bytes | str], *, commit: bool = True) -> Path:
    """`git init` a repository at `root` holding `files`, all added and (by default) committed."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    for rel, data in files.items():
        write(root, rel, data)
    if files:
        git(root, "add", "-A")
        if commit:
            git(root, "commit", "-qm", "initial")
    return root


def tree(root: Path, *, skip: Iterable[str] = (".git",)) -> dict[str, tuple[object, ...]]:
    """Everything below `root` (not following links): rel -> ('f', mode, sha256) | ('l', target) | ('d',).

    Top-level-or-nested components named in `skip` are not descended into (and not listed).
    """
    skip_set = set(skip)
    out: dict[str, tuple[object, ...]] = {}

    def walk(abs_dir: str, rel_dir: str) -> None:
        for name in sorted(os.listdir(abs_dir)):
            if name in skip_set:
                continue
            rel = f"{rel_dir}/{name}" if rel_dir else name
            path = os.path.join(abs_dir, name)
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(path))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("d",)
                walk(path, rel)
            elif stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("f", stat.S_IMODE(st.st_mode), digest)
            else:
                out[rel] = ("?", stat.S_IFMT(st.st_mode))

    walk(str(root), "")
    return out


def exact_tree(root: Path) -> dict[str, tuple[object, ...]]:
    """Like `tree` but including `.git` and every file's mtime: proves nothing was even touched."""
    out: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(dirnames + filenames):
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()
                out[rel] = ("f", st.st_mode, st.st_mtime_ns, digest)
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(path))
            else:
                out[rel] = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode))
    return out


def store_files(store_dir: Path, *, skip_locks: bool = True) -> dict[str, tuple[int, str]]:
    """Every file of a store directory with size and content hash (lock files excluded by default)."""
    out: dict[str, tuple[int, str]] = {}
    for dirpath, _dirnames, filenames in os.walk(store_dir):
        rel_dir = os.path.relpath(dirpath, store_dir)
        if skip_locks and (rel_dir == "locks" or rel_dir.startswith("locks" + os.sep)):
            continue
        for name in filenames:
            path = os.path.join(dirpath, name)
            with open(path, "rb") as f:
                out[os.path.join(rel_dir, name)] = (os.path.getsize(path), hashlib.sha256(f.read()).hexdigest())
    return out


def age_tree(root: Path, seconds: float = 3600.0, *, settle: float = 0.25) -> None:
    """Set every file's mtime into the past (non-whole seconds), then wait until ctimes are not racy.

    `os.utime` bumps ctime to now, and the stat cache distrusts anything changed within ~100 ms
    of a capture, so we sleep `settle` seconds afterwards.
    """
    base_ns = time.time_ns() - int(seconds * 1e9)
    n = 0
    for dirpath, dirnames, filenames in os.walk(root):
        if ".git" in dirnames:
            dirnames.remove(".git")
        for name in filenames:
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            ns = base_ns + n * 1_000_003 + 123_457  # never a whole second (coarse-clock rule)
            os.utime(path, ns=(ns, ns))
            n += 1
    time.sleep(settle)


def sha256_file(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def waits_on_lock(proc: subprocess.Popen[str], lock: Path, timeout: float = 60.0) -> None:
    """Until `proc` has `lock` open (a store lock: it then has its blob index and waits on flock)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"the command ended before it waited for the lock: {out} {err}")
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{proc.pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{proc.pid}/fd/{fd}") == str(lock):
                        time.sleep(0.2)  # from open() to flock() is a few microseconds; be generous
                        return
        time.sleep(0.01)
    pytest.fail("the command never opened the store lock")
