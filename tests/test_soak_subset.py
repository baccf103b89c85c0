"""The CI subset of the fault-injection soak (tests/soak/): real `codexr` processes SIGKILLed at random instants
and at chosen syscalls (`strace -e inject=S:signal=KILL:when=N`), then every check of the full soak.

Sized to the suite's budget (the whole subset ~75-90 s on the project's 2-core machine shared with other jobs,
measured with `time`): a small workspace (80 tracked files in nested directories, modes, symlinks, untracked,
deleted and shell-made files) on a tmpfs, fixtures built once and copied per trial (`cp -a`; the Codex thread is
seeded once and the whole CODEX_HOME copied, at the same absolute paths), and the checks after each kill run
in-process through the snapshot_store API; only the killed command is a process. That process still costs a
`codexr` start (~0.7 s a store trial there) and for rewind/redo a Codex start too (~2.5 s a trial): 20 store
trials per operation made ~91 s with 4 agent trials, so STORE_TRIALS = 16 and AGENT_TRIALS = 4. The full soak
(`python -m tests.soak run`, see its README) runs 200 per operation. Fixed seeds: a failure reproduces with
the same trial numbers.
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from soak.kills import AGENT_OPS, STORE_OPS, Soak

STORE_TRIALS = 16
AGENT_TRIALS = 4
FILES = 80
SEED = 20240601


def _scratch(name: str) -> Iterator[Path]:
    """A tmpfs directory where there is one: a kill loses no page cache, and the restores' fsyncs and syncfs
    stay off the shared disk (on /tmp they tripled this subset's time)."""
    shm = Path("/dev/shm")
    path = Path(tempfile.mkdtemp(prefix=f"codexr-{name}-", dir=shm if shm.is_dir() else None))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _run(soak: Soak, op: str, trials: int) -> list[str]:
    rng = random.Random(f"{SEED}-{op}")
    failed = []
    for i in range(trials):
        t = soak.trial(op, i, rng)
        failed += [f"{op} #{i} ({t.fault}): {check}: {detail[:500]}" for check, detail in t.failures.items()]
    return failed


@pytest.fixture(scope="module")
def store_soak() -> Iterator[Soak]:
    for base in _scratch("soak-store"):
        soak = Soak(base, files=FILES, seed=SEED, log=lambda _m: None)
        try:
            soak.build_store_fixtures()
            yield soak
        finally:
            soak.close()


@pytest.fixture(scope="module")
def agent_soak() -> Iterator[Soak]:
    for base in _scratch("soak-agent"):
        soak = Soak(base, files=FILES, seed=SEED, log=lambda _m: None)
        try:
            soak.build_agent_fixtures()
            yield soak
        finally:
            soak.close()


@pytest.mark.parametrize("op", STORE_OPS)
def test_kill_store_command_loses_nothing(store_soak: Soak, op: str) -> None:
    """After a SIGKILL of capture/restore/gc: no torn or mixed file, recovery says so, verify --full passes,
    the safety snapshot undoes, every listed snapshot restores exactly, nothing written outside."""
    failed = _run(store_soak, op, STORE_TRIALS)
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("op", AGENT_OPS)
def test_kill_rewind_or_redo_loses_nothing(agent_soak: Soak, op: str) -> None:
    """After a SIGKILL of `codexr rewind`/`redo`: the files are wholly before or after, and the rewind can be
    redone (or the redo still can be)."""
    failed = _run(agent_soak, op, AGENT_TRIALS)
    assert not failed, "\n".join(failed)
