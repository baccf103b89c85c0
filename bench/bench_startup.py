#!/usr/bin/env python3
"""Benchmark the start-up cost of one-shot `codexr` commands against what they stand beside.

Run from the repository root:  .venv/bin/python bench/bench_startup.py [--quick] [--json out.json]

Every row is a whole process, timed from spawn to exit, in interleaved rounds (block order rotated):

* exec:    `codexr exec PROMPT` vs the pinned `codex exec PROMPT` (``codex_cli_bin.bundled_codex_path()``), on
           one small Git workspace, both against the same local ScriptedModel (one `message` per turn).
* capture: `codexr snapshots capture` of an unchanged ~11,000-file tree vs `git add -A . && git write-tree`
           in an internal Git repository (separate GIT_DIR) on the same tree.
* capture-changed: (not in the default `--only`) 1 tracked file rewritten since a capture the saved walk vouches
           for, then `codexr snapshots capture` vs `git add -A . && git write-tree` after the same kind of change
           (what a turn's capture after an edit costs; issue 35). capture-made: the same with one file made beside
           tracked ones, then (the same block) with it removed again, then the capture after that.
* restore: rewrite 1 tracked file, then `codexr snapshots restore ID --yes` vs `git read-tree -u --reset TREE`.
* exec-tree: the exec row's trivial turn run in the ~11,000-file capture tree (what snapshots add to a turn in a
           large workspace); no target.
* rewind:  (not in the default `--only`) a turn adds one file to the capture tree (untimed), then `codexr rewind
           --thread ID --to 1 --yes` takes it back (timed: safety capture, plan, the conversation's fork, the removal)
           vs `git read-tree -u --reset` of one file; no target. Run it without exec-tree: the file it adds and
           removes changes the tree's root directory, so the next exec-tree turn's captures no longer find the tree
           unchanged (that row then measured ~3 s at 100,000 files instead of ~0.5 s).

Reference rows: `python -c pass` and `python -c "import app.cli"` (what every codexr command pays first).
With `--baseline DIR` (another checkout, e.g. `git worktree add /tmp/main-wt main`) every codexr row is also
timed from that checkout in the same rounds, with its own CODEX_HOMEs, and the report adds after/before ratios.
The report gives medians over rounds, min-max, and medians of per-round ratios against the baseline measured
in the same round (see /work/shared/BENCH_NOTES.md and bench/README.md). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(REPO_ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_store import GitShadow, Modifier, log, ratio, summary  # noqa: E402
from scale import spawn  # noqa: E402
from workspace_gen import WorkspaceSpec, cached, generate  # noqa: E402

PROMPT = "startup bench ping"
EDIT_PROMPT = "startup bench: make one file"  # the rewind row's turn: it adds EDIT_FILE, the rewind takes it away
EDIT_FILE = "bench-rewind-probe.txt"
RACY_PAUSE = 0.15  # > statcache.FINE_WINDOW_NS (100 ms)
REPLY = "pong from the scripted model"

# (label, op, denominator op for the ratio or None, target limit or None); "{tree}" rows repeat per codexr tree
ROWS: list[tuple[str, str, str | None, float | None]] = [
    ("python -c pass", "py.pass", None, None),
    ('python -c "import app.cli"', "{tree}.import_cli", "py.pass", None),
    ("codex exec (pinned binary)", "codex.exec", None, None),
    ("codexr exec", "{tree}.exec", "codex.exec", 1.5),
    ("codex exec, on the capture tree", "codex.exec_tree", None, None),
    ("codexr exec, on the capture tree", "{tree}.exec_tree", "codex.exec_tree", None),
    ("git add -A + write-tree, unchanged", "git.unchanged", None, None),
    ("codexr snapshots capture, unchanged", "{tree}.capture", "git.unchanged", 4.0),
    ("git add -A + write-tree, 1 file changed", "git.changed1", None, None),
    ("codexr snapshots capture, 1 file changed", "{tree}.changed1", "git.changed1", None),
    ("git add -A + write-tree, 1 file made", "git.made1", None, None),
    ("codexr snapshots capture, 1 file made", "{tree}.made1", "git.made1", None),
    ("git add -A + write-tree, 1 file removed", "git.removed1", None, None),
    ("codexr snapshots capture, 1 file removed", "{tree}.removed1", "git.removed1", None),
    ("codexr snapshots capture, the next after it", "{tree}.after_removed1", "git.unchanged", None),
    ("git read-tree -u --reset, 1 file", "git.restore1", None, None),
    ("codexr snapshots restore --yes, 1 file", "{tree}.restore1", "git.restore1", 4.0),
    ("codexr rewind --yes, 1 file + the fork", "{tree}.rewind1", "git.restore1", None),
]


@dataclass
class Recorder:
    rounds: int
    samples: dict[str, dict[int, float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    peak_rss: dict[str, int] = field(default_factory=dict)  # KB, the largest of the op's timed processes

    def record(self, op: str, rnd: int, value: float) -> None:
        self.samples.setdefault(op, {})[rnd] = value
        if not op.startswith("git.") and "last" in PEAK_RSS:  # every other row is one timed() process
            self.peak_rss[op] = max(self.peak_rss.get(op, 0), PEAK_RSS.pop("last"))

    def problem(self, msg: str) -> None:
        log(f"PROBLEM {msg}")
        self.problems.append(msg)


PEAK_RSS: dict[str, int] = {}  # the last timed command's peak RSS in KB under "last" (see timed)


def timed(cmd: list[str], *, cwd: Path, env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run one whole process; wall time from spawn to exit. Its peak RSS (the child's getrusage, from wait4) goes to
    PEAK_RSS["last"]; through the resident server the work runs in the server's forked worker, which this does not
    see: only the rows with the server off (`cold`) measure a command's memory."""
    secs, rc, out, err, rss = spawn(cmd, cwd=cwd, env=env, timeout=600)
    PEAK_RSS["last"] = rss
    return secs, subprocess.CompletedProcess(cmd, rc, out.decode(errors="replace"), err.decode(errors="replace"))


