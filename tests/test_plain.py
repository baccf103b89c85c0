"""`codexr --plain` in a real terminal (pexpect pty) and on a pipe, against the real Codex and the scripted model."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pexpect
import pytest
from e2e_helpers import PipeSession, official_codex_exec, processes_running, wait_gone

from app.codex.scripted_model import (
    ScriptedModel,
    last_user_text,
    message,
    message_texts,
    responder,
    shell,
    tool_outputs,
    usage,
    user_texts,
    write_codex_home,
)

REPO = Path(__file__).resolve().parents[1]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\r")
TIMEOUT = 60


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    with ScriptedModel() as m:
        m.script("", [responder()])  # the demo's vocabulary: the prompts below say what the agent does
        yield m


def _env(model: ScriptedModel, home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), **write_codex_home(home, model.base_url),
            "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm"}


class Term:
    """codexr in a pty; `until` waits for a pattern and returns the plain text printed before it."""

    def __init__(self, model: ScriptedModel, tmp: Path, *args: str, files: dict[str, str] | None = None) -> None:
        self.ws = tmp / "ws"
        self.ws.mkdir()
        for rel, text in (files or {}).items():
            (self.ws / rel).write_text(text)
        self.child = pexpect.spawn(sys.executable, ["-m", "app.cli", *args], cwd=str(self.ws),
                                   env=_env(model, tmp / "home"), encoding="utf-8", timeout=TIMEOUT,
                                   dimensions=(50, 200))
        self.seen = ""

    def until(self, pattern: str) -> str:
        try:
            self.child.expect(pattern)
        except pexpect.TIMEOUT as exc:
            raise AssertionError(f"no {pattern!r}; the screen so far:\n{self.seen[-3000:]}"
                                 f"{ANSI.sub('', str(self.child.before))}") from exc
        text = ANSI.sub("", str(self.child.before)) + ANSI.sub("", str(self.child.after))
        self.seen += text
        return text

    def prompt(self, text: str, end: str = r"-- turn \w+") -> str:
        """Send a line at the prompt and return what it printed up to `end` and the next prompt."""
        self.child.sendline(text)
        out = self.until(end)
        return out + self.until("codexr>")

    def read(self, rel: str) -> str | None:
        p = self.ws / rel
        return p.read_text() if p.exists() else None

    def quit(self) -> None:
        self.child.sendcontrol("d")
        self.child.expect(pexpect.EOF)
        self.child.close()
        assert self.child.exitstatus == 0, self.seen[-2000:]


def test_prompts_stream_then_rewind_and_redo_bring_files_and_prompt_back(model: ScriptedModel, tmp_path: Path
                                                                         ) -> None:
    t = Term(model, tmp_path, "--plain", files={"old.txt": "by hand\n"})
    t.until("type a prompt")
    t.until("codexr>")
    out = t.prompt("create notes.md first idea")
    assert "codex: **Done.** Here is what I did:" in out and "created `notes.md`" in out  # the streamed answer
    assert "added     notes.md  +1 -0" in out
    assert t.read("notes.md") == "first idea\n"

    second = "edit notes.md second idea; create login.py LOGIN = True; delete old.txt"
    out = t.prompt(second)
    assert "3 files changed" in out
    assert "deleted   old.txt  +0 -1" in out and "modified  notes.md  +1 -0" in out
    assert (t.read("notes.md"), t.read("login.py"), t.read("old.txt")) == ("first idea\nsecond idea\n",
                                                                         "LOGIN = True\n", None)

    # /rewind with no number: the numbered list with each prompt's files, then the plan preview
    t.child.sendline("/rewind")
    listing = t.until("before which prompt")
    assert "1. " in listing and "create notes.md first idea" in listing and "notes.md added +1 -0" in listing
    assert "2. " in listing and "login.py added +1 -0" in listing and "old.txt deleted +0 -1" in listing
    t.child.sendline("2")
    plan = t.until(r"\[y/N")
    assert "rewind to prompt 2 (files and conversation)" in plan
    assert re.search(r"delete login\.py  \(.+\)", plan) and re.search(r"write  old\.txt  \(.+\)", plan)
    assert re.search(r"write  notes\.md  \(.+\)  \+0 -1", plan)
    assert t.read("login.py") == "LOGIN = True\n"  # nothing changed before the confirmation
    t.child.sendline("y")
    done = t.until("is back at the prompt")
    assert "rewound: 2 written, 1 deleted" in done
    assert "you (1): create notes.md first idea" in done and "you (2)" not in done  # the fork's transcript
    t.until("codexr>")
    t.until(re.escape(second))  # the rewound prompt is offered again, ready to edit
    assert (t.read("notes.md"), t.read("login.py"), t.read("old.txt")) == ("first idea\n", None, "by hand\n")

    (t.ws / "old.txt").write_text("edited after the rewind\n")
    t.child.sendcontrol("u")  # clear the offered prompt
    t.child.send("/red")
    t.until("Undo the last rewind")  # completion menu with the help text
    t.child.send("\t")
    t.until("/redo")
    t.child.sendline("")
    # issue 34: the agent deleted old.txt, the rewind put it back and the user edited it since: a conflict, asked
    preview = t.until(r"old\.txt: keep \[m\]ine, take the \[r\]edone or keep \[b\]oth")
    assert "conflict: old.txt — you and the agent both changed it, with no clean merge" in preview, preview
    assert "-edited after the rewind" in preview, preview
    t.child.sendline("r")  # take the redone state: the agent's deletion
    t.until(r"\[y/N")
    t.child.sendline("y")
    t.until("redone: ")
    t.until("codexr>")
    assert (t.read("notes.md"), t.read("login.py"), t.read("old.txt")) == ("first idea\nsecond idea\n",
                                                                         "LOGIN = True\n", None)
    t.quit()


def test_redo_typed_after_the_prompt_a_rewind_offers_is_the_command(model: ScriptedModel, tmp_path: Path) -> None:
    """A rewind offers its prompt again and says "/redo undoes this rewind": `/redo` typed at the end of that line,
    without clearing it, went to the agent as the end of the prompt, which ran it again. It is the command."""
    t = Term(model, tmp_path, "--plain")
    t.until("codexr>")
    t.prompt("create one.txt first")
    second = "create two.txt second"
    t.prompt(second)
    t.child.sendline("/rewind 2")
    t.until(r"\[y/N")
    t.child.sendline("y")
    t.until("is back at the prompt")
    t.until("codexr>")
    t.until(re.escape(second))  # offered again, the cursor at its end
    assert t.read("two.txt") is None
    asked = len(model.requests)
    t.child.sendline("/redo")
    t.until("redo: back to where the last rewind started")
    t.until(r"\[y/N")
    t.child.sendline("y")
    t.until("redone: ")
    t.until("codexr>")
    assert (t.read("one.txt"), t.read("two.txt")) == ("first\n", "second\n")
    assert not [r for r in model.requests[asked:] if "/redo" in json.dumps(r)], "the line went to the model"
    t.quit()


def test_approvals_cancel_decline_accept_and_ctrl_c_interrupts(model: ScriptedModel, tmp_path: Path) -> None:
    t = Term(model, tmp_path, "--plain", "-a", "untrusted", "-s", "read-only", files={"n.md": "one\n"})
    t.until("codexr>")
    t.child.sendline("edit n.md two")
    asked = t.until("approve\\?")
    assert "approval needed: the agent wants to change files" in asked and "update: n.md" in asked
    assert "     one\n    +two" in asked  # the diff it asks about
    t.child.sendline("c")
    out = t.until("codexr>")
    assert "-- turn interrupted" in out and "0 files changed" in out and "approval: cancel" in out
    assert t.read("n.md") == "one\n"

    t.child.sendline("run touch approved.txt")
    asked = t.until("approve\\?")
    assert "approval needed: the agent wants to run a command" in asked and "$ touch approved.txt" in asked
    t.child.sendline("n")
    out = t.until(r"-- turn \w+")
    t.until("codexr>")
    assert "approval: decline" in out
    assert t.read("approved.txt") is None

    t.child.sendline("run sleep 30")
    t.until("approve\\?")
    t.child.sendline("y")
    t.until("approval: accept")
    t.child.sendintr()  # Ctrl+C while the command runs
    out = t.until(r"-- turn \w+")
    assert "interrupting" in out and "-- turn interrupted" in out
    t.until("codexr>")
    t.child.sendline("/quit")
    t.child.expect(pexpect.EOF)


def test_what_is_typed_during_a_turn_starts_the_next_prompt(model: ScriptedModel, tmp_path: Path) -> None:
    """Keys typed while a turn runs were dropped; now the next prompt starts with them (not echoed meanwhile)."""
    t = Term(model, tmp_path, "--plain")
    t.until("codexr>")
    t.child.sendline("run sleep 2")
    t.until(r"\$ sleep 2")  # the turn is running
    t.child.send("create ahead.txt typed ahead")
    t.child.send("\x7f" * 6)  # Backspace edits what was typed: "...typed"
    t.child.send("\x1b[A")  # an arrow key is not text
    out = t.until(r"-- turn \w+")
    assert "typed" not in out  # nothing echoed over the turn's output
    t.until("codexr>")
    t.until("create ahead.txt typed")  # the next prompt starts with it, ready to edit or send
    t.child.send("\r")
    sent = t.until(r"-- turn \w+")
    t.until("codexr>")
    assert t.read("ahead.txt") is not None, sent
    t.quit()


def test_a_line_typed_with_enter_during_a_turn_runs_after_it_as_in_a_shell(model: ScriptedModel, tmp_path: Path
                                                                          ) -> None:
    """Issue 20: the Enter of a line typed during a turn was lost (the text only pre-filled the next prompt).
    Type-ahead runs as a shell runs it, in order; keys that arrive together are a paste, one prompt."""
    t = Term(model, tmp_path, "--plain")
    t.until("codexr>")
    # One line at a time: two lines sent back to back may reach codexr in one read on a loaded machine, and
    # keys that arrive together are a paste (one prompt, below), not type-ahead.
    t.child.sendline("run sleep 2")
    t.until(r"\$ sleep 2")  # the turn is running: nothing typed now is echoed
    t.child.send("/status\r")
    first = t.until(r"-- turn \w+")
    assert "/status" not in first
    ran = t.until("redo depth")  # /status ran without another Enter
    assert "codexr> /status" in ran, ran
    t.until("codexr>")
    t.child.sendline("run sleep 2")
    t.until(r"\$ sleep 2")
    t.child.send("create ahead.txt typed ahead\r")
    assert "typed ahead" not in t.until(r"-- turn \w+")
    t.until("codexr> create ahead.txt typed ahead")  # then the typed prompt runs, as the next turn
    t.until(r"-- turn \w+")
    t.until("codexr>")
    assert t.read("ahead.txt") == "typed ahead\n"
    t.child.sendline("run sleep 2")
    t.until(r"\$ sleep 2")
    t.child.send("first pasted line\rsecond pasted line\rthird")  # a paste (no bracketed paste): one prompt
    t.until(r"-- turn \w+")
    t.until("codexr>")
    t.until("third")  # all three lines wait at the prompt, none was sent
    t.child.sendcontrol("c")  # clears them
    t.child.sendline("/status")
    t.until("redo depth")
    t.until("codexr>")
    assert t.seen.count("-- turn completed") == 4, t.seen  # no pasted line ran as a prompt
    t.quit()


def test_an_interrupted_command_that_runs_on_is_shown_running_and_stop_ends_it(model: ScriptedModel, tmp_path: Path
                                                                             ) -> None:
    """Issue 20: Ctrl+C said the command was interrupted while it ran on (its file appeared seconds later).
    Now the block says it still runs, a line says how many do, /ps lists them and /stop ends them."""
    cmd = "sleep 30 && echo done > late-plain.txt"
    t = Term(model, tmp_path, "--plain")
    t.until("codexr>")
    t.child.sendline(f"run {cmd}")
    t.until(re.escape(f"$ {cmd}"))
    t.child.sendintr()
    out = t.until(r"-- turn \w+") + t.until("codexr>")
    assert "-- turn interrupted" in out and "[interrupted]" not in out, out
    assert "[still running in the background: /ps to view, /stop to close]" in out, out
    assert "1 background terminal running · /ps to view · /stop to close" in out, out
    assert processes_running(cmd)
    t.child.sendline("/rewind 1")  # the plan says the command runs on: what it writes afterwards is not undone
    t.until(re.escape(f"! 1 command the agent started still running in the background ({cmd}): what it writes "
                      "after this is not undone (/stop ends it first)"))
    t.until(r"\[y/N")
    t.child.sendline("n")
    t.until("no rewind: nothing changed")
    t.child.sendline("/ps")
    t.until("1 background terminal:")
    t.until(re.escape(cmd))
    t.child.sendline("/stop")
    t.until(re.escape(f"stopped 1 background terminal: {cmd}"))
    wait_gone(cmd)
    t.child.sendline("/ps")
    t.until("no background terminals")
    t.until("codexr>")
    t.quit()
    assert t.read("late-plain.txt") is None


def test_a_multi_line_paste_at_the_prompt_is_one_prompt(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20: a paste without bracketed paste became several prompts, one per line. An Enter with more keys
    right behind it (the same read from the terminal) is a newline of the paste; the last one sends it all."""
    t = Term(model, tmp_path, "--plain")
    t.until("codexr>")
    t.child.send("create pasted.txt line one\rline two\r")
    t.until(r"-- turn \w+")
    t.until("codexr>")
    t.child.sendline("/status")
    t.until("redo depth")
    t.until("codexr>")
    assert t.seen.count("-- turn ") == 1, t.seen  # one prompt, not one per line
    req = [r for r in model.model_requests if "create pasted.txt" in "".join(user_texts(r))][-1]
    assert "create pasted.txt line one\nline two" in user_texts(req), user_texts(req)
    t.quit()


