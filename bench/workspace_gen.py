"""Deterministic synthetic workspaces for bench_store.py: a committed Git project plus optional churn.

The tracked tree imitates a real project: many small source-like text files (pseudo-random but seeded,
compressible like code) spread over a few hundred nested directories, a few byte-identical boilerplate
files, and three large files (one incompressible, one text data file, one "database-like" mix of zero
pages and random pages). The churn part adds a Git-ignored ``node_modules/`` with tens of thousands of
small files and a ``build/`` with a few very large outputs.
"""

from __future__ import annotations

import itertools
import math
import os
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1024 * 1024

GITIGNORE = b"node_modules/\nbuild/\n*.pyc\n__pycache__/\n"

_TOP_DIRS = ("src", "lib", "tests", "docs", "tools", "packages", "scripts", "examples", "config", "web")
_CODE_EXTS = (".py", ".py", ".py", ".ts", ".ts", ".js", ".go", ".rs", ".c", ".h", ".sh")
_DOC_EXTS = (".md", ".md", ".rst", ".txt")
_CONFIG_EXTS = (".json", ".yaml", ".toml")


@dataclass
class Corpus:
    """A seeded pool of code-like lines; file contents are random selections of these lines."""

    rng: random.Random
    words: list[str]
    lines: list[str]
    mean_line: float

    def text(self, size: int, header: str = "") -> bytes:
        """About ``size`` bytes of fresh pseudo-random text (deterministic for this corpus' rng state)."""
        if size <= 0:
            return header.encode()
        k = max(1, math.ceil(size / self.mean_line))
        body = "\n".join(self.rng.choices(self.lines, k=k))
        return (header + body)[: max(size, len(header))].encode() + b"\n"


