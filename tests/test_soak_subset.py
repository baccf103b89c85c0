"""A 20-trial subset of the fault-injection soak (tests/soak/): real `codexr` processes SIGKILLed at random
instants and at chosen syscalls (strace), then every check of the full soak. Deterministic seeds."""

from __future__ import annotations

import random
from collections.abc import Iterator

import pytest
from soak.kills import AGENT_OPS, STORE_OPS, Soak

TRIALS = 20
FILES = 150
SEED = 20240601

def _run(soak: Soak, op: str) -> list[str]:
    rng = random.Random(f"{SEED}-{op}")
    failed = []
    for i in range(TRIALS):
        t = soak.trial(op, i, rng)
        failed += [f"{op} #{i} ({t.fault}): {check}: {detail[:500]}" for check, detail in t.failures.items()]
    return failed


@pytest.fixture(scope="module")
def store_soak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Soak]:
    soak = Soak(tmp_path_factory.mktemp("soak-store"), files=FILES, seed=SEED, log=lambda _m: None)
    soak.build_store_fixtures()
    yield soak
    soak.close()


@pytest.fixture(scope="module")
def agent_soak(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Soak]:
    soak = Soak(tmp_path_factory.mktemp("soak-agent"), files=FILES, seed=SEED, log=lambda _m: None)
    soak.build_agent_fixtures()
    yield soak
    soak.close()


@pytest.mark.parametrize("op", STORE_OPS)
def test_kill_store_command_loses_nothing(store_soak: Soak, op: str) -> None:
    """After a SIGKILL of capture/restore/gc: no torn or mixed file, recovery says so, verify --full passes,
    the safety snapshot undoes, every listed snapshot restores exactly, nothing written outside."""
    failed = _run(store_soak, op)
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("op", AGENT_OPS)
def test_kill_rewind_or_redo_loses_nothing(agent_soak: Soak, op: str) -> None:
    """After a SIGKILL of `codexr rewind`/`redo`: the files are wholly before or after, and the rewind can be
    redone (or the redo still can be)."""
    failed = _run(agent_soak, op)
    assert not failed, "\n".join(failed)
