"""Disk full: the workspace and CODEX_HOME on a small tmpfs (8 MiB), filled to a few KiB of free space before a
capture or a restore; the run must end with one clear line (or succeed), then every kill check must pass."""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import trees
from .kills import Fixture, Soak
from .runner import Codexr, Run

FREE_BYTES = (0, 4096, 65536, 262144, 1048576, 2097152)


def mount_small(mnt: Path) -> bool:
    """Mount an 8 MiB tmpfs (needs root); False where not permitted."""
    mnt.mkdir(parents=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True)
    return r.returncode == 0


def fill(mnt: Path, leave: int) -> Path:
    """A filler file that leaves about `leave` bytes free."""
    filler = mnt / "filler"
    st = os.statvfs(mnt)
    free = st.f_bavail * st.f_frsize
    with open(filler, "wb") as fh:
        want = max(0, free - leave)
        chunk = b"\0" * 65536
        try:
            while want > 0:
                want -= fh.write(chunk[: min(len(chunk), want)])
        except OSError:
            pass
    return filler


def run_diskfull(base: Path, seed: int, log: Callable[[str], None], trials: int = 12) -> list[dict[str, Any]]:
    mnt = base / "fs"
    if not mount_small(mnt):
        log("[soak] diskfull: cannot mount a tmpfs here; not run (use strace inject=write:error=ENOSPC instead)")
        return []
    out: list[dict[str, Any]] = []
    soak = Soak(mnt, files=150, seed=seed, log=log)
    soak.templates = base / "templates"  # outside the small file system
    soak.templates.mkdir(parents=True)
    try:
        soak.build_store_fixtures()
        rng = random.Random(f"{seed}-diskfull")
        for n in range(trials):
            op = ("capture", "restore")[n % 2]
            leave = FREE_BYTES[(n // 2) % len(FREE_BYTES)]

            def fault(cx: Codexr, fx: Fixture, leave: int = leave, op: str = op,
                      n: int = n) -> tuple[Run, Callable[[], None]]:
                if op == "capture":  # a shell-made file that needs space, and a file the store must take in
                    (soak.lay.ws / "shell_big.dat").write_bytes(random.Random(n).randbytes(600_000))
                    fx.before = fx.after = trees.listing(soak.lay.ws)
                filler = fill(mnt, leave)
                r = cx.run(*fx.args)
                r.fault = f"ENOSPC, {leave} B free"
                return r, filler.unlink

            saved = {k: (f.before, f.after) for k, f in soak.fixtures.items()}
            t = soak.trial(op, n, rng, fault=fault)
            for k, (b, a) in saved.items():
                soak.fixtures[k].before, soak.fixtures[k].after = b, a
            t.op = f"diskfull {op}"
            log(f"[soak] diskfull {op} #{n} {t.fault:<22} {'FAIL ' + ','.join(t.failures) if t.failures else 'ok'}")
            for check, detail in t.failures.items():
                log(f"[soak]     {check}: {detail[:400]}")
            d = t.as_json()
            d["faults"] = 1
            out.append(d)
    finally:
        soak.close()
        subprocess.run(["umount", str(mnt)], check=False)
    return out
