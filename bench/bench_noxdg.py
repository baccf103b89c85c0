#!/usr/bin/env python3
"""One-shot commands where no XDG_RUNTIME_DIR is set (containers, ssh and su sessions, every Mac) — issue 35 §3.

Run from the repository root:  .venv/bin/python bench/bench_noxdg.py [--rounds 9]

Until issue 35 such a session had no runtime directory, so no resident server: every command ran by itself
(`one-shot`, what CODEXR_SERVER=0 does). Now the runtime directory falls back to the user's cache directory
(`cache fallback`: XDG_RUNTIME_DIR unset, HOME a fresh home outside /tmp). Both are timed against the server in
`$XDG_RUNTIME_DIR/codexr` (`xdg`), in rotating rounds in one process, for `codexr threads` (it starts Codex: the
real binary against the scripted model) and an unchanged `snapshots capture` of a small Git workspace. Prints
medians, min-max and each way's median per-round ratio to `xdg`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app.codex.scripted_model import ScriptedModel, write_codex_home  # noqa: E402

WAYS = ("xdg", "cache fallback", "one-shot")
COMMANDS = {"threads": ["threads"], "unchanged capture": ["snapshots", "capture"]}


class NoXdg:
    """The three ways' environments around one small Git workspace (bench_goals.py runs them in its own rounds)."""

    def __init__(self, base: Path, model_url: str, env: dict[str, str] | None = None) -> None:
        self.base = base
        self.ws = base / "ws"
        self.ws.mkdir()
        for i in range(200):
            (self.ws / f"f{i}.txt").write_text(f"file {i}\n")
        subprocess.run(["git", "init", "-q", str(self.ws)], check=True)
        subprocess.run(["git", "-C", str(self.ws), "add", "-A"], check=True)
        home = base / "home"
        home.mkdir(mode=0o755)
        xdg = base / "xdg"
        xdg.mkdir(mode=0o700)
        codex = write_codex_home(base / "codex-home", model_url)
        source = os.environ if env is None else env
        # An installed codexr has its bytecode compiled (pip does it): with PYTHONDONTWRITEBYTECODE set (this
        # project's sandboxes) every one-shot command compiled its modules anew, ~50 ms more (as bench_startup.py).
        drop = ("XDG_RUNTIME_DIR", "CODEXR_RUNTIME_DIR", "PYTHONDONTWRITEBYTECODE")
        common = {k: v for k, v in source.items() if k not in drop}
        common.update(codex, PYTHONPATH=str(REPO), PYTHONSAFEPATH="1", NO_PROXY="127.0.0.1,localhost",
                      CODEXR_SERVER_START_TIMEOUT="60")
        self.ways = {"xdg": {**common, "CODEXR_SERVER": "1", "XDG_RUNTIME_DIR": str(xdg)},
                     "cache fallback": {**common, "CODEXR_SERVER": "1", "HOME": str(home)},
                     "one-shot": {**common, "CODEXR_SERVER": "0", "HOME": str(home)}}

    def run(self, way: str, argv: list[str], *, module: bool = True) -> float:
        """One command the given way (`python -m app ARGV`, or `python ARGV` without `module`), wall seconds from
        spawn to exit (SystemExit when it fails)."""
        t0 = time.perf_counter()
        res = subprocess.run([sys.executable, *(["-m", "app"] if module else []), *argv], cwd=self.ws,
                             env=self.ways[way],
                             capture_output=True, text=True, timeout=120)
        dt = time.perf_counter() - t0
        if res.returncode != 0:
            raise SystemExit(f"PROBLEM: {argv} failed: {res.stderr[-500:]}")
        return dt

    def warm(self) -> None:
        """Every command once each way: servers started, caches warm."""
        for way in self.ways:
            for argv in COMMANDS.values():
                self.run(way, argv)

    def stop(self) -> None:
        """Stop the servers the ways started."""
        for env in self.ways.values():
            subprocess.run([sys.executable, "-m", "app", "server", "stop"], env=env, capture_output=True,
                           timeout=60, check=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=9)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-noxdg-", dir=REPO.parent))  # outside /tmp: the ownership rule
    os.chmod(base, 0o700)
    with ScriptedModel() as model:
        bench = NoXdg(base, model.base_url)
        try:
            bench.warm()
            names = list(WAYS)
            times = {(c, w): [] for c in COMMANDS for w in WAYS}  # type: dict[tuple[str, str], list[float]]
            for rnd in range(args.rounds):
                for w in names[rnd % 3:] + names[:rnd % 3]:
                    for c, argv in COMMANDS.items():
                        times[(c, w)].append(bench.run(w, argv))
            print(f"# bench_noxdg: {args.rounds} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}")
            for c in COMMANDS:
                print(f"\n{c}")
                for w in names:
                    xs = times[(c, w)]
                    ratio = statistics.median(a / b for a, b in zip(xs, times[(c, "xdg")], strict=True))
                    print(f"  {w:15s} {statistics.median(xs) * 1000:7.1f} ms  ({min(xs) * 1000:.1f}-"
                          f"{max(xs) * 1000:.1f})  / xdg {ratio:.2f}")
        finally:
            bench.stop()
            shutil.rmtree(base, ignore_errors=True)
    print(f"# load at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
