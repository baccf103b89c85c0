#!/usr/bin/env python3
"""Benchmark snapshot_store against the internal-Git-repository approach and against I/O floors.

Run from the repository root:  .venv/bin/python bench/bench_store.py [--quick] [--json out.json]

The warm snapshot_store captures are measured twice: "session" rows use a store that called
``watch(ws)`` (inotify change journal, as the long-running session does) and "walk" rows use a second
store without it, so every capture walks the tree (a fresh process, or a system without inotify).

Everything runs in interleaved rounds: each round runs every measured operation once (the plain and the
churn workspace back to back, the order of the blocks rotated per round), and the report gives medians
over the rounds, min-max, and medians of per-round ratios against the baseline measured in that round.
See bench/README.md for what each row means. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import blake3
from workspace_gen import Workspace, WorkspaceSpec, generate, make_corpus

REPO_ROOT = Path(__file__).resolve().parent.parent
PRUNE_DIRS = frozenset({"node_modules", "build", ".git"})
GIT_ONLY = frozenset({".git"})
_T0 = time.perf_counter()


def log(msg: str) -> None:
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------- helpers


def dir_usage(root: Path) -> tuple[int, int]:
    """(sum of apparent file sizes, du-style allocated bytes of files and directories) under ``root``."""
    apparent = 0
    blocks = 0
    stack = [str(root)]
    while stack:
        d = stack.pop()
        try:
            blocks += os.lstat(d).st_blocks * 512
            it = os.scandir(d)
        except FileNotFoundError:
            continue
        with it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    stack.append(e.path)
                else:
                    st = e.stat(follow_symlinks=False)
                    apparent += st.st_size
                    blocks += st.st_blocks * 512
    return apparent, blocks


def walk_count(root: str, prune: frozenset[str]) -> int:
    """scandir walk that lstat()s every file (a residue walk needs mtimes), not descending into ``prune``."""
    count = 0
    stack = [root]
    while stack:
        d = stack.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    if e.name not in prune:
                        stack.append(e.path)
                else:
                    e.stat(follow_symlinks=False)
                    count += 1
    return count


def clean_env() -> dict[str, str]:
    env = dict(os.environ)
    for k in (
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_OBJECT_DIRECTORY",
        "GIT_CEILING_DIRECTORIES",
    ):
        env.pop(k, None)
    return env


ENV = clean_env()


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    proc = subprocess.run(cmd, cwd=cwd, env=env or ENV, capture_output=True)
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip()[-800:]
        raise RuntimeError(f"{' '.join(cmd[:6])} ... exited {proc.returncode}: {tail}")
    return proc


class GitShadow:
    """The internal-repository approach: a GIT_DIR outside the workspace, ``--work-tree`` on every call."""

    def __init__(self, git_dir: Path, work_tree: Path) -> None:
        self.git_dir = git_dir
        self.work_tree = work_tree

    def init(self) -> None:
        run(["git", "init", "-q", "--bare", str(self.git_dir)], self.work_tree)
        self.git("config", "core.bare", "false")
        self.git("config", "gc.auto", "0")
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        with open(info / "exclude", "a") as fh:
            fh.write(".git\n")

    def git(self, *args: str) -> bytes:
        cmd = ["git", f"--git-dir={self.git_dir}", f"--work-tree={self.work_tree}", *args]
        return run(cmd, self.work_tree).stdout

    def snapshot(self) -> str:
        self.git("add", "-A", ".")
        return self.git("write-tree").decode().strip()


class Modifier:
    """Rewrites tracked small text files with new content, walking a shuffled pool (new files each time)."""

    def __init__(self, ws: Workspace, seed: int) -> None:
        self.ws = ws
        self.corpus = make_corpus(seed)
        self.pool = sorted(ws.small_text)
        self.corpus.rng.shuffle(self.pool)
        self.cursor = 0
        self.revision = 0

    def take(self, n: int) -> list[str]:
        n = min(n, len(self.pool))
        out = [self.pool[(self.cursor + i) % len(self.pool)] for i in range(n)]
        self.cursor = (self.cursor + n) % len(self.pool)
        return out

    def rewrite(self, rels: list[str]) -> None:
        for rel in rels:
            self.revision += 1
            size = max(64, self.ws.sizes.get(rel, 1024))
            data = self.corpus.text(size, header=f"# {rel} revision {self.revision}\n")
            with open(self.ws.root / rel, "wb") as fh:
                fh.write(data)

    def read(self, rels: list[str]) -> dict[str, bytes]:
        return {rel: (self.ws.root / rel).read_bytes() for rel in rels}

    def check_restored(self, expected: dict[str, bytes]) -> int:
        """Number of files whose content does not match ``expected``."""
        bad = 0
        for rel, data in expected.items():
            try:
                if (self.ws.root / rel).read_bytes() != data:
                    bad += 1
            except OSError:
                bad += 1
        return bad


class StoreApi:
    """snapshot_store, imported lazily so the baselines still run when it is missing or broken."""

    def __init__(self) -> None:
        self.error: str | None = None
        self.store_cls: Any = None
        if str(REPO_ROOT) not in sys.path:
            sys.path.insert(0, str(REPO_ROOT))
        try:
            import snapshot_store

            self.store_cls = snapshot_store.Store
        except Exception as exc:  # any failure: report it and measure the baselines anyway
            self.error = f"{type(exc).__name__}: {exc}"

    @property
    def ok(self) -> bool:
        return self.store_cls is not None

    def open(self, path: Path) -> Any:
        return self.store_cls.open(path)


def probe_cli() -> str | None:
    """None if ``python -m app.cli snapshots capture --help`` works, else why not."""
    if not (REPO_ROOT / "app" / "cli.py").exists() and not (REPO_ROOT / "app" / "cli").is_dir():
        return "app/cli.py does not exist yet"
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "snapshots", "capture", "--help"],
        cwd=REPO_ROOT,
        env=ENV,
        capture_output=True,
    )
    if proc.returncode != 0:
        return f"exit {proc.returncode}: {proc.stderr.decode(errors='replace').strip()[-600:]}"
    return None


def cli_capture(home: Path, ws: Path) -> dict[str, Any]:
    env = dict(ENV)
    env["CODEX_HOME"] = str(home)
    cmd = [sys.executable, "-m", "app.cli", "snapshots", "capture", "-C", str(ws), "--json"]
    proc = run(cmd, REPO_ROOT, env)
    try:
        out = json.loads(proc.stdout.decode() or "{}")
    except ValueError:
        return {}
    return out if isinstance(out, dict) else {"output": out}


# ------------------------------------------------------------------------------------------ recording


@dataclass
class Variant:
    name: str
    ws: Workspace
    modifier: Modifier
    stores: Path
    rounds: int
    abs_tracked: list[str] = field(default_factory=list)
    store: Any = None
    store_last_id: Any = None
    watch_on: bool | None = None  # what store.capturer.watch(ws) returned for the session store (None: not called)
    walk_store: Any = None  # a second warm store, opened without watch(): every capture walks
    git_warm: GitShadow | None = None
    git_last_tree: str = ""
    cli_home: Path | None = None
    samples: dict[str, dict[int, float]] = field(default_factory=dict)
    info: dict[str, list[Any]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def record(self, op: str, rnd: int, value: float) -> None:
        self.samples.setdefault(op, {})[rnd] = value

    def note(self, op: str, value: Any) -> None:
        self.info.setdefault(op, []).append(value)

    def fail(self, op: str, exc: BaseException) -> None:
        if op not in self.errors:
            self.errors[op] = f"{type(exc).__name__}: {exc}"
            log(f"!! {self.name}: {op} failed: {self.errors[op]}")
            traceback.print_exc(file=sys.stderr)

    def attempt(self, op: str, fn: Callable[[], None]) -> bool:
        """Run ``fn`` unless ``op`` already failed; an exception disables ``op`` for the rest of the run."""
        if op in self.errors:
            return False
        try:
            fn()
            return True
        except Exception as exc:
            self.fail(op, exc)
            return False

    def fresh_dir(self, kind: str, rnd: int) -> Path:
        return self.stores / f"{kind}-r{rnd}"


def result_info(res: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for attr in ("file_count", "bytes_hashed", "bytes_stored", "seconds", "unchanged", "safety_id"):
        if hasattr(res, attr):
            out[attr] = getattr(res, attr)
    for attr in ("written", "deleted"):
        val = getattr(res, attr, None)
        if val is not None:
            out[attr] = len(val) if hasattr(val, "__len__") else val
    return out


# ------------------------------------------------------------------------------------------ operations


def ours_cold(v: Variant, rnd: int, api: StoreApi) -> None:
    if not api.ok:
        return

    def op() -> None:
        path = v.fresh_dir("ours-cold", rnd)
        t = time.perf_counter()
        store = api.open(path)
        try:
            res = store.at(v.ws.root).capture()
        finally:
            store.close()
        v.record("ours.cold", rnd, time.perf_counter() - t)
        v.note("ours.cold", result_info(res))
        if rnd == 0:
            v.note("ours.cold_store_usage", dir_usage(path))

    v.attempt("ours.cold", op)


def ours_warm(v: Variant, rnd: int, api: StoreApi) -> None:
    if not api.ok or v.store is None:
        return
    store = v.store
    root = v.ws.root
    if not ours_sync(v):
        return
    ours_unchanged(v, rnd)
    modified_captures(v, rnd, store, root, "ours", session=True)
    for n in (1, 100):
        ours_restore(v, rnd, n)


def modified_captures(v: Variant, rnd: int, store: Any, root: Path, prefix: str, *, session: bool) -> None:
    """`{prefix}.mod1` and `.mod100`: that many tracked files rewritten (untimed), then a capture (timed); a
    `session` store's capture is the one its restores go back from."""
    for n in (1, 100):
        op_name = f"{prefix}.mod{n}"

        def modified(n: int = n, op_name: str = op_name) -> None:
            v.modifier.rewrite(v.modifier.take(n))
            t = time.perf_counter()
            res = store.at(root).capture()
            v.record(op_name, rnd, time.perf_counter() - t)
            v.note(op_name, result_info(res))
            if session:
                v.store_last_id = res.id

        v.attempt(op_name, modified)


