"""codexr and the official Codex's managed app-server daemon (issue 33 §1): a thread the official TUI ran stays open
in the daemon after the TUI quits, and codexr works on it through the daemon at once instead of failing "already has
an active writer"; where codexr may not (a daemon confined otherwise, a socket not the user's), one line says why and
what to do, and nothing changes.

The official TUI is the pinned Codex's own, in tmux, against the scripted model; the workspace, the sidecar and the
daemon's lock on disk are the proof.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from e2e_helpers import session_options
from npm_codex import newest_codex
from test_cli_agent import assert_one_line_error, show
from test_driver import Events
from test_tui_tmux import Tmux

from app.codex.codex_bin import pinned_path
from app.codex.daemon import CONTROL, Holder, Unavailable, checked_socket, holder
from app.codex.events import Notice, Ready, ThreadLoaded, TurnFinished, UserPrompt
from app.codex.scripted_model import ScriptedModel, add_file, message, write_codex_home
from app.errors import SessionError
from app.services.driver import Driver
from app.session import SessionOptions

REPO = Path(__file__).parents[1]
WAIT_S = 90.0

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the daemon's checks read /proc (Linux)")


def codexr(ws: Path, env: dict[str, str], *args: str, timeout: float = WAIT_S,
           prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*prefix, sys.executable, "-m", "app.cli", *args], cwd=ws, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout)


def processes_of(home: Path) -> list[int]:
    """Pids of live processes started from `home` (the daemon runs a copy of Codex kept below CODEX_HOME)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(home).encode() in cmd:
                out.append(int(pid))
    return out


def stop_daemon(home: Path, env: dict[str, str], codex: Path | None = None) -> None:
    """Stop the daemon as a user would, then end what outlived that (its pid-update-loop can, CODEX_FACTS §11)."""
    subprocess.run([str(codex or pinned_path()), "app-server", "daemon", "stop"], env={**os.environ, **env},
                   capture_output=True, timeout=30, check=False)
    for pid in processes_of(home):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    t = Tmux(tmp_path)
    yield t
    t.kill()


def official_tui(tmux: Tmux, ws: Path, env: dict[str, str], *args: str, codex: Path | None = None) -> Path:
    """Run the official `codex` (pinned unless `codex`; no --remote: it starts its managed daemon) in tmux, past its
    first screens; returns the file its exit status is written to."""
    rc_file = ws.parent / "tui-rc"
    assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    tmux.start(f"trap true INT; cd {shlex.quote(str(ws))} && env -u COLUMNS -u LINES {assign} "
               f"{shlex.quote(str(codex or pinned_path()))} {' '.join(map(shlex.quote, args))}; "
               f"echo $? > {shlex.quote(str(rc_file))}; sleep 600")
    deadline = time.monotonic() + WAIT_S
    quiet_since = None
    while time.monotonic() < deadline:  # the trust question and the model announcement may come, late
        screen = tmux.screen()
        if "Use existing model" in screen:
            tmux.keys("2", "Enter")
            quiet_since = None
        elif "Do you trust" in screen or "Trust this folder" in screen:
            tmux.keys("1", "Enter")
            quiet_since = None
        elif "Ask Codex" in screen or "describe a task" in screen:
            quiet_since = quiet_since or time.monotonic()
            if time.monotonic() - quiet_since > 4:
                return rc_file
        time.sleep(0.3)
    raise AssertionError(f"the official TUI did not settle:\n{tmux.screen()}")


def prompt_in_tui(tmux: Tmux, text: str, answer: str) -> None:
    tmux.type(text)
    time.sleep(0.3)
    deadline = time.monotonic() + WAIT_S
    while True:  # a quick burst of keys can be taken as a paste: Enter again until the turn starts
        if text not in tmux.screen():  # a late notice (the model's announcement, under load) took the keys: again
            tmux.type(text)
            time.sleep(0.3)
        tmux.keys("Enter")
        try:
            tmux.wait(lambda s: answer in s or "esc to interrupt" in s, "the turn to start", timeout=3)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
    tmux.wait(lambda s: answer in s and "Worked for" in s.split(answer)[-1], f"the answer {answer!r}")


