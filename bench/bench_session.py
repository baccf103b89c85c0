#!/usr/bin/env python3
"""Benchmark the session's snapshots around real Codex turns against the internal-Git-repository approach.

Run from the repository root:  .venv/bin/python bench/bench_session.py [--quick] [--json out.json]

The real Codex app-server runs against the local scripted model (``app.codex.scripted_model``). Two sessions
stay open on ONE synthetic workspace for the whole run: session "snap" (snapshots on; its store watches
the workspace, as in real use) and session "nosnap" (``[features] file_snapshots = false``). A separate
GIT_DIR on the same workspace is the baseline (``git add -A . && git write-tree``).

Each round runs three blocks, in an order rotated from round to round:

* snap:   new thread; turn 0 (absorbs the other blocks' edits, not reported); turn 1 on an unchanged tree;
          rewrite 100 tracked files; turn 2.  Each turn's script: one add_file + one message.
* nosnap: the same three turns in the snapshot-less session.
* git:    sync snapshot (untimed); snapshot of the unchanged tree; rewrite 100 files + snapshot;
          add 1 file (as a turn does) + snapshot.

The report gives medians over rounds, min-max, and medians of per-round ratios against the baseline
measured in the same round. See bench/README.md. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import concurrent.futures
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

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(REPO_ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from bench_store import GitShadow, Modifier, log, ratio, summary  # noqa: E402
from workspace_gen import WorkspaceSpec, generate  # noqa: E402

ADDED_BYTES = 1500  # size of the file each scripted turn adds (and the git block adds)
MODIFIED = 100


# ------------------------------------------------------------------------------------------ recording


@dataclass
class Recorder:
    rounds: int
    samples: dict[str, dict[int, float]] = field(default_factory=dict)
    info: dict[str, list[Any]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    def record(self, op: str, rnd: int, value: float) -> None:
        self.samples.setdefault(op, {})[rnd] = value

    def note(self, key: str, value: Any) -> None:
        self.info.setdefault(key, []).append(value)

    def problem(self, msg: str) -> None:
        log(f"PROBLEM {msg}")
        self.problems.append(msg)


class CaptureProbe:
    """Records every capture of a session's store: its result and whether the change journal was used.

    Wraps the store instance's ``capture`` and the change journal's ``fastpath.select`` (one extra
    Python call each; the app code is untouched). ``journal`` is True when the capture re-read only
    what the journal reported, False when it walked the tree, None when the store does not watch the
    workspace.
    """

    def __init__(self, store: Any) -> None:
        self.records: list[dict[str, Any]] = []
        import snapshot_store.detect.fastpath as fastpath

        # Every capture, a restore's safety capture too, goes through the capturer's `_run` (store.capture before).
        target = getattr(store, "capturer", store)
        attr = "_run" if hasattr(store, "capturer") else "capture"
        orig_capture = getattr(target, attr)
        orig_fast = fastpath.select
        state: dict[str, Any] = {}

        def fast_select(*args: Any, **kwargs: Any) -> Any:
            out = orig_fast(*args, **kwargs)
            state["journal"] = out is not None
            return out

        def capture(*args: Any, **kwargs: Any) -> Any:
            state.clear()
            t = time.perf_counter()
            res = orig_capture(*args, **kwargs)
            elapsed = time.perf_counter() - t
            self.records.append(
                {
                    "kind": kwargs.get("kind", "capture"),
                    "id": res.id,
                    "journal": state.get("journal"),
                    "store_capture_seconds": elapsed,
                    "file_count": res.file_count,
                    "bytes_hashed": res.bytes_hashed,
                    "bytes_stored": res.bytes_stored,
                    "unchanged": res.unchanged,
                }
            )
            return res

        fastpath.select = fast_select  # module-wide: the bench has one store
        setattr(target, attr, capture)


class TurnError(RuntimeError):
    pass


@dataclass
class Bench:
    args: argparse.Namespace
    base: Path
    rec: Recorder
    ws: Any = None  # workspace_gen.Workspace
    modifier: Modifier | None = None
    model: Any = None
    snap: Any = None  # Session with snapshots
    nosnap: Any = None  # Session with file_snapshots = false
    probe: CaptureProbe | None = None
    shadow: GitShadow | None = None
    pool: concurrent.futures.ThreadPoolExecutor = field(
        default_factory=lambda: concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="turn")
    )
    add_seq: int = 0
    watch_on: bool | None = None

    # ---------------------------------------------------------------------------------------- helpers

    def added_content(self) -> str:
        assert self.modifier is not None
        return self.modifier.corpus.text(ADDED_BYTES, header="# added by bench_session\n").decode()

    def next_added_path(self, who: str) -> str:
        self.add_seq += 1
        return f"src/bench_added_{who}_{self.add_seq}.py"

    def turn(self, session: Any, thread: str, tag: str, who: str) -> tuple[Any, str, list[dict[str, Any]]]:
        """Run one scripted turn (add_file + message); returns (TurnOutcome, added path, captures)."""
        from app.codex.scripted_model import add_file, message

        rel = self.next_added_path(who)
        content = self.added_content()
        trigger = f"<<{tag}>>"
        self.model.script(trigger, [add_file(rel, content), message(f"added {rel}")])
        before = len(self.probe.records) if (self.probe is not None and session is self.snap) else 0
        fut = self.pool.submit(session.run_turn, thread, f"bench turn {trigger}: please add {rel}")
        try:
            out = fut.result(timeout=self.args.turn_timeout)
        except concurrent.futures.TimeoutError as exc:
            raise TurnError(f"turn {tag} did not finish in {self.args.turn_timeout:.0f}s") from exc
        if out.status != "completed":
            raise TurnError(f"turn {tag} ended {out.status}: {out.error}")
        path = self.ws.root / rel
        if not path.is_file() or path.read_text() != content:
            raise TurnError(f"turn {tag}: the scripted add_file did not produce {rel}")
        caps = self.probe.records[before:] if (self.probe is not None and session is self.snap) else []
        self.rec.note(
            "turns",
            {
                "tag": tag,
                "session": who,
                "seconds": out.seconds,
                "pre_capture_seconds": out.pre_capture_seconds,
                "post_capture_seconds": out.post_capture_seconds,
                "pre": out.pre,
                "post": out.post,
                "captures": caps,
            },
        )
        return out, rel, caps

    def modify(self) -> list[str]:
        assert self.modifier is not None
        rels = self.modifier.take(MODIFIED)
        self.modifier.rewrite(rels)
        return rels

    # ----------------------------------------------------------------------------------------- blocks

    def block_snap(self, rnd: int) -> None:
        s = self.snap
        store = s.store
        tid = s.start_thread()
        o0, _, _ = self.turn(s, tid, f"snap-r{rnd}-t0", "snap")
        o1, rel1, caps1 = self.turn(s, tid, f"snap-r{rnd}-t1", "snap")
        self.rec.record("pre.unchanged", rnd, o1.pre_capture_seconds)
        self.rec.record("post.after_unchanged", rnd, o1.post_capture_seconds)
        self.rec.record("turn.snap.unchanged", rnd, o1.seconds)
        rels = self.modify()
        o2, rel2, caps2 = self.turn(s, tid, f"snap-r{rnd}-t2", "snap")
        self.rec.record("pre.mod100", rnd, o2.pre_capture_seconds)
        self.rec.record("post.after_mod100", rnd, o2.post_capture_seconds)
        self.rec.record("turn.snap.mod100", rnd, o2.seconds)
        for name, caps in (("t1", caps1), ("t2", caps2)):
            kinds = [c["kind"] for c in caps]
            if kinds != ["pre-turn", "post-turn"]:
                self.rec.problem(f"round {rnd} {name}: expected a pre- and a post-turn capture, saw {kinds}")
        # Untimed checks: the captures saw exactly what changed.
        if caps1 and caps1[0]["unchanged"] is not True:
            changes = store.diff(o0.post, o1.pre) if (o0.post and o1.pre) else []
            self.rec.problem(
                f"round {rnd}: pre-turn capture of the unchanged tree found changes:"
                f" {[(c.path, c.change) for c in changes[:5]]}"
            )
        if o1.pre and o2.pre and o1.post:
            changed = {c.path for c in store.diff(o1.post, o2.pre)}
            if changed != set(rels):
                missing = sorted(set(rels) - changed)
                extra = sorted(changed - set(rels))
                self.rec.problem(
                    f"round {rnd}: pre-turn capture after {MODIFIED} modified files saw {len(changed)} changes"
                    f" (missing {missing[:3]}, extra {extra[:3]})"
                )
        for o, rel in ((o1, rel1), (o2, rel2)):
            if o.pre and o.post:
                post_changes = {(c.path, c.change) for c in store.diff(o.pre, o.post)}
                if post_changes != {(rel, "added")}:
                    self.rec.problem(
                        f"round {rnd}: post-turn capture changes {sorted(post_changes)[:4]}, expected only {rel} added"
                    )

    def block_nosnap(self, rnd: int) -> None:
        s = self.nosnap
        tid = s.start_thread()
        self.turn(s, tid, f"nosnap-r{rnd}-t0", "nosnap")
        o1, _, _ = self.turn(s, tid, f"nosnap-r{rnd}-t1", "nosnap")
        self.rec.record("turn.nosnap.unchanged", rnd, o1.seconds)
        self.modify()
        o2, _, _ = self.turn(s, tid, f"nosnap-r{rnd}-t2", "nosnap")
        self.rec.record("turn.nosnap.mod100", rnd, o2.seconds)
        for o in (o1, o2):
            if o.pre is not None or o.post is not None:
                self.rec.problem(f"round {rnd}: the file_snapshots=false session took a snapshot")

    def block_git(self, rnd: int) -> None:
        sh = self.shadow
        assert sh is not None and self.modifier is not None
        before = sh.snapshot()  # sync: absorbs the other blocks' edits (untimed)
        t = time.perf_counter()
        tree = sh.snapshot()
        self.rec.record("git.unchanged", rnd, time.perf_counter() - t)
        if tree != before:
            self.rec.problem(f"round {rnd}: git snapshot of the unchanged tree changed ({before} -> {tree})")
        self.modify()
        t = time.perf_counter()
        tree2 = sh.snapshot()
        self.rec.record("git.mod100", rnd, time.perf_counter() - t)
        rel = self.next_added_path("git")
        (self.ws.root / rel).write_text(self.added_content())
        t = time.perf_counter()
        tree3 = sh.snapshot()
        self.rec.record("git.add1", rnd, time.perf_counter() - t)
        if len({tree, tree2, tree3}) != 3:
            self.rec.problem(f"round {rnd}: git trees did not change as expected ({tree}, {tree2}, {tree3})")


# ------------------------------------------------------------------------------------------ report

Row = tuple[str, str, list[tuple[str, str]]]  # (label, op, [(ratio name, denominator op)])

SECTIONS: list[tuple[str, list[Row]]] = [
    (
        "pre-turn capture (TurnOutcome.pre_capture_seconds; session kept open, store watches the workspace)",
        [
            ("unchanged tree", "pre.unchanged", [("git unchanged", "git.unchanged")]),
            (f"{MODIFIED} tracked files modified", "pre.mod100", [(f"git {MODIFIED} modified", "git.mod100")]),
        ],
    ),
    (
        "post-turn capture (TurnOutcome.post_capture_seconds; the turn added 1 file)",
        [
            ("turn on the unchanged tree", "post.after_unchanged", [("git 1 file added", "git.add1")]),
            (f"turn after {MODIFIED} modified", "post.after_mod100", [("git 1 file added", "git.add1")]),
        ],
    ),
    (
        "full turn (TurnOutcome.seconds: run_turn wall time, real Codex + scripted model)",
        [
            ("with snapshots, unchanged tree", "turn.snap.unchanged", [("without", "turn.nosnap.unchanged")]),
            ("without snapshots, unchanged tree", "turn.nosnap.unchanged", []),
            (f"with snapshots, {MODIFIED} modified", "turn.snap.mod100", [("without", "turn.nosnap.mod100")]),
            (f"without snapshots, {MODIFIED} modified", "turn.nosnap.mod100", []),
        ],
    ),
    (
        "internal git repository (separate GIT_DIR: add -A . + write-tree)",
        [
            ("unchanged", "git.unchanged", []),
            (f"{MODIFIED} tracked files modified", "git.mod100", []),
            ("1 file added (the post-turn state)", "git.add1", []),
        ],
    ),
]

TARGETS: list[tuple[str, str, str, float]] = [
    ("pre-turn capture, unchanged / git unchanged", "pre.unchanged", "git.unchanged", 1.0),
    (f"pre-turn capture, {MODIFIED} modified / git {MODIFIED} modified", "pre.mod100", "git.mod100", 1.0),
    ("post-turn capture (unchanged turn) / git 1 added", "post.after_unchanged", "git.add1", 1.0),
    (f"post-turn capture ({MODIFIED}-modified turn) / git 1 added", "post.after_mod100", "git.add1", 1.0),
]

DIFFS: list[tuple[str, str, str, list[str]]] = [
    ("unchanged tree", "turn.snap.unchanged", "turn.nosnap.unchanged", ["pre.unchanged", "post.after_unchanged"]),
    (f"{MODIFIED} modified", "turn.snap.mod100", "turn.nosnap.mod100", ["pre.mod100", "post.after_mod100"]),
]


def diff_summary(a: dict[int, float] | None, b: dict[int, float] | None) -> dict[str, Any] | None:
    """Median (and range) of per-round differences a - b."""
    if not a or not b:
        return None
    per = {r: a[r] - b[r] for r in a if r in b}
    s = summary(list(per.values()))
    return None if s is None else {**s, "per_round": per}


def sum_per_round(rec: Recorder, ops: list[str]) -> dict[int, float]:
    parts = [rec.samples.get(op) or {} for op in ops]
    rounds = set.intersection(*(set(p) for p in parts)) if parts else set()
    return {r: sum(p[r] for p in parts) for r in rounds}


def fmt_ms(x: float) -> str:
    ms = x * 1000
    if abs(ms) >= 1000:
        return f"{ms:.0f}"
    if abs(ms) >= 10:
        return f"{ms:.1f}"
    return f"{ms:.2f}"


def build_report(rec: Recorder) -> dict[str, Any]:
    ops = {op: summary(list(s.values())) for op, s in rec.samples.items()}
    ratios: dict[str, Any] = {}
    for _t, rows in SECTIONS:
        for _label, op, cmps in rows:
            for _name, base in cmps:
                r = ratio(rec.samples.get(op), rec.samples.get(base))
                if r is not None:
                    ratios[f"{op}/{base}"] = r
    diffs: dict[str, Any] = {}
    for _label, a, b, parts in DIFFS:
        d = diff_summary(rec.samples.get(a), rec.samples.get(b))
        if d is not None:
            diffs[f"{a}-{b}"] = d
        caps = summary(list(sum_per_round(rec, parts).values()))
        if caps is not None:
            diffs["+".join(parts)] = caps
    targets = []
    for name, op, base, limit in TARGETS:
        r = ratios.get(f"{op}/{base}") or ratio(rec.samples.get(op), rec.samples.get(base))
        value = None if r is None else float(r["median"])
        result = "n/a" if value is None else ("PASS" if value <= limit else "MISS")
        targets.append({"target": name, "value": value, "limit": limit, "unit": "x", "result": result})
    return {"ops": ops, "ratios": ratios, "diffs": diffs, "targets": targets}


def capture_details(rec: Recorder) -> dict[str, Any]:
    """Per reported capture kind: how often the journal was used, bytes hashed, store.capture() share."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for t in rec.info.get("turns", []):
        if not t["tag"].startswith("snap-r") or len(t["captures"]) != 2:
            continue
        idx = t["tag"].rsplit("-", 1)[1]
        if idx not in ("t1", "t2"):
            continue
        pre, post = t["captures"]
        groups.setdefault(f"pre.{'unchanged' if idx == 't1' else 'mod100'}", []).append(
            {**pre, "outcome_seconds": t["pre_capture_seconds"]}
        )
        groups.setdefault(f"post.{'after_unchanged' if idx == 't1' else 'after_mod100'}", []).append(
            {**post, "outcome_seconds": t["post_capture_seconds"]}
        )
    out: dict[str, Any] = {}
    for k, caps in groups.items():
        out[k] = {
            "n": len(caps),
            "journal_used": sum(1 for c in caps if c["journal"] is True),
            "walked": sum(1 for c in caps if c["journal"] is False),
            "bytes_hashed_median": statistics.median(c["bytes_hashed"] for c in caps),
            "file_count_last": caps[-1]["file_count"],
            "store_capture_ms_median": statistics.median(c["store_capture_seconds"] for c in caps) * 1000,
            "outside_store_capture_ms_median": statistics.median(
                c["outcome_seconds"] - c["store_capture_seconds"] for c in caps
            )
            * 1000,
        }
    return out


