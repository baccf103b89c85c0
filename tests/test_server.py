"""The resident server (app/launch.py, app/server/server.py): one-shot commands run in a fork of it and behave exactly
as they do in a process of their own — same output and exit codes, the caller's directory, environment, streams,
limits and terminal, Ctrl+C reaching the command, a killed command dying with its caller — and nothing is run
by a server whose code is not the caller's.

Every command here is a real process: `python -m app` is what the `codexr` console script runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest
import test_cli_agent as agent_tests  # its stories, run again here through the server (not collected twice)
from probes import MODULE_IMPORT_PROBE
from test_cli_agent import Cli, show

from app.cli import _add_global_flags, _Parser
from app.codex.scripted_model import ScriptedModel, message, pause, write_codex_home
from app.server import oneshot, runtime

REPO = Path(__file__).parents[1]
START_S = 120  # the server imports the SDK with its models built: seconds on a loaded 2-core machine


def private_base() -> Path:
    """Where tests make runtime directories: below the home directory, whose parents only root or this user may
    write (app/launch.py's rule), and which Codex's sandbox does not make writable."""
    base = Path.home() / ".cache" / "codexr-tests"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    return base


class Servers:
    """A private runtime directory and the environment that makes `python -m app` use a server in it."""

    def __init__(self) -> None:
        # A short path: a socket's path may not exceed 107 bytes (pytest's tmp_path can be longer); not below /tmp,
        # which a Codex sandbox may write (app/launch.py uses no runtime directory there).
        self.dir = Path(tempfile.mkdtemp(prefix="crx-", dir=private_base()))
        os.chmod(self.dir, 0o700)
        # PYTHONSAFEPATH: `-m` puts no current directory first on sys.path, so one server serves every cwd.
        # CODEXR_SERVER_START_TIMEOUT: a loaded CI machine (or a server under strace) must not make a command
        # give up on its worker and run by itself, which these tests would take for a server that did not serve.
        self.env = {"CODEXR_SERVER": "1", "CODEXR_RUNTIME_DIR": str(self.dir), "PYTHONSAFEPATH": "1",
                    "PYTHONPATH": str(REPO), "CODEXR_SERVER_START_TIMEOUT": "60"}

    def run(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
            **kw: object) -> subprocess.CompletedProcess[str]:
        full = {**os.environ, **(env or {}), **self.env}
        return subprocess.run([sys.executable, "-m", "app", *args], env=full, cwd=cwd or REPO,
                              capture_output=True, text=True, timeout=START_S, **kw)  # type: ignore[call-overload]

    def start(self, **kw: object) -> None:
        res = self.run("server", "start", "--wait", str(START_S), **kw)
        assert res.returncode == 0 and "listening" in res.stdout, show(res)

    def log(self) -> str:
        return "".join(p.read_text(errors="replace") for p in self.dir.glob("*.log"))

    def served(self) -> list[tuple[int, int, str]]:
        """(worker pid, client pid, command) of every command a server ran."""
        return [(int(w), int(c), cmd) for w, c, cmd in re.findall(r"worker (\d+): client (\d+): (\S+)", self.log())]

    def pids(self) -> list[int]:
        out = []
        for pid_file in self.dir.glob("*.sock.pid"):
            out.append(int(json.loads(pid_file.read_text())["pid"]))
        return out

    def stop(self) -> None:
        pids = self.pids()
        res = self.run("server", "stop")
        assert res.returncode == 0, show(res)
        for pid in pids:
            assert not alive(pid), (f"server {pid} still runs after `codexr server stop` ({res.stdout.strip()}); "
                                    f"its children {children(pid)}; its log:\n{self.log()[-2000:]}")
        shutil.rmtree(self.dir, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie does not)."""
    return state(pid) not in ("", "Z")


def wait_until(cond: object, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not cond():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {seconds:g} s waiting for {what}")
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            out += [int(x) for x in (task / "children").read_text().split()]
    return out


@contextmanager
def slow_exec(servers: Servers, tmp_path: Path, prompt: str) -> Iterator[tuple[subprocess.Popen[bytes], ScriptedModel]]:
    """`codexr exec PROMPT` through the server, its turn paused for a minute at the model; killed afterwards."""
    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    with ScriptedModel() as model:
        model.script(prompt, [pause(60), message("too late")])
        env = {**os.environ, **servers.env, "NO_PROXY": "127.0.0.1,localhost",
               **write_codex_home(tmp_path / "home", model.base_url)}
        # Its own process group, as a terminal's job is: one whose parent (this process) is in another group of
        # the session. In this process's group, which is orphaned when the suite runs under setsid or in a detached
        # tmux, the kernel would discard the stop of a SIGTSTP.
        proc = subprocess.Popen([sys.executable, "-m", "app", "exec", prompt], cwd=ws, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, process_group=0)
        try:
            wait_until(lambda: len(model.requests) > 0, 60, "the turn to reach the model")
            yield proc, model
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    yield s
    s.stop()


@pytest.fixture
def server_cli(tmp_path: Path, servers: Servers) -> Iterator[Cli]:
    tmp = Path(os.path.realpath(tmp_path))
    ws = tmp / "ws"
    ws.mkdir()
    servers.start()
    with ScriptedModel() as model:
        env = write_codex_home(tmp / "codex-home", model.base_url)
        yield Cli(model, tmp, tmp / "codex-home", ws, env, module="app", server_env=servers.env)


# ------------------------------------------------------------------------------------------ the launcher


def test_the_launchers_flag_table_is_the_parsers() -> None:
    parser = _Parser(prog="codexr", add_help=False)
    _add_global_flags(parser)
    takes_value = {opt for action in parser._actions if action.nargs != 0 for opt in action.option_strings}
    assert takes_value == set(oneshot.VALUE_FLAGS)


@pytest.mark.parametrize(("argv", "command"), [
    (["exec", "hi"], "exec"),
    (["-C", "/x", "snapshots", "list"], "snapshots"),
    (["--cd=/x", "--json", "threads"], "threads"),
    (["-c", "a=b", "--enable", "f", "rewind", "--to", "2"], "rewind"),
    (["--yolo", "exec", "hi"], "exec"),
    (["-Cx", "exec"], None),      # a value glued to a short flag: the parser decides, here
    (["--cod", "/bin/x", "exec"], None),  # an abbreviation argparse accepts
    (["--plain"], None), (["--version"], None), (["-h"], None), ([], None),
])
def test_the_launcher_finds_the_command(argv: list[str], command: str | None) -> None:
    assert oneshot.command_of(argv) == command


@pytest.mark.parametrize(("argv", "held"), [
    (["rewind", "--to", "2", "--yes"], True), (["--json", "-C", "/x", "redo"], True),
    (["snapshots", "restore", "abc", "--yes"], True), (["-C", "/x", "snapshots", "restore", "abc"], True),
    (["snapshots", "capture"], False), (["snapshots", "show", "restore"], False), (["snapshots"], False),
    (["exec", "rewind"], False), (["threads"], False), ([], False), (["-Cx", "rewind"], False),
])
def test_only_restoring_commands_hold_the_collector(argv: list[str], held: bool, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    """An agent turn (`exec`) or a capture keeps its collector: only a restore's process ends with its map."""
    import gc

    monkeypatch.setattr(oneshot, "_FOR_LIFE", False)
    assert gc.isenabled()
    try:
        oneshot.hold_collector(argv)
        assert gc.isenabled() is not held
    finally:
        gc.enable()


def test_only_one_shot_commands_may_go_to_a_server(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEXR_SERVER", "1")
    assert oneshot.server_wanted(["snapshots", "capture"])
    assert not oneshot.server_wanted([])  # the app
    assert not oneshot.server_wanted(["resume"]) and not oneshot.server_wanted(["demo"])
    assert not oneshot.server_wanted(["server", "stop"])
    monkeypatch.setenv("CODEXR_SERVER", "0")
    assert not oneshot.server_wanted(["snapshots", "capture"])


# ------------------------------------------------------------------------------------------ end to end

#: A one-shot command run without a server, with what a command may leave to its process's end: a thread still
#: writing, an atexit handler, output still in the buffer of a piped stdout.
ENDING = """
import atexit, sys, threading, time
from app import launch
def late():
    time.sleep(0.3)
    print("the thread's line")
atexit.register(lambda: print("atexit's line"))
threading.Thread(target=late).start()
print("buffered line")
sys.argv = ["codexr", *sys.argv[1:]]
sys.exit(launch.main())
"""


@pytest.mark.parametrize(("argv", "code"), [(["snapshots", "capture"], 0), (["snapshots", "show", "feedf00d"], 2)])
def test_a_one_shot_command_without_a_server_ends_as_its_process_would(tmp_path: Path, argv: list[str],
                                                                        code: int) -> None:
    """Without a server a command ends as the server's worker ends it (no interpreter teardown): its threads are
    joined, its atexit handlers run, its streams flushed, and its exit code is the command's."""
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "home"), "CODEXR_SERVER": "0", "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", ENDING, *argv], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == code, show(res)
    lines = res.stdout.splitlines()
    assert lines[0] == "buffered line" and lines[-2:] == ["the thread's line", "atexit's line"], show(res)


def test_a_one_shot_command_with_stdout_closed_ends_with_its_own_exit_code(tmp_path: Path) -> None:
    """A stdout closed before Python starts is no stream at all (sys.stdout is None): ending without the teardown
    took that for a failed flush and exited 120 where the capture had succeeded."""
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "home"), "CODEXR_SERVER": "0", "PYTHONPATH": str(REPO)}
    res = subprocess.run(["sh", "-c", 'exec "$0" -m app snapshots capture >&-', sys.executable], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "files" in res.stderr, show(res)


@pytest.mark.parametrize("module", ["app", "app.cli"])
def test_a_command_with_stderr_closed_captures_and_leaves_the_store_whole(tmp_path: Path, module: str) -> None:
    """With stderr closed before Python starts, the first file the command opened took fd 2 (where a child process
    such as git writes its errors), and the capture failed, exit 1, nothing on stdout. The closed descriptors get
    /dev/null: the capture prints its id, a full verify finds the store whole, and the snapshot holds the file."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kept.txt").write_text("kept\n")
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "home"), "CODEXR_SERVER": "0", "PYTHONPATH": str(REPO)}
    res = subprocess.run(["sh", "-c", f'exec "$0" -m {module} snapshots capture 2>&-', sys.executable], cwd=ws,
                         env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and re.fullmatch(r"[0-9a-f]{64}\n", res.stdout), show(res)
    verify = subprocess.run([sys.executable, "-m", "app", "snapshots", "verify", "--full"], cwd=ws, env=env,
                            capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0, show(verify)
    shown = subprocess.run([sys.executable, "-m", "app", "snapshots", "show", res.stdout.strip(), "--json"], cwd=ws,
                           env=env, capture_output=True, text=True, timeout=60)
    assert "kept.txt" in shown.stdout, show(shown)


#: A `sitecustomize` that counts the cyclic collector's passes started while the store's code runs (a frame of
#: snapshot_store/ on the stack) and writes the count at the process's end (`finish` runs atexit handlers; a server's
#: worker inherits both from the server).
COLLECTIONS_PROBE = """
import atexit, gc, os, sys
_started = []
def _count(phase, info):
    frame = sys._getframe(1)
    while phase == "start" and frame is not None:
        if "/snapshot_store/" in frame.f_code.co_filename:
            _started.append(info["generation"])
            return
        frame = frame.f_back
gc.callbacks.append(_count)
os.register_at_fork(after_in_child=_started.clear)  # a worker counts its own passes, not the server's
def _report():
    with open(os.path.join(os.environ["PROBE_OUT"], f"{os.getpid()}.txt"), "w") as out:
        out.write(f"{len(_started)} {' '.join(sys.argv[1:])}")
atexit.register(_report)
"""


@pytest.mark.parametrize("served", [False, True], ids=["alone", "server"])
def test_restoring_one_shot_commands_run_without_the_collector(servers: Servers, tmp_path: Path,
                                                               served: bool) -> None:
    """A restore decodes the target's whole map, entries in no reference cycle, and its process ends with it: the
    collector's passes over them were ~0.1 s of a one-shot 100,000-file rewind (oneshot.hold_collector). A capture (not
    restoring) keeps its collector, which shows the probe sees the passes a restore made before."""
    ws, probe, out = tmp_path / "ws", tmp_path / "probe", tmp_path / "out"
    for d in (ws, probe, out):
        d.mkdir()
    (probe / "sitecustomize.py").write_text(COLLECTIONS_PROBE)
    for i in range(6000):  # a map past mapcache.MIN_ENTRIES, as a big workspace's is
        (ws / f"f{i}.txt").write_text(f"{i}\n")
    for git in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "files"]):
        subprocess.run(["git", *git], cwd=ws, check=True)  # tracked: captured however many
    servers.env.update({"CODEX_HOME": str(tmp_path / "home"), "PROBE_OUT": str(out), "PYTHONPATH": f"{probe}:{REPO}",
                        "CODEXR_SERVER": "1" if served else "0"})
    if served:
        servers.start()
    first = servers.run("snapshots", "capture", cwd=ws)
    assert first.returncode == 0, show(first)
    (ws / "f1.txt").write_text("changed\n")
    restored = servers.run("snapshots", "restore", first.stdout.strip(), "--yes", cwd=ws)
    assert restored.returncode == 0 and (ws / "f1.txt").read_text() == "1\n", show(restored)
    counts = dict(reversed(p.read_text().split(" ", 1)) for p in out.glob("*.txt"))
    assert set(counts) >= {"snapshots capture", f"snapshots restore {first.stdout.strip()} --yes"}, counts
    assert int(counts["snapshots capture"]) > 0, counts
    assert counts[f"snapshots restore {first.stdout.strip()} --yes"] == "0", counts
    if served:
        assert {cmd for _w, _c, cmd in servers.served()} == {"snapshots"}, servers.log()


def test_one_shot_commands_import_without_the_collector(tmp_path: Path) -> None:
    """Without a server (a Mac), a one-shot command imports codexr's modules without the collector's passes (~3 ms
    of a ~50 ms unchanged capture, oneshot.hold_startup), then lets it run for the store's work, except where the
    command runs without it (a restore)."""
    ws, probe, out = tmp_path / "ws", tmp_path / "probe", tmp_path / "out"
    for d in (ws, probe, out):
        d.mkdir()
    (probe / "sitecustomize.py").write_text(MODULE_IMPORT_PROBE)
    (ws / "a.txt").write_text("a\n")
    env = {**os.environ, "CODEX_HOME": str(tmp_path / "home"), "PROBE_OUT": str(out), "PYTHONPATH": f"{probe}:{REPO}",
           "CODEXR_SERVER": "0", "CODEXR_MONITOR": "0", "PROBE_REPO": f"{REPO}/"}

    def run(*args: str) -> tuple[int, bool]:
        for p in out.glob("*.txt"):
            p.unlink()
        res = subprocess.run([sys.executable, "-m", "app", *args], env=env, cwd=ws, capture_output=True, text=True,
                             timeout=120)
        assert res.returncode == 0, show(res)
        (report,) = [p.read_text().split(" ", 2) for p in out.glob("*.txt")]
        assert report[2] == " ".join(args), report
        return int(report[0]), report[1] == "1"

    snap = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture"], env=env, cwd=ws,
                          capture_output=True, text=True, timeout=120).stdout.strip()
    assert run("snapshots", "capture") == (0, True)  # no pass while importing; the collector on for the walk
    (ws / "a.txt").write_text("changed\n")
    assert run("snapshots", "restore", snap, "--yes") == (0, False)
    assert (ws / "a.txt").read_text() == "a\n"


def test_a_one_shot_exec_imports_the_sdk_without_the_collector_and_runs_its_turn_with_it(tmp_path: Path) -> None:
    """The SDK's ~1,000 models made ~195 of the collector's passes while a one-shot `exec` imported them (~40 ms, and
    the import ~60 ms slower in all); the agent turn that follows, which may run for hours, has its collector."""
    ws, probe, out = tmp_path / "ws", tmp_path / "probe", tmp_path / "out"
    for d in (ws, probe, out):
        d.mkdir()
    (probe / "sitecustomize.py").write_text(MODULE_IMPORT_PROBE)
    with ScriptedModel() as model:
        model.script("hello", [message("hello back")])
        env = {**os.environ, **write_codex_home(tmp_path / "home", model.base_url), "PROBE_OUT": str(out),
               "PROBE_MODULE": "/app/session.py", "PYTHONPATH": f"{probe}:{REPO}", "CODEXR_SERVER": "0",
               "NO_PROXY": "127.0.0.1,localhost"}
        res = subprocess.run([sys.executable, "-m", "app", "exec", "hello"], cwd=ws, env=env, capture_output=True,
                             text=True, timeout=START_S)
    assert res.returncode == 0 and "hello back" in res.stdout, show(res)
    reports = [p.read_text().split(" ", 2) for p in out.glob("*.txt")]
    (report,) = [r for r in reports if r[2] == "exec hello"]
    assert (report[0], report[1]) == ("0", "1"), report


@pytest.mark.parametrize(("argv", "held"), [
    (["snapshots", "capture"], True), (["-C", "/x", "threads"], True), (["rewind", "--to", "2"], True),
    (["exec", "hi"], True), (["--json", "exec", "hi"], True), ([], False), (["--bogus", "threads"], False),
])
def test_one_shot_commands_import_without_the_collector_until_imports_done(argv: list[str], held: bool,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the app (no command: it runs for as long as the user works), nor a command line only the app reads."""
    import gc

    monkeypatch.setattr(oneshot, "_FOR_LIFE", False)
    monkeypatch.setattr(oneshot, "_HELD", False)
    assert gc.isenabled()
    try:
        oneshot.hold_startup(argv)
        assert gc.isenabled() is not held
        oneshot.imports_done()
        assert gc.isenabled()
    finally:
        gc.enable()
        gc.unfreeze()


