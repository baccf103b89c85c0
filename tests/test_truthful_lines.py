"""Issue 18 §2, "lines that mislead": each line the command line prints says one thing, and it is true.

These need no Codex: `-C` after any subcommand, `server status` when no server can run, `history search`
with several matches in one message, and times (local with their offset on screen, ISO 8601 with offset in
--json). The `--thread` prefixes and `rewind` from another directory run the real Codex: tests/test_cli_agent.py.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from app.cli import build_parser

REPO = Path(__file__).parents[1]
TID = "019a0000-1111-7222-8333-444455556666"


def codexr(home: Path, cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_HISTORY_BACKGROUND": "0",
            **(env or {})}
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=cwd, env=full, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


def ok(res: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert res.returncode == 0 and "Traceback" not in res.stderr, (res.returncode, res.stdout, res.stderr)
    return res


def rollout(home: Path, cwd: Path, tid: str, messages: list[tuple[str, str]], ts: str = "2026-12-01T20:04:05.000Z",
            ) -> Path:
    """A small rollout as Codex writes it: session_meta, then user/agent message events at time `ts` (UTC)."""
    d = home / "sessions" / "2026" / "12" / "01"
    d.mkdir(parents=True, exist_ok=True)
    lines: list[dict[str, Any]] = [{"timestamp": ts, "type": "session_meta", "payload": {
        "id": tid, "timestamp": ts, "cwd": str(cwd), "originator": "codex_cli_rs", "cli_version": "0.40.0",
        "source": "cli"}}]
    for kind, text in messages:
        payload = ({"type": "user_message", "message": text, "images": None} if kind == "user"
                   else {"type": "agent_message", "message": text})
        lines.append({"timestamp": ts, "type": "event_msg", "payload": payload})
    p = d / f"rollout-2026-12-01T20-04-05-{tid}.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in lines))
    epoch = dt.datetime.fromisoformat(ts).timestamp()
    os.utime(p, (epoch, epoch))  # the last activity `history list` shows is the rollout's mtime
    return p


@pytest.fixture
def home(tmp_path: Path) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    return h


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return Path(os.path.realpath(w))


# ------------------------------------------------------------------------------------ -C after the command


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...],
                                                                                      argparse.ArgumentParser]]:
    out = [(path, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _leaves(sub, (*path, name))
    return out


def test_every_subcommand_takes_dash_C() -> None:
    missing = [" ".join(path) for path, p in _leaves(build_parser())[1:] if path != ("login",)
               and not {"-C", "--cd"} <= set(p._option_string_actions)]
    assert missing == [], f"these subcommands reject -C/--cd DIR: {missing}"


def test_every_subcommand_but_login_and_codex_takes_the_settings_flags() -> None:
    """`-c`, `--enable`, `--disable` after any command, as codex's own subcommands take them (the TUI's words after
    `codexr codex` are its own, and `login`'s Codex's)."""
    missing = [" ".join(path) for path, p in _leaves(build_parser())[1:] if path[0] not in ("login", "codex")
               and not {"-c", "--config", "--enable", "--disable"} <= set(p._option_string_actions)]
    assert missing == [], f"these subcommands reject -c/--enable/--disable: {missing}"


def test_history_list_dash_C_after_the_command_picks_the_workspace(home: Path, ws: Path, tmp_path: Path) -> None:
    rollout(home, ws, TID, [("user", "hello from ws")])
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    after = json.loads(ok(codexr(home, elsewhere, "history", "list", "-C", str(ws), "--json")).stdout)
    before = json.loads(ok(codexr(home, elsewhere, "-C", str(ws), "history", "list", "--json")).stdout)
    assert after["scope"]["workspace"] == before["scope"]["workspace"] == str(ws)
    assert [s["id"] for s in after["sessions"]] == [TID]
    # both places: the one after the command wins (as with every option of a subcommand)
    both = json.loads(ok(codexr(home, ws, "-C", str(elsewhere), "history", "list", "--cd", str(ws),
                                "--json")).stdout)
    assert both["scope"]["workspace"] == str(ws)
    for argv in (("config", "-C", str(ws)), ("snapshots", "verify", "-C", str(ws)),
                 ("server", "status", "-C", str(ws))):
        ok(codexr(home, elsewhere, *argv, env={"CODEXR_SERVER": "0"}))


# ---------------------------------------------------------------------------------------- resume ID prefix


def test_resume_takes_a_unique_prefix_and_says_in_one_line_when_it_names_none(home: Path, ws: Path) -> None:
    rollout(home, ws, TID, [("user", "hello")])
    rollout(home, ws, TID[:9] + "9" + TID[10:], [("user", "hello")])  # shares TID's first 9 characters
    for prefix, needle in (("019", "4+"), ("ffff00", "ffff00"), (TID[:9], "ambiguous")):
        res = codexr(home, ws, "resume", prefix)
        assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1 and needle in res.stderr and "invalid length" not in res.stderr, res.stderr
    # a unique prefix resolves: what stops it then is only that the app needs a terminal
    res = codexr(home, ws, "resume", TID[:10])
    assert res.returncode == 2 and res.stderr == "codexr: error: the app needs a terminal; use `codexr exec PROMPT` " \
        "for scripts\n", res.stderr


# --------------------------------------------------------------------------------------- server status


def test_server_status_when_no_server_can_run_says_only_that(home: Path, ws: Path, tmp_path: Path) -> None:
    # no runtime directory, and a home below /tmp (so no cache directory to fall back to either)
    env = {"CODEXR_SERVER": "1", "XDG_RUNTIME_DIR": "", "CODEXR_RUNTIME_DIR": "", "XDG_CACHE_HOME": "",
           "HOME": str(tmp_path)}
    out = ok(codexr(home, ws, "server", "status", env=env)).stdout
    assert "not available" in out and "XDG_RUNTIME_DIR" in out and "CODEXR_RUNTIME_DIR" in out, out
    assert "starts one" not in out, f"says a server will start where none can:\n{out}"
    assert len(out.splitlines()) == 1, out


def test_server_status_the_first_time_says_the_next_command_starts_one(home: Path, ws: Path) -> None:
    """A usable XDG_RUNTIME_DIR whose codexr/ directory no server has made yet: a server can run."""
    base = Path.home() / ".cache" / "codexr-tests"  # not below /tmp: app/launch.py's rule (as tests/test_server.py)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    xdg = Path(tempfile.mkdtemp(prefix="xdg-", dir=base))
    try:
        out = ok(codexr(home, ws, "server", "status", env={"CODEXR_SERVER": "1", "XDG_RUNTIME_DIR": str(xdg),
                                                           "CODEXR_RUNTIME_DIR": ""})).stdout
        assert out == "no resident server is running for this codexr; the next one-shot command starts one\n", out
        assert not (xdg / "codexr").exists(), "status made the runtime directory"
    finally:
        shutil.rmtree(xdg)


def test_server_status_turned_off_says_so(home: Path, ws: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700)
    out = ok(codexr(home, ws, "server", "status", env={"CODEXR_SERVER": "0",
                                                       "CODEXR_RUNTIME_DIR": str(run_dir)})).stdout
    assert "CODEXR_SERVER=0" in out and "starts one" not in out, out


# ------------------------------------------------------------------------------------ history search


def test_search_shows_a_message_once_with_every_match_marked(home: Path, ws: Path) -> None:
    rollout(home, ws, TID, [("user", "the pool leaks; fix the pool"), ("agent", "one pool here")])
    out = ok(codexr(home, ws, "history", "search", "pool")).stdout
    lines = [ln for ln in out.splitlines() if ln.startswith(TID)]
    assert len(lines) == 2, f"one line per message, not per match:\n{out}"
    assert "user: the pool leaks; fix the pool" in lines[0], out
    doc = json.loads(ok(codexr(home, ws, "history", "search", "pool", "--json")).stdout)
    [res] = doc["results"]
    user, agent = res["matches"]
    assert user["kind"] == "user" and agent["kind"] == "agent"
    assert [user["excerpt"][a:b] for a, b in user["spans"]] == ["pool", "pool"], user
    assert user["excerpt"][user["match_start"]:user["match_end"]] == "pool"
    assert [agent["excerpt"][a:b] for a, b in agent["spans"]] == ["pool"], agent


# ------------------------------------------------------------------------------------------------ times

SCREEN = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? [+-]\d{4}")


def _iso_with_offset(value: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(value)
    assert when.tzinfo is not None and not value.endswith("Z"), f"{value!r} names no offset"
    return when


def test_every_listing_prints_local_time_with_its_offset(home: Path, ws: Path) -> None:
    """TZ=Asia/Kolkata (+0530): the rollout's 20:04:05Z is 01:34 the next day there, and says so."""
    env = {"TZ": "Asia/Kolkata"}
    rollout(home, ws, TID, [("user", "find me please")])
    hist_list = ok(codexr(home, ws, "history", "list", env=env)).stdout
    search = ok(codexr(home, ws, "history", "search", "find me", env=env)).stdout
    show = ok(codexr(home, ws, "history", "show", TID, env=env)).stdout
    for out in (hist_list, search, show):
        assert "2026-12-02 01:34 +0530" in out, out
    ok(codexr(home, ws, "snapshots", "capture", env=env))
    snaps = ok(codexr(home, ws, "snapshots", "list", env=env)).stdout
    assert SCREEN.search(snaps) and "+0530" in snaps, snaps
    snap_id = snaps.split()[0]
    shown = ok(codexr(home, ws, "snapshots", "show", snap_id, env=env)).stdout
    assert SCREEN.search(shown) and "+0530" in shown, shown


