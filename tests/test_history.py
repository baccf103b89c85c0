"""`codexr history`: list, search, show and export real rollouts (written by the real Codex) and legacy ones.

One CODEX_HOME for the module, made by the real Codex against the scripted model: workspace A holds a
thread of three prompts, a codexr rewind of it (a fork) with a new prompt and a redo, and an archived
thread; workspace B holds one thread. Hand-made files (named legacy_* or damaged_*) add the shapes the
real binary no longer writes and the damage history must survive.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from os.path import commonpath
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import rollout_hashes

from app.cli import main
from app.codex.scripted_model import ScriptedModel, add_file, message, shell, write_codex_home
from app.history.browse import resume_hint, search_hits, show_session
from app.history.catalog import HistoryError
from app.history.search import Matcher
from app.history.store import Filter, HistoryStore
from app.session import Session, SessionOptions
from config import load_settings

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Home:
    home: Path
    ws_a: Path
    ws_b: Path
    original: str
    fork: str
    archived: str
    other: str


@pytest.fixture(scope="module")
def hist(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Home]:
    base = tmp_path_factory.mktemp("history")
    home, ws_a, ws_b = base / "home", base / "wsA", base / "wsB"
    ws_a.mkdir()
    ws_b.mkdir()
    with ScriptedModel() as m:
        env = write_codex_home(home, m.base_url)
        m.script("hist-alpha", [add_file("a.txt", "one\n"), message("fixed the Connection Pool leak in a.txt")])
        m.script("hist-beta", [shell("echo ECONNRESET-from-shell"), message("ran the shell")])
        m.script("hist-gamma", [message("gamma answer")])
        m.script("hist-delta", [message("delta answer after the rewind")])
        m.script("hist-archive", [message("archived answer")])
        m.script("hist-other", [message("other workspace answer about oauth callback")])
        s = Session(SessionOptions(cwd=ws_a, codex_home=home, settings=load_settings(home), env=env))
        try:
            t = s.start_thread()
            for p in ("hist-alpha first prompt", "hist-beta second prompt", "hist-gamma third prompt"):
                assert s.run_turn(t, p).status == "completed"
            fork = s.rewind(t, 2).thread_id
            assert s.run_turn(fork, "hist-delta new prompt").status == "completed"
            s.redo(fork)
            t2 = s.start_thread()
            assert s.run_turn(t2, "hist-archive this one").status == "completed"
            s.archive_thread(t2)
        finally:
            s.close()
        s = Session(SessionOptions(cwd=ws_b, codex_home=home, settings=load_settings(home), env=env))
        try:
            t3 = s.start_thread()
            assert s.run_turn(t3, "hist-other question").status == "completed"
        finally:
            s.close()
    yield Home(home, ws_a, ws_b, t, fork, t2, t3)


def run(hist: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str,
        cwd: Path | None = None) -> tuple[int, str, str]:
    """`codexr …` in this process (the CLI's start-up is the slow part; one test runs it for real)."""
    monkeypatch.setenv("CODEX_HOME", str(hist.home))
    monkeypatch.setenv("CODEXR_HISTORY_BACKGROUND", "0")
    capsys.readouterr()
    rc = main(["-C", str(cwd or hist.ws_a), *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def jrun(hist: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *argv: str) -> Any:
    rc, out, err = run(hist, capsys, monkeypatch, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_list_scopes_and_search_across_workspaces(hist: Home, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    before = rollout_hashes(hist.home)
    here = jrun(hist, capsys, monkeypatch, "history", "list")
    assert [s["id"] for s in here["sessions"]] == [hist.fork, hist.original]  # newest activity first
    fork = here["sessions"][0]
    assert fork["forked_from"] == hist.original and fork["forked_at_prompt"] == 1 and fork["prompts"] == 2
    assert fork["client"] == "codexr" and fork["has_snapshots"] and fork["first_prompt"] == "hist-alpha first prompt"
    every = jrun(hist, capsys, monkeypatch, "history", "list", "--all")
    assert {s["id"] for s in every["sessions"]} == {hist.fork, hist.original, hist.other}
    archived = jrun(hist, capsys, monkeypatch, "history", "list", "--all", "--archived")
    assert {s["id"]: s["archived"] for s in archived["sessions"]}[hist.archived] is True
    assert jrun(hist, capsys, monkeypatch, "history", "list", "--all", "-n", "1")["total"] == 3

    # From workspace A, search finds workspace B's session too; case does not matter.
    found = jrun(hist, capsys, monkeypatch, "history", "search", "OAUTH Callback")
    assert [r["session_id"] for r in found["results"]] == [hist.other]
    assert found["results"][0]["workspace"] == str(hist.ws_b)
    pool = jrun(hist, capsys, monkeypatch, "history", "search", "connection pool")
    [hit] = pool["results"]
    assert hit["session_id"] == hist.original
    [m] = hit["matches"]
    assert (m["prompt"], m["kind"], m["inherited_by"]) == (1, "agent", [hist.fork])
    assert m["excerpt"][m["match_start"]:m["match_end"]] == "Connection Pool"
    # commands and their output only with --include tools
    assert jrun(hist, capsys, monkeypatch, "history", "search", "econnreset")["results"] == []
    tools = jrun(hist, capsys, monkeypatch, "history", "search", "econnreset", "--include", "tools")
    assert {(x["prompt"], x["field"]) for x in tools["results"][0]["matches"]} == {(2, "text"), (2, "output")}
    # -n limits sessions; the archived one only with --archived; --workspace narrows
    answers = jrun(hist, capsys, monkeypatch, "history", "search", "answer", "-n", "2", "--archived")
    assert len(answers["results"]) == 2 and answers["total_sessions"] == 4
    ws_b = jrun(hist, capsys, monkeypatch, "history", "search", "answer", "--workspace", str(hist.ws_b))
    assert [r["session_id"] for r in ws_b["results"]] == [hist.other]
    rc, out, _ = run(hist, capsys, monkeypatch, "history", "search", "no-such-words-anywhere")
    assert rc == 0 and "no match for 'no-such-words-anywhere' in 3 sessions" in out
    assert str(hist.home / "sessions") in out
    assert rollout_hashes(hist.home) == before  # history never writes into Codex's files


def test_show_presents_a_fork_with_its_inherited_history_and_the_rewind(
        hist: Home, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    rc, out, _ = run(hist, capsys, monkeypatch, "history", "show", hist.fork)
    assert rc == 0
    first, second = out.index("## Prompt 1"), out.index("## Prompt 2")
    assert f"inherited from {hist.original}" in out[first:second]
    assert "> hist-alpha first prompt" in out[first:second] and "files changed: a.txt" in out[first:second]
    rewind = out.index("codexr rewind")
    assert first < rewind < second and "rewound to before its prompt 2" in out
    assert out.index("codexr redo") > out.index("> hist-delta new prompt")
    assert "hist-beta" not in out  # the rewound-away prompts are not in the fork
    rc, out, _ = run(hist, capsys, monkeypatch, "history", "show", hist.original)
    assert "`$ echo ECONNRESET-from-shell` (exit 0)" in out
    assert f"came back here from the rewound thread {hist.fork}" in out
    doc = jrun(hist, capsys, monkeypatch, "history", "show", hist.fork, "--prompt", "2")
    assert [p["number"] for p in doc["prompts"]] == [2]
    assert [e["kind"] for e in doc["prompts"][0]["entries"]] == ["user", "agent"]
    rc, _out, err = run(hist, capsys, monkeypatch, "history", "show", hist.fork, "--prompt", "9")
    assert rc == 2 and "prompt 9 does not exist" in err


def test_prefix_ids_and_export_refusing_to_overwrite(hist: Home, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [hist.original, hist.fork, hist.archived, hist.other]
    unique = next(i[:n] for i in ids for n in range(4, 36) if sum(j.startswith(i[:n]) for j in ids) == 1
                  and i == hist.other)
    out_md = tmp_path / "conv.md"
    rc, out, err = run(hist, capsys, monkeypatch, "history", "export", unique, "--output", str(out_md))
    assert rc == 0, err
    assert out_md.read_text().startswith(f"# Session {hist.other}")
    rc, _out, err = run(hist, capsys, monkeypatch, "history", "export", unique, "--format", "json",
                        "--output", str(out_md))
    assert rc == 2 and "exists; add --force" in err and out_md.read_text().startswith("# Session")
    rc, _out, err = run(hist, capsys, monkeypatch, "history", "export", unique, "--format", "json",
                        "--output", str(out_md), "--force")
    assert rc == 0 and json.loads(out_md.read_text())["session"]["id"] == hist.other
    common = commonpath(ids)
    if len(common) >= 4:  # UUIDv7s made within a second share their first characters
        rc, _out, err = run(hist, capsys, monkeypatch, "history", "show", common[:8])
        assert rc == 2 and "ambiguous" in err and hist.original in err and hist.fork in err
    # the archived session is shown by id whatever the listing scope
    rc, out, _ = run(hist, capsys, monkeypatch, "history", "show", hist.archived)
    assert rc == 0 and "- archived" in out


def test_bad_input_is_one_line_exit_2(hist: Home, capsys: pytest.CaptureFixture[str],
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    env = {**os.environ, "CODEX_HOME": str(hist.home), "CODEXR_HISTORY_BACKGROUND": "0"}
    r = subprocess.run([sys.executable, "-m", "app.cli", "history", "show", "zz"], env=env, cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr == "codexr: error: 'zz' is not a session id (give a UUID or 4+ of " \
        "its first characters)\n"
    for argv in (["show", "0000000"], ["search", "(", "--regex"], ["search", "x", "-n", "-1"],
                 ["export", hist.other, "--output", str(hist.home / "sessions" / "x.md")]):
        rc, _out, err = run(hist, capsys, monkeypatch, "history", *argv)
        assert rc == 2, (argv, err)
        assert err.startswith("codexr: error: ") and err.count("\n") == 1, err
    assert not (hist.home / "sessions" / "x.md").exists()


# ------------------------------------------------------------------------------------------------ hand-made


def _legacy_lines(tid: str, cwd: str) -> list[dict[str, Any]]:
    """A legacy (pre-paginated) rollout as Codex's RolloutLine documents it: no ordinals, legacy events."""
    ts = "2025-06-01T10:00:00.000Z"

    def rec(typ: str, payload: dict[str, Any]) -> dict[str, Any]:
        return {"timestamp": ts, "type": typ, "payload": payload}

    return [
        rec("session_meta", {"id": tid, "timestamp": ts, "cwd": cwd, "originator": "codex_cli_rs",
                             "cli_version": "0.40.0", "source": "cli", "instructions": None}),
        rec("response_item", {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<environment_context>\n  <cwd>/x</cwd>\n</environment_context>"}]}),
        rec("event_msg", {"type": "task_started", "turn_id": "t1"}),
        rec("event_msg", {"type": "user_message", "message": "## My request for Codex:\nlegacy Refresh Token bug",
                          "images": None}),
        rec("response_item", {"type": "function_call", "name": "shell", "call_id": "c1",
                              "arguments": json.dumps({"command": ["bash", "-lc", "grep -rn refreshToken src"]})}),
        rec("response_item", {"type": "function_call_output", "call_id": "c1",
                              "output": "src/auth.ts:3: refreshToken()"}),
        rec("event_msg", {"type": "patch_apply_end", "call_id": "p1", "turn_id": "t1", "stdout": "", "stderr": "",
                          "success": True, "changes": {f"{cwd}/src/auth.ts": {"type": "update",
                                                                              "unified_diff": "", "move_path": None}}}),
        rec("response_item", {"type": "ghost_snapshot", "ghost_commit": {"id": "abc"}}),
        rec("event_msg", {"type": "agent_message", "message": "legacy answer one"}),
        rec("event_msg", {"type": "task_complete", "turn_id": "t1", "last_agent_message": "legacy answer one"}),
        rec("event_msg", {"type": "user_message", "message": "a prompt that gets rolled back", "images": None}),
        rec("event_msg", {"type": "agent_message", "message": "rolled back answer"}),
        rec("event_msg", {"type": "thread_rolled_back", "num_turns": 1}),
        rec("compacted", {"message": "summary", "replacement_history": []}),
        rec("event_msg", {"type": "user_message", "message": "legacy second prompt", "images": None}),
        rec("event_msg", {"type": "agent_message", "message": "legacy answer two"}),
    ]


def _oldest_lines(tid: str, cwd: str) -> list[dict[str, Any]]:
    """A legacy rollout whose only conversation records are response items (no message events)."""
    ts = "2025-03-01T10:00:00.000Z"
    return [
        {"timestamp": ts, "type": "session_meta", "payload": {"id": tid, "timestamp": ts, "cwd": cwd,
                                                             "originator": "codex_cli_rs", "cli_version": "0.20.0"}},
        {"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "oldest format question about Websocket retries"}]}},
        {"timestamp": ts, "type": "response_item", "payload": {"type": "local_shell_call", "call_id": "l1",
                                                               "status": "completed", "action": {
                                                                   "type": "exec", "command": ["ls", "-la"]}}},
        {"timestamp": ts, "type": "response_item", "payload": {"type": "message", "role": "assistant", "content": [
            {"type": "output_text", "text": "oldest answer"}]}},
    ]


def _write(home: Path, name_ts: str, tid: str, lines: list[dict[str, Any]], tail: bytes = b"",
           sub: str = "sessions/2025/06/01") -> Path:
    d = home / sub
    d.mkdir(parents=True, exist_ok=True)
    p = d / f"rollout-{name_ts}-{tid}.jsonl"
    p.write_bytes(b"".join(json.dumps(x).encode() + b"\n" for x in lines) + tail)
    return p


def test_legacy_fixtures_and_damage_are_read_and_counted(hist: Home, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    shutil.copytree(hist.home / "sessions", home / "sessions")
    legacy, oldest, damaged = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    _write(home, "2025-06-01T10-00-00", legacy, _legacy_lines(legacy, "/proj/legacy"))
    _write(home, "2025-03-01T10-00-00", oldest, _oldest_lines(oldest, "/proj/oldest"),
           sub="sessions/2025/03/01")
    # damaged_*: a real rollout with a malformed line, an unknown record type, a huge line and a session
    # still being written (its last line cut short)
    real = next((hist.home / "sessions").rglob(f"*{hist.other}.jsonl")).read_bytes()
    real = real.replace(hist.other.encode(), damaged.encode())
    cut = real.rstrip(b"\n").rfind(b"\n")
    body = (real[:cut + 1].replace(b"\n", b"\n{not json\n", 1) + b'{"timestamp":"x","type":"future_record",'
            b'"payload":{}}\n' + b'{"type":"event_msg","payload":{"type":"agent_message","message":"'
            + b"x" * (17 * 1024 * 1024) + b'"}}\n' + real[cut + 1:cut + 40])
    (home / "sessions" / "2025" / "06" / "01" / f"rollout-2025-06-01T11-00-00-{damaged}.jsonl").write_bytes(body)
    (home / "sessions" / "2025" / "06" / "01" / f"rollout-2025-06-01T12-00-00-{uuid.uuid4()}.jsonl.zst"
     ).write_bytes(b"not zstd")
    monkeypatch.setattr(hist, "home", home)

    doc = jrun(hist, capsys, monkeypatch, "history", "list", "--all")
    assert doc["skipped"] == {"malformed": 1, "partial": 1, "unknown": 1, "huge": 1, "unreadable": 1}
    by_id = {s["id"]: s for s in doc["sessions"]}
    assert by_id[legacy]["prompts"] == 2 and by_id[legacy]["source_label"] == "CLI"
    assert by_id[oldest]["first_prompt"] == "oldest format question about Websocket retries"
    assert by_id[damaged]["prompts"] == 1  # what was complete is still read
    _rc, out, _ = run(hist, capsys, monkeypatch, "history", "show", legacy)
    assert "> legacy Refresh Token bug" in out and "`$ grep -rn refreshToken src`" in out
    assert "files changed: src/auth.ts" in out and "rolled back 1 prompt(s)" in out
    assert "rolled back answer" not in out and "## Prompt 2" in out and "ghost" not in out
    found = jrun(hist, capsys, monkeypatch, "history", "search", "REFRESHTOKEN", "--include", "tools")
    assert {r["session_id"] for r in found["results"]} == {legacy}
    assert jrun(hist, capsys, monkeypatch, "history", "search", "websocket")["results"][0]["session_id"] == oldest


def _hits(store: HistoryStore, text: str, **kw: Any) -> list[tuple[str, int, str, str, tuple[str, ...]]]:
    tools = kw.pop("tools", False)
    flt = Filter(archived=kw.pop("archived", True))
    res = store.search(Matcher(text, tools=tools, regex=kw.pop("regex", False)), flt, 0)
    return sorted((h.session.id, m.prompt, m.kind, m.excerpt, tuple(m.inherited_by)) for h in res.hits
                  for m in h.matches)


def test_index_agrees_with_a_full_scan_after_files_change(hist: Home, tmp_path: Path) -> None:
    home = tmp_path / "home"
    shutil.copytree(hist.home / "sessions", home / "sessions")
    shutil.copytree(hist.home / "archived_sessions", home / "archived_sessions")
    shutil.copytree(hist.home / "file_snapshots" / "refs", home / "file_snapshots" / "refs")
    queries: list[dict[str, Any]] = [{"text": "answer"}, {"text": "connection pool"}, {"text": "hist"},
                                     {"text": "econnreset", "tools": True}, {"text": "a.", "regex": True},
                                     {"text": "hist", "archived": False}]

    def agree() -> list[Any]:
        indexed = HistoryStore(home, background=False)
        scanned = HistoryStore(home, use_index=False, background=False)
        try:
            got = [_hits(indexed, **dict(q)) for q in queries]
            assert got == [_hits(scanned, **dict(q)) for q in queries]
            assert indexed.index is not None and not indexed.stale()[0]  # it answered from a current index
            return got
        finally:
            indexed.close()
            scanned.close()

    first = agree()
    assert first[1] and first[3]
    # a session goes on (its rollout grows), one is deleted, a new one appears, the fork is archived (its
    # parent's hits no longer name it without --archived)
    other = next(home.rglob(f"*{hist.other}.jsonl"))
    with other.open("ab") as fh:
        fh.write(json.dumps({"timestamp": "2026-12-31T00:00:00.000Z", "type": "event_msg", "payload": {
            "type": "user_message", "message": "appended answer about sockets"}}).encode() + b"\n")
    next(home.rglob(f"*{hist.archived}.jsonl")).unlink()
    tid = str(uuid.uuid4())
    _write(home, "2025-06-01T10-00-00", tid, _legacy_lines(tid, "/proj/new"))
    fork = next(home.rglob(f"*{hist.fork}.jsonl"))
    fork.rename(home / "archived_sessions" / fork.name)
    after = agree()
    assert any(hist.fork in h[4] for h in after[2]) and not any(hist.fork in h[4] for h in after[5])
    assert after != first and any("appended answer" in h[3] for h in after[0])
    assert not any(h[0] == hist.archived for h in after[0])
    # a damaged index is rebuilt, never trusted
    idx = home / "file_snapshots" / "history" / "index.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(str(idx) + suffix).unlink(missing_ok=True)
    idx.write_bytes(b"garbage" * 1000)
    assert agree() == after


def test_front_ends_get_typed_hits_marked_here_or_not_and_a_read_only_session(
        hist: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    """What /history in the app and the line mode build on: hits of every workspace, each marked here or not."""
    monkeypatch.setenv("CODEXR_HISTORY_BACKGROUND", "0")
    found = search_hits(hist.home, "ANSWER", str(hist.ws_b))
    assert {h.session_id: h.here for h in found.hits} == {hist.original: False, hist.fork: False, hist.other: True}
    assert all(h.excerpt[h.start:h.end] == "answer" and h.kind == "agent" for h in found.hits)
    assert found.summary == f"{len(found.hits)} hits in 3 of 3 sessions"
    few = search_hits(hist.home, "answer", str(hist.ws_b), limit=2, max_hits=1)
    assert len(few.hits) == 1
    assert few.summary == "2 hits in 2 of 3 sessions; 1 more session matches; showing the first 1"
    empty = search_hits(hist.home, "no-such-words-anywhere", str(hist.ws_a))
    assert empty.hits == [] and empty.summary == (f"no match for 'no-such-words-anywhere' in 3 sessions (searched "
                                                  f"{hist.home / 'sessions'}; user and agent messages)")
    shown = show_session(hist.home, hist.other, str(hist.ws_a))
    assert (shown.session_id, shown.workspace, shown.here) == (hist.other, str(hist.ws_b), False)
    assert "> hist-other question" in shown.text and "other workspace answer about oauth callback" in shown.text
    assert resume_hint(shown).endswith(f"to continue it there: codexr -C {hist.ws_b} resume {hist.other}")
    with pytest.raises(HistoryError, match="search text is empty"):
        search_hits(hist.home, "", str(hist.ws_a))
    # the CLI's search options, typed before the text in /history (they were searched for as words)
    tools = search_hits(hist.home, "--include tools ECONNRESET", str(hist.ws_a))
    assert {(h.session_id, h.kind) for h in tools.hits} >= {(hist.original, "command")}
    assert search_hits(hist.home, "ECONNRESET", str(hist.ws_a)).hits == []  # messages only by default
    assert search_hits(hist.home, "conn\\w+ pool", str(hist.ws_a)).hits == []  # literal text by default
    assert {h.session_id for h in search_hits(hist.home, "--regex conn\\w+ pool", str(hist.ws_a)).hits} == {
        hist.original}
    assert search_hits(hist.home, "archived answer", str(hist.ws_a)).hits == []
    assert {h.session_id for h in search_hits(hist.home, "--archived archived answer", str(hist.ws_a)).hits} == {
        hist.archived}
    with pytest.raises(HistoryError, match="unknown option --regx"):
        search_hits(hist.home, "--regx pool", str(hist.ws_a))
    with pytest.raises(HistoryError, match="no session 'ffffffff'"):
        show_session(hist.home, "ffffffff", str(hist.ws_a))


@pytest.mark.parametrize("order", ["as listed", "reversed"])
def test_a_fork_with_a_revert_segment_still_inherits_its_parents_hits(hist: Home, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch,
                                                                     order: str) -> None:
    """A revert writes a segment whose history_base names the thread's own earlier file (CODEX_FACTS §9).

    Hand-made from that documented shape on top of the real fork's rollout; the scan must follow the
    fork's link to its parent whichever of its two files it meets first (directory order is arbitrary).
    """
    import app.history.store as hstore

    home = tmp_path / "home"
    shutil.copytree(hist.home / "sessions", home / "sessions")
    fork_file = next(home.rglob(f"*{hist.fork}.jsonl"))
    meta = json.loads(fork_file.read_bytes().split(b"\n", 1)[0])
    meta["payload"]["history_base"] = {"thread_id": hist.fork, "end_ordinal_exclusive": 3,
                                       "end_byte_offset": fork_file.stat().st_size}
    meta["payload"].pop("forked_from_id", None)
    _write(home, "2026-12-31T00-00-00", hist.fork, [meta, {
        "timestamp": "2026-12-31T00:00:01.000Z", "type": "event_msg",
        "payload": {"type": "user_message", "message": "hist-epsilon after a revert"}}],
        sub=str(fork_file.parent.relative_to(home)))
    real = hstore.discover
    if order == "reversed":
        monkeypatch.setattr(hstore, "discover", lambda h, s: list(reversed(real(h, s))))
    for use_index in (False, True):
        store = HistoryStore(home, use_index=use_index, background=False)
        try:
            hits = _hits(store, "connection pool")
        finally:
            store.close()
        assert any(h[0] == hist.original and hist.fork in h[4] for h in hits), (use_index, hits)