def test_the_rewind_and_redo_story_runs_in_the_server(server_cli: Cli, servers: Servers) -> None:
    """tests/test_cli_agent.py's rewind/redo story, every codexr command through the resident server."""
    agent_tests.test_threads_rewind_and_redo(server_cli)
    served = servers.served()
    assert {cmd for _w, _c, cmd in served} >= {"exec", "rewind", "threads", "redo"}, servers.log()
    assert len(served) >= 9, servers.log()
    assert "refused" not in servers.log()


def test_usage_errors_are_the_same_one_line_through_the_server(server_cli: Cli, servers: Servers) -> None:
    agent_tests.test_usage_errors_are_one_line(server_cli)
    assert len(servers.served()) >= 9, servers.log()


def test_exec_s_piped_stdin_is_told_apart_by_the_caller_s_process_tree_in_the_server(server_cli: Cli,
                                                                                      servers: Servers) -> None:
    """Through the server, whose worker's parents are the server's, not the caller's: a pipe the test process (the
    caller's parent) holds open is still not waited for, and one a command of the caller's pipeline writes slowly is
    (the worker asks about the caller's process tree, as the kernel named the caller)."""
    agent_tests.test_exec_fresh_workspace_text_and_json_never_waits_on_a_silent_stdin(server_cli)
    agent_tests.test_exec_waits_for_a_slow_command_of_its_own_pipeline_on_stdin(server_cli)
    assert len([c for _w, c, cmd in servers.served() if cmd == "exec"]) >= 3, servers.log()