def settle_saves(v: Variant) -> None:
    """Run the index save the session store's last capture left to a thread (door._Behind), untimed: a session's next
    capture comes after it ran (it waits a second), a bench's would run it first."""
    settle = getattr(getattr(v.store.capturer, "detect", None), "settle", None)
    if settle is not None:
        settle()


def ours_sync(v: Variant) -> bool:
    """The session store's untimed capture that absorbs what changed since its last, its index save run (False once
    it failed)."""

    def sync() -> None:
        v.store_last_id = v.store.at(v.ws.root).capture().id
        settle_saves(v)

    return v.attempt("ours.sync", sync)


def ours_unchanged(v: Variant, rnd: int) -> None:
    """The session store's capture of a tree unchanged since its last (timed as ours.unchanged), and what it adds
    to the store."""

    def unchanged() -> None:
        before = dir_usage(store_dir(v))
        t = time.perf_counter()
        res = v.store.at(v.ws.root).capture()
        v.record("ours.unchanged", rnd, time.perf_counter() - t)
        after = dir_usage(store_dir(v))
        v.record("ours.growth_apparent", rnd, after[0] - before[0])
        v.record("ours.growth_blocks", rnd, after[1] - before[1])
        v.note("ours.unchanged", result_info(res))
        v.store_last_id = res.id
        check_unchanged(v, rnd, "ours.unchanged", res)

    v.attempt("ours.unchanged", unchanged)


