"""codexr between an app-server client and the real app-server (issue 19): every prompt sent through it gets
file snapshots with the SDK session's own recorder, so `codexr rewind` and `redo` work on its threads.

The client here is the official SDK's low-level client pointed at the `codexr-codex` shim (as the IDE extension's
`chatgpt.cliExecutable` would be): the shim hands `app-server` to `codexr app-server`, which starts the real,
pinned Codex behind its relay. The model is the scripted one on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from test_cli_agent import show

from app.codex.codex_sdk import CodexClient, CodexConfig
from app.codex.scripted_model import ScriptedModel, add_file, message, shell, update_file, write_codex_home

REPO = Path(__file__).parents[1]
SHIM = Path(sys.executable).parent / "codexr-codex"
TIMEOUT_S = 90


def run_turn(client: CodexClient, thread_id: str, text: str) -> dict[str, Any]:
    """Send one prompt and read its notifications to `turn/completed`; the completed turn."""
    started = client.turn_start(thread_id, [{"type": "text", "text": text}])
    turn_id = started.turn.id
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        n = client.next_turn_notification(turn_id)
        if n.method == "turn/completed":
            payload = n.payload.model_dump(by_alias=True, mode="json")
            turn: dict[str, Any] = payload["turn"]
            return turn
    raise AssertionError(f"turn {turn_id} did not complete")


def proxy_env(model: ScriptedModel, home: Path) -> dict[str, str]:
    """The environment of a client whose Codex is the shim, against the scripted model (no resident server)."""
    return {**os.environ, **write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "CODEXR_SERVER": "0"}


def through_shim(ws: Path, env: dict[str, str], codex_bin: Path = SHIM) -> tuple[CodexClient, str]:
    """The SDK's client started on the `codexr-codex` shim (so through `codexr app-server`; or on `codex_bin`) and a
    new thread."""
    client = CodexClient(CodexConfig(codex_bin=str(codex_bin), cwd=str(ws), env=env))
    client.start()
    try:
        client.initialize()
        thread = client.thread_start({"cwd": str(ws), "approvalPolicy": "never",
                                      "sandbox": "danger-full-access"}).thread.id
    except BaseException:
        client.close()
        raise
    return client, thread


def codexr(env: dict[str, str], ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ws, env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def test_an_sdk_client_through_the_shim_gets_turns_codexr_rewinds_and_redoes(model: ScriptedModel,
                                                                             tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("mine\n")
    env = proxy_env(model, tmp_path / "home")
    model.script("proxy first", [add_file("a.txt", "one\n"), message("added a.txt")])
    model.script("proxy second", [update_file("a.txt", "one", "two"), shell("echo made > made.txt"),
                                  message("changed a.txt, made made.txt")])
    client, thread = through_shim(ws, env)
    try:
        assert run_turn(client, thread, "proxy first")["status"] == "completed"
        assert (ws / "a.txt").read_text() == "one\n"
        assert run_turn(client, thread, "proxy second")["status"] == "completed"
        assert (ws / "a.txt").read_text() == "two\n" and (ws / "made.txt").exists()
    finally:
        client.close()
    sidecar = recorded(tmp_path / "home", thread)  # the proxy finishes recording the last turn as it exits
    turns = json.loads(sidecar.read_text())["turns"]
    assert [t["prompt"] for t in turns] == ["proxy first", "proxy second"]
    assert all(t["pre"] and t["post"] for t in turns), turns
    rewind = codexr(env, ws, "rewind", "--thread", thread, "--to", "2", "--yes", "--json")
    assert rewind.returncode == 0, show(rewind)
    assert (ws / "a.txt").read_text() == "one\n" and not (ws / "made.txt").exists()
    assert (ws / "keep.txt").read_text() == "mine\n"
    redo = codexr(env, ws, "redo", "--thread", json.loads(rewind.stdout)["thread_id"], "--yes")
    assert redo.returncode == 0, show(redo)
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "made.txt").read_text() == "made\n"


def test_the_shim_passes_every_other_command_to_the_real_codex(tmp_path: Path) -> None:
    res = subprocess.run([str(SHIM), "--version"], capture_output=True, text=True, timeout=TIMEOUT_S,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0 and res.stdout.startswith("codex-cli "), (res.stdout, res.stderr)


def test_a_proxy_killed_mid_revert_leaves_the_files_before_or_after_never_mixed(model: ScriptedModel,
                                                                                 tmp_path: Path) -> None:
    """SIGKILL of `codexr app-server` at random instants of a revert (the official TUI's Esc Esc): the files are
    as before the prompt or as they were, never a mix, once the next codexr command has finished or undone the
    journaled restore (and said so)."""
    import contextlib
    import random
    import signal
    import threading

    from fs_helpers import tree
    from openai_codex.generated.v2_all import ThreadRevertResponse

    rng = random.Random(19)
    model.script("proxy kill one", [shell("for i in $(seq 1 60); do echo changed > f$i.txt; done"),
                                    message("changed sixty files")])
    model.script("proxy kill two", [message("nothing more")])
    outcomes = []
    for trial in range(3):
        ws = tmp_path / f"ws{trial}"
        ws.mkdir()
        for i in range(1, 61):
            (ws / f"f{i}.txt").write_text(f"original {i}\n")
        env = proxy_env(model, tmp_path / f"home{trial}")
        before = tree(ws)
        client, thread = through_shim(ws, env)
        try:
            first = client.turn_start(thread, [{"type": "text", "text": "proxy kill one"}]).turn.id
            while client.next_turn_notification(first).method != "turn/completed":
                pass
            assert run_turn(client, thread, "proxy kill two")["status"] == "completed"
            after = tree(ws)
            assert after != before

            def revert(client: CodexClient = client, thread: str = thread, first: str = first) -> None:
                with contextlib.suppress(Exception):  # the proxy is killed under it
                    client.request("thread/revert", {"threadId": thread, "beforeTurnId": first},
                                   response_model=ThreadRevertResponse)

            asker = threading.Thread(target=revert, daemon=True)
            asker.start()
            time.sleep(rng.uniform(0.0, 0.6))
            assert client._proc is not None
            os.kill(client._proc.pid, signal.SIGKILL)
            asker.join(30)
        finally:
            client.close()
        after_kill = codexr(env, ws, "snapshots", "capture")
        assert after_kill.returncode == 0, show(after_kill)
        final = tree(ws)
        assert final in (before, after), f"trial {trial}: a mix of before and after"
        if "interrupted restore" in after_kill.stderr + after_kill.stdout:
            assert "safety snapshot" in after_kill.stderr + after_kill.stdout, show(after_kill)
        outcomes.append("before" if final == before else "after")
    assert len(outcomes) == 3


def paused_turn(model: ScriptedModel, tmp_path: Path, prompt: str) -> tuple[CodexClient, str, Path, dict[str, str],
                                                                           int, int]:
    """A turn through the shim that waits a minute at the model (it has reached it): the client, thread,
    workspace, environment, and the pids of the proxy and of its app-server."""
    from app.codex.scripted_model import pause

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    env = proxy_env(model, tmp_path / "home")
    model.script(prompt, [pause(60), message("too late")])
    client, thread = through_shim(ws, env)
    try:
        client.turn_start(thread, [{"type": "text", "text": prompt}])
        deadline = time.monotonic() + TIMEOUT_S
        while not any(prompt in json.dumps(r) for r in model.requests):
            assert time.monotonic() < deadline, "the turn never reached the model"
            time.sleep(0.05)
        assert client._proc is not None
        proxy = client._proc.pid
        (backend,) = [int(c) for t in Path(f"/proc/{proxy}/task").iterdir()
                      for c in (t / "children").read_text().split()]
    except BaseException:
        client.close()
        raise
    return client, thread, ws, env, proxy, backend


def recorded_turns(tmp_path: Path, thread: str) -> list[dict[str, Any]]:
    """The turns the thread's sidecar holds."""
    turns: list[dict[str, Any]] = json.loads(
        (tmp_path / "home" / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())["turns"]
    return turns


def test_the_app_server_dying_mid_turn_ends_the_proxy_cleanly_and_keeps_what_it_recorded(
        model: ScriptedModel, tmp_path: Path) -> None:
    """The real app-server behind `codexr app-server` is SIGKILLed while a turn waits on the model: the client's
    connection ends, the proxy exits by itself with nothing left running, and the turn is recorded as
    interrupted with its snapshots (a post-turn capture after it, as for any turn that ended)."""
    import signal

    client, thread, _ws, _env, _proxy, backend = paused_turn(model, tmp_path, "proxy backend dies")
    try:
        os.kill(backend, signal.SIGKILL)
        assert client._proc is not None
        # ended by itself, with the status that tells the IDE its Codex died (a shell's 128 + the signal), not 0
        assert client._proc.wait(TIMEOUT_S) == 128 + signal.SIGKILL, "the proxy did not end as its app-server did"
    finally:
        client.close()
    (turn,) = recorded_turns(tmp_path, thread)
    assert turn["status"] == "interrupted" and turn["pre"] and turn["post"], turn


def test_an_app_server_that_cannot_start_ends_codexr_app_server_with_its_status(tmp_path: Path) -> None:
    """The real Codex refuses to start (CODEX_HOME names no directory: it exits 1): `codexr app-server` ends with that
    status and one line saying so, for the IDE or script that reads its status as Codex's. It exited 0, and with a
    request sent also printed the relay's own `ConnectionError('closed')`."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEXR_SERVER": "0", "HOME": str(tmp_path / "home"),
           "CODEX_HOME": str(tmp_path / "no-such-codex-home")}
    initialize = json.dumps({"id": 1, "method": "initialize", "params": {"clientInfo": {"name": "t", "version": "1"}}})
    for stdin in ("", initialize + "\n"):
        res = subprocess.run([sys.executable, "-m", "app.cli", "app-server"], cwd=ws, env=env, input=stdin,
                             capture_output=True, text=True, timeout=TIMEOUT_S)
        assert res.returncode == 1, show(res)
        ours = [line for line in res.stderr.splitlines() if line.startswith("codexr")]
        assert ours == ["codexr: the Codex app-server exited with status 1"], show(res)
        assert "Traceback" not in res.stderr and res.stdout == "", show(res)


def test_a_proxy_killed_mid_turn_leaves_nothing_running_and_the_turn_recorded_from_its_start(
        model: ScriptedModel, tmp_path: Path) -> None:
    """SIGKILL of `codexr app-server` while a turn waits on the model: its app-server (whose stdin closes)
    exits with it, the pre-turn snapshot is bound to the turn, and the next codexr command has nothing to
    finish and works."""
    import signal

    client, thread, ws, env, proxy, backend = paused_turn(model, tmp_path, "proxy killed mid turn")
    try:
        os.kill(proxy, signal.SIGKILL)
        assert client._proc is not None
        client._proc.wait(TIMEOUT_S)
        deadline = time.monotonic() + TIMEOUT_S
        while Path(f"/proc/{backend}").exists() and "Z" not in Path(f"/proc/{backend}/stat").read_text().split()[2]:
            assert time.monotonic() < deadline, "the app-server outlived its killed proxy"
            time.sleep(0.1)
    finally:
        client.close()
    (turn,) = recorded_turns(tmp_path, thread)
    assert turn["pre"], turn
    after = codexr(env, ws, "snapshots", "capture")
    assert after.returncode == 0 and "interrupted" not in after.stderr, show(after)
    assert (ws / "a.txt").read_text() == "a\n"


def recorded(home: Path, thread: str) -> Path:
    """The thread's sidecar once every turn in it has its post-turn snapshot (the proxy forwards turn/completed at
    once and records the post-turn capture after: an edit before that would be in it, the agent's)."""
    sidecar = home / "file_snapshots" / "refs" / "threads" / f"{thread}.json"
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and not (sidecar.exists() and
                                              all(t.get("post") for t in json.loads(sidecar.read_text())["turns"])):
        time.sleep(0.05)
    return sidecar


def revert(client: CodexClient, thread: str, before_turn: str) -> str | None:
    """The official TUI's Esc Esc → Enter: `thread/revert` through the proxy; the error's message, None when done."""
    from openai_codex.generated.v2_all import ThreadRevertResponse

    from app.codex.codex_sdk import JsonRpcError

    try:
        client.request("thread/revert", {"threadId": thread, "beforeTurnId": before_turn},
                       response_model=ThreadRevertResponse)
    except JsonRpcError as exc:
        return str(exc.message)
    return None


def beside_another_session(model: ScriptedModel, tmp_path: Path, tag: str
                           ) -> tuple[Path, dict[str, str], CodexClient, str, str, Any]:
    """Two prompts through the proxy (the first adds a.txt, the second changes it and a command makes made.txt),
    then another live codexr session in the workspace (line mode, its own Codex): the workspace, environment,
    client, thread, the second prompt's turn id and the other session."""
    from e2e_helpers import PipeSession

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("mine\n")
    env = proxy_env(model, tmp_path / "home")
    model.script(f"{tag} one", [add_file("a.txt", "one\n"), message("added a.txt")])
    model.script(f"{tag} two", [update_file("a.txt", "one", "two"), shell("echo made > made.txt"),
                                message("changed a.txt, made made.txt")])
    client, thread = through_shim(ws, env)
    try:
        assert run_turn(client, thread, f"{tag} one")["status"] == "completed"
        second = run_turn(client, thread, f"{tag} two")
        assert second["status"] == "completed"
        other = PipeSession(ws, env)
        other.until("type a prompt")
    except BaseException:
        client.close()
        raise
    return ws, env, client, thread, str(second["id"]), other


def thread_prompts(client: CodexClient, thread: str) -> int:
    """How many turns Codex's record of the thread holds."""
    return len(client.thread_read(thread, include_turns=True).thread.turns or [])


def test_a_revert_beside_another_live_session_goes_ahead_when_it_touches_only_this_threads_files(
        model: ScriptedModel, tmp_path: Path) -> None:
    """Another codexr session works in the workspace, but the revert deletes and overwrites only files as this
    thread last left them: files and conversation go back, and `codexr redo` brings both back."""
    ws, env, client, thread, second, other = beside_another_session(model, tmp_path, "beside own")
    try:
        assert revert(client, thread, second) is None
        assert (ws / "a.txt").read_text() == "one\n" and not (ws / "made.txt").exists()
        assert (ws / "keep.txt").read_text() == "mine\n"
        assert thread_prompts(client, thread) == 1
    finally:
        client.close()
        other.close()
    redo = codexr(env, ws, "redo", "--thread", thread, "--yes")
    assert redo.returncode == 0, show(redo)
    assert (ws / "a.txt").read_text() == "two\n" and (ws / "made.txt").read_text() == "made\n"


def test_a_revert_keeps_another_live_sessions_file_and_the_users_own_work(model: ScriptedModel,
                                                                           tmp_path: Path) -> None:
    """Issue 34: the official TUI's Esc Esc undoes this thread's agent's work only — the other live session's
    agent's file, a file made by hand and a hidden one made by hand (which `snapshots restore` keeps too) stay;
    the thread's own agent's file and edit go back. (Before, the revert deleted them, or was refused while the
    other session was live.)"""
    ws, _env, client, thread, second, other = beside_another_session(model, tmp_path, "beside theirs")
    model.script("beside theirs other", [add_file("other.txt", "theirs\n"), message("theirs")])
    try:
        other.prompt("beside theirs other please")
        assert (ws / "other.txt").read_text() == "theirs\n"
        recorded(tmp_path / "home", thread)
        (ws / "hand.txt").write_text("made by hand\n")
        (ws / ".secret").write_text("hidden, by hand\n")
        why = revert(client, thread, second)
        assert why is None, why
        assert thread_prompts(client, thread) == 1
    finally:
        client.close()
        other.close()
    assert (ws / "other.txt").read_text() == "theirs\n"
    assert (ws / "hand.txt").read_text() == "made by hand\n" and (ws / ".secret").read_text() == "hidden, by hand\n"
    assert not (ws / "made.txt").exists() and (ws / "a.txt").read_text() == "one\n"
    assert (ws / "keep.txt").read_text() == "mine\n"


def test_the_line_after_a_revert_numbers_the_prompt_as_the_client_shows_it(model: ScriptedModel,
                                                                           tmp_path: Path) -> None:
    """Two prompts ran with the plain Codex (no snapshots: conversation only), two more through codexr; a revert
    before the fourth says "before prompt 4" as the client counts its prompts (not "2" as codexr's snapshots do),
    names the files that went back, and reads as an addition to the official TUI's own line, not a contradiction."""
    from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]
    from test_proxy_frames import initialize, peer, prompt

    ws = tmp_path / "ws"
    ws.mkdir()
    env = proxy_env(model, tmp_path / "home")
    for n, step in (("one", message("one")), ("two", message("two")), ("three", add_file("b.txt", "b\n")),
                    ("four", add_file("c.txt", "c\n"))):
        model.script(f"numbered {n}", [step, message(f"{n} done")])
    direct, thread = through_shim(ws, env, codex_bin=Path(bundled_codex_path()))
    try:
        for n in ("one", "two"):
            assert run_turn(direct, thread, f"numbered {n}")["status"] == "completed"
    finally:
        direct.close()
    with peer([sys.executable, "-m", "app.cli", "app-server"], ws, env, tmp_path / "err") as client:
        client.send(initialize(1))
        assert "result" in client.answer(1)
        client.send({"id": 2, "method": "thread/resume", "params": {"threadId": thread, "cwd": str(ws),
                     "approvalPolicy": "never", "sandbox": "danger-full-access", "excludeTurns": True}})
        assert "result" in client.answer(2)
        turns = [prompt(client, rid, thread, f"numbered {n}") for rid, n in ((3, "three"), (4, "four"))]
        assert (ws / "c.txt").exists()
        recorded(tmp_path / "home", thread)
        (ws / "hand.txt").write_text("by hand\n")  # after the last prompt: the user's, named as kept
        client.send({"id": 5, "method": "thread/revert", "params": {"threadId": thread, "beforeTurnId": turns[1]}})
        assert "result" in client.answer(5)
        note = client.until(lambda m: m.get("method") == "error"
                            and "codexr:" in str(m["params"]["error"]["message"]))
        client.close()
    # the proxy's own reads (the fork that keeps the conversation) are paginated: no deprecation notice for them
    assert [m for m in client.seen if m.get("method") == "deprecationNotice"] == []
    line = str(note["params"]["error"]["message"])
    assert line.startswith("codexr: the files went back as well, to before prompt 4: c.txt (0 files written, 1 "
                           "deleted);"), line
    assert f"codexr redo --thread {thread}" in line
    assert "; kept as you left them (not the agent's changes): hand.txt;" in line, line
    assert not (ws / "c.txt").exists() and (ws / "b.txt").exists() and (ws / "hand.txt").exists()


def test_turns_the_server_starts_itself_are_recorded_and_rewound(model: ScriptedModel, tmp_path: Path) -> None:
    """The user's shell command (`thread/shellCommand`, `!` in the official TUI) and a prompt put on the server-side
    queue (`thread/queue/add`) run as turns no turn/start began: each gets its pre-turn snapshot before the request
    is forwarded and its post-turn one at its end, so a rewind takes back what they made (before: no snapshot, and
    a rewind left the shell command's file, which no snapshot had witnessed)."""
    from test_proxy_frames import peer, prompt, started_thread

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "keep.txt").write_text("keep\n")
    home = tmp_path / "home"
    env = proxy_env(model, home)
    model.script("served one", [add_file("a.txt", "a\n"), message("one done")])
    model.script("served queued", [add_file("q.txt", "q\n"), message("queued done")])
    with peer([sys.executable, "-m", "app.cli", "app-server"], ws, env, tmp_path / "err") as client:
        thread = started_thread(client, ws)
        done = lambda m: m.get("method") == "turn/completed"  # noqa: E731
        prompt(client, 3, thread, "served one")
        client.send({"id": 4, "method": "thread/shellCommand",
                     "params": {"threadId": thread, "command": "echo mine > sh.txt"}})
        assert "result" in client.answer(4)
        client.until(done)
        client.send({"id": 5, "method": "thread/queue/add", "params": {
            "threadId": thread, "clientUserMessageId": "q-1", "input": [{"type": "text", "text": "served queued"}]}})
        assert "result" in client.answer(5)
        client.until(done)
        assert (ws / "sh.txt").exists() and (ws / "q.txt").exists()
        client.close()
    turns = json.loads((home / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())["turns"]
    assert [t["prompt"] for t in turns] == ["served one", "!echo mine > sh.txt", "served queued"], turns
    assert all(t.get("pre") and t.get("post") for t in turns), turns
    back = codexr(env, ws, "rewind", "--thread", thread, "--to", "1", "--yes")
    assert back.returncode == 0, show(back)
    assert sorted(p.name for p in ws.iterdir()) == ["keep.txt"], "the rewind left what the turns made"


def test_a_turn_codex_starts_before_it_answers_the_shell_command_or_queue_request_is_recorded(tmp_path: Path) -> None:
    """Codex may start the turn of a `!` shell command or a queued prompt before it answers the request: the test
    above failed once so in a quiet full run (the queued prompt unrecorded, its answer then waiting for a turn/started
    that had passed). Those frames in that order through the proxy's observer, with the real recorder and store:
    each turn is bound to the snapshot taken before its request and gets its post-turn one (before: none recorded)."""
    import asyncio

    from app.proxy.observer import RecordingObserver

    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    env = write_codex_home(home, "http://127.0.0.1:9/v1")
    thread = "01a00000-0000-7000-8000-0000000000aa"

    async def frames() -> None:
        obs = RecordingObserver(ws, {**os.environ, **env})
        for rid, method, params, made in (
                (4, "thread/shellCommand", {"threadId": thread, "command": "echo mine > sh.txt"}, "sh.txt"),
                (5, "thread/queue/add", {"threadId": thread, "clientUserMessageId": "q-1",
                                         "input": [{"type": "text", "text": "queued"}]}, "q.txt")):
            await obs.from_client({"id": rid, "method": method, "params": params})
            turn = {"id": f"turn-{rid}", "status": "inProgress", "items": []}
            await obs.from_server({"method": "turn/started", "params": {"threadId": thread, "turn": turn}})
            await obs.from_server({"id": rid, "result": {}})  # the answer, after the turn began
            (ws / made).write_text("made\n")
            done = {**turn, "status": "completed"}
            await obs.from_server({"method": "turn/completed", "params": {"threadId": thread, "turn": done}})
        await obs.closed()

    asyncio.run(frames())
    turns = json.loads((home / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())["turns"]
    assert [(t["turn_id"], t["prompt"]) for t in turns] == [("turn-4", "!echo mine > sh.txt"), ("turn-5", "queued")]
    assert all(t["pre"] and t["post"] and t["pre"] != t["post"] for t in turns), turns


def test_a_reverted_thread_reads_alike_in_threads_and_history(model: ScriptedModel, tmp_path: Path) -> None:
    """A thread the official TUI started through the proxy, reverted before its second prompt: `threads`, `history
    list` and `history show` name its source alike ("CLI": before, IDE / codexr / "codexr (vscode)") and count the
    prompts `history show` prints (before: "0 prompts", then one printed)."""
    from test_proxy_frames import peer, prompt, started_thread

    ws = tmp_path / "ws"
    ws.mkdir()
    env = proxy_env(model, tmp_path / "home")
    model.script("alike one", [add_file("a.txt", "a\n"), message("one done")])
    model.script("alike two", [add_file("b.txt", "b\n"), message("two done")])
    with peer([sys.executable, "-m", "app.cli", "app-server"], ws, env, tmp_path / "err") as client:
        thread = started_thread(client, ws, name="codex-tui")  # as the official TUI introduces itself
        turns = [prompt(client, rid, thread, text) for rid, text in ((3, "alike one"), (4, "alike two"))]
        client.send({"id": 5, "method": "thread/revert", "params": {"threadId": thread, "beforeTurnId": turns[1]}})
        assert "result" in client.answer(5)
        client.until(lambda m: m.get("method") == "error" and "codexr:" in str(m["params"]["error"]["message"]))
        client.close()
    listed = {t["thread_id"]: t for t in json.loads(codexr(env, ws, "threads", "--json").stdout)}
    history = {s["id"]: s for s in json.loads(codexr(env, ws, "history", "list", "--json").stdout)["sessions"]}
    shown = json.loads(codexr(env, ws, "history", "show", thread, "--json").stdout)
    assert listed[thread]["source"] == history[thread]["source_label"] == shown["session"]["source_label"] == "CLI"
    printed = [p for p in shown["prompts"] if p["number"] > 0]
    assert history[thread]["prompts"] == shown["session"]["prompts"] == len(printed) == listed[thread]["prompts"] == 1
    assert "- source: CLI\n" in codexr(env, ws, "history", "show", thread).stdout


def test_a_prompt_queued_behind_a_running_turn_is_recorded(model: ScriptedModel, tmp_path: Path) -> None:
    """`thread/queue/add` while a turn runs: the server starts the queued prompt itself the moment that turn ends and
    goes on while codexr would capture (a snapshot taken as it started held its file: tried), so it gets no pre-turn
    snapshot — no rewind point of its own, said so — but its post-turn one: a rewind to the first prompt takes
    back what both made."""
    from test_proxy_frames import peer, prompt, started_thread

    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    env = proxy_env(model, home)
    model.script("queue first", [shell("sleep 2 && echo 1 > first.txt"), message("first done")])
    model.script("queue behind", [add_file("behind.txt", "b\n"), message("behind done")])
    with peer([sys.executable, "-m", "app.cli", "app-server"], ws, env, tmp_path / "err") as client:
        thread = started_thread(client, ws)
        prompt(client, 3, thread, "queue first", wait=False)
        client.send({"id": 4, "method": "thread/queue/add", "params": {
            "threadId": thread, "clientUserMessageId": "q-1", "input": [{"type": "text", "text": "queue behind"}]}})
        assert "result" in client.answer(4)
        done = [client.until(lambda m: m.get("method") == "turn/completed") for _ in range(2)]
        assert (ws / "behind.txt").exists() and (ws / "first.txt").exists(), done
        client.close()
    turns = json.loads((home / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())["turns"]
    assert [t["prompt"] for t in turns] == ["queue first", "(a queued prompt)"], turns
    assert turns[0].get("pre") and turns[0].get("post") and turns[1].get("post") and not turns[1].get("pre"), turns
    refused = codexr(env, ws, "rewind", "--thread", thread, "--to", "2", "--yes")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, show(refused)
    assert (ws / "behind.txt").exists()
    back = codexr(env, ws, "rewind", "--thread", thread, "--to", "1", "--yes")
    assert back.returncode == 0, show(back)
    assert sorted(p.name for p in ws.iterdir()) == [], "the rewind left what the turns made"


def test_an_approval_left_unanswered_by_a_client_that_quit_is_declined(model: ScriptedModel, tmp_path: Path) -> None:
    """The client quits while the app-server waits for its approval of a command: the relay stays for the running
    turn, so that approval would wait forever; it is declined instead, the turn ends (the command never ran) and is
    recorded, and codexr exits."""
    from test_proxy_frames import peer, prompt, started_thread

    ws = tmp_path / "ws"
    ws.mkdir()
    home = tmp_path / "home"
    env = proxy_env(model, home)
    model.script("ask then quit", [shell("echo ran > ran.txt"), message("asked done")])
    with peer([sys.executable, "-m", "app.cli", "app-server"], ws, env, tmp_path / "err") as client:
        thread = started_thread(client, ws, approval="untrusted", sandbox="workspace-write")
        prompt(client, 3, thread, "ask then quit", wait=False)
        client.until(lambda m: str(m.get("method", "")).endswith("requestApproval"))
        assert client.close() == 0  # returns once codexr has exited (killed and failed after 60 s otherwise)
    assert not (ws / "ran.txt").exists()
    (turn,) = json.loads((home / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())["turns"]
    assert turn.get("pre") and turn.get("post"), turn
