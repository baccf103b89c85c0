"""Reason codes are a format: every code is written down in FORMAT.md, and captures store no other."""

from __future__ import annotations

import os
from pathlib import Path

from store_helpers import write

from snapshot_store import ScopeSettings, Store
from snapshot_store.reasons import UNREADABLE, Reason

FORMAT = Path(__file__).parents[1] / "snapshot_store" / "FORMAT.md"


def test_every_reason_code_is_in_format_md() -> None:
    text = FORMAT.read_text()
    for reason in Reason:
        assert f"| `{reason.value}` |" in text, reason


def test_a_capture_stores_only_known_reason_codes(ws: Path, tmp_path: Path) -> None:
    write(ws, ".hidden", b"h")
    write(ws, "node_modules/x.js", b"x")
    write(ws, ".codexsnapignore", b"*.log\n")
    write(ws, "a.log", b"l")
    write(ws, "big.bin", b"0" * 2000)
    for n in range(3):
        write(ws, f"r{n}.txt", b"r")
    os.mkfifo(ws / "fifo")
    os.symlink("/", ws / "up")
    (ws / ".git").mkdir()
    scope = ScopeSettings(residue_max_files=2, residue_max_file_bytes=1000)
    with Store.open(tmp_path / "store") as store:
        files = store.at(ws).capture(scope=scope).files
    reasons = {e[1] for e in files.values() if e[0] in ("x", "D")}
    assert {Reason.HIDDEN, Reason.CHURN, Reason.IGNORED, Reason.TOO_LARGE, Reason.OVER_LIMIT,
            Reason.NOT_REGULAR, Reason.GIT} <= reasons
    assert all(r in set(Reason) or r.startswith(UNREADABLE) for r in reasons), reasons