def ours_restore(v: Variant, rnd: int, n: int) -> None:
    """In the session store: `n` tracked files rewritten, then restored to the last capture (timed as ours.restoreN:
    the safety capture, the plan and the writes)."""
    op_name = f"ours.restore{n}"

    def restore() -> None:
        target = v.store_last_id
        rels = v.modifier.take(n)
        expected = v.modifier.read(rels)
        v.modifier.rewrite(rels)
        settle_saves(v)  # the last restore's safety capture's
        t = time.perf_counter()
        rr = v.store.at(v.ws.root).restore(target)
        v.record(op_name, rnd, time.perf_counter() - t)
        v.note(op_name, result_info(rr))
        bad = v.modifier.check_restored(expected)
        if bad:
            v.problems.append(f"round {rnd}: {op_name} left {bad} of {n} modified files unrestored")

    v.attempt(op_name, restore)


def store_dir(v: Variant) -> Path:
    return v.stores / "ours-warm"


def walk_store_dir(v: Variant) -> Path:
    return v.stores / "ours-walk"


def check_unchanged(v: Variant, rnd: int, op: str, res: Any) -> None:
    """An "unchanged" capture that found changes means the sync capture before it missed something."""
    if getattr(res, "unchanged", True) is False:
        v.problems.append(
            f"round {rnd}: {op} was not unchanged (hashed {getattr(res, 'bytes_hashed', '?')} bytes):"
            " the sync capture before it missed a change"
        )


def captured_map(res: Any) -> dict[str, Any]:
    files = getattr(res, "files", None) or {}
    return {p: e for p, e in files.items() if e and e[0] in ("f", "l")}


def ours_walk(v: Variant, rnd: int, api: StoreApi) -> None:
    """The same warm captures with a store that never called watch(): every capture walks the tree."""
    if not api.ok or v.walk_store is None:
        return
    store = v.walk_store
    root = v.ws.root
    walked: dict[str, Any] = {}

    def sync() -> None:
        walked.update(captured_map(store.at(root).capture()))

    if not v.attempt("walk.sync", sync):
        return

    def cross_check() -> None:
        # Untimed: the session store (journal on) must see exactly what this full walk just saw.
        if v.store is None or not walked:
            return
        session = captured_map(v.store.at(root).capture())
        diff = sorted(p for p in walked.keys() | session.keys() if walked.get(p) != session.get(p))
        v.note("walk.cross_check", {"paths": len(walked), "differing": len(diff)})
        if diff:
            v.problems.append(
                f"round {rnd}: session capture (change journal) differs from a full walk in {len(diff)}"
                f" captured paths, e.g. {diff[:3]}"
            )

    v.attempt("walk.cross_check", cross_check)

    def unchanged() -> None:
        t = time.perf_counter()
        res = store.at(root).capture()
        v.record("walk.unchanged", rnd, time.perf_counter() - t)
        v.note("walk.unchanged", result_info(res))
        check_unchanged(v, rnd, "walk.unchanged", res)

    v.attempt("walk.unchanged", unchanged)
    modified_captures(v, rnd, store, root, "walk", session=False)


def git_cold(v: Variant, rnd: int) -> None:
    def op() -> None:
        shadow = GitShadow(v.fresh_dir("git-cold", rnd), v.ws.root)
        t = time.perf_counter()
        shadow.init()
        shadow.snapshot()
        v.record("git.cold", rnd, time.perf_counter() - t)
        if rnd == 0:
            v.note("git.cold_store_usage", dir_usage(shadow.git_dir))

    v.attempt("git.cold", op)


