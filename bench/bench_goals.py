#!/usr/bin/env python3
"""Issue 35's rows in one run, each against its baseline in the same rounds, with the issue's goal and PASS/MISS.

Run from a checkout outside /tmp (the resident server refuses runtime directories below /tmp; from one below it,
the (e) rows' directory goes in ~/.cache):
    .venv/bin/python bench/bench_goals.py [--quick] [--rounds N] [--only ROWS] [--json FILE]

Rows (the --only names in brackets), every one timed in interleaved rounds (block order rotated each round):

(a) [exec] `codexr exec PROMPT` through the resident server, a trivial turn (one scripted `message`), vs the pinned
    `codex exec PROMPT` in the same tree, at 1,000 / 10,000 files (generated for the run) and 100,000 files (the
    cached generated tree). In the 100,000-file tree the other rows write, so an untimed `codexr exec` comes first
    in its block: the timed turn is one on a tree unchanged since the last turn (bench_startup.py's blocks). Two
    rows without a goal follow there: the same turn on a new thread after a file was made by hand, and after
    another thread's (untimed) turn wrote a file, each file removed after its turn.
(b) [rewind] an untimed turn adds one file to the 100,000-file tree, then `codexr rewind --to 1 --yes` (timed:
    safety capture, plan, the conversation's fork, the removal) through the server, vs Git's one-file
    `read-tree -u --reset` (below).
(c) [restore] one tracked file rewritten, then `codexr snapshots restore ID --yes` in the 100,000-file tree,
    through the server and with CODEXR_SERVER=0, vs Git's one-file `read-tree -u --reset`.
    The Git baseline of (b) and (c): an internal repository (GIT_DIR apart, bench_store.GitShadow) whose index is
    refreshed (`git update-index -q --refresh`, untimed) before the file is rewritten, so read-tree re-hashes
    nothing but that file: a stale index (the other rows rewrite files) made Git slower than it is.
(d) [session-restore] in a session (a store kept open, watch() on, bench_store.py's in-process rows) in an
    11,000-file / 75 MB tree: 100 (and 1) tracked files rewritten, then restored (safety capture included) vs
    `git read-tree -u --reset` in an internal repository, its index refreshed the same way before each. Beside
    them, the floor any restore of those 100 files has with today's durability: their content written to temps,
    fsynced together by 8 threads, renamed, each directory fsynced, and nothing else (no safety capture, no plan);
    and that floor after the least safety copy any store could take first: the 100 files' old content read, hashed
    (blake3) and written into one file, which is fsynced, then a small journal file fsynced and their directory.
(e) [noxdg] `codexr threads` and an unchanged `snapshots capture` (a 200-file workspace) without XDG_RUNTIME_DIR:
    the cache-directory fallback's server and one-shot (CODEXR_SERVER=0), vs the server in $XDG_RUNTIME_DIR
    (bench_noxdg.py's ways). Beside them, the one-shot's floors: a fresh Python that exits, and one that imports
    the store library and exits as a one-shot command does (os._exit, no interpreter teardown).
(f) [cold-rss] the cold first `codexr snapshots capture` of the 100,000-file tree (a fresh CODEX_HOME, server off,
    its automatic gc as a new store runs it): peak RSS, vs Git's `add -A` + `write-tree` into a fresh internal
    repository (the larger of its two processes). Both spawned by a small runner process, so the bench's own
    memory does not count (a child's ru_maxrss starts at its parent's, inherited through fork/exec). Only the
    first --cold-rounds rounds (each takes a minute or two).
(g) [session-capture] in a session on the 100,000-file tree (store open, watch() on): an unchanged turn's capture
    (`capture_thread_summary`, what the Recorder calls each turn) and bench_store.py's `capture()`, each after an
    untimed capture that absorbs the other rows' writes; Git's unchanged `add -A` + `write-tree` beside it. Beside
    them (no goal), a turn's capture after one tracked file was rewritten 1.3 s before (longer than a session's index
    save waits, door.BEHIND_DELAY), the file put back afterwards.

The in-session rows run in a helper process (`bench_goals.py session-helper`), so the bench process stays small.
Reports medians, min-max, medians (min-max) of per-round ratios against the baseline of the same round, each row's
goal from issue 35 and PASS/MISS, and the load average during the run. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import blake3

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(REPO_ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import bench_noxdg  # noqa: E402
import bench_startup  # noqa: E402
import bench_store  # noqa: E402
from bench_store import GitShadow, log, ratio, summary  # noqa: E402
from workspace_gen import Workspace, WorkspaceSpec, cached, generate, load  # noqa: E402

ROW_NAMES = ("exec", "rewind", "restore", "session-restore", "noxdg", "cold-rss", "session-capture")
SEED = 20240601  # the cached 100,000-file tree's (workspace_gen.cached)
MB_PER_FILE = 0.007  # 100,000 files / 700 MB, as the cached tree


@dataclass(frozen=True)
class Goal:
    """One row of the issue's table: `op` against `base` (a ratio of the same round) or alone (an absolute value)."""

    key: str
    label: str
    op: str
    base: str | None
    base_label: str
    limit: float
    unit: str  # "x": the median of per-round ratios op/base; "ms": op's median; "MB": op's median peak RSS
    rows: str  # the --only name that measures it