def print_report(b: Bench, rep: dict[str, Any], details: dict[str, Any]) -> None:
    rec = b.rec
    ws = b.ws
    git_v = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    print(
        f"bench_session: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()},"
        f" {git_v}, loadavg {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
    )
    print(
        f"workspace: {len(ws.tracked)} tracked files, {ws.tracked_bytes / 1e6:.1f} MB (plain);"
        f" {b.args.rounds} rounds; session store watch(): {'on' if b.watch_on else 'OFF'}"
    )
    print()
    print(f"  {'operation':<44} {'median':>10} {'min-max':>17}  ratio (median of per-round ratios)")
    for title, rows in SECTIONS:
        print(f" {title}")
        for label, op, cmps in rows:
            s = rep["ops"].get(op)
            if not s:
                why = rec.errors.get("run", "not measured")
                print(f"  {label:<44} {'-':>10} {'':>17}  ({why[:70]})")
                continue
            med = fmt_ms(s["median"]) + " ms"
            rng = f"{fmt_ms(s['min'])}-{fmt_ms(s['max'])}"
            parts = []
            for name, base in cmps:
                r = rep["ratios"].get(f"{op}/{base}")
                if r:
                    parts.append(f"{r['median']:.2f}x {name} ({r['min']:.2f}-{r['max']:.2f})")
            print(f"  {label:<44} {med:>10} {rng:>17}  {'; '.join(parts)}")
    print(" snapshot cost per turn (median of per-round differences: with - without snapshots)")
    for label, a, bop, parts in DIFFS:
        d = rep["diffs"].get(f"{a}-{bop}")
        c = rep["diffs"].get("+".join(parts))
        if not d:
            print(f"  {label:<44} {'-':>10}")
            continue
        rng = f"{fmt_ms(d['min'])}-{fmt_ms(d['max'])}"
        extra = f"pre + post capture: {fmt_ms(c['median'])} ms" if c else ""
        print(f"  {label:<44} {fmt_ms(d['median']) + ' ms':>10} {rng:>17}  {extra}")
    print()
    print("== targets ==")
    for t in rep["targets"]:
        val = "-" if t["value"] is None else f"{t['value']:.2f}x"
        print(f"  {t['target']:<56} {val:>7}  <= {t['limit']:.1f}x  {t['result']}")
    print()
    print("== captures of the snap session (from a probe on its store) ==")
    for k in ("pre.unchanged", "pre.mod100", "post.after_unchanged", "post.after_mod100"):
        d = details.get(k)
        if not d:
            continue
        print(
            f"  {k:<22} change journal used {d['journal_used']}/{d['n']}, walked {d['walked']}/{d['n']};"
            f" bytes hashed median {d['bytes_hashed_median']:.0f};"
            f" store.capture() {d['store_capture_ms_median']:.1f} ms"
            f" + {d['outside_store_capture_ms_median']:.1f} ms around it"
        )
    for key in ("setup",):
        for item in rec.info.get(key, []):
            print(f"  {item}")
    for op, msg in rec.errors.items():
        print(f"  ERROR {op}: {msg[:400]}")
    for p in rec.problems[:20]:
        print(f"  PROBLEM {p}")
    if len(rec.problems) > 20:
        print(f"  ... {len(rec.problems) - 20} more problems (see --json)")
    print()


