"""Workspace trees the soak builds, and exact listings of them (content, mode, symlink target) to compare."""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import stat
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

#: (kind, sha256 of content or link target, permission bits); kind is "file", "link" or "dir".
State = tuple[str, str, int]
Tree = dict[str, State]

TMP_MARK = ".codexr-tmp-"

GIT_ENV = {
    **os.environ,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "soak",
    "GIT_AUTHOR_EMAIL": "soak@example.invalid",
    "GIT_COMMITTER_NAME": "soak",
    "GIT_COMMITTER_EMAIL": "soak@example.invalid",
}


def git(repo: Path, *args: str) -> None:
    """Run git with a throw-away identity."""
    subprocess.run(["git", "-c", "init.defaultBranch=main", *args], cwd=repo, env=GIT_ENV, check=True,
                   capture_output=True)


def listing(root: Path, *, skip: tuple[str, ...] = (".git",)) -> Tree:
    """Every entry below `root` (never following symlinks) with a hash of its content and its mode."""
    out: Tree = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in [*dirs, *files]:
            p = os.path.join(dirpath, name)
            rel = os.path.relpath(p, root).replace(os.sep, "/")
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p), 0)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", "", 0)  # directory modes are not part of a snapshot
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as fh:
                    out[rel] = ("file", hashlib.sha256(fh.read()).hexdigest(), stat.S_IMODE(st.st_mode))
            else:
                out[rel] = ("special", "", stat.S_IMODE(st.st_mode))
    return out


def diff(a: Mapping[str, State], b: Mapping[str, State], limit: int = 8) -> str:
    """How two listings differ, at most `limit` paths."""
    keys = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    lines = [f"{k}: {a.get(k)} != {b.get(k)}" for k in keys[:limit]]
    if len(keys) > limit:
        lines.append(f"... {len(keys) - limit} more")
    return "; ".join(lines)


def mixed(now: Mapping[str, State], before: Mapping[str, State], after: Mapping[str, State],
          *, allow_tmp: bool) -> list[str]:
    """Paths whose state is neither their before- nor their after-state (absent counts as a state).

    Directories compare by presence only; a directory left empty where the after-state has none is
    tolerated (restore removes emptied directories only when it can). With `allow_tmp`, temp files of
    an interrupted write are tolerated (recovery removes them).
    """
    bad = []
    for k in sorted(set(now) | set(before) | set(after)):
        cur = now.get(k)
        if cur == before.get(k) or cur == after.get(k):
            continue
        if cur is not None and cur[0] == "dir" and (before.get(k) or after.get(k) or ("",))[0] == "dir":
            continue
        if cur is not None and cur[0] == "dir" and _dir_tolerated(k, now, before, after):
            continue
        if allow_tmp and cur is not None and TMP_MARK in k.rpartition("/")[2]:
            continue
        bad.append(f"{k}: now {cur}, before {before.get(k)}, after {after.get(k)}")
    return bad


def _dir_tolerated(k: str, now: Mapping[str, State], before: Mapping[str, State],
                   after: Mapping[str, State]) -> bool:
    """An extra directory is fine only if everything in it is itself in a before- or after-state."""
    prefix = k + "/"
    return all(before.get(p) == v or after.get(p) == v for p, v in now.items() if p.startswith(prefix))


def tree_hash(root: Path) -> str:
    """One digest over a whole directory tree (names, kinds, contents, modes), for the outside sentinel."""
    h = hashlib.sha256()
    if not root.exists():
        return "absent"
    for rel, st in sorted(listing(root, skip=()).items()):
        h.update(repr((rel, st)).encode())
    return h.hexdigest()


def copy_parts(src: Path, dst: Path, parts: tuple[str, ...]) -> None:
    """Replace `dst/part` by an exact copy of `src/part` for each part, with one `cp -a`."""
    for part in parts:
        if (dst / part).exists() or (dst / part).is_symlink():
            shutil.rmtree(dst / part)
    subprocess.run(["cp", "-a", *(str(src / p) for p in parts), str(dst)], check=True)


def copy_tree(src: Path, dst: Path) -> None:
    """Replace `dst` by an exact copy of `src` (modes, symlinks, timestamps)."""
    if dst.exists() or dst.is_symlink():
        shutil.rmtree(dst)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


# ------------------------------------------------------------------------------------------- building