@dataclass
class Sizes:
    exec_files: tuple[int, int]  # the two exec trees generated for the run (the third is the big tree)
    big_files: int
    big_mb: float
    session_files: int  # (d)'s tree
    session_mb: float
    cached_big: bool  # the big tree from workspace_gen.cached (generated once, kept) or generated for the run


def sizes_for(quick: bool) -> Sizes:
    if quick:
        return Sizes((300, 1000), 3000, 21.0, 800, 5.0, False)
    return Sizes((1000, 10000), 100_000, 700.0, 11000, 75.0, True)


def fmt_files(n: int) -> str:
    return f"{n:,}"


def goals(sz: Sizes) -> list[Goal]:
    small, mid = sz.exec_files
    big = fmt_files(sz.big_files)
    return [
        Goal("a1", f"(a) codexr exec, {fmt_files(small)} files, server", f"codexr.exec_{small}", f"codex.exec_{small}",
             "codex exec", 1.2, "x", "exec"),
        Goal("a2", f"(a) codexr exec, {fmt_files(mid)} files, server", f"codexr.exec_{mid}", f"codex.exec_{mid}",
             "codex exec", 1.2, "x", "exec"),
        Goal("a3", f"(a) codexr exec, {big} files, server", f"codexr.exec_{sz.big_files}",
             f"codex.exec_{sz.big_files}", "codex exec", 1.2, "x", "exec"),
        Goal("b", f"(b) rewind 1 file + fork, {big} files, server", "codexr.rewind1", "git.restore1",
             "git read-tree, 1 file", 1.5, "x", "rewind"),
        Goal("c1", f"(c) snapshots restore 1 file, {big} files, server", "codexr.restore1", "git.restore1",
             "git read-tree, 1 file", 1.5, "x", "restore"),
        Goal("c2", f"(c) snapshots restore 1 file, {big} files, no server", "cold.restore1", "git.restore1",
             "git read-tree, 1 file", 2.0, "x", "restore"),
        Goal("d", f"(d) session restore 100 files, {fmt_files(sz.session_files)}-file tree", "sr.ours.restore100",
             "sr.git.readtree100", "git read-tree, 100", 0.5, "x", "session-restore"),
        Goal("e1", "(e) threads, no XDG: cache-dir server", "nx.threads.cache fallback", "nx.threads.xdg",
             "threads, XDG server", 1.5, "x", "noxdg"),
        Goal("e2", "(e) threads, no XDG: one-shot", "nx.threads.one-shot", "nx.threads.xdg",
             "threads, XDG server", 1.5, "x", "noxdg"),
        Goal("e3", "(e) capture unchanged, no XDG: cache-dir server", "nx.unchanged capture.cache fallback",
             "nx.unchanged capture.xdg", "capture, XDG server", 1.5, "x", "noxdg"),
        Goal("e4", "(e) capture unchanged, no XDG: one-shot", "nx.unchanged capture.one-shot",
             "nx.unchanged capture.xdg", "capture, XDG server", 1.5, "x", "noxdg"),
        Goal("f", f"(f) cold capture {big} files: peak RSS", "cold.capture", "git.cold", "git add+write-tree", 150.0,
             "MB", "cold-rss"),
        Goal("g1", f"(g) session turn capture unchanged, {big} files", "sc.ours.turn_unchanged", "git.unchanged",
             "git add+write-tree", 15.0, "ms", "session-capture"),
        Goal("g2", f"(g) session capture() unchanged, {big} files", "sc.ours.unchanged", "git.unchanged",
             "git add+write-tree", 15.0, "ms", "session-capture"),
    ]


# Rows printed without a goal: what the goal rows stand beside.
INFO_ROWS: list[tuple[str, str, str | None, str]] = [
    ("(d) session restore 1 file", "sr.ours.restore1", "sr.git.readtree1", "session-restore"),
    ("(d) floor: 100 files written durably", "sr.floor.restore100", "sr.git.readtree100",
     "session-restore"),
    ("(d) floor after the least safety copy", "sr.floor.safety_restore100", "sr.git.readtree100",
     "session-restore"),
    ("(e) floor: Python starts and exits", "nx.python start.one-shot", "nx.unchanged capture.xdg", "noxdg"),
    ("(e) floor: Python imports the store", "nx.store import.one-shot",
     "nx.unchanged capture.xdg", "noxdg"),
    ("(f) cold capture: time", "cold.capture", "git.cold", "cold-rss"),
    ("(g) session turn capture, 1 file changed", "sc.ours.turn_changed", "git.unchanged", "session-capture"),
]

# (e)'s one-shot floors, each a `python -c` in the one-shot way's environment: Python's start, and Python's start
# with the import of the store library a capture runs on (nothing of the app: no argument parser, no settings),
# ending as a one-shot command ends since 2026-12-05 (app/server/finish.py: no interpreter teardown, ~7 ms of it).
NOXDG_FLOORS = {"python start": "pass", "store import": "import os, snapshot_store.store; os._exit(0)"}

# ------------------------------------------------------------------------------------ a clean peak RSS

RUNNER = r"""
import json, os, subprocess, sys, time
cmd, cwd, out, err = json.loads(sys.argv[1])
with open(out, "wb") as o, open(err, "wb") as e:
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=o, stderr=e)
    _pid, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
print(json.dumps([wall, os.waitstatus_to_exitcode(status), ru.ru_maxrss]))
"""


