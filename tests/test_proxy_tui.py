"""The official Codex TUI through `codexr codex`, in a real terminal (issue 19): prompts are recorded, Esc Esc
rewinds the files with the conversation, `codexr redo` brings them back, and quitting leaves nothing running.

tmux runs `codexr codex` (the pinned Codex's own TUI, `--remote` to codexr's proxy) against the scripted model;
keys go in with send-keys, the screen comes back with capture-pane, and the workspace on disk is the proof.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fs_helpers import tree
from npm_codex import newest_codex
from test_cli_agent import assert_one_line_error, show
from test_proxy_listen import handshake
from test_server_confinement import sandboxed
from test_tui_tmux import Tmux

from app.codex.scripted_model import ScriptedModel, add_file, delete_file, message, shell, update_file, write_codex_home

REPO = Path(__file__).parents[1]
WAIT_S = 90.0


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    yield t
    t.kill()


def send_prompt(tmux: Tmux, text: str, answer: str) -> str:
    """Type a prompt into the official TUI and wait for its answer. Keys typed in a quick burst can be taken as
    a paste, whose Enter becomes a newline (CODEX_FACTS §10), and under load the TUI may not take an Enter yet:
    while the turn has not started a moment later, Enter is pressed again (an empty composer ignores it)."""
    tmux.type(text)
    time.sleep(0.3)
    started = lambda s: answer in s or "esc to interrupt" in s  # noqa: E731
    deadline = time.monotonic() + WAIT_S
    while True:  # under load the TUI may not take an Enter yet (its session still starting): press it again
        tmux.keys("Enter")
        try:
            tmux.wait(started, "the turn to start", timeout=3)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    return tmux.wait(lambda s: answer in s and "Worked for" in s.split(answer)[-1], f"the answer {answer!r}")


def run_commands(tmux: Tmux, *commands: tuple[str, str | Callable[[str], bool]]) -> None:
    """Type each of the official TUI's slash commands, wait for what it shows (a text, or a test of the screen),
    and close its view again."""
    for command, shown_by in commands:
        tmux.type(command)
        time.sleep(0.3)
        tmux.keys("Enter")
        if isinstance(shown_by, str):
            tmux.wait_for(shown_by)
        else:
            tmux.wait(shown_by, f"what {command} shows")
        if command in ("/diff", "/resume"):
            tmux.keys("q" if command == "/diff" else "Escape")
            tmux.wait(lambda s: "q close" not in s and "Resume a previous session" not in s, "the view to close")


def live_processes() -> list[tuple[int, str, str]]:
    """(pid, command line, working directory) of each live process but this one."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        found.append((int(pid), cmd, cwd))
    return found


def processes_mentioning(needle: str) -> list[str]:
    """Command lines of live processes that mention `needle` (what quitting must leave: none)."""
    return [f"{pid}: {cmd[:200]} (in {cwd})" for pid, cmd, cwd in live_processes()
            if needle in cmd or cwd.startswith(needle)]