def git_warm(v: Variant, rnd: int) -> None:
    shadow = v.git_warm
    if shadow is None:
        return

    def sync() -> None:
        v.git_last_tree = shadow.snapshot()

    if not v.attempt("git.sync", sync):
        return

    def unchanged() -> None:
        before = dir_usage(shadow.git_dir)
        t = time.perf_counter()
        v.git_last_tree = shadow.snapshot()
        v.record("git.unchanged", rnd, time.perf_counter() - t)
        after = dir_usage(shadow.git_dir)
        v.record("git.growth_apparent", rnd, after[0] - before[0])
        v.record("git.growth_blocks", rnd, after[1] - before[1])

    v.attempt("git.unchanged", unchanged)

    for n in (1, 100):
        op_name = f"git.mod{n}"

        def modified(n: int = n, op_name: str = op_name) -> None:
            v.modifier.rewrite(v.modifier.take(n))
            t = time.perf_counter()
            v.git_last_tree = shadow.snapshot()
            v.record(op_name, rnd, time.perf_counter() - t)

        v.attempt(op_name, modified)

    for kind in GIT_RESTORES:
        for n in (1, 100):
            git_restore(v, rnd, kind, n)


#: Git's ways to restore a tree: `git.{kind}{n}` rows.
GIT_RESTORES: dict[str, list[str]] = {
    "checkout": ["checkout", "<tree>", "--", "."],
    "readtree": ["read-tree", "-u", "--reset", "<tree>"],
}


def git_restore(v: Variant, rnd: int, kind: str, n: int) -> None:
    """In the internal Git repository: its index refreshed (untimed), `n` tracked files rewritten, then Git's
    restore of the last snapshot's tree (timed as git.{kind}{n})."""
    shadow = v.git_warm
    if shadow is None:
        return
    op_name = f"git.{kind}{n}"

    def restore() -> None:
        tree = v.git_last_tree
        args = [tree if a == "<tree>" else a for a in GIT_RESTORES[kind]]
        rels = v.modifier.take(n)
        expected = v.modifier.read(rels)
        # Git's index refreshed first (untimed), as after a `git status` in a session: a stale index made
        # read-tree re-hash the tree, a baseline ~2x slower than Git is (issue 35)
        shadow.git("update-index", "-q", "--refresh")
        v.modifier.rewrite(rels)
        t = time.perf_counter()
        shadow.git(*args)
        v.record(op_name, rnd, time.perf_counter() - t)
        bad = v.modifier.check_restored(expected)
        if bad:
            v.problems.append(f"round {rnd}: {op_name} left {bad} of {n} modified files unrestored")

    v.attempt(op_name, restore)


def cli_cold(v: Variant, rnd: int, cli_ok: bool) -> None:
    if not cli_ok:
        return

    def op() -> None:
        home = v.fresh_dir("cli-cold", rnd)
        home.mkdir(parents=True)
        t = time.perf_counter()
        out = cli_capture(home, v.ws.root)
        v.record("cli.cold", rnd, time.perf_counter() - t)
        v.note("cli.cold", out)

    v.attempt("cli.cold", op)


def cli_warm(v: Variant, rnd: int) -> None:
    home = v.cli_home
    if home is None:
        return
    root = v.ws.root

    def sync() -> None:
        cli_capture(home, root)

    if not v.attempt("cli.sync", sync):
        return

    def unchanged() -> None:
        t = time.perf_counter()
        out = cli_capture(home, root)
        v.record("cli.unchanged", rnd, time.perf_counter() - t)
        v.note("cli.unchanged", out)

    v.attempt("cli.unchanged", unchanged)
    for n in (1, 100):
        op_name = f"cli.mod{n}"

        def modified(n: int = n, op_name: str = op_name) -> None:
            v.modifier.rewrite(v.modifier.take(n))
            t = time.perf_counter()
            out = cli_capture(home, root)
            v.record(op_name, rnd, time.perf_counter() - t)
            v.note(op_name, out)

        v.attempt(op_name, modified)


def floors(v: Variant, rnd: int) -> None:
    paths = v.abs_tracked
    root = str(v.ws.root)

    def lstat_all() -> None:
        t = time.perf_counter()
        for p in paths:
            os.lstat(p)
        v.record("floor.lstat", rnd, time.perf_counter() - t)

    def hash_all() -> None:
        t = time.perf_counter()
        for p in paths:
            with open(p, "rb") as fh:
                data = fh.read()
            blake3.blake3(data).digest()
        v.record("floor.blake3", rnd, time.perf_counter() - t)

    def ls_files() -> None:
        t = time.perf_counter()
        run(["git", "ls-files", "-z"], v.ws.root)
        v.record("floor.ls_files", rnd, time.perf_counter() - t)

    def walks() -> None:
        for op_name, prune in (("floor.walk_pruned", PRUNE_DIRS), ("floor.walk_unpruned", GIT_ONLY)):
            t = time.perf_counter()
            n = walk_count(root, prune)
            v.record(op_name, rnd, time.perf_counter() - t)
            if rnd == 0:
                v.note(op_name, n)

    v.attempt("floor.lstat", lstat_all)
    v.attempt("floor.blake3", hash_all)
    v.attempt("floor.ls_files", ls_files)
    v.attempt("floor.walk", walks)


def startup(samples: dict[str, dict[int, float]], rnd: int, api_ok: bool) -> None:
    cmds: list[tuple[str, list[str]]] = [
        ("startup.pass", [sys.executable, "-c", "pass"]),
        ("startup.blake3", [sys.executable, "-c", "import blake3"]),
    ]
    if api_ok:
        cmds.append(("startup.snapshot_store", [sys.executable, "-c", "import snapshot_store"]))
    for name, cmd in cmds:
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=ENV, capture_output=True)
        if proc.returncode == 0:
            samples.setdefault(name, {})[rnd] = time.perf_counter() - t


