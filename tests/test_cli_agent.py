"""`codexr exec | threads | rewind | redo` end to end: the real command line in a subprocess, driving the
real Codex app-server against the scripted Responses-API server that runs in this process.

Every CLI call starts Python and Codex (about 1.5 s): independent calls run two at a time (`Cli.many`), and
threads that tests only need as a starting point are seeded in-process through the same `Session` that
`codexr exec` uses (`Cli.seed`). Two Codex processes must not start at once on a never-used CODEX_HOME (Codex
fails to create its state database), so parallel calls either share a home that has been used already or
get a home of their own.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import pty
import queue
import re
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import codex_cli_bin  # type: ignore[import-untyped]
import pytest
from e2e_helpers import official_codex_exec
from fs_helpers import Tree, tree
from inotify_simple import INotify, flags

from app.codex.scripted_model import (
    ScriptedModel,
    add_file,
    fail,
    last_user_text,
    message,
    message_texts,
    patch,
    update_file,
    user_texts,
    write_codex_home,
)
from app.session import Session, SessionOptions, TurnOutcome
from config import load_settings
from snapshot_store import Store
from snapshot_store.ids import digest_hex
from snapshot_store.manifest import captured_items

REPO = Path(__file__).parents[1]
HEX64 = re.compile(r"[0-9a-f]{64}")
TIMEOUT_S = 60
UNKNOWN_THREAD = "01a00000-0000-7000-8000-000000000000"

def show(res: subprocess.CompletedProcess[str]) -> str:
    return f"exit {res.returncode}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"


def assert_one_line_error(res: subprocess.CompletedProcess[str], *needles: str) -> str:
    """Exit 2, no traceback, exactly one stderr line starting `codexr: error:` (and nothing on stdout)."""
    assert res.returncode == 2, show(res)
    assert "Traceback" not in res.stderr, show(res)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("codexr: error:"), show(res)
    assert res.stdout == "", show(res)
    for needle in needles:
        assert needle in lines[0], show(res)
    return lines[0]


@dataclass
class Cli:
    """A scripted model, a CODEX_HOME pointing at it, and a workspace; `run` is `codexr` in a subprocess."""

    model: ScriptedModel
    tmp: Path
    home: Path
    ws: Path
    env: dict[str, str]
    module: str = "app"
    """What `python -m` runs: the console script's launcher, one-shot here (the suite's CODEXR_SERVER=0);
    tests/test_server.py runs it with a resident server."""
    server_env: dict[str, str] = field(default_factory=dict)

    def run(self, *args: str, cwd: Path | None = None, home_env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **self.env,
               **(home_env or {}), **self.server_env}
        return subprocess.run([sys.executable, "-m", self.module, *args], cwd=cwd or self.ws, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)

    def ok(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        res = self.run(*args, cwd=cwd)
        assert res.returncode == 0, (args, show(res))
        assert "Traceback" not in res.stderr, show(res)
        return res

    def json(self, *args: str, cwd: Path | None = None) -> Any:
        res = self.ok(*args, "--json", cwd=cwd)
        try:
            return json.loads(res.stdout)
        except ValueError:
            raise AssertionError(f"stdout is not one JSON document:\n{show(res)}") from None

    def many(self, *calls: tuple[str, ...] | dict[str, Any]) -> list[subprocess.CompletedProcess[str]]:
        """Run calls in rounds of two (calls[0] with calls[1], then calls[2] with calls[3] ...); a dict is
        `{"args": (...), **run_kwargs}`. Codex lets one process at a time resume a thread, so the two calls of
        a round must not name the same thread."""
        def one(call: tuple[str, ...] | dict[str, Any]) -> subprocess.CompletedProcess[str]:
            if isinstance(call, dict):
                kw = dict(call)
                return self.run(*kw.pop("args"), **kw)
            return self.run(*call)

        out: list[subprocess.CompletedProcess[str]] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            for start in range(0, len(calls), 2):
                out += list(pool.map(one, calls[start:start + 2]))
        return out

    def workspace(self, name: str) -> Path:
        p = self.tmp / name
        p.mkdir()
        return p

    def requests_for(self, prompt: str) -> list[dict[str, Any]]:
        """The agent's model requests whose last user message is `prompt`."""
        return [r for r in self.model.model_requests if last_user_text(r) == prompt]

    def threads(self) -> dict[str, dict[str, Any]]:
        return {row["thread_id"]: row for row in self.json("threads")}

    def home_of_its_own(self, name: str) -> dict[str, str]:
        """Env of another fresh CODEX_HOME on the same scripted model (for calls run in parallel)."""
        return write_codex_home(self.tmp / name, self.model.base_url)

    def seed(self, prompts: list[str]) -> tuple[str, list[TurnOutcome], list[Tree]]:
        """Run prompts on a new thread in-process, as `codexr exec` would; return the thread, the outcomes and
        the workspace tree before the first prompt and after each one."""
        opts = SessionOptions(cwd=self.ws, codex_home=self.home, settings=load_settings(self.home), env=self.env)
        outcomes: list[TurnOutcome] = []
        trees = [tree(self.ws)]
        box: dict[str, Any] = {}

        def go() -> None:
            try:
                with Session(opts) as session:
                    tid = session.start_thread()
                    for prompt in prompts:
                        out = session.run_turn(tid, prompt)
                        outcomes.append(out)
                        trees.append(tree(self.ws))
                    box["thread"] = tid
            except BaseException as exc:  # surfaced below
                box["err"] = exc

        worker = threading.Thread(target=go, daemon=True)
        worker.start()
        worker.join(TIMEOUT_S)
        assert not worker.is_alive(), f"seeding {prompts} did not finish in {TIMEOUT_S}s"
        if "err" in box:
            raise box["err"]
        assert all(o.status == "completed" for o in outcomes), [(o.status, o.error) for o in outcomes]
        return box["thread"], outcomes, trees


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    tmp = Path(os.path.realpath(tmp_path))
    ws = tmp / "ws"
    ws.mkdir()
    with ScriptedModel() as model:
        env = write_codex_home(tmp / "codex-home", model.base_url)
        yield Cli(model, tmp, tmp / "codex-home", ws, env)


def outcome_shape(doc: dict[str, Any]) -> None:
    for key in ("thread_id", "turn_id", "status", "final_message", "files_changed", "pre_snapshot",
                "post_snapshot"):
        assert key in doc, doc


# ------------------------------------------------------------------------------------------------ exec


def test_exec_fresh_workspace_text_and_json_never_waits_on_a_silent_stdin(cli: Cli) -> None:
    cli.model.script("make notes", [add_file("notes.txt", "hello\n"), message("notes are ready")])
    cli.model.script("make more", [add_file("sub/more.txt", "more\n"), message("more is ready")])
    other = cli.workspace("ws2")
    cmd = [sys.executable, "-m", cli.module, "exec", "--json", "please make more"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
           **cli.home_of_its_own("home-b"), **cli.server_env}
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        # stdin is a pipe that is never written to nor closed: exec must not wait on it (codex exec would), and says
        # so in one line
        proc = subprocess.Popen(cmd, cwd=other, env=env, stdin=subprocess.PIPE, stdout=out, stderr=err, text=True)
        try:
            text_res = cli.run("exec", "please make notes")
            try:
                rc = proc.wait(timeout=TIMEOUT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                pytest.fail("`codexr exec` with an open stdin pipe did not finish: it waits on stdin")
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
        out.seek(0)
        err.seek(0)
        json_res = subprocess.CompletedProcess(cmd, rc, out.read(), err.read())

    # text mode: the final message alone on stdout, the summary on stderr
    assert text_res.returncode == 0, show(text_res)
    assert text_res.stdout == "notes are ready\n", show(text_res)
    assert "Traceback" not in text_res.stderr
    assert re.search(r"thread \S+\s+turn \S+\s+completed", text_res.stderr), show(text_res)
    assert (cli.ws / "notes.txt").read_bytes() == b"hello\n"

    assert "stdin" not in text_res.stderr  # /dev/null: read, nothing in it, nothing said
    # --json: one document on stdout
    assert json_res.returncode == 0, show(json_res)
    assert [line for line in json_res.stderr.splitlines() if "stdin" in line] == [
        "codexr: stdin gave nothing in 0.5 s: not read (codex exec would wait for it); to send a slow command's "
        "output, pipe the whole prompt to `codexr exec -`"], show(json_res)
    doc = json.loads(json_res.stdout)
    outcome_shape(doc)
    assert doc["status"] == "completed" and doc["final_message"] == "more is ready"
    assert doc["files_changed"] == ["sub/more.txt"]
    assert HEX64.fullmatch(doc["pre_snapshot"]) and HEX64.fullmatch(doc["post_snapshot"])
    assert doc["pre_snapshot"] != doc["post_snapshot"]
    assert doc["thread_id"] and doc["turn_id"] and doc["thread_id"] != doc["turn_id"]
    assert (other / "sub" / "more.txt").read_bytes() == b"more\n"
    assert len(cli.requests_for("please make notes")) == 2 and len(cli.requests_for("please make more")) == 2


def test_exec_json_lists_patches_outside_the_workspace_as_rewinds_show_them(cli: Cli) -> None:
    """Issue 18 §1.9: files_changed names what the agent patched outside the workspace (absolute paths, as a
    rewind's plan shows them), since a rewind restores those too."""
    outside = cli.tmp / "outside"
    outside.mkdir()
    (outside / "edit.txt").write_text("one\ntwo\n")
    (outside / "gone.txt").write_text("bye\n")
    cli.model.script("reach out", [patch(
        "*** Begin Patch\n"
        "*** Add File: inside.txt\n+in\n"
        f"*** Add File: {outside}/new.txt\n+made outside\n"
        f"*** Update File: {outside}/edit.txt\n@@\n one\n-two\n+TWO\n"
        f"*** Delete File: {outside}/gone.txt\n"
        "*** End Patch\n"), message("reached out")])
    doc = cli.json("exec", "please reach out")
    assert doc["status"] == "completed", doc
    expected = sorted(["inside.txt", str(outside / "new.txt"), str(outside / "edit.txt"), str(outside / "gone.txt")])
    assert doc["files_changed"] == expected, doc
    plan = cli.json("rewind", "--thread", doc["thread_id"], "--to", "1", "--dry-run")["restore"]["plan"]
    assert {a["path"] for a in plan if a["op"] in ("write", "delete")} == set(expected), plan


def test_exec_dash_reads_the_prompt_from_stdin_as_codex_exec_does(cli: Cli) -> None:
    """`codex exec -` reads the prompt from stdin; `codexr exec -` sent the prompt "-" to the model (and the demo
    model made a random edit of it). `-` is now the one time exec reads stdin: empty or not UTF-8 is one line, exit 2,
    before Codex starts."""
    prompt = "make piped notes\nover two lines"
    cli.model.script("make piped notes", [add_file("piped.txt", "piped\n"), message("piped done")])
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}

    def exec_dash(data: bytes) -> subprocess.CompletedProcess[str]:
        res = subprocess.run([sys.executable, "-m", "app.cli", "exec", "--json", "-"], cwd=cli.ws, env=env,
                             input=data, capture_output=True, timeout=TIMEOUT_S)
        return subprocess.CompletedProcess(res.args, res.returncode, res.stdout.decode(), res.stderr.decode())

    res = exec_dash(prompt.encode())
    assert res.returncode == 0, show(res)
    assert json.loads(res.stdout)["status"] == "completed" and (cli.ws / "piped.txt").read_text() == "piped\n"
    assert cli.requests_for(prompt) and not cli.requests_for("-")
    sent = len(cli.model.model_requests)
    assert_one_line_error(exec_dash(b" \n"), "empty prompt", "`-` and the text on stdin")
    assert_one_line_error(exec_dash(b"\xff oops"), "the prompt read from stdin is not UTF-8")
    assert len(cli.model.model_requests) == sent