def clean_spawn(cmd: list[str], *, cwd: Path, env: dict[str, str], scratch: Path) -> tuple[float, int, int, str]:
    """(wall seconds, exit code, peak RSS in KB, stdout) of `cmd`, started by a small runner (`python -S`) rather
    than by this process: Linux starts a child's ru_maxrss at its parent's peak (the old mm's high-water mark is
    kept across exec), so a command spawned by a bench holding a 100,000-path workspace reports at least that."""
    out, err = scratch / "runner.out", scratch / "runner.err"
    res = subprocess.run([sys.executable, "-S", "-c", RUNNER, json.dumps([cmd, str(cwd), str(out), str(err)])],
                         env=env, capture_output=True, text=True, timeout=3600, check=False)
    if res.returncode != 0:
        raise RuntimeError(f"runner failed: {res.stderr[-800:]}")
    wall, rc, rss = json.loads(res.stdout)
    text = out.read_text(errors="replace")
    if rc != 0:
        text = err.read_text(errors="replace")[-800:]
    return float(wall), int(rc), int(rss), text


# ------------------------------------------------------------------------------ the session helper


class SessionHelper:
    """The in-session rows' process: bench_store Variants (a store kept open and watched, as a session keeps its
    own), driven over JSON lines on stdin/stdout."""

    def __init__(self) -> None:
        self.api = bench_store.StoreApi()
        self.variants: dict[str, bench_store.Variant] = {}

    def open(self, req: dict[str, Any]) -> dict[str, Any]:
        spec = WorkspaceSpec(files=req["files"], mb=req["mb"], seed=req.get("seed", SEED))
        if req.get("generate"):
            log(f"session helper: generating a {spec.files}-file / {spec.mb:g} MB tree ...")
            ws = generate(Path(req["root"]), spec, log)
        else:
            ws = load(Path(req["root"]), spec)
        v = bench_store.Variant(name=req["name"], ws=ws, modifier=bench_store.Modifier(ws, SEED + 1000),
                                stores=Path(req["stores"]), rounds=req["rounds"])
        v.stores.mkdir(parents=True, exist_ok=True)
        if req.get("git"):
            shadow = GitShadow(v.stores / "git-warm", ws.root)
            shadow.init()
            v.git_last_tree = shadow.snapshot()
            v.git_warm = shadow
        if not self.api.ok:
            raise RuntimeError(f"snapshot_store unavailable: {self.api.error}")
        t0 = time.perf_counter()
        v.store = self.api.open(bench_store.store_dir(v))
        v.watch_on = bool(v.store.capturer.watch(ws.root))  # as the session does: before the first capture
        v.store_last_id = v.store.at(ws.root).capture().id
        self.variants[v.name] = v
        return {"watch": v.watch_on, "cold_seconds": time.perf_counter() - t0}

    def block(self, req: dict[str, Any]) -> dict[str, Any]:
        v = self.variants[req["name"]]
        rnd = int(req["rnd"])
        problems = len(v.problems)
        kind = req["block"]
        if kind == "ours-restore":
            if bench_store.ours_sync(v):
                for n in (1, 100):
                    bench_store.ours_restore(v, rnd, n)
        elif kind == "git-restore":
            for n in (1, 100):
                bench_store.git_restore(v, rnd, "readtree", n)
        elif kind == "floor-restore":
            steps = [lambda: self.floor_restore(v, rnd, 100), lambda: self.floor_restore(v, rnd, 100, safety=True)]
            for step in steps if rnd % 2 == 0 else steps[::-1]:
                step()
        elif kind == "capture":
            if bench_store.ours_sync(v):
                steps = [lambda: self.turn_capture(v, rnd), lambda: bench_store.ours_unchanged(v, rnd)]
                for step in steps if rnd % 2 == 0 else steps[::-1]:
                    step()
                self.changed_capture(v, rnd)
        else:
            raise ValueError(f"unknown block {kind}")
        samples = {op: per[rnd] for op, per in v.samples.items() if rnd in per}
        return {"samples": samples, "problems": v.problems[problems:], "errors": v.errors}

    @staticmethod
    def floor_restore(v: bench_store.Variant, rnd: int, n: int, *, safety: bool = False) -> None:
        """What a restore of `n` files cannot go below with today's durability, timed as floor.restoreN: the
        rewritten files' old content written to temps beside them and fsynced together by 8 threads (as
        SafeRoot.stage does), each renamed into place over a file held by an O_PATH fd (as lateclose does, the old
        blocks freed at the fds' close, after the timing), then each changed directory fsynced, 8 at a time.
        Nothing else: no safety capture, no plan, no store read, no record, no check of what stands there.

        With `safety` (floor.safety_restoreN), first the least safety copy a store could take: the files as they
        stand read, hashed and written, each behind its hash, into one file, fsynced; a journal naming the paths
        written and fsynced; their directory fsynced. No compression, no index, no record, no lock."""
        op_name = f"floor.{'safety_' if safety else ''}restore{n}"
        aside = v.stores / "floor-safety"
        if safety:
            aside.mkdir(exist_ok=True)

        def durable_file(path: Path, data: bytes, mode: int) -> None:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)

        def safety_copy(rels: list[str]) -> None:
            parts: list[bytes] = []
            for rel in rels:
                with open(v.ws.root / rel, "rb") as f:
                    data = f.read()
                parts += (blake3.blake3(data).digest(), data)
            durable_file(aside / "pack", b"".join(parts), 0o600)
            durable_file(aside / "journal", json.dumps(rels).encode(), 0o600)
            sync_dir(aside)

        def write(item: tuple[str, bytes]) -> tuple[Path, Path]:
            path = v.ws.root / item[0]
            tmp = path.with_name(f".{path.name}.floor~")
            durable_file(tmp, item[1], 0o644)
            return tmp, path

        def sync_dir(path: Path) -> None:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

        def restore() -> None:
            rels = v.modifier.take(n)
            expected = v.modifier.read(rels)
            v.modifier.rewrite(rels)
            held: list[int] = []
            with ThreadPoolExecutor(8) as pool:
                t = time.perf_counter()
                if safety:
                    safety_copy(rels)
                for tmp, path in list(pool.map(write, expected.items())):
                    held.append(os.open(path, getattr(os, "O_PATH", os.O_RDONLY) | os.O_NOFOLLOW))
                    os.rename(tmp, path)
                list(pool.map(sync_dir, {(v.ws.root / rel).parent for rel in rels}))
                v.record(op_name, rnd, time.perf_counter() - t)
            for fd in held:
                os.close(fd)
            bad = v.modifier.check_restored(expected)
            if bad:
                v.problems.append(f"round {rnd}: {op_name} left {bad} of {n} modified files unrestored")

        v.attempt(op_name, restore)

    @staticmethod
    def changed_capture(v: bench_store.Variant, rnd: int) -> None:
        """A session's capture after a turn rewrote one tracked file, timed as ours.turn_changed: the file rewritten
        (untimed), then a pause longer than a session's index save waits (door.BEHIND_DELAY: a turn takes longer),
        then the capture a turn's end takes (the Recorder's, the thread's latest snapshot the workspace's)."""
        from snapshot_store.detect.door import BEHIND_DELAY

        def capture() -> None:
            rels = v.modifier.take(1)
            before = v.modifier.read(rels)
            v.modifier.rewrite(rels)
            time.sleep(BEHIND_DELAY + 0.3)
            t = time.perf_counter()
            res = v.store.at(v.ws.root).capture_thread_summary(known_paths=(), thread_latest=v.store_last_id,
                                                               kind="post-turn", label="after: bench")
            v.record("ours.turn_changed", rnd, time.perf_counter() - t)
            v.store_last_id = res.id
            if res.unchanged:
                v.problems.append(f"round {rnd}: ours.turn_changed found nothing changed")
            for rel, data in before.items():  # the cached tree as it was (the next block's capture absorbs it)
                (v.ws.root / rel).write_bytes(data)

        v.attempt("ours.turn_changed", capture)

    @staticmethod
    def turn_capture(v: bench_store.Variant, rnd: int) -> None:
        """The capture a session's turn takes on an unchanged tree (the Recorder's: a thread whose latest snapshot
        is the workspace's latest), timed as ours.turn_unchanged."""

        def capture() -> None:
            t = time.perf_counter()
            res = v.store.at(v.ws.root).capture_thread_summary(known_paths=(), thread_latest=v.store_last_id,
                                                               kind="pre-turn", label="before: bench")
            v.record("ours.turn_unchanged", rnd, time.perf_counter() - t)
            v.store_last_id = res.id
            bench_store.check_unchanged(v, rnd, "ours.turn_unchanged", res)

        v.attempt("ours.turn_unchanged", capture)

    def close(self) -> None:
        for v in self.variants.values():
            if v.store is not None:
                with contextlib.suppress(Exception):
                    v.store.close()