# ----------------------------------------------------------------------------------------------- setup


def setup_variant(v: Variant, api: StoreApi, cli_ok: bool) -> None:
    v.abs_tracked = [os.path.join(v.ws.root, rel) for rel in v.ws.tracked]
    v.stores.mkdir(parents=True, exist_ok=True)
    shadow = GitShadow(v.stores / "git-warm", v.ws.root)
    try:
        shadow.init()
        v.git_last_tree = shadow.snapshot()
        v.git_warm = shadow
    except Exception as exc:
        v.fail("git.setup", exc)
    if api.ok:
        try:
            v.store = api.open(store_dir(v))
            # As the session does: watch right after opening, before the first capture.
            v.watch_on = bool(v.store.capturer.watch(v.ws.root))
            v.note("ours.watch", v.watch_on)
            log(f"{v.name}: session store watch() returned {v.watch_on}")
            v.store_last_id = v.store.at(v.ws.root).capture().id
        except Exception as exc:
            v.fail("ours.setup", exc)
            if v.store is not None:
                with contextlib.suppress(Exception):
                    v.store.close()
            v.store = None
        try:
            v.walk_store = api.open(walk_store_dir(v))  # no watch(): every capture walks
            v.walk_store.at(v.ws.root).capture()
        except Exception as exc:
            v.fail("walk.setup", exc)
            if v.walk_store is not None:
                with contextlib.suppress(Exception):
                    v.walk_store.close()
            v.walk_store = None
    if cli_ok:
        home = v.stores / "cli-warm"
        home.mkdir(parents=True, exist_ok=True)
        try:
            cli_capture(home, v.ws.root)
            v.cli_home = home
        except Exception as exc:
            v.fail("cli.setup", exc)


# --------------------------------------------------------------------------------------------- report


def summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def ratio(a: dict[int, float] | None, b: dict[int, float] | None) -> dict[str, Any] | None:
    """Median (and range) of per-round ratios a/b over rounds where both were measured."""
    if not a or not b:
        return None
    per = {r: a[r] / b[r] for r in a if r in b and b[r] > 0}
    s = summary(list(per.values()))
    if s is None:
        return None
    return {**s, "per_round": per}


# (row label, op key, unit, [(ratio name, numerator op, denominator variant or None, denominator op)])
Row = tuple[str, str, str, list[tuple[str, str | None, str]]]

SESSION_TITLE = "{session}"  # replaced per variant: says whether watch() turned the change journal on
WALK_TITLE = "snapshot_store, in-process, no change journal (every capture walks)"

SECTIONS: list[tuple[str, list[Row]]] = [
    (
        SESSION_TITLE,
        [
            ("cold capture (fresh store)", "ours.cold", "ms", [("git cold", None, "git.cold")]),
            ("capture unchanged", "ours.unchanged", "ms", [("git", None, "git.unchanged")]),
            ("capture, 1 file modified", "ours.mod1", "ms", [("git", None, "git.mod1")]),
            ("capture, 100 files modified", "ours.mod100", "ms", [("git", None, "git.mod100")]),
            (
                "restore 1 file",
                "ours.restore1",
                "ms",
                [("read-tree", None, "git.readtree1"), ("checkout", None, "git.checkout1")],
            ),
            (
                "restore 100 files",
                "ours.restore100",
                "ms",
                [("read-tree", None, "git.readtree100"), ("checkout", None, "git.checkout100")],
            ),
            ("growth/unchanged capture, apparent", "ours.growth_apparent", "B", []),
            ("growth/unchanged capture, allocated", "ours.growth_blocks", "B", []),
        ],
    ),
    (
        WALK_TITLE,
        [
            ("capture unchanged", "walk.unchanged", "ms", [("git", None, "git.unchanged")]),
            ("capture, 1 file modified", "walk.mod1", "ms", [("git", None, "git.mod1")]),
            ("capture, 100 files modified", "walk.mod100", "ms", [("git", None, "git.mod100")]),
        ],
    ),
    (
        "snapshot_store CLI, whole command (includes Python start-up)",
        [
            ("cold capture (fresh CODEX_HOME)", "cli.cold", "ms", [("git cold", None, "git.cold")]),
            ("capture unchanged", "cli.unchanged", "ms", [("git", None, "git.unchanged")]),
            ("capture, 1 file modified", "cli.mod1", "ms", [("git", None, "git.mod1")]),
            ("capture, 100 files modified", "cli.mod100", "ms", [("git", None, "git.mod100")]),
        ],
    ),
    (
        "internal git repository (separate GIT_DIR, --work-tree)",
        [
            ("cold: init + add -A + write-tree", "git.cold", "ms", []),
            ("unchanged: add -A + write-tree", "git.unchanged", "ms", []),
            ("1 file modified", "git.mod1", "ms", []),
            ("100 files modified", "git.mod100", "ms", []),
            ("restore 1: checkout <tree> -- .", "git.checkout1", "ms", []),
            ("restore 100: checkout <tree> -- .", "git.checkout100", "ms", []),
            ("restore 1: read-tree -u --reset", "git.readtree1", "ms", []),
            ("restore 100: read-tree -u --reset", "git.readtree100", "ms", []),
            ("growth/unchanged snapshot, apparent", "git.growth_apparent", "B", []),
            ("growth/unchanged snapshot, allocated", "git.growth_blocks", "B", []),
        ],
    ),
    (
        "floors (in-process, single thread)",
        [
            ("lstat every tracked file", "floor.lstat", "ms", []),
            ("read + blake3 every tracked file", "floor.blake3", "ms", []),
            ("git ls-files -z (subprocess)", "floor.ls_files", "ms", []),
            ("scandir walk, pruning churn dirs", "floor.walk_pruned", "ms", []),
            ("scandir walk, not pruning", "floor.walk_unpruned", "ms", []),
        ],
    ),
]