def test_ctrl_c_on_a_pipe_interrupts_the_turn_and_codex_lives_on(model: ScriptedModel, tmp_path: Path) -> None:
    """A terminal's Ctrl+C signals its whole foreground process group: it used to kill the Codex app-server
    too (the turn died with it). Now codexr alone gets it and interrupts the turn; the next prompt just works."""
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--plain"], cwd=ws, env=_env(model, tmp_path / "home"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)  # its own group, as a terminal's foreground job is
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stdout or ()], daemon=True).start()
    seen: list[str] = []

    def until(text: str) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not any(text in ln for ln in seen):
            try:
                seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no {text!r}; output so far:\n{''.join(seen)}") from None

    assert proc.stdin is not None
    try:
        proc.stdin.write("run sleep 30\n")
        proc.stdin.flush()
        until("$ sleep 30")
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl+C in the terminal
        until("-- turn interrupted")
        proc.stdin.write("create after.txt still alive\n")
        proc.stdin.flush()
        until("-- turn completed")
        proc.stdin.close()
        assert proc.wait(TIMEOUT) == 0, "".join(seen)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (ws / "after.txt").read_text() == "still alive\n"
    assert "restarted" not in "".join(seen)


def test_a_pipe_is_read_line_by_line(model: ScriptedModel, tmp_path: Path) -> None:
    """Without a terminal the REPL reads plain lines: scripting by pipe works, each prompt in turn."""
    ws = tmp_path / "ws"
    ws.mkdir()
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain"], cwd=ws, env=_env(model, tmp_path / "home"),
                         input="create piped.txt from a pipe\n/diff\n", capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert (ws / "piped.txt").read_text() == "from a pipe\n"
    assert "-- turn completed" in res.stdout and "+from a pipe" in res.stdout  # the turn, then /diff
    assert res.stdout.rstrip().endswith("bye") and "Traceback" not in res.stderr
    # on exit, as the official TUI does: the command that continues the thread (run here: no -C)
    assert re.search(r"^To continue this thread, run codexr resume [0-9a-f-]{36}$", res.stdout, re.M), res.stdout