def test_exec_appends_piped_stdin_to_the_prompt_as_codex_exec_does(cli: Cli) -> None:
    """`git diff | codex exec "review this"`: Codex appends what stdin holds to the prompt; codexr ignored it (the
    model never saw the diff). The model now gets the same text the pinned `codex exec` sends it for the same input;
    with no PROMPT stdin is the prompt (as `-`); no PROMPT on a terminal is one line."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    ws = cli.workspace("piped")
    sent: dict[str, str] = {}
    for who, argv in (("codex", [str(codex_cli_bin.bundled_codex_path()), "exec", "--skip-git-repo-check"]),
                      ("codexr", [sys.executable, "-m", "app.cli", "exec"])):
        for case, prompt, data, trigger in (
                ("both", ["review this"], b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-old\n+new", "review this"),
                ("blank", ["review that"], b" \n\n", "review that"),
                ("only", [], b"the prompt on stdin\n", "the prompt on stdin")):
            before = len(cli.model.model_requests)
            cli.model.script(trigger, [message(f"{who} {case} done")])
            res = subprocess.run([*argv, *prompt], cwd=ws, env=env, input=data, capture_output=True,
                                 timeout=TIMEOUT_S)
            assert res.returncode == 0, (who, case, res.stderr.decode()[-2000:])
            texts = [last_user_text(r) for r in cli.model.model_requests[before:]]
            sent[f"{who} {case}"] = next(t for t in texts if t.startswith(trigger))  # not a title request
    for case in ("both", "blank", "only"):
        assert sent[f"codexr {case}"] == sent[f"codex {case}"], (case, sent)
    assert sent["codexr both"].startswith("review this\n\n<stdin>\n--- a/x\n") and sent["codexr blank"] == "review that"
    primary, secondary = pty.openpty()  # a terminal on stdin and no PROMPT: nothing to read, one line
    try:
        res = subprocess.run([sys.executable, "-m", "app.cli", "exec"], cwd=ws, env=env, stdin=secondary,
                             capture_output=True, timeout=TIMEOUT_S)
    finally:
        os.close(primary)
        os.close(secondary)
    assert_one_line_error(subprocess.CompletedProcess(res.args, res.returncode, res.stdout.decode(),
                                                      res.stderr.decode()), "no prompt")


def test_exec_waits_for_a_slow_command_of_its_own_pipeline_on_stdin(cli: Cli) -> None:
    """`make 2>&1 | codexr exec "why did it fail"` with a build silent for longer than the stdin grace: its output was
    dropped (the grace is for a stdin a harness or an ssh session holds open and never writes). A pipe written by
    commands of codexr's own pipeline is now waited for, as `codex exec` waits, with one line naming them; the
    model gets the output in the prompt's `<stdin>` block."""
    ws = cli.workspace("slow-pipe")
    cli.model.script("why did it fail", [message("it failed because of the log")])
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env, **cli.server_env}
    line = (f"sh -c 'sleep 1.5; echo error: the build log' | {shlex.quote(sys.executable)} -m {cli.module} exec "
            "'why did it fail'")
    res = subprocess.run(["bash", "-c", line], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                         text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0, show(res)
    said = [x for x in res.stderr.splitlines() if "stdin" in x]
    assert len(said) == 1 and said[0].startswith("codexr: waiting for stdin: ") and "sleep (pid " in said[0] \
        and said[0].endswith(" of this pipeline still writing it (Ctrl+C stops)"), show(res)
    sent = [last_user_text(r) for r in cli.model.model_requests]
    assert "why did it fail\n\n<stdin>\nerror: the build log\n</stdin>" in sent, sent


def _permissions(request: dict[str, Any]) -> str:
    """The `<permissions instructions>` block Codex sends the model (the sandbox, its writable roots, the network)."""
    texts = re.findall(r"<permissions instructions>.*?</permissions instructions>", json.dumps(request))
    assert texts, "no permissions block in the request"
    return str(texts[-1])


def test_exec_add_dir_makes_a_directory_writable_as_codex_exec_does(cli: Cli) -> None:
    """`codex exec --add-dir DIR` lets the agent write DIR besides the workspace (a workspace-write sandbox's writable
    roots); `codexr exec` refused the flag ("unrecognized arguments"). The model now gets the permissions the pinned
    `codex exec` gives it for the same flags, config.toml's own writable roots and network access kept; a directory
    that does not exist is one line before Codex starts; with a read-only sandbox one line says it has no effect."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    ws, extra, theirs = cli.workspace("adder"), cli.workspace("extra"), cli.workspace("config-root")
    config = ["-c", f'sandbox_workspace_write.writable_roots=["{theirs}"]', "-c",
              "sandbox_workspace_write.network_access=true"]
    sent: dict[str, str] = {}
    for who, argv in (("codex", [str(codex_cli_bin.bundled_codex_path()), "exec", "--skip-git-repo-check"]),
                      ("codexr", [sys.executable, "-m", cli.module, "exec"])):
        trigger = f"{who} may write there"
        cli.model.script(trigger, [message("noted")])
        before = len(cli.model.model_requests)
        res = subprocess.run([*argv, *config, "-s", "workspace-write", "--add-dir", "../extra",
                              trigger], cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                             timeout=TIMEOUT_S)
        assert res.returncode == 0, (who, res.stderr[-2000:])
        sent[who] = next(_permissions(r) for r in cli.model.model_requests[before:] if trigger in json.dumps(r))
    assert sent["codexr"] == sent["codex"], sent
    assert str(extra) in sent["codexr"] and str(theirs) in sent["codexr"], sent["codexr"]

    sent_before = len(cli.model.model_requests)
    assert_one_line_error(cli.run("exec", "--add-dir", str(cli.tmp / "nowhere"), "hello"), "--add-dir",
                          "no such directory")
    assert len(cli.model.model_requests) == sent_before
    cli.model.script("read only here", [message("read only")])
    res = cli.run("exec", "-s", "read-only", "--add-dir", str(extra), "read only here")
    assert res.returncode == 0, show(res)
    assert "codexr: --add-dir has no effect: the sandbox is read-only (with -s workspace-write the agent may write " \
           "there)" in res.stderr.splitlines(), show(res)


def test_a_pipe_s_writers_are_found_in_proc_and_none_where_it_does_not_answer(tmp_path: Path) -> None:
    """app/cmds/piped.py: the process writing a pipe is found (a child here, no ancestor: a producer); with no /proc
    to read (a Mac) none is, and exec's grace stands."""
    from app.cmds import piped

    r, w = os.pipe()
    child = subprocess.Popen(["sleep", "30"], stdout=w)
    os.close(w)
    try:
        inode = piped.pipe_inode(r)
        assert inode is not None
        with open(tmp_path / "plain", "w") as plain:
            assert piped.pipe_inode(plain.fileno()) is None and piped.producers(plain.fileno()) == []
        assert piped.writers(inode) == [child.pid]
        assert piped.producers(r) == [child.pid]
        assert piped.writers(inode, proc=str(tmp_path / "no-proc")) == []
    finally:
        child.kill()
        child.wait()
        os.close(r)


def test_exec_takes_codex_exec_s_output_last_message_and_skip_git_repo_check(cli: Cli) -> None:
    """A script moved from `codex exec -o FILE --skip-git-repo-check` to codexr: both were "unrecognized arguments".
    `-o` writes the final message to FILE (relative to where the user stands); a FILE that cannot be written is one
    line before Codex starts; `--skip-git-repo-check` is accepted (codexr never requires a Git repository)."""
    cli.model.script("say the last words", [message("These are the last words.")])
    out = cli.tmp / "out"
    out.mkdir()
    res = cli.run("-C", str(cli.ws), "exec", "-o", "last.txt", "--skip-git-repo-check", "say the last words", cwd=out)
    assert res.returncode == 0, show(res)
    assert (out / "last.txt").read_text() == "These are the last words." and not (cli.ws / "last.txt").exists()
    sent = len(cli.model.model_requests)
    assert_one_line_error(cli.run("exec", "-o", str(cli.tmp / "missing" / "x.txt"), "say the last words"),
                          "cannot write there")
    assert_one_line_error(cli.run("exec", "-o", str(out), "say the last words"), "cannot write there")
    assert len(cli.model.model_requests) == sent


def test_exec_takes_codex_exec_s_color(cli: Cli) -> None:
    """`codex exec --color never PROMPT`, the spelling a CI script keeps its log clean with, was "unrecognized
    arguments" and no turn. `--color always|never|auto` is accepted; codexr's output carries no color codes whatever
    it says; any other value is one line and no turn, as codex refuses it."""
    cli.model.script("in plain words", [message("Plain words.")])
    for value in ("never", "always"):
        res = cli.run("exec", "--color", value, "in plain words")
        assert res.returncode == 0, show(res)
        assert "Plain words." in res.stdout and "\x1b" not in res.stdout + res.stderr, show(res)
    sent = len(cli.model.model_requests)
    res = cli.run("exec", "--color", "purple", "in plain words")
    assert res.returncode == 2 and "--color" in res.stderr and len(res.stderr.strip().splitlines()) == 1, show(res)
    assert len(cli.model.model_requests) == sent


def test_exec_layers_a_profile_as_codex_exec_p_does(cli: Cli) -> None:
    """`codex exec -p fast PROMPT` layers $CODEX_HOME/fast.config.toml on config.toml; codexr said "unrecognized
    arguments". The model now gets what the pinned `codex exec -p` sends it: the profile's model and effort, a `-c`
    over the profile, and a table the profile adds a key to merged (its provider's address kept: the turn reaches
    the model). A profile config.toml still defines the legacy way is refused as codex refuses it, and a name that is
    a path, in one line each with nothing sent."""
    (cli.home / "fast.config.toml").write_text('model = "profile-model"\nmodel_reasoning_effort = "low"\n\n'
                                              '[model_providers.mock]\nstream_idle_timeout_ms = 30000\n')
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    ws = cli.workspace("profiled")
    seen: dict[str, tuple[Any, Any]] = {}
    for who, argv in (("codex", [str(codex_cli_bin.bundled_codex_path()), "exec", "--skip-git-repo-check"]),
                      ("codexr", [sys.executable, "-m", cli.module, "exec"])):
        for case, words in (("profile", ["-p", "fast"]), ("over", ["-p", "fast", "-c", "model_reasoning_effort=high"])):
            prompt = f"{who} {case}"
            cli.model.script(prompt, [message("done")])
            before = len(cli.model.model_requests)
            res = subprocess.run([*argv, *words, prompt], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                                 capture_output=True, text=True, timeout=TIMEOUT_S)
            assert res.returncode == 0, (who, case, res.stderr[-2000:])
            body = next(r for r in cli.model.model_requests[before:] if last_user_text(r).startswith(prompt))
            seen[f"{who} {case}"] = (body.get("model"), (body.get("reasoning") or {}).get("effort"))
    assert seen["codexr profile"] == seen["codex profile"] == ("profile-model", "low"), seen
    assert seen["codexr over"] == seen["codex over"] == ("profile-model", "high"), seen
    sent = len(cli.model.model_requests)
    config = cli.home / "config.toml"
    kept = config.read_text()
    config.write_text(kept + '\n[profiles.fast]\nmodel = "legacy"\n')
    assert_one_line_error(cli.run("exec", "-p", "fast", "never sent"), "legacy way", "fast.config.toml")
    config.write_text(kept)
    assert_one_line_error(cli.run("-p", "../fast", "exec", "never sent"), "no slash")
    assert len(cli.model.model_requests) == sent


def test_exec_resume_as_codex_exec_spells_it_continues_the_thread(cli: Cli) -> None:
    """`codex exec resume --last PROMPT` / `codex exec resume ID PROMPT`, typed to codexr: the first was an
    "unrecognized arguments" error, and `exec resume --last` alone ran a turn on the prompt "resume" (files changed).
    They continue the thread as codexr's `exec --last PROMPT` / `exec --thread ID PROMPT` do; naming no thread is one
    line and no turn (no PROMPT reads it from stdin, as for `exec`); `exec --last resume` (the word after the options)
    still sends that word."""
    for p in ("resumed by last", "resumed by id", "resume"):
        cli.model.script(p, [message(f"answer to {p}")])
    first = cli.json("exec", "start a thread to resume")["thread_id"]
    assert cli.json("exec", "resume", "--last", "resumed by last")["thread_id"] == first
    assert cli.json("exec", "resume", "-m", "gpt-5.5", first[:13], "resumed by id")["thread_id"] == first
    sent = len(cli.model.model_requests)
    assert_one_line_error(cli.run("exec", "resume"), "`exec resume` needs a thread")
    for words in (("exec", "resume", first[:13]), ("exec", "resume", "--last")):  # the prompt from stdin: empty
        assert_one_line_error(cli.run(*words), "empty prompt")
    assert len(cli.model.model_requests) == sent
    assert cli.json("exec", "--last", "resume")["final_message"] == "answer to resume"
    assert [r["prompts"] for r in cli.json("threads")] == [4]


def test_exec_takes_codex_exec_s_bypass_flag_as_its_sandbox_and_approval(cli: Cli) -> None:
    """`codex exec --dangerously-bypass-approvals-and-sandbox`, as CI scripts run it, was "unrecognized" by codexr:
    it is `-s danger-full-access -a never` (the developer message Codex sends says so); with an -s or -a that says
    otherwise it is one line and no turn."""
    cli.model.script("bypassing", [message("bypassed")])  # both prompts begin with it
    env = write_codex_home(cli.tmp / "strict-home", cli.model.base_url, approval_policy="on-request",
                           sandbox_mode="workspace-write")
    # after `exec` as codex exec takes it, and `--yolo` (codex's short name for it) before the command, as for the app
    for words, prompt in ((("exec", "--dangerously-bypass-approvals-and-sandbox"), "bypassing please"),
                          (("--yolo", "exec"), "bypassing by yolo")):
        res = cli.run(*words, prompt, home_env=env)
        assert res.returncode == 0, show(res)
        dev = "\n".join(message_texts(cli.requests_for(prompt)[0], "developer"))
        assert "`sandbox_mode` is `danger-full-access`" in dev and "Approval policy is currently never" in dev, dev
    sent = len(cli.model.model_requests)
    assert_one_line_error(cli.run("-s", "read-only", "exec", "--dangerously-bypass-approvals-and-sandbox", "x",
                                  home_env=env), "means -s danger-full-access -a never")
    assert_one_line_error(cli.run("--yolo", "exec", "-a", "on-request", "x", home_env=env),
                          "means -s danger-full-access -a never")
    assert len(cli.model.model_requests) == sent


def test_exec_continues_a_thread_by_id_and_with_last(cli: Cli) -> None:
    t1, first, _ = cli.seed(["first prompt alpha"])
    t2, _, _ = cli.seed(["another thread entirely"])
    assert t2 != t1
    # --thread: the model sees the earlier prompt of that thread, not the other thread's
    doc = cli.json("exec", "--thread", t1, "second prompt beta")
    assert doc["thread_id"] == t1 and doc["status"] == "completed" and doc["turn_id"] != first[0].turn_id
    (req,) = cli.requests_for("second prompt beta")
    assert user_texts(req) == ["first prompt alpha", "second prompt beta"]
    # --last: the most recently used thread of this workspace is t1 again (its latest turn is the newest)
    doc = cli.json("exec", "--last", "third prompt gamma")
    assert doc["thread_id"] == t1, (doc, t1, t2)
    (req,) = cli.requests_for("third prompt gamma")
    assert user_texts(req) == ["first prompt alpha", "second prompt beta", "third prompt gamma"]


# --------------------------------------------------------------------------------- threads, rewind, redo

P1, P2, P3 = "p1: make notes", "p2: edit notes and add b", "p3: add c"


def three_prompts(cli: Cli) -> tuple[str, list[str], list[Tree]]:
    """A thread of three prompts, each changing files; returns (thread, turn ids, tree before p1..after p3)."""
    cli.model.script("p1: make notes", [add_file("notes.txt", "hello\n"), message("made")])
    cli.model.script("p2: edit notes", [update_file("notes.txt", "hello", "HELLO"), add_file("b.txt", "b\n"),
                                        message("edited")])
    cli.model.script("p3: add c", [add_file("c/c.txt", "c\n"), message("added c")])
    (cli.ws / "keep.txt").write_text("user file\n")
    thread, outcomes, trees = cli.seed([P1, P2, P3])
    assert trees[0] != trees[1] != trees[2] != trees[3]
    return thread, [o.turn_id for o in outcomes], trees


def test_threads_rewind_and_redo(cli: Cli) -> None:
    t, _turns, trees = three_prompts(cli)
    after_p1, after_p3 = trees[1], trees[3]

    # a dry run, and a refusal without --yes off a terminal (one after the other: both resume t)
    dry = cli.run("rewind", "--thread", t, "--to", "2", "--dry-run")
    refused = cli.run("rewind", "--thread", t, "--to", "2")
    assert dry.returncode == 0 and "Traceback" not in dry.stderr, show(dry)
    assert f"rewind thread {t} to prompt 2" in dry.stdout, show(dry)
    assert re.search(r"^\s+delete\s+b\.txt\s+\(", dry.stdout, re.M), show(dry)
    assert re.search(r"^\s+delete\s+c/c\.txt\s+\(", dry.stdout, re.M), show(dry)
    assert re.search(r"^\s+write\s+notes\.txt\s+\(", dry.stdout, re.M), show(dry)
    assert f"prompt 2: {P2}" in dry.stdout, show(dry)
    assert_one_line_error(refused, "--yes")
    assert tree(cli.ws) == after_p3, "a dry or a refused rewind changed the workspace"
    listing = cli.ok("threads")
    assert len(listing.stdout.splitlines()) == 1, f"a dry or a refused rewind left a thread:\n{listing.stdout}"
    assert listing.stdout.startswith(t) and "3 prompts, 3/3 with snapshots" in listing.stdout, listing.stdout
    assert "redo" not in listing.stdout, listing.stdout

    # the real rewind: a fork ending before prompt 2, and the files as they were before it
    res = cli.json("rewind", "--thread", t, "--to", "2", "--yes")
    new = res["thread_id"]
    assert new != t and res["origin_thread"] == t and res["mode"] == "both"
    assert res["to_prompt"] == 2 and res["prompt"] == P2
    assert HEX64.fullmatch(res["safety_id"] or ""), res
    assert tree(cli.ws) == after_p1

    # the listing beside a redo dry run (only rewind and redo warn about a second live session)
    rows_res, dry = cli.many(("threads", "--json"), ("redo", "--thread", new, "--dry-run"))
    assert rows_res.returncode == 0, show(rows_res)
    rows = {r["thread_id"]: r for r in json.loads(rows_res.stdout)}
    assert set(rows) == {t, new}, rows
    assert (rows[new]["prompts"], rows[new]["prompts_with_snapshots"], rows[new]["redo_depth"]) == (1, 1, 1), rows
    assert rows[new]["forked_from"] == t, rows
    assert (rows[t]["prompts"], rows[t]["prompts_with_snapshots"], rows[t]["redo_depth"]) == (3, 3, 0), rows
    assert dry.returncode == 0 and "Traceback" not in dry.stderr, show(dry)
    assert f"redo would return to thread {t}" in dry.stdout, show(dry)
    assert re.search(r"^\s+write\s+b\.txt\s+\(", dry.stdout, re.M), show(dry)
    assert tree(cli.ws) == after_p1, "redo --dry-run changed the workspace"

    # the conversation continues on the fork without prompts 2 and 3
    doc = cli.json("exec", "--thread", new, "p2 again, differently")
    assert doc["thread_id"] == new and doc["status"] == "completed"
    (req,) = cli.requests_for("p2 again, differently")
    assert user_texts(req) == [P1, "p2 again, differently"]

    # asked of t, the thread the rewind started from, a redo names the fork it is to be asked of, and changes nothing
    before = tree(cli.ws)
    assert_one_line_error(cli.run("redo", "--thread", t, "--yes"), "nothing to redo",
                          f"its last rewind went to thread {new}: `codexr redo --thread {new}`")
    assert tree(cli.ws) == before

    # redo goes back to t with the files byte-identical
    res = cli.json("redo", "--thread", new, "--yes")
    assert res["thread_id"] == t and res["from_thread"] == new and res["turns_since_rewind"] == 1, res
    assert tree(cli.ws) == after_p3

    assert_one_line_error(cli.run("redo", "--thread", new, "--yes"), "nothing to redo")
    assert tree(cli.ws) == after_p3


def damage_content(cli: Cli, content: bytes) -> tuple[Path, bytes]:
    """Flip a byte inside the stored copy of `content`; returns the pack and its bytes before, to mend it."""
    with Store.open(cli.home / "file_snapshots", protected=[cli.home]) as store:
        loc = store.blobs.locate(bytes.fromhex(digest_hex(content)))
    pack = cli.home / "file_snapshots" / "packs" / f"{loc.pack}.pack"
    good = pack.read_bytes()
    bad = bytearray(good)
    bad[loc.offset + loc.stored_len // 2] ^= 0x20
    pack.write_bytes(bytes(bad))
    return pack, good


def sidecars(cli: Cli) -> dict[str, bytes]:
    refs = cli.home / "file_snapshots" / "refs" / "threads"
    return {p.name: p.read_bytes() for p in refs.iterdir()}


def test_a_rewind_or_redo_whose_content_is_damaged_changes_nothing(cli: Cli) -> None:
    """A corrupt store gets a clear error and changes nothing: a rewind whose content was damaged in the store forked
    the conversation, recorded a redo entry and said "the rewind is recorded ... `codexr redo` undoes the files it
    changed" while no file had changed; a redo left a "redo-started" note. The content is now verified before the
    conversation or any record is touched."""
    t, _turns, trees = three_prompts(cli)
    pack, good = damage_content(cli, b"hello\n")  # notes.txt before prompt 2: what the rewind writes
    before = sidecars(cli)
    res = cli.run("rewind", "--thread", t, "--to", "2", "--yes")
    assert_one_line_error(res, "does not match", "nothing was changed")
    assert "recorded" not in res.stderr and "redo" not in res.stderr, show(res)
    assert tree(cli.ws) == trees[3]
    assert set(cli.threads()) == {t}, "a rewind that changed nothing left a fork"
    assert sidecars(cli) == before
    pack.write_bytes(good)

    fork = cli.json("rewind", "--thread", t, "--to", "2", "--yes")["thread_id"]
    assert tree(cli.ws) == trees[1]
    pack, good = damage_content(cli, b"c\n")  # c/c.txt, in the rewind's safety snapshot: what the redo writes
    before = sidecars(cli)
    assert_one_line_error(cli.run("redo", "--thread", fork, "--yes"), "does not match", "nothing was changed")
    assert tree(cli.ws) == trees[1]
    assert sidecars(cli) == before
    pack.write_bytes(good)
    assert cli.json("redo", "--thread", fork, "--yes")["thread_id"] == t
    assert tree(cli.ws) == trees[3]


def test_a_rewind_whose_content_outside_the_workspace_is_damaged_changes_nothing(cli: Cli) -> None:
    """The same for a file the agent patched outside the workspace: the workspace's files were restored, then the
    outside path's damaged content stopped the rewind, "recorded" on a fork. Both sides are verified first now."""
    outside = cli.tmp / "outside"
    outside.mkdir()
    (outside / "edit.txt").write_text("one\ntwo\n")
    cli.model.script("reach out", [patch(
        "*** Begin Patch\n"
        "*** Add File: inside.txt\n+in\n"
        f"*** Update File: {outside}/edit.txt\n@@\n one\n-two\n+TWO\n"
        "*** End Patch\n"), message("reached out")])
    t = cli.json("exec", "reach out")["thread_id"]
    after = tree(cli.ws), tree(outside)
    damage_content(cli, b"one\ntwo\n")  # edit.txt as it was before the patch: what the rewind writes outside
    before = sidecars(cli)
    assert_one_line_error(cli.run("rewind", "--thread", t, "--to", "1", "--yes"), "does not match",
                          "nothing was changed")
    assert (tree(cli.ws), tree(outside)) == after
    assert set(cli.threads()) == {t}
    assert sidecars(cli) == before


def test_a_thread_whose_conversation_codex_lost_names_the_snapshots_that_put_its_files_back(cli: Cli) -> None:
    """Codex's session files deleted (a user freeing space): a rewind said "prompt 1 does not exist (the thread has 0
    prompts)" (or "unknown thread T") though every prompt's files were still in codexr's store. The line now says
    Codex cannot list the conversation, not the files, and names the snapshot before each of the last prompts;
    `--files-only` rewinds (and redo undoes) from codexr's record alone."""
    t, _turns, trees = three_prompts(cli)
    sidecar = cli.home / "file_snapshots" / "refs" / "threads" / f"{t}.json"
    side = json.loads(sidecar.read_text())
    for turn in side["turns"]:  # a thread of yesterday's (a rewind waits a moment for a turn of the last minutes)
        turn["started"] -= 86400
    sidecar.write_text(json.dumps(side))
    for rollout in (cli.home / "sessions").rglob(f"*{t}*.jsonl"):
        rollout.unlink()
    line = assert_one_line_error(cli.run("rewind", "--thread", t, "--to", "2", "--yes"),
                                 f"Codex cannot list the turns of thread {t}", "`--files-only` rewinds them")
    pres = [turn["pre"][:12] for turn in side["turns"]]
    assert f"prompt 1 ({P1}): {pres[0]}" in line and f"prompt 3 ({P3}): {pres[2]}" in line, line
    assert tree(cli.ws) == trees[3]
    # the files, from codexr's record alone, and their redo
    res = cli.json("rewind", "--thread", t, "--to", "2", "--files-only", "--yes")
    assert (res["thread_id"], res["mode"], res["prompt"]) == (t, "files", P2), res
    assert tree(cli.ws) == trees[1]
    assert cli.json("redo", "--thread", t, "--yes")["thread_id"] == t
    assert tree(cli.ws) == trees[3]
    cli.ok("snapshots", "restore", pres[1], "--yes")  # and the snapshot the line named
    assert tree(cli.ws) == trees[1]


def test_rewind_and_redo_of_the_last_thread(cli: Cli, tmp_path: Path) -> None:
    """`--last`, as `exec --last` has it: `rewind --last` acts on the thread last prompted here and `redo --last` on
    the fork that rewind left (the thread last used now). Neither flag, both, or a workspace with no thread yet is
    one line; before, `--thread` was required and `rewind --last` was not understood."""
    t, _turns, trees = three_prompts(cli)
    assert_one_line_error(cli.run("rewind", "--to", "2", "--yes"), "one of the arguments --thread --last")
    assert_one_line_error(cli.run("redo", "--last", "--thread", t, "--yes"), "not allowed with")
    assert tree(cli.ws) == trees[3]

    res = cli.json("rewind", "--last", "--to", "2", "--yes")
    fork = res["thread_id"]
    assert res["origin_thread"] == t and fork != t and res["to_prompt"] == 2, res
    assert tree(cli.ws) == trees[1]
    res = cli.json("redo", "--last", "--yes")
    assert res["thread_id"] == t and res["from_thread"] == fork, res
    assert tree(cli.ws) == trees[3]

    empty = tmp_path / "no-thread-here"
    empty.mkdir()
    assert_one_line_error(cli.run("rewind", "--last", "--to", "1", "--yes", cwd=empty), "no codexr thread in")


def test_rewind_modes_and_turn_id_target(cli: Cli) -> None:
    t, turns, trees = three_prompts(cli)
    # --files-only, naming the prompt by its turn id: files as before prompt 2, same thread
    res = cli.json("rewind", "--thread", t, "--to", turns[1], "--files-only", "--yes")
    assert res["thread_id"] == t and res["mode"] == "files" and res["to_prompt"] == 2 and res["prompt"] == P2
    assert HEX64.fullmatch(res["safety_id"] or ""), res
    assert tree(cli.ws) == trees[1]
    # --conversation-only: a fork before prompt 3, files left exactly as they are
    res = cli.json("rewind", "--thread", t, "--to", "3", "--conversation-only", "--yes")
    fork = res["thread_id"]
    assert fork != t and res["mode"] == "conversation" and res["prompt"] == P3
    assert res["restore"] is None and res["safety_id"] is None, res
    assert tree(cli.ws) == trees[1]


def test_a_state_before_the_first_patch_is_left_alone_and_named_in_every_plan(cli: Cli) -> None:
    """Issue 18 §1.8 (ported from a peer project's tests): a file outside the workspace, created after prompt 1
    and deleted by prompt 2's patch. Its state before prompt 1 was never seen: a rewind to prompt 1 leaves it as
    it is (issue 34: never invented from prompt 2's record), and every front end's plan says why; a rewind to
    prompt 2 writes back what the patch undid."""
    from app.services.driver import Driver
    from app.tui.labels import plan_line

    sib = cli.workspace("sib")
    late = sib / "late.txt"
    cli.model.script("lp-first", [add_file("first.txt", "one\n"), message("first")])
    cli.model.script("lp-second", [patch(f"*** Begin Patch\n*** Delete File: {late}\n*** End Patch\n"),
                                   message("second")])
    thread = cli.json("exec", "lp-first step")["thread_id"]
    late.write_text("made after prompt 1\n")  # by the user, outside the workspace: no snapshot holds it
    assert cli.json("exec", "--last", "lp-second step")["status"] == "completed"
    assert not late.exists()
    unseen = "left as it is: its state before prompt 1 is unknown (codexr first saw it at prompt 2)"

    # the CLI (text and JSON)
    text = cli.ok("rewind", "--thread", thread, "--to", "1", "--dry-run").stdout
    line = next(ln for ln in text.splitlines() if str(late) in ln)
    assert line.split()[0] == "leave" and unseen in line, text
    own = cli.json("rewind", "--thread", thread, "--to", "2", "--dry-run")["restore"]["plan"]
    reason = next(a["reason"] for a in own if a["path"] == str(late))
    assert "unknown" not in reason and "prompt 2" not in reason, own  # prompt 2's own state: restored

    # the line mode, on a pipe: the plan before the question (declined)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    res = subprocess.run([sys.executable, "-m", "app.cli", "--plain", "resume", thread], cwd=cli.ws, env=env,
                         input="/rewind 1 files\nn\n", capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0, show(res)
    line = next(ln for ln in res.stdout.splitlines() if str(late) in ln and "leave" in ln)
    assert unseen in line, res.stdout

    # the app: its preview comes from the driver, each step drawn by plan_line
    opts = SessionOptions(cwd=cli.ws, codex_home=cli.home, settings=load_settings(cli.home), env=cli.env)
    driver = Driver(opts, lambda _ev: None, thread_id=thread)
    try:
        assert driver.start()
        preview = driver.rewind_preview(1, "files")
    finally:
        driver.close()
    assert preview.restore is not None
    step = next(a for a in preview.restore.plan.actions if a.path == str(late))
    assert step.op == "leave" and unseen in plan_line(step, None)

    # the rewind to prompt 1 leaves it absent, as it is; the one to prompt 2 writes back what the patch undid
    done = cli.json("rewind", "--thread", thread, "--to", "1", "--files-only", "--yes")
    assert str(late) not in done["restore"]["written"], done
    assert not late.exists() and not (cli.ws / "first.txt").exists()
    assert any(a["path"] == str(late) and a["reason"] == unseen for a in done["restore"]["left"]), done
    cli.ok("redo", "--thread", thread, "--yes")
    done = cli.json("rewind", "--thread", thread, "--to", "2", "--files-only", "--yes")
    assert str(late) in done["restore"]["written"], done
    assert late.read_text() == "made after prompt 1\n" and (cli.ws / "first.txt").exists()


def test_rewind_to_the_first_prompt_then_redo_or_continue(cli: Cli) -> None:
    cli.model.script("only prompt", [add_file("first.txt", "1\n"), message("made first")])
    t, _outcomes, trees = cli.seed(["the only prompt"])
    res = cli.json("rewind", "--thread", t, "--to", "1", "--yes")
    new = res["thread_id"]
    assert new != t and res["prompt"] == "the only prompt" and tree(cli.ws) == trees[0] == {}
    # both are what the user does next; run both before asserting so a failure reports each
    red = cli.run("redo", "--thread", new, "--yes", "--json")
    again = cli.run("exec", "--thread", new, "the only prompt, edited")
    assert red.returncode == 0, f"redo right after `rewind --to 1` failed:\n{show(red)}"
    assert json.loads(red.stdout)["thread_id"] == t
    assert tree(cli.ws) == trees[1]
    assert again.returncode == 0, f"sending the prompt again on the thread `rewind --to 1` made failed:\n{show(again)}"


def test_a_thread_started_by_the_official_codex_exec(cli: Cli) -> None:
    """Listed with its source; codexr snapshots the prompts it sends there; the earlier one is conversation-only."""
    cli.model.script("codex made", [add_file("a.txt", "from codex\n"), message("codex did it")])
    cli.model.script("codexr edits", [update_file("a.txt", "from codex", "from codexr"), add_file("b.txt", "b\n"),
                                      message("codexr did it")])
    cli.model.script("codexr again", [message("nothing to change")])
    t = official_codex_exec(cli.env, cli.ws, "codex made a")
    after_codex = tree(cli.ws)

    # listed before codexr ever touched it: who started it, its one prompt conversation-only
    row = cli.threads().get(t)
    assert row is not None, f"a thread started by `codex exec` is missing from `codexr threads`: {cli.threads()}"
    assert (row["source"], row["prompts"], row["prompts_with_snapshots"], row["conversation_only"]) == (
        "exec", 1, 0, 1), row
    assert row["preview"] == "codex made a", row

    # codexr continues it: its own prompt gets snapshots, and it says so once, in one line
    first = cli.run("exec", "--json", "--thread", t, "codexr edits a")
    second = cli.run("exec", "--json", "--thread", t, "codexr again")
    for res in (first, second):
        assert res.returncode == 0, show(res)
        doc = json.loads(res.stdout)
        assert HEX64.fullmatch(doc["pre_snapshot"] or "") and HEX64.fullmatch(doc["post_snapshot"] or ""), doc
    said = [line for line in first.stderr.splitlines() if "started outside codexr" in line]
    assert len(said) == 1 and f"thread {t} was started outside codexr (exec)" in said[0], show(first)
    assert "1 earlier prompt is conversation-only" in said[0], show(first)
    assert "outside codexr" not in second.stderr, f"the notice came again:\n{show(second)}"
    after_codexr = tree(cli.ws)
    assert (cli.ws / "a.txt").read_text() == "from codexr\n" and (cli.ws / "b.txt").read_text() == "b\n"

    # the listing: Codex's own first prompt as the preview, codexr's prompts with snapshots
    listing = cli.ok("threads")
    (line,) = [ln for ln in listing.stdout.splitlines() if ln.startswith(t)]
    assert " exec " in line and "3 prompts, 2/3 with snapshots (1 conversation-only)" in line, line
    assert line.endswith("codex made a"), line

    # prompt 1 (run by codex exec): conversation-only, with the reason, in the refusal and in the plan
    refused, plan = cli.many(("rewind", "--thread", t, "--to", "1", "--dry-run"),
                             ("rewind", "--thread", t, "--to", "1", "--conversation-only", "--dry-run"))
    assert_one_line_error(refused, "prompt 1 was sent outside codexr", "--conversation-only")
    assert plan.returncode == 0, show(plan)
    assert "files: left as they are (prompt 1 was sent outside codexr, so it has no file snapshot: " \
           "conversation only)" in plan.stdout, show(plan)
    assert tree(cli.ws) == after_codexr

    # prompt 2 (codexr's own): a rewind brings the files back to what codex exec left
    res = cli.json("rewind", "--thread", t, "--to", "2", "--yes")
    assert res["to_prompt"] == 2 and res["prompt"] == "codexr edits a" and res["no_snapshot_reason"] is None, res
    assert tree(cli.ws) == after_codex, "the rewind to codexr's first prompt on the thread did not restore files"


def test_a_rewind_waits_a_moment_for_a_turn_codex_does_not_list_yet(cli: Cli) -> None:
    """Right after a turn, Codex may not list it yet (its app-server daemon 0.171 once answered a rewind run just
    after `codexr exec` with the turns before it: "prompt 3 does not exist"): the rewind asks again a moment."""
    cli.model.script("one", [add_file("a.txt", "a\n"), message("One done.")])
    cli.model.script("two", [add_file("b.txt", "b\n"), message("Two done.")])
    thread, _, _ = cli.seed(["one", "two"])
    rollout = next(cli.home.glob(f"sessions/**/*{thread}.jsonl"))
    lines = rollout.read_text().splitlines(keepends=True)
    second = [i for i, line in enumerate(lines) if json.loads(line).get("payload", {}).get("type") == "task_started"]
    assert len(second) == 2, "the rollout should hold two turns"
    cut = sum(len(line.encode()) for line in lines[:second[1]])
    turn = str(json.loads(lines[second[1]])["payload"]["turn_attribution"]["turn_id"])
    projection = cli.home / "thread_history_1.sqlite"  # Codex lists turns from this projection of the rollout
    with sqlite3.connect(projection) as db:
        rows = {table: db.execute(f"SELECT * FROM {table} WHERE turn_id = ?", (turn,)).fetchall()
                for table in ("thread_turns", "thread_items")}
        state = db.execute("SELECT next_rollout_byte_offset, next_rollout_ordinal FROM "
                           "thread_history_projection_state WHERE thread_id = ?", (thread,)).fetchone()
    assert all(rows.values()) and state, "Codex's turn projection is not as this test knows it"

    def projected(upto: int, ordinal: int) -> None:
        with sqlite3.connect(projection) as db:
            for table, got in rows.items():
                db.execute(f"DELETE FROM {table} WHERE turn_id = ?", (turn,))
                if upto == state[0]:
                    db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(got[0]))})", got)
            db.execute("UPDATE thread_history_projection_state SET next_rollout_byte_offset = ?, "
                       "next_rollout_ordinal = ? WHERE thread_id = ?", (upto, ordinal, thread))

    rollout.write_text("".join(lines[:second[1]]))  # the second turn not written yet, nor projected...
    projected(cut, second[1])
    watch = INotify()
    watch.add_watch(rollout, flags.OPEN)

    def written_late() -> None:  # ...until half a second after Codex first reads the rollout for the rewind
        if watch.read(timeout=60_000):
            time.sleep(0.5)
        with rollout.open("a") as f:
            f.write("".join(lines[second[1]:]))
        projected(*state)

    late = threading.Thread(target=written_late)
    late.start()
    try:
        res = cli.run("rewind", "--thread", thread, "--to", "2", "--dry-run", "--json")
    finally:
        late.join()
        watch.close()
    assert res.returncode == 0, show(res)
    doc = json.loads(res.stdout)
    assert doc["dry_run"] and "b.txt" in json.dumps(doc["restore"]), doc


