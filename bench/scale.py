#!/usr/bin/env python3
"""The 100,000-file rows (issue 21's scale guard rail): captures and a restore of a large cached workspace.

Run from the repository root:  .venv/bin/python bench/bench_store.py --scale   (or bench/scale.py directly)

The workspace (workspace_gen.cached: 100,000 source-like files, 700 MB, a Git repository) is generated once under
~/.cache/codexr-bench-workspaces and reused. Every timed operation is its own process (`scale.py probe ...`, the
store opened as a command opens it) timed from spawn to exit; the probe also reports the seconds the operation
itself took inside the process and its peak RSS (resource.getrusage of the child, from os.wait4). Rows:

* one-shot capture, unchanged: `codexr snapshots capture`'s call (Store.capture_summary) on the unchanged tree,
  vs git's `add -A` + `write-tree` in an internal repository (GIT_DIR apart) on the same tree.
* pre-turn capture: the capture `codexr exec` makes before its turn (Store.watch, then the Recorder's
  capture_thread_summary with kind="pre-turn") in a fresh process, the tree unchanged since the last capture (the
  "second run").
* resumed thread's pre-turn capture: the capture `codexr exec --thread ID` makes before its turn (the Recorder's
  capture of a thread whose sidecar names its earlier snapshot, then the turn bound to it), in a fresh process, the
  tree unchanged and the thread's snapshot the workspace's latest (an untimed run first makes it so).
* one-file restore: one tracked file rewritten, then the restore `codexr snapshots restore ID --yes` makes, vs
  `git read-tree -u --reset TREE`.

`--profile` adds a cProfile of each codexr operation in the last round (top functions by cumulative time).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import os
import pstats
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(REPO_ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_store import GitShadow, Modifier, log, ratio, summary  # noqa: E402
from workspace_gen import WorkspaceSpec, cached  # noqa: E402

RACY_PAUSE = 0.15  # > statcache.FINE_WINDOW_NS: a capture right after a write cannot vouch for what it saw
OPS = ("capture", "pre-turn", "resumed", "restore1")
RESUMED = "bench-resumed-thread"  # the thread the resumed rows capture for, its sidecar kept in the run's store


# ------------------------------------------------------------------------------------------ the child


def probe(op: str, home: Path, ws: Path, snap: str, profile: bool) -> dict[str, Any]:
    """One operation as a command runs it, in this (fresh) process."""
    from snapshot_store import Store

    prof = cProfile.Profile() if profile else None
    t0 = time.perf_counter()
    if prof is not None:
        prof.enable()
    store = Store.open(home / "file_snapshots", protected=[home])
    from app.server.runtime import monitors_wanted

    store.capturer.use_monitors(monitors_wanted())  # as app/cmds/context.py does: a monitor, unless CODEXR_MONITOR=0
    try:
        out: dict[str, Any] = {}
        if op == "capture":
            res = store.at(ws).capture_summary()
            out.update(id=res.id, unchanged=res.unchanged, files=res.file_count)
        elif op == "pre-turn":
            store.capturer.watch(ws)
            res = store.at(ws).capture_thread_summary(known_paths=(), kind="pre-turn", label="before: bench")
            out.update(id=res.id, unchanged=res.unchanged, files=res.file_count)
        elif op == "resumed":
            from app.recording.recorder import Recorder
            from app.recording.sidecar import Sidecars
            from snapshot_store.settings import ScopeSettings

            store.capturer.watch(ws)
            rec = Recorder(store, Sidecars(home / "file_snapshots"), ws, ScopeSettings(), tracking=True)
            side = rec.sidecar(RESUMED)
            pre, _seconds = rec.begin(side, "bench")
            rec.bind(RESUMED, side, f"turn-{time.time_ns()}", "bench", pre)  # the next run resumes from this one
            assert pre is not None
            out.update(id=pre, unchanged=not store.record(pre).changes)
        elif op == "restore1":
            rr = store.at(ws).restore(snap)
            out.update(written=len(getattr(rr, "written", []) or []))
        else:
            raise SystemExit(f"unknown op {op}")
    finally:
        store.close()
    out["seconds"] = time.perf_counter() - t0
    if prof is not None:
        prof.disable()
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats("cumulative").print_stats(28)
        out["profile"] = buf.getvalue()
    out["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return out


# ----------------------------------------------------------------------------------------- the parent


def spawn(cmd: list[str], *, cwd: Path, env: dict[str, str], timeout: float
          ) -> tuple[float, int, bytes, bytes, int]:
    """Run one whole process: (wall seconds from spawn to exit, exit code, stdout, stderr, its peak RSS in KB).

    Reaped with os.wait4, whose rusage is the child's own (RUSAGE_CHILDREN would be the maximum over every child).
    """
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    chunks: dict[str, bytes] = {}

    def drain(name: str, stream: IO[bytes]) -> None:
        chunks[name] = stream.read()

    readers = [threading.Thread(target=drain, args=(n, st), daemon=True)
               for n, st in (("out", proc.stdout), ("err", proc.stderr)) if st is not None]
    for t in readers:
        t.start()
    killer = threading.Timer(timeout, proc.kill)
    killer.start()
    try:
        _pid, status, usage = os.wait4(proc.pid, 0)
    finally:
        killer.cancel()
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it again
    for t in readers:
        t.join()
    return wall, proc.returncode, chunks.get("out", b""), chunks.get("err", b""), usage.ru_maxrss


def run_child(args: list[str], env: dict[str, str]) -> tuple[float, int, dict[str, Any]]:
    """Spawn a probe; (wall seconds, peak RSS in KB, its JSON answer)."""
    wall, rc, out, err, rss = spawn([sys.executable, str(BENCH_DIR / "scale.py"), "probe", *args], cwd=REPO_ROOT,
                                    env=env, timeout=900)
    if rc != 0:
        raise RuntimeError(f"probe {args[0]} failed ({rc}): {err.decode(errors='replace')[-800:]}")
    return wall, rss, json.loads(out)


class Scale:
    def __init__(self, args: argparse.Namespace, run_dir: Path) -> None:
        self.args = args
        self.run_dir = run_dir
        self.samples: dict[str, dict[int, float]] = {}
        self.rss: dict[str, list[int]] = {}
        self.problems: list[str] = []
        self.profiles: dict[str, str] = {}
        self.home = run_dir / "home"
        self.home.mkdir()
        self.runtime = Path.home() / ".cache" / "codexr-bench" / run_dir.name  # the monitor's socket: not below /tmp
        self.runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.env = {**os.environ, "CODEX_HOME": str(self.home), "CODEXR_RUNTIME_DIR": str(self.runtime),
                    "CODEXR_MONITOR_IDLE": "900", "CODEXR_MONITOR": "0" if args.no_monitor else "1"}
        self.env.pop("PYTHONDONTWRITEBYTECODE", None)

    def record(self, op: str, rnd: int, value: float) -> None:
        self.samples.setdefault(op, {})[rnd] = value

    def ours(self, op: str, rnd: int, snap: str = "", profile: bool = False) -> dict[str, Any]:
        wall, rss, out = run_child([op, str(self.home), str(self.ws.root), snap, "1" if profile else "0"], self.env)
        if rnd >= 0:
            self.record(f"ours.{op}", rnd, wall)
            self.record(f"ours.{op}.inner", rnd, out["seconds"])
            self.rss.setdefault(op, []).append(rss)
        if "profile" in out:
            self.profiles[op] = out["profile"]
        return out

    def setup(self) -> None:
        spec = WorkspaceSpec(files=self.args.scale_files, mb=self.args.scale_mb, seed=self.args.seed)
        log(f"the {spec.files}-file / {spec.mb:g} MB workspace ...")
        self.ws = cached(spec, log)
        self.modifier = Modifier(self.ws, seed=11)
        self.shadow = GitShadow(self.run_dir / "shadow.git", self.ws.root)
        log("cold snapshots (untimed): internal git repository, snapshot_store ...")
        t0 = time.perf_counter()
        self.shadow.init()
        self.git_tree = self.shadow.snapshot()
        self.cold_git = time.perf_counter() - t0
        wall, rss, out = run_child(["capture", str(self.home), str(self.ws.root), "", "0"], self.env)
        self.cold = (wall, rss)
        self.snap = str(out["id"])
        log(f"  git {self.cold_git:.1f} s; snapshot_store {wall:.1f} s, peak RSS {rss / 1024:.0f} MB")
        time.sleep(RACY_PAUSE)
        self.ours("pre-turn", -1)  # the first pre-turn capture of a workspace (a session's first turn): untimed
        self.wait_for_monitor()

    def wait_for_monitor(self) -> None:
        """The first capture started the workspace's change monitor; it answers once its watches are in place."""
        if self.args.no_monitor:
            return
        deadline = time.monotonic() + 120
        while not list(self.runtime.glob("m-*.sock")):
            if time.monotonic() > deadline:
                self.problems.append("no change monitor came up")
                return
            time.sleep(0.2)
        time.sleep(2.0)  # its first scan of 3,000 directories, before it accepts
        log("change monitor up")

    def stop_monitor(self) -> None:
        """End the monitor this run started (by the pid its lock file holds), and its runtime directory."""
        for lock in self.runtime.glob("m-*.sock.lock"):
            named = lock.read_text().strip()
            if named.isdigit():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(named), signal.SIGTERM)
        shutil.rmtree(self.runtime, ignore_errors=True)

    def block_capture(self, rnd: int) -> None:
        time.sleep(RACY_PAUSE)
        self.ours("capture", -1)  # untimed sync: absorbs the restore rows' rewrites
        out = self.ours("capture", rnd, profile=self.profiling(rnd))
        if not out.get("unchanged"):
            self.problems.append(f"round {rnd}: an unchanged one-shot capture reported changes")

    def block_pre_turn(self, rnd: int) -> None:
        time.sleep(RACY_PAUSE)
        self.ours("pre-turn", -1)
        out = self.ours("pre-turn", rnd, profile=self.profiling(rnd))
        if not out.get("unchanged"):
            self.problems.append(f"round {rnd}: an unchanged pre-turn capture reported changes")

    def block_resumed(self, rnd: int) -> None:
        time.sleep(RACY_PAUSE)
        self.ours("resumed", -1)  # untimed: the thread's snapshot becomes the workspace's latest again
        out = self.ours("resumed", rnd, profile=self.profiling(rnd))
        if not out.get("unchanged"):
            self.problems.append(f"round {rnd}: an unchanged resumed thread's capture reported changes")

    def block_restore(self, rnd: int) -> None:
        rels = self.modifier.take(1)
        expected = self.modifier.read(rels)
        self.modifier.rewrite(rels)
        try:
            self.ours("restore1", rnd, self.snap, profile=self.profiling(rnd))
        finally:
            if self.modifier.check_restored(expected):
                self.problems.append(f"round {rnd}: the restore did not put {rels} back")
                for rel, data in expected.items():
                    (self.ws.root / rel).write_bytes(data)

    def block_git(self, rnd: int) -> None:
        self.shadow.snapshot()  # untimed sync
        t0 = time.perf_counter()
        tree = self.shadow.snapshot()
        self.record("git.unchanged", rnd, time.perf_counter() - t0)
        if tree != self.git_tree:
            self.problems.append(f"round {rnd}: git's unchanged tree is {tree}, expected {self.git_tree}")
        rels = self.modifier.take(1)
        expected = self.modifier.read(rels)
        self.modifier.rewrite(rels)
        t0 = time.perf_counter()
        self.shadow.git("read-tree", "-u", "--reset", self.git_tree)
        self.record("git.restore1", rnd, time.perf_counter() - t0)
        if self.modifier.check_restored(expected):
            self.problems.append(f"round {rnd}: git read-tree did not restore {rels}")
            for rel, data in expected.items():
                (self.ws.root / rel).write_bytes(data)

    def profiling(self, rnd: int) -> bool:
        return bool(self.args.profile) and rnd == self.args.scale_rounds - 1

    def run(self) -> None:
        self.setup()
        blocks = [self.block_capture, self.block_pre_turn, self.block_resumed, self.block_restore, self.block_git]
        for rnd in range(self.args.scale_rounds):
            shift = rnd % len(blocks)
            for fn in blocks[shift:] + blocks[:shift]:
                log(f"round {rnd + 1}/{self.args.scale_rounds}: {fn.__name__}")
                fn(rnd)

    def report(self) -> dict[str, Any]:
        s = self.samples
        print(f"\n== 100,000-file rows: {len(self.ws.tracked)} tracked files, {self.ws.tracked_bytes / 1e6:.0f} MB, "
              f"{self.args.scale_rounds} rounds, loadavg {' '.join(f'{x:.2f}' for x in os.getloadavg())} ==")
        print(f"  cold (untimed setup): git add+write-tree {self.cold_git:.1f} s; snapshot_store one-shot capture "
              f"{self.cold[0]:.1f} s, peak RSS {self.cold[1] / 1024:.0f} MB")
        rows = [("git add -A + write-tree, unchanged", "git.unchanged", None, None),
                ("one-shot capture, unchanged (process)", "ours.capture", "git.unchanged", "capture"),
                ("  of which the capture itself", "ours.capture.inner", None, None),
                ("pre-turn capture, 2nd run (process)", "ours.pre-turn", None, "pre-turn"),
                ("  of which the capture itself", "ours.pre-turn.inner", None, None),
                ("resumed thread's pre-turn (process)", "ours.resumed", None, "resumed"),
                ("  of which the capture itself", "ours.resumed.inner", None, None),
                ("git read-tree -u --reset, 1 file", "git.restore1", None, None),
                ("one-file restore (process)", "ours.restore1", "git.restore1", "restore1"),
                ("  of which the restore itself", "ours.restore1.inner", None, None)]
        out: dict[str, Any] = {"rows": {}, "rss_mb": {}, "problems": self.problems,
                               "files": len(self.ws.tracked), "bytes": self.ws.tracked_bytes}
        print(f"  {'operation':<40} {'median':>9} {'min-max':>15}  {'ratio':<22} peak RSS")
        for label, op, denom, rss_of in rows:
            summ = summary(list(s.get(op, {}).values()))
            if summ is None:
                continue
            r = ratio(s.get(op), s.get(denom)) if denom else None
            rtext = f"{r['median']:.2f}x git" if r else ""
            rss = max(self.rss.get(rss_of, [0])) / 1024 if rss_of else 0
            print(f"  {label:<40} {summ['median'] * 1000:7.0f} ms {summ['min'] * 1000:6.0f}-{summ['max'] * 1000:<6.0f}"
                  f"  {rtext:<22} {f'{rss:.0f} MB' if rss_of else ''}")
            out["rows"][op] = {"summary": summ, "ratio": r}
            if rss_of:
                out["rss_mb"][rss_of] = rss
        for op, text in self.profiles.items():
            print(f"\n== profile: {op} ==\n{text}")
        for msg in self.problems:
            print(f"PROBLEM: {msg}")
        return out