CHURN_COMPARE = (
    "ours.cold",
    "ours.unchanged",
    "ours.mod1",
    "ours.mod100",
    "ours.restore1",
    "ours.restore100",
    "walk.unchanged",
    "walk.mod1",
    "walk.mod100",
)

# Rows without targets: reported as ratios only.
INFORMATIONAL = (
    ("capture unchanged / git, no change journal", "walk.unchanged/git.unchanged"),
    ("capture 1 modified / git, no change journal", "walk.mod1/git.mod1"),
    ("capture 100 modified / git, no change journal", "walk.mod100/git.mod100"),
)


def session_title(watch_on: bool | None) -> str:
    if watch_on:
        state = "change journal on"
    elif watch_on is None:
        state = "change journal not set up"
    else:
        state = "change journal OFF: watch() returned False, captures walk"
    return f"snapshot_store, in-process, {state} (session: Store kept open, watch() before the first capture)"


def fmt_value(x: float, unit: str) -> str:
    if unit == "ms":
        ms = x * 1000
        return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}"
    return f"{x:.0f}"


def build_report(variants: dict[str, Variant]) -> dict[str, Any]:
    """All numbers: per-variant op summaries and ratios (JSON-ready)."""
    out: dict[str, Any] = {}
    for name, v in variants.items():
        ops = {}
        for op, per in v.samples.items():
            s = summary(list(per.values()))
            ops[op] = {**(s or {}), "samples": [per.get(r) for r in range(v.rounds)]}
        ratios: dict[str, Any] = {}
        for _title, rows in SECTIONS:
            for _label, op, _unit, cmps in rows:
                for _rname, other_variant, base in cmps:
                    other = variants.get(other_variant) if other_variant else v
                    rv = ratio(v.samples.get(op), other.samples.get(base) if other else None)
                    if rv is not None:
                        ratios[f"{op}/{base}"] = rv
        if name == "churn" and "plain" in variants:
            plain = variants["plain"]
            for op in (*CHURN_COMPARE, "git.cold", "git.unchanged", "git.mod1", "git.mod100"):
                rv = ratio(v.samples.get(op), plain.samples.get(op))
                if rv is not None:
                    ratios[f"{op}/plain"] = rv
        out[name] = {
            "change_journal": v.watch_on,
            "workspace": {
                "root": str(v.ws.root),
                "tracked_files": len(v.ws.tracked),
                "tracked_bytes": v.ws.tracked_bytes,
                "churn_files": v.ws.churn_files,
                "churn_bytes": v.ws.churn_bytes,
                "generation_seconds": v.ws.gen_seconds,
            },
            "ops": ops,
            "ratios": ratios,
            "info": v.info,
            "errors": v.errors,
            "problems": v.problems,
        }
    return out


def print_variant(v: Variant, rep: dict[str, Any]) -> None:
    ws = rep["workspace"]
    head = f"== {v.name}: {ws['tracked_files']} tracked files, {ws['tracked_bytes'] / 1e6:.1f} MB"
    if ws["churn_files"]:
        head += f"; ignored churn: {ws['churn_files']} files, {ws['churn_bytes'] / 1e6:.0f} MB"
    print(f"{head}; {v.rounds} rounds ==")
    print(f"  {'operation':<40} {'median':>9} {'min-max':>17}  ratio (median of per-round ratios)")
    for title, rows in SECTIONS:
        print(f" {session_title(v.watch_on) if title == SESSION_TITLE else title}")
        for label, op, unit, cmps in rows:
            s = rep["ops"].get(op)
            if not s or "median" not in s:
                why = v.errors.get(op) or v.errors.get(op.split(".")[0] + ".setup") or "not measured"
                print(f"  {label:<40} {'-':>9} {'':>17}  ({why[:70]})")
                continue
            med = fmt_value(s["median"], unit) + (" ms" if unit == "ms" else " B")
            rng = f"{fmt_value(s['min'], unit)}-{fmt_value(s['max'], unit)}"
            parts = []
            for rname, _ov, base in cmps:
                r = rep["ratios"].get(f"{op}/{base}")
                if r:
                    parts.append(f"{r['median']:.2f}x {rname}")
            r = rep["ratios"].get(f"{op}/plain")
            if r:
                parts.append(f"{r['median']:.2f}x plain")
            print(f"  {label:<40} {med:>9} {rng:>17}  {'; '.join(parts)}")
    usage_o = v.info.get("ours.cold_store_usage")
    usage_g = v.info.get("git.cold_store_usage")
    if usage_o or usage_g:
        parts = []
        if usage_o:
            parts.append(
                f"snapshot_store {usage_o[0][0] / 1e6:.1f} MB ({usage_o[0][1] / 1e6:.1f} MB allocated)"
            )
        if usage_g:
            parts.append(f"git {usage_g[0][0] / 1e6:.1f} MB ({usage_g[0][1] / 1e6:.1f} MB allocated)")
        print(f"  store size after one cold capture: {'; '.join(parts)}")
    for op in ("ours.cold", "ours.unchanged", "ours.mod1", "ours.mod100", "walk.unchanged", "walk.mod1", "walk.mod100"):
        infos = v.info.get(op)
        if infos:
            hashed = [i.get("bytes_hashed") for i in infos if isinstance(i.get("bytes_hashed"), int)]
            counts = [i.get("file_count") for i in infos if isinstance(i.get("file_count"), int)]
            if hashed or counts:
                print(
                    f"  {op}: file_count {counts[-1] if counts else '?'},"
                    f" bytes_hashed median {statistics.median(hashed) if hashed else '?'}"
                )
    pruned, unpruned = v.info.get("floor.walk_pruned"), v.info.get("floor.walk_unpruned")
    if pruned and unpruned:
        print(f"  files visited by the walk: pruned {pruned[0]}, unpruned {unpruned[0]}")
    for op, msg in v.errors.items():
        print(f"  ERROR {op}: {msg[:300]}")
    for p in v.problems[:10]:
        print(f"  PROBLEM {p}")
    print()