@dataclass
class Tree:
    """One codexr checkout whose commands are timed: `codexr` (this one) or `baseline` (--baseline DIR)."""

    name: str
    root: Path
    exec_env: dict[str, str] = field(default_factory=dict)
    snap_env: dict[str, str] = field(default_factory=dict)
    snap_id: str = ""

    server: bool = False
    """Whether this tree's commands may run in a resident server (the `codexr` tree, and a baseline that has one;
    `cold` is the same checkout with CODEXR_SERVER=0)."""

    def cmd(self, *args: str) -> list[str]:
        """`codexr ARGS` as the console script runs it: `python -m app` (app/launch.py) with cwd = the checkout (its
        packages first); a checkout from before the launcher: `python -m app.cli`."""
        module = "app" if (self.root / "app" / "launch.py").exists() else "app.cli"
        return [sys.executable, "-m", module, *args]

    def env(self, env: dict[str, str], run_dir: Path) -> dict[str, str]:
        """`env` for this tree's commands: a private runtime directory for its server, or the server off."""
        # The runtime directory also holds the workspace's change monitor (snapshot_store/detect/), which every tree's
        # captures ask, with the server or without.
        if not self.server:
            return {**env, "CODEXR_SERVER": "0", "CODEXR_RUNTIME_DIR": str(runtime_of(run_dir))}
        # on whatever the caller's environment says (CODEXR_SERVER=0 there made the warm-up wait 120 s for a server)
        return {**env, "CODEXR_SERVER": "1", "CODEXR_RUNTIME_DIR": str(runtime_of(run_dir))}


def runtime_of(run_dir: Path) -> Path:
    """The servers' runtime directory of one run: below the home directory, as codexr uses none below /tmp (where
    a Codex sandbox may write), one per run directory."""
    runtime = Path.home() / ".cache" / "codexr-bench" / run_dir.name
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(runtime.parent, 0o700)
    return runtime


