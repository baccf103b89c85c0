#!/usr/bin/env python3
"""What a restore's durability costs (issue 35 §2), three ways in one process: `before` (each file fsynced after its
write, one syncfs of the file system at the end beyond 64 changed directories), `dir fsyncs` (the same, but each
changed directory fsynced, a few at once, never syncfs) and `now` (the files' content staged a window at a time and
fsynced together by a few threads, then each put in place by its own rename; directories as `dir fsyncs`).

Run from the repository root:  .venv/bin/python bench/bench_dirsync.py [--dirs 100] [--rounds 15] [--dirty-mb 256]

A Git workspace of N small files, one per directory (and a second layout, N in one directory), is captured in two
versions; then, in rotating rounds, a restore rewrites all N files under each rule (`SafeRoot.syncfs_beyond` and
`SafeRoot.stage_writes` bring back the old ones). Two sittings: a quiet file system, and one where another process
keeps writing without syncing (`--dirty-mb` in flight, as a build or a test suite beside the agent does). Prints
medians, min-max and each rule's median per-round ratio to `before`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from snapshot_store import Store
from snapshot_store.safefs import SafeRoot

WRITER = """
import os, sys, time
path, mb = sys.argv[1], int(sys.argv[2])
block = os.urandom(1 << 20)
while True:
    with open(path, "wb") as f:  # rewritten again and again, never synced: dirty pages in flight
        for _ in range(mb):
            f.write(block)
    time.sleep(0.05)
"""


RULES = {"before": (64, False), "dir fsyncs": (None, False), "now": (None, True)}  # syncfs_beyond, stage_writes


def build(ws: Path, dirs: int, version: int, flat: bool) -> None:
    for i in range(dirs):
        d = ws if flat else ws / f"d{i:03d}"
        d.mkdir(exist_ok=True)
        (d / f"f{i:03d}.txt").write_text(f"file {i}, version {version}\n" * (1 + version))


def sitting(store: Store, ws: Path, versions: list[str], files: int, rounds: int) -> dict[str, list[float]]:
    """Rounds of one restore per rule, each to the version the workspace does not hold (`versions`: the one it holds
    last, kept so for the next sitting)."""
    times: dict[str, list[float]] = {rule: [] for rule in RULES}
    names = list(RULES)
    b, a = versions
    target = a
    for rnd in range(rounds):
        for rule in names[rnd % 3:] + names[:rnd % 3]:
            SafeRoot.syncfs_beyond, SafeRoot.stage_writes = RULES[rule]
            try:
                t0 = time.perf_counter()
                res = store.at(ws).restore(target)
                dt = time.perf_counter() - t0
            finally:
                SafeRoot.syncfs_beyond, SafeRoot.stage_writes = RULES["now"]
            if len(res.written) != files:
                raise SystemExit(f"PROBLEM: the {rule} restore wrote {len(res.written)} of {files} files")
            times[rule].append(dt)
            versions[:] = [target, b if target == a else a]
            target = versions[1]
    return times


def report(title: str, times: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    for rule, xs in times.items():
        ratios = [n / o for n, o in zip(xs, times["before"], strict=True)]
        print(f"  {rule:11s} {statistics.median(xs) * 1000:8.1f} ms  ({min(xs) * 1000:.1f}-{max(xs) * 1000:.1f})"
              f"  / before {statistics.median(ratios):.2f}")


def layout(base: Path, files: int, flat: bool, rounds: int, dirty_mb: int) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-dirsync-", dir=base))
    ws = work / "ws"
    ws.mkdir()
    build(ws, files, 1, flat)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    where = "in one directory" if flat else "one per directory"
    try:
        with Store.open(work / "home") as store:
            a = store.at(ws).capture().id
            build(ws, files, 2, flat)
            b = store.at(ws).capture().id
            os.sync()
            versions = [b, a]  # the workspace holds b
            report(f"{files} files {where}, quiet file system", sitting(store, ws, versions, files, rounds))
            writer = subprocess.Popen([sys.executable, "-c", WRITER, str(work / "dirty.bin"), str(dirty_mb)])
            try:
                time.sleep(2.0)  # the writer's pages pile up first
                report(f"{files} files {where}, another process rewriting {dirty_mb} MB unsynced",
                       sitting(store, ws, versions, files, rounds))
            finally:
                writer.kill()
                writer.wait()
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", type=int, default=100, help="files restored, one per directory (default 100)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dirty-mb", type=int, default=256, help="what the other process keeps in flight (MB)")
    ap.add_argument("--base", default=str(Path(__file__).resolve().parent.parent.parent),
                    help="where to work: a disk, not tmpfs (default: the repository's parent directory)")
    args = ap.parse_args()
    if args.dirs <= 64:
        raise SystemExit("--dirs must be over 64: below that the old rule fsynced each directory too")
    print(f"# bench_dirsync: {args.rounds} rounds per rule; {os.uname().nodename} {os.cpu_count()} CPUs, "
          f"load {os.getloadavg()[0]:.2f}; under {args.base}")
    for flat in (False, True):
        layout(Path(args.base), args.dirs, flat, args.rounds, args.dirty_mb)
    print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
