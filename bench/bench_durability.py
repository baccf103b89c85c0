#!/usr/bin/env python3
"""What restore's write-path safety costs: per-file fsync before rename, and per-operation dir-fd chains.

Run from the repository root:  .venv/bin/python bench/bench_durability.py [--sizes 1000,10000] [--rounds 3]
(needs `git` on PATH: the files are tracked, so every one is captured).

For each size it builds a workspace of N small files (3 levels of directories), captures two versions
of it, and then, in interleaved rounds, times whole restores (safety capture, plan, apply, final syncfs)
that rewrite all N files, in three variants measured in the same process:

- ``durable``  the shipped code: every file is fsynced before its rename; every operation re-opens its
  directory chain from the root fd (SafeRoot trusts no cached directory fd across operations);
- ``no-sync``  the same without the per-file fsync (the restore still ends with one syncfs);
- ``cached``   per-file fsync, but directory fds cached for the whole restore (the old SafeRoot; a dup
  per operation stands in for the cache lookup).

It prints medians, min-max, and per-round ratios durable/no-sync and durable/cached. Before each timed
restore the page cache is flushed (os.sync) so each variant starts from the same state.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from snapshot_store import Store
from snapshot_store.restore import apply as restore
from snapshot_store.safefs import SafeRoot


class CachedSafeRoot(SafeRoot):
    """The old behaviour, for comparison only: a directory fd opened once is trusted for the whole restore."""

    def __init__(self, root: str) -> None:
        super().__init__(root)
        self._cache: dict[str, int] = {}

    def _open(self, rel_dir: str, create: bool) -> int | None:
        fd = self._cache.get(rel_dir)
        if fd is None:
            opened = super()._open(rel_dir, create)
            if opened is None:
                return None
            fd = self._cache[rel_dir] = opened
        return os.dup(fd)  # callers close what they get

    def close(self) -> None:
        for fd in self._cache.values():
            os.close(fd)
        self._cache.clear()
        super().close()


@contextmanager
def variant(name: str) -> Iterator[None]:
    saved_sync, saved_cls = SafeRoot.sync_data, restore.SafeRoot
    SafeRoot.sync_data = name != "no-sync"
    restore.SafeRoot = CachedSafeRoot if name == "cached" else SafeRoot  # type: ignore[misc]
    try:
        yield
    finally:
        SafeRoot.sync_data, restore.SafeRoot = saved_sync, saved_cls  # type: ignore[misc]


def build(ws: Path, n: int, version: int) -> None:
    for i in range(n):
        d = ws / f"pkg{i % 10}" / f"mod{i % 7}" / f"sub{i % 3}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"// file {i}, version {version}\n" + "x = 1\n" * (20 + i % 50))


def median_range(xs: list[float]) -> str:
    return f"{statistics.median(xs):7.3f} s  ({min(xs):.3f}-{max(xs):.3f})"


def run_size(base: Path, n: int, rounds: int) -> None:
    work = Path(tempfile.mkdtemp(prefix=f"durability-{n}-", dir=base))
    ws = work / "ws"
    ws.mkdir()
    build(ws, n, 1)
    # Tracked by Git, so every file is captured whatever the residue limits say.
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    names = ("durable", "no-sync", "cached")
    times: dict[str, list[float]] = {v: [] for v in names}
    with Store.open(work / "home") as store:
        a = store.at(ws).capture().id
        time.sleep(0.2)
        build(ws, n, 2)
        b = store.at(ws).capture().id
        target = a
        for rnd in range(rounds):
            order = names[rnd % 3:] + names[:rnd % 3]
            for v in order:
                os.sync()
                with variant(v):
                    t0 = time.perf_counter()
                    res = store.at(ws).restore(target)
                    dt = time.perf_counter() - t0
                if len(res.written) != n:
                    raise SystemExit(f"PROBLEM: {v} restore wrote {len(res.written)} of {n} files")
                times[v].append(dt)
                target = b if target == a else a
                print(f"  [{n} files] round {rnd + 1} {v:8s} {dt:.3f} s", file=sys.stderr, flush=True)
    print(f"\nrestore of {n:,} small files (each restore rewrites all of them), {rounds} rounds")
    for v in names:
        print(f"  {v:8s} {median_range(times[v])}")
    for other in ("no-sync", "cached"):
        ratios = [d / o for d, o in zip(times["durable"], times[other], strict=True)]
        print(f"  durable / {other:8s} median ratio {statistics.median(ratios):.2f}  "
              f"(per round: {', '.join(f'{r:.2f}' for r in ratios)})")
    per_file = [(d - o) / n * 1e3 for d, o in zip(times["durable"], times["no-sync"], strict=True)]
    print(f"  fsync cost per file: {statistics.median(per_file):.3f} ms (median)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None, help="parent of the temporary workspaces (default /tmp)")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-durability-", dir=args.dir))
    print(f"file system of {base}: {os.statvfs(base).f_bsize}-byte blocks; python {sys.version.split()[0]}")
    try:
        for n in (int(x) for x in args.sizes.split(",")):
            run_size(base, n, args.rounds)
    finally:
        import shutil

        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