def quit_tui(tmux: Tmux, rc_file: Path) -> None:
    """Ctrl+C until the TUI has quit (it may ask for a second one), a second apart at most: the exit status file is
    looked for meanwhile, so a TUI that quits on the first is not waited on for the rest of the second."""
    deadline = time.monotonic() + WAIT_S
    while not rc_file.exists():
        assert time.monotonic() < deadline, tmux.screen()
        tmux.keys("C-c")
        again = time.monotonic() + 1.0
        while not rc_file.exists() and time.monotonic() < again:
            time.sleep(0.05)


def left_in_daemon(tmux: Tmux, ws: Path, env: dict[str, str], prompts: tuple[str, str, str],
                   codex: Path | None = None) -> tuple[str, Holder, Path]:
    """A codexr thread (`codexr exec` of the first prompt) that the official TUI resumed, ran the second prompt on
    (its answer the third) and quit: the thread, the daemon that holds it, and the TUI's exit-status file."""
    first, second, answer = prompts
    made = codexr(ws, env, "exec", first, "--json")
    assert made.returncode == 0, show(made)
    thread = str(json.loads(made.stdout)["thread_id"])
    rc_file = official_tui(tmux, ws, env, "resume", thread, codex=codex)
    prompt_in_tui(tmux, second, answer)
    quit_tui(tmux, rc_file)
    held = holder(Path(env["CODEX_HOME"]), thread)
    assert held is not None and held.daemon, f"the official TUI's daemon does not hold the thread: {held}"
    return thread, held, rc_file


def sidecar(home: Path, thread: str) -> dict:
    return json.loads((home / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())


def failed_rewind(res: subprocess.CompletedProcess[str], ws: Path, env: dict[str, str], home: Path,
                  thread: str) -> str:
    """What a failed rewind is shown beside (it failed now and then in loaded full runs, never alone: "prompt 3 does
    not exist (the thread has 2 prompts)"): the prompts the thread's rollout files hold now, codexr's record of its
    turns, and what a dry run of the same rewind finds a moment later."""
    events = []
    for f in sorted((home / "sessions").rglob(f"*{thread}*.jsonl")):
        for raw in f.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError, AttributeError, TypeError):
                p = json.loads(raw).get("payload") or {}
                if p.get("type") in ("task_started", "task_complete"):
                    events.append(f"{p['type']} {p.get('turn_id') or (p.get('turn_attribution') or {}).get('turn_id')}")
                elif p.get("type") == "message" and p.get("role") == "user":
                    events.append("user: " + " ".join(str(c.get("text", ""))[:40] for c in p.get("content") or []))
    turns = [(t.get("turn_id"), t.get("prompt")) for t in sidecar(home, thread)["turns"]]
    again = codexr(ws, env, "rewind", "--thread", thread, "--to", "3", "--dry-run", "--json")
    listed: object = "unread"
    with contextlib.suppress(Exception):  # what the daemon lists: each turn's id, status and item types
        daemon = Lines([sys.executable, "-m", "app.codex.attach", checked_socket(home.joinpath(*CONTROL))], env, ws)
        try:
            daemon.call("initialize", {"clientInfo": {"name": "diagnosis", "version": "0"},
                                       "capabilities": {"experimentalApi": True}})
            answer = daemon.call("thread/turns/list", {"threadId": thread, "limit": 100, "sortDirection": "asc",
                                                       "itemsView": "full"})
            listed = [(t.get("id"), t.get("status"), [i.get("type") for i in t.get("items") or []])
                      for t in (answer.get("result") or {}).get("data") or []] or answer
        finally:
            daemon.close()
    return (f"{show(res)}\nthe rollout now: {events}\nsidecar turns: {turns}\n"
            f"a dry run now: exit {again.returncode} {again.stderr.strip()[-300:]}\nthe daemon lists: {listed}")