def test_a_command_takes_the_callers_directory_environment_and_umask(servers: Servers, tmp_path: Path) -> None:
    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    # Past the racy-timestamp window (statcache.FINE_WINDOW_NS): both captures then save the same caches, whatever
    # the machine's load (a fresh clone's run once had one capture inside the window and one after).
    time.sleep(0.2)
    homes = {}
    for name in ("local", "server"):
        home = tmp_path / f"home-{name}"
        home.mkdir()
        env = {"CODEX_HOME": str(home)}
        if name == "local":
            env["CODEXR_SERVER"] = "0"
        full = {**os.environ, **servers.env, **env}
        res = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture", "--json"], cwd=ws, env=full,
                             capture_output=True, text=True, timeout=START_S,
                             preexec_fn=lambda: os.umask(0o077))
        assert res.returncode == 0, show(res)
        assert json.loads(res.stdout)["root"] == str(os.path.realpath(ws))
        homes[name] = home
    assert [c for _w, c, cmd in servers.served() if cmd == "snapshots"], "the capture did not run in the server"
    modes = {name: sorted((re.sub(r"\b[0-9a-f]{2,}\b", "ID", str(p.relative_to(h))), p.stat().st_mode & 0o777)
                          for p in h.rglob("*")) for name, h in homes.items()}
    assert modes["server"] == modes["local"]
    assert all(mode & 0o077 == 0 for _p, mode in modes["server"]), modes["server"]


