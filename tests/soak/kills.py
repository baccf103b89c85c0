"""SIGKILL trials of capture, restore, gc, rewind and redo, and the checks run after each kill.

Only the operation under test runs as a real `codexr` process (it is what gets killed). The checks after it
(recovery, verify, listing, restores into empty directories, the safety undo, the redo's files) run in this
process through the snapshot_store API, which is what those commands call: a check needs no process of its own
unless it proves something about the command line itself (`cli_checks=True` runs the recovery capture and the
redo as `codexr` commands too, as the full soak does).
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import trees
from .runner import KILL_SYSCALLS, Codexr, Run, pick_fault
from .trees import Layout, Tree

GC_ARGS = ("-c", "file_snapshots.gc_grace_seconds=0", "-c", "file_snapshots.retention_max_snapshots=1")
STORE_OPS = ("capture", "edit-capture", "restore", "gc")
EDITED = 12  # files an edit-capture trial rewrites in place (within Capturer._reread_only's 64)
AGENT_OPS = ("rewind", "redo")
OPS = STORE_OPS + AGENT_OPS
#: A reference run under `strace -c` is slower than a plain one; random instants are drawn over this share of it.
#: Measured (2,000 files, 200 trials each): store commands under `strace -f` took 1.7 s where plain runs ended by
#: 0.6-1.0 s, so with 0.8 ~60% of the random instants came after the command had exited; rewind/redo (strace on
#: the main thread only, Codex untraced) lost 25-40% that way with 0.8.
STRACE_SLOWDOWN = {True: 0.6, False: 0.7}  # by `follow` (strace -f)
#: What a template holds: the workspace, CODEX_HOME (store, sidecars, Codex's own files) and the outside sentinel.
PARTS = ("ws", "home", "outside")


@dataclass
class Trial:
    """One kill and what the checks after it found (`failures`: check name -> detail)."""

    op: str
    n: int
    fault: str
    killed: bool
    journal_left: bool = False
    failures: dict[str, str] = field(default_factory=dict)
    warnings: dict[str, str] = field(default_factory=dict)
    files_lost: int = 0
    wrote_outside: bool = False
    seconds: float = 0.0

    def fail(self, check: str, detail: str) -> None:
        self.failures.setdefault(check, detail[:3000])

    def as_json(self) -> dict[str, Any]:
        return {"op": self.op, "n": self.n, "fault": self.fault, "killed": self.killed,
                "journal_left": self.journal_left, "failures": self.failures, "warnings": self.warnings,
                "files_lost": self.files_lost, "wrote_outside": self.wrote_outside,
                "seconds": round(self.seconds, 2)}


@dataclass
class Fixture:
    """One operation's starting point (a saved trial directory) and its expected outcomes."""

    op: str
    args: tuple[str, ...]
    before: Tree
    after: Tree
    counts: dict[str, int]
    duration: float
    template: Path
    snapshot_trees: dict[str, Tree] = field(default_factory=dict)  # known snapshot id -> its workspace tree
    thread: str = ""  # rewind: the origin thread; redo: the fork holding the redo
    follow: bool = True  # strace -f (store commands) or only codexr's main thread (agent commands)
    old_ids: set[str] = field(default_factory=set)  # snapshots listed before the operation
    old_sidecars: set[str] = field(default_factory=set)  # thread sidecars before the operation
    notes: list[str] = field(default_factory=list)
    prepare: Callable[[], None] | None = None  # run after the template is in place (what a copy cannot carry)


def files_and_links(t: Tree) -> Tree:
    """A listing without directories (a snapshot holds directory listings, not directory modes)."""
    return {k: v for k, v in t.items() if v[0] != "dir"}


def same_files(a: Tree, b: Tree) -> bool:
    return files_and_links(a) == files_and_links(b)


def _short(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))[-1500:]