@dataclass
class Layout:
    """Where one trial's directories live; the same absolute paths every trial (snapshots name their root)."""

    base: Path

    @property
    def ws(self) -> Path:
        return self.base / "ws"

    @property
    def home(self) -> Path:
        return self.base / "home"

    @property
    def outside(self) -> Path:
        """The sentinel directory next to the workspace; `ws/escape` is a symlink to it."""
        return self.base / "outside"

    @property
    def scratch(self) -> Path:
        """Empty directories for restores of snapshots into somewhere else."""
        return self.base / "scratch"


def _text(rng: random.Random, n: int) -> bytes:
    words = ["alpha", "beta", "gamma", "delta", "def", "return", "x", "import", "self", "value", "\n", "    "]
    out: list[str] = []
    size = 0
    while size < n:
        w = rng.choice(words)
        out.append(w + " ")
        size += len(w) + 1
    return "".join(out).encode()


def build_initial(ws: Path, outside: Path, rng: random.Random, files: int) -> None:
    """A git repository with `files` tracked files in nested directories, varied modes, symlinks, and a few
    untracked files; `escape` points at the sentinel directory outside."""
    ws.mkdir(parents=True)
    outside.mkdir(parents=True, exist_ok=True)
    (outside / "sentinel.txt").write_text("must never change\n")
    (outside / "sub").mkdir(exist_ok=True)
    (outside / "sub" / "deep.txt").write_text("must never change either\n")
    git(ws, "init", "-q")
    dirs = [""]
    for i in range(max(4, files // 25)):
        parent = rng.choice(dirs)
        if parent.count("/") >= 4:
            parent = ""
        d = f"{parent}/d{i}" if parent else f"d{i}"
        dirs.append(d)
    for i in range(files):
        d = rng.choice(dirs)
        rel = f"{d}/f{i}.txt" if d else f"f{i}.txt"
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(_text(rng, rng.choice([0, 40, 300, 1500, 6000])))
        r = rng.random()
        if r < 0.08:
            os.chmod(p, 0o755)
        elif r < 0.12:
            os.chmod(p, 0o600)
    (ws / "big.bin").write_bytes(rng.randbytes(300_000))
    os.symlink("d0", ws / "link_dir")
    first = next(iter(sorted(p.relative_to(ws).as_posix() for p in ws.rglob("*.txt"))))
    os.symlink(first, ws / "link_file")
    os.symlink("nowhere/missing.txt", ws / "dangling")
    os.symlink(os.path.relpath(outside, ws), ws / "escape")
    git(ws, "add", "-A")
    git(ws, "commit", "-qm", "initial")
    for i in range(30):  # untracked, present before the first snapshot (under the residue limit)
        d = rng.choice(dirs)
        rel = f"{d}/untracked{i}.dat" if d else f"untracked{i}.dat"
        (ws / rel).write_bytes(_text(rng, rng.choice([10, 200, 900])))
        if i % 7 == 0:
            os.chmod(ws / rel, 0o600)
    os.symlink("d1", ws / "untracked_link")


def shell_changes(ws: Path, rng: random.Random, tag: str, fraction: float = 0.05) -> None:
    """What a user's shell does between snapshots: edits, mode-only changes, deletions, new files and
    directories, a file turned into a symlink and a symlink retargeted."""
    tracked = sorted(p for p in ws.rglob("*") if p.is_file() and not p.is_symlink() and ".git" not in p.parts)
    n = max(3, int(len(tracked) * fraction))
    picks = rng.sample(tracked, min(len(tracked), 3 * n))
    edit, chmod, delete = picks[:n], picks[n:2 * n], picks[2 * n:]
    for p in edit:
        p.write_bytes(_text(rng, rng.choice([10, 500, 3000])) + tag.encode())
    for p in chmod:
        os.chmod(p, 0o600 if stat.S_IMODE(p.stat().st_mode) != 0o600 else 0o755)
    for p in delete[: max(1, len(delete) // 2)]:
        p.unlink()
    for i in range(25):
        sub = ws / f"shell_{tag}" / f"n{i % 4}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"made{i}.txt").write_bytes(_text(rng, 120 + i))
        if i % 5 == 0:
            os.chmod(sub / f"made{i}.txt", 0o755)
    victim = delete[-1]
    if victim.exists():
        victim.unlink()
        os.symlink("../" * (len(victim.relative_to(ws).parts) - 1) + "big.bin", victim)
    link = ws / "link_dir"
    if link.is_symlink():
        link.unlink()
        os.symlink("d2", link)
    os.symlink(f"gone_{tag}", ws / f"dangling_{tag}")
