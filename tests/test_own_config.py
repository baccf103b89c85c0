"""codexr's own `codexr.toml`: `codexr config` reports where each setting came from, and stock Codex, which
never reads that file, no longer warns about codexr's settings (checked with the pinned binary's `codex exec`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]

from app.cli import main
from app.codex.scripted_model import ScriptedModel, write_codex_home
from config import CODEXR_FILE_NAME, load_config, split_overrides

TIMEOUT_S = 60

#: codexr's settings as a user writes them: every table codexr reads.
SETTINGS = """
[features]
file_snapshots = true

[file_snapshots]
include_hidden = true
residue_max_files = 50

[tui]
keys = { rewind = "f2" }
"""


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def test_codexr_config_prints_each_setting_with_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path))

    def codexr(*args: str) -> Result:
        """`codexr ARGS` in this process (the console script's entry point), with its output."""
        code = main(list(args))
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    (tmp_path / "config.toml").write_text('model = "o3"\n[file_snapshots]\ntrack_hidden_files = true\ntypo = 1\n')
    (tmp_path / CODEXR_FILE_NAME).write_text("[file_snapshots]\nresidue_max_files = 7\n")

    res = codexr("-c", "file_snapshots.auto_gc=false", "--disable", "file_snapshots", "config")
    assert res.returncode == 0, res.stderr
    lines = dict(line.split("  # ", 1) for line in res.stdout.splitlines() if not line.startswith("#"))
    rows = {key.strip(): origin for key, origin in lines.items()}
    assert rows["features.file_snapshots = false"] == "--disable"
    assert rows["file_snapshots.residue_max_files = 7"] == "codexr.toml"
    assert rows["file_snapshots.include_hidden = true"] == "config.toml (as track_hidden_files)"
    assert rows["file_snapshots.auto_gc = false"] == "-c file_snapshots.auto_gc=false"
    assert rows['file_snapshots.max_store_bytes = "10GiB"'] == "default"
    # The listing is valid TOML for codexr.toml: pasted there it gives the same settings.
    pasted = tmp_path / "pasted"
    pasted.mkdir()
    (pasted / CODEXR_FILE_NAME).write_text(res.stdout)
    assert load_config(pasted).settings == load_config(
        tmp_path, overrides=["file_snapshots.auto_gc=false"], disable=["file_snapshots"]
    ).settings.model_copy(update={"codex_home": pasted})
    # The unknown key of Codex's file is one warning line; the command went on.
    assert res.stderr.splitlines() == [
        f"codexr: warning: {tmp_path / 'config.toml'}: ignored [file_snapshots] typo (unknown setting)"
    ]

    doc = json.loads(codexr("config", "--json").stdout)
    assert doc["settings"]["file_snapshots.residue_max_files"] == {"value": 7, "source": "codexr.toml",
                                                                   "detail": ""}
    assert doc["settings"]["file_snapshots.max_store_bytes"]["value"] == 10 * 1024**3
    assert doc["files"] == [{"path": str(tmp_path / CODEXR_FILE_NAME), "exists": True},
                            {"path": str(tmp_path / "config.toml"), "exists": True}]
    assert len(doc["warnings"]) == 1

    # The same unknown key in codexr's own file is an error: one line, exit 2.
    (tmp_path / CODEXR_FILE_NAME).write_text("[file_snapshots]\ntypo = 1\n")
    res = codexr("config")
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines()[-1] == (
        f"codexr: error: {tmp_path / CODEXR_FILE_NAME}: unknown setting [file_snapshots] typo"
    )


# --- what stock Codex sees -----------------------------------------------------------------------------


def codex_exec(home: Path, env: dict[str, str], ws: Path, overrides: tuple[str, ...]) -> list[dict[str, Any]]:
    """The events of the pinned `codex exec --json` for one prompt, up to the end of its turn."""
    args = [str(bundled_codex_path()), "exec", "--json", "--skip-git-repo-check", "-C", str(ws)]
    for kv in overrides:
        args += ["-c", kv]
    # Codex's shell children can outlive it holding the pipe: read to the turn's end, then end the group.
    proc = subprocess.Popen([*args, "say hello"], env={**os.environ, **env, "NO_PROXY": "127.0.0.1,localhost"},
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, start_new_session=True)

    def kill_group() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)

    guard = threading.Timer(TIMEOUT_S, kill_group)  # a hung Codex fails the test instead of hanging it
    guard.start()
    events = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            events.append(json.loads(line))
            if events[-1].get("type") in ("turn.completed", "turn.failed"):
                break
        # Wait for Codex to exit without reaping it, so its group id stays ours while we end the group.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
    finally:
        guard.cancel()
        kill_group()
        proc.wait()
    return events


def error_texts(events: list[dict[str, Any]]) -> list[str]:
    """Every `error` Codex reported, as an event or as an item (the unknown-settings warning is one)."""
    out = [str(e.get("message")) for e in events if e.get("type") == "error"]
    out += [str(e["item"].get("message")) for e in events
            if e.get("type") == "item.completed" and e["item"].get("type") == "error"]
    return out


def test_codex_does_not_warn_about_settings_in_codexr_toml(model: ScriptedModel, tmp_path: Path) -> None:
    # The documented place: codexr.toml beside a normal config.toml.
    new = tmp_path / "new"
    new_env = write_codex_home(new, model.base_url)
    (new / CODEXR_FILE_NAME).write_text(SETTINGS)
    # The old place (and the fork's): the same settings in Codex's config.toml.
    old = tmp_path / "old"
    old_env = write_codex_home(old, model.base_url)
    config = old / "config.toml"  # its [features] table (write_codex_home's) gets codexr's key, the rest appended
    features, rest = SETTINGS.split("[features]\n", 1)[1].split("\n\n", 1)
    config.write_text(config.read_text().replace("[features]\n", f"[features]\n{features}\n", 1) + "\n" + rest)
    ws = tmp_path / "ws"
    ws.mkdir()

    # codexr reads the same settings from either place...
    loaded = load_config(new)
    assert {o.key: o.origin for o in loaded.origins if o.origin != "default"} == {
        "features.file_snapshots": "codexr.toml", "file_snapshots.include_hidden": "codexr.toml",
        "file_snapshots.residue_max_files": "codexr.toml", "tui.keys": "codexr.toml"}
    assert loaded.settings.model_copy(update={"codex_home": old}) == load_config(old).settings
    # ...and passes none of its own `-c` keys on to Codex.
    codex_overrides = ("model_providers.mock.stream_max_retries=1",)
    assert split_overrides(["file_snapshots.auto_gc=false", "features.file_snapshots=true",
                            "tui.keys.redo=f3", *codex_overrides]) == codex_overrides

    old_events = codex_exec(old, old_env, ws, codex_overrides)
    new_events = codex_exec(new, new_env, ws, codex_overrides)
    assert old_events[-1]["type"] == new_events[-1]["type"] == "turn.completed", (old_events, new_events)
    # Stock Codex warns (as `error` events) about codexr's settings in config.toml...
    assert any("file_snapshots" in text for text in error_texts(old_events)), old_events
    # ...and about nothing when they live in codexr.toml.
    assert error_texts(new_events) == [], new_events
