"""Start real `codexr` processes, and kill them: at a random instant, or at the N-th call of a syscall (strace)."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TIMEOUT_S = 120.0

#: Syscalls worth dying at: every step of the write path (temp files, data, fsync, rename, unlink). Restores
#: work through directory fds: their renames are `renameat` (strace -c of a restore: 14 renameat, 4 rename), their
#: directory chains are opened by `openat2` where the kernel has it.
KILL_SYSCALLS = ("openat", "openat2", "write", "fsync", "fdatasync", "syncfs", "rename", "renameat", "renameat2",
                 "unlink", "unlinkat", "mkdir", "mkdirat", "symlinkat", "fchmod", "fchmodat", "ftruncate")


@dataclass
class Run:
    """What one `codexr` invocation did."""

    argv: list[str]
    rc: int
    stdout: str
    stderr: str
    killed: bool = False
    fault: str = ""

    def show(self) -> str:
        """For failure messages."""
        return (f"`codexr {' '.join(self.argv)}` exit {self.rc}{' (killed: ' + self.fault + ')' if self.killed else ''}"
                f"\n--- stdout\n{self.stdout[-1500:]}\n--- stderr\n{self.stderr[-1500:]}")

    def json(self) -> Any:
        """Stdout parsed as one JSON document."""
        return json.loads(self.stdout)


@dataclass
class Codexr:
    """The command line, bound to one CODEX_HOME, run from one directory."""

    home: Path
    cwd: Path
    extra_env: dict[str, str] = field(default_factory=dict)
    module: str = "app"
    """`python -m` this: the console script's launcher, as users run it (one-shot unless `extra_env` turns the
    resident server on, `--server`)."""

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(self.home),
                "NO_PROXY": "127.0.0.1,localhost", "CODEXR_SERVER": "0", **self.extra_env}

    def cmd(self, args: Sequence[str]) -> list[str]:
        return [sys.executable, "-m", self.module, *args]

    def run(self, *args: str, timeout: float = TIMEOUT_S, cwd: Path | None = None) -> Run:
        """Run to completion (killing the process group on timeout)."""
        return self._run(self.cmd(args), list(args), timeout=timeout, cwd=cwd)

    def _run(self, cmd: list[str], argv: list[str], *, timeout: float, cwd: Path | None = None,
             kill_after: float | None = None) -> Run:
        proc = subprocess.Popen(cmd, cwd=cwd or self.cwd, env=self.env(), stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="backslashreplace", start_new_session=True)
        killed_by_us = False
        try:
            if kill_after is not None:
                try:
                    out, err = proc.communicate(timeout=kill_after)
                except subprocess.TimeoutExpired:
                    os.kill(proc.pid, signal.SIGKILL)
                    killed_by_us = True
                    out, err = proc.communicate(timeout=timeout)
            else:
                out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            out, err = proc.communicate()
            return Run(argv, -999, out, err + f"\n[soak] TIMEOUT after {timeout}s")
        finally:
            _kill_group(proc.pid)  # Codex children of a killed codexr, and strace's tracee
        rc = proc.returncode
        return Run(argv, rc, out, err, killed=killed_by_us and rc == -signal.SIGKILL)

    def kill_at_instant(self, args: Sequence[str], after: float) -> Run:
        """SIGKILL the process `after` seconds after it was started (if it is still running)."""
        r = self._run(self.cmd(args), list(args), timeout=TIMEOUT_S, kill_after=after)
        r.fault = f"SIGKILL at {after:.3f}s"
        return r

    def kill_at_syscall(self, args: Sequence[str], syscall: str, when: int, *, follow: bool = True) -> Run:
        """SIGKILL the process when it enters the `when`-th call of `syscall` (strace fault injection)."""
        strace = ["strace", "-qq", "-o", "/dev/null", *(["-f"] if follow else []),
                  "-e", f"trace={syscall}", "-e", f"inject={syscall}:signal=KILL:when={when}"]
        r = self._run([*strace, *self.cmd(args)], list(args), timeout=TIMEOUT_S)
        r.killed = r.rc == -signal.SIGKILL or r.rc == 128 + signal.SIGKILL
        r.fault = f"SIGKILL at {syscall} #{when}"
        return r

    def count_syscalls(self, args: Sequence[str], syscalls: Sequence[str], *, follow: bool = True) -> dict[str, int]:
        """How often an uninterrupted run calls each syscall (the range to pick `when` from)."""
        out = self.cwd.parent / "strace-count.txt"
        cmd = ["strace", "-qq", *(["-f"] if follow else []), "-c", "-o", str(out), "-e",
               f"trace={','.join(syscalls)}", *self.cmd(args)]
        r = self._run(cmd, list(args), timeout=TIMEOUT_S)
        if r.rc != 0:
            raise RuntimeError(f"reference run under strace failed:\n{r.show()}")
        counts = {s: 0 for s in syscalls}
        for line in out.read_text().splitlines():
            parts = line.split()
            # "% time  seconds  usecs/call  calls  [errors]  syscall"
            if len(parts) >= 5 and parts[-1] in counts and parts[3].isdigit():
                counts[parts[-1]] = int(parts[3])
        out.unlink()
        return counts


def _kill_group(pgid: int) -> None:
    """Kill what is left of a process group this harness started (its leader's pid is the group id)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def pick_fault(rng: random.Random, counts: dict[str, int], duration: float,
               start: float = 0.0) -> tuple[str, int | float]:
    """Half the trials die at a random instant of the run, half at a random call of a write-path syscall.

    Instants are drawn after most of the interpreter's start-up (`start`, the time `codexr --help` takes):
    a kill before the command touches anything proves nothing and costs as much as one that does."""
    usable = {s: n for s, n in counts.items() if n > 0}
    if rng.random() < 0.5 or not usable:
        lo = min(0.8 * start, 0.5 * duration) if start else 0.05
        return "instant", rng.uniform(lo, max(lo + 0.05, duration * 1.05))
    name = rng.choice(sorted(usable))
    return name, rng.randint(1, usable[name])


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    """fn(*args) and its wall time."""
    t = time.perf_counter()
    res = fn(*args)
    return res, time.perf_counter() - t
