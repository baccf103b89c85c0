"""Helpers for the end-to-end session tests: a real Codex app-server driven by the scripted model.

`Rig` bundles a fresh CODEX_HOME, a workspace and a started `Session` pointed at a (shared)
`ScriptedModel`. Tests build rigs through `RigFactory.make()`; the factory closes everything at teardown.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import codex_cli_bin
from store_helpers import git

from app.codex.scripted_model import ScriptedModel, write_codex_home
from app.session import ApprovalCallback, EventCallback, Session, SessionOptions, TurnOutcome
from config import CODEXR_FILE_NAME, load_settings

TURN_TIMEOUT_S = 30.0
PIPE_TIMEOUT_S = 60.0  # a bound on waiting for a piped session's output, not a timing assertion

# ------------------------------------------------------------------------------------------- trees

Tree = dict[str, tuple[str, bytes, int]]


def tree(root: Path, *, skip: tuple[str, ...] = (".git",)) -> Tree:
    """Every entry below `root` (files, symlinks, directories) with its content and permission bits."""
    out: Tree = {}
    for dirpath, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in skip)
        for name in [*dirs, *files]:
            p = Path(dirpath, name)
            rel = p.relative_to(root).as_posix()
            st = p.lstat()
            mode = stat.S_IMODE(st.st_mode)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p).encode(), 0)
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", b"", mode)
            else:
                out[rel] = ("file", p.read_bytes(), mode)
    return out


def files_only(t: Tree) -> dict[str, tuple[bytes, int]]:
    """Just the regular files of a tree listing."""
    return {k: (v[1], v[2]) for k, v in t.items() if v[0] == "file"}


def without(t: Tree, *paths: str) -> Tree:
    """A tree listing with some paths (and what is below them) left out."""
    return {k: v for k, v in t.items() if not any(k == p or k.startswith(p + "/") for p in paths)}


def tree_diff(a: Tree, b: Tree) -> str:
    """A readable description of how two tree listings differ."""
    lines = []
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            lines.append(f"{k}: {a.get(k)!r:.80} != {b.get(k)!r:.80}")
    return "\n".join(lines)


def rollout_hashes(home: Path) -> dict[str, str]:
    """sha256 of every file Codex keeps under sessions/ and archived_sessions/."""
    out = {}
    for sub in ("sessions", "archived_sessions"):
        base = home / sub
        if not base.exists():
            continue
        for dirpath, _dirs, files in os.walk(base):
            for f in files:
                p = Path(dirpath, f)
                out[p.relative_to(home).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def assert_rollouts_untouched(before: Mapping[str, str], after: Mapping[str, str], what: str) -> list[str]:
    """Existing rollout files kept their bytes; return the names of new ones."""
    changed = [p for p, h in before.items() if after.get(p) != h]
    assert not changed, f"{what} modified or removed existing rollout files: {changed}"
    return sorted(set(after) - set(before))


# ------------------------------------------------------------------------------------------- rigs


@dataclass
class Rig:
    """A fresh CODEX_HOME + workspace + started Session, all pointed at the shared scripted model."""

    model: ScriptedModel
    home: Path
    ws: Path
    env: dict[str, str]
    session: Session
    notices: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def turn(self, thread_id: str, text: str, on_event: EventCallback | None = None,
             timeout: float = TURN_TIMEOUT_S) -> TurnOutcome:
        """`session.run_turn`, bounded by `timeout` so a wedged Codex fails the test instead of hanging it."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["out"] = self.session.run_turn(thread_id, text, on_event)
            except BaseException as exc:  # surfaced below
                box["err"] = exc

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(timeout)
        if t.is_alive():
            tail = self.session.client._stderr_tail(20)
            raise AssertionError(f"turn {text!r} did not finish in {timeout}s; codex stderr tail:\n{tail}")
        if "err" in box:
            raise box["err"]
        out: TurnOutcome = box["out"]
        return out

    def tree(self) -> Tree:
        """The workspace tree (without .git)."""
        return tree(self.ws)

    def write(self, rel: str, data: str | bytes, mode: int | None = None) -> Path:
        """Write a file into the workspace as the user would (not the agent)."""
        p = self.ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
        if mode is not None:
            os.chmod(p, mode)
        return p

    def thread_ids(self) -> set[str]:
        """Every thread Codex lists (any workspace, archived excluded)."""
        resp = self.session.client.thread_list({"limit": 200})
        return {str(t.id) for t in resp.data}