def add_args(ap: argparse.ArgumentParser) -> None:
    """The options of the scale rows (bench_store.py --scale passes its own through)."""
    ap.add_argument("--scale-files", dest="scale_files", type=int, default=100_000,
                    help="tracked files (default 100,000)")
    ap.add_argument("--scale-mb", dest="scale_mb", type=float, default=700.0, help="tracked MB (default 700)")
    ap.add_argument("--scale-rounds", dest="scale_rounds", type=int, default=3, help="interleaved rounds (default 3)")
    ap.add_argument("--profile", action="store_true", help="cProfile each codexr operation of the last round")
    ap.add_argument("--no-monitor", action="store_true", help="without the change monitor (CODEXR_MONITOR=0)")


def run_rows(args: argparse.Namespace) -> int:
    """Measure and print the rows; 1 if any operation misbehaved."""
    run_dir = Path(tempfile.mkdtemp(prefix="bench-scale-", dir=getattr(args, "dir", None)))
    bench = Scale(args, run_dir)
    try:
        bench.run()
        out = bench.report()
        if getattr(args, "json", None):
            Path(args.json).write_text(json.dumps(out, indent=2, default=str) + "\n")
    finally:
        bench.stop_monitor()
        shutil.rmtree(run_dir, ignore_errors=True)
    return 1 if bench.problems else 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["probe"]:
        op, home, ws, snap, profile = argv[1:6]
        print(json.dumps(probe(op, Path(home), Path(ws), snap, profile == "1")))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_args(ap)
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--json", metavar="FILE")
    return run_rows(ap.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
