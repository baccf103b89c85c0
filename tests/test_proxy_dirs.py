"""`codexr codex`'s private directories (`proxy-*`: its socket and the app-server's log; app/proxy/leftovers.py,
issue 30): a run killed with SIGKILL leaves its directory behind, and the next start removes it — never a live
run's, never through a symlink, never another user's, nothing not named `proxy-*`.

The owners are real processes: the official TUI through `codexr codex` in tmux, and processes that claim a directory
and are killed at random instants or at a chosen syscall (strace's fault injection).
"""

from __future__ import annotations

import contextlib
import os
import random
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_server import private_base, wait_until
from test_tui_tmux import Tmux

from app.codex.scripted_model import ScriptedModel, write_codex_home

REPO = Path(__file__).resolve().parents[1]
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="changes credentials: CI runs as root")


@pytest.fixture
def base() -> Iterator[Path]:
    """A private runtime directory (mode 700, not below /tmp, a short path), removed after the test."""
    path = Path(tempfile.mkdtemp(prefix="crp-", dir=private_base()))
    os.chmod(path, 0o700)
    yield path
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)


def proxy_dirs(base: Path) -> set[str]:
    return {p.name for p in base.iterdir() if p.name.startswith("proxy-")}


def family(pid: int) -> list[tuple[int, bytes]]:
    """`pid` and every process below it, each with its start time (to tell it from a later process of that pid)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError, IndexError):
                ppid = int(Path(f"/proc/{entry}/stat").read_bytes().rpartition(b")")[2].split()[1])
                parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(OSError, IndexError):
            out.append((p, Path(f"/proc/{p}/stat").read_bytes().rpartition(b")")[2].split()[19]))
        todo += parents.get(p, [])
    return out


def dead(pid: int) -> bool:
    """`pid` has exited: a zombie, or gone (also between a look at /proc and the read of its stat, seen in a run)."""
    try:
        return b") Z" in Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return True


def kill_family(members: list[tuple[int, bytes]]) -> None:
    """SIGKILL each process of `members` that is still the one recorded (same pid, same start time)."""
    for pid, start in members:
        with contextlib.suppress(OSError, IndexError):
            if Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()[19] == start:
                os.kill(pid, signal.SIGKILL)


def codexr_in(ws: Path) -> int:
    """The pid of the `codexr codex` running in `ws`."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                if b"app.cli" in argv and b"codex" in argv and os.readlink(f"/proc/{entry}/cwd") == str(ws):
                    return int(entry)
    raise AssertionError(f"no codexr codex runs in {ws}")


class Run:
    """One `codexr codex` in a tmux of its own, in a workspace of its own, against the scripted model."""

    def __init__(self, tmp: Path, name: str, base: Path, model: ScriptedModel) -> None:
        root = tmp / name
        self.ws, home = root / "ws", root / "home"
        self.ws.mkdir(parents=True)
        self.tmux = Tmux(root)
        env = {**write_codex_home(home, model.base_url), "PYTHONPATH": str(REPO), "NO_PROXY": "127.0.0.1,localhost",
               "TERM": "xterm-256color", "CODEXR_SERVER": "0", "CODEXR_RUNTIME_DIR": str(base)}
        assign = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        self.tmux.start(f"cd {shlex.quote(str(self.ws))} && env -u COLUMNS -u LINES {assign} "
                        f"{shlex.quote(sys.executable)} -m app.cli codex")
        self.tmux.wait(lambda s: "Use existing model" in s or "Ask Codex" in s or "describe a task" in s,
                       f"the official TUI's first screen ({name})")


def test_a_killed_codexr_codex_leaves_no_directory_after_the_next_start(tmp_path: Path, base: Path) -> None:
    """SIGKILL a real `codexr codex` (the official TUI on a terminal): its directory stays until the next start,
    which removes it and keeps the directory of a run still going."""
    runs: list[Run] = []
    try:
        with ScriptedModel() as model:
            live = Run(tmp_path, "live", base, model)
            runs.append(live)
            (live_dir,) = proxy_dirs(base)
            killed = Run(tmp_path, "killed", base, model)
            runs.append(killed)
            (killed_dir,) = proxy_dirs(base) - {live_dir}
            members = family(codexr_in(killed.ws))
            os.kill(members[0][0], signal.SIGKILL)  # codexr itself: no `finally` of its runs
            wait_until(lambda: dead(members[0][0]), 30, "codexr to die")
            kill_family(members[1:])  # its TUI and app-server, which this test started
            killed.tmux.kill()
            assert proxy_dirs(base) == {live_dir, killed_dir}, "the killed run's directory went by itself"

            runs.append(Run(tmp_path, "next", base, model))
            left = proxy_dirs(base)
            assert killed_dir not in left, "the next start left the killed run's directory"
            assert live_dir in left, "the next start removed a live run's directory"
            assert (base / live_dir / "app-server.sock").is_socket()
            assert len(left) == 2
            for run in runs:  # a terminal closed: each run ends and removes its own directory
                run.tmux.kill()
            wait_until(lambda: not proxy_dirs(base), 60, "the runs to remove their directories")
    finally:
        for run in runs:
            run.tmux.kill()


CLAIM = """
import sys
from app.proxy.leftovers import claim
print(claim(sys.argv[1]), flush=True)
sys.stdin.read()
"""

