"""Peak memory of capture, restore and verify --full of one large (sparse) git-tracked file.

Each operation runs as its own `codexr` process; its peak RSS comes from wait4's rusage
(ru_maxrss). Baselines run in the same script on the same file: `cat FILE > /dev/null` (what
reading the file costs at least) and `codexr --help` (what the interpreter and imports cost).
Target (issue 6, B.12): every operation <= 100 MB for a 2 GiB file.

    python bench/bench_memory.py [--size-gib 2] [--dir /tmp]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_MB = 100.0


def peak_rss_mb(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, str]:
    """Run `cmd` and return (peak RSS in MB of it and the children it waited for, its stdout)."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    out = proc.stdout.read().decode()
    err = proc.stderr.read().decode()
    _pid, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.strip()}")
    return usage.ru_maxrss / 1024, out  # ru_maxrss is in KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-gib", type=float, default=2.0)
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where the scratch workspace goes")
    args = parser.parse_args()
    size = int(args.size_gib * 1024**3)
    scratch = Path(tempfile.mkdtemp(prefix="codexr-bench-mem-", dir=args.dir))
    try:
        ws, home = scratch / "ws", scratch / "home"
        ws.mkdir()
        home.mkdir()
        big = ws / "big.bin"
        with open(big, "wb") as f:
            f.truncate(size)
        git_env = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
        subprocess.run(["git", "init", "-q"], cwd=ws, check=True, env=git_env)
        subprocess.run(["git", "add", "big.bin"], cwd=ws, check=True, env=git_env)
        env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
        cli = [sys.executable, "-m", "app.cli"]

        rows: list[tuple[str, float]] = []
        rows.append(("baseline: cat FILE > /dev/null", peak_rss_mb(["sh", "-c", 'cat "$0" > /dev/null', str(big)],
                                                                   ws, env)[0]))
        rows.append(("baseline: codexr --help", peak_rss_mb([*cli, "--help"], ws, env)[0]))
        rss, out = peak_rss_mb([*cli, "snapshots", "capture"], ws, env)
        snap = out.strip()
        rows.append(("capture (reads, hashes, compresses the file)", rss))
        rows.append(("verify --full (re-reads every blob)", peak_rss_mb([*cli, "snapshots", "verify", "--full"],
                                                                        ws, env)[0]))
        big.write_bytes(b"small now\n")
        rows.append(("restore (writes the file back)", peak_rss_mb([*cli, "snapshots", "restore", snap, "--yes"],
                                                                   ws, env)[0]))
        with open(big, "r+b") as f:
            f.seek(size - 1)
            f.write(b"!")
        future = time.time() + 3600  # a timestamp this fresh cannot be trusted: the restore re-hashes the file
        os.utime(big, (future, future))
        rows.append(("restore over a just-modified file (re-hash)",
                     peak_rss_mb([*cli, "snapshots", "restore", snap, "--yes"], ws, env)[0]))
        cat = rows[0][1]
        print(f"file: {size / 1024**3:.2f} GiB sparse, git-tracked; target <= {TARGET_MB:.0f} MB per operation")
        print(f"{'operation':<48} {'peak RSS':>10} {'x cat':>7}")
        for name, mb in rows:
            flag = "" if name.startswith("baseline") or mb <= TARGET_MB else "  OVER TARGET"
            print(f"{name:<48} {mb:>7.1f} MB {mb / cat:>6.1f}x{flag}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