# ------------------------------------------------------------------------------------- pass-through flags


def test_flags_pass_through_to_codex_and_ours_stay_here(cli: Cli) -> None:
    cli.model.script("flagged", [add_file("flagged.txt", "f\n"), message("flagged done")])
    cli.model.script("elsewhere", [add_file("there.txt", "t\n"), message("elsewhere done")])
    cli.model.script("untracked", [add_file("untracked.txt", "u\n"), message("untracked done")])
    # a home whose defaults differ from the flags, to see the flags win
    home2 = cli.tmp / "home2"
    env2 = write_codex_home(home2, cli.model.base_url, model="gpt-5.4", approval_policy="on-request",
                            sandbox_mode="danger-full-access")
    ws_flags, ws_there, ws_off = cli.workspace("flags"), cli.workspace("there"), cli.workspace("off")
    for i in range(8):
        (ws_there / f"r{i}.txt").write_text(f"residue {i}\n")
    flagged, there, off = cli.many(
        {"args": ("-m", "gpt-5.5", "-c", "model_providers.mock.stream_max_retries=0", "-s", "workspace-write",
                  "-a", "never", "exec", "--json", "flagged prompt"), "cwd": ws_flags, "home_env": env2},
        {"args": ("-C", "there", "-c", "file_snapshots.residue_max_files=5", "exec", "--json", "elsewhere prompt"),
         "cwd": cli.tmp},
        {"args": ("--disable", "file_snapshots", "exec", "--json", "untracked prompt"), "cwd": ws_off,
         "home_env": cli.home_of_its_own("home3")},
    )

    assert flagged.returncode == 0, show(flagged)
    doc = json.loads(flagged.stdout)
    assert doc["status"] == "completed" and doc["final_message"] == "flagged done", doc
    reqs = cli.requests_for("flagged prompt")
    assert reqs and all(r["model"] == "gpt-5.5" for r in reqs), [r["model"] for r in reqs]
    dev = "\n".join(message_texts(reqs[0], "developer"))
    assert "`sandbox_mode` is `workspace-write`" in dev
    assert "Approval policy is currently never" in dev

    assert there.returncode == 0, show(there)
    doc = json.loads(there.stdout)
    assert doc["status"] == "completed" and doc["files_changed"] == ["there.txt"], doc
    assert (ws_there / "there.txt").read_bytes() == b"t\n" and not (cli.tmp / "there.txt").exists()
    # residue_max_files=5 reached the capture: 5 of the 8 untracked files were taken before the turn
    with Store.open(cli.home / "file_snapshots", protected=[cli.home]) as store:
        captured = {p for p, _e in captured_items(store.files(doc["pre_snapshot"]))}
    assert len(captured) == 5 and captured <= {f"r{i}.txt" for i in range(8)}, captured

    assert off.returncode == 0, show(off)
    doc = json.loads(off.stdout)
    assert doc["status"] == "completed" and doc["pre_snapshot"] is None and doc["post_snapshot"] is None, doc
    assert (ws_off / "untracked.txt").read_bytes() == b"u\n"