LISTEN = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(1)
print("listening", flush=True)
sys.stdin.read()
"""

SWEEP = "import sys; from app.proxy.leftovers import sweep; print(' '.join(sweep(sys.argv[1])))"


def python(code: str, *args: str) -> subprocess.Popen[str]:
    """A Python process running `code` with this repository importable, its stdin and stdout pipes."""
    return subprocess.Popen([sys.executable, "-c", code, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, cwd=REPO)


def sweep_from_another_process(base: Path) -> set[str]:
    res = subprocess.run([sys.executable, "-c", SWEEP, str(base)], capture_output=True, text=True, cwd=REPO,
                         timeout=60, check=True)
    return set(res.stdout.split())


def end(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.close()
    proc.stdout.close()


def test_only_directories_whose_owner_is_gone_are_removed(tmp_path: Path, base: Path) -> None:
    """The owner's lock decides, or for a directory of a codexr from before the lock its socket listening; a
    symlink, a file, another name, a lock that is a symlink: left as they are, and nothing outside is touched."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    live, doomed = python(CLAIM, str(base)), python(CLAIM, str(base))
    assert live.stdout is not None and doomed.stdout is not None
    live_dir, doomed_dir = Path(live.stdout.readline().strip()), Path(doomed.stdout.readline().strip())
    end(doomed)  # SIGKILL
    old_dead, old_live = base / "proxy-olddead", base / "proxy-oldlive"
    for d in (old_dead, old_live):
        d.mkdir(mode=0o700)
        (d / "app-server.log").write_text("log\n")
    with socket.socket(socket.AF_UNIX) as s:  # a socket file nobody listens on any more
        s.bind(str(old_dead / "app-server.sock"))
        s.listen(1)
    listener = python(LISTEN, str(old_live / "app-server.sock"))
    assert listener.stdout is not None and listener.stdout.readline().strip() == "listening"
    (base / "proxy-link").symlink_to(outside, target_is_directory=True)
    (base / "proxy-file").write_text("a file\n")
    (base / "other-dir").mkdir()
    trap = base / "proxy-trap"
    trap.mkdir()
    (trap / "owner.lock").symlink_to(outside / "precious.txt")
    try:
        assert sweep_from_another_process(base) == {doomed_dir.name, old_dead.name}
        assert live_dir.is_dir() and (live_dir / "owner.lock").is_file()
        assert old_live.is_dir() and (old_live / "app-server.log").exists()
        assert not (old_live / "owner.lock").exists(), "a lock made by the sweep would vouch for nothing later"
        assert sorted(p.name for p in base.iterdir()) == sorted(
            ["other-dir", "proxy-file", "proxy-link", "proxy-trap", live_dir.name, "proxy-oldlive"])
        assert (outside / "precious.txt").read_text() == "keep me\n" and (base / "proxy-link").is_symlink()
        end(listener)
        assert sweep_from_another_process(base) == {"proxy-oldlive"}
        end(live)
        assert sweep_from_another_process(base) == {live_dir.name}
    finally:
        for proc in (live, doomed, listener):
            if proc.poll() is None:
                end(proc)
    assert (outside / "precious.txt").read_text() == "keep me\n"


@needs_root
def test_another_users_directory_is_left_alone(base: Path) -> None:
    """A `proxy-*` directory of another uid in the base directory (nobody's lock, no socket) is not removed."""
    theirs = base / "proxy-theirs"
    theirs.mkdir()
    (theirs / "app-server.log").write_text("theirs\n")
    os.chown(theirs, 65534, 65534)
    assert sweep_from_another_process(base) == set()
    assert (theirs / "app-server.log").read_text() == "theirs\n"


def test_a_claim_killed_before_its_lock_is_held_is_removed_by_the_next(base: Path) -> None:
    """Killed at its flock (strace's fault injection): the directory and its lock file exist, nobody holds the
    lock; the next start removes it and makes its own."""
    subprocess.run(["strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=flock", "-e",
                    "inject=flock:signal=KILL:when=1", sys.executable, "-c", CLAIM, str(base)],
                   stdin=subprocess.DEVNULL, capture_output=True, cwd=REPO, timeout=60, check=False)
    (left,) = proxy_dirs(base)
    assert (base / left / "owner.lock").exists()
    assert sweep_from_another_process(base) == {left}


def test_concurrent_starts_and_kills_never_remove_a_live_directory(base: Path) -> None:
    """Real processes claim and sweep at once, some killed at random instants: every survivor's directories are all
    there each time it looks, and once all are gone one sweep leaves nothing."""
    worker = """
import os, sys
from pathlib import Path
from app.proxy.leftovers import claim, sweep
mine = []
for _ in range(int(sys.argv[2])):
    mine.append(claim(sys.argv[1]))
    sweep(sys.argv[1])
    lost = [str(d) for d in mine if not (d / "owner.lock").is_file()]
    if lost:
        print("LOST", lost, flush=True)
        sys.exit(1)
print("ok", flush=True)
"""
    rng = random.Random(30)
    procs = [subprocess.Popen([sys.executable, "-c", worker, str(base), "40"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=REPO) for _ in range(6)]
    victims = procs[:2]
    for victim in victims:
        time.sleep(rng.uniform(0.2, 0.8))
        victim.kill()
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        if proc in victims and proc.returncode == -signal.SIGKILL:
            continue
        assert proc.returncode == 0 and out.strip() == "ok", (out, err)
    sweep_from_another_process(base)
    assert proxy_dirs(base) == set()
