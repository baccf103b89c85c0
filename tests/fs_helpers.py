"""Byte-exact listings of workspaces and stores for the CLI and gc tests (store_helpers' are hashed)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

Tree = dict[str, object]


def tree(root: Path) -> Tree:
    """Every directory, file (bytes, mode) and symlink below root, hidden ones included."""
    out: Tree = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[Path(dirpath, d).relative_to(root).as_posix() + "/"] = "dir"
        for f in files:
            p = Path(dirpath, f)
            rel = p.relative_to(root).as_posix()
            out[rel] = ("link", os.readlink(p)) if p.is_symlink() else (p.read_bytes(),
                                                                         stat.S_IMODE(p.lstat().st_mode))
    return out


def store_files(store_dir: Path) -> dict[str, bytes]:
    """Every file of the store with its bytes, except lock files (flock bookkeeping, not data)."""
    out = {}
    for dirpath, _dirs, files in os.walk(store_dir):
        for f in files:
            p = Path(dirpath, f)
            rel = p.relative_to(store_dir).as_posix()
            if not rel.startswith("locks/"):
                out[rel] = p.read_bytes()
    return out


def codexr(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`codexr ARGS` as a separate process on CODEX_HOME `home`, with this repository's code."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), "CODEX_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