def test_settings_flags_after_the_command_count_as_codex_exec_takes_them(cli: Cli) -> None:
    """`codex exec -c k=v PROMPT` as a script has it: `-c`, `--enable` and `--disable` after `exec` were
    "unrecognized arguments"; now they mean what they mean before it, both places count (after last), and
    codexr's own keys (`--disable file_snapshots`) stay with codexr there too."""
    cli.model.script("after prompt", [add_file("after.txt", "a\n"), message("after done")])
    cli.model.script("off after", [add_file("off.txt", "o\n"), message("off done")])
    ws_after, ws_off = cli.workspace("after"), cli.workspace("off-after")
    after, off = cli.many(
        {"args": ("-c", 'model="gpt-5.4"', "exec", "-c", 'model="gpt-5.5"', "--enable", "apps", "--json",
                  "after prompt"), "cwd": ws_after},
        {"args": ("exec", "--disable", "file_snapshots", "--json", "off after"), "cwd": ws_off,
         "home_env": cli.home_of_its_own("home-off-after")},
    )
    assert after.returncode == 0, show(after)
    doc = json.loads(after.stdout)
    assert doc["status"] == "completed" and doc["pre_snapshot"] and doc["post_snapshot"], doc
    reqs = cli.requests_for("after prompt")
    assert reqs and all(r["model"] == "gpt-5.5" for r in reqs), [r["model"] for r in reqs]
    assert off.returncode == 0, show(off)
    doc = json.loads(off.stdout)
    assert doc["status"] == "completed" and doc["pre_snapshot"] is None and doc["post_snapshot"] is None, doc
    assert (ws_off / "off.txt").read_bytes() == b"o\n"


