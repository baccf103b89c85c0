"""The seed's own Rust fork (npm package `codex-rewind`) also keeps a store in CODEX_HOME/file_snapshots/ (its
`blobs/`, `manifests/`, `refs/<thread>.json`, `turns/`, `restores/` beside this one's `packs/`, `snapshots/`,
`refs/workspaces/`) and installs a `codexr` command of its own (issue 33 §7): the two stores coexist, whatever this
codexr captures, restores, collects or verifies, and `doctor` says which `codexr` a shell runs."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

from app.codex.scripted_model import write_codex_home

REPO = Path(__file__).parents[1]
FORK_FILES = {
    "blobs/ab/abcdef0123456789": b"a blob of the fork's",
    "manifests/0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000/1.json": b'{"files": {"a.txt": "abcdef0123456789"}}\n',
    "refs/0199aaaa-bbbb-7ccc-8ddd-eeeeffff0000.json": b'{"thread": "0199aaaa", "turns": ["t1"]}\n',
    "turns/t1.json": b'{"manifest": 1}\n',
    "restores/r1.json": b'{"restored": 1}\n',
}


def _codexr(home: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_SERVER": "0"}
    return subprocess.run([sys.executable, "-m", "app.cli", "-C", str(ws), *args], env=env, text=True,
                          capture_output=True, timeout=120)


def _digests(store: Path) -> dict[str, str]:
    return {rel: hashlib.sha256((store / rel).read_bytes()).hexdigest() for rel in FORK_FILES}


def test_the_two_stores_coexist(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    store = home / "file_snapshots"
    for rel, data in FORK_FILES.items():
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        (store / rel).write_bytes(data)
    before = _digests(store)
    first = _codexr(home, ws, "snapshots", "capture", "--json")
    assert first.returncode == 0, first.stderr
    (ws / "a.txt").write_text("two\n")
    assert _codexr(home, ws, "snapshots", "capture").returncode == 0
    first_id = first.stdout.split('"id": "', 1)[1].split('"', 1)[0]
    restore = _codexr(home, ws, "snapshots", "restore", first_id, "--yes")
    assert restore.returncode == 0, restore.stderr
    assert (ws / "a.txt").read_text() == "one\n"
    gc = _codexr(home, ws, "-c", "file_snapshots.gc_grace_seconds=0", "-c", "file_snapshots.retention_max_snapshots=1",
                 "snapshots", "gc")
    assert gc.returncode == 0, gc.stderr
    verify = _codexr(home, ws, "snapshots", "verify", "--full")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert _digests(store) == before  # the fork's files, untouched


def _fake_fork_codexr(where: Path) -> Path:
    """A `codexr` as the npm package installs it: a node script linked from npm's bin directory."""
    script = where / "lib" / "node_modules" / "codex-rewind" / "bin" / "codexr.js"
    script.parent.mkdir(parents=True)
    script.write_text("#!/usr/bin/env node\nrequire('../dist/cli.js')\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    bin_dir = where / "bin"
    bin_dir.mkdir()
    (bin_dir / "codexr").symlink_to(script)
    return bin_dir


def test_doctor_says_when_another_codexr_is_first_on_path(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, **write_codex_home(home, "http://127.0.0.1:9"), "PYTHONPATH": str(REPO),
           "CODEXR_SERVER": "0"}
    fork_bin = _fake_fork_codexr(tmp_path / "npm")
    ours = Path(sys.executable).parent
    lines = {}
    for name, first in (("fork", fork_bin), ("ours", ours)):
        path = os.pathsep.join([str(first), str(fork_bin), env.get("PATH", "")])
        done = subprocess.run([sys.executable, "-m", "app.cli", "doctor"], cwd=ws, env={**env, "PATH": path},
                              capture_output=True, text=True, timeout=120)
        assert "Traceback" not in done.stderr, done.stderr
        lines[name] = [line for line in done.stdout.splitlines() if "codexr" in line and "PATH" in line]
    assert len(lines["fork"]) == 1 and lines["fork"][0].startswith("WARN"), lines
    assert "codex-rewind" in lines["fork"][0]
    assert (ours / "codexr").exists(), "the suite runs in the venv bootstrap.py made, with its console script"
    assert lines["ours"] == [f"ok    codexr on PATH: {ours / 'codexr'}"], lines
