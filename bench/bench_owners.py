#!/usr/bin/env python3
"""What the rewind's ownership rule (issue 34, app/rewind/owners.py) adds to planning a rewind, on the 11,000-file tree.

Run from the repository root:  .venv/bin/python bench/bench_owners.py [--quick] [--files N] [--rounds N] [--profile]

It builds bench_store's "plain" Git tree (workspace_gen.py) in a fresh directory, opens a snapshot store and records
a thread of `--turns` turns through the real store API (`store.at(ws).capture` before and after each turn): each turn
the "agent" rewrites a line of a few files, creates one and every third turn deletes one; between turns the "user"
appends a line to a file the agent never touched and makes a file of their own, and once appends a line to a file
the agent changed in the turn before (so `decide` merges it, cleanly). After the last turn the user edits once
more. The records are app.recording.sidecar.TurnRecord, as the sidecar holds them; no Codex is needed to plan.

Then, for rewinds undoing the last `--undo` turns (default 1, 3 and 10: undoing 1 merges nothing, the others merge
one and two files), in interleaved rounds whose order alternates:

* plan:        app.rewind.flow.preview with `Files.owners=None` — the store's `prepare(..., dry_run=True)` (the
               safety capture in memory, the plan), as `codexr rewind --dry-run` and the app's preview take it;
* plan + rule: the same with `Files.owners = owner_rule(store, records, numbers, first, last, ...)` (its
               construction included): `Files.keep_yours` loads the pre/post snapshots of every undone turn,
               tells whose change each path is and merges the file both changed;
* the rule alone: the time spent inside `keep_yours` during "plan + rule" (of which `owners(now)`, the snapshot
               diffing; the rest is `decide` and the plan's reasons).

Each is timed twice: with the store's caches as the previous plan left them (a session that planned before) and
with its snapshot caches dropped first (`store.forget_snapshots`: a one-shot `codexr rewind`, whose fresh store has
decoded nothing). The report gives medians over rounds, the added ms (per-round difference, then the median) and the
ratio (per round, then the median); see /work/shared/BENCH_NOTES.md for why. `--profile` runs cProfile over one
`keep_yours` of the largest rewind and prints where its time goes. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import shutil
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

from bench_store import log, ratio, summary  # noqa: E402
from workspace_gen import Workspace, WorkspaceSpec, generate  # noqa: E402

import app.rewind.flow as flow  # noqa: E402
from app.recording.sidecar import TurnRecord  # noqa: E402
from app.rewind.flow import Files, Place, preview  # noqa: E402
from app.rewind.owners import Owners, owner_rule  # noqa: E402
from snapshot_store import RestorePlan, ScopeSettings, Store  # noqa: E402
from snapshot_store.manifest import FileMap  # noqa: E402
from snapshot_store.restore import DELETE, LEAVE, WRITE  # noqa: E402

AGENT_EDITS = 4  # files whose line the agent rewrites per turn (plus one it creates, one it deletes every 3rd turn)
MIN_LINES = 12  # files edited here have at least this many lines (the merge's two hunks stay far apart)


# ------------------------------------------------------------------------------------------ the recorded thread


@dataclass
class Thread:
    """The recorded turns and who changed what, to check the plans against."""

    records: list[TurnRecord] = field(default_factory=list)
    agent: dict[str, int] = field(default_factory=dict)  # path -> last turn (1-based) that changed it
    user: dict[str, int] = field(default_factory=dict)  # path -> turn after which the user changed it
    both: dict[str, int] = field(default_factory=dict)  # path -> the agent's turn, changed by the user after it
    snapshots: list[str] = field(default_factory=list)


class Editor:
    """Line edits on files of the generated tree, from a shuffled pool of small text files with enough lines."""

    def __init__(self, ws: Workspace, seed: int) -> None:
        self.root = ws.root
        self.pool = sorted(ws.small_text)
        random.Random(seed).shuffle(self.pool)
        self.used: set[str] = set()

    def take(self) -> str:
        while self.pool:
            rel = self.pool.pop()
            if rel not in self.used and (self.root / rel).read_bytes().count(b"\n") >= MIN_LINES:
                self.used.add(rel)
                return rel
        raise SystemExit("ran out of files to edit: use a larger --files")

    def set_line(self, rel: str, i: int, text: str) -> None:
        p = self.root / rel
        lines = p.read_bytes().split(b"\n")
        lines[i] = text.encode()
        p.write_bytes(b"\n".join(lines))

    def append(self, rel: str, text: str) -> None:
        with open(self.root / rel, "ab") as fh:
            fh.write(text.encode() + b"\n")

    def create(self, near: str, name: str, text: str) -> str:
        rel = f"{os.path.dirname(near)}/{name}"
        (self.root / rel).write_bytes("".join(f"{text} line {i}\n" for i in range(20)).encode())
        return rel


def record_thread(store: Store, ws: Workspace, turns: int, seed: int) -> Thread:
    """Capture a thread of `turns` turns with hand edits between them (see the module's docstring)."""
    w, ed, th = store.at(ws.root), Editor(ws, seed), Thread()
    both_after = {max(1, turns - 1)}  # the user appends to a file the agent changed in this turn (decide)
    if turns >= 4:
        both_after.add(2)
    for n in range(1, turns + 1):
        pre = w.capture(label=f"bench pre-turn {n}").id
        changed = [ed.take() for _ in range(AGENT_EDITS)]
        for rel in changed:
            ed.set_line(rel, 1, f"# agent, turn {n}")
        changed.append(ed.create(changed[0], f"agent_new_{n}.py", f"agent turn {n}"))
        if n % 3 == 0:
            gone = ed.take()
            (ws.root / gone).unlink()
            changed.append(gone)
        post = w.capture(label=f"bench post-turn {n}").id
        th.records.append(TurnRecord(turn_id=f"bench-turn-{n:03d}", prompt=f"turn {n}", pre=pre, post=post,
                                     status="completed"))
        th.snapshots += [pre, post]
        th.agent.update(dict.fromkeys(changed, n))
        # Between this turn and the next (or after the last): the user's own work.
        if n % 2 == 0 or n == turns:
            hand = ed.take()
            ed.append(hand, f"# by hand after turn {n}")
            th.user[hand] = n
            th.user[ed.create(hand, f"hand_{n}.txt", f"hand after turn {n}")] = n
        if n in both_after:
            ed.append(changed[1], f"# by hand, after the agent's turn {n}")
            th.both[changed[1]] = n
    return th


# ------------------------------------------------------------------------------------------ one rewind


@dataclass
class Rewind:
    """A rewind undoing the thread's turns `first`..`last`, as app/rewind/rewinder.py's `_rewind_files` plans it."""

    undo: int
    first: int
    last: int
    target: str
    records: list[TurnRecord]
    numbers: dict[str, int]
    patched: list[str]  # the paths the agent's patches touched in the undone turns (targets.inside)


def rewind_of(th: Thread, undo: int) -> Rewind:
    last = len(th.records)
    first = last - undo + 1
    records = th.records[first - 1:]
    numbers = {r.turn_id: i + 1 for i, r in enumerate(th.records)}
    patched = sorted(p for p, n in th.agent.items() if n >= first)
    assert records[0].pre is not None
    return Rewind(undo, first, last, records[0].pre, records, numbers, patched)


class TimedFiles(Files):
    """Files whose keep_yours (the rule) reports its own time, and those of the rule's `owners(now)` and of
    `decide` inside it (flow's name for it is wrapped for the call: no app code changes)."""

    spent: dict[str, float]

    def keep_yours(self, store: Store, plan: RestorePlan, now: FileMap, dry_run: bool) -> None:
        rule = self.owners
        assert rule is not None

        def owners(m: FileMap) -> Owners:
            t = time.perf_counter()
            try:
                return rule(m)
            finally:
                self.spent["owners"] = time.perf_counter() - t

        merge = getattr(flow, "decide")  # noqa: B009 (flow's own name for it, which keep_yours calls)

        def decide(*args: Any) -> Any:
            t = time.perf_counter()
            try:
                return merge(*args)
            finally:
                self.spent["merge"] = time.perf_counter() - t

        self.owners = owners
        setattr(flow, "decide", decide)  # noqa: B010
        t0 = time.perf_counter()
        try:
            super().keep_yours(store, plan, now, dry_run)
        finally:
            self.spent["rule"] = time.perf_counter() - t0
            self.owners = rule
            setattr(flow, "decide", merge)  # noqa: B010


def plan_without(place: Place, rw: Rewind, known: list[str]) -> RestorePlan:
    return preview(place, Files(rw.target, None, known))[1].shown


def plan_with(place: Place, rw: Rewind, known: list[str], spent: dict[str, float]) -> RestorePlan:
    files = TimedFiles(rw.target, None, known)
    files.spent = spent
    files.owners = owner_rule(place.store, rw.records, rw.numbers, rw.first, rw.last, rw.patched)
    return preview(place, files)[1].shown


def check(rw: Rewind, th: Thread, without: RestorePlan, with_rule: RestorePlan) -> list[str]:
    """What the two plans must say: the rule leaves the user's paths, merges the file both changed, and takes the
    agent's own back like the plan without it."""
    problems = []
    a0 = {a.path: a for a in without.actions}
    a1 = {a.path: a for a in with_rule.actions}
    for p, n in th.user.items():
        if n < rw.first:
            continue  # the target already holds it
        if p not in a0 or a0[p].op not in (WRITE, DELETE):
            problems.append(f"{p}: the plan without the rule does not take the user's change back")
        if p in a1 and a1[p].op != LEAVE:
            problems.append(f"{p}: the rule does not keep the user's change ({a1[p].op}, {a1[p].reason})")
    for p, n in th.both.items():
        if n >= rw.first and (p not in a1 or not a1[p].reason.startswith("merged:")):
            why = f"{a1[p].op}, {a1[p].reason}" if p in a1 else "not in the plan"
            problems.append(f"{p}: the file both changed is not merged ({why})")
    for p, n in th.agent.items():
        if n >= rw.first and p not in th.both and (p not in a1 or a1[p].op not in (WRITE, DELETE)):
            why = f"{a1[p].op}, {a1[p].reason}" if p in a1 else "not in the plan"
            problems.append(f"{p}: the agent's change does not go back ({why})")
    return problems


def counts(plan: RestorePlan) -> dict[str, int]:
    out = {"write": 0, "delete": 0, "kept": 0, "merged": 0}
    for a in plan.actions:
        if a.reason.startswith("merged:"):
            out["merged"] += 1
        elif a.op == WRITE:
            out["write"] += 1
        elif a.op == DELETE:
            out["delete"] += 1
        elif a.reason.startswith("kept"):
            out["kept"] += 1
    return out


# ------------------------------------------------------------------------------------------ the run


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


def profile_rule(place: Place, rw: Rewind, known: list[str], cold: Callable[[], None]) -> str:
    """cProfile of one `keep_yours` (store caches dropped first), its top functions by cumulative time."""
    with place.store.at(place.cwd).prepare(rw.target, dry_run=True, known_paths=known, scope=place.scope) as ready:
        files = Files(rw.target, None, known)
        files.owners = owner_rule(place.store, rw.records, rw.numbers, rw.first, rw.last, rw.patched)
        cold()
        prof = cProfile.Profile()
        prof.enable()
        files.keep_yours(place.store, ready.plan, ready.safety.files, dry_run=True)
        prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(22)
    return out.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="a tiny tree (800 files / 5 MB) for a smoke test")
    ap.add_argument("--files", type=int, help="tracked files (default 11000; quick 800)")
    ap.add_argument("--mb", type=float, help="tracked MB (default 75; quick 5)")
    ap.add_argument("--turns", type=int, default=10, help="recorded turns (default 10)")
    ap.add_argument("--undo", default="1,3,10", help="comma list: how many of the last turns each rewind undoes")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 9; quick 5)")
    ap.add_argument("--journal", action="store_true",
                    help="turn the store's change journal on (a session's store) instead of walking per capture")
    ap.add_argument("--profile", action="store_true", help="cProfile one keep_yours of the largest rewind")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--dir", type=Path, help="parent of the run's fresh temporary directory (default /tmp)")
    ap.add_argument("--keep", action="store_true", help="keep the run directory")
    ap.add_argument("--json", type=Path, help="write every sample and summary as JSON to this file")
    args = ap.parse_args(argv)
    files = args.files or (800 if args.quick else 11000)
    mb = args.mb or (5.0 if args.quick else 75.0)
    rounds = args.rounds or (5 if args.quick else 9)
    undos = sorted({min(int(x), args.turns) for x in args.undo.split(",") if x.strip()})

    run_dir = Path(tempfile.mkdtemp(prefix="bench-owners-", dir=args.dir))
    log(f"run directory {run_dir}; load {loadavg()}")
    store: Store | None = None
    try:
        ws = generate(run_dir / "ws", WorkspaceSpec(files=files, mb=mb, seed=args.seed), log)
        log(f"generated {len(ws.tracked)} files, {ws.tracked_bytes / 1e6:.1f} MB")
        store = Store.open(run_dir / "store")
        journal = bool(store.capturer.watch(ws.root)) if args.journal else False
        t = time.perf_counter()
        store.at(ws.root).capture(label="bench first capture")
        log(f"first capture {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        th = record_thread(store, ws, args.turns, args.seed)
        log(f"recorded {args.turns} turns in {time.perf_counter() - t:.1f} s: agent changed {len(th.agent)} paths, "
            f"user {len(th.user)}, both {len(th.both)}")
        place = Place(store, ws.root, ScopeSettings(), run_dir / "codex-home")
        latest = th.records[-1].post
        assert latest is not None
        # As the recorder's known_paths: the agent's paths and everything the thread's latest snapshot captured.
        known = sorted(set(th.agent) | {p for p, e in store.files(latest).items() if e.kind != "-"})
        rewinds = [rewind_of(th, u) for u in undos]

        def cold() -> None:
            store.forget_snapshots(th.snapshots)

        # Untimed: warm the capturer's stat cache, check both plans once.
        problems: list[str] = []
        shapes: dict[int, dict[str, Any]] = {}
        for rw in rewinds:
            p0, p1 = plan_without(place, rw, known), plan_with(place, rw, known, {})
            problems += [f"undo {rw.undo}: {x}" for x in check(rw, th, p0, p1)]
            shapes[rw.undo] = {"without": counts(p0), "with": counts(p1), "actions": len(p1.actions)}
            log(f"undo {rw.undo}: without the rule {counts(p0)}; with it {counts(p1)}")

        samples: dict[str, dict[int, float]] = {}

        def put(key: str, rnd: int, seconds: float) -> None:
            samples.setdefault(key, {})[rnd] = seconds * 1000

        for rnd in range(rounds):
            for rw in rewinds:
                for caches in ("warm", "cold"):
                    order = ("plan", "rule") if (rnd + (caches == "cold")) % 2 == 0 else ("rule", "plan")
                    for what in order:
                        if caches == "cold":
                            cold()
                        key = f"{rw.undo}.{caches}"
                        if what == "plan":
                            t = time.perf_counter()
                            plan_without(place, rw, known)
                            put(f"{key}.plan", rnd, time.perf_counter() - t)
                        else:
                            spent: dict[str, float] = {}
                            t = time.perf_counter()
                            plan_with(place, rw, known, spent)
                            put(f"{key}.plan_rule", rnd, time.perf_counter() - t)
                            put(f"{key}.rule", rnd, spent["rule"])
                            put(f"{key}.owners", rnd, spent["owners"])
                            put(f"{key}.merge", rnd, spent["merge"])
            log(f"round {rnd + 1}/{rounds} done; load {loadavg()}")
        prof = profile_rule(place, rewinds[-1], known, cold) if args.profile else None
        load_end = loadavg()

        # Report.
        print(f"# bench_owners: the ownership rule's planning cost ({len(ws.tracked)} files, "
              f"{ws.tracked_bytes / 1e6:.1f} MB, {args.turns} recorded turns, {rounds} rounds)")
        print(f"# {platform.node()} {os.cpu_count()} CPUs, python {platform.python_version()}, change journal "
              f"{'on' if journal else 'off (every safety capture walks)'}, load at the end {load_end}")
        if problems:
            for x in problems:
                print(f"PROBLEM: {x}")
        print()
        print("| rewind | store caches | plan | plan + rule | added | ratio | rule alone | of which owners(now) "
              "| of which decide |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        table: dict[str, Any] = {}
        for rw in rewinds:
            for caches in ("warm", "cold"):
                k = f"{rw.undo}.{caches}"
                plan, both = samples[f"{k}.plan"], samples[f"{k}.plan_rule"]
                added = summary([both[r] - plan[r] for r in plan if r in both])
                rat = ratio(both, plan)
                row = {x: summary(list(samples[f"{k}.{x}"].values()))
                       for x in ("plan", "plan_rule", "rule", "owners", "merge")}
                row.update(added=added, ratio={k2: v for k2, v in (rat or {}).items() if k2 != "per_round"})
                table[k] = row

                def ms(s: dict[str, float] | None) -> str:
                    return "-" if s is None else f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"

                print(f"| undo {rw.undo} of {args.turns} turns ({len(rw.records) * 2} snapshots) | {caches} | "
                      f"{ms(row['plan'])} | {ms(row['plan_rule'])} | {ms(added)} | "
                      f"{rat['median'] if rat else float('nan'):.2f}x | {ms(row['rule'])} | {ms(row['owners'])} | "
                      f"{ms(row['merge'])} |")
        print()
        print("ms, median (min-max) over rounds; added and ratio per round, then the median. warm: the store's caches "
              "as the previous plan left them (a session); cold: its snapshot maps dropped first (a one-shot command).")
        for u, s in shapes.items():
            print(f"undo {u}: {s['actions']} plan actions; without the rule {s['without']}; with it {s['with']}")
        if prof:
            print()
            print("## cProfile: one keep_yours of the largest rewind, store caches dropped")
            print(prof)
        if args.json:
            args.json.write_text(json.dumps({
                "files": len(ws.tracked), "mb": ws.tracked_bytes / 1e6, "turns": args.turns, "rounds": rounds,
                "journal": journal, "load_end": load_end, "problems": problems, "shapes": shapes,
                "samples": {k: {str(r): v for r, v in d.items()} for k, d in samples.items()}, "table": table,
            }, indent=1))
        return 1 if problems else 0
    finally:
        if store is not None:
            store.close()
        if args.keep:
            log(f"kept {run_dir}")
        else:
            shutil.rmtree(run_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