def test_settings_flags_before_and_after_the_command_are_one_list_in_order() -> None:
    """What every consumer of the flags reads (codexr's settings and Codex's overrides): one list, before first;
    and what `codexr codex` hands the official TUI."""
    from app.cli import parse

    args = parse(["-c", "a=1", "--enable", "x", "snapshots", "capture", "-c", "b=2", "--disable", "y", "-c", "c=3"])
    assert (args.overrides, args.enable, args.disable) == (["a=1", "b=2", "c=3"], ["x"], ["y"])
    assert not any(hasattr(args, f"{name}_after") for name in ("overrides", "enable", "disable"))
    from app.cmds.proxy_cmds import tui_words

    # `codexr codex`: the official TUI's words, untouched (argparse refused `-c`, `-m` there), but a leading -C
    for argv, words, cd in ((["codex", "-c", "k=v"], ["-c", "k=v"], "."),
                            (["codex", "-C", "/w", "-m", "o3", "resume", "ab"], ["-m", "o3", "resume", "ab"], "/w"),
                            (["-C", "/w", "codex", "--", "-C", "x"], ["-C", "x"], "/w")):
        tui = parse(argv)
        assert (tui_words(tui), tui.cd, tui.overrides) == (words, cd, []), argv
    # `--add-dir` before `codex` is the TUI's too, as an absolute path: the TUI starts in the workspace
    tui = parse(["--add-dir", "lib", "codex", "resume", "ab"])
    assert tui_words(tui) == ["resume", "ab", "--add-dir", os.path.realpath("lib")]
    # and `-p NAME` before `codex`: the TUI layers the profile itself
    assert tui_words(parse(["-p", "fast", "codex", "resume", "ab"])) == ["resume", "ab", "-p", "fast"]


