"""The newest official Codex from npm (`@openai/codex@latest`), installed once per machine and day for the tests that
run the Codex-facing paths against it as well as against the pinned binary (issue 33 §6). Offline, or without npm,
those tests are skipped with the reason; nothing else depends on it.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Where the install is kept: one directory per day, so a new release is picked up the next day.
BASE = Path(tempfile.gettempdir()) / "codexr-test-npm-codex"


@dataclass(frozen=True)
class NpmCodex:
    """One npm install of Codex: its node launcher (`node_modules/.bin/codex`) and the native binary it starts."""

    launcher: Path
    native: Path
    version: str


def _install(where: Path) -> str | None:
    """Install into `where`; None when done, else why not."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node and npm are not installed"
    where.mkdir(parents=True, exist_ok=True)
    try:
        res = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(where),
                              "@openai/codex@latest"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return "npm install @openai/codex timed out (offline?)"
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        return f"npm install @openai/codex failed (offline?): {tail}"
    return None


def newest_codex() -> NpmCodex:
    """The newest npm Codex, installed if needed (skips the calling test when it cannot be)."""
    where = BASE / datetime.date.today().isoformat()
    BASE.mkdir(parents=True, exist_ok=True)
    with open(BASE / "lock", "w") as lock:  # one install at a time across xdist workers
        fcntl.flock(lock, fcntl.LOCK_EX)
        launcher = where / "node_modules" / ".bin" / "codex"
        if not launcher.exists():
            why = _install(where)
            if why is not None:
                pytest.skip(why)
        natives = [p for p in (where / "node_modules").glob("@openai/codex-*/vendor/*/bin/codex")
                   if p.is_file() and os.access(p, os.X_OK)]
        try:
            out = subprocess.run([str(launcher), "--version"], capture_output=True, text=True, timeout=60)
        except OSError as exc:
            pytest.skip(f"the npm Codex does not run here: {exc}")
        if out.returncode != 0 or not natives:
            pytest.skip(f"the npm Codex does not run here: {out.stderr.strip()[:200] or 'no native binary'}")
        for old in BASE.iterdir():  # earlier days' installs
            if old.is_dir() and old != where:
                with contextlib.suppress(OSError):
                    shutil.rmtree(old)
        return NpmCodex(launcher, natives[0], out.stdout.split()[-1])