# ------------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="a tiny workspace (800 files / 5 MB) for a smoke test")
    p.add_argument("--files", type=int, help="tracked files (default 11000; quick 800)")
    p.add_argument("--mb", type=float, help="tracked MB (default 75; quick 5)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    p.add_argument("--seed", type=int, default=20240601)
    p.add_argument("--dir", type=Path, help="parent directory for the run's fresh temp dir (default /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (workspace, CODEX_HOMEs, GIT_DIR)")
    p.add_argument("--turn-timeout", type=float, default=120.0, help="seconds before a turn counts as hung")
    p.add_argument("--json", type=Path, help="write all numbers as JSON to this file")
    a = p.parse_args(argv)
    a.files = a.files if a.files is not None else (800 if a.quick else 11000)
    a.mb = a.mb if a.mb is not None else (5.0 if a.quick else 75.0)
    if a.rounds < 5:
        print(f"warning: {a.rounds} rounds; the targets assume medians over >= 5", file=sys.stderr)
    if a.rounds < 1:
        p.error("--rounds must be >= 1")
    return a


def setup(b: Bench) -> None:
    from app.codex.scripted_model import ScriptedModel, write_codex_home
    from app.session import Session, SessionOptions
    from config import load_settings

    args, base, rec = b.args, b.base, b.rec
    spec = WorkspaceSpec(files=args.files, mb=args.mb, churn=False, seed=args.seed)
    log(f"generating plain workspace ({spec.files} files, {spec.mb:g} MB)")
    b.ws = generate(base / "ws-plain", spec, log)
    b.modifier = Modifier(b.ws, args.seed + 2000)

    log("git baseline: cold snapshot into a fresh GIT_DIR")
    b.shadow = GitShadow(base / "git-shadow", b.ws.root)
    t = time.perf_counter()
    b.shadow.init()
    b.shadow.snapshot()
    rec.note("setup", f"git cold snapshot (setup, untimed for the table): {time.perf_counter() - t:.2f} s")

    b.model = ScriptedModel().start()
    home_snap, home_nosnap = base / "home-snap", base / "home-nosnap"
    env_snap = write_codex_home(home_snap, b.model.base_url)
    env_nosnap = write_codex_home(home_nosnap, b.model.base_url)
    # Into write_codex_home's [features] table where it has one (a second table of that name is invalid TOML).
    config = home_nosnap / "config.toml"
    text = config.read_text()
    if "\n[features]\n" in text:
        config.write_text(text.replace("\n[features]\n", "\n[features]\nfile_snapshots = false\n", 1))
    else:
        config.write_text(text + "\n[features]\nfile_snapshots = false\n")
    settings_snap, settings_nosnap = load_settings(home_snap), load_settings(home_nosnap)
    if not settings_snap.features.file_snapshots or settings_nosnap.features.file_snapshots:
        raise RuntimeError("the two CODEX_HOMEs did not come out as snapshots on / off")

    log("starting the two sessions (real Codex app-server each)")
    t = time.perf_counter()
    b.snap = Session(SessionOptions(cwd=b.ws.root, codex_home=home_snap, settings=settings_snap, env=env_snap))
    rec.note("setup", f"session start, snapshots on: {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    b.nosnap = Session(SessionOptions(cwd=b.ws.root, codex_home=home_nosnap, settings=settings_nosnap, env=env_nosnap))
    rec.note("setup", f"session start, snapshots off: {time.perf_counter() - t:.2f} s")
    capturer = getattr(b.snap.store, "capturer", b.snap.store)
    b.watch_on = str(b.snap.cwd) in getattr(getattr(capturer, "detect", capturer), "_watched", {})
    b.probe = CaptureProbe(b.snap.store)

    log("warm-up turns (the snap session's first capture is cold)")
    tid = b.snap.start_thread()
    out, _, caps = b.turn(b.snap, tid, "warmup-snap", "snap")
    rec.note(
        "setup",
        f"first turn with snapshots: {out.seconds:.2f} s (cold pre-turn capture {out.pre_capture_seconds:.2f} s,"
        f" {caps[0]['file_count'] if caps else '?'} files)",
    )
    out, _, _ = b.turn(b.nosnap, b.nosnap.start_thread(), "warmup-nosnap", "nosnap")
    rec.note("setup", f"first turn without snapshots: {out.seconds:.2f} s")


def teardown(b: Bench) -> None:
    for s in (b.snap, b.nosnap):
        if s is not None:
            try:
                s.close()
            except Exception as exc:
                log(f"closing a session failed: {exc}")
    if b.model is not None:
        with contextlib.suppress(Exception):
            b.model.stop()
    b.pool.shutdown(wait=False, cancel_futures=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.dir is not None:
        args.dir.mkdir(parents=True, exist_ok=True)
    base = Path(tempfile.mkdtemp(prefix="bench-session-", dir=args.dir))
    log(f"run directory {base}")
    b = Bench(args=args, base=base, rec=Recorder(rounds=args.rounds))
    try:
        try:
            setup(b)
            blocks: list[tuple[str, Callable[[int], None]]] = [
                ("snapshots on", b.block_snap),
                ("snapshots off", b.block_nosnap),
                ("git", b.block_git),
            ]
            for rnd in range(args.rounds):
                shift = rnd % len(blocks)
                for label, fn in blocks[shift:] + blocks[:shift]:
                    log(f"round {rnd + 1}/{args.rounds}: {label}")
                    fn(rnd)
        except Exception as exc:  # report what was measured so far
            b.rec.errors["run"] = f"{type(exc).__name__}: {exc}"
            log(f"!! run stopped: {b.rec.errors['run']}")
            traceback.print_exc(file=sys.stderr)
        rep = build_report(b.rec)
        details = capture_details(b.rec)
        print()
        if b.ws is not None:
            print_report(b, rep, details)
        else:
            print(f"bench_session: nothing measured: {b.rec.errors.get('run')}")
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
                    "tracked_files": len(b.ws.tracked) if b.ws else None,
                    "tracked_bytes": b.ws.tracked_bytes if b.ws else None,
                    "change_journal": b.watch_on,
                    "loadavg_end": os.getloadavg(),
                },
                "samples": b.rec.samples,
                **rep,
                "capture_details": details,
                "turns": b.rec.info.get("turns", []),
                "setup": b.rec.info.get("setup", []),
                "problems": b.rec.problems,
                "errors": b.rec.errors,
            }
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(payload, indent=2, default=str) + "\n")
            log(f"wrote {args.json}")
        return 1 if b.rec.errors else 0
    finally:
        teardown(b)
        if args.keep:
            log(f"kept {base}")
        else:
            log(f"removing {base}")
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
