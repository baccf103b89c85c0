"""Follow Codex (issue 33 §6): the newest official Codex (npm `@openai/codex@latest`) against what codexr relies on.
Its app-server protocol still has every request the session and the proxy send, with no field they do not send now
required and none they send gone, and every notification they act on (compared on the schemas each binary generates
itself, `codex app-server generate-json-schema --experimental`); exec, rewind and redo run on it, native and through
npm's launcher. The proxy's and the daemon's paths on it: tests/test_proxy_tui.py, tests/test_codex_daemon.py.
Skipped with the reason where npm cannot install it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from npm_codex import newest_codex
from test_cli_agent import show

from app.codex.codex_bin import pinned_path
from app.codex.scripted_model import ScriptedModel, add_file, message, write_codex_home

#: The requests codexr sends: through the SDK (app/services, app/rewind, app/codex) and its own (app/proxy).
REQUESTS = ("initialize", "thread/start", "thread/resume", "thread/fork", "thread/read", "thread/list",
            "thread/archive", "thread/unarchive", "thread/unsubscribe", "thread/turns/list", "thread/compact/start",
            "thread/loaded/list", "thread/backgroundTerminals/list", "thread/backgroundTerminals/terminate",
            "turn/start", "turn/interrupt", "review/start", "model/list", "config/read", "account/read",
            "fuzzyFileSearch")
#: Requests of a client the proxy acts on (it records, rewinds or answers them itself).
CLIENT_REQUESTS_WATCHED = ("thread/revert", "thread/unsubscribe", "turn/start", "thread/start", "thread/resume",
                           "thread/fork")
#: The notifications codexr acts on.
NOTIFICATIONS = ("turn/started", "turn/completed", "turn/diff/updated", "item/started", "item/completed",
                 "item/agentMessage/delta", "thread/reverted", "thread/tokenUsage/updated", "warning",
                 "configWarning", "deprecationNotice", "error")


def schema(binary: Path, out: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """(requests by method: their params' schema, notifications by method) as `binary` generates them."""
    subprocess.run([str(binary), "app-server", "generate-json-schema", "--experimental", "--out", str(out)],
                   check=True, capture_output=True, timeout=120)
    requests = json.loads((out / "ClientRequest.json").read_text())
    definitions = requests["definitions"]
    by_method: dict[str, Any] = {}
    for variant in requests["oneOf"]:
        method = variant["properties"]["method"]["enum"][0]
        ref = (variant["properties"].get("params") or {}).get("$ref", "")
        by_method[method] = definitions.get(ref.rsplit("/", 1)[-1], {}) if ref else {}
    notes = json.loads((out / "ServerNotification.json").read_text())
    return by_method, {v["properties"]["method"]["enum"][0]: v for v in notes["oneOf"]}


def test_the_newest_codex_speaks_what_codexr_sends_and_reads(tmp_path: Path) -> None:
    npm = newest_codex()
    pinned, pinned_notes = schema(pinned_path(), tmp_path / "pinned")
    newest, newest_notes = schema(npm.native, tmp_path / "newest")
    problems = []
    for method in sorted(set(REQUESTS) | set(CLIENT_REQUESTS_WATCHED)):
        assert method in pinned, f"{method} is not in the pinned Codex's own schema: this list is wrong"
        if method not in newest:
            problems.append(f"{method}: gone")
            continue
        old, new = pinned[method], newest[method]
        old_fields, new_fields = set(old.get("properties") or {}), set(new.get("properties") or {})
        if gone := old_fields - new_fields:
            problems.append(f"{method}: fields gone: {sorted(gone)}")
        if required := set(new.get("required") or ()) - set(old.get("required") or ()):
            problems.append(f"{method}: newly required: {sorted(required)}")
    for method in NOTIFICATIONS:
        assert method in pinned_notes, f"{method} is not in the pinned Codex's own schema: this list is wrong"
        if method not in newest_notes:
            problems.append(f"notification {method}: gone")
    assert problems == [], f"Codex {npm.version} differs from the pinned one where codexr depends on it: {problems}"


@pytest.mark.parametrize("method", ["thread/revert"])
def test_what_the_proxy_answers_itself_is_still_shaped_as_it_assumes(method: str, tmp_path: Path) -> None:
    """thread/revert: the proxy forwards it with `threadId` and `beforeTurnId` as it read them; both still there."""
    npm = newest_codex()
    newest, _ = schema(npm.native, tmp_path / "newest")
    fields = set(newest[method].get("properties") or {})
    assert {"threadId", "beforeTurnId"} <= fields, fields


@pytest.mark.parametrize("via", ["native", "launcher"])
def test_exec_rewind_and_redo_run_on_the_newest_codex(via: str, tmp_path: Path) -> None:
    """The session's own path (SDK → app-server) on the newest Codex, its native binary and npm's node launcher:
    two prompts recorded, a rewind takes the second's files back, its redo returns them."""
    npm = newest_codex()
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    with ScriptedModel() as model:
        model.script("newest-one", [add_file("one.txt", "1\n"), message("One.")])
        model.script("newest-two", [add_file("two.txt", "2\n"), message("Two.")])
        env = {**os.environ, **write_codex_home(home, model.base_url), "NO_PROXY": "127.0.0.1,localhost",
               "CODEXR_SERVER": "0", "CODEXR_CODEX_BIN": str(npm.native if via == "native" else npm.launcher)}

        def codexr(*args: str) -> subprocess.CompletedProcess[str]:
            res = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ws, env=env, capture_output=True,
                                 text=True, timeout=120)
            assert res.returncode == 0, show(res)
            return res

        thread = json.loads(codexr("exec", "newest-one", "--json").stdout)["thread_id"]
        codexr("exec", "--last", "newest-two")
        assert (ws / "two.txt").exists()
        fork = json.loads(codexr("rewind", "--thread", thread, "--to", "2", "--yes", "--json").stdout)["thread_id"]
        assert not (ws / "two.txt").exists() and (ws / "one.txt").exists()
        codexr("redo", "--thread", fork, "--yes")
        assert (ws / "two.txt").read_text() == "2\n"


