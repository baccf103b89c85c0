"""Every bench script still starts: speed goals are measured by them (never by timed tests), so one that no longer
imports what it measures would rot unseen (bench_durability.py did, for a session, after the store split)."""

from __future__ import annotations

import json
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


def test_the_goals_bench_runs_its_rows_without_codex(tmp_path: Path) -> None:
    """bench_goals.py's rows that need neither Codex nor a resident server (an in-session restore through its
    helper process, the cold capture's peak RSS through its runner), on its --quick trees, one round (~10 s)."""
    out = tmp_path / "goals.json"
    done = subprocess.run([sys.executable, str(BENCH / "bench_goals.py"), "--quick", "--rounds", "1", "--only",
                           "session-restore,cold-rss", "--dir", str(tmp_path), "--json", str(out)],
                          capture_output=True, text=True, timeout=300, cwd=BENCH.parent)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Git's index is refreshed" in done.stdout
    rows = {row["key"]: row for row in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"d", "f"}
    assert all(row["verdict"] in ("PASS", "MISS") for row in rows.values())
    assert 0 < rows["f"]["summary"]["median"] < 1000  # MB: the capture's own, not the bench's