def targets(report: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, unit: str) -> None:
        result = "n/a" if value is None else ("PASS" if value <= limit else "MISS")
        out.append({"target": name, "value": value, "limit": limit, "unit": unit, "result": result})

    for vname, rep in report.items():
        ratios = rep["ratios"]

        def med(key: str, ratios: dict[str, Any] = ratios) -> float | None:
            r = ratios.get(key)
            return None if r is None else float(r["median"])

        add(f"{vname}: cold capture / git cold", med("ours.cold/git.cold"), 0.3, "x")
        add(f"{vname}: capture unchanged / git", med("ours.unchanged/git.unchanged"), 1.0, "x")
        add(f"{vname}: capture 100 modified / git", med("ours.mod100/git.mod100"), 1.0, "x")
        add(f"{vname}: restore 1 / git read-tree -u --reset", med("ours.restore1/git.readtree1"), 1.0, "x")
        add(
            f"{vname}: restore 100 / git read-tree -u --reset",
            med("ours.restore100/git.readtree100"),
            1.0,
            "x",
        )
        g = rep["ops"].get("ours.growth_apparent", {}).get("median")
        add(f"{vname}: store growth per unchanged capture", g, 4096, "B")
        if vname == "churn":
            for op in ("ours.cold", "ours.unchanged", "ours.mod1", "ours.mod100"):
                add(f"churn: {op.split('.')[1]} capture / plain", med(f"{op}/plain"), 1.2, "x")
    return out


def informational(report: dict[str, Any]) -> list[dict[str, Any]]:
    """Ratios reported without a target (the no-change-journal rows)."""
    out: list[dict[str, Any]] = []
    for vname, rep in report.items():
        for label, key in INFORMATIONAL:
            r = rep["ratios"].get(key)
            out.append({"row": f"{vname}: {label}", "value": None if r is None else float(r["median"]), "unit": "x"})
        if vname == "churn":
            for op in ("walk.unchanged", "walk.mod1", "walk.mod100"):
                r = rep["ratios"].get(f"{op}/plain")
                out.append(
                    {
                        "row": f"churn: {op.split('.')[1]} capture / plain, no change journal",
                        "value": None if r is None else float(r["median"]),
                        "unit": "x",
                    }
                )
    return out


def print_informational(rows: list[dict[str, Any]]) -> None:
    print("== informational (no targets): captures without the change journal ==")
    for t in rows:
        val = "-" if t["value"] is None else f"{t['value']:.2f}x"
        print(f"  {t['row']:<52} {val:>10}  (info)")
    print()


def print_targets(rows: list[dict[str, Any]]) -> None:
    print("== targets (session rows: change journal on) ==")
    for t in rows:
        if t["value"] is None:
            val = "-"
        elif t["unit"] == "x":
            val = f"{t['value']:.2f}x"
        else:
            val = f"{t['value']:.0f} B"
        lim = f"<= {t['limit']:.1f}x" if t["unit"] == "x" else f"<= {t['limit']:.0f} B"
        print(f"  {t['target']:<52} {val:>10} {lim:>11}  {t['result']}")
    print()


