#!/usr/bin/env python3
"""What a restore's last step costs when it changed many directories: one syncfs of the file system (the rule until
issue 35, beyond 64 directories) against an fsync of each changed directory, a few at once (the rule now).

Run from the repository root:  .venv/bin/python bench/bench_dirsync.py [--dirs 100] [--rounds 15] [--dirty-mb 256]

A Git workspace of one small file in each of N directories is captured in two versions; then, in alternating rounds
in one process, a restore rewrites all N files under each rule (`SafeRoot.syncfs_beyond = 64` brings back the old
one). Two sittings: a quiet file system, and one where another process keeps writing without syncing (`--dirty-mb`
in flight, as a build or a test suite beside the agent does): syncfs waits for those pages too, an fsync of our own
directories does not. Prints medians, min-max and the median per-round ratio new/old.
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


def build(ws: Path, dirs: int, version: int) -> None:
    for i in range(dirs):
        d = ws / f"d{i:03d}"
        d.mkdir(exist_ok=True)
        (d / "f.txt").write_text(f"file {i}, version {version}\n" * (1 + version))


def sitting(store: Store, ws: Path, a: str, b: str, dirs: int, rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"syncfs": [], "fsync each": []}
    target = a
    for rnd in range(rounds):
        for rule in (("syncfs", "fsync each") if rnd % 2 == 0 else ("fsync each", "syncfs")):
            SafeRoot.syncfs_beyond = 64 if rule == "syncfs" else None
            try:
                t0 = time.perf_counter()
                res = store.at(ws).restore(target)
                dt = time.perf_counter() - t0
            finally:
                SafeRoot.syncfs_beyond = None
            if len(res.written) != dirs:
                raise SystemExit(f"PROBLEM: the {rule} restore wrote {len(res.written)} of {dirs} files")
            times[rule].append(dt)
            target = b if target == a else a
    return times


def report(title: str, times: dict[str, list[float]]) -> None:
    print(f"\n{title}")
    for rule, xs in times.items():
        print(f"  {rule:11s} {statistics.median(xs) * 1000:8.1f} ms  ({min(xs) * 1000:.1f}-{max(xs) * 1000:.1f})")
    ratios = [n / o for n, o in zip(times["fsync each"], times["syncfs"], strict=True)]
    print(f"  fsync each / syncfs: median ratio {statistics.median(ratios):.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dirs", type=int, default=100, help="directories changed by each restore (default 100)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dirty-mb", type=int, default=256, help="what the other process keeps in flight (MB)")
    ap.add_argument("--base", default=str(Path(__file__).resolve().parent.parent.parent),
                    help="where to work: a disk, not tmpfs (default: the repository's parent directory)")
    args = ap.parse_args()
    if args.dirs <= 64:
        raise SystemExit("--dirs must be over 64: below that the old rule fsynced each directory too")
    work = Path(tempfile.mkdtemp(prefix="bench-dirsync-", dir=args.base))
    ws = work / "ws"
    ws.mkdir()
    build(ws, args.dirs, 1)
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    print(f"# bench_dirsync: {args.dirs} directories, one file each, {args.rounds} rounds per rule; "
          f"{os.uname().nodename} {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; {work}")
    try:
        with Store.open(work / "home") as store:
            a = store.at(ws).capture().id
            build(ws, args.dirs, 2)
            b = store.at(ws).capture().id
            os.sync()
            report("quiet file system", sitting(store, ws, a, b, args.dirs, args.rounds))
            writer = subprocess.Popen([sys.executable, "-c", WRITER, str(work / "dirty.bin"), str(args.dirty_mb)])
            try:
                time.sleep(2.0)  # the writer's pages pile up first
                report(f"another process writing {args.dirty_mb} MB again and again, unsynced",
                       sitting(store, ws, a, b, args.dirs, args.rounds))
            finally:
                writer.kill()
                writer.wait()
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