def test_resume_reads_prompts_from_a_pipe_too(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 18 §1.6: `--plain resume ID|--last` continues the thread in line mode on a pipe, as `--plain` does."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(model, tmp_path / "home")

    def plain(*args: str, text: str) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([sys.executable, "-m", "app.cli", "--plain", *args], cwd=ws, env=env, input=text,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and "Traceback" not in res.stderr, (args, res.stdout, res.stderr)
        return res

    first = plain(text="create one.txt from the first pipe\n")
    thread = re.search(r"^thread ([0-9a-f-]{36})$", first.stdout, re.M)
    assert thread is not None, first.stdout
    by_id = plain("resume", thread[1], text="create two.txt from the resumed pipe\n")
    assert f"== resumed: thread {thread[1]}, 1 prompt ==" in by_id.stdout, by_id.stdout
    last = plain("resume", "--last", text="create three.txt from the last pipe\n")
    assert f"== resumed: thread {thread[1]}, 2 prompts ==" in last.stdout, last.stdout
    assert [(ws / f).read_text() for f in ("one.txt", "two.txt", "three.txt")] == \
        ["from the first pipe\n", "from the resumed pipe\n", "from the last pipe\n"]
    final = [r for r in model.model_requests if "create three.txt" in "".join(user_texts(r))][-1]
    assert [t for t in user_texts(final) if t.startswith("create ")] == [  # one conversation, in order
        "create one.txt from the first pipe", "create two.txt from the resumed pipe",
        "create three.txt from the last pipe"]
    # A thread that cannot be resumed: the piped prompts go nowhere (not to a new thread), exit 2.
    requests = len(model.requests)
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain", "resume", "01a00000-0000-7000-8000-000000000000"],
                         cwd=ws, env=env, input="create four.txt from a lost pipe\n", capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 2 and "error: no thread was resumed" in res.stdout, (res.stdout, res.stderr)
    assert not (ws / "four.txt").exists() and len(model.requests) == requests
    rec = subprocess.run([sys.executable, "-m", "app.cli", "--plain", "--record", str(tmp_path / "r.log"), "resume"],
                         cwd=ws, env=env, input="", capture_output=True, text=True, timeout=120)
    assert rec.returncode == 2 and rec.stderr.startswith("codexr: error: --record works with the app only"), rec


def test_demo_on_a_terminal_is_interactive_with_its_vocabulary(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "CODEX_HOME": str(tmp_path / "unused-home")}
    child = pexpect.spawn(sys.executable, ["-m", "app.cli", "demo", "--plain", "--dir", str(tmp_path / "demo")],
                          env=env, encoding="utf-8", timeout=TIMEOUT, dimensions=(50, 200))
    child.expect("codexr>")
    banner = ANSI.sub("", str(child.before))
    assert "create NAME" in banner and "/rewind" in banner and "/redo" in banner
    child.sendline("list")
    child.expect(r"-- turn \w+")
    assert "README.md" in ANSI.sub("", str(child.before))  # ls ran in the scratch workspace
    child.expect("codexr>")
    child.sendline("/help")  # the words are gone from the screen after a prompt: /help still has them
    child.expect("/stop")  # the command list: /help runs
    assert child.expect(["create NAME", "codexr>"]) == 0, "the demo's words are not in /help"
    child.expect("codexr>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (tmp_path / "demo" / "workspace" / "src" / "app.py").exists()
    assert not (tmp_path / "unused-home").exists()  # the demo never touches the user's CODEX_HOME


def test_history_numbers_hits_of_every_workspace_then_resumes_one_here_or_prints_another(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.script("plh-far", [message("far answer")])
    far = tmp_path / "far"
    far.mkdir()
    far_id = official_codex_exec(write_codex_home(tmp_path / "home", model.base_url), far, "plh-far the Zebra")
    t = Term(model, tmp_path, "--plain")
    t.until("codexr>")
    t.prompt("create a.txt zebra one")
    t.child.sendline("/new")
    t.until("codexr>")
    t.prompt("create b.txt zebra two")

    def hits() -> dict[str, str]:
        """Search, and map each hit's prompt text (or workspace) to its number."""
        t.child.sendline("/history zebra")
        listing = t.until("open which hit")
        assert "3 hits in 3 of 3 sessions" in listing, listing
        rows = re.findall(r"^  (\d+)\. ([0-9a-f-]{36})  #1  .*\[(here|other)\] (.+)\n\s+user: (.+)$", listing, re.M)
        assert len(rows) == 3, listing
        assert {r[1] for r in rows if r[2] == "other"} == {far_id} and {r[3] for r in rows} == {str(far), str(t.ws)}
        assert "user: plh-far the **Zebra**" in listing  # the match marked without colour
        return {r[4].strip(): r[0] for r in rows}

    numbers = hits()
    t.child.sendline(numbers["create a.txt **zebra** one"])
    loaded = t.until("== end of thread")
    resumed = re.search(r"== resumed from history: the hit is in prompt 1: thread ([0-9a-f-]{36}), 1 prompt ==", loaded)
    assert resumed is not None and "create a.txt zebra one" in loaded, loaded
    assert "create b.txt" not in loaded
    t.until("codexr>")
    numbers = hits()
    t.child.sendline(numbers["plh-far the **Zebra**"])
    shown = t.until(f"resume {far_id}")
    assert "> plh-far the Zebra" in shown and "far answer" in shown
    assert f"read-only: this conversation belongs to another workspace ({far}); to continue it there: codexr -C {far}" \
        in shown
    t.until("codexr>")
    t.child.sendline("/status")
    status = t.until("redo depth")  # still the resumed thread: reading another workspace's loads nothing
    assert f"thread: {resumed.group(1)}" in status and resumed.group(1) != far_id, status
    t.until("codexr>")
    t.quit()
    assert not (far / "a.txt").exists() and (t.ws / "b.txt").exists()


def test_commands_are_shown_as_the_shell_ran_them(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §5: Codex reports `/bin/bash -c "printf '%s\\\\n' …"`; line mode shows the command the shell
    ran (`printf '%s\\n'`), unquoted once and never escaped again, live and when the thread is resumed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(model, tmp_path / "home")
    ran = "printf '%s\\n' \"$HOME\" 'it''s' > out.txt"
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain"], cwd=ws, env=env, input=f"run {ran}\n",
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (ws / "out.txt").read_text() == f"{os.environ.get('HOME', '')}\nits\n"  # what the shell really ran
    assert f"$ {ran}\n" in res.stdout, res.stdout
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain", "resume", "--last"], cwd=ws, env=env,
                         input="", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert f"$ {ran}\n" in res.stdout, res.stdout  # the stored turn, read back from Codex


def test_yolo_before_the_app_is_its_sandbox_and_approval(model: ScriptedModel, tmp_path: Path) -> None:
    """`codex --yolo` (`--dangerously-bypass-approvals-and-sandbox`) was "unrecognized" before codexr's app and line
    mode: it is `-s danger-full-access -a never` there too, whatever config.toml says."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**_env(model, tmp_path / "home"), **write_codex_home(tmp_path / "home", model.base_url,
                                                                 approval_policy="on-request",
                                                                 sandbox_mode="workspace-write")}
    model.script("yolo line mode", [message("yolo done")])
    res = subprocess.run([sys.executable, "-m", "app.cli", "--yolo", "--plain", "yolo line mode"], cwd=ws, env=env,
                         input="", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "yolo done" in res.stdout, (res.stdout, res.stderr)
    sent = [r for r in model.model_requests if last_user_text(r) == "yolo line mode"]
    dev = "\n".join(message_texts(sent[0], "developer"))
    assert "`sandbox_mode` is `danger-full-access`" in dev and "Approval policy is currently never" in dev, dev


def test_resume_takes_a_first_prompt_as_codex_resume_does(model: ScriptedModel, tmp_path: Path) -> None:
    """`codex resume ID PROMPT` / `codex resume --last PROMPT` send PROMPT on the resumed thread; codexr refused both
    ("unrecognized arguments" / "not allowed with argument --last"). An image that cannot be read is one line."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(model, tmp_path / "home")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ws, env=env, input="",
                              capture_output=True, text=True, timeout=120)

    first = run("--plain", "create one.txt first")
    thread = re.search(r"^thread ([0-9a-f-]{36})$", first.stdout, re.M)
    assert first.returncode == 0 and thread is not None, (first.stdout, first.stderr)
    by_id = run("--plain", "resume", thread[1][:13], "create two.txt second")
    assert by_id.returncode == 0 and "Traceback" not in by_id.stderr, (by_id.stdout, by_id.stderr)
    assert (ws / "two.txt").exists() and f"== resumed: thread {thread[1]}, 1 prompt ==" in by_id.stdout, by_id.stdout
    by_last = run("--plain", "resume", "--last", "create", "three.txt", "third")
    assert by_last.returncode == 0 and (ws / "three.txt").exists(), (by_last.stdout, by_last.stderr)
    assert f"== resumed: thread {thread[1]}, 2 prompts ==" in by_last.stdout, by_last.stdout
    bad = run("-i", str(tmp_path / "missing.png"), "--plain", "resume", "--last", "look")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "missing.png" in bad.stderr, bad.stderr


def test_resume_last_is_the_thread_the_redo_returned_to_not_the_fork(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20: after rewind → /redo → quit, `resume --last` (and `exec --last`) reopened the abandoned fork,
    the thread created last; "last" is the thread the user last used."""
    ws = tmp_path / "ws"
    ws.mkdir()
    env = _env(model, tmp_path / "home")

    def run(*args: str, text: str) -> str:
        res = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ws, env=env, input=text,
                             capture_output=True, text=True, timeout=120)
        assert res.returncode == 0 and "Traceback" not in res.stderr, (args, res.stdout, res.stderr)
        return res.stdout

    first = run("--plain", text="create one.txt first\ncreate two.txt second\n/rewind 2\ny\n/redo\ny\n")
    origin = re.search(r"^thread ([0-9a-f-]{36})$", first, re.M)
    assert origin is not None and "redone: " in first, first
    assert f"== back on the thread the rewind left: thread {origin[1]}" in first, first
    again = run("--plain", "resume", "--last", text="/status\n")
    assert f"== resumed: thread {origin[1]}, 2 prompts ==" in again, again
    doc = json.loads(run("exec", "--last", "--json", "create three.txt third", text=""))
    assert doc["thread_id"] == origin[1], doc


def test_rewind_and_redo_warn_and_ask_while_another_session_is_live(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20: with another live codexr session in the workspace, /rewind and /redo deleted its new file with
    no word in the plan. Now the plan names the session, the question says so, and (issue 34) the other session's
    files are kept: they are not this thread's agent's work."""
    t = Term(model, tmp_path, "--plain")
    t.until("codexr>")
    t.prompt("create one.txt first")
    t.prompt("create two.txt second")
    other = PipeSession(t.ws, _env(model, tmp_path / "home"))
    try:
        other.until("type a prompt")
        other.prompt("create other.txt by the other session")
        assert t.read("other.txt") == "by the other session\n"
        t.child.sendline("/rewind 2")
        plan = t.until(r"\[y/N")
        assert "! another codexr session is live in this workspace (pid " in plan, plan
        assert "leave  other.txt  (kept: changed by you after prompt 2's turn)" in plan, plan
        assert "another codexr session is live in this workspace: rewind anyway? [y/N" in plan, plan
        t.child.sendline("n")
        t.until("no rewind: nothing changed")
        t.until("codexr>")
        assert t.read("other.txt") == "by the other session\n" and t.read("two.txt") is not None
        t.child.sendline("/rewind 2")
        t.until(r"\[y/N")
        t.child.sendline("y")
        done = t.until("is back at the prompt")
        assert "rewound: 0 written, 1 deleted, 1 left alone; kept as you left it: other.txt" in done, done
        t.until("codexr>")
        assert t.read("other.txt") == "by the other session\n" and t.read("two.txt") is None
        other.prompt("create later.txt made after the rewind")
        t.child.sendcontrol("u")  # clear the offered prompt
        t.child.sendline("/redo")
        plan = t.until(r"\[y/N")
        assert "! another codexr session is live in this workspace (pid " in plan, plan
        assert "leave  later.txt  (kept: changed by you since the rewind)" in plan, plan
        assert "redo anyway? [y/N" in plan, plan
        t.child.sendline("y")
        t.until("redone: ")
        done = t.until("codexr>")
        assert "; kept as you left it: later.txt" in done, done
        assert t.read("later.txt") == "made after the rewind\n" and t.read("two.txt") == "second\n"
    finally:
        other.close()
    t.quit()


def test_an_unknown_command_names_the_nearest_and_every_command(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §3: an unknown slash command says which exist (and which one was probably meant)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain"], cwd=ws, env=_env(model, tmp_path / "home"),
                         input="/rewnid 2\n/frobnicate\n", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("unknown command")]
    assert len(lines) == 2, res.stdout
    assert lines[0].startswith("unknown command /rewnid: did you mean /rewind?"), lines
    assert "did you mean" not in lines[1]
    for line in lines:
        assert all(c in line.split() for c in ("/rewind", "/redo", "/ps", "/stop", "/help", "/quit")), line


def test_history_shows_a_prompt_once_when_it_matches_twice(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §5: `/history` lists a message once however often it matches (the matches marked in it)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain"], cwd=ws, env=_env(model, tmp_path / "home"),
                         input="create fruit.txt kumquat and kumquat\n/history kumquat\n\n", capture_output=True,
                         text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    user_hits = [ln for ln in res.stdout.splitlines() if ln.strip().startswith("user:")]
    assert len(user_hits) == 1, res.stdout
    assert user_hits[0].count("**kumquat**") == 2, user_hits


def test_permissions_and_effort_apply_from_the_next_prompt_and_status_says_context_left(
        model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §3 in line mode: `/permissions` lists the presets and `/permissions NAME` sets one; `/model NAME
    EFFORT` sets the effort; both reach Codex with the next prompt; `/status` says how much context is left."""
    model.script("plain-settings", [shell("touch blocked.txt"), usage(130_000), message("plain settings done")])
    ws = tmp_path / "ws"
    ws.mkdir()
    lines = ["/status", "/permissions", "/permissions bogus", "/model gpt-5.5 ultra", "/permissions read-only",
             "/permissions full-access", "n", "/model gpt-5.5 high", "plain-settings go", "/status"]
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain"], cwd=ws, env=_env(model, tmp_path / "home"),
                         input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    before, after = res.stdout.split("plain settings done", 1)
    assert "context window: unknown until Codex answers a prompt of this thread" in before
    presets = [ln.split()[:2] for ln in before.splitlines() if ln.strip().startswith(("read-only", "auto", "full-",
                                                                                      "* "))]
    assert presets == [["read-only", "Read"], ["auto", "Default:"], ["*", "full-access"]], before
    assert "error: no permissions preset 'bogus': the presets are read-only, auto, full-access" in before
    assert "error: gpt-5.5 has no reasoning effort 'ultra'; it offers: low, medium, high, xhigh" in before
    assert "Permissions updated to Read Only (approval on-request, sandbox read-only) from the next prompt on" in before
    assert "model: gpt-5.5, reasoning high from the next prompt on" in before
    assert "Enable Full Access? Codex will run without sandboxing" in before  # asked; "n" kept Read Only
    assert "no change: the permissions stay as they were" in before
    for line in ("model: gpt-5.5, reasoning high", "approval: on-request", "sandbox: read-only",
                 "context window: 52% left (130K used / 258K)"):
        assert line in after, after
    assert not (ws / "blocked.txt").exists()  # what Codex did: the sandbox refused the write
    turn = [r for r in model.model_requests if "plain-settings" in last_user_text(r)]
    assert {r["reasoning"]["effort"] for r in turn} == {"high"}
    assert "Read-only file system" in "".join(str(o.get("output")) for r in turn for o in tool_outputs(r))


def test_ctrl_c_while_a_rewind_restores_3000_files_rolls_them_back(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 36: line mode answered Ctrl+C during a rewind's restore with "this step cannot be interrupted" and went
    on; now it stops the restore as the app and the CLI do: the files it changed go back, one line says so."""
    files = 3000
    model.script("plain-stop-many", [shell(f"for i in $(seq -w 0 {files - 1}); do echo after $i > f$i.txt; done"),
                                     message("rewrote them all")])
    t = Term(model, tmp_path, "--plain", files={f"f{i:04}.txt": f"before {i}\n" for i in range(files)})
    subprocess.run("git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm base", shell=True,
                   cwd=t.ws, check=True)
    t.until("codexr>")
    t.prompt("plain-stop-many please")
    assert t.read("f2999.txt") == "after 2999\n"
    before = {p.name: p.read_bytes() for p in t.ws.iterdir() if p.is_file()}
    t.child.sendline("/rewind 1")
    t.until(r"\[y/N")
    t.child.sendline("y")
    first = [t.ws / f"f{i:04}.txt" for i in range(64)]  # the restore's first writes (in path order)
    deadline = time.monotonic() + TIMEOUT  # a bound on waiting, not a timing assertion
    while not any(p.read_text() == f"before {i}\n" for i, p in enumerate(first)):
        assert time.monotonic() < deadline, "the restore did not begin"
        time.sleep(0.01)
    t.child.sendcontrol("c")
    out = t.until(re.escape("Ctrl+C: the rewind was rolled back: files as before"))
    assert "stopping the rewind: the files it changed go back as they were" in out, out
    assert "cannot be interrupted" not in out, out
    t.until("codexr>")
    assert {p.name: p.read_bytes() for p in t.ws.iterdir() if p.is_file()} == before
    t.quit()