class Soak:
    """Builds fixtures once, then runs kill trials against fresh copies of them."""

    def __init__(self, base: Path, *, files: int, seed: int, log: Callable[[str], None] = print,
                 cli_checks: bool = False, server: bool = False) -> None:
        self.base = base
        self.files = files
        self.seed = seed
        self.log = log
        self.cli_checks = cli_checks
        self.lay = Layout(base / "trial")
        self.templates = base / "templates"
        self.templates.mkdir(parents=True, exist_ok=True)
        # Codex runs `bash -lc` (shell snapshots, the agent's commands). A login shell with the real HOME runs
        # `pyenv rehash`, whose lock file outlives a SIGKILLed shell and then stalls every later login shell:
        # the soak's processes get a HOME of their own with no shell start-up files.
        self.user_home = base / "user-home"
        self.user_home.mkdir(exist_ok=True)
        # Each killed command is a fresh interpreter: bytecode caching (off in this environment) saves ~0.25 s of
        # its ~1 s start, measured on the 2-core machine. The caches go where Python puts them (`__pycache__/`,
        # ignored by git) and are written by `warm()` before any reference run, so that no run counted or killed
        # spends its syscalls writing them.
        self.env = {"HOME": str(self.user_home), "PYTHONDONTWRITEBYTECODE": ""}
        # --server: every command through the console script's launcher and a resident server (app/server/server.py)
        # in a private runtime directory; the killed process is the caller, whose worker must die with it. Kills are
        # at random instants only (strace on the caller cannot reach the worker's syscalls).
        self.server = server
        # Not below /tmp, where the scratch trees are: codexr uses no runtime directory a sandbox could write.
        cache = Path.home() / ".cache" / "codexr-soak"
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        # A runtime directory in both modes: the change monitor (snapshot_store/detect/) lives there, so the kills
        # land on captures that trust its answers too (it is on wherever a runtime directory is, as for users).
        self.runtime = Path(tempfile.mkdtemp(prefix="rt-", dir=cache))
        self.env.update({"CODEXR_RUNTIME_DIR": str(self.runtime), "CODEXR_MONITOR_IDLE": "60"})
        if server:
            self.env.update({"CODEXR_SERVER": "1", "PYTHONSAFEPATH": "1"})
        self.fixtures: dict[str, Fixture] = {}
        self.model: Any = None
        self.model_env: dict[str, str] = {}
        self._scope: Any = None
        self._startup: float | None = None

    # ----------------------------------------------------------------------------------- helpers

    def cx(self, extra_env: dict[str, str] | None = None) -> Codexr:
        return Codexr(self.lay.home, self.lay.ws, {**self.env, **self.model_env, **(extra_env or {})})

    @contextmanager
    def store(self) -> Iterator[Any]:
        """The trial's store, opened in this process as `codexr` opens it."""
        from snapshot_store import Store

        st = Store.open(self.lay.home / "file_snapshots", protected=[self.lay.home])
        try:
            yield st
        finally:
            st.close()

    def scope(self) -> Any:
        """The capture scope `codexr` uses with this CODEX_HOME's config.toml."""
        if self._scope is None:
            from config.loader import load_settings

            self._scope = load_settings(self.lay.home).scope()
        return self._scope

    def warm(self) -> None:
        """Import every module a command may import, once, so their bytecode caches exist."""
        mods = ("app.cli", "app.cmds.snapshot_cmds", "app.cmds.agent_cmds", "app.session", "app.recording.sidecar",
                "snapshot_store.maint.gc", "snapshot_store.maint.verify", "snapshot_store.restore",
                "snapshot_store.detect.inotify")
        code = f"import importlib\nfor m in {mods!r}: importlib.import_module(m)"
        r = self.cx()._run([sys.executable, "-c", code], ["(warm)"], timeout=120, cwd=self.base)
        if r.rc != 0:
            raise RuntimeError(f"warming the bytecode caches failed:\n{r.show()}")

    def startup(self) -> float:
        """How long `codexr` takes to start and do nothing (`--help`), the fastest of two runs."""
        if self._startup is None:
            times = []
            for _ in range(2):
                t0 = time.perf_counter()
                if self.server:  # a caller's start: the interpreter and the launcher, then the server's fork runs
                    self.cx()._run([sys.executable, "-c", "import app.launch"], ["(start)"], timeout=60)
                else:
                    self.cx().run("--help")
                times.append(time.perf_counter() - t0)
            self._startup = min(times)
            self.log(f"[soak] codexr start-up {self._startup:.2f}s")
        return self._startup

    def save(self, name: str) -> Path:
        dst = self.templates / name
        dst.mkdir(exist_ok=True)
        trees.copy_parts(self.lay.base, dst, PARTS)
        return dst

    def load(self, template: Path) -> None:
        self.lay.base.mkdir(parents=True, exist_ok=True)
        trees.copy_parts(template, self.lay.base, PARTS)
        if self.lay.scratch.exists():
            shutil.rmtree(self.lay.scratch)
        self.lay.scratch.mkdir()

    def ok(self, *args: str) -> Run:
        r = self.cx().run(*args)
        if r.rc != 0 or "Traceback" in r.stderr:
            raise RuntimeError(f"fixture step failed:\n{r.show()}")
        return r

    def capture(self, label: str | None = None) -> str:
        """A fixture snapshot, taken in-process (as `codexr snapshots capture` takes it)."""
        with self.store() as st:
            return str(st.at(self.lay.ws).capture(label=label, scope=self.scope()).id)

    def snapshots(self) -> list[tuple[str, str]]:
        """(id, kind) of the workspace's snapshots, oldest first."""
        with self.store() as st:
            return [(i.id, i.kind) for i in st.list_snapshots(self.lay.ws)]

    def restore_here(self, snap: str) -> None:
        """Restore a snapshot into the workspace (in-process, as `codexr snapshots restore --yes`)."""
        with self.store() as st:
            st.at(self.lay.ws).restore(snap, scope=self.scope())

    def check_restores_exactly(self, t: Trial, snap: str, expected: Tree, check: str) -> None:
        """Restoring `snap` into an empty directory gives `expected`'s files exactly."""
        dest = self.lay.scratch / f"r{len(list(self.lay.scratch.iterdir()))}"
        dest.mkdir(parents=True)
        try:
            with self.store() as st:
                st.at(dest).restore(snap, into=True, scope=self.scope())
        except Exception as exc:  # any failure is the finding
            t.fail(check, f"restore of {snap[:12]} into an empty directory failed: {_short(exc)}")
            return
        got = files_and_links(trees.listing(dest))
        want = files_and_links(expected)
        if got != want:
            lost = [k for k in want if got.get(k) != want[k]]
            t.files_lost += len(lost)
            t.fail(check, f"{snap[:12]} restored into an empty directory differs: {trees.diff(got, want)}")

    # ---------------------------------------------------------------------------------- fixtures

    def _fresh(self) -> None:
        if self.lay.base.exists():
            shutil.rmtree(self.lay.base)
        self.lay.base.mkdir(parents=True)
        self.lay.home.mkdir()
        self.lay.scratch.mkdir()
        self._scope = None
        self.warm()

    def build_store_fixtures(self) -> None:
        """capture: workspace T2, store {S1}; restore: T2, {S1, S2}, restore S1; gc: T3, {S1, S2, S3}."""
        rng = random.Random(self.seed)
        self._fresh()
        trees.build_initial(self.lay.ws, self.lay.outside, rng, self.files)
        t1 = trees.listing(self.lay.ws)
        s1 = self.capture("S1")
        trees.shell_changes(self.lay.ws, rng, "a")
        t2 = trees.listing(self.lay.ws)
        cap = self.save("capture")
        self.fixtures["capture"] = self._measure("capture", ("snapshots", "capture"), t2, cap, {s1: t1})
        # edit-capture: files changed in place since a capture whose saved walk vouches for the tree, so the killed
        # capture reads only those (Capturer._reread_only). A copied template has new inodes, which no saved walk
        # vouches for: each trial takes that capture and makes the edits after the copy (`prepare`).
        self.load(cap)
        self._edit_in_place()
        self.fixtures["edit-capture"] = self._measure("edit-capture", ("snapshots", "capture"),
                                                      trees.listing(self.lay.ws), cap, {s1: t1},
                                                      prepare=self._edit_in_place)
        self.load(cap)
        s2 = self.capture("S2")
        res = self.save("restore")
        fx = self._measure("restore", ("snapshots", "restore", s1, "--yes"), t2, res, {s1: t1, s2: t2})
        if not same_files(fx.after, t1):
            fx.notes.append(f"reference restore of S1 differs from the tree S1 was taken of: "
                            f"{trees.diff(files_and_links(fx.after), files_and_links(t1))}")
        self.fixtures["restore"] = fx
        self.load(res)
        trees.shell_changes(self.lay.ws, random.Random(self.seed + 1), "b", fraction=0.1)
        t3 = trees.listing(self.lay.ws)
        s3 = self.capture("S3")
        gct = self.save("gc")
        fx = self._measure("gc", (*GC_ARGS, "snapshots", "gc"), t3, gct, {s1: t1, s2: t2, s3: t3})
        if not same_files(fx.after, t3):
            fx.notes.append("reference gc changed the workspace")
        self.fixtures["gc"] = fx

    def build_agent_fixtures(self) -> None:
        """rewind: a thread of three prompts (patches and a shell command) over the workspace, rewound to
        prompt 2; redo: the workspace after that rewind, redone. The thread is seeded once, in-process; each
        trial copies the whole CODEX_HOME (Codex's rollouts and databases are plain files) and workspace."""
        from app.codex.scripted_model import (
            ScriptedModel,
            add_file,
            delete_file,
            message,
            shell,
            update_file,
            write_codex_home,
        )
        from app.session import Session, SessionOptions
        from config.loader import load_settings

        rng = random.Random(self.seed + 7)
        if self.model is None:
            self.model = ScriptedModel().start()
        self._fresh()
        self.model_env = write_codex_home(self.lay.home, self.model.base_url)
        trees.build_initial(self.lay.ws, self.lay.outside, rng, self.files)
        trees.shell_changes(self.lay.ws, rng, "a")
        victim = sorted(p.relative_to(self.lay.ws).as_posix() for p in self.lay.ws.glob("d*/**/f*.txt")
                        if not p.is_symlink())[0]
        self.model.clear()
        self.model.script("p1 soak", [add_file("agent/notes.txt", "hello\n"), message("p1 done")])
        self.model.script("p2 soak", [update_file("agent/notes.txt", "hello", "HELLO"),
                                      add_file("agent/deep/b.txt", "b\n"), delete_file(victim), message("p2 done")])
        self.model.script("p3 soak", [shell("mkdir -p gen && for i in $(seq 1 40); do echo $i > gen/f$i.txt; done; "
                                            "chmod 600 gen/f1.txt; chmod 755 gen/f2.txt; ln -s f3.txt gen/link; "
                                            "rm -f agent/deep/b.txt; echo changed >> big.bin"),
                                      message("p3 done")])
        env = {**os.environ, **self.env, **self.model_env}
        opts = SessionOptions(cwd=self.lay.ws, codex_home=self.lay.home, settings=load_settings(self.lay.home),
                              env=env)
        with Session(opts) as session:
            thread = session.start_thread()
            outs = [session.run_turn(thread, "p1 soak")]
            trees.shell_changes(self.lay.ws, rng, "b", fraction=0.02)  # the user's shell between prompts
            p1 = trees.listing(self.lay.ws)  # what a rewind to prompt 2 returns to
            outs += [session.run_turn(thread, "p2 soak"), session.run_turn(thread, "p3 soak")]
        if any(o.status != "completed" for o in outs):
            raise RuntimeError(f"seeding the thread failed: {[(o.status, o.error) for o in outs]}")
        p3 = trees.listing(self.lay.ws)
        rew = self.save("rewind")
        args = ("rewind", "--thread", thread, "--to", "2", "--yes")
        fx = self._measure("rewind", args, p3, rew, {}, follow=False)
        fx.thread = thread
        if not same_files(fx.after, p1):
            fx.notes.append(f"reference rewind differs from the tree after prompt 1: "
                            f"{trees.diff(files_and_links(fx.after), files_and_links(p1))}")
        self.fixtures["rewind"] = fx
        # The redo starts where the reference rewind (left in the trial directory by _measure) ended.
        forks = self._forks(thread)
        if not forks:
            raise RuntimeError("the reference rewind left no fork")
        red = self.save("redo")
        rargs = ("redo", "--thread", forks[-1], "--yes")
        fx = self._measure("redo", rargs, self.fixtures["rewind"].after, red, {}, follow=False)
        fx.thread = forks[-1]
        if not same_files(fx.after, p3):
            fx.notes.append(f"reference redo differs from the tree before the rewind: "
                            f"{trees.diff(files_and_links(fx.after), files_and_links(p3))}")
        self.fixtures["redo"] = fx

    def _edit_in_place(self) -> None:
        """A capture whose saved walk vouches for the tree, then EDITED tracked files rewritten in place, the same way
        each time."""
        time.sleep(0.15)  # the copy just wrote every file: past the racy window, the capture may vouch for them
        self.capture("before the edits")
        files = sorted(p for p in self.lay.ws.rglob("*.txt") if p.is_file() and not p.is_symlink()
                       and ".git" not in p.parts)
        for p in files[::max(1, len(files) // EDITED)][:EDITED]:
            p.write_bytes(p.read_bytes()[:200] + b" edited in place\n")

    def _measure(self, op: str, args: tuple[str, ...], before: Tree, template: Path, known: dict[str, Tree],
                 follow: bool = True, prepare: Callable[[], None] | None = None) -> Fixture:
        """One uninterrupted reference run under `strace -c`: its syscall counts (the ranges the faults are drawn
        from), its duration (the range of the random instants) and its result (the after-tree). The trial
        directory is left as the run left it."""
        self.load(template)
        if prepare is not None:
            prepare()
        old_ids, old_sidecars = {i for i, _k in self.snapshots()}, set(self.sidecars())
        if self.server:
            self.start_server()
            t0 = time.perf_counter()
            ref = self.cx().run(*args)
            duration = time.perf_counter() - t0
            if ref.rc != 0:
                raise RuntimeError(f"{op}: the reference run failed:\n{ref.show()}")
            counts: dict[str, int] = {}  # only random instants: the caller's syscalls are not the command's
            after = trees.listing(self.lay.ws)
            self.log(f"[soak] {op}: reference run through the server {duration:.2f}s")
            return Fixture(op, args, before, after, counts, duration, template, known, follow=follow,
                           old_ids=old_ids, old_sidecars=old_sidecars, prepare=prepare)
        t0 = time.perf_counter()
        counts = self.cx().count_syscalls(args, KILL_SYSCALLS, follow=follow)
        duration = (time.perf_counter() - t0) * STRACE_SLOWDOWN[follow]
        after = trees.listing(self.lay.ws)
        if follow:
            # `strace -f` also waits for a change monitor the command started (it outlives the command: ~35 s idle),
            # which put most random instants after the command had exited: the instants come from a plain run.
            self.load(template)
            if prepare is not None:
                prepare()
            t0 = time.perf_counter()
            plain = self.cx().run(*args)
            duration = min(duration, time.perf_counter() - t0)
            if plain.rc != 0:
                raise RuntimeError(f"{op}: the plain reference run failed:\n{plain.show()}")
            if trees.listing(self.lay.ws) != after:
                self.log(f"[soak] {op}: the plain reference run left another tree than the traced one")
        self.log(f"[soak] {op}: reference run {duration:.2f}s, syscalls {counts}")
        return Fixture(op, args, before, after, counts, duration, template, known, follow=follow,
                       old_ids=old_ids, old_sidecars=old_sidecars, prepare=prepare)

    def sidecars(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        base = self.lay.home / "file_snapshots" / "refs" / "threads"
        for p in sorted(base.glob("*.json")) if base.exists() else []:
            try:
                out[p.stem] = json.loads(p.read_bytes())
            except ValueError:
                out[p.stem] = {"damaged": True}
        return out

    def _forks(self, origin: str) -> list[str]:
        docs = self.sidecars()
        return sorted((t for t, d in docs.items() if d.get("forked_from") == origin),
                      key=lambda t: docs[t].get("created", 0))

    # ------------------------------------------------------------------------------------ trials

    def trial(self, op: str, n: int, rng: random.Random,
              fault: Callable[[Codexr, Fixture], tuple[Run, Callable[[], None]]] | None = None) -> Trial:
        """One fault (by default a SIGKILL) during `op`, then every check. `fault` replaces the kill: it runs
        the operation its own way and returns the run and a cleanup to call before the checks."""
        fx = self.fixtures[op]
        started = time.perf_counter()
        self.load(fx.template)
        if fx.prepare is not None:
            fx.prepare()
        outside_before = trees.tree_hash(self.lay.outside)
        cx = self.cx()
        if fault is not None:
            run, cleanup = fault(cx, fx)
            cleanup()
            t = Trial(op, n, run.fault, False)
            lines = run.stderr.strip().splitlines()
            if run.rc not in (0, 2) or (run.rc == 2 and (len(lines) != 1 or not lines[0].startswith("codexr: error:"))):
                t.fail("unclear_error", run.show())
        else:
            kind, at = pick_fault(rng, fx.counts, fx.duration, self.startup())
            if kind == "instant":
                run = cx.kill_at_instant(fx.args, float(at))
            else:
                run = cx.kill_at_syscall(fx.args, kind, int(at), follow=fx.follow)
            t = Trial(op, n, run.fault, run.killed)
            if not run.killed and run.rc != 0:
                t.fail("uninterrupted_run", run.show())
        if "Traceback" in run.stderr:
            t.fail("traceback", run.show())
        journal_dir = self.lay.home / "file_snapshots" / "journal"
        t.journal_left = journal_dir.exists() and any(journal_dir.glob("*.json"))

        # 1. right after the kill: no torn file, nothing in a third state (temp files of the write aside)
        now = trees.listing(self.lay.ws)
        bad = trees.mixed(now, fx.before, fx.after, allow_tmp=True)
        if bad:
            t.files_lost += len(bad)
            t.fail("torn_after_kill", "; ".join(bad[:6]))

        # 2. the next command finishes or rolls back the interrupted operation, and says so
        self._recover(t, journal_dir)
        now = trees.listing(self.lay.ws)
        bad = trees.mixed(now, fx.before, fx.after, allow_tmp=False)
        if bad:
            t.files_lost += len(bad)
            t.fail("mixed_after_recovery", "; ".join(bad[:6]))
        at_before, at_after = same_files(now, fx.before), same_files(now, fx.after)
        if not bad and not (at_before or at_after):
            t.fail("half_applied_after_recovery",
                   f"each path is in its before- or after-state, but the workspace is neither wholly: "
                   f"vs before {trees.diff(files_and_links(now), files_and_links(fx.before), 4)}; "
                   f"vs after {trees.diff(files_and_links(now), files_and_links(fx.after), 4)}")

        # 3. the store is sound (`snapshots verify --full`)
        listed: list[tuple[str, str]] = []
        try:
            from snapshot_store.maint.verify import verify

            with self.store() as st:
                # Nothing runs now (the killed command is dead, the recovery capture returned): no snapshot file
                # may be waiting for its ref line, however young — an interrupted commit was finished or dropped.
                report = verify(st, full=True, in_progress=0.0)
                listed = [(i.id, i.kind) for i in st.list_snapshots(self.lay.ws)]
            if not report.ok:
                t.fail("verify_full", "; ".join(report.problems[:8]))
        except Exception as exc:  # the store cannot even be read: that is the finding
            t.fail("verify_full", _short(exc))

        # 4. what the operation promises
        safety = [i for i, kind in listed if kind == "safety" and i not in fx.old_ids]
        if op in ("capture", "edit-capture"):
            latest = listed[-1][0] if listed else ""
            self.check_restores_exactly(t, latest, fx.before, "latest_restores_exactly")
        elif op == "gc":
            for snap, _kind in listed:
                self.check_restores_exactly(t, snap, fx.snapshot_trees.get(snap, fx.before), "listed_restores_exactly")
        elif op == "restore":
            self._check_safety(t, safety, fx, at_after)
        elif op == "rewind":
            self._check_rewind(t, fx, at_before, at_after, safety)
        elif op == "redo":
            self._check_redo(t, fx, at_before, at_after, safety)

        # 5. nothing written outside the workspace
        if trees.tree_hash(self.lay.outside) != outside_before:
            t.wrote_outside = True
            t.fail("wrote_outside", f"the sentinel directory {self.lay.outside} changed")
        t.seconds = time.perf_counter() - started
        return t

    def _recover(self, t: Trial, journal_dir: Path) -> None:
        """`snapshots capture` after the kill: exit 0, and if a restore journal was left, say it was finished or
        rolled back (in-process: the capture's `recovered`, which the command prints)."""
        if self.cli_checks:
            rec = self.cx().run("snapshots", "capture")
            if rec.rc != 0 or "Traceback" in rec.stderr:
                t.fail("recovery_capture", rec.show())
            elif t.journal_left and not re.search(r"interrupted", rec.stdout + rec.stderr, re.I):
                t.fail("recovery_silent", f"a restore journal was left by the kill and the next capture did not "
                                          f"say it finished or rolled it back: {rec.show()}")
        else:
            try:
                with self.store() as st:
                    res = st.at(self.lay.ws).capture(scope=self.scope())
                if t.journal_left and (res.recovered is None or not re.search(r"interrupted", res.recovered.summary(),
                                                                              re.I)):
                    t.fail("recovery_silent", f"a restore journal was left by the kill and the next capture did not "
                                              f"say it finished or rolled it back: {res.recovered}")
            except Exception as exc:
                t.fail("recovery_capture", _short(exc))
        if journal_dir.exists() and any(journal_dir.glob("*.json")):
            t.fail("journal_still_there", f"after the recovery capture: {sorted(journal_dir.iterdir())}")

    def _undo_to(self, t: Trial, snap: str, want: Tree, check: str, what: str) -> None:
        """Restore `snap` into the workspace; it must give exactly `want`."""
        try:
            self.restore_here(snap)
        except Exception as exc:
            t.fail(check, f"restoring {what} {snap[:12]} failed: {_short(exc)}")
            return
        now = trees.listing(self.lay.ws)
        if not same_files(now, want):
            lost = [k for k, v in files_and_links(want).items() if now.get(k) != v]
            t.files_lost += len(lost)
            t.fail(check, f"{what} {snap[:12]} did not give back the expected tree: "
                          f"{trees.diff(files_and_links(now), files_and_links(want))}")

    def _check_safety(self, t: Trial, safety: list[str], fx: Fixture, at_after: bool) -> None:
        """Restoring the kill's safety snapshot gives back the exact before-tree."""
        if not safety:
            if at_after:
                t.fail("no_safety_snapshot", "the workspace was restored but no safety snapshot is listed")
            return
        self._undo_to(t, safety[0], fx.before, "safety_undo", "safety snapshot")

    def _redo_files(self, t: Trial, thread: str, want: Tree) -> None:
        """A redo of `thread` gives back `want`: with `cli_checks` a real `codexr redo`, else its file half
        in-process (the restore of the redo entry's safety snapshot that `Session.redo` runs)."""
        if self.cli_checks:
            r = self.cx().run("redo", "--thread", thread, "--yes")
            now = trees.listing(self.lay.ws)
            if r.rc != 0 or not same_files(now, want):
                lost = [k for k, v in files_and_links(want).items() if now.get(k) != v]
                t.files_lost += len(lost)
                t.fail("redo_after_kill", f"{r.show()}\n{trees.diff(files_and_links(now), files_and_links(want))}")
            return
        entries = self.sidecars().get(thread, {}).get("redo") or []
        safety_id = entries[-1].get("safety_id") if entries else None
        if not safety_id:
            t.fail("redo_after_kill", f"the redo entry of {thread} names no safety snapshot: {entries[-1:]}")
            return
        self._undo_to(t, str(safety_id), want, "redo_after_kill", "the redo entry's safety snapshot")

    def _check_rewind(self, t: Trial, fx: Fixture, at_before: bool, at_after: bool, safety: list[str]) -> None:
        forks = [f for f in self._forks(fx.thread) if f not in fx.old_sidecars]
        docs = self.sidecars()
        with_redo = [f for f in forks if docs[f].get("redo")]
        if at_after:
            if not with_redo:
                t.fail("redo_lost", f"the files were rewound but no thread holds a redo (forks: {forks})")
                self._check_safety(t, safety, fx, at_after)
                return
            self._redo_files(t, with_redo[-1], fx.before)
        elif at_before:
            if forks and not with_redo:
                t.warnings["stray_fork"] = f"the rewind did not happen but left fork(s) {forks}"
            if with_redo:
                t.warnings["redo_without_rewind"] = f"files not rewound, yet {with_redo} hold a redo"
            self._check_safety(t, safety, fx, at_after)

    def _check_redo(self, t: Trial, fx: Fixture, at_before: bool, at_after: bool, safety: list[str]) -> None:
        if at_after:
            self._check_safety(t, safety, fx, at_after)
            return
        if not at_before:
            return  # already reported as mixed / half applied
        if not self.sidecars().get(fx.thread, {}).get("redo"):
            t.fail("redo_lost", "the redo did not happen and its entry is gone")
            return
        self._redo_files(t, fx.thread, fx.after)

    def start_server(self) -> None:
        """Start the resident server (once) and wait until it listens."""
        r = self.cx().run("server", "start", "--wait", "180", timeout=200, cwd=self.base)
        if r.rc != 0:
            raise RuntimeError(f"the resident server did not start:\n{r.show()}")

    def served(self) -> int:
        """How many commands the server's workers ran (its log), to show the trials went through it."""
        return sum(p.read_text(errors="replace").count(": client ")
                   for p in self.runtime.glob("*.log"))

    def monitors(self) -> int:
        """How many change monitors the trials started (each takes its lock file for life)."""
        return len(list(self.runtime.glob("m-*.sock.lock")))

    def close(self) -> None:
        if self.server:
            self.cx().run("server", "stop", timeout=60, cwd=self.base)
        if self.model is not None:
            self.model.stop()
            self.model = None
