"""`codexr` in a real terminal: tmux runs the console entry against the scripted model; keys go in with
`send-keys`, the screen comes back with `capture-pane`, and the workspace on disk proves the rewind and the redo.

Waiting is polling with a deadline (a bound on waiting, never a timing assertion); on failure the pane is dumped.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fs_helpers import tree
from probes import MODULE_IMPORT_PROBE

from app.codex.scripted_model import (
    ScriptedModel,
    add_file,
    delete_file,
    message,
    shell,
    update_file,
    usage,
    write_codex_home,
)

REPO = Path(__file__).parents[1]
WIDTH, HEIGHT = 120, 40
WAIT_S = 90.0  # a slow 2-core CI box starting Python, Textual and Codex


class Tmux:
    """One private tmux server (its own socket) with one fixed-size window running a command."""

    def __init__(self, tmp: Path) -> None:
        self.socket = f"codexr-test-{uuid.uuid4().hex[:12]}"
        self.tmp = tmp

        self.conf = tmp / "tmux.conf"  # no user config (written by start, with the window's size)

    def tmux(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["tmux", "-L", self.socket, "-f", str(self.conf), *args], capture_output=True,
                              text=True, check=check, timeout=30)

    def start(self, command: str, width: int = WIDTH, height: int = HEIGHT) -> None:
        # the size from the start: a detached session would otherwise begin at 80x24 and resize, which the app
        # may miss while Python is still starting
        self.conf.write_text(f"set -g default-size {width}x{height}\nset -g default-shell /bin/sh\n")
        self.tmux("new-session", "-d", "-s", "codexr", "-x", str(width), "-y", str(height), command)

    def resize(self, width: int, height: int) -> None:
        """Resize the window, as a user dragging the terminal's corner."""
        self.tmux("resize-window", "-t", "codexr", "-x", str(width), "-y", str(height))

    def kill(self) -> None:
        """Stop the tmux server, and wait until it is gone: kill-server returns while it still exits. The next
        `start` gets a socket of its own: a new-session on the old one could still meet the dying server ("server
        exited unexpectedly", twice in full runs, the second after waiting here for list-sessions to fail)."""
        self.tmux("kill-server", check=False)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.tmux("list-sessions", check=False).returncode == 0:
            time.sleep(0.05)
        self.socket = f"codexr-test-{uuid.uuid4().hex[:12]}"

    def screen(self) -> str:
        res = self.tmux("capture-pane", "-p", "-t", "codexr", check=False)
        return res.stdout if res.returncode == 0 else f"(no pane: {res.stderr.strip()})"

    def keys(self, *keys: str) -> None:
        """Send tmux key names (Enter, Escape, C-c) one call each, as separate keystrokes."""
        for k in keys:
            self.tmux("send-keys", "-t", "codexr", k)

    def type(self, text: str) -> None:
        """Type literal text (no key-name lookup)."""
        self.tmux("send-keys", "-t", "codexr", "-l", text)

    def wait(self, cond: Callable[[str], object], what: str, timeout: float = WAIT_S) -> str:
        """Poll the pane until `cond(screen)` holds; fail with the pane on screen otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.screen()
            if cond(text):
                return text
            if time.monotonic() > deadline:
                size = self.tmux("display-message", "-p", "-t", "codexr", "#{window_width}x#{window_height}",
                                 check=False).stdout.strip()
                raise AssertionError(f"gave up waiting for {what}; the pane ({size}) shows:\n{text}")
            time.sleep(0.2)

    def wait_for(self, needle: str, timeout: float = WAIT_S) -> str:
        return self.wait(lambda s: needle in s, repr(needle), timeout)


def status_thread(screen: str) -> str:
    """The short thread id on the status bar (the line with the idle/working marker)."""
    line = next(ln for ln in reversed(screen.splitlines()) if "○ idle" in ln or "● working" in ln)
    return line.split("thread ", 1)[1].split()[0]


def composer_text(screen: str) -> str:
    """What the composer box (the last ╭…╰ box above the status bar) holds, its lines joined by newlines."""
    lines = screen.splitlines()
    top = max(i for i, ln in enumerate(lines) if ln.startswith("╭"))
    bottom = next(i for i in range(top, len(lines)) if lines[i].startswith("╰"))
    return "\n".join(ln.strip("│ ") for ln in lines[top + 1:bottom])


def framed(screen: str) -> bool:
    """Is the composer box drawn whole? A capture can fall between two writes of one frame (seen once in CI under
    load: the status bar and the transcript drawn, the box's top border not yet): a wait whose screen is parsed
    for the box or what is above it asks for this too."""
    lines = screen.splitlines()
    top = [i for i, ln in enumerate(lines) if ln.startswith("╭")]
    return bool(top) and any(ln.startswith("╰") for ln in lines[top[-1]:])


def transcript_text(screen: str) -> str:
    """The screen above the composer box."""
    lines = screen.splitlines()
    return "\n".join(lines[:max(i for i, ln in enumerate(lines) if ln.startswith("╭"))])


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is not installed (the end-to-end terminal test needs it)")
    t = Tmux(tmp_path)
    yield t
    t.kill()


def test_rewind_and_redo_in_a_real_terminal(tmux: Tmux, tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "app.py").write_text("def greet():\n    return 'hi'\n")
    (ws / "README.md").write_text("# tmux story\n")
    rc_file = tmp_path / "rc"
    with ScriptedModel() as model:
        model.script("tmux-one", [add_file("tests/test_app.py", "from src.app import greet\n"),
                                  update_file("src/app.py", "    return 'hi'", "    return 'hello'"),
                                  message("Added the first test.")])
        model.script("tmux-two", [update_file("src/app.py", "    return 'hello'", "    return 'HELLO'"),
                                  delete_file("README.md"), shell("echo generated > docs.txt"),
                                  message("Shouting now, docs regenerated.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color"}
        before_one = tree(ws)
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        # without COLUMNS/LINES: a shell may export them, and they would pin the app's size (shutil reads them first)
        codexr = f"env -u COLUMNS -u LINES {assign} {shlex.quote(sys.executable)} -m app.cli -C {shlex.quote(str(ws))}"
        tmux.start(f"cd {shlex.quote(str(REPO))} && {codexr}; echo $? > {shlex.quote(str(rc_file))}")
        tmux.tmux("set-option", "-g", "remain-on-exit", "on")  # the pane stays to be read after codexr exits

        tmux.wait_for("○ idle")  # Codex started
        tmux.type("tmux-one add a test")
        tmux.keys("Enter")
        tmux.wait(lambda s: "Added the first test." in s and "○ idle" in s, "the answer to prompt 1")
        assert (ws / "tests" / "test_app.py").exists()
        tmux.type("tmux-two make it shout")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "Shouting now, docs regenerated." in s and "○ idle" in s and framed(s),
                          "the answer to prompt 2")
        after_two = tree(ws)
        assert (ws / "docs.txt").read_text() == "generated\n" and not (ws / "README.md").exists()
        assert composer_text(shown) == "Ask Codex…  (Enter sends · Ctrl+J newline · / commands · @ paths)"
        thread = status_thread(shown)

        tmux.keys("Escape", "Escape")  # on the empty composer: the rewind picker, on the last prompt
        tmux.wait(lambda s: "Rewind — choose the prompt" in s and "prompt 2 · files and conversation" in s,
                  "the picker with the plan of prompt 2")
        tmux.keys("Up")
        plan = ("prompt 1 · files and conversation", "delete: tests/test_app.py", "delete: docs.txt",
                "write: README.md")
        tmux.wait(lambda s: all(n in s for n in plan), "the plan of prompt 1")  # the whole frame drawn
        tmux.keys("Enter")
        # the notice, the status bar of the fork (its redo depth) and the prompt back in the composer: each is
        # drawn when it arrives, and a capture can come between two of them
        shown = tmux.wait(lambda s: "rewound to prompt 1" in s and "○ idle" in s and "↷ redo 1" in s and framed(s)
                          and "conversation forked before prompt 1" in s
                          and composer_text(s) == "tmux-one add a test", "the rewind")
        assert tree(ws) == before_one  # every file as before prompt 1, the shell-made docs.txt included
        fork = status_thread(shown)
        assert fork != thread  # the status bar shows the new thread
        above = transcript_text(shown)
        assert f"conversation forked before prompt 1 (thread {fork})" in above
        assert "▶ prompt" not in above and "Added the first test." not in above  # the fork has no turn yet
        assert composer_text(shown) == "tmux-one add a test"  # the prompt, ready to edit and resend

        tmux.keys("C-c")  # clears the composer
        tmux.wait(lambda s: framed(s) and composer_text(s).startswith("Ask Codex…"), "an empty composer")
        tmux.type("/redo")
        tmux.keys("Enter")
        tmux.wait(lambda s: "Redo — undo the last rewind" in s and "no conflicts" in s, "the redo dialog's plan")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "redo: back where the rewind started" in s and "○ idle" in s and framed(s)
                          and "↷ redo" not in s and "Shouting now" in s, "the redo and the status of the original")
        assert tree(ws) == after_two
        assert status_thread(shown) == thread
        above = transcript_text(shown)  # the original thread, redrawn from Codex's own turns
        assert "Added the first test." in above and "▶ prompt 2" in above and "Shouting now" in above

        tmux.keys("C-c", "C-c")  # twice on an idle, empty composer: quit
        tmux.wait(lambda _s: rc_file.exists() and rc_file.read_text().strip() != "", "codexr to exit", timeout=30)
        # as the official TUI does: the line that continues the thread (run from elsewhere: with its -C)
        line = rf"To continue this thread, run codexr -C {re.escape(str(ws))} resume ([0-9a-f-]{{36}})"
        # the pane's history too, wrapped lines joined (-J): the app's screen is gone, the line scrolled up
        after = tmux.tmux("capture-pane", "-p", "-J", "-S", "-100", "-t", "codexr", check=False).stdout
        found = re.search(line, after)
        assert found and found.group(1).endswith(thread.lstrip("…")), (thread, after[:300])  # bar: "…TAIL"
    assert rc_file.read_text().strip() == "0"


def test_keys_typed_under_the_first_frame_reach_the_composer_and_the_terminal_comes_back(
        tmux: Tmux, tmp_path: Path) -> None:
    """`codexr` draws its first frame before Textual has loaded (app/tui/splash.py): what the user types then shows
    in its composer at once (issue 20 §2), is neither echoed elsewhere nor lost nor doubled when the live app takes
    over, and quitting gives the shell its terminal settings back. The app's modules, and the SDK's behind the first
    frame, are imported without the collector's passes (~15 and ~50 ms), which is on again for the session (a
    probe, tests/probes.py)."""
    ws, home, probe, out = tmp_path / "ws", tmp_path / "home", tmp_path / "probe", tmp_path / "out"
    for d in (ws, home, probe, out):
        d.mkdir()
    (probe / "sitecustomize.py").write_text(MODULE_IMPORT_PROBE)
    env = f"env -u COLUMNS -u LINES CODEX_HOME={shlex.quote(str(home))} PYTHONPATH={shlex.quote(f'{probe}:{REPO}')} " \
          f"PROBE_OUT={shlex.quote(str(out))} PROBE_MODULE=/app/tui/app.py,/app/session.py TERM=xterm-256color"
    tmux.start(f"cd {shlex.quote(str(ws))} && {env} {shlex.quote(sys.executable)} -m app.cli; stty -a; "
               "echo SHELL-BACK; sleep 60")
    deadline = time.monotonic() + WAIT_S
    while "Ask Codex" not in (first := tmux.screen()):  # polled tightly: the splash is up for ~0.3-0.6 s
        assert time.monotonic() < deadline, f"no first frame; the pane shows:\n{first}"
        time.sleep(0.01)
    assert "palette" not in first, first  # the splash: the live app's footer is not drawn yet
    typed = "typed under the splash"
    tmux.type(typed)
    right_after = tmux.screen()
    if "palette" not in right_after:  # still the splash (nearly always): its composer, and only it, shows the keys
        assert right_after.count(typed) <= 1 and (typed not in right_after or composer_text(right_after) == typed), \
            right_after
    shown = tmux.wait(lambda s: typed in s and "palette" in s and framed(s), "the live app showing what was typed")
    assert composer_text(shown) == typed and shown.count(typed) == 1
    tmux.keys("C-q")
    after = tmux.wait_for("SHELL-BACK")
    settings = after.split()
    assert "echo" in settings and "icrnl" in settings and "icanon" in settings, after
    assert "-echo" not in settings and "-icrnl" not in settings, after
    (report,) = [p.read_text().split(" ", 2) for p in out.glob("*.txt")]
    assert report[:2] == ["0", "1"], report  # no pass while the app's and the SDK's modules were imported


def test_the_demo_on_a_terminal_opens_the_app_and_takes_a_prompt_typed_under_its_first_frame(
        tmux: Tmux, tmp_path: Path) -> None:
    """`python3 bootstrap.py demo` on a terminal: the app on a scratch workspace against the scripted model; a
    prompt typed and sent (Enter) before the app is live runs once Codex has started."""
    demo = tmp_path / "demo"
    env = f"env -u COLUMNS -u LINES CODEX_HOME={shlex.quote(str(tmp_path / 'unused-home'))} " \
          f"PYTHONPATH={shlex.quote(str(REPO))} TERM=xterm-256color"
    tmux.start(f"cd {shlex.quote(str(tmp_path))} && {env} {shlex.quote(sys.executable)} -m app.cli demo "
               f"--dir {shlex.quote(str(demo))}; echo DEMO-OVER; sleep 60")
    tmux.wait_for("Ask Codex", timeout=WAIT_S)
    tmux.type("create hello.txt typed before the app was live")
    tmux.keys("Enter")
    shown = tmux.wait(lambda s: "turn completed" in s and "○ idle" in s, "the demo's answer")
    assert "created hello.txt" in shown and "A hello.txt +1 -0" in shown
    assert (demo / "workspace" / "hello.txt").read_text() == "typed before the app was live\n"
    tmux.keys("C-q")
    tmux.wait_for("DEMO-OVER")
    assert not (tmp_path / "unused-home").exists()  # the demo never touches the user's CODEX_HOME


def test_the_demo_s_exit_line_says_its_scratch_directory_is_gone_and_how_to_keep_one(
        tmux: Tmux, tmp_path: Path) -> None:
    """Issue 36 §1: `python3 bootstrap.py demo`, a prompt, Ctrl+Q said "To continue this thread, run codexr -C
    <scratch>/workspace resume …" while the demo deleted that directory and its CODEX_HOME on the way out."""
    scratch = tmp_path / "tmp"  # where the demo makes its scratch directory (TMPDIR)
    scratch.mkdir()
    env = f"env -u COLUMNS -u LINES CODEX_HOME={shlex.quote(str(tmp_path / 'unused-home'))} " \
          f"PYTHONPATH={shlex.quote(str(REPO))} TMPDIR={shlex.quote(str(scratch))} TERM=xterm-256color"
    tmux.start(f"cd {shlex.quote(str(tmp_path))} && {env} {shlex.quote(sys.executable)} -m app.cli demo; "
               "echo DEMO-OVER; sleep 60")
    tmux.wait_for("Ask Codex", timeout=WAIT_S)
    (made,) = scratch.glob("codexr-demo-*")
    tmux.type("create hello.txt one prompt")
    tmux.keys("Enter")
    tmux.wait(lambda s: "turn completed" in s and "○ idle" in s, "the demo's answer")
    tmux.keys("C-q")
    tmux.wait_for("DEMO-OVER")
    joined = tmux.tmux("capture-pane", "-p", "-J", "-t", "codexr").stdout  # wrapped lines joined back
    assert not made.exists() and list(scratch.glob("codexr-demo-*")) == [], joined
    assert "To continue this thread" not in joined and "resume" not in joined, joined
    said = next((ln for ln in joined.splitlines() if "removed now" in ln), "")
    assert str(made) in said and "codexr demo --serve --dir DIR" in said, joined


