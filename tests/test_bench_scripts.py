"""Every bench script still starts: speed goals are measured by them (never by timed tests), so one that no longer
imports what it measures would rot unseen (bench_durability.py did, for a session, after the store split)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
#: The scripts one runs (the other files are modules they share: tui_log.py, workspace_gen.py).
SCRIPTS = sorted(p.name for p in BENCH.glob("*.py") if 'if __name__ == "__main__"' in p.read_text())


def test_the_bench_directory_holds_the_scripts_the_docs_name() -> None:
    assert {"bench_store.py", "bench_startup.py", "bench_tui.py", "bench_durability.py"} <= set(SCRIPTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_bench_script_starts_and_explains_itself(script: str) -> None:
    done = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True,
                          timeout=120, cwd=BENCH.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout


def test_the_durability_bench_runs_its_three_restore_variants(tmp_path: Path) -> None:
    """It patches the restorer's SafeRoot where the restorer looks it up (cheap enough to run whole)."""
    done = subprocess.run([sys.executable, str(BENCH / "bench_durability.py"), "--sizes", "20", "--rounds", "1",
                           "--dir", str(tmp_path)], capture_output=True, text=True, timeout=300, cwd=BENCH.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    for variant in ("durable", "no-sync", "cached"):
        assert f"  {variant} " in done.stdout