@pytest.mark.parametrize("official", ["pinned", "newest"])
def test_a_thread_the_official_tui_left_in_its_daemon_is_worked_on_through_it(official: str, tmux: Tmux,
                                                                              tmp_path: Path) -> None:
    """`codex resume` of a codexr thread, quit, then `codexr exec --last` at once: with the pinned Codex and with the
    newest from npm (its TUI and daemon; codexr's own app-server stays the pinned one); a codexr confined otherwise
    than the daemon is refused."""
    codex = newest_codex().native if official == "newest" else pinned_path()
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    with ScriptedModel() as model:
        model.script("one", [add_file("a.txt", "a\n"), message("One done.")])
        model.script("two", [add_file("b.txt", "b\n"), message("Two done.")])
        model.script("three", [add_file("c.txt", "c\n"), message("Three done.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0"}
        try:
            thread, held, _rc = left_in_daemon(tmux, ws, env, ("one", "two", "Two done."), codex)

            # at once, while the daemon still holds it: the prompt runs, through the daemon, and is recorded
            third = codexr(ws, env, "exec", "--last", "three")
            assert third.returncode == 0, show(third)
            assert f"thread {thread} is open in Codex's app-server daemon (pid {held.pid})" in third.stderr, show(third)
            assert (ws / "c.txt").read_text() == "c\n" and (ws / "b.txt").exists()
            turns = sidecar(home, thread)["turns"]
            assert [t["prompt"] for t in turns] == ["one", "three"]
            assert all(t.get("pre") and t.get("post") for t in turns), turns

            # a rewind and its redo, both through the daemon, which still holds the thread
            back = codexr(ws, env, "rewind", "--thread", thread, "--to", "3", "--yes", "--json")
            if back.returncode != 0:
                pytest.fail(failed_rewind(back, ws, env, home, thread))
            assert not (ws / "c.txt").exists() and (ws / "b.txt").exists() and (ws / "a.txt").exists()
            fork = json.loads(back.stdout)["thread_id"]
            assert fork != thread  # the conversation went on in a fork; the original stays whole
            redo = codexr(ws, env, "redo", "--thread", fork, "--yes", "--json")
            assert redo.returncode == 0, show(redo)
            assert (ws / "c.txt").read_text() == "c\n"
            assert json.loads(redo.stdout)["thread_id"] == thread

            # a codexr in a network namespace of its own (as a sandboxed agent's would be) must not hand its prompt
            # to the daemon, which has the network: one line, exit 2, nothing runs
            netns = subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode == 0
            if official == "pinned" and netns:
                before = sidecar(home, thread)
                confined = codexr(ws, env, "exec", "--thread", thread, "sneaky", prefix=("unshare", "--net"))
                assert_one_line_error(confined, f"thread {thread} is open in Codex's app-server daemon",
                                      "runs with other rights than this codexr", "net namespace",
                                      "codex app-server daemon stop")
                assert "sneaky" not in json.dumps(model.requests), "the prompt reached the model"
                assert sidecar(home, thread) == before
        finally:
            stop_daemon(home, env, codex)


def test_a_control_socket_another_user_could_have_placed_is_refused(tmp_path: Path) -> None:
    """The link in CODEX_HOME must lead to this user's socket in a directory only this user can write."""
    home = tmp_path / "home"
    (home / "app-server-control").mkdir(parents=True)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(shared / "daemon.sock"))
    try:
        (home / "app-server-control" / "app-server-control.sock").symlink_to(shared / "daemon.sock")
        with pytest.raises(Unavailable, match="not a directory of yours with mode 700"):
            checked_socket(home.joinpath(*CONTROL))
        shared.chmod(0o700)
        assert checked_socket(home.joinpath(*CONTROL)) == str(shared / "daemon.sock")
        (home / "app-server-control" / "app-server-control.sock").unlink()
        (home / "app-server-control" / "app-server-control.sock").symlink_to(tmp_path / "gone.sock")
        with pytest.raises(Unavailable, match="not running"):
            checked_socket(home.joinpath(*CONTROL))
    finally:
        listener.close()


class Lines:
    """A JSON-RPC client over a child's stdio: the bridge codexr uses, or a plain `codex app-server`."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env={**os.environ, **env}, cwd=cwd, text=True)
        self.n = 0

    def call(self, method: str, params: dict) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.n += 1
        self.proc.stdin.write(json.dumps({"id": self.n, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, f"closed before answering {method}"
            msg = json.loads(line)
            if msg.get("id") == self.n and "method" not in msg:
                return msg

    def hold(self, thread: str) -> None:
        """Initialize and open `thread`: the process behind this client is its writer from now on."""
        self.call("initialize", {"clientInfo": {"name": "holder", "version": "0"},
                                 "capabilities": {"experimentalApi": True}})
        answer = self.call("thread/resume", {"threadId": thread, "excludeTurns": True})
        assert "result" in answer, answer

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def hold_in_daemon(opts: SessionOptions, env: dict[str, str], thread: str) -> Holder:
    """Codex's daemon started as a user would, `thread` opened in it by a client that then leaves (0.163.0 keeps
    the thread for minutes): the daemon, which holds it."""
    subprocess.run([str(pinned_path()), "app-server", "daemon", "start"], env={**os.environ, **env},
                   capture_output=True, timeout=60, check=True)
    socket_ = checked_socket(opts.codex_home.joinpath(*CONTROL))
    held = Lines([sys.executable, "-m", "app.codex.attach", socket_], env, opts.cwd)
    held.hold(thread)
    held.close()
    daemon = holder(opts.codex_home, thread)
    assert daemon is not None and daemon.daemon
    return daemon


def driver_thread(model: ScriptedModel, tmp_path: Path) -> tuple[SessionOptions, str]:
    """A workspace with one codexr thread (prompt "one" made a.txt)."""
    opts = session_options(model, tmp_path)
    first = codexr(opts.cwd, {**opts.env, "CODEXR_SERVER": "0"}, "exec", "one", "--json")
    assert first.returncode == 0, show(first)
    return opts, json.loads(first.stdout)["thread_id"]


def test_the_app_opens_a_thread_the_daemon_holds_through_the_daemon(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("one", [add_file("a.txt", "a\n"), message("One done.")])
    model.script("three", [add_file("c.txt", "c\n"), message("Three done.")])
    opts, thread = driver_thread(model, tmp_path)
    env = {**opts.env, "CODEXR_SERVER": "0"}
    try:
        daemon = hold_in_daemon(opts, env, thread)
        ev = Events()
        d = Driver(opts, ev, resume_last=True)
        try:
            assert d.start()
            loaded = ev.wait(ThreadLoaded)
            assert loaded.thread_id == thread and len([e for e in loaded.events if isinstance(e, UserPrompt)]) == 1
            assert any(isinstance(e, Notice) and f"daemon (pid {daemon.pid})" in e.text for e in ev.seen)
            d.submit("three")
            assert ev.wait(TurnFinished).status == "completed"
            assert (opts.cwd / "c.txt").read_text() == "c\n"
            assert [t["prompt"] for t in sidecar(opts.codex_home, thread)["turns"]] == ["one", "three"]
        finally:
            d.close()
    finally:
        stop_daemon(opts.codex_home, env)


def test_the_app_sends_nothing_when_the_thread_asked_for_cannot_be_opened(model: ScriptedModel,
                                                                          tmp_path: Path) -> None:
    """Another app-server (not Codex's daemon) has the thread: the app says which and refuses prompts until the user
    chooses (/new or /resume) — before, it sat on a new empty thread and the next prompt began another conversation."""
    model.script("one", [add_file("a.txt", "a\n"), message("One done.")])
    opts, thread = driver_thread(model, tmp_path)
    env = {**opts.env, "CODEXR_SERVER": "0"}
    other = Lines([str(pinned_path()), "app-server"], env, opts.cwd)
    try:
        other.hold(thread)
        ev = Events()
        d = Driver(opts, ev, resume_last=True)
        try:
            assert d.start()
            ev.wait(Ready)
            (said,) = [e.text for e in ev.seen if isinstance(e, Notice) and e.level == "error"]
            assert f"thread {thread} is open in another Codex app-server (pid {other.proc.pid} (codex app-server" \
                in said
            with pytest.raises(SessionError, match=f"not sent: thread {thread} could not be opened"):
                d.submit("lost prompt")
            assert not [e for e in ev.seen if isinstance(e, ThreadLoaded)]
            before = {p.name for p in (opts.codex_home / "file_snapshots" / "refs" / "threads").iterdir()}
            d.new_thread()  # the user's choice: now a prompt starts a new conversation
            d.submit("one")
            assert ev.wait(TurnFinished).status == "completed"
            after = {p.name for p in (opts.codex_home / "file_snapshots" / "refs" / "threads").iterdir()}
            assert len(after - before) == 1
        finally:
            d.close()
    finally:
        other.close()


def test_a_rewind_of_a_thread_another_app_server_holds_changes_nothing(model: ScriptedModel, tmp_path: Path) -> None:
    """`codexr rewind` loads the thread into Codex while it plans the files (issue 35: in series the resume was a
    third of a one-file rewind at 100,000 files); a thread another app-server has open still ends the rewind before
    it asks or changes anything: one line, the files as they were, no fork, nothing to redo."""
    model.script("one", [add_file("a.txt", "a\n"), message("One done.")])
    opts, thread = driver_thread(model, tmp_path)
    env = {**opts.env, "CODEXR_SERVER": "0"}
    def thread_ids() -> list[str]:
        return sorted(t["thread_id"] for t in json.loads(codexr(opts.cwd, env, "threads", "--json").stdout))

    threads = thread_ids()
    other = Lines([str(pinned_path()), "app-server"], env, opts.cwd)
    try:
        other.hold(thread)
        res = codexr(opts.cwd, env, "rewind", "--thread", thread, "--to", "1", "--yes")
        assert_one_line_error(res, f"thread {thread} is open in another Codex app-server")
    finally:
        other.close()
    assert (opts.cwd / "a.txt").read_text() == "a\n"
    assert thread_ids() == threads == [thread]  # no fork
    assert not sidecar(opts.codex_home, thread).get("redo")
    redo = codexr(opts.cwd, env, "redo", "--thread", thread, "--dry-run")
    assert redo.returncode != 0 and "nothing to redo" in redo.stderr, show(redo)


def test_a_redo_back_to_a_thread_another_app_server_holds_changes_nothing(model: ScriptedModel,
                                                                          tmp_path: Path) -> None:
    """`codexr redo` loads the thread it leaves and the one it returns to while it plans the files; the rewind's origin
    open in another app-server ends the redo before it asks or changes anything: one line, the files as the rewind
    left them, the redo still there to run once that app-server lets go."""
    model.script("one", [add_file("a.txt", "a\n"), message("One done.")])
    model.script("two", [add_file("b.txt", "b\n"), message("Two done.")])
    opts, thread = driver_thread(model, tmp_path)
    env = {**opts.env, "CODEXR_SERVER": "0"}
    assert codexr(opts.cwd, env, "exec", "--thread", thread, "two").returncode == 0
    back = codexr(opts.cwd, env, "rewind", "--thread", thread, "--to", "2", "--yes", "--json")
    assert back.returncode == 0, show(back)
    fork = json.loads(back.stdout)["thread_id"]
    assert fork != thread and not (opts.cwd / "b.txt").exists()
    other = Lines([str(pinned_path()), "app-server"], env, opts.cwd)
    try:
        other.hold(thread)
        res = codexr(opts.cwd, env, "redo", "--thread", fork, "--yes")
        assert_one_line_error(res, f"thread {thread} is open in another Codex app-server")
    finally:
        other.close()
    assert not (opts.cwd / "b.txt").exists() and (opts.cwd / "a.txt").read_text() == "a\n"
    redo = codexr(opts.cwd, env, "redo", "--thread", fork, "--yes")
    assert redo.returncode == 0, show(redo)
    assert (opts.cwd / "b.txt").read_text() == "b\n"


def test_codexr_codex_resumes_a_thread_the_daemon_holds_and_numbers_prompts_as_the_tui(tmux: Tmux,
                                                                                       tmp_path: Path) -> None:
    """`codex resume` ran a conversation-only prompt on a codexr thread and quit; `codexr codex resume PREFIX` at once
    works through the daemon (before: the TUI's resume failed "already has an active writer"), records the next
    prompt, and Esc Esc on it says "before prompt 3" as the TUI numbers it (codexr has snapshots for two)."""
    from test_proxy import recorded
    from test_proxy_tui import backtrack, send_prompt, start_codexr_codex

    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    with ScriptedModel() as model:
        model.script("held one", [add_file("a.txt", "a\n"), message("Held one done.")])
        model.script("held two", [add_file("b.txt", "b\n"), message("Held two done.")])
        model.script("held three", [add_file("c.txt", "c\n"), message("Held three done.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0"}
        try:
            thread, _held, rc_file = left_in_daemon(tmux, ws, env, ("held one", "held two", "Held two done."))
            tmux.kill()
            rc_file.unlink()

            start_codexr_codex(tmux, ws, env, rc_file, "resume", thread[:13])
            send_prompt(tmux, "held three", "Held three done.")
            assert (ws / "c.txt").exists()
            recorded(home, thread)  # the post-turn capture follows turn/completed
            turns = sidecar(home, thread)["turns"]
            assert [t["prompt"] for t in turns] == ["held one", "held three"] and turns[1].get("post"), turns
            backtrack(tmux, 0, 3)
            assert not (ws / "c.txt").exists() and (ws / "b.txt").exists() and (ws / "a.txt").exists()
        finally:
            stop_daemon(home, env)


def test_the_tui_told_what_to_do_when_its_resume_meets_the_daemon(model: ScriptedModel, tmp_path: Path) -> None:
    """Inside `codexr codex`, the TUI's own /resume of a thread the daemon holds cannot be served by codexr's
    app-server: Codex's "already has an active writer" becomes one line naming the daemon and the command that works
    through it."""
    from test_proxy_frames import initialize, peer

    model.script("one", [add_file("a.txt", "a\n"), message("One done.")])
    opts, thread = driver_thread(model, tmp_path)
    env = {**opts.env, "CODEXR_SERVER": "0"}
    try:
        daemon = hold_in_daemon(opts, env, thread)
        with peer([sys.executable, "-m", "app.cli", "app-server"], opts.cwd, {**os.environ, **env},
                  tmp_path / "err") as client:
            client.send(initialize(1))
            assert "result" in client.answer(1)
            client.send({"id": 2, "method": "thread/resume", "params": {"threadId": thread, "excludeTurns": True}})
            message_ = client.answer(2)["error"]["message"]
            client.close()
        assert message_ == (f"codexr: thread {thread} is open in Codex's app-server daemon (pid {daemon.pid}); quit "
                            f"and run `codexr codex resume {thread}`, which works through it (or `codex app-server "
                            "daemon stop`)")
    finally:
        stop_daemon(opts.codex_home, env)
