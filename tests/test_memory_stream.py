"""Large files stream: restore and verify --full of a big sparse file run under a small memory cap.

Behaviour, not timing: the old code inflated a whole zstd frame of zeros at once (2x the file in
memory), so under RLIMIT_DATA of 256 MiB a 512 MiB file failed with MemoryError. Peak figures for a
2 GiB file are measured by bench/bench_memory.py.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
SIZE = 512 * 1024 * 1024
CAP = 256 * 1024 * 1024
CHUNK = 1024 * 1024


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_DATA, (CAP, CAP))


def run_capped(home: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=600, preexec_fn=_capped)


def all_zero(path: Path) -> bool:
    zero = bytes(CHUNK)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            if chunk != zero[:len(chunk)]:
                return False
    return True


@pytest.fixture
def big_ws(tmp_path: Path) -> tuple[Path, Path, str]:
    """A workspace whose 512 MiB sparse file was captured (size limit lifted); returns (ws, home, id)."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    with open(ws / "big.bin", "wb") as f:
        f.truncate(SIZE)
    (ws / "small.txt").write_text("s")
    res = run_capped(home, ws, "-c", "file_snapshots.residue_max_file_bytes=1GiB", "snapshots", "capture")
    assert res.returncode == 0, res.stderr
    return ws, home, res.stdout.strip()


def test_restore_of_a_large_file_streams_under_a_memory_cap(big_ws: tuple[Path, Path, str]) -> None:
    ws, home, snap = big_ws
    (ws / "big.bin").write_bytes(b"small now\n")
    res = run_capped(home, ws, "snapshots", "restore", snap, "--yes")
    assert res.returncode == 0, res.stderr
    assert "MemoryError" not in res.stderr
    assert (ws / "big.bin").stat().st_size == SIZE
    assert all_zero(ws / "big.bin")


def test_restore_rehashing_a_just_modified_large_file_streams(big_ws: tuple[Path, Path, str]) -> None:
    """A timestamp too fresh to trust makes the restore compare the file's content before replacing it."""
    ws, home, snap = big_ws
    big = ws / "big.bin"
    with open(big, "r+b") as f:
        f.seek(SIZE - 1)
        f.write(b"!")
    future = time.time() + 3600
    os.utime(big, (future, future))
    res = run_capped(home, ws, "snapshots", "restore", snap, "--yes")
    assert res.returncode == 0, res.stderr
    assert "wrote   big.bin" in res.stdout.splitlines()
    assert big.stat().st_size == SIZE and all_zero(big)


def test_verify_full_of_a_large_blob_streams_under_a_memory_cap(big_ws: tuple[Path, Path, str]) -> None:
    ws, home, _snap = big_ws
    res = run_capped(home, ws, "snapshots", "verify", "--full")
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines()[-1].startswith("ok:")