def test_exec_output_schema_reaches_the_model_and_bad_ones_change_nothing(cli: Cli) -> None:
    """`codex exec --output-schema FILE` (structured output for scripts) was "unrecognized arguments": the schema
    now goes with the turn as Codex sends it to the model. A missing file, one not a JSON object, and
    `--ephemeral` (a thread nothing keeps cannot be rewound) are one line each, before Codex starts."""
    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"],
              "additionalProperties": False}
    (cli.tmp / "schema.json").write_text(json.dumps(schema))
    (cli.tmp / "list.json").write_text("[1, 2]")
    cli.model.script("structured", [message('{"answer": "42"}')])
    res = cli.run("exec", "--output-schema", str(cli.tmp / "schema.json"), "structured please")
    assert res.returncode == 0, show(res)
    assert res.stdout == '{"answer": "42"}\n', show(res)
    reqs = cli.requests_for("structured please")
    assert reqs and all(r["text"]["format"]["schema"] == schema for r in reqs), [r.get("text") for r in reqs]
    before, requests = tree(cli.ws), len(cli.model.requests)
    missing, listed, ephemeral = cli.many(
        ("exec", "--output-schema", str(cli.tmp / "nope.json"), "hello"),
        ("exec", "--output-schema", str(cli.tmp / "list.json"), "hello"),
        ("exec", "--ephemeral", "hello"),
    )
    assert_one_line_error(missing, "--output-schema", "nope.json: No such file or directory")
    assert_one_line_error(listed, "--output-schema", "a JSON Schema is a JSON object")
    assert_one_line_error(ephemeral, "--ephemeral", "rewind")
    assert tree(cli.ws) == before and len(cli.model.requests) == requests


# ------------------------------------------------------------------------------------------------ errors


def test_usage_errors_are_one_line(cli: Cli) -> None:
    bad_home = cli.tmp / "bad-home"
    write_codex_home(bad_home, cli.model.base_url)
    cfg = bad_home / "config.toml"
    cfg.write_text(cfg.read_text().replace('approval_policy = "never"', 'approval_policy = "untrusted"'))
    empty, elsewhere = cli.workspace("empty"), cli.workspace("elsewhere")
    # a thread (in another workspace than `empty`); the home is used now, so parallel starts are safe.
    # Calls on t run beside calls in other workspaces (two codexr sessions in one workspace warn on stderr).
    t, _outcomes, _trees = cli.seed(["the one prompt"])
    before, requests = tree(cli.ws), len(cli.model.requests)
    (to0, exec_unknown, to99, rewind_unknown, bad_turn, redo_unknown, last_none, no_codex,
     bad_cfg) = cli.many(
        ("rewind", "--thread", t, "--to", "0", "--yes"),
        {"args": ("exec", "--thread", UNKNOWN_THREAD, "hello"), "cwd": elsewhere},
        ("rewind", "--thread", t, "--to", "99", "--yes"),
        {"args": ("rewind", "--thread", UNKNOWN_THREAD, "--to", "1", "--yes"), "cwd": elsewhere},
        ("rewind", "--thread", t, "--to", "not-a-turn-of-this-thread", "--yes"),
        {"args": ("redo", "--thread", UNKNOWN_THREAD, "--yes"), "cwd": elsewhere},
        {"args": ("exec", "--last", "hello"), "cwd": empty},
        {"args": ("exec", "hello"), "home_env": {"CODEX_HOME": str(bad_home)}},
        ("-c", "file_snapshots.residue_max_files=-1", "exec", "hello"),
    )
    assert_one_line_error(to0, "prompt 0")
    assert_one_line_error(to99, "prompt 99", "(the thread has 1 prompt)")
    assert_one_line_error(bad_turn, "not-a-turn-of-this-thread")
    assert_one_line_error(exec_unknown, UNKNOWN_THREAD)
    assert_one_line_error(rewind_unknown, UNKNOWN_THREAD)
    assert_one_line_error(redo_unknown, UNKNOWN_THREAD)
    assert_one_line_error(last_none, "--last")
    assert_one_line_error(bad_cfg, "residue_max_files")
    assert tree(cli.ws) == before
    assert len(cli.model.requests) == requests, "an error case reached the model"
    assert list(cli.threads()) == [t], "an error case left a thread behind"
    # Codex refusing to start (config.toml it rejects) is a one-line error too
    assert_one_line_error(no_codex, "cannot start Codex", "untrusted")