# ----------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    import scale  # here: scale.py imports this module

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny workspaces (800 files / 5 MB) for a smoke test")
    p.add_argument("--files", type=int, help="tracked files (default 11000; quick 800)")
    p.add_argument("--mb", type=float, help="tracked MB (default 75; quick 5)")
    p.add_argument("--churn-files", type=int, help="ignored node_modules files (default 60000; quick 3000)")
    p.add_argument("--churn-build-mib", type=int, help="size of each of 4 ignored build/ files (default 64)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--variants", default="plain,churn", help="comma list of plain,churn (default both)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--dir", type=Path, help="parent directory for the run's fresh temp dir (default /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (workspaces and stores)")
    p.add_argument("--no-cli", action="store_true", help="skip the whole-command CLI timings")
    p.add_argument("--json", type=Path, help="write all numbers as JSON to this file")
    p.add_argument("--scale", action="store_true",
                   help="only the 100,000-file rows (scale.py: one-shot and pre-turn capture, one-file restore)")
    scale.add_args(p)
    a = p.parse_args(argv)
    a.files = a.files if a.files is not None else (800 if a.quick else 11000)
    a.mb = a.mb if a.mb is not None else (5.0 if a.quick else 75.0)
    a.churn_files = a.churn_files if a.churn_files is not None else (3000 if a.quick else 60000)
    a.churn_build_mib = a.churn_build_mib if a.churn_build_mib is not None else (2 if a.quick else 64)
    if a.rounds < 5:
        print(f"warning: {a.rounds} rounds; the targets assume medians over >= 5", file=sys.stderr)
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.scale:
        import scale

        return scale.run_rows(args)
    names = [n.strip() for n in args.variants.split(",") if n.strip()]
    if not names or any(n not in ("plain", "churn") for n in names):
        print("--variants takes plain, churn or both", file=sys.stderr)
        return 2
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    log(f"run directory {base}")
    variants: dict[str, Variant] = {}
    api = StoreApi()
    try:
        if api.error:
            log(f"snapshot_store unavailable, measuring baselines only: {api.error}")
        cli_error = "skipped (--no-cli)" if args.no_cli else probe_cli()
        if cli_error:
            log(f"CLI timings skipped: {cli_error}")
        cli_ok = cli_error is None

        for i, name in enumerate(names):
            spec = WorkspaceSpec(
                files=args.files,
                mb=args.mb,
                churn=name == "churn",
                churn_files=args.churn_files,
                churn_build_mib=args.churn_build_mib,
                seed=args.seed,
            )
            log(f"generating {name} workspace ({spec.files} files, {spec.mb:g} MB)")
            ws = generate(base / f"ws-{name}", spec, log)
            v = Variant(
                name=name,
                ws=ws,
                modifier=Modifier(ws, args.seed + 1000 + i),
                stores=base / f"stores-{name}",
                rounds=args.rounds,
            )
            log(f"setting up warm stores for {name}")
            setup_variant(v, api, cli_ok)
            variants[name] = v

        startup_samples: dict[str, dict[int, float]] = {}
        blocks: list[tuple[str, Callable[[Variant, int], None]]] = [
            ("snapshot_store cold", lambda v, r: ours_cold(v, r, api)),
            ("git cold", git_cold),
            ("snapshot_store warm", lambda v, r: ours_warm(v, r, api)),
            ("snapshot_store walk", lambda v, r: ours_walk(v, r, api)),
            ("git warm", git_warm),
            ("CLI cold", lambda v, r: cli_cold(v, r, cli_ok)),
            ("CLI warm", cli_warm),
            ("floors", floors),
        ]
        for rnd in range(args.rounds):
            shift = rnd % len(blocks)
            order = blocks[shift:] + blocks[:shift]
            vorder = list(variants.values())
            if rnd % 2:
                vorder.reverse()
            startup(startup_samples, rnd, api.ok)
            for label, fn in order:
                for v in vorder:
                    log(f"round {rnd + 1}/{args.rounds} {v.name}: {label}")
                    fn(v, rnd)

        report = build_report(variants)
        target_rows = targets(report)
        info_rows = informational(report)
        print()
        print(
            f"bench_store: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
            f" {subprocess.run(['git', '--version'], capture_output=True, text=True).stdout.strip()},"
            f" loadavg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
        )
        if api.error:
            print(f"snapshot_store NOT measured: {api.error}")
        else:
            journal = ", ".join(f"{n}: {v.watch_on}" for n, v in variants.items())
            print(f"session store watch() returned: {journal}")
        if cli_error:
            print(f"CLI NOT measured: {cli_error}")
        print()
        for name, v in variants.items():
            print_variant(v, report[name])
        st = {k: summary(list(s.values())) for k, s in startup_samples.items()}
        print("== Python start-up (subprocess, for reference) ==")
        for k, s in st.items():
            if s:
                print(
                    f"  {k:<40} {s['median'] * 1000:>7.1f} ms {s['min'] * 1000:>7.1f}-{s['max'] * 1000:.1f}"
                )
        print()
        print_targets(target_rows)
        print_informational(info_rows)
        if args.json:
            payload = {
                "meta": {
                    "argv": sys.argv,
                    "platform": platform.platform(),
                    "cpus": os.cpu_count(),
                    "python": platform.python_version(),
                    "rounds": args.rounds,
                    "files": args.files,
                    "mb": args.mb,
                    "churn_files": args.churn_files,
                    "churn_build_mib": args.churn_build_mib,
                    "store_error": api.error,
                    "cli_error": cli_error,
                    "change_journal": {n: v.watch_on for n, v in variants.items()},
                    "loadavg_end": os.getloadavg(),
                },
                "variants": report,
                "startup": st,
                "targets": target_rows,
                "informational": info_rows,
            }
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
            log(f"wrote {args.json}")
        return 0
    finally:
        for v in variants.values():
            for st in (v.store, v.walk_store):
                if st is not None:
                    try:
                        st.close()
                    except Exception as exc:
                        log(f"closing store failed: {exc}")
        if args.keep:
            log(f"kept {base}")
        else:
            log(f"removing {base}")
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