def test_words_on_screen_commands_approvals_and_fork_labels(tmux: Tmux, tmp_path: Path) -> None:
    """Issue 20 §5 in a real terminal: a command waiting for approval says so (not `… running`) and is shown as
    the shell runs it (`printf '%s\\n'`, not `'%s\\\\n'`); a conversation-only rewind to prompt 2 makes a fork
    that /threads labels with the prompt it holds and "fork of …, rewound before prompt 2"."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    ran = "printf '%s\\n' hi > p.txt"
    with ScriptedModel() as model:
        model.script("tw-one", [shell(ran), message("Printed it.")])
        model.script("tw-two", [message("Second answer.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color"}
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        codexr = (f"env -u COLUMNS -u LINES {assign} {shlex.quote(sys.executable)} -m app.cli -a untrusted "
                  f"-s workspace-write -C {shlex.quote(str(ws))}")
        tmux.start(f"cd {shlex.quote(str(REPO))} && {codexr}; sleep 60")
        tmux.wait_for("○ idle")
        tmux.type("tw-one print it")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "Codex asks to run a command" in s and "waiting for approval" in s,
                          "the command waiting for its approval")
        assert f"$ {ran}   … waiting for approval" in shown and "… running" not in shown
        assert "'%s\\\\n'" not in shown
        tmux.keys("y")
        shown = tmux.wait(lambda s: "Printed it." in s and "○ idle" in s, "the answer to prompt 1")
        assert f"$ {ran}" in shown and "'%s\\\\n'" not in shown and "waiting for approval" not in shown
        assert (ws / "p.txt").read_text() == "hi\n"
        thread_short = status_thread(shown)
        tmux.type("tw-two again")
        tmux.keys("Enter")
        tmux.wait(lambda s: "Second answer." in s and "○ idle" in s, "the answer to prompt 2")

        tmux.keys("Escape", "Escape")  # the picker, on prompt 2
        tmux.wait(lambda s: "Rewind — choose the prompt" in s and "prompt 2" in s, "the rewind picker")
        tmux.keys("c")
        # Enter is taken once the plan of the chosen mode shows (rewind_picker: nothing unseen happens); pressed
        # before, under load, it was ignored and this test timed out (CI, once)
        tmux.wait(lambda s: "(•) [c] conversation only" in s
                  and "files: left exactly as they are (conversation only)" in s, "conversation only chosen")
        tmux.keys("Enter")
        tmux.wait(lambda s: "rewound to prompt 2" in s and "○ idle" in s and "↷ redo 1" in s, "the rewind")
        tmux.keys("C-c")  # the rewound prompt back in the composer: cleared
        tmux.wait(lambda s: framed(s) and composer_text(s).startswith("Ask Codex…"), "an empty composer")
        tmux.type("/threads")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "Threads of this workspace" in s and "rewound before prompt 2" in s,
                          "the fork's label in /threads")
        fork_row = next(ln for ln in shown.splitlines() if "rewound before prompt 2" in ln)
        assert "* tw-one print it · fork of " in fork_row and thread_short.lstrip("…") in fork_row, shown
        assert "(rewound to before its first prompt)" not in shown


def test_context_left_on_the_status_bar_and_ctrl_t_shows_the_whole_transcript(tmux: Tmux, tmp_path: Path) -> None:
    """Issue 20 §3 in a real terminal: the status bar says how much of the context window is left once Codex has
    reported it (the official TUI's "N% context left"), and Ctrl+T pages through the whole thread — the first
    lines of an output the transcript block cuts to its tail too — until q closes it."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    with ScriptedModel() as model:
        model.script("tt-count", [shell("seq 1 450"), usage(130_000), message("Counted to 450.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color"}
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        tmux.start(f"cd {shlex.quote(str(ws))} && env -u COLUMNS -u LINES {assign} {shlex.quote(sys.executable)} "
                   "-m app.cli; sleep 60")
        shown = tmux.wait_for("○ idle")
        assert "context left" not in shown  # nothing reported yet: nothing claimed
        tmux.type("tt-count please")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "Counted to 450." in s and "○ idle" in s and "52% context left" in s,
                          "the answer and the context left on the status bar")
        bar = next(ln for ln in shown.splitlines() if "○ idle" in ln)
        assert "gpt-5.5  │  52% context left" in bar, bar
        tmux.keys("C-t")
        tmux.wait(lambda s: "Transcript — the whole thread" in s and "Esc or q closes" in s, "the transcript pager")
        tmux.keys("g")

        def first_lines(screen: str) -> list[str]:
            """The three lines under the command in the pager ([] before it is drawn)."""
            lines = [ln.strip("▊▎ ") for ln in screen.splitlines()]
            at = next((i for i, ln in enumerate(lines) if ln.startswith("$ seq 1 450")), None)
            return lines[at + 1:at + 4] if at is not None and "▶ prompt 1" in screen else []

        # the output's first lines, which the block on the main screen cuts to its tail (waited for as drawn: a
        # full run once captured the pager mid-redraw, "1", "2 5", "426")
        tmux.wait(lambda s: first_lines(s) == ["1", "2", "3"], "the top of the transcript with the output's start")
        tmux.keys("q")
        tmux.wait(lambda s: "Transcript — the whole thread" not in s and "Ask Codex" in s, "the pager to close")


def test_small_terminal_picker_rows_and_a_resize_that_keeps_the_bottom(tmux: Tmux, tmp_path: Path) -> None:
    """Issue 20 §4 in a real terminal: at 80x24 the rewind picker shows several prompt rows and, on Tab, its plan
    (before: about one row); still two at 60x20; and a resize leaves the transcript at its end."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    (ws / "notes.txt").write_text("n\n")
    with ScriptedModel() as model:
        for i in range(1, 6):
            model.script(f"ts-{i}", [shell(f"echo {i} > f{i}.txt"), message(f"Answer number {i}.")])
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color"}
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        codexr = f"env -u COLUMNS -u LINES {assign} {shlex.quote(sys.executable)} -m app.cli -C {shlex.quote(str(ws))}"
        tmux.start(f"cd {shlex.quote(str(REPO))} && {codexr}; sleep 60", 80, 24)
        tmux.wait_for("○ idle")
        for i in range(1, 6):
            tmux.type(f"ts-{i} go")
            tmux.keys("Enter")
            tmux.wait(lambda s, i=i: f"Answer number {i}." in s and "○ idle" in s, f"the answer to prompt {i}")

        def rows(screen: str) -> list[int]:
            return [int(m.group(1)) for m in re.finditer(r"^\W*(\d+)  [\w ]+  \[snapshot\]  ts-", screen, re.M)]

        tmux.keys("Escape", "Escape")
        shown = tmux.wait(lambda s: "prompt 5 · files and conversation" in s and len(rows(s)) >= 4,
                          "the picker with at least 4 prompt rows")
        assert 5 in rows(shown) and "files: 0 files to write, 1 to delete" in shown
        tmux.keys("Tab", "Tab")  # the plan: its step and its diff
        tmux.wait(lambda s: "D delete: f5.txt" in s and "-5" in s, "the plan in view")
        tmux.keys("BTab", "BTab")
        tmux.resize(60, 20)
        tmux.wait(lambda s: len(rows(s)) >= 2 and 5 in rows(s), "at least 2 prompt rows at 60x20")
        tmux.keys("Escape")
        tmux.wait(lambda s: "Rewind —" not in s and "Answer number 5." in s, "the main screen at 60x20")
        for width, height in ((100, 30), (70, 22)):
            tmux.resize(width, height)

            def at_the_end(s: str, w: int = width) -> bool:  # redrawn across the new width, the end in view
                if not any(ln.startswith("╰") and ln.endswith("╯") and len(ln) == w for ln in s.splitlines()):
                    return False
                above = transcript_text(s)
                return "Answer number 5." in above and "turn completed" in above.split("Answer number 5.")[-1]

            tmux.wait(at_the_end, f"the transcript's end in view at {width}x{height}")