def test_an_attached_fork_is_no_rewind_point_and_no_thread_of_its_own(tmp_path: Path) -> None:
    """Codex 0.171's `thread/fork` with `attachToSource` (a hidden side conversation of a thread): through the proxy
    its turns are not recorded (no sidecar, so no rewind point), and `codexr threads` does not list it."""
    from test_proxy_frames import peer, prompt, started_thread

    npm = newest_codex()
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    with ScriptedModel() as model:
        model.script("attached main", [add_file("m.txt", "m\n"), message("main done")])
        model.script("attached side", [message("side done")])
        env = {**os.environ, **write_codex_home(home, model.base_url), "NO_PROXY": "127.0.0.1,localhost",
               "CODEXR_SERVER": "0", "CODEXR_CODEX_BIN": str(npm.native)}
        with peer([sys.executable, "-m", "app.cli", "app-server"], ws, env, tmp_path / "err") as client:
            main = started_thread(client, ws)
            prompt(client, 3, main, "attached main")
            client.send({"id": 4, "method": "thread/fork",
                         "params": {"threadId": main, "attachToSource": True, "excludeTurns": True}})
            answer = client.answer(4)
            assert "result" in answer, answer
            side = str(answer["result"]["thread"]["id"])
            assert answer["result"]["thread"].get("attachedToThreadId") == main, answer
            prompt(client, 5, side, "attached side")
            client.close()
        sidecars = {p.stem for p in (home / "file_snapshots" / "refs" / "threads").glob("*.json")}
        assert sidecars == {main}
        listed = subprocess.run([sys.executable, "-m", "app.cli", "threads", "--json"], cwd=ws, env=env,
                                capture_output=True, text=True, timeout=120)
        assert listed.returncode == 0, show(listed)
        assert [t["thread_id"] for t in json.loads(listed.stdout)] == [main]


def test_doctor_checks_what_codexr_codex_needs_of_the_chosen_codex(tmp_path: Path) -> None:
    """doctor said ok for npm's launcher while `codexr codex` could not run it: it now starts the chosen Codex the way
    `codexr codex` does (listening, with a token) and says so, naming a launcher; a Codex that serves stdio but not
    that way fails the check with what to do."""
    home = tmp_path / "home"
    env = {**os.environ, **write_codex_home(home, "http://127.0.0.1:9"), "CODEXR_SERVER": "0"}
    stdio_only = tmp_path / "codex-stdio-only"
    stdio_only.write_text(f"#!/bin/sh\ncase \"$*\" in *ws://*) echo 'Error: no listening here' >&2; exit 1;; esac\n"
                          f"exec {pinned_path()} \"$@\"\n")
    stdio_only.chmod(0o755)
    bad = subprocess.run([sys.executable, "-m", "app.cli", "--codex-bin", str(stdio_only), "doctor", "--json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    checks = {c["name"]: c for c in json.loads(bad.stdout)["checks"]}
    assert bad.returncode == 1 and checks["app_server"]["status"] == "ok", show(bad)
    assert checks["codex_tui"]["status"] == "fail" and "codexr codex" in checks["codex_tui"]["message"], show(bad)
    npm = newest_codex()
    good = subprocess.run([sys.executable, "-m", "app.cli", "--codex-bin", str(npm.launcher), "doctor", "--json"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    checks = {c["name"]: c for c in json.loads(good.stdout)["checks"]}
    assert checks["codex_tui"]["status"] == "ok" and "launcher script" in checks["codex_tui"]["message"], show(good)