def make_corpus(seed: int, n_words: int = 1500, n_lines: int = 20000) -> Corpus:
    """Zipf-distributed identifiers in code-shaped lines: compresses about 2.4x, like small source files."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    words: set[str] = set()
    while len(words) < n_words:
        words.add("".join(rng.choices(letters, k=rng.randint(3, 10))))
    vocab = sorted(words)
    rng.shuffle(vocab)
    cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(vocab))))

    def pick(k: int) -> list[str]:
        return rng.choices(vocab, cum_weights=cum, k=k)

    lines: list[str] = []
    for _ in range(n_lines):
        w = pick(6)
        indent = " " * (4 * rng.choice((0, 1, 1, 2, 2, 2, 3, 3, 4)))
        kind = rng.randrange(10)
        if kind == 0:
            line = f"{indent}# {' '.join(pick(rng.randint(3, 10)))}"
        elif kind == 1:
            line = f"{indent}def {w[0]}_{w[1]}(self, {w[2]}, {w[3]}=None):"
        elif kind == 2:
            line = f"{indent}return self.{w[1]}({w[2]}[{rng.randint(0, 9)}])"
        elif kind == 3:
            line = f"{indent}for {w[0]} in self.{w[2]}():"
        elif kind == 4:
            line = ""
        elif kind == 5:
            line = f'{indent}{w[0]} = "{w[1]} {w[2]}"'
        elif kind == 6:
            line = f"{indent}if {w[0]} is None:"
        elif kind == 7:
            line = f"{indent}from {w[0]}.{w[1]} import {w[2]}"
        else:
            line = f"{indent}{w[0]}_{w[1]} = {w[2]}.{w[3]}({w[4]}, {w[5]})"
        lines.append(line)
    mean_line = sum(len(s) + 1 for s in lines) / len(lines)
    return Corpus(rng=rng, words=vocab, lines=lines, mean_line=mean_line)


@dataclass
class WorkspaceSpec:
    files: int = 11000
    """Total tracked files (including .gitignore and the large files)."""
    mb: float = 75.0
    """Total tracked bytes, in MB (10**6)."""
    large_files: int = 3
    large_fraction: float = 0.3
    """Share of the tracked bytes that sits in the large files."""
    dirs: int | None = None
    """Number of directories (default: files // 32, at least 8)."""
    churn: bool = False
    churn_files: int = 60000
    """Files under node_modules/ (ignored)."""
    churn_build_files: int = 4
    churn_build_mib: int = 64
    """Size of each build/ output (ignored)."""
    seed: int = 20240601


@dataclass
class Workspace:
    root: Path
    spec: WorkspaceSpec
    tracked: list[str]
    """All tracked relative paths (POSIX)."""
    small_text: list[str]
    """Tracked small text files eligible for modification."""
    sizes: dict[str, int]
    tracked_bytes: int
    churn_files: int = 0
    churn_bytes: int = 0
    gen_seconds: dict[str, float] = field(default_factory=dict)


def _write(root: Path, rel: str, data: bytes) -> None:
    with open(os.path.join(root, rel), "wb") as fh:
        fh.write(data)


def _make_dirs(rng: random.Random, words: list[str], count: int) -> list[str]:
    dirs: list[str] = list(_TOP_DIRS[: max(1, min(len(_TOP_DIRS), count))])
    seen = set(dirs)
    while len(dirs) < count:
        parent = rng.choice(dirs)
        if parent.count("/") >= 6:
            continue
        child = f"{parent}/{rng.choice(words)}"
        if child in seen:
            continue
        seen.add(child)
        dirs.append(child)
    return dirs


def _ext_for(top: str, rng: random.Random) -> str:
    if top == "docs":
        return rng.choice(_DOC_EXTS)
    if top == "config":
        return rng.choice(_CONFIG_EXTS)
    return rng.choice(_CODE_EXTS)


def _lognormal_sizes(
    rng: random.Random, n: int, total: int, sigma: float = 1.25, cap: int = 256 * 1024
) -> list[int]:
    raw = [min(rng.lognormvariate(0.0, sigma), 60.0) for _ in range(n)]
    scale = total / max(sum(raw), 1e-9)
    return [max(0, min(cap, int(r * scale))) for r in raw]


def git(
    args: list[str], cwd: Path, *, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[bytes]:
    cmd = [
        "git",
        "-c", "user.name=bench", "-c", "user.email=bench@example.invalid",
        "-c", "commit.gpgsign=false", "-c", "core.autocrlf=false",
        *args,
    ]  # fmt: skip
    return subprocess.run(cmd, cwd=cwd, env=env, check=True, capture_output=True)


def generate(root: Path, spec: WorkspaceSpec, log: Callable[[str], None] = lambda s: None) -> Workspace:
    """Create the workspace under ``root`` (must not exist or be empty) and commit the tracked part."""
    t0 = time.perf_counter()
    root.mkdir(parents=True, exist_ok=True)
    corpus = make_corpus(spec.seed)
    rng = random.Random(spec.seed + 1)
    n_dirs = spec.dirs if spec.dirs is not None else max(8, spec.files // 32)
    dirs = _make_dirs(rng, corpus.words, n_dirs)

    total_bytes = int(spec.mb * 1_000_000)
    n_large = min(spec.large_files, max(0, spec.files - 2))
    large_total = int(total_bytes * spec.large_fraction) if n_large else 0
    n_small = max(0, spec.files - n_large - 1)  # -1 for .gitignore
    n_dup = n_small // 50  # ~2% byte-identical boilerplate files (licenses, empty __init__.py, ...)
    small_total = total_bytes - large_total - len(GITIGNORE)
    sizes_list = _lognormal_sizes(rng, n_small - n_dup, max(0, small_total))

    # Paths: unique names, spread over the directory tree with a skew (some directories are big).
    weights = [rng.paretovariate(1.2) for _ in dirs]
    chosen_dirs = rng.choices(dirs, weights=weights, k=n_small)
    paths: list[str] = []
    for i, d in enumerate(chosen_dirs):
        top = d.split("/", 1)[0]
        paths.append(f"{d}/{rng.choice(corpus.words)}_{i}{_ext_for(top, rng)}")

    for d in dirs:
        (root / d).mkdir(parents=True, exist_ok=True)

    sizes: dict[str, int] = {}
    small_text: list[str] = []
    boilerplate = [b"", corpus.text(1100, "# Licensed under the Apache License 2.0\n"), corpus.text(300)]
    written = 0
    for i, rel in enumerate(paths):
        if i < n_small - n_dup:
            data = corpus.text(sizes_list[i], header=f"# {rel}\n")
            small_text.append(rel)
        else:
            data = boilerplate[i % len(boilerplate)]
        _write(root, rel, data)
        sizes[rel] = len(data)
        written += len(data)
    _write(root, ".gitignore", GITIGNORE)
    sizes[".gitignore"] = len(GITIGNORE)

    # Large files: incompressible blob, a text data file, and a database-like mix of zero/random pages.
    if n_large:
        (root / "assets" / "media").mkdir(parents=True, exist_ok=True)
        (root / "data" / "fixtures").mkdir(parents=True, exist_ok=True)
        shares = [0.40, 0.33, 0.27][:n_large] + [0.27] * max(0, n_large - 3)
        norm = sum(shares)
        for j, share in enumerate(shares):
            size = int(large_total * share / norm)
            kind = j % 3
            if kind == 0:
                rel = f"assets/media/demo_{j}.bin"
                data = rng.randbytes(size)
            elif kind == 1:
                rel = f"data/fixtures/dataset_{j}.csv"
                rows: list[str] = []
                n = 0
                while n < size:
                    row = f"{n},{rng.random():.6f},{rng.choice(corpus.words)},{rng.randint(0, 10**9)}"
                    rows.append(row)
                    n += len(row) + 1
                data = ("\n".join(rows) + "\n").encode()[:size]
            else:
                rel = f"data/fixtures/sample_{j}.sqlite"
                page = 4096
                parts = [
                    rng.randbytes(page) if rng.random() < 0.6 else b"\0" * page for _ in range(size // page)
                ]
                data = b"".join(parts) + rng.randbytes(size % page)
            _write(root, rel, data)
            sizes[rel] = len(data)
            written += len(data)
    gen_tracked = time.perf_counter() - t0
    log(f"  wrote {len(sizes)} tracked files, {written / 1e6:.1f} MB in {gen_tracked:.1f}s; committing")

    t1 = time.perf_counter()
    git(["init", "-q", "-b", "main"], root)
    git(["add", "-A"], root)
    git(["commit", "-q", "-m", "synthetic workspace"], root)
    out = git(["ls-files", "-z"], root).stdout
    tracked = [p for p in out.decode().split("\0") if p]
    git_seconds = time.perf_counter() - t1

    ws = Workspace(
        root=root,
        spec=spec,
        tracked=tracked,
        small_text=small_text,
        sizes=sizes,
        tracked_bytes=written + len(GITIGNORE),
        gen_seconds={"tracked": gen_tracked, "git": git_seconds},
    )
    if spec.churn:
        t2 = time.perf_counter()
        ws.churn_files, ws.churn_bytes = _generate_churn(root, spec, corpus, rng)
        ws.gen_seconds["churn"] = time.perf_counter() - t2
        log(
            f"  wrote churn: {ws.churn_files} files, {ws.churn_bytes / 1e6:.1f} MB"
            f" in {ws.gen_seconds['churn']:.1f}s"
        )
    return ws


def _generate_churn(root: Path, spec: WorkspaceSpec, corpus: Corpus, rng: random.Random) -> tuple[int, int]:
    """node_modules/<pkg>/{lib,dist,...}/*.js with small files, plus build/ with large outputs."""
    nm = root / "node_modules"
    n_files = spec.churn_files
    n_pkgs = max(1, n_files // 25)
    subdirs = ("", "lib", "dist", "src", "lib/internal", "dist/esm", "dist/cjs", "types")
    pkgs: list[str] = []
    seen: set[str] = set()
    while len(pkgs) < n_pkgs:
        name = rng.choice(corpus.words)
        if rng.random() < 0.15:
            name = f"@{rng.choice(corpus.words)}/{name}"
        if name in seen:
            name = f"{name}-{len(pkgs)}"
        seen.add(name)
        pkgs.append(name)
    sizes = _lognormal_sizes(rng, n_files, n_files * 1000, sigma=1.0, cap=64 * 1024)
    made: set[str] = set()
    total = 0
    for i in range(n_files):
        pkg = pkgs[i % n_pkgs]
        sub = subdirs[rng.randrange(len(subdirs))]
        d = f"{pkg}/{sub}" if sub else pkg
        if d not in made:
            (nm / d).mkdir(parents=True, exist_ok=True)
            made.add(d)
        data = corpus.text(sizes[i], header=f"// {pkg} {i}\n")
        _write(nm, f"{d}/{rng.choice(corpus.words)}_{i}.js", data)
        total += len(data)
    build = root / "build"
    build.mkdir(exist_ok=True)
    chunk = MIB
    for j in range(spec.churn_build_files):
        with open(build / f"output_{j}.bin", "wb") as fh:
            for _ in range(spec.churn_build_mib):
                fh.write(rng.randbytes(chunk))
        total += spec.churn_build_mib * chunk
    return n_files + spec.churn_build_files, total


#: Where generated workspaces are kept between runs (a 100,000-file / 700 MB tree takes minutes to write and commit).
CACHE_DIR = Path.home() / ".cache" / "codexr-bench-workspaces"
_COMPLETE = ".bench-complete"  # inside .git: written last, so a half-generated tree is never reused


def cached(spec: WorkspaceSpec, log: Callable[[str], None] = lambda s: None) -> Workspace:
    """The workspace for `spec`, generated once under CACHE_DIR and reused (benches put every file they rewrite back).

    Reuse checks that Git still sees the tree as committed (`git status` clean): a run that died between a rewrite and
    its restore leaves a modified file, and the tree is then regenerated from scratch.
    """
    if spec.churn:
        raise ValueError("cached workspaces are churn-free")
    root = CACHE_DIR / f"ws-{spec.files}-{spec.mb:g}mb-{spec.large_files}-{spec.seed}"
    marker = root / ".git" / _COMPLETE
    if marker.exists():
        status = git(["status", "--porcelain", "--untracked-files=all"], root).stdout
        if not status:
            log(f"reusing the cached workspace {root}")
            return _reload(root, spec)
        log(f"the cached workspace {root} was modified: regenerating it")
    if root.exists():
        import shutil

        shutil.rmtree(root)
    ws = generate(root, spec, log)
    marker.write_text("generated by bench/workspace_gen.py\n")
    return ws


def load(root: Path, spec: WorkspaceSpec) -> Workspace:
    """The Workspace of a tree another process generated (or took from the cache) with `spec`, without checking it."""
    return _reload(root, spec)


def _reload(root: Path, spec: WorkspaceSpec) -> Workspace:
    """A Workspace for a tree `generate` wrote earlier with the same spec (paths and sizes re-read, not re-written)."""
    tracked = [p for p in git(["ls-files", "-z"], root).stdout.decode().split("\0") if p]
    sizes = {p: os.lstat(root / p).st_size for p in tracked}
    # generate() marks as small text every small file except the trailing ~2% boilerplate; these rows only rewrite
    # and restore one file at a time, so any non-empty source file under the top directories will do.
    small_text = sorted(p for p in tracked if p.split("/", 1)[0] in _TOP_DIRS and 0 < sizes[p] < 256 * 1024)
    return Workspace(root=root, spec=spec, tracked=tracked, small_text=small_text, sizes=sizes,
                     tracked_bytes=sum(sizes.values()))