def test_json_times_are_iso_8601_with_an_offset(home: Path, ws: Path) -> None:
    env = {"TZ": "Asia/Kolkata"}
    rollout(home, ws, TID, [("user", "find me please")])
    doc = json.loads(ok(codexr(home, ws, "history", "list", "--json", env=env)).stdout)
    [s] = doc["sessions"]
    assert _iso_with_offset(s["last_activity"]).utcoffset() == dt.timedelta(hours=5, minutes=30)
    assert _iso_with_offset(s["last_activity"]) == dt.datetime(2026, 12, 1, 20, 4, 5, tzinfo=dt.UTC)
    assert _iso_with_offset(s["created"]) == dt.datetime(2026, 12, 1, 20, 4, 5, tzinfo=dt.UTC)
    found = json.loads(ok(codexr(home, ws, "history", "search", "find", "--json", env=env)).stdout)
    [r] = found["results"]
    _iso_with_offset(r["last_activity"])
    assert _iso_with_offset(r["matches"][0]["at"]) == dt.datetime(2026, 12, 1, 20, 4, 5, tzinfo=dt.UTC)
    shown = json.loads(ok(codexr(home, ws, "history", "show", TID, "--json", env=env)).stdout)
    assert _iso_with_offset(shown["prompts"][0]["entries"][0]["at"]).hour == 1
    ok(codexr(home, ws, "snapshots", "capture", env=env))
    [snap] = json.loads(ok(codexr(home, ws, "snapshots", "list", "--json", env=env)).stdout)
    _iso_with_offset(snap["created"])
    one = json.loads(ok(codexr(home, ws, "snapshots", "show", snap["id"], "--json", env=env)).stdout)
    assert one["created"] == snap["created"]