class Bench:
    def __init__(self, args: argparse.Namespace, run_dir: Path) -> None:
        self.args = args
        self.run_dir = run_dir
        self.rec = Recorder(args.rounds)
        self.base_env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        # An installed codexr has its bytecode compiled (pip does it); with PYTHONDONTWRITEBYTECODE set (as in
        # this project's sandboxes) every command would re-compile this checkout's sources (~0.1 s, measured).
        self.base_env.pop("PYTHONDONTWRITEBYTECODE", None)
        self.trees = [Tree("codexr", REPO_ROOT, server=True)]
        if (REPO_ROOT / "app" / "launch.py").exists() and not args.no_cold:
            self.trees.append(Tree("cold", REPO_ROOT))
        if args.baseline:  # through its own resident server when it has one: like is compared with like
            base = Path(args.baseline).resolve()
            self.trees.append(Tree("baseline", base, server=(base / "app" / "launch.py").exists()))

    # ---------------------------------------------------------------------------------------- setup

    def setup_exec(self) -> None:
        import codex_cli_bin  # type: ignore[import-untyped]

        from app.codex.scripted_model import ScriptedModel, add_file, message, write_codex_home

        self.codex = str(codex_cli_bin.bundled_codex_path())
        self.model = ScriptedModel().start()
        self.model.script(PROMPT, [message(REPLY)])
        self.model.script(EDIT_PROMPT, [add_file(EDIT_FILE, "made by the turn a rewind takes back\n"), message(REPLY)])
        self.exec_ws = self.run_dir / "exec-ws"
        self.exec_ws.mkdir()
        (self.exec_ws / "README.md").write_text("a small workspace for a trivial turn\n")
        (self.exec_ws / "main.py").write_text("print('hello')\n")
        subprocess.run(["git", "init", "-q"], cwd=self.exec_ws, check=True)
        subprocess.run(["git", "add", "-A"], cwd=self.exec_ws, check=True)
        self.codex_env = {**self.base_env, **write_codex_home(self.run_dir / "exec-home", self.model.base_url)}
        for tree in self.trees:
            tree.exec_env = tree.env({**self.base_env, **write_codex_home(self.run_dir / f"exec-home-{tree.name}",
                                                                           self.model.base_url)}, self.run_dir)
        # One untimed run of each first: Codex's first start on a never-used CODEX_HOME creates its state files
        # (and two first starts must not race); Python writes the checkout's bytecode.
        self.codex_exec(-1)
        for tree in self.trees:
            self.codexr_exec(tree, -1)
        self.wait_for_server()
        for tree in self.trees:  # untimed again: the first command the resident server runs
            self.codexr_exec(tree, -1)

    def wait_for_server(self) -> None:
        """Wait until the resident server the first commands started is listening (it imports for a few seconds)."""
        runtime = runtime_of(self.run_dir)
        if not any(tree.server for tree in self.trees) or not runtime.is_dir():
            return
        deadline = time.monotonic() + 120
        while len(list(runtime.glob("*.sock.pid"))) < sum(tree.server for tree in self.trees):
            if time.monotonic() > deadline:
                raise SystemExit(f"no resident server came up in {runtime}: see its *.log")
            time.sleep(0.2)

    def stop_servers(self) -> None:
        """`codexr server stop` in this run's runtime directory (its servers would wait out their idle timeout)."""
        for tree in self.trees:
            if tree.server:
                subprocess.run(tree.cmd("server", "stop"), cwd=tree.root, env=tree.env(self.base_env, self.run_dir),
                               capture_output=True, check=False)
        for lock in runtime_of(self.run_dir).glob("m-*.sock.lock"):  # the change monitors this run started
            named = lock.read_text().strip()
            if named.isdigit():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(named), signal.SIGTERM)

    def setup_store(self) -> None:
        spec = WorkspaceSpec(files=self.args.files, mb=self.args.mb)
        log(f"generating a {spec.files}-file / {spec.mb} MB workspace ...")
        # --scale: the 100,000-file tree takes minutes to write and commit, so it is generated once and kept.
        self.ws = cached(spec, log) if self.args.scale else generate(self.run_dir / "ws", spec, log=log)
        self.modifier = Modifier(self.ws, seed=7)
        self.shadow = GitShadow(self.run_dir / "shadow.git", self.ws.root)
        log("cold snapshots (untimed): internal git repository, codexr ...")
        self.shadow.init()
        self.git_tree = self.shadow.snapshot()
        for tree in self.trees:
            home = self.run_dir / f"snap-home-{tree.name}"
            home.mkdir()
            tree.snap_env = tree.env({**self.base_env, "CODEX_HOME": str(home)}, self.run_dir)
            tree.snap_id = self.codexr_capture(tree, -1)
            if not tree.snap_id:
                raise SystemExit(f"{tree.name}: snapshots capture failed on the cold run: see the PROBLEM above")
        self.wait_for_server()

    # ----------------------------------------------------------------------------------------- blocks

    def codex_exec(self, rnd: int) -> None:
        cmd = [self.codex, "exec", "--skip-git-repo-check", PROMPT]
        secs, res = timed(cmd, cwd=self.exec_ws, env=self.codex_env)
        if res.returncode != 0 or REPLY not in res.stdout:
            self.rec.problem(f"codex exec failed ({res.returncode}): {res.stdout[-300:]} {res.stderr[-500:]}")
        elif rnd >= 0:
            self.rec.record("codex.exec", rnd, secs)

    def codexr_exec(self, tree: Tree, rnd: int) -> None:
        secs, res = timed(tree.cmd("-C", str(self.exec_ws), "exec", PROMPT), cwd=tree.root, env=tree.exec_env)
        if res.returncode != 0 or REPLY not in res.stdout:
            self.rec.problem(f"{tree.name} exec failed ({res.returncode}): {res.stdout[-300:]} {res.stderr[-500:]}")
        elif rnd >= 0:
            self.rec.record(f"{tree.name}.exec", rnd, secs)

    def codex_exec_tree(self, rnd: int, ws: Path | None = None, op: str = "exec_tree") -> None:
        """The same trivial turn in the 11,000-file capture tree: what snapshots cost a turn in a large workspace.
        (`ws`, `op`: another tree, recorded as codex.OP.)"""
        cmd = [self.codex, "exec", "--skip-git-repo-check", PROMPT]
        secs, res = timed(cmd, cwd=ws or self.ws.root, env=self.codex_env)
        if res.returncode != 0 or REPLY not in res.stdout:
            self.rec.problem(f"codex exec (tree) failed ({res.returncode}): {res.stderr[-500:]}")
        elif rnd >= 0:
            self.rec.record(f"codex.{op}", rnd, secs)

    def codexr_exec_tree(self, tree: Tree, rnd: int, ws: Path | None = None, op: str = "exec_tree",
                         prompt: str = PROMPT) -> None:
        secs, res = timed(tree.cmd("-C", str(ws or self.ws.root), "exec", prompt), cwd=tree.root, env=tree.exec_env)
        if res.returncode != 0 or REPLY not in res.stdout:
            self.rec.problem(f"{tree.name} exec (tree) failed ({res.returncode}): {res.stderr[-500:]}")
        elif rnd >= 0:
            self.rec.record(f"{tree.name}.{op}", rnd, secs)

    def codexr_rewind_tree(self, tree: Tree, rnd: int) -> None:
        """A turn that adds one file to the capture tree (untimed), then `codexr rewind --to 1 --yes` of it (timed):
        the safety capture, the plan, the conversation's fork and the one file's removal, as a user's rewind."""
        made = self.ws.root / EDIT_FILE
        _secs, res = timed(tree.cmd("-C", str(self.ws.root), "exec", "--json", EDIT_PROMPT), cwd=tree.root,
                           env=tree.exec_env)
        PEAK_RSS.pop("last", None)
        if res.returncode != 0 or not made.exists():
            self.rec.problem(f"{tree.name} exec (rewind set-up) failed ({res.returncode}): {res.stderr[-500:]}")
            made.unlink(missing_ok=True)
            return
        thread = str(json.loads(res.stdout)["thread_id"])
        time.sleep(RACY_PAUSE)
        cmd = tree.cmd("-C", str(self.ws.root), "rewind", "--thread", thread, "--to", "1", "--yes", "--json")
        secs, res = timed(cmd, cwd=tree.root, env=tree.exec_env)
        if res.returncode != 0 or made.exists():
            self.rec.problem(f"round {rnd}: {tree.name} rewind failed ({res.returncode}): {res.stderr[-500:]}")
            made.unlink(missing_ok=True)
            return
        if rnd >= 0:
            self.rec.record(f"{tree.name}.rewind1", rnd, secs)

    def codexr_capture(self, tree: Tree, rnd: int, *, expect_unchanged: bool = False) -> str:
        cmd = tree.cmd("snapshots", "capture", "-C", str(self.ws.root), "--json")
        secs, res = timed(cmd, cwd=tree.root, env=tree.snap_env)
        if res.returncode != 0:
            self.rec.problem(f"{tree.name} snapshots capture failed ({res.returncode}): {res.stderr[-500:]}")
            return ""
        doc = json.loads(res.stdout)
        if expect_unchanged and not doc.get("unchanged"):
            self.rec.problem(f"round {rnd}: an 'unchanged' {tree.name} capture reported changes")
        if rnd >= 0:
            self.rec.record(f"{tree.name}.capture", rnd, secs)
        return str(doc["id"])

    def block_capture(self, tree: Tree, rnd: int) -> None:
        # The untimed sync absorbs the restore blocks' rewrites (new mtimes). It waits out the racy-timestamp window
        # first: a capture within 100 ms of a write cannot vouch for the stats it saw (FORMAT.md §7), so the next
        # capture would walk again (0.3-0.4 s) instead of checking the saved walk — that is "unchanged for 100 ms".
        time.sleep(RACY_PAUSE)
        self.codexr_capture(tree, -1)
        self.codexr_capture(tree, rnd, expect_unchanged=True)

    def capture_seeing(self, tree: Tree, rnd: int, op: str, what: str) -> None:
        """`codexr snapshots capture`, timed as `op` when it exits 0 and saw `what` change (else a PROBLEM)."""
        secs, res = timed(tree.cmd("snapshots", "capture", "-C", str(self.ws.root), "--json"), cwd=tree.root,
                          env=tree.snap_env)
        if res.returncode != 0 or json.loads(res.stdout).get("unchanged"):
            self.rec.problem(f"round {rnd}: {tree.name} capture of {what} failed or saw no change "
                             f"({res.returncode}): {res.stderr[-500:]}")
        else:
            self.rec.record(f"{tree.name}.{op}", rnd, secs)

    def block_capture_changed(self, tree: Tree, rnd: int) -> None:
        """One file rewritten since a capture the saved walk vouches for (untimed, then the racy window waited out),
        then `codexr snapshots capture` (timed: the check and the one file read again); the file is put back."""
        self.codexr_capture(tree, -1)
        time.sleep(RACY_PAUSE)
        rels = self.modifier.take(1)
        before = self.modifier.read(rels)
        self.modifier.rewrite(rels)
        self.capture_seeing(tree, rnd, "changed1", "a changed file")
        for rel, data in before.items():
            (self.ws.root / rel).write_bytes(data)

    def made_path(self) -> Path:
        """A new file's path, beside a tracked file of the tree (a directory of tracked files only)."""
        rel = self.modifier.take(1)[0]
        return self.ws.root / rel.rpartition("/")[0] / f"made_by_the_bench_{time.time_ns()}.txt"

    def block_capture_made(self, tree: Tree, rnd: int) -> None:
        """A file made since a capture the saved walk vouches for (untimed, then the racy window waited out), then
        `codexr snapshots capture` (timed); the file is removed again, after the racy window, and the next capture is
        timed too (a file removed); and the one after it (it drops the removed path's tombstone: it walked the whole
        tree for that before), so the capture row's untimed sync still leaves an unchanged tree."""
        self.codexr_capture(tree, -1)
        time.sleep(RACY_PAUSE)
        made = self.made_path()
        made.write_text("made between two captures\n")
        self.capture_seeing(tree, rnd, "made1", "a made file")
        time.sleep(RACY_PAUSE)
        made.unlink()
        self.capture_seeing(tree, rnd, "removed1", "a removed file")
        time.sleep(RACY_PAUSE)
        secs, res = timed(tree.cmd("snapshots", "capture", "-C", str(self.ws.root), "--json"), cwd=tree.root,
                          env=tree.snap_env)
        if res.returncode != 0:
            self.rec.problem(f"round {rnd}: {tree.name} capture after a removal failed: {res.stderr[-500:]}")
        else:
            self.rec.record(f"{tree.name}.after_removed1", rnd, secs)

    def git_snapshot(self, op: str, rnd: int) -> None:
        """Git's `add -A .` + `write-tree` in the internal repository, timed as `op`."""
        t0 = time.perf_counter()
        self.shadow.snapshot()
        self.rec.record(op, rnd, time.perf_counter() - t0)

    def block_git_capture_made(self, rnd: int) -> None:
        self.shadow.snapshot()  # untimed sync
        made = self.made_path()
        made.write_text("made between two captures\n")
        self.git_snapshot("git.made1", rnd)
        made.unlink()
        self.git_snapshot("git.removed1", rnd)

    def block_git_capture_changed(self, rnd: int) -> None:
        self.shadow.snapshot()  # untimed sync
        rels = self.modifier.take(1)
        before = self.modifier.read(rels)
        self.modifier.rewrite(rels)
        self.git_snapshot("git.changed1", rnd)
        for rel, data in before.items():
            (self.ws.root / rel).write_bytes(data)

    def block_git_capture(self, rnd: int) -> None:
        self.shadow.snapshot()  # untimed sync
        t0 = time.perf_counter()
        tree = self.shadow.snapshot()  # two processes: add -A . and write-tree
        self.rec.record("git.unchanged", rnd, time.perf_counter() - t0)
        if tree != self.git_tree:
            self.rec.problem(f"round {rnd}: git's unchanged tree is {tree}, expected {self.git_tree}")

    def block_restore(self, tree: Tree, rnd: int) -> None:
        rels = self.modifier.take(1)
        expected = self.modifier.read(rels)
        self.modifier.rewrite(rels)
        cmd = tree.cmd("-C", str(self.ws.root), "snapshots", "restore", tree.snap_id, "--yes")
        secs, res = timed(cmd, cwd=tree.root, env=tree.snap_env)
        if res.returncode != 0 or self.modifier.check_restored(expected):
            self.rec.problem(f"round {rnd}: {tree.name} restore failed ({res.returncode}): {res.stderr[-500:]}")
            for rel, data in expected.items():  # put it back so the other blocks see the base tree
                (self.ws.root / rel).write_bytes(data)
            return
        self.rec.record(f"{tree.name}.restore1", rnd, secs)

    def block_git_restore(self, rnd: int, *, refresh: bool = True) -> None:
        """One file rewritten, then `git read-tree -u --reset` (timed). Git's index is refreshed first (untimed,
        `update-index --refresh`, as bench_store.py and bench_goals.py do): a stale index makes read-tree re-hash
        every entry whose stat moved since (the other blocks' restores rewrite files), a baseline slower than Git is
        (`refresh=False`: that stale baseline, which this script used before 2026-12-05)."""
        rels = self.modifier.take(1)
        expected = self.modifier.read(rels)
        if refresh:
            self.shadow.git("update-index", "-q", "--refresh")
        self.modifier.rewrite(rels)
        t0 = time.perf_counter()
        self.shadow.git("read-tree", "-u", "--reset", self.git_tree)
        secs = time.perf_counter() - t0
        if self.modifier.check_restored(expected):
            self.rec.problem(f"round {rnd}: git read-tree did not restore {rels}")
            for rel, data in expected.items():
                (self.ws.root / rel).write_bytes(data)
            return
        self.rec.record("git.restore1", rnd, secs)

    def block_python(self, rnd: int) -> None:
        secs, res = timed([sys.executable, "-c", "pass"], cwd=REPO_ROOT, env=self.base_env)
        self.rec.record("py.pass", rnd, secs)
        for tree in self.trees:
            secs, res = timed([sys.executable, "-c", "import app.cli"], cwd=tree.root, env=self.base_env)
            if res.returncode != 0:
                self.rec.problem(f"{tree.name}: python -c 'import app.cli' failed: {res.stderr[-300:]}")
            else:
                self.rec.record(f"{tree.name}.import_cli", rnd, secs)

    # -------------------------------------------------------------------------------------------- run

    def run(self) -> None:
        parts = set(self.args.only.split(","))
        blocks: list[tuple[str, Callable[[int], None]]] = [("python", self.block_python)]
        per_tree: list[tuple[str, Callable[[Tree, int], None]]] = []
        if "exec" in parts:
            log("exec: starting the scripted model and warming up the commands ...")
            self.setup_exec()
            blocks.append(("codex exec", self.codex_exec))
            per_tree.append(("exec", self.codexr_exec))
        if parts & {"capture", "capture-changed", "capture-made", "restore", "exec-tree", "rewind"}:
            self.setup_store()
        if "exec-tree" in parts:
            if "exec" not in parts:
                log("exec-tree: starting the scripted model and warming up the commands ...")
                self.setup_exec()
            self.codex_exec_tree(-1)  # untimed: each codexr's first snapshot of the tree (a cold walk)
            for tree in self.trees:
                self.codexr_exec_tree(tree, -1)
            blocks.append(("codex exec (tree)", self.codex_exec_tree))
            per_tree.append(("exec (tree)", self.codexr_exec_tree))
        if "rewind" in parts:
            if "exec-tree" in parts:
                log("warning: rewind changes the tree between exec-tree's turns (see --help): run them apart")
            if not parts & {"exec", "exec-tree"}:
                log("rewind: starting the scripted model and warming up the commands ...")
                self.setup_exec()
            for tree in self.trees:
                self.codexr_rewind_tree(tree, -1)  # untimed: the first rewind of each codexr in the tree
            if "restore" not in parts:
                blocks.append(("git restore", self.block_git_restore))
            per_tree.append(("rewind", self.codexr_rewind_tree))
        if "capture" in parts:
            blocks.append(("git capture", self.block_git_capture))
            per_tree.append(("capture", self.block_capture))
        if "capture-changed" in parts:
            blocks.append(("git capture, 1 file changed", self.block_git_capture_changed))
            per_tree.append(("capture, 1 file changed", self.block_capture_changed))
        if "capture-made" in parts:
            blocks.append(("git capture, 1 file made", self.block_git_capture_made))
            per_tree.append(("capture, 1 file made", self.block_capture_made))
        if "restore" in parts:
            blocks.append(("git restore", self.block_git_restore))
            per_tree.append(("restore", self.block_restore))
        for name, fn in per_tree:
            for tree in self.trees:
                blocks.append((f"{tree.name} {name}", functools.partial(fn, tree)))
        for rnd in range(self.args.rounds):
            shift = rnd % len(blocks)
            order = blocks[shift:] + blocks[:shift]
            log(f"round {rnd + 1}/{self.args.rounds}: {', '.join(name for name, _ in order)}")
            for _name, fn in order:
                fn(rnd)

    # ----------------------------------------------------------------------------------------- report

    def rows(self) -> list[tuple[str, str, str | None, float | None]]:
        """ROWS with the per-tree rows repeated; the baseline's rows get no target but an after/before ratio."""
        out = []
        for label, op, denom, limit in ROWS:
            if "{tree}" not in op:
                out.append((label, op, denom, limit))
                continue
            for tree in self.trees:
                suffix = " (resident server)" if tree.name == "codexr" and len(self.trees) > 1 else (
                    "" if tree.name == "codexr" else f" [{tree.name}]")
                out.append((label + suffix, op.format(tree=tree.name), denom,
                            limit if tree.name == "codexr" else None))
        return out

    def report(self) -> dict[str, Any]:
        s = self.rec.samples
        load = os.getloadavg() if hasattr(os, "getloadavg") else ()
        print(f"bench_startup: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
              f"loadavg {' '.join(f'{x:.2f}' for x in load)}")
        print(f"{self.args.rounds} rounds; whole processes; capture tree {self.args.files} files / {self.args.mb} MB; "
              "ratios are medians of per-round ratios")
        for tree in self.trees:
            print(f"  {tree.name}: {tree.root}")
        print()
        print(f"  {'operation':<42} {'median':>9} {'min-max':>15}  {'peak RSS':>8}  ratio")
        out: dict[str, Any] = {"rows": {}, "targets": {}, "problems": self.rec.problems}
        for label, op, denom, limit in self.rows():
            summ = summary(list(s.get(op, {}).values()))
            if summ is None:
                continue
            r = ratio(s.get(op), s.get(denom)) if denom else None
            rtext = f"{r['median']:.2f}x {denom} ({r['min']:.2f}-{r['max']:.2f})" if r is not None else ""
            if op.startswith("codexr."):
                for other in ("cold", "baseline"):
                    before = ratio(s.get(op), s.get(op.replace("codexr.", f"{other}.", 1)))
                    if before is not None:
                        rtext += f"; {before['median']:.2f}x {other}"
            rss = self.rec.peak_rss.get(op)
            rss_text = f"{rss / 1024:5.0f} MB" if rss and not op.startswith("codexr.") else ""  # server: its worker's
            print(f"  {label:<42} {summ['median'] * 1000:7.0f} ms "
                  f"{summ['min'] * 1000:6.0f}-{summ['max'] * 1000:<6.0f}  {rss_text:>8}  {rtext}")
            out["rows"][op] = {"label": label, "summary": summ, "samples": s.get(op), "ratio": r, "peak_rss_kb": rss}
            if limit is not None and r is not None:
                verdict = "PASS" if r["median"] <= limit else "MISS"
                out["targets"][op] = {"ratio": r["median"], "limit": limit, "verdict": verdict, "of": denom}
        if out["targets"]:
            print("\n== targets ==")
            for op, t in out["targets"].items():
                print(f"  {op + ' / ' + t['of']:<36} {t['ratio']:6.2f}x  <= {t['limit']:.1f}x  {t['verdict']}")
        for msg in self.rec.problems:
            print(f"PROBLEM: {msg}")
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--quick", action="store_true", help="a 2,000-file / 10 MB tree and 3 rounds")
    ap.add_argument("--scale", action="store_true",
                    help="the 100,000-file / 700 MB tree (generated once under ~/.cache) and 3 rounds")
    ap.add_argument("--rounds", type=int, default=None, help="interleaved rounds (default 7, --quick 3)")
    ap.add_argument("--files", type=int, default=None, help="tracked files of the capture tree (default 11,000)")
    ap.add_argument("--mb", type=float, default=None, help="MB of the capture tree (default 75)")
    ap.add_argument("--only", default="exec,capture,restore,exec-tree",
                    help="comma list of exec, capture, capture-changed (one file rewritten since the last capture), "
                         "capture-made (one file made beside tracked ones since the last capture), "
                         "restore, exec-tree (a codexr exec in the capture tree), rewind "
                         "(a turn adds a file to the capture tree, `codexr rewind --to 1 --yes` takes it back; not in "
                         "the default)")
    ap.add_argument("--baseline", metavar="DIR",
                    help="another codexr checkout (e.g. a worktree of main) timed in the same rounds, for before/after")
    ap.add_argument("--no-cold", action="store_true",
                    help="skip the rows of this checkout with the resident server off (CODEXR_SERVER=0)")
    ap.add_argument("--dir", default=None, help="parent of the run's fresh temporary directory")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--json", metavar="FILE", help="write samples, summaries, ratios and targets as JSON")
    args = ap.parse_args()
    args.rounds = args.rounds or (3 if args.quick or args.scale else 7)
    args.files = args.files or (2000 if args.quick else 100_000 if args.scale else 11000)
    args.mb = args.mb or (10.0 if args.quick else 700.0 if args.scale else 75.0)
    run_dir = Path(tempfile.mkdtemp(prefix="bench-startup-", dir=args.dir))
    bench = Bench(args, run_dir)
    try:
        bench.run()
        out = bench.report()
        if args.json:
            out["meta"] = {"rounds": args.rounds, "files": args.files, "mb": args.mb, "python": sys.version,
                           "baseline": args.baseline}
            Path(args.json).write_text(json.dumps(out, indent=2, default=str))
    finally:
        bench.stop_servers()
        model = getattr(bench, "model", None)
        if model is not None:
            model.stop()
        if args.keep:
            log(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)
            shutil.rmtree(runtime_of(run_dir), ignore_errors=True)  # its servers' directory, below ~/.cache
    return 1 if bench.rec.problems else 0


if __name__ == "__main__":
    sys.exit(main())
