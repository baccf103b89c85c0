"""The suite is green however it is started: as a background job of a script (SIGINT and SIGQUIT ignored), under
nohup (SIGHUP ignored), under setsid or from a detached tmux (an orphaned process group, where the kernel discards
a SIGTSTP's stop), with signals blocked (tests/child_signals.py, slow_exec in tests/test_server.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
from child_signals import PYTHONS_OWN

REPO = Path(__file__).parents[1]
#: What a runner may block: signals the suite's tests send, and one that none does.
BLOCKED = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGUSR1})
#: The background job of a script (`cmd &` in `bash -c`), under nohup, in a session of its own.
STARTED_AWAY = ["setsid", "-w", "nohup", "bash", "-c", '"$@" & wait', "bash"]

#: Run by STARTED_AWAY: which signals it starts with ignored and blocked, and whether its process group is orphaned.
PREMISE = """
import os
def stat(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[2]), int(fields[3])  # parent, process group, session
group, held = os.getpgrp(), False  # held: a member's parent is in another group of the same session
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        parent, pgrp, sid = stat(pid)
        if pgrp == group:
            _, parent_pgrp, parent_sid = stat(parent)
            held = held or (parent_pgrp != group and parent_sid == sid)
    except (OSError, IndexError):
        pass  # gone meanwhile, or the parent of pid 1
print(open("/proc/self/status").read())
print("orphaned:", not held)
"""


def signal_sets(status: str) -> tuple[set[int], set[int]]:
    """The signals a /proc/PID/status text says are ignored and blocked."""
    fields = dict(line.split(":", 1) for line in status.splitlines() if line.startswith(("SigIgn:", "SigBlk:")))

    def members(mask: str) -> set[int]:
        return {n for n in range(1, 65) if int(mask, 16) >> (n - 1) & 1}

    return members(fields["SigIgn"]), members(fields["SigBlk"])


def block() -> None:
    signal.pthread_sigmask(signal.SIG_BLOCK, BLOCKED)


def test_what_a_test_starts_has_a_terminals_signal_defaults() -> None:
    """Through subprocess and through pexpect's terminal, a child starts ignoring only what Python itself ignores
    (pexpect does not reset SIGPIPE and SIGXFSZ), with nothing blocked, however this run was started."""
    by_subprocess = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True, check=True).stdout
    by_pexpect = pexpect.run("cat /proc/self/status", encoding="utf-8")
    for how, status in (("subprocess", by_subprocess), ("pexpect", by_pexpect)):
        ignored, blocked = signal_sets(status)
        assert ignored <= PYTHONS_OWN and not blocked, (how, sorted(map(signal.Signals, ignored | blocked)))


def test_the_suite_started_away_from_a_terminal_passes_its_signal_tests(tmp_path: Path) -> None:
    """A background job under nohup and setsid, with signals blocked: the check above and Ctrl+Z pass there too."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    premise = subprocess.run([*STARTED_AWAY, sys.executable, "-c", PREMISE], capture_output=True, text=True,
                             env=env, preexec_fn=block, timeout=60)
    ignored, blocked = signal_sets(premise.stdout)
    assert {signal.SIGINT, signal.SIGQUIT, signal.SIGHUP} <= ignored and blocked >= BLOCKED, premise.stdout
    assert "orphaned: True" in premise.stdout, premise.stdout
    res = subprocess.run(
        [*STARTED_AWAY, sys.executable, "-m", "pytest", "-p", "no:xdist", f"--basetemp={tmp_path / 'run'}",
         "tests/test_suite_start.py::test_what_a_test_starts_has_a_terminals_signal_defaults",
         "tests/test_server.py::test_ctrl_z_stops_the_command_and_fg_continues_it"],
        capture_output=True, text=True, env=env, cwd=REPO, preexec_fn=block, timeout=600)
    assert res.returncode == 0 and "2 passed" in res.stdout, res.stdout[-5000:] + res.stderr[-2000:]