def test_the_official_tui_through_codexr_rewinds_files_with_the_conversation(tmux: Tmux, tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    (ws / "tracked.py").write_text("VALUE = 1\n")
    (ws / ".env").write_text("TOKEN=old\n")
    subprocess.run(["git", "init", "-q"], cwd=ws, check=True)
    subprocess.run(["git", "add", "tracked.py"], cwd=ws, check=True)
    (ws / "notes.md").write_text("an uncommitted idea\n")
    (ws / "readme.txt").write_text("the agent never touches this\n")
    rc_file = tmp_path / "rc"
    with ScriptedModel() as model:
        model.script("proxy-one", [update_file("tracked.py", "VALUE = 1", "VALUE = 2"), delete_file("notes.md"),
                                   shell("echo generated > gen.txt && mkdir -p made && echo x > made/y.txt"),
                                   update_file(".env", "TOKEN=old", "TOKEN=new"),
                                   message("First change done.")])
        model.script("proxy-two", [add_file("second.txt", "two\n"), message("Second change done.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0"}
        before_one = tree(ws)
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # the trap: a second Ctrl+C that lands after the TUI quit must not kill this shell before it writes rc.
        # `-c` after `codex` is the TUI's own flag (argparse took it for codexr's: "unrecognized arguments"),
        tmux.start(f"trap true INT; cd {shlex.quote(str(ws))} && env -u COLUMNS -u LINES {assign} "
                   f"{shlex.quote(sys.executable)} -m app.cli --yolo codex -c model_reasoning_effort=high; "
                   f"echo $? > {shlex.quote(str(rc_file))}")
        past_first_screen(tmux)

        tuis = [cmd for _pid, cmd, cwd in live_processes() if cwd == str(ws) and " --remote " in cmd]
        # and `--yolo` before `codex` (codexr's spelling of the TUI's flags there) reaches the TUI as its own flag
        assert len(tuis) == 1 and tuis[0].endswith(" -c model_reasoning_effort=high "
                                                   "--dangerously-bypass-approvals-and-sandbox "), tuis

        send_prompt(tmux, "proxy-one change things", "First change done.")
        after_one = tree(ws)
        assert (ws / "tracked.py").read_text() == "VALUE = 2\n" and not (ws / "notes.md").exists()
        assert (ws / "gen.txt").exists() and (ws / ".env").read_text() == "TOKEN=new\n"
        send_prompt(tmux, "proxy-two more", "Second change done.")
        after_two = tree(ws)

        run_commands(tmux, ("/status", "Context window"), ("/diff", "q close"))

        sidecars = list((home / "file_snapshots" / "refs" / "threads").glob("*.json"))
        recorded = {p.stem: json.loads(p.read_text()) for p in sidecars}
        (thread,) = [t for t, d in recorded.items() if [r["prompt"] for r in d["turns"]] ==
                     ["proxy-one change things", "proxy-two more"]]
        from test_proxy import recorded as posts_recorded

        posts_recorded(home, thread)  # the post-turn capture follows turn/completed: work by hand after it
        (ws / "hand.txt").write_text("made by hand\n")  # issue 34: the user's own work, which Esc Esc keeps
        (ws / "readme.txt").write_text("edited by hand\n")
        (ws / ".hidden-note").write_text("hidden, by hand\n")
        yours = {p: e for p, e in tree(ws).items() if p in ("hand.txt", "readme.txt", ".hidden-note")}

        # Esc Esc: browse the transcript (the last prompt selected), one prompt back, Enter: revert before prompt 1
        tmux.keys("Escape")
        time.sleep(0.3)
        tmux.keys("Escape")
        tmux.wait_for("rewind")
        tmux.keys("Left")
        time.sleep(0.5)
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "files went back as well, to before prompt 1" in s, "codexr's line about the files")
        assert tree(ws) == {**before_one, **yours}, "the agent's changes are not undone, or yours not kept"
        assert "kept as you left them (not the agent's changes)" in " ".join(shown.split()), shown
        assert "Conversation reverted" in shown
        fork = re.search(r"undonepromptsstayinthread([0-9a-f-]{36})", "".join(shown.split()))  # however it wraps
        assert fork is not None, shown

        # the official TUI's own commands pass through unchanged (the composer holds the reverted prompt: cleared)
        tmux.keys("C-c")
        tmux.wait(lambda s: "proxy-one change things" not in s.split("Conversation reverted")[-1], "a clear composer")
        run_commands(tmux, ("/new", lambda s: "Conversation reverted" not in s and "Ask Codex" in s),
                     ("/resume", "Resume a previous session"))

        # quit: nothing left running (the app-server, its shells, the proxy)
        tmux.keys("C-c")  # the official TUI quits on the first or the second (it may ask to press again)
        again = time.monotonic() + 1.0
        while not rc_file.exists() and time.monotonic() < again:
            time.sleep(0.05)
        if not rc_file.exists():
            tmux.tmux("send-keys", "-t", "codexr", "C-c", check=False)
        deadline = time.monotonic() + WAIT_S
        while not rc_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert rc_file.exists(), tmux.screen()
        deadline = time.monotonic() + 10
        while processes_mentioning(str(ws)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert processes_mentioning(str(ws)) == []

        redo = subprocess.run([sys.executable, "-m", "app.cli", "redo", "--thread", thread, "--yes", "--json"],
                              cwd=ws, env={**os.environ, **env}, capture_output=True, text=True, timeout=WAIT_S)
        assert redo.returncode == 0, show(redo)
        assert tree(ws) == {**after_two, **yours}, "redo did not bring every file back, or did not keep yours"
        assert json.loads(redo.stdout)["thread_id"] == fork.group(1)
    assert after_one != before_one


def in_workspace(ws: Path) -> list[tuple[int, str]]:
    """(pid, command line) of each live process whose working directory is `ws`."""
    return [(pid, cmd) for pid, cmd, cwd in live_processes() if cwd == str(ws)]


def test_codexr_codex_serves_only_the_tui_it_started(tmux: Tmux, tmp_path: Path) -> None:
    """The private socket of `codexr codex` answers the TUI it started and no one else: another process of this
    user, with or without an Origin header, is refused in the handshake (403) and no app-server starts for it."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    with ScriptedModel() as model:
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0"}
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        tmux.start(f"cd {shlex.quote(str(ws))} && env -u COLUMNS -u LINES {assign} "
                   f"{shlex.quote(sys.executable)} -m app.cli codex")
        app_servers = lambda: [p for p, cmd in in_workspace(ws) if " app-server " in cmd]  # noqa: E731
        # the TUI's socket, by path: a process the TUI forks shows the same command line for a moment (seen under load)
        remotes = lambda: {m.group(1) for _, cmd in in_workspace(ws)  # noqa: E731
                           if (m := re.search(r"--remote unix://(\S+)", cmd))}
        tmux.wait(lambda _s: len(app_servers()) >= 1 and len(remotes()) == 1, "the app-server for the TUI, its socket")
        (socket_path,) = remotes()
        url = f"unix://{socket_path}"
        # the TUI's own, one or more (a loaded full run saw two here; the TUI may connect again under load)
        for_the_tui = set(app_servers())
        for headers in [(), (("Origin", "null"),), (("Origin", "https://evil.example"),)]:
            status, body = handshake(url, *headers)
            assert status == 403, (headers, status, body)
            assert ("Origin" if headers else "not the client codexr started") in body, body
        assert set(app_servers()) <= for_the_tui, in_workspace(ws)  # none started for a refused caller
        log = Path(socket_path).with_name("app-server.log").read_text()
        assert log.count("codexr: refused a connection (403)") == 3, log
    tmux.kill()
    deadline = time.monotonic() + WAIT_S
    while in_workspace(ws) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert in_workspace(ws) == []


def start_codexr_codex(tmux: Tmux, ws: Path, env: dict[str, str], rc_file: Path, *tui_args: str) -> None:
    """`codexr codex [ARGS]` in tmux, past the model announcement, its exit status written to `rc_file`."""
    assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    tmux.start(f"trap true INT; cd {shlex.quote(str(ws))} && env -u COLUMNS -u LINES {assign} "
               f"{shlex.quote(sys.executable)} -m app.cli codex {' '.join(map(shlex.quote, tui_args))}; "
               f"echo $? > {shlex.quote(str(rc_file))}; sleep 600")
    past_first_screen(tmux)


def past_first_screen(tmux: Tmux) -> None:
    """Wait for the official TUI's first screen and go past it to the composer: on a fresh CODEX_HOME a model
    announcement comes first (CODEX_FACTS §10), answered "2" (the configured model)."""
    screen = tmux.wait(lambda s: "Use existing model" in s or "Ask Codex" in s or "describe a task" in s,
                       "the official TUI's first screen")
    if "Use existing model" in screen:
        tmux.keys("2", "Enter")
    tmux.wait(lambda s: "describe a task" in s or "Ask Codex" in s, "the composer")


def test_work_still_running_when_the_tui_quits_finishes_and_is_recorded(tmux: Tmux, tmp_path: Path) -> None:
    """The official TUI says "Any running work continues" as it quits mid-turn: the turn goes on to its end (before,
    codexr ended the app-server with the TUI and the command's file was never written), its post-turn snapshot is
    taken so a later rewind removes what it made, and codexr prints the reconnect command that works, which takes
    a thread id prefix."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    (ws / "kept.txt").write_text("kept\n")
    rc_file = tmp_path / "rc"
    with ScriptedModel() as model:
        model.script("late-work", [shell("sleep 4 && echo done > late.txt"), message("Late work done.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0"}
        before = tree(ws)
        start_codexr_codex(tmux, ws, env, rc_file)
        tmux.type("late-work")
        time.sleep(0.3)
        deadline = time.monotonic() + WAIT_S
        while True:  # a quick burst of keys can be taken as a paste: Enter again until the turn runs
            tmux.keys("Enter")
            try:
                tmux.wait(lambda s: "esc to interrupt" in s, "the turn to run", timeout=3)
                break
            except AssertionError:
                assert time.monotonic() < deadline, tmux.screen()
        tmux.type("/quit")
        time.sleep(0.3)
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "a turn is still running on thread" in s, "codexr's line as the TUI quits")
        assert not (ws / "late.txt").exists(), "the turn ended before the TUI quit: nothing was proved"
        deadline = time.monotonic() + WAIT_S
        while not rc_file.exists():
            assert time.monotonic() < deadline, tmux.screen()
            time.sleep(0.2)
        assert rc_file.read_text().strip() == "0"
        assert (ws / "late.txt").read_text() == "done\n"
        shown = "".join(tmux.screen().split())
        found = re.search(r"togoon:codexrcodexresume([0-9a-f-]{36})", shown)
        assert found is not None, tmux.screen()
        thread = found.group(1)
        recorded = json.loads((home / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())
        (turn,) = recorded["turns"]
        assert turn["prompt"] == "late-work" and turn.get("pre") and turn.get("post"), turn
        left = [p for p in processes_mentioning(str(ws)) if not re.match(r"\d+: (tmux|sleep|sh|/bin/sh) ", p)]
        assert left == [], "codexr left something running after the turn ended"

        back = subprocess.run([sys.executable, "-m", "app.cli", "rewind", "--thread", thread, "--to", "1", "--yes"],
                              cwd=ws, env={**os.environ, **env}, capture_output=True, text=True, timeout=WAIT_S)
        assert back.returncode == 0, show(back)
        assert tree(ws) == before, "the rewind did not remove what the late turn made"

        tmux.kill()
        rc_file.unlink()
        others = [p.stem for p in (home / "file_snapshots" / "refs" / "threads").glob("*.json") if p.stem != thread]
        prefix = next(thread[:n] for n in range(8, 36) if not any(o.startswith(thread[:n]) for o in others))
        start_codexr_codex(tmux, ws, env, rc_file, "resume", prefix)  # the id codexr printed, shortened
        tmux.wait(lambda s: "Late work done." in s, "the resumed thread's transcript")


@pytest.mark.parametrize("words", [("resume", "0abc"), ("-m", "o3", "resume", "--all", "0abc"),
                                   ("-c", "k=v", "--search", "resume", "0abc", "go on")])
def test_codexr_codex_resume_with_a_prefix_that_names_no_thread_is_one_line(tmp_path: Path,
                                                                           words: tuple[str, ...]) -> None:
    """The TUI's own options may come first (`codexr codex -m o3 resume ID`): the id is still codexr's to resolve."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    env = {**os.environ, **write_codex_home(home, "http://127.0.0.1:9"), "PYTHONPATH": str(REPO),
           "CODEXR_SERVER": "0"}
    res = subprocess.run([sys.executable, "-m", "app.cli", "codex", *words], cwd=ws, env=env,
                         capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert_one_line_error(res, "no thread id starts with '0abc'")


def backtrack(tmux: Tmux, steps_back: int, number: int) -> str:
    """Esc Esc, `steps_back` prompts back from the last, Enter: the TUI reverts; codexr's line names `number`."""
    tmux.keys("Escape")
    time.sleep(0.3)
    tmux.keys("Escape")
    tmux.wait_for("rewind")
    for _ in range(steps_back):
        tmux.keys("Left")
        time.sleep(0.3)
    time.sleep(0.3)
    tmux.keys("Enter")
    shown = tmux.wait(lambda s: f"files went back as well, to before prompt {number}" in s, "codexr's line")
    tmux.keys("C-c")  # the reverted prompt is back in the composer: cleared
    return shown


def test_redo_while_the_official_tui_is_open(tmux: Tmux, tmp_path: Path) -> None:
    """After Esc Esc, `codexr redo` works while the TUI is still open (before: "already has an active writer", since
    codexr's own app-server for the TUI held the kept conversation), from another shell and from the TUI's own `!`
    shell command, both through the app-server the TUI uses; the redo names the thread the conversation is in."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    rc_file = tmp_path / "rc"
    with ScriptedModel() as model:
        model.script("redo-one", [add_file("a.txt", "a\n"), message("First made.")])
        model.script("redo-two", [add_file("b.txt", "b\n"), message("Second made.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0"}
        start_codexr_codex(tmux, ws, env, rc_file)
        send_prompt(tmux, "redo-one", "First made.")
        send_prompt(tmux, "redo-two", "Second made.")
        after_two = tree(ws)
        (thread,) = [p.stem for p in (home / "file_snapshots" / "refs" / "threads").glob("*.json")]

        backtrack(tmux, 0, 2)
        assert not (ws / "b.txt").exists()
        redo = subprocess.run([sys.executable, "-m", "app.cli", "redo", "--thread", thread, "--yes"], cwd=ws,
                              env={**os.environ, **env}, capture_output=True, text=True, timeout=WAIT_S)
        assert redo.returncode == 0, show(redo)
        assert "codexr works through it" in redo.stderr, show(redo)
        assert tree(ws) == after_two
        fork = re.search(r"the conversation is thread (\S+): go on with", redo.stdout)
        assert fork is not None and fork.group(1) != thread, show(redo)

        backtrack(tmux, 0, 1)  # the TUI's thread holds prompt 1 only now
        assert not (ws / "a.txt").exists()
        command = f"!{shlex.quote(sys.executable)} -m app.cli redo --thread {thread} --yes"
        tmux.type(command)
        time.sleep(0.3)
        tmux.keys("Enter")
        tmux.wait(lambda s: "the conversation is thread" in s, "the redo's output in the TUI")
        assert tree(ws) == after_two, "the redo typed in the TUI did not bring the files back"
        assert not rc_file.exists(), "the TUI quit"
        assert_only_codexr_is_admitted(ws, home, env)


def assert_only_codexr_is_admitted(ws: Path, home: Path, env: dict[str, str]) -> None:
    """The app-server of a `codexr codex` listens so other codexr commands can reach it: it admits only a client
    with codexr's token (a handshake without it, or with a guess, is refused); the door that tells where and which
    token answers a process confined as codexr and gives one confined otherwise (its own network namespace, as a
    sandboxed agent's) nothing, so such a codexr's prompt is refused in one line and changes nothing."""
    (backend,) = [pid for pid, cmd in in_workspace(ws) if " app-server " in cmd]
    environ = Path(f"/proc/{backend}/environ").read_bytes().split(b"\0")
    (door,) = [e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"CODEXR_BACKEND_DOOR=")]

    def ask_door(*prefix: str) -> str:
        code = ("import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                "sys.stdout.buffer.write(s.recv(512))")
        return subprocess.run([*prefix, sys.executable, "-c", code, door], capture_output=True, text=True,
                              timeout=30).stdout  # a caller the door may not even reach is told nothing either

    url, token = ask_door().split()
    assert url.startswith("ws://127.0.0.1:") and len(token) > 30
    for headers in [(), (("Authorization", "Bearer guessed"),)]:
        status = upgrade_status(url, *headers)
        assert status == 401, f"the backend admitted a client without codexr's token ({headers}): {status}"
    assert upgrade_status(url, ("Authorization", f"Bearer {token}")) == 101
    # a caller with fewer rights than codexr, where this system lets a test make one: dropped capabilities, another
    # mount namespace, Codex's sandbox
    for fewer in (("setpriv", "--bounding-set", "-all", "--inh-caps", "-all"), ("unshare", "-m"),
                  sandboxed(home)):  # Codex's own sandbox, network on: an agent's command
        if subprocess.run([*fewer, "true"], capture_output=True).returncode == 0:
            assert ask_door(*fewer) == "", f"{' '.join(fewer)}: a caller confined otherwise was told the token"
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        return  # no second network namespace here: the rest cannot be tried
    assert ask_door("unshare", "--net") == "", "a process in another network namespace was told the token"
    sidecars = home / "file_snapshots" / "refs" / "threads"
    (thread,) = [p.stem for p in sidecars.glob("*.json") if not json.loads(p.read_text()).get("forked_from")]
    before = tree(ws)
    confined = subprocess.run(["unshare", "--net", sys.executable, "-m", "app.cli", "exec", "--thread", thread,
                               "sneaky"], cwd=ws, env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=WAIT_S)
    assert_one_line_error(confined, "does not work through it", "runs with other rights")
    assert tree(ws) == before
    sent = [t["prompt"] for p in sidecars.glob("*.json") for t in json.loads(p.read_text())["turns"]]
    assert "sneaky" not in sent, "the prompt ran"




def upgrade_status(url: str, *headers: tuple[str, str]) -> int:
    """The HTTP status a WebSocket upgrade to `url` (ws://HOST:PORT) gets, read from its first line (Codex keeps the
    connection open after a 401)."""
    import socket

    name, _, port = url.removeprefix("ws://").rpartition(":")
    with socket.create_connection((name, int(port)), timeout=30) as sock:
        lines = ["GET / HTTP/1.1", f"Host: {name}:{port}", "Upgrade: websocket", "Connection: Upgrade",
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version: 13",
                 *(f"{k}: {v}" for k, v in headers)]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        data = b""
        while b"\r\n" not in data and (chunk := sock.recv(4096)):
            data += chunk
    return int(data.split()[1])


def test_codexr_codex_runs_the_npm_launcher_of_the_newest_codex(tmux: Tmux, tmp_path: Path) -> None:
    """npm's `codex` is a node script that starts the native TUI as its child: that child is the client codexr's
    door must admit (before: "closed during initialize: not the client codexr started", exit 1 in a second). The
    newest release from npm, through its launcher: a prompt is recorded and Esc Esc takes its files back."""
    npm = newest_codex()
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    rc_file = tmp_path / "rc"
    with ScriptedModel() as model:
        model.script("npm-one", [add_file("n.txt", "n\n"), message("Made by the newest.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0", "CODEXR_CODEX_BIN": str(npm.launcher)}
        start_codexr_codex(tmux, ws, env, rc_file)
        assert f"v{npm.version}" in tmux.screen() or npm.version in tmux.screen(), tmux.screen()
        send_prompt(tmux, "npm-one", "Made by the newest.")
        assert (ws / "n.txt").read_text() == "n\n"
        backtrack(tmux, 0, 1)
        assert not (ws / "n.txt").exists()