def test_exec_refuses_an_empty_prompt_as_codex_does(cli: Cli) -> None:
    """Issue 18 §1.5: an empty or blank prompt is a usage error; Codex never starts, no snapshot is taken."""
    (cli.ws / "kept.txt").write_text("kept\n")
    before = tree(cli.ws)
    empty, blank = cli.run("exec", ""), cli.run("exec", "--json", "  \n\t ")
    assert_one_line_error(empty, "empty prompt")
    assert_one_line_error(blank, "empty prompt")
    assert tree(cli.ws) == before
    assert cli.model.requests == [], "an empty prompt reached the model"
    with Store.open(cli.home / "file_snapshots", protected=[cli.home]) as store:
        assert store.list_snapshots(None) == [], "an empty prompt took snapshots"
    assert cli.threads() == {}, "an empty prompt left a thread behind"


def test_exec_shows_codex_retries_as_they_come_then_one_line_when_it_gives_up(cli: Cli) -> None:
    """Issue 18 §1.3: each of Codex's own retry notices is on stderr; its giving up is one line and exit 1."""
    cli.model.script("always down", [fail(500)])
    res = cli.run("-c", "model_providers.mock.stream_max_retries=2", "exec", "the provider is always down")
    assert res.returncode == 1, show(res)
    assert res.stdout == "" and "Traceback" not in res.stderr, show(res)
    lines = res.stderr.splitlines()
    retries = [i for i, line in enumerate(lines) if re.match(r"codexr: Codex retries: Reconnecting\.\.\. \d/2", line)]
    assert [lines[i].split("Reconnecting... ")[1][:3] for i in retries] == ["1/2", "2/2"], show(res)
    failed = [i for i, line in enumerate(lines) if line.startswith("codexr: turn failed: ")]
    assert len(failed) == 1 and failed[0] > retries[-1], show(res)
    assert re.match(r"thread \S+\s+turn \S+\s+failed", lines[-1]), show(res)
    assert len(cli.requests_for("the provider is always down")) == 3


def test_exec_with_an_unreachable_provider_says_so_while_codex_waits(cli: Cli) -> None:
    """Issue 18 §1.3: nothing listens at the provider's address. Codex then waits for the network with no
    limit of its own (not bounded by stream_max_retries); codexr says so at once, and Ctrl+C ends it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
           **write_codex_home(cli.tmp / "home-down", f"http://127.0.0.1:{port}/v1")}
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", "exec", "hello, anyone there?"], cwd=cli.ws, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group, as a terminal's foreground job is
    lines: queue.Queue[str] = queue.Queue()
    assert proc.stderr is not None
    reader = threading.Thread(target=lambda: [lines.put(ln) for ln in proc.stderr or ()], daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        while not any("Reconnecting" in ln for ln in seen):
            try:
                seen.append(lines.get(timeout=TIMEOUT_S))
            except queue.Empty:
                raise AssertionError(f"no retry notice on stderr:\n{''.join(seen)}") from None
        notice = next(ln for ln in seen if "Reconnecting" in ln)
        assert notice.startswith("codexr: Codex retries: Reconnecting... waiting for network"), seen
        assert "Ctrl+C" in notice, seen
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl+C in the terminal
        rc = proc.wait(TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    reader.join(TIMEOUT_S)
    while not lines.empty():
        seen.append(lines.get_nowait())
    assert rc == 130, "".join(seen)
    assert seen[-1] == "codexr: interrupted\n", "".join(seen)
    assert "Traceback" not in "".join(seen)


def test_provider_failure_exits_1_with_the_error(cli: Cli) -> None:
    cli.model.script("explode", [fail(500)])
    default, no_retry = cli.many(
        ("exec", "please explode"),
        {"args": ("-c", "model_providers.mock.stream_max_retries=0", "exec", "--json", "explode, no retries"),
         "cwd": cli.workspace("ws2"), "home_env": cli.home_of_its_own("home-b")},
    )
    assert default.returncode == 1, show(default)
    assert "Traceback" not in default.stderr and default.stdout == "", show(default)
    assert re.search(r"^codexr: turn failed: .+", default.stderr, re.M), show(default)
    assert re.search(r"^thread \S+\s+turn \S+\s+failed", default.stderr, re.M), show(default)
    assert len(cli.requests_for("please explode")) == 2  # config.toml: stream_max_retries = 1

    assert no_retry.returncode == 1, show(no_retry)
    doc = json.loads(no_retry.stdout)
    assert doc["status"] == "failed" and doc["error"], doc
    assert len(cli.requests_for("explode, no retries")) == 1  # the -c override reached Codex


# ------------------------------------------------------------------------ issue 18 §2: lines that mislead


def test_rewind_and_redo_from_another_directory_name_the_thread_s_workspace(cli: Cli) -> None:
    """The snapshots are of the thread's workspace: the error names it and `-C`, never `--into` (rewind has none)."""
    t, _turns, trees = three_prompts(cli)
    elsewhere = cli.workspace("elsewhere")
    (elsewhere / "mine.txt").write_text("not the thread's\n")
    theirs = tree(elsewhere)
    dry, real = cli.many({"args": ("rewind", "--thread", t, "--to", "2", "--dry-run"), "cwd": elsewhere},
                         {"args": ("rewind", "--thread", t, "--to", "2", "--yes"), "cwd": elsewhere})
    for res in (dry, real):
        line = assert_one_line_error(res, str(cli.ws), "-C")
        assert "--into" not in line, line
    assert tree(cli.ws) == trees[3] and tree(elsewhere) == theirs
    assert list(cli.threads()) == [t], "a refused rewind left a fork"
    # from there with -C after the command, as the line says: it works
    fork = cli.json("rewind", "--thread", t, "--to", "2", "--yes", "-C", str(cli.ws), cwd=elsewhere)["thread_id"]
    assert tree(cli.ws) == trees[1]
    line = assert_one_line_error(cli.run("redo", "--thread", fork, "--yes", cwd=elsewhere), str(cli.ws), "-C")
    assert "--into" not in line, line
    assert tree(cli.ws) == trees[1] and tree(elsewhere) == theirs

    # the workspace moved away: "run it there" would send the user to nothing, so the line says it is gone and what
    # can still be done; nothing changes
    moved = cli.tmp / "moved"
    cli.ws.rename(moved)
    line = assert_one_line_error(cli.run("rewind", "--thread", fork, "--to", "1", "--yes", cwd=elsewhere),
                                 f"files were in {cli.ws}, which no longer exists", "nothing was changed",
                                 "--conversation-only")
    assert "-C" not in line, line
    assert_one_line_error(cli.run("redo", "--thread", fork, "--yes", cwd=elsewhere), "no longer exists")
    assert tree(moved) == trees[1] and tree(elsewhere) == theirs
    assert {r["thread_id"] for r in cli.json("threads", "--all", cwd=elsewhere)} == {t, fork}


def shared_start(*ids: str) -> str:
    """The characters the ids all begin with."""
    n = 0
    while all(len(i) > n and i[n] == ids[0][n] for i in ids):
        n += 1
    return ids[0][:n]


def test_thread_ids_take_unique_prefixes(cli: Cli) -> None:
    """--thread (exec, rewind, redo) takes a unique prefix of 4+ characters, as snapshot and history ids do; a
    prefix that names no thread, or several, or is too short is one line (exit 2), never Codex's parse error."""
    cli.model.script("p1: make notes", [add_file("notes.txt", "hello\n"), message("made")])
    cli.model.script("p2: more", [add_file("more.txt", "more\n"), message("more")])
    t1, _o, trees = cli.seed([P1, "p2: more notes"])
    t2, _o2, _trees2 = cli.seed(["another thread"])
    common = shared_start(t1, t2)
    short1 = t1[:max(len(common) + 1, 8)]
    before = tree(cli.ws)
    rows = cli.threads()
    assert set(rows) == {t1, t2}
    too_short, unknown = cli.many(("exec", "--thread", "01a", "hello"), ("rewind", "--thread", "ffff0000", "--to", "1"))
    assert_one_line_error(too_short, "01a", "4")
    line = assert_one_line_error(unknown, "ffff0000")
    assert "invalid length" not in line, line
    assert len(common) >= 4, (t1, t2)  # UUIDv7 ids made within minutes share their first 8 characters
    assert_one_line_error(cli.run("redo", "--thread", common, "--yes"), "ambiguous", t1, t2)
    assert tree(cli.ws) == before and set(cli.threads()) == {t1, t2}
    # a unique prefix works wherever a thread id is taken
    dry = cli.ok("rewind", "--thread", short1, "--to", "2", "--dry-run")
    assert f"rewind thread {t1} to prompt 2" in dry.stdout, show(dry)
    doc = cli.json("exec", "--thread", short1, "p3: add c")
    assert doc["thread_id"] == t1
    fork = cli.json("rewind", "--thread", short1, "--to", "2", "--yes")["thread_id"]
    assert tree(cli.ws) == trees[1]
    assert cli.json("redo", "--thread", fork[:max(8, *(len(shared_start(fork, o)) + 1 for o in (t1, t2)))],
                    "--yes")["thread_id"] == t1


#: `codexr ARGS` in a subprocess that says, on its last stderr line, which of these modules it imported
# The SDK, a session and a recording; and the event translation and package metadata (with the email parser it
# loads), ~35 ms of the one-shot listing's ~240 ms (issue 35 §3).
LISTED_IMPORTS = ("openai_codex", "pydantic", "app.session", "app.recording.recording", "snapshot_store.detect.journal",
                  "app.codex.events", "importlib.metadata", "dataclasses", "inspect")
WITH_IMPORTS = ("import json, sys\nfrom app.cli import main\nrc = main(sys.argv[1:])\n"
                f"print(json.dumps([m for m in {LISTED_IMPORTS!r} if m in sys.modules]), file=sys.stderr)\n"
                "sys.exit(rc)")