def test_a_lower_file_size_limit_applies_to_the_command(servers: Servers, tmp_path: Path) -> None:
    """The diskfull soak and users' `ulimit -f` rely on it: the worker takes the caller's limits."""
    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "big.bin").write_bytes(os.urandom(300_000))
    results = {}
    for name in ("local", "server"):
        env = {**os.environ, **servers.env, "CODEX_HOME": str(tmp_path / f"home-{name}")}
        if name == "local":
            env["CODEXR_SERVER"] = "0"
        results[name] = subprocess.run(
            [sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws, env=env, capture_output=True, text=True,
            timeout=START_S, preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (100_000, 100_000)))
    assert any(cmd == "snapshots" for _w, _c, cmd in servers.served()), servers.log()
    for name, res in results.items():
        assert res.returncode == 2 and "Traceback" not in res.stderr, (name, show(res))
        assert "too large" in res.stderr.lower(), (name, show(res))
    assert results["server"].stderr == results["local"].stderr


def test_a_limit_the_server_cannot_take_means_the_command_runs_here(servers: Servers, tmp_path: Path) -> None:
    # The server starts with a lower hard limit on open files than its callers have: it cannot raise it.
    servers.start(preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    res = servers.run("snapshots", "capture", env={"CODEX_HOME": str(tmp_path / "home")}, cwd=ws)
    assert res.returncode == 0 and "1 file, " in res.stderr + res.stdout, show(res)
    assert "refused" in servers.log() and "RLIMIT" not in res.stderr, servers.log()


def test_ctrl_c_at_a_restore_prompt_reaches_the_command(servers: Servers, tmp_path: Path) -> None:
    """A terminal: the worker prompts on the caller's tty, reads the answer, and Ctrl+C interrupts it."""
    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    env = {**os.environ, **servers.env, "CODEX_HOME": str(tmp_path / "home")}
    first = json.loads(subprocess.run([sys.executable, "-m", "app", "snapshots", "capture", "--json"], cwd=ws,
                                      env=env, capture_output=True, text=True, check=True).stdout)["id"]
    (ws / "a.txt").write_text("two\n")
    child = pexpect.spawn(sys.executable, ["-m", "app", "snapshots", "restore", first], cwd=str(ws), env=env,
                          encoding="utf-8", timeout=60)
    child.expect(r"Apply this restore\?")
    child.sendintr()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 130, (child.exitstatus, child.signalstatus, child.before)
    assert (ws / "a.txt").read_text() == "two\n", "an interrupted restore changed the workspace"
    child = pexpect.spawn(sys.executable, ["-m", "app", "snapshots", "restore", first], cwd=str(ws), env=env,
                          encoding="utf-8", timeout=60)
    child.expect(r"Apply this restore\?")
    child.sendline("y")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, child.before
    assert (ws / "a.txt").read_text() == "one\n"
    assert len([1 for _w, _c, cmd in servers.served() if cmd == "snapshots"]) >= 3, servers.log()


def test_killing_the_caller_kills_the_command_and_its_codex(servers: Servers, tmp_path: Path) -> None:
    """SIGKILL of `codexr exec` mid-turn: the worker and its Codex app-server die with it, as they would have
    without a server (the command's process was the one killed)."""
    with slow_exec(servers, tmp_path, "take your time") as (proc, _model):
        worker = next(w for w, c, _cmd in servers.served() if c == proc.pid)
        codex = children(worker)
        assert codex, "the worker runs no Codex"
        proc.kill()
        proc.wait(10)
        wait_until(lambda: not alive(worker), 10, "the worker to die with its caller")
        wait_until(lambda: not any(alive(c) for c in codex), 20, "Codex to exit with the worker")


def test_sigterm_of_the_caller_ends_the_command_the_same_way(servers: Servers, tmp_path: Path) -> None:
    with slow_exec(servers, tmp_path, "term me") as (proc, _model):
        proc.terminate()
        assert proc.wait(20) == -signal.SIGTERM  # the worker died of SIGTERM, and so does its caller


# ------------------------------------------------------------------------------------------ which server


def test_no_server_unless_its_directory_is_private(servers: Servers, tmp_path: Path) -> None:
    os.chmod(servers.dir, 0o755)
    ws = tmp_path / "ws"
    ws.mkdir()
    res = servers.run("snapshots", "capture", env={"CODEX_HOME": str(tmp_path / "home")}, cwd=ws)
    assert res.returncode == 0, show(res)
    time.sleep(0.5)
    assert not list(servers.dir.iterdir()), "a server used (or started in) a directory others can enter"
    os.chmod(servers.dir, 0o700)


def test_codexr_server_0_starts_nothing(servers: Servers, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    res = servers.run("snapshots", "capture", env={"CODEX_HOME": str(tmp_path / "home")}, cwd=ws)
    assert res.returncode == 0, show(res)
    wait_until(lambda: bool(servers.pids()), START_S, "the first command to start a server")  # it does, by default
    servers.stop()
    servers.dir.mkdir(mode=0o700)
    env = {"CODEX_HOME": str(tmp_path / "home"), "CODEXR_SERVER": "0"}
    res = subprocess.run([sys.executable, "-m", "app", "snapshots", "capture"], cwd=ws,
                         env={**os.environ, **servers.env, **env}, capture_output=True, text=True)
    assert res.returncode == 0, show(res)
    time.sleep(0.5)
    assert not list(servers.dir.iterdir()), "CODEXR_SERVER=0 started a server"


def copied_codexr(tmp_path: Path) -> Callable[[], str]:
    """codexr's packages copied below `tmp_path`; the server key a process importing that copy computes."""
    for pkg in runtime.PACKAGES:
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    key = [sys.executable, "-c", "from app.server.runtime import server_key; print(server_key())"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONSAFEPATH": "1"}
    return lambda: subprocess.run(key, env=env, capture_output=True, text=True, check=True).stdout.strip()


def test_changed_code_is_never_served_by_an_old_server(tmp_path: Path) -> None:
    """A server is keyed by the stat of every source file: an edited (or upgraded) codexr gets a new one."""
    server_key = copied_codexr(tmp_path)
    first = server_key()
    again = server_key()
    assert first == again and re.fullmatch(r"[0-9a-f]{24}", first)
    source = tmp_path / "snapshot_store" / "restore" / "apply.py"  # a subpackage's file counts too
    source.write_text(source.read_text() + "\n# edited\n")
    edited = server_key()
    assert edited != first


def test_an_idle_server_exits_and_removes_its_socket(servers: Servers) -> None:
    servers.start(env={"CODEXR_SERVER_IDLE": "1"})
    (pid,) = servers.pids()
    wait_until(lambda: not alive(pid), 30, "the idle server to exit")
    assert not list(servers.dir.glob("*.sock")) and not list(servers.dir.glob("*.pid"))


def test_server_status_and_doctor_name_the_running_server(servers: Servers, tmp_path: Path) -> None:
    servers.start()
    res = servers.run("server", "status", "--json")
    assert res.returncode == 0, show(res)
    doc = json.loads(res.stdout)
    (s,) = doc["servers"]
    assert s["alive"] and s["current"] and s["pid"] in servers.pids(), doc
    res = servers.run("doctor", "--json", env={"CODEX_HOME": str(tmp_path / "home")})
    checks = {c["name"]: c for c in json.loads(res.stdout)["checks"]}
    assert checks["server"]["status"] == "ok" and f"running, pid {s['pid']}" in checks["server"]["message"], checks


def test_ctrl_z_stops_the_command_and_fg_continues_it(servers: Servers, tmp_path: Path) -> None:
    """Job control: a stopped `codexr exec` must not go on working (and writing) behind the shell's back."""
    with slow_exec(servers, tmp_path, "stop me") as (proc, _model):
        worker = next(w for w, c, _cmd in servers.served() if c == proc.pid)
        proc.send_signal(signal.SIGTSTP)
        wait_until(lambda: state(proc.pid) == "T" and state(worker) == "T", 10, "the caller and its worker to stop")
        proc.send_signal(signal.SIGCONT)
        wait_until(lambda: state(proc.pid) != "T" and state(worker) != "T", 10, "both to continue")


def state(pid: int) -> str:
    """A process's state letter (R, S, T for stopped, Z...), or "" when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def test_a_caller_gone_right_after_its_request_leaves_no_traceback_and_the_server_serving(
        servers: Servers, tmp_path: Path) -> None:
    """The soak --server found it: a caller killed between sending its request and reading the answer made the
    worker's `ok` fail with EPIPE, and the traceback went to the caller's stderr (a fork must end quietly)."""
    import socket

    servers.start()
    (sock_path,) = [str(p) for p in servers.dir.glob("*.sock")]
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, **servers.env, "CODEX_HOME": str(tmp_path / "home")}
    for _ in range(3):
        err_r, err_w = os.pipe()
        out_r, out_w = os.pipe()
        cwd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
        body = subprocess.run(  # the request a real caller in `ws` sends, made by the launcher itself
            [sys.executable, "-c", "import sys; from app import launch; "
             "sys.stdout.buffer.write(launch._request(['snapshots', 'capture']))"],
            env=env, cwd=ws, capture_output=True, check=True).stdout
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(sock_path)
            socket.send_fds(s, [b"CRX1" + b"%012d" % len(body)], [cwd, 0, out_w, err_w])
            s.sendall(body)
        os.close(cwd)
        os.close(out_w)
        os.close(err_w)
        with os.fdopen(err_r, "rb") as err, os.fdopen(out_r, "rb") as out:
            said = err.read().decode(errors="replace") + out.read().decode(errors="replace")
        assert "Traceback" not in said, said
    res = servers.run("snapshots", "capture", env={"CODEX_HOME": str(tmp_path / "home")}, cwd=ws)
    assert res.returncode == 0, show(res)
    assert len(servers.pids()) == 1 and all(alive(p) for p in servers.pids())
    assert len(list(servers.dir.glob("*.sock"))) == 1


def test_a_caller_that_connects_and_says_nothing_blocks_no_one(servers: Servers, tmp_path: Path) -> None:
    """The server only accepts and forks; its worker reads the caller. Two connections held open without a word
    (a hung or hostile process of the user's) leave the next command served at once, through the server."""
    import socket

    servers.start()
    (sock_path,) = [str(p) for p in servers.dir.glob("*.sock")]
    ws = tmp_path / "ws"
    ws.mkdir()
    with socket.socket(socket.AF_UNIX) as a, socket.socket(socket.AF_UNIX) as b:
        a.connect(sock_path)
        b.connect(sock_path)
        res = servers.run("snapshots", "capture", env={"CODEX_HOME": str(tmp_path / "home")}, cwd=ws)
    assert res.returncode == 0 and "did not answer" not in res.stderr, show(res)
    assert [cmd for _w, _c, cmd in servers.served()] == ["snapshots"], servers.log()


def test_commands_arriving_alone_or_together_are_each_served(servers: Servers, tmp_path: Path) -> None:
    """Callers one after another, or two at once, at uneven intervals: each gets a worker of its own, none is
    dropped or run twice."""
    import random

    servers.start()
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("a\n")
    env = {**os.environ, **servers.env, "CODEX_HOME": str(tmp_path / "home")}
    res = servers.run("snapshots", "capture", env={"CODEX_HOME": str(tmp_path / "home")}, cwd=ws)
    assert res.returncode == 0, show(res)
    rng = random.Random(5)
    outputs = []
    for i in range(16):
        procs = [subprocess.Popen([sys.executable, "-m", "app", "snapshots", "list"], cwd=ws, env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2 if i % 3 == 0 else 1)]
        for proc in procs:
            out, err = proc.communicate(timeout=START_S)
            assert proc.returncode == 0 and "Traceback" not in err, (out, err)
            outputs.append(out)
        time.sleep(rng.uniform(0.0, 0.3))
    assert len(set(outputs)) == 1 and outputs[0].strip(), outputs
    assert len(servers.served()) == 1 + len(outputs), servers.log()
    assert "refused" not in servers.log(), servers.log()


def test_server_stop_removes_what_gone_servers_left_and_nothing_of_a_live_one(servers: Servers) -> None:
    """Every codexr build (each edit, in development) leaves a lock and a log; `server stop` prunes those nobody
    holds, and never one whose lock is held (a server, or one starting)."""
    import fcntl

    servers.start()
    gone = servers.dir / "s-000000000000000000000000.sock"
    for suffix in (".lock", ".log"):
        Path(f"{gone}{suffix}").write_text("")
    held = servers.dir / "s-111111111111111111111111.sock"
    Path(f"{held}.log").write_text("starting\n")
    fd = os.open(f"{held}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        res = servers.run("server", "stop")
        assert res.returncode == 0, show(res)
        left = sorted(p.name for p in servers.dir.iterdir())
        assert left == [f"{held.name}.lock", f"{held.name}.log"], left
    finally:
        os.close(fd)
