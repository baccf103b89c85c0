"""`codexr demo --serve`: a new user tries exec, threads, rewind, redo and history offline by pasting two lines.

The serving `codexr` and every command are real processes; the commands drive the real Codex binary against the
scripted model the first process serves.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from test_cli_agent import show

REPO = Path(__file__).parents[1]
TIMEOUT_S = 90
#: A shell's PATH without this venv: where the user pastes the lines, the venv is not activated.
PLAIN_PATH = os.pathsep.join(p for p in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)
                             if Path(p) != Path(sys.executable).parent) or "/usr/bin:/bin"


def serve(base: Path, cwd: Path) -> tuple[subprocess.Popen[str], list[str]]:
    """`codexr demo --serve --dir base`, and what it printed up to "Ctrl+C stops it"."""
    server = subprocess.Popen([sys.executable, "-m", "app.cli", "demo", "--serve", "--dir", str(base)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    assert server.stdout is not None
    lines = []
    for line in server.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("Ctrl+C stops it"):
            break
    return server, lines


def pasted(lines: list[str], then: str = "env -0") -> subprocess.CompletedProcess[str]:
    """The two lines pasted into a new shell (PATH without the venv), then `then`."""
    exports = [ln for ln in lines if ln.startswith("export ")]
    cds = [ln for ln in lines if ln.startswith("cd ")]
    assert len(exports) == 1 and len(cds) == 1, lines
    env = {**os.environ, "PATH": PLAIN_PATH, "PYTHONPATH": str(REPO)}
    return subprocess.run(["bash", "-c", f"{exports[0]}\n{cds[0]}\n{then}"], env=env, capture_output=True, text=True,
                          timeout=TIMEOUT_S)


def test_two_pasted_lines_are_all_a_new_user_needs_to_try_every_command(tmp_path: Path) -> None:
    base = tmp_path / "try"
    server, lines = serve(base, tmp_path)
    try:
        shell = pasted(lines)  # what a shell has after pasting the two lines
        assert shell.returncode == 0, shell.stderr
        env = dict(var.split("=", 1) for var in shell.stdout.split("\0") if "=" in var)
        ws = Path(shlex.split(next(ln for ln in lines if ln.startswith("cd ")))[1])
        assert env["CODEX_HOME"].startswith(str(base)) and ws.is_dir() and str(ws).startswith(str(base))

        def codexr(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ws,
                                  env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                                  timeout=TIMEOUT_S)

        first = codexr("exec", "--json", "create notes.txt hello")
        assert first.returncode == 0, show(first)
        assert (ws / "notes.txt").read_text().startswith("hello"), show(first)
        thread = json.loads(first.stdout)["thread_id"]
        second = codexr("exec", "--thread", thread, "edit notes.txt again")
        assert second.returncode == 0, show(second)
        edited = (ws / "notes.txt").read_text()
        threads = codexr("threads", "--json")
        assert threads.returncode == 0 and thread in threads.stdout, show(threads)
        rewind = codexr("rewind", "--thread", thread, "--to", "2", "--yes", "--json")
        assert rewind.returncode == 0, show(rewind)
        assert (ws / "notes.txt").read_text().startswith("hello") and (ws / "notes.txt").read_text() != edited
        redo = codexr("redo", "--thread", json.loads(rewind.stdout)["thread_id"], "--yes")
        assert redo.returncode == 0 and (ws / "notes.txt").read_text() == edited, show(redo)
        found = codexr("history", "search", "notes.txt", "--json")
        assert found.returncode == 0 and thread in found.stdout, show(found)
    finally:
        server.send_signal(signal.SIGINT)
        out, err = server.communicate(timeout=30)
    assert server.returncode == 0 and "Traceback" not in err, (out, err)
    assert "model: answered 'create notes.txt hello'" in out, out
    assert f"(kept {base})" in out and base.is_dir()  # --dir: the user's directory is kept


def test_the_pasted_lines_put_the_codexr_that_serves_on_path(tmp_path: Path) -> None:
    """Issue 36 §2: codexr runs from .venv (bootstrap.py), so the other shell had no `codexr` command at all: the
    export line puts the directory of the serving codexr first on PATH."""
    server, lines = serve(tmp_path / "try", tmp_path)
    try:
        shell = pasted(lines, "command -v codexr && codexr --version")
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)
    assert shell.returncode == 0, (lines, shell.stdout, shell.stderr)
    where, version = shell.stdout.splitlines()[:2]
    assert Path(where) == Path(sys.executable).parent / "codexr", shell.stdout
    assert version.startswith("codexr "), shell.stdout


def test_a_kept_interactive_demo_says_how_to_continue_its_thread_and_that_works(tmp_path: Path) -> None:
    """Issue 36 §1: the demo's exit line named `codexr -C <workspace> resume ID`, which has neither the demo's
    CODEX_HOME nor its model (gone with the demo). A kept demo (--dir) now says to serve it again; serving a kept
    directory takes its workspace as it is (it rewrote the demo's files and committed again, and a third time
    failed with a traceback), and the thread goes on there."""
    import pexpect

    base = tmp_path / "kept"
    env = {**os.environ, "PYTHONPATH": str(REPO), "PROMPT_TOOLKIT_NO_CPR": "1", "TERM": "xterm",
           "CODEX_HOME": str(tmp_path / "unused-home")}
    child = pexpect.spawn(sys.executable, ["-m", "app.cli", "demo", "--plain", "--dir", str(base)], env=env,
                          encoding="utf-8", timeout=TIMEOUT_S, dimensions=(50, 400))
    child.expect("codexr>")
    child.sendline("create hello.txt first")
    child.expect(r"-- turn \w+")
    child.expect("codexr>")
    child.sendline("/quit")
    child.expect(pexpect.EOF)
    child.close()
    said = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", str(child.before))
    assert child.exitstatus == 0, said
    hint = next((ln for ln in said.splitlines() if ln.startswith("To continue this thread")), "")
    thread = hint.rsplit(" ", 1)[-1]
    assert f"codexr demo --serve --dir {base}," in hint and f"then codexr resume {thread}" in hint, said
    ws = base / "workspace"
    (ws / "src" / "app.py").write_text("# mine since\n")
    for _again in range(2):  # serving a kept directory twice leaves its workspace as it was
        server, lines = serve(base, tmp_path)
        try:
            shell = pasted(lines, f"codexr exec --thread {thread} 'edit hello.txt again'")
        finally:
            server.send_signal(signal.SIGINT)
            out, err = server.communicate(timeout=30)
        assert server.returncode == 0 and "Traceback" not in err, (out, err)
        assert shell.returncode == 0, (shell.stdout, shell.stderr)
    assert (ws / "src" / "app.py").read_text() == "# mine since\n"
    assert (ws / "hello.txt").read_text().splitlines()[0] == "first"
    assert len((ws / "hello.txt").read_text().splitlines()) == 3, (ws / "hello.txt").read_text()


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run([sys.executable, "-m", "app.cli", "demo", "--serve", "--port", str(port)],
                             capture_output=True, text=True, timeout=TIMEOUT_S, cwd=tmp_path,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 2 and "Traceback" not in res.stderr, show(res)
    assert res.stderr.startswith("codexr: error: cannot serve the scripted model") and len(res.stderr.splitlines()) == 1