def test_threads_list_without_the_sdk_or_a_recording_and_change_nothing(cli: Cli) -> None:
    """`codexr threads` only reads: it lists through an app-server of its own without importing the SDK (~0.5 s of
    the command) or starting a session's recording, and a workspace it lists gains no store. Its records are made
    without dataclasses (snapshot_store/records.py: ~7 ms of ~115)."""
    t, _o, _trees = cli.seed(["the one prompt"])
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost", **cli.env}
    res = subprocess.run([sys.executable, "-c", WITH_IMPORTS, "threads", "--json"], cwd=cli.ws, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0, show(res)
    assert json.loads(res.stderr.splitlines()[-1]) == [], show(res)
    rows = json.loads(res.stdout)
    assert [(r["thread_id"], r["prompts"], r["prompts_with_snapshots"], r["source"], r["preview"]) for r in rows] \
        == [(t, 1, 1, "codexr", "the one prompt")], rows

    # a Codex home codexr never used: listed, and left without a store
    other, fresh = cli.workspace("never-used"), cli.home_of_its_own("fresh-home")
    res = subprocess.run([sys.executable, "-c", WITH_IMPORTS, "threads"], cwd=other, env={**env, **fresh},
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert res.returncode == 0 and res.stdout == "no threads in this workspace\n", show(res)
    assert json.loads(res.stderr.splitlines()[-1]) == [], show(res)
    assert not (Path(fresh["CODEX_HOME"]) / "file_snapshots").exists()


def test_threads_say_in_one_line_when_codex_cannot_start(cli: Cli) -> None:
    """A Codex that exits before answering, with and without a last `Error:` line of its own."""
    silent, talking = cli.tmp / "silent-codex", cli.tmp / "talking-codex"
    silent.write_text("#!/bin/sh\nexit 3\n")
    talking.write_text("#!/bin/sh\necho 'Error: the config is wrong somewhere' >&2\nexit 1\n")
    for script in (silent, talking):
        script.chmod(0o755)
    assert_one_line_error(cli.run("threads", "--codex-bin", str(silent)),
                          f"cannot start Codex: {silent} exited with status 3 before answering")
    assert_one_line_error(cli.run("threads", "--codex-bin", str(talking)),
                          "cannot start Codex: the config is wrong somewhere")


def test_threads_print_local_time_with_its_offset(cli: Cli) -> None:
    t, _o, _trees = cli.seed(["the one prompt"])
    text = cli.run("threads", home_env={"TZ": "Asia/Kolkata"})
    assert text.returncode == 0, show(text)
    assert re.search(rf"^{t}  {t[:4]}[0-9a-f-]*\s+\d{{4}}-\d\d-\d\d \d\d:\d\d \+0530  ", text.stdout, re.M), show(text)
    doc = json.loads(cli.run("threads", "--json", home_env={"TZ": "Asia/Kolkata"}).stdout)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+05:30", doc[0]["updated"]), doc


def test_a_fork_made_by_a_rewind_is_labelled_with_what_it_holds_alike_in_threads_and_history(cli: Cli) -> None:
    """Issue 20 §5: a conversation-only rewind to prompt 3 makes a fork holding prompts 1-2; `threads` (text and
    --json) and `history list` show its first prompt with "fork of …, rewound before prompt 3", and
    "(rewound to before its first prompt)" only for the fork of a rewind to prompt 1, which holds none."""
    cli.model.script("lbl", [message("ok")])
    thread, _, _ = cli.seed(["lbl one", "lbl two", "lbl three"])
    kept = cli.json("rewind", "--thread", thread, "--to", "3", "--conversation-only", "--yes")["thread_id"]
    empty = cli.json("rewind", "--thread", thread, "--to", "1", "--yes")["thread_id"]
    rows = cli.threads()
    held = f"lbl one · fork of {thread}, rewound before prompt 3"
    none = f"(rewound to before its first prompt) · fork of {thread}, rewound before prompt 1"
    assert (rows[kept]["preview"], rows[kept]["prompts"], rows[kept]["rewound_before_prompt"]) == (
        "lbl one", 2, 3), rows[kept]
    assert rows[kept]["label"] == held, rows[kept]
    assert (rows[empty]["preview"], rows[empty]["prompts"], rows[empty]["label"]) == ("", 0, none), rows[empty]
    assert (rows[thread]["label"], rows[thread]["rewound_before_prompt"]) == ("lbl one", None), rows[thread]
    text = cli.ok("threads").stdout
    line = {ln.split()[0]: ln for ln in text.splitlines()}
    assert line[kept].endswith(f"  {held}") and line[empty].endswith(f"  {none}"), text
    assert "(rewound to before its first prompt)" not in line[kept], text
    listed = cli.ok("history", "list").stdout.splitlines()
    label_of = {ln.split()[0]: listed[i + 1].strip() for i, ln in enumerate(listed[:-1])
                if not ln.startswith(" ") and listed[i + 1].startswith("    ")}
    assert (label_of.get(kept), label_of.get(empty), label_of.get(thread)) == (held, none, "lbl one"), listed


def test_a_rewind_keeps_the_files_another_session_made_live_or_closed(cli: Cli) -> None:
    """Issue 34 (was issue 20's warning): what another codexr session's agent made after this thread's last prompt
    is not this thread's agent's work, so a rewind keeps it and says so — with that session live (and warned
    about) or closed."""
    from e2e_helpers import PipeSession

    cli.model.script("ol-one", [add_file("one.txt", "1\n"), message("one")])
    cli.model.script("ol-two", [add_file("two.txt", "2\n"), message("two")])
    cli.model.script("ol-other", [add_file("other.txt", "theirs\n"), message("theirs")])
    cli.model.script("ol-closed", [add_file("closed.txt", "theirs too\n"), message("theirs too")])
    t, _, _ = cli.seed(["ol-one please", "ol-two please"])
    cli.ok("exec", "ol-closed please")  # another thread, its session closed since
    other = PipeSession(cli.ws, {**os.environ, "PYTHONPATH": str(REPO), **cli.env})
    try:
        other.until("type a prompt")
        other.prompt("ol-other please")
        res = cli.run("rewind", "--thread", t, "--to", "2", "--yes")
        assert res.returncode == 0, show(res)
        assert "warning: other codexr sessions are live in this workspace: pid " in res.stdout, show(res)
        for name in ("other.txt", "closed.txt"):
            assert re.search(rf"left {name}  \(kept: changed by you after prompt 2's turn\)",
                             res.stdout), show(res)
    finally:
        other.close()
    assert not (cli.ws / "two.txt").exists(), "this thread's own agent's file stayed"
    assert (cli.ws / "other.txt").read_text() == "theirs\n" and (cli.ws / "closed.txt").read_text() == "theirs too\n"


def test_a_damaged_thread_sidecar_hides_no_other_thread_and_verify_repair_sets_it_aside(cli: Cli) -> None:
    """One thread's sidecar damaged (a torn write by another tool, a disk error, a bad hand edit): `codexr threads`
    said only that and listed nothing; `doctor` and `verify` named `verify --repair` as the fix, which left it as it
    was. Now the other threads are listed, the damaged one without snapshots and a warning saying why; `verify
    --repair` renames the file aside, where it still keeps its snapshots from gc."""
    cli.model.script("first thread", [add_file("one.txt", "1\n"), message("one")])
    cli.model.script("second thread", [add_file("two.txt", "2\n"), message("two")])
    first = cli.json("exec", "first thread")
    second = cli.json("exec", "second thread")["thread_id"]
    sidecar = cli.home / "file_snapshots" / "refs" / "threads" / f"{first['thread_id']}.json"
    whole = sidecar.read_bytes()
    pre_edit = json.loads(whole)["turns"][0]["pre_edit"]  # pinned by this sidecar only (no ref line names it)
    torn = whole[:-8]  # its end lost: not JSON, every snapshot id still in it
    sidecar.write_bytes(torn)

    res = cli.run("threads")
    assert res.returncode == 0 and "Traceback" not in res.stderr, show(res)
    rows = {line.split()[0]: line for line in res.stdout.splitlines()}
    assert set(rows) == {first["thread_id"], second}, show(res)
    assert "1 prompt, 1/1 with snapshots" in rows[second], show(res)
    assert "snapshots unknown (codexr's record of it is damaged)" in rows[first["thread_id"]], show(res)
    (warning,) = res.stderr.splitlines()
    assert warning.startswith("codexr: warning: thread sidecar") and str(sidecar) in warning, show(res)
    assert "`codexr snapshots verify --repair` sets it aside" in warning, show(res)
    doc = {r["thread_id"]: r for r in cli.json("threads")}
    assert doc[first["thread_id"]]["damaged"] and doc[second]["damaged"] is None, doc
    before = tree(cli.ws)
    assert_one_line_error(cli.run("exec", "--thread", first["thread_id"], "more"), "is damaged",
                          "`codexr snapshots verify --repair` sets it aside")
    assert tree(cli.ws) == before and not cli.requests_for("more")

    found = cli.run("snapshots", "verify")
    assert found.returncode == 1 and f"refs/threads/{sidecar.name} is not valid JSON" in found.stdout, show(found)
    repaired = cli.run("snapshots", "verify", "--repair")
    assert repaired.returncode == 0, show(repaired)
    assert f"set aside the damaged thread sidecar refs/threads/{sidecar.name} as {sidecar.name}.damaged" \
        in repaired.stdout, show(repaired)
    assert not sidecar.exists() and sidecar.with_name(sidecar.name + ".damaged").read_bytes() == torn
    assert cli.run("snapshots", "verify").returncode == 0
    res = cli.ok("threads")
    assert res.stderr == "" and "1 prompt, 0/1 with snapshots" in res.stdout, show(res)

    # the set-aside file still pins the snapshots it names: gc leaves the agent's pre-edit record, and drops it once
    # that file is gone
    gc = ("-c", "file_snapshots.gc_grace_seconds=0", "-c", "file_snapshots.retention_max_snapshots=1",
          "snapshots", "gc")
    cli.ok(*gc)
    with Store.open(cli.home / "file_snapshots", protected=[cli.home]) as store:
        assert store.exists(pre_edit)
    sidecar.with_name(sidecar.name + ".damaged").rename(cli.tmp / "mended-elsewhere.json")
    cli.ok(*gc)
    with Store.open(cli.home / "file_snapshots", protected=[cli.home]) as store:
        assert not store.exists(pre_edit)


def test_a_thread_longer_than_a_page_of_codex_s_turn_list_keeps_every_prompt(cli: Cli) -> None:
    """Codex lists a thread's turns 100 to a page (`thread/turns/list`, cursors): a long session's prompts past the
    first page must all be rewind points, numbered as sent (a cursor followed wrongly would lose or repeat them)."""
    prompts = [f"long thread prompt {i}" for i in range(1, 106)]
    for p in prompts:
        cli.model.script(p, [message(f"answer to {p}")])
    t, _outcomes, _trees = cli.seed(prompts)
    (row,) = cli.json("threads")
    assert (row["prompts"], row["prompts_with_snapshots"]) == (105, 105), row
    for n in (100, 101, 105):
        dry = cli.json("rewind", "--thread", t, "--to", str(n), "--dry-run")
        assert (dry["to_prompt"], dry["prompt"]) == (n, prompts[n - 1]), dry