class RigFactory:
    """Builds rigs below a test's tmp_path; `close()` stops their sessions."""

    def __init__(self, model: ScriptedModel, tmp: Path) -> None:
        self.model = model
        self.tmp = tmp
        self.rigs: list[Rig] = []

    def make(self, *, git_repo: bool = False, files: Mapping[str, str | bytes] | None = None,
             commit: bool = True, config_extra: str = "", approval: ApprovalCallback | None = None,
             approval_policy: str | None = None, sandbox: str | None = None, codex_bin: str | None = None,
             ws_in: Path | None = None) -> Rig:
        """A fresh CODEX_HOME (+ `config_extra` as its codexr.toml) and workspace (below `ws_in`, e.g. another
        volume, else the test's tmp), and a started Session (on the pinned Codex, or on `codex_bin`)."""
        n = len(self.rigs)
        home = self.tmp / f"home{n}"
        ws = (ws_in or self.tmp) / f"ws{n}"
        ws.mkdir(parents=True)
        env = write_codex_home(home, self.model.base_url)
        if config_extra:  # codexr's own settings, in codexr's own file
            (home / CODEXR_FILE_NAME).write_text(config_extra + "\n")
        if git_repo:
            git(ws, "-c", "init.defaultBranch=main", "init", "-q")
        for rel, data in (files or {}).items():
            p = ws / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data.encode() if isinstance(data, str) else data)
        if git_repo and files:
            git(ws, "add", "-A")
            if commit:
                git(ws, "commit", "-qm", "initial")
        notices: list[tuple[str, dict[str, Any]]] = []
        opts = SessionOptions(cwd=ws, codex_home=home, settings=load_settings(home), env=env,
                              approval_policy=approval_policy, sandbox=sandbox, codex_bin=codex_bin)
        session = Session(opts, approval=approval, on_notice=lambda m, p: notices.append((m, p)))
        rig = Rig(self.model, home, ws, env, session, notices)
        self.rigs.append(rig)
        return rig

    def close(self) -> None:
        """Stop every session (idempotent)."""
        for rig in self.rigs:
            rig.session.close()


def session_options(model: ScriptedModel, base: Path, files: Mapping[str, str | bytes] | None = None, *,
                    config_extra: str = "", approval_policy: str | None = None,
                    sandbox: str | None = None) -> SessionOptions:
    """A fresh CODEX_HOME and workspace below `base`, pointed at the scripted model (for drivers and UIs)."""
    home, ws = base / "home", base / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    env = write_codex_home(home, model.base_url)
    if config_extra:  # codexr's own settings, in codexr's own file
        (home / CODEXR_FILE_NAME).write_text(config_extra + "\n")
    for rel, data in (files or {}).items():
        p = ws / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data.encode() if isinstance(data, str) else data)
    return SessionOptions(cwd=ws, codex_home=home, settings=load_settings(home), env=env,
                          approval_policy=approval_policy, sandbox=sandbox)


def official_codex_exec(env: Mapping[str, str], cwd: Path, prompt: str) -> str:
    """Run `codex exec` of the pinned binary itself (not codexr) in `cwd`; return the thread it started."""
    res = subprocess.run([str(codex_cli_bin.bundled_codex_path()), "exec", "--skip-git-repo-check", "--json", prompt],
                         cwd=cwd, env={**os.environ, "NO_PROXY": "127.0.0.1,localhost", **env},
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, f"codex exec failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    started = [e["thread_id"] for e in events if e.get("type") == "thread.started"]
    assert len(started) == 1 and any(e.get("type") == "turn.completed" for e in events), res.stdout
    return str(started[0])


class PipeSession:
    """Another live `codexr --plain` in the same workspace, fed by a pipe and kept running (a second session)."""

    def __init__(self, ws: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "app.cli", "--plain"], cwd=ws, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=lambda: [self.lines.put(ln) for ln in self.proc.stdout or ()], daemon=True).start()

    def until(self, text: str) -> None:
        deadline = time.monotonic() + PIPE_TIMEOUT_S
        while not any(text in ln for ln in self.seen):
            try:
                self.seen.append(self.lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no {text!r}; output so far:\n{''.join(self.seen)}") from None

    def prompt(self, text: str) -> None:
        """Send a prompt and wait for its turn to end."""
        done = sum("-- turn " in ln for ln in self.seen)
        assert self.proc.stdin is not None
        self.proc.stdin.write(text + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + PIPE_TIMEOUT_S
        while sum("-- turn " in ln for ln in self.seen) <= done:
            try:
                self.seen.append(self.lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError(f"no end of turn; output so far:\n{''.join(self.seen)}") from None

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(PIPE_TIMEOUT_S)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()



def processes_running(needle: str) -> list[int]:
    """Pids of live processes whose command line contains `needle` (read from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = next((ln for ln in (entry / "status").read_text().splitlines() if ln.startswith("State:")), "")
        except OSError:
            continue
        if needle in cmdline and "zombie" not in state:
            out.append(int(entry.name))
    return out


def wait_gone(needle: str, timeout: float = PIPE_TIMEOUT_S) -> None:
    """Wait until no live process runs `needle` (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while processes_running(needle):
        if time.monotonic() > deadline:
            raise AssertionError(f"still running: {needle!r} (pids {processes_running(needle)})")
        time.sleep(0.1)
