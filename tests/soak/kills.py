"""SIGKILL trials of capture, restore, gc, rewind and redo, and the checks run after each kill."""

from __future__ import annotations

import json
import random
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import trees
from .runner import KILL_SYSCALLS, Codexr, Run, pick_fault
from .trees import Layout, Tree

GC_ARGS = ("-c", "file_snapshots.gc_grace_seconds=0", "-c", "file_snapshots.retention_max_snapshots=1")
STORE_OPS = ("capture", "restore", "gc")
AGENT_OPS = ("rewind", "redo")
OPS = STORE_OPS + AGENT_OPS


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


def files_and_links(t: Tree) -> Tree:
    """A listing without directories (a snapshot holds directory listings, not directory modes)."""
    return {k: v for k, v in t.items() if v[0] != "dir"}


def same_files(a: Tree, b: Tree) -> bool:
    return files_and_links(a) == files_and_links(b)


class Soak:
    """Builds fixtures once, then runs kill trials against fresh copies of them."""

    def __init__(self, base: Path, *, files: int, seed: int, log: Callable[[str], None] = print) -> None:
        self.base = base
        self.files = files
        self.seed = seed
        self.log = log
        self.lay = Layout(base / "trial")
        self.templates = base / "templates"
        self.templates.mkdir(parents=True, exist_ok=True)
        self.fixtures: dict[str, Fixture] = {}
        self.model: Any = None
        self.model_env: dict[str, str] = {}
        self._into: bool | None = None

    # ----------------------------------------------------------------------------------- helpers

    def cx(self, extra_env: dict[str, str] | None = None) -> Codexr:
        return Codexr(self.lay.home, self.lay.ws, {**self.model_env, **(extra_env or {})})

    def save(self, name: str) -> Path:
        dst = self.templates / name
        dst.mkdir(exist_ok=True)
        for part in ("ws", "home", "outside"):
            trees.copy_tree(self.lay.base / part, dst / part)
        return dst

    def load(self, template: Path) -> None:
        self.lay.base.mkdir(parents=True, exist_ok=True)
        for part in ("ws", "home", "outside"):
            trees.copy_tree(template / part, self.lay.base / part)
        if self.lay.scratch.exists():
            shutil.rmtree(self.lay.scratch)
        self.lay.scratch.mkdir()

    def ok(self, *args: str) -> Run:
        r = self.cx().run(*args)
        if r.rc != 0 or "Traceback" in r.stderr:
            raise RuntimeError(f"fixture step failed:\n{r.show()}")
        return r

    def snapshots(self) -> list[tuple[str, str]]:
        """(id, kind) of the workspace's snapshots, oldest first."""
        r = self.cx().run("snapshots", "list", "--json")
        if r.rc != 0:
            return []
        return [(d["id"], d["kind"]) for d in r.json()]

    def into_flag(self) -> bool:
        """Does `snapshots restore` take `--into DIR` (restoring into a directory that is not the snapshot's root)?"""
        if self._into is None:
            r = self.cx().run("snapshots", "restore", "--help")
            self._into = "--into" in r.stdout
        return self._into

    def restore_elsewhere(self, snap: str, dest: Path) -> Run:
        """Restore a snapshot into an empty directory."""
        dest.mkdir(parents=True)
        if self.into_flag():
            return self.cx().run("snapshots", "restore", snap, "--into", str(dest), "--yes")
        return self.cx().run("snapshots", "restore", snap, "-C", str(dest), "--yes")

    def check_restores_exactly(self, t: Trial, snap: str, expected: Tree, check: str) -> None:
        dest = self.lay.scratch / f"r{len(list(self.lay.scratch.iterdir()))}"
        r = self.restore_elsewhere(snap, dest)
        if r.rc != 0:
            t.fail(check, f"restore of {snap[:12]} into an empty directory failed: {r.show()}")
            return
        got = files_and_links(trees.listing(dest))
        want = files_and_links(expected)
        if got != want:
            lost = [k for k in want if got.get(k) != want[k]]
            t.files_lost += len(lost)
            t.fail(check, f"{snap[:12]} restored into an empty directory differs: {trees.diff(got, want)}")

    # ---------------------------------------------------------------------------------- fixtures

    def build_store_fixtures(self) -> None:
        """capture: workspace T2, store {S1}; restore: T2, {S1, S2}, restore S1; gc: T3, {S1, S2, S3}."""
        rng = random.Random(self.seed)
        if self.lay.base.exists():
            shutil.rmtree(self.lay.base)
        self.lay.base.mkdir(parents=True)
        self.lay.home.mkdir()
        self.lay.scratch.mkdir()
        trees.build_initial(self.lay.ws, self.lay.outside, rng, self.files)
        t1 = trees.listing(self.lay.ws)
        s1 = self.ok("snapshots", "capture", "--label", "S1").stdout.split()[0]
        trees.shell_changes(self.lay.ws, rng, "a")
        t2 = trees.listing(self.lay.ws)
        cap = self.save("capture")
        self.fixtures["capture"] = self._measure("capture", ("snapshots", "capture"), t2, t2, cap,
                                                 {s1: t1})
        s2 = self.ok("snapshots", "capture", "--label", "S2").stdout.split()[0]
        res = self.save("restore")
        ref = self.ok("snapshots", "restore", s1, "--yes")
        after = trees.listing(self.lay.ws)
        fx = self._measure("restore", ("snapshots", "restore", s1, "--yes"), t2, after, res, {s1: t1, s2: t2})
        if not same_files(after, t1):
            fx.notes.append(f"reference restore of S1 differs from the tree S1 was taken of: "
                            f"{trees.diff(files_and_links(after), files_and_links(t1))}\n{ref.stdout[-800:]}")
        self.fixtures["restore"] = fx
        self.load(res)
        trees.shell_changes(self.lay.ws, random.Random(self.seed + 1), "b", fraction=0.1)
        t3 = trees.listing(self.lay.ws)
        s3 = self.ok("snapshots", "capture", "--label", "S3").stdout.split()[0]
        gct = self.save("gc")
        self.fixtures["gc"] = self._measure("gc", (*GC_ARGS, "snapshots", "gc"), t3, t3, gct,
                                            {s1: t1, s2: t2, s3: t3})

    def build_agent_fixtures(self) -> None:
        """rewind: a thread of three prompts (patches and a shell command) over the workspace, rewound to
        prompt 2; redo: the same after that rewind, redone."""
        from app.scripted_model import (
            ScriptedModel,
            add_file,
            delete_file,
            message,
            shell,
            update_file,
            write_codex_home,
        )

        rng = random.Random(self.seed + 7)
        if self.model is None:
            self.model = ScriptedModel().start()
        if self.lay.base.exists():
            shutil.rmtree(self.lay.base)
        self.lay.base.mkdir(parents=True)
        self.lay.scratch.mkdir()
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
        first = self.ok("exec", "--json", "p1 soak").json()
        thread = first["thread_id"]
        trees.shell_changes(self.lay.ws, rng, "b", fraction=0.02)  # the user's shell between prompts
        p1 = trees.listing(self.lay.ws)  # what a rewind to prompt 2 returns to
        self.ok("exec", "--thread", thread, "p2 soak")
        self.ok("exec", "--thread", thread, "p3 soak")
        p3 = trees.listing(self.lay.ws)
        rew = self.save("rewind")
        args = ("rewind", "--thread", thread, "--to", "2", "--yes")
        doc = self.ok(*args, "--json").json()
        fork = doc["thread_id"]
        after = trees.listing(self.lay.ws)
        fx = self._measure("rewind", args, p3, after, rew, {}, follow=False)
        fx.thread = thread
        if not same_files(after, p1):
            fx.notes.append(f"reference rewind differs from the tree after prompt 1: "
                            f"{trees.diff(files_and_links(after), files_and_links(p1))}")
        self.fixtures["rewind"] = fx
        self.load(rew)
        self.ok(*args)
        fork = self._forks(thread)[-1]
        red = self.save("redo")
        rargs = ("redo", "--thread", fork, "--yes")
        self.ok(*rargs)
        redone = trees.listing(self.lay.ws)
        fx = self._measure("redo", rargs, after, redone, red, {}, follow=False)
        fx.thread = fork
        if not same_files(redone, p3):
            fx.notes.append(f"reference redo differs from the tree before the rewind: "
                            f"{trees.diff(files_and_links(redone), files_and_links(p3))}")
        self.fixtures["redo"] = fx

    def _measure(self, op: str, args: tuple[str, ...], before: Tree, after: Tree, template: Path,
                 known: dict[str, Tree], follow: bool = True) -> Fixture:
        """Time an uninterrupted run and count its syscalls (the ranges the faults are drawn from)."""
        self.load(template)
        t0 = time.perf_counter()
        r = self.cx().run(*args)
        duration = time.perf_counter() - t0
        if r.rc != 0:
            raise RuntimeError(f"reference {op} failed:\n{r.show()}")
        self.load(template)
        old_ids, old_sidecars = {i for i, _k in self.snapshots()}, set(self.sidecars())
        counts = self.cx().count_syscalls(args, KILL_SYSCALLS, follow=follow)
        self.load(template)  # the counted run changed the store: later fixture steps start from the template
        self.log(f"[soak] {op}: reference run {duration:.2f}s, syscalls {counts}")
        return Fixture(op, args, before, after, counts, duration, template, known, follow=follow,
                       old_ids=old_ids, old_sidecars=old_sidecars)

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
        outside_before = trees.tree_hash(self.lay.outside)
        old_ids, old_sidecars = fx.old_ids, fx.old_sidecars
        cx = self.cx()
        if fault is not None:
            run, cleanup = fault(cx, fx)
            cleanup()
            t = Trial(op, n, run.fault, False)
            lines = run.stderr.strip().splitlines()
            if run.rc not in (0, 2) or (run.rc == 2 and (len(lines) != 1 or not lines[0].startswith("codexr: error:"))):
                t.fail("unclear_error", run.show())
        else:
            kind, at = pick_fault(rng, fx.counts, fx.duration)
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
        rec = self.cx().run("snapshots", "capture")
        if rec.rc != 0 or "Traceback" in rec.stderr:
            t.fail("recovery_capture", rec.show())
        elif t.journal_left and not re.search(r"interrupted", rec.stdout + rec.stderr, re.I):
            t.fail("recovery_silent", f"a restore journal was left by the kill and the next capture did not say "
                                      f"it finished or rolled it back: {rec.show()}")
        if journal_dir.exists() and any(journal_dir.glob("*.json")):
            t.fail("journal_still_there", f"after the recovery capture: {sorted(journal_dir.iterdir())}")
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

        # 3. the store is sound
        ver = self.cx().run("snapshots", "verify", "--full")
        if ver.rc != 0:
            t.fail("verify_full", ver.show())

        # 4. what the operation promises
        listed = self.snapshots()
        safety = [i for i, kind in listed if kind == "safety" and i not in old_ids]
        if op == "capture":
            latest = listed[-1][0] if listed else ""
            self.check_restores_exactly(t, latest, fx.before, "latest_restores_exactly")
        elif op == "gc":
            for snap, _kind in listed:
                self.check_restores_exactly(t, snap, fx.snapshot_trees.get(snap, fx.before), "listed_restores_exactly")
        elif op == "restore":
            self._check_safety(t, safety, fx, at_after)
        elif op == "rewind":
            self._check_rewind(t, fx, at_before, at_after, safety, old_sidecars)
        elif op == "redo":
            self._check_redo(t, fx, at_before, at_after, safety)

        # 5. nothing written outside the workspace
        if trees.tree_hash(self.lay.outside) != outside_before:
            t.wrote_outside = True
            t.fail("wrote_outside", f"the sentinel directory {self.lay.outside} changed")
        t.seconds = time.perf_counter() - started
        return t

    def _check_safety(self, t: Trial, safety: list[str], fx: Fixture, at_after: bool) -> None:
        """Restoring the kill's safety snapshot gives back the exact before-tree."""
        if not safety:
            if at_after:
                t.fail("no_safety_snapshot", "the workspace was restored but no safety snapshot is listed")
            return
        r = self.cx().run("snapshots", "restore", safety[0], "--yes")
        if r.rc != 0:
            t.fail("safety_undo", f"restoring safety snapshot {safety[0][:12]} failed: {r.show()}")
            return
        now = trees.listing(self.lay.ws)
        if not same_files(now, fx.before):
            lost = [k for k, v in files_and_links(fx.before).items() if now.get(k) != v]
            t.files_lost += len(lost)
            t.fail("safety_undo", f"safety snapshot {safety[0][:12]} did not give back the before-tree: "
                                  f"{trees.diff(files_and_links(now), files_and_links(fx.before))}")

    def _check_rewind(self, t: Trial, fx: Fixture, at_before: bool, at_after: bool, safety: list[str],
                      old_sidecars: set[str]) -> None:
        forks = [f for f in self._forks(fx.thread) if f not in old_sidecars]
        docs = self.sidecars()
        with_redo = [f for f in forks if docs[f].get("redo")]
        if at_after:
            if not with_redo:
                t.fail("redo_lost", f"the files were rewound but no thread holds a redo (forks: {forks})")
                self._check_safety(t, safety, fx, at_after)
                return
            r = self.cx().run("redo", "--thread", with_redo[-1], "--yes")
            now = trees.listing(self.lay.ws)
            if r.rc != 0 or not same_files(now, fx.before):
                lost = [k for k, v in files_and_links(fx.before).items() if now.get(k) != v]
                t.files_lost += len(lost)
                t.fail("redo_after_kill", f"{r.show()}\n{trees.diff(files_and_links(now), files_and_links(fx.before))}")
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
        doc = self.sidecars().get(fx.thread, {})
        if not doc.get("redo"):
            t.fail("redo_lost", "the redo did not happen and its entry is gone")
            return
        r = self.cx().run("redo", "--thread", fx.thread, "--yes")
        now = trees.listing(self.lay.ws)
        if r.rc != 0 or not same_files(now, fx.after):
            t.fail("redo_after_kill", f"{r.show()}\n{trees.diff(files_and_links(now), files_and_links(fx.after))}")

    def close(self) -> None:
        if self.model is not None:
            self.model.stop()
            self.model = None
