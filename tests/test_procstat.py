"""/proc/PID/stat read one way (snapshot_store/procstat.py): a lock's owner is told from a reused pid by its start
time, and the proxy's door walks a peer's parents; both must read the fields after the command name, which may hold
spaces and parentheses (a program named `a) b c` shifted every field of a naive split)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from snapshot_store.procstat import parent_pid, start_time

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="Linux's /proc")


def test_a_process_named_with_parentheses_and_spaces_reads_right(tmp_path: Path) -> None:
    sleeper = tmp_path / "x) 9 R 1"  # as the command name: what a naive split takes for state and parent
    shutil.copy2("/bin/sleep", sleeper)
    proc = subprocess.Popen([str(sleeper), "30"])
    try:
        assert Path(f"/proc/{proc.pid}/stat").read_text().startswith(f"{proc.pid} (x) 9 R 1)")
        assert parent_pid(proc.pid) == os.getpid()
        mine = start_time(os.getpid())
        theirs = start_time(proc.pid)
        assert mine is not None and theirs is not None and theirs.isdigit() and int(theirs) >= int(mine)
    finally:
        proc.kill()
        proc.wait()
    assert start_time(proc.pid) is None and parent_pid(proc.pid) is None  # reaped: no such process