def helper_main() -> int:
    helper = SessionHelper()
    try:
        for line in sys.stdin:
            req = json.loads(line)
            try:
                if req["cmd"] == "open":
                    out = helper.open(req)
                elif req["cmd"] == "block":
                    out = helper.block(req)
                else:
                    break
            except Exception as exc:
                traceback.print_exc(file=sys.stderr)
                out = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(out), flush=True)
    finally:
        helper.close()
    return 0


class HelperClient:
    """The bench's end of the session helper."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "session-helper"],
                                     cwd=REPO_ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)

    def ask(self, **req: Any) -> dict[str, Any]:
        stdin: IO[str] | None = self.proc.stdin
        stdout: IO[str] | None = self.proc.stdout
        assert stdin is not None and stdout is not None
        stdin.write(json.dumps(req) + "\n")
        stdin.flush()
        line = stdout.readline()
        if not line:
            raise RuntimeError(f"the session helper exited ({self.proc.poll()})")
        out: dict[str, Any] = json.loads(line)
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ask(cmd="quit")
        with contextlib.suppress(Exception):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------------------------- the bench


class Goals:
    def __init__(self, args: argparse.Namespace, run_dir: Path) -> None:
        self.args = args
        self.run_dir = run_dir
        self.sz = sizes_for(args.quick)
        self.rows = set(args.only.split(","))
        unknown = self.rows - set(ROW_NAMES)
        if unknown:
            raise SystemExit(f"--only: unknown rows {sorted(unknown)} (known: {', '.join(ROW_NAMES)})")
        ns = argparse.Namespace(files=self.sz.big_files, mb=self.sz.big_mb, scale=self.sz.cached_big, no_cold=False,
                                baseline=None, rounds=args.rounds, only="")
        self.b = bench_startup.Bench(ns, run_dir)  # the 100,000-file tree's rows, its trees `codexr` and `cold`
        # The server rows need the server (a test run's environment turns it off); the change monitor stays as the
        # environment says (on unless CODEXR_MONITOR=0).
        self.b.base_env.pop("CODEXR_SERVER", None)
        self.rec = self.b.rec
        self.rss: dict[str, dict[int, int]] = {}  # KB per round, from clean_spawn
        self.loads: list[float] = []
        self.helper: HelperClient | None = None
        self.noxdg: bench_noxdg.NoXdg | None = None
        self.noxdg_dir: Path | None = None
        self.own_model: Any = None
        self.exec_trees: dict[int, Path] = {}

    @property
    def server(self) -> bench_startup.Tree:
        return self.b.trees[0]

    @property
    def cold(self) -> bench_startup.Tree:
        return self.b.trees[1]

    # ------------------------------------------------------------------------------------------ set-up

    def setup(self) -> None:
        rows = self.rows
        if rows & {"rewind", "restore", "session-capture"}:
            self.b.setup_store()  # the big tree, its internal Git repository, each codexr tree's cold capture
        elif rows & {"exec", "cold-rss"}:
            self.b.ws = self.big_tree()
        if rows & {"exec", "rewind"}:
            log("exec: the scripted model, warming up codex and codexr ...")
            self.b.setup_exec()
        if "exec" in rows:
            self.setup_exec_trees()
        if "rewind" in rows:
            self.b.codexr_rewind_tree(self.server, -1)  # untimed: the first rewind in the tree
        if rows & {"session-restore", "session-capture"}:
            self.setup_helper()
        if "noxdg" in rows:
            self.setup_noxdg()

    def big_tree(self) -> Workspace:
        spec = WorkspaceSpec(files=self.sz.big_files, mb=self.sz.big_mb, seed=SEED)
        if self.sz.cached_big:
            return cached(spec, log)
        return generate(self.run_dir / "ws", spec, log=log)

    def setup_exec_trees(self) -> None:
        for n in self.sz.exec_files:
            root = self.run_dir / f"exec-{n}"
            log(f"exec: generating a {n}-file tree ...")
            generate(root, WorkspaceSpec(files=n, mb=n * MB_PER_FILE, seed=SEED), log=log)
            self.exec_trees[n] = root
        self.exec_trees[self.sz.big_files] = self.b.ws.root
        for n, root in self.exec_trees.items():  # untimed: Codex's first turn there, codexr's cold first capture
            log(f"exec: first turns in the {n}-file tree (untimed) ...")
            self.b.codex_exec_tree(-1, ws=root, op=f"exec_{n}")
            self.b.codexr_exec_tree(self.server, -1, ws=root, op=f"exec_{n}")

    def setup_helper(self) -> None:
        env = {**self.b.base_env}
        self.helper = HelperClient(env)
        if "session-restore" in self.rows:
            log(f"session helper: the {self.sz.session_files}-file tree, its store and Git repository ...")
            out = self.helper.ask(cmd="open", name="sr", root=str(self.run_dir / "session-ws"), generate=True,
                                  files=self.sz.session_files, mb=self.sz.session_mb, git=True,
                                  stores=str(self.run_dir / "session-sr"), rounds=self.args.rounds)
            self.check_open("sr", out)
        if "session-capture" in self.rows:
            log(f"session helper: a session store on the {self.sz.big_files}-file tree (its cold capture) ...")
            out = self.helper.ask(cmd="open", name="sc", root=str(self.b.ws.root), files=self.sz.big_files,
                                  mb=self.sz.big_mb, git=False, stores=str(self.run_dir / "session-sc"),
                                  rounds=self.args.rounds)
            self.check_open("sc", out)

    def check_open(self, name: str, out: dict[str, Any]) -> None:
        if "error" in out:
            raise SystemExit(f"session helper: {name} failed: {out['error']}")
        if not out.get("watch"):
            self.rec.problem(f"session helper: {name}'s watch() returned False: its captures walk")
        log(f"  {name}: change journal {out.get('watch')}, cold capture {out.get('cold_seconds', 0):.1f} s")

    def setup_noxdg(self) -> None:
        model = getattr(self.b, "model", None)
        if model is None:
            from app.codex.scripted_model import ScriptedModel

            self.own_model = model = ScriptedModel().start()
        # outside /tmp (the ownership rule refuses runtime directories below it), as bench_noxdg.py does; from a
        # checkout below /tmp, the user's cache directory (there the servers were refused and every (e) row ran
        # one-shot, the baseline included: it "passed" at ~1x)
        base = REPO_ROOT.parent
        tmp = Path(tempfile.gettempdir()).resolve()
        if base.resolve() == tmp or tmp in base.resolve().parents or Path("/tmp") in base.resolve().parents:
            base = Path.home() / ".cache"
            base.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.noxdg_dir = Path(tempfile.mkdtemp(prefix="bench-goals-noxdg-", dir=base))
        os.chmod(self.noxdg_dir, 0o700)
        log("noxdg: a 200-file workspace, warming up the three ways ...")
        self.noxdg = bench_noxdg.NoXdg(self.noxdg_dir, model.base_url, env=self.b.base_env)
        self.noxdg.warm()

    # ------------------------------------------------------------------------------------------ blocks

    def block_exec(self, n: int, rnd: int) -> None:
        """codex exec and codexr exec in the n-file tree, back to back (order alternating by round); in the big tree
        an untimed codexr exec first absorbs what the other rows wrote."""
        root = self.exec_trees[n]
        op = f"exec_{n}"
        if n == self.sz.big_files:
            self.b.codexr_exec_tree(self.server, -1, ws=root, op=op)
        steps: list[Callable[[], None]] = [lambda: self.b.codex_exec_tree(rnd, ws=root, op=op),
                                           lambda: self.b.codexr_exec_tree(self.server, rnd, ws=root, op=op)]
        for step in steps if rnd % 2 == 0 else steps[::-1]:
            step()
        if n == self.sz.big_files:
            self.exec_after_changes(rnd, root)

    def exec_after_changes(self, rnd: int, root: Path) -> None:
        """The info rows beside (a): `codexr exec` on a new thread after a file made by hand, and after another
        thread's turn wrote a file (untimed): the first captures that read such a file (issue 35). Each file goes
        again after its turn; the next block's untimed exec absorbs that."""
        made = root / "bench-made-by-hand.txt"
        made.write_text("made by hand between turns\n")
        time.sleep(bench_startup.RACY_PAUSE)
        try:
            self.b.codexr_exec_tree(self.server, rnd, ws=root, op="exec_made")
        finally:
            made.unlink(missing_ok=True)
        wrote = root / bench_startup.EDIT_FILE
        try:
            self.b.codexr_exec_tree(self.server, -1, ws=root, op="exec_edit", prompt=bench_startup.EDIT_PROMPT)
            time.sleep(bench_startup.RACY_PAUSE)
            self.b.codexr_exec_tree(self.server, rnd, ws=root, op="exec_after_turn")
        finally:
            wrote.unlink(missing_ok=True)

    def block_helper(self, name: str, kind: str, rnd: int) -> None:
        assert self.helper is not None
        out = self.helper.ask(cmd="block", name=name, block=kind, rnd=rnd)
        if "error" in out:
            self.rec.problem(f"round {rnd}: session helper {name} {kind}: {out['error']}")
            return
        for op, value in out["samples"].items():
            self.rec.samples.setdefault(f"{name}.{op}", {})[rnd] = value
        for msg in out["problems"]:
            self.rec.problem(f"session helper {name}: {msg}")
        for op, msg in out["errors"].items():
            problem = f"session helper {name}: {op} failed: {msg}"
            if problem not in self.rec.problems:
                self.rec.problem(problem)

    def block_noxdg(self, rnd: int) -> None:
        assert self.noxdg is not None
        ways = list(bench_noxdg.WAYS)
        for way in ways[rnd % 3:] + ways[:rnd % 3]:
            for cmd, argv in bench_noxdg.COMMANDS.items():
                try:
                    secs = self.noxdg.run(way, argv)
                except SystemExit as exc:
                    self.rec.problem(f"round {rnd}: noxdg {way} {cmd}: {exc}")
                    continue
                self.rec.samples.setdefault(f"nx.{cmd}.{way}", {})[rnd] = secs
        # The one-shot's floors: a fresh Python that starts and exits, and one that imports the store library
        # (what any capture runs on) and exits, both as the one-shot command's interpreter, in its environment.
        for name, code in NOXDG_FLOORS.items():
            try:
                secs = self.noxdg.run("one-shot", ["-c", code], module=False)
            except SystemExit as exc:
                self.rec.problem(f"round {rnd}: noxdg floor {name}: {exc}")
                continue
            self.rec.samples.setdefault(f"nx.{name}.one-shot", {})[rnd] = secs

    def block_cold_codexr(self, rnd: int) -> None:
        """A fresh CODEX_HOME's first `snapshots capture` of the big tree, server off (its automatic gc included)."""
        if rnd >= self.args.cold_rounds:
            return
        home = self.run_dir / f"cold-home-{rnd}"
        home.mkdir()
        env = self.cold.env({**self.b.base_env, "CODEX_HOME": str(home)}, self.run_dir)
        try:
            wall, rc, rss, text = clean_spawn(self.cold.cmd("snapshots", "capture", "-C", str(self.b.ws.root),
                                                            "--json"), cwd=self.cold.root, env=env,
                                              scratch=self.run_dir)
            if rc != 0:
                self.rec.problem(f"round {rnd}: cold capture failed ({rc}): {text}")
                return
            self.rec.samples.setdefault("cold.capture", {})[rnd] = wall
            self.rss.setdefault("cold.capture", {})[rnd] = rss
        finally:
            shutil.rmtree(home, ignore_errors=True)
            os.sync()  # untimed: what this block wrote is on disk before the next block's fsyncs are timed

    def block_cold_git(self, rnd: int) -> None:
        """Git's `add -A .` + `write-tree` into a fresh internal repository: the time of both, the larger peak RSS."""
        if rnd >= self.args.cold_rounds:
            return
        git_dir = self.run_dir / f"cold-git-{rnd}"
        root = self.b.ws.root
        try:
            GitShadow(git_dir, root).init()
            total, peak = 0.0, 0
            for argv in (["add", "-A", "."], ["write-tree"]):
                wall, rc, rss, text = clean_spawn(["git", f"--git-dir={git_dir}", f"--work-tree={root}", *argv],
                                                  cwd=root, env=bench_store.ENV, scratch=self.run_dir)
                if rc != 0:
                    self.rec.problem(f"round {rnd}: git {argv[0]} (cold) failed ({rc}): {text}")
                    return
                total += wall
                peak = max(peak, rss)
            self.rec.samples.setdefault("git.cold", {})[rnd] = total
            self.rss.setdefault("git.cold", {})[rnd] = peak
        finally:
            shutil.rmtree(git_dir, ignore_errors=True)
            os.sync()

    def blocks(self) -> list[tuple[str, Callable[[int], None]]]:
        b, rows = self.b, self.rows
        out: list[tuple[str, Callable[[int], None]]] = []
        if "exec" in rows:
            for n in self.exec_trees:
                out.append((f"exec {n}", lambda rnd, n=n: self.block_exec(n, rnd)))
        if "rewind" in rows:
            out.append(("rewind", lambda rnd: b.codexr_rewind_tree(self.server, rnd)))
        if rows & {"rewind", "restore"}:
            out.append(("git restore (fresh index)", lambda rnd: b.block_git_restore(rnd, refresh=True)))
        if "restore" in rows:
            out.append(("restore, server", lambda rnd: b.block_restore(self.server, rnd)))
            out.append(("restore, no server", lambda rnd: b.block_restore(self.cold, rnd)))
        if "session-restore" in rows:
            out.append(("session restore", lambda rnd: self.block_helper("sr", "ours-restore", rnd)))
            out.append(("git restore 1/100 (fresh index)", lambda rnd: self.block_helper("sr", "git-restore", rnd)))
            out.append(("durable-write floor", lambda rnd: self.block_helper("sr", "floor-restore", rnd)))
        if "noxdg" in rows:
            out.append(("noxdg", self.block_noxdg))
        if "cold-rss" in rows:
            out.append(("cold capture", self.block_cold_codexr))
            out.append(("git cold", self.block_cold_git))
        if "session-capture" in rows:
            out.append(("session capture", lambda rnd: self.block_helper("sc", "capture", rnd)))
            out.append(("git unchanged", b.block_git_capture))
        return out

    def run(self) -> None:
        self.setup()
        blocks = self.blocks()
        for rnd in range(self.args.rounds):
            self.loads.append(os.getloadavg()[0])
            shift = rnd % len(blocks)
            order = blocks[shift:] + blocks[:shift]
            log(f"round {rnd + 1}/{self.args.rounds} (load {self.loads[-1]:.2f}): "
                f"{', '.join(name for name, _ in order)}")
            for _name, fn in order:
                fn(rnd)
        self.loads.append(os.getloadavg()[0])

    def stop(self) -> None:
        if self.helper is not None:
            self.helper.close()
        if self.noxdg is not None:
            self.noxdg.stop()
        if self.noxdg_dir is not None:
            shutil.rmtree(self.noxdg_dir, ignore_errors=True)
        self.b.stop_servers()
        for model in (getattr(self.b, "model", None), self.own_model):
            if model is not None:
                model.stop()
        shutil.rmtree(bench_startup.runtime_of(self.run_dir), ignore_errors=True)

    # ------------------------------------------------------------------------------------------ report

    def measured(self, goal: Goal) -> dict[str, Any] | None:
        s = self.rec.samples
        if goal.unit == "MB":
            mine, theirs = self.rss.get(goal.op), self.rss.get(goal.base or "")
            summ = summary([kb / 1024 for kb in (mine or {}).values()])
            base = summary([kb / 1024 for kb in (theirs or {}).values()])
            r = ratio({k: float(v) for k, v in mine.items()} if mine else None,
                      {k: float(v) for k, v in theirs.items()} if theirs else None)
            value = summ["median"] if summ else None
        else:
            summ = summary([x * 1000 for x in s.get(goal.op, {}).values()])
            base = summary([x * 1000 for x in s.get(goal.base or "", {}).values()])
            r = ratio(s.get(goal.op), s.get(goal.base or "")) if goal.base else None
            value = (r["median"] if r else None) if goal.unit == "x" else (summ["median"] if summ else None)
        if summ is None:
            return None
        verdict = "n/a" if value is None else ("PASS" if value <= goal.limit else "MISS")
        return {"key": goal.key, "label": goal.label, "op": goal.op, "base": goal.base, "unit": goal.unit,
                "summary": summ, "base_summary": base, "ratio": r, "value": value, "limit": goal.limit,
                "verdict": verdict, "samples": (self.rss if goal.unit == "MB" else s).get(goal.op)}

    def report(self) -> dict[str, Any]:
        load = os.getloadavg()
        git = subprocess.run(["git", "--version"], capture_output=True, text=True, check=False).stdout.strip()
        print(f"bench_goals (issue 35): {platform.platform()}, {os.cpu_count()} CPUs, Python "
              f"{platform.python_version()}, {git}")
        print(f"{self.args.rounds} rounds ({self.args.cold_rounds} for the cold capture); load average (1 min) "
              f"at each round's start and the end {min(self.loads):.2f}-{max(self.loads):.2f} "
              f"(median {summary(self.loads)['median']:.2f}); now {' '.join(f'{x:.2f}' for x in load)}"
              if self.loads else "no rounds")
        monitor = "off (CODEXR_MONITOR=0)" if self.b.base_env.get("CODEXR_MONITOR") == "0" else "on"
        print(f"change monitor {monitor}; resident server: a private runtime directory per run")
        print("Git's index is refreshed (`git update-index -q --refresh`, untimed) before every timed read-tree, so "
              "Git re-hashes only the files the block rewrote.")
        print(f"trees: exec {', '.join(fmt_files(n) for n in self.exec_trees) or '-'} files; big "
              f"{fmt_files(self.sz.big_files)} files / {self.sz.big_mb:g} MB "
              f"({'cached ' + str(self.b.ws.root) if self.sz.cached_big and hasattr(self.b, 'ws') else 'generated'}); "
              f"session restore {fmt_files(self.sz.session_files)} files / {self.sz.session_mb:g} MB")
        print("medians over rounds (min-max); ratio = median (min-max) of per-round ratios to the baseline of the "
              "same round\n")
        head = f"  {'row':<48} {'median':>9} {'min-max':>13}  {'baseline':<22} {'median':>8}  {'ratio':<18} goal"
        print(head)
        rows_out = []
        for goal in goals(self.sz):
            if goal.rows not in self.rows:
                continue
            m = self.measured(goal)
            if m is None:
                print(f"  {goal.label:<48} {'-':>9}   (not measured)")
                continue
            rows_out.append(m)
            unit = "MB" if goal.unit == "MB" else "ms"
            summ, base, r = m["summary"], m["base_summary"], m["ratio"]
            rng = f"{summ['min']:.0f}-{summ['max']:.0f}"
            btext = f"{base['median']:.0f} {unit}" if base else "-"
            rtext = f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})" if r else ""
            limit = f"<= {goal.limit:g}{'x' if goal.unit == 'x' else ' ' + goal.unit}"
            print(f"  {goal.label:<48} {summ['median']:6.0f} {unit} {rng:>13}  {goal.base_label:<22} {btext:>8}  "
                  f"{rtext:<18} {limit:<9} {m['verdict']}")
        info_out = []
        big = fmt_files(self.sz.big_files)
        after = [(f"(a) codexr exec after a file made by hand, {big} files", "codexr.exec_made",
                  f"codex.exec_{self.sz.big_files}", "exec"),
                 (f"(a) codexr exec after another thread wrote, {big} files", "codexr.exec_after_turn",
                  f"codex.exec_{self.sz.big_files}", "exec")]
        for label, op, base, row in after + INFO_ROWS:
            if row not in self.rows:
                continue
            summ = summary([x * 1000 for x in self.rec.samples.get(op, {}).values()])
            if summ is None:
                continue
            bsumm = summary([x * 1000 for x in self.rec.samples.get(base or "", {}).values()])
            r = ratio(self.rec.samples.get(op), self.rec.samples.get(base or "")) if base else None
            rng = f"{summ['min']:.0f}-{summ['max']:.0f}"
            btext = f"{bsumm['median']:.0f} ms" if bsumm else "-"
            rtext = f"{r['median']:.2f}x ({r['min']:.2f}-{r['max']:.2f})" if r else ""
            print(f"  {label:<48} {summ['median']:6.0f} ms {rng:>13}  {'(info)':<22} {btext:>8}  {rtext}")
            info_out.append({"label": label, "op": op, "base": base, "summary": summ, "base_summary": bsumm,
                             "ratio": r})
        verdicts = [m["verdict"] for m in rows_out]
        print(f"\n{verdicts.count('PASS')} PASS, {verdicts.count('MISS')} MISS of {len(verdicts)} goals")
        for msg in self.rec.problems:
            print(f"PROBLEM: {msg}")
        return {"rows": rows_out, "info": info_out, "samples": self.rec.samples, "rss_kb": self.rss,
                "problems": self.rec.problems, "loads": self.loads}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None,
                                 epilog=f"rows: {', '.join(ROW_NAMES)}")
    ap.add_argument("--quick", action="store_true",
                    help="small trees (exec 300 / 1,000 / 3,000 files, session restore 800), 2 rounds, 1 cold round: "
                         "a smoke test of ~40 s")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7, --quick 2)")
    ap.add_argument("--cold-rounds", type=int, default=None,
                    help="rounds that include (f)'s cold captures (default 3, --quick 1)")
    ap.add_argument("--only", default=",".join(ROW_NAMES), help="comma list of rows (default all)")
    ap.add_argument("--dir", default=None, help="parent of the run's fresh temporary directory")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--json", metavar="FILE", help="write rows, samples and problems as JSON")
    args = ap.parse_args(argv)
    args.rounds = args.rounds or (2 if args.quick else 7)
    args.cold_rounds = args.cold_rounds if args.cold_rounds is not None else (1 if args.quick else 3)
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["session-helper"]:
        return helper_main()
    args = parse_args(argv)
    run_dir = Path(tempfile.mkdtemp(prefix="bench-goals-", dir=args.dir))
    bench = Goals(args, run_dir)
    try:
        bench.run()
        out = bench.report()
        if args.json:
            out["meta"] = {"argv": sys.argv, "rounds": args.rounds, "cold_rounds": args.cold_rounds,
                           "only": sorted(bench.rows), "python": sys.version, "cpus": os.cpu_count()}
            Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    finally:
        bench.stop()
        if args.keep:
            log(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
    return 1 if bench.rec.problems else 0


if __name__ == "__main__":
    sys.exit(main())
