#!/usr/bin/env python3
"""Set up .venv on first use (or when pyproject.toml changes), then run codexr or the test suite.

    python3 bootstrap.py demo          # the main job: codexr's built-in offline demo
    python3 bootstrap.py test          # every test, plus ruff and mypy --strict
    python3 bootstrap.py codexr ARGS   # any codexr command inside the managed venv

Only the Python standard library is used here, so this works on a machine that has
nothing but Python 3.11+.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("CODEXR_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
STAMP = VENV / ".codexr-installed"


# The project is put on sys.path by a plain `.pth` line ("compat" editable mode), not by setuptools' import-hook
# finder: that finder imports pathlib and friends in `site`, ~25 ms at the start of every Python process of the
# venv, every `codexr` command included (`python -X importtime -c pass`: site 30 ms -> 7 ms, measured).
EDITABLE = ["--config-settings", "editable_mode=compat"]


def _fingerprint() -> str:
    return hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + " ".join(EDITABLE).encode()).hexdigest()


def ensure_venv() -> None:
    """Create the venv and install the project (editable, with test extras) when needed."""
    if sys.version_info < (3, 11):  # noqa: UP036 - this script is what tells old Pythons so
        sys.exit(f"codex-rewind needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if STAMP.exists() and STAMP.read_text() == _fingerprint():
        return
    if not (BIN / "python").exists():
        print(f"bootstrap: creating {VENV}", file=sys.stderr)
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    print("bootstrap: installing codex-rewind and its dependencies (first run only)", file=sys.stderr)
    pip = [str(BIN / "python"), "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, *EDITABLE, "-e", f"{ROOT}[test]"], check=True)
    STAMP.write_text(_fingerprint())


# The whole suite on three workers: most tests wait on a real Codex, a model or a subprocess (the CPUs were ~60% busy
# with two), so on CI's two cores three workers took 6.0-6.5 min where two took 8.4 (pytest's own time, fresh clone,
# 2026-12-04; four: 5.9) and one over 10. With arguments (`bootstrap.py test -k restore`) pytest runs as given, on one
# worker unless `-n N` is among them.
PARALLEL = ["-n", "3", "--dist", "load"]


def ensure_fuse() -> None:
    """The tests of names on case-insensitive volumes mount one with FUSE (tests/foldfs.py): install Debian's fuse3
    where it is missing and can be (root, apt-get, /dev/fuse); elsewhere those tests skip and say why."""
    import shutil

    if not sys.platform.startswith("linux") or shutil.which("fusermount3") or not os.path.exists("/dev/fuse"):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        print("bootstrap: fuse3 is not installed: the case-insensitive volume tests will skip", file=sys.stderr)
        return
    print("bootstrap: installing fuse3 (the case-insensitive volume tests mount one)", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "fuse3"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True)
        if subprocess.run(install, env=env, capture_output=True).returncode != 0:
            print("bootstrap: could not install fuse3: the case-insensitive volume tests will skip", file=sys.stderr)


def run_tests(extra: list[str]) -> int:
    """Lint, type-check and run pytest; the first failure decides the exit code."""
    ensure_fuse()
    py = str(BIN / "python")
    steps = [
        [py, "-m", "ruff", "check", "snapshot_store", "app", "config", "tests", "bench", "bootstrap.py"],
        [py, "-m", "mypy", "--strict", "snapshot_store", "app", "config"],
        # Bytecode for the code every test's codexr process imports: where PYTHONDONTWRITEBYTECODE is set (this
        # project's sandboxes and CI) no process writes it, and each one compiled app/ and snapshot_store/ anew
        # (`codexr snapshots list` 0.35 s from source, 0.17 s compiled, fresh clone; the suite starts hundreds).
        [py, "-m", "compileall", "-q", "-j", "0", "snapshot_store", "app", "config"],
        [py, "-m", "pytest", *(extra or PARALLEL)],
    ]
    for step in steps:
        print("bootstrap: $", *step[2:], file=sys.stderr, flush=True)
        rc = subprocess.run(step, cwd=ROOT).returncode
        if rc != 0:
            return rc
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    ensure_venv()
    if cmd == "test":
        return run_tests(rest)
    if cmd == "demo":
        return subprocess.run([str(BIN / "codexr"), "demo", *rest]).returncode
    if cmd == "codexr":
        return subprocess.run([str(BIN / "codexr"), *rest]).returncode
    print(f"bootstrap: unknown command {cmd!r} (use demo, test or codexr)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
