"""The change monitor (snapshot_store/detect/monitor*.py): a capture that trusts its answer records
every change, and a monitor it cannot trust — restarted, overflowed, lying, garbage, another user's or another
confinement's — makes it check on its own. Every monitor here is a real process; captures run as one-shot commands
do (a fresh store each), in this process so that which look a capture took can be seen.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from store_helpers import age_tree, make_repo
from test_server import private_base, wait_until

import snapshot_store.detect.monitor as monitor_mod
from app.server.runtime import monitors_wanted
from snapshot_store import Store
from snapshot_store.capture import CaptureResult
from snapshot_store.detect.monitor_launch import Launcher, socket_for

REPO = Path(__file__).resolve().parent.parent
ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="changes credentials: CI runs as root")


class Monitors:
    """A private runtime directory for monitors, the captures that use them, and which look each capture took."""

    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="crm-", dir=private_base()))
        os.chmod(self.dir, 0o700)
        monkeypatch.setenv("CODEXR_RUNTIME_DIR", str(self.dir))
        monkeypatch.setenv("CODEXR_MONITOR", "1")
        monkeypatch.setenv("CODEXR_MONITOR_IDLE", "120")
        self.home = tmp_path / "home"
        self.looks: list[bool] = []  # per capture that got a bound answer: True when the monitor's look settled it
        real = monitor_mod.check_since

        def spy(*args: object, **kw: object) -> object:
            out = real(*args, **kw)  # type: ignore[arg-type]
            self.looks.append(out is not None)
            return out

        monkeypatch.setattr(monitor_mod, "check_since", spy)

    def capture(self, ws: Path) -> CaptureResult:
        """A pre-turn capture as `codexr exec` makes one, in a fresh store with the monitor attached."""
        store = Store.open(self.home / "file_snapshots", protected=[self.home])
        store.capturer.use_monitors(monitors_wanted())  # as app/cmds/context.py does
        try:
            return store.at(ws).capture_thread(known_paths=(), kind="pre-turn")
        finally:
            store.close()

    def session(self, ws: Path) -> Store:
        """A long-running session's store (`codexr exec`, the app): the monitor attached and a journal of its own."""
        store = Store.open(self.home / "file_snapshots", protected=[self.home])
        store.capturer.use_monitors(monitors_wanted())
        assert store.capturer.watch(ws)
        return store

    def content(self, snap: str, rel: str) -> bytes:
        store = Store.open(self.home / "file_snapshots", protected=[self.home])
        try:
            entry = store.files(snap)[rel]
            assert entry.kind == "f", entry
            return b"".join(store.blob_chunks(entry.blob))  # type: ignore[union-attr]
        finally:
            store.close()

    def pid(self, ws: Path) -> int:
        path = socket_for(str(ws))
        assert path is not None
        return int(Path(path + ".lock").read_text())

    def up(self, ws: Path) -> None:
        """Wait until the workspace's monitor answers (the first capture started it)."""
        wait_until(lambda: Launcher().ask(str(ws), None) is not None, 30, "the change monitor")

    def running(self) -> list[int]:
        """The monitor processes whose socket lies in this runtime directory, alive (not a zombie)."""
        return monitor_pids(self.dir)

    def stop(self) -> None:
        for pid in self.running():  # found by their command line, never by a pid a dead monitor's lock still names
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for p in self.dir.iterdir():
            p.unlink()
        self.dir.rmdir()


def monitor_pids(run_dir: Path) -> list[int]:
    """Change monitor processes serving a socket in `run_dir` (their command line says so), all alive (not a zombie)
    at one instant: /proc is read one process after another, so each found one is looked at again after the pass —
    alive at both looks, every one of them was alive at the start of the second. A monitor's own child between its
    fork and its exec (ctypes' find_library runs ldconfig) shows the monitor's command line too: not counted."""

    def parent_if_monitor(pid: str) -> str | None:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
        except (OSError, IndexError):
            return None
        if (len(argv) >= 5 and b"from snapshot_store.detect.monitor_launch import main" in argv[2]
                and fields[0] != b"Z" and os.fsdecode(argv[4]).startswith(f"{run_dir}/")):
            return fields[1].decode()
        return None

    found = {pid: parent for pid in os.listdir("/proc") if pid.isdigit()
             and (parent := parent_if_monitor(pid)) is not None}
    return [int(pid) for pid, parent in found.items() if parent not in found and parent_if_monitor(pid) is not None]


@pytest.fixture
def mons(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Monitors]:
    m = Monitors(tmp_path, monkeypatch)
    yield m
    m.stop()


def workspace(tmp_path: Path) -> Path:
    files = {f"src/m{i}.py": f"print({i})\n" for i in range(20)}
    files.update({f"src/deep/d{i}.txt": f"deep {i}\n" for i in range(5)})
    ws = make_repo(tmp_path / "ws", files).resolve()
    age_tree(ws)  # no racy stat: a key the monitor does not vouch for would be looked at anyway
    return ws


def settled(mons: Monitors, ws: Path) -> str:
    """Captures until one's token is bound and the monitor vouched for the next: the id of the last one."""
    mons.capture(ws)  # starts the monitor (this one checks on its own)
    mons.up(ws)
    mons.capture(ws)  # asks for a token, binds it to the walk it saves
    mons.looks.clear()
    res = mons.capture(ws)
    assert mons.looks == [True], "the monitor's answer was not used: these tests would prove nothing"
    mons.looks.clear()
    return res.id


def test_a_file_changed_between_two_captures_is_recorded_through_the_monitor(mons: Monitors, tmp_path: Path) -> None:
    """The monitor settles the capture (nothing else is looked at), and the changed file's new content is in it."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    (ws / "src/m3.py").write_text("print('changed')\n")
    (ws / "src/deep/d1.txt").write_text("deep changed\n")
    res = mons.capture(ws)
    assert mons.looks == [True]
    assert mons.content(res.id, "src/m3.py") == b"print('changed')\n"
    assert mons.content(res.id, "src/deep/d1.txt") == b"deep changed\n"
    mons.looks.clear()
    res = mons.capture(ws)  # and nothing more: the next answer is about this capture's look
    assert mons.looks == [True] and res.unchanged


@pytest.mark.parametrize("how", ["an editor's save", "a restore"])
def test_a_file_saved_over_a_temporary_one_is_recorded_through_the_monitor(mons: Monitors, tmp_path: Path,
                                                                            how: str) -> None:
    """A temporary file renamed over a file (an editor's save, each file a restore writes) moves its directory but
    leaves its listing: the monitor's answer still settles the next capture, which records the new content (a
    restore's next capture stat'ed every file: ~300 ms at 100,000 files instead of ~60)."""
    ws = workspace(tmp_path)
    first = settled(mons, ws)
    if how == "an editor's save":
        (ws / "src/.m3.py.swp").write_text("print('saved')\n")
        os.replace(ws / "src/.m3.py.swp", ws / "src/m3.py")
        want = b"print('saved')\n"
    else:
        (ws / "src/m3.py").write_text("print('changed')\n")
        mons.capture(ws)
        store = Store.open(mons.home / "file_snapshots", protected=[mons.home])
        store.capturer.use_monitors(monitors_wanted())
        try:
            store.at(ws).restore(first)
        finally:
            store.close()
        want = b"print(3)\n"
        mons.looks.clear()
    res = mons.capture(ws)
    assert mons.looks == [True], "the capture after the save checked every file"
    assert mons.content(res.id, "src/m3.py") == want
    mons.looks.clear()
    assert mons.capture(ws).unchanged and mons.looks == [True]


def test_a_new_file_and_a_new_directory_are_captured(mons: Monitors, tmp_path: Path) -> None:
    """A name the saved walk never saw means its directory's listing moved: the full check and walk find them."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    (ws / "src/new.py").write_text("new\n")
    res = mons.capture(ws)
    assert mons.content(res.id, "src/new.py") == b"new\n"
    (ws / "src/pkg").mkdir()
    (ws / "src/pkg/inner.py").write_text("inner\n")
    res = mons.capture(ws)
    assert mons.content(res.id, "src/pkg/inner.py") == b"inner\n"
    mons.looks.clear()
    mons.capture(ws)
    (ws / "src/pkg/inner.py").write_text("inner 2\n")  # in the directory made after the monitor started
    res = mons.capture(ws)
    assert mons.looks == [True, True]
    assert mons.content(res.id, "src/pkg/inner.py") == b"inner 2\n"


@pytest.mark.parametrize("how", ["made", "removed"])
def test_a_file_made_or_removed_is_settled_by_the_monitors_answer(mons: Monitors, tmp_path: Path, how: str) -> None:
    """A file made or removed moves its directory's listing by that name alone: the monitor's answer names it and the
    listing is the saved one plus or less it, so the answer settles the capture, as the full check would have
    (which stat'ed every file: ~0.3 s of the ~0.8 s capture after a rewind took back a turn's file, 100,000 files)."""
    ws = workspace(tmp_path)
    if how == "removed":
        (ws / "src/gone.py").write_text("soon gone\n")
        age_tree(ws)
    settled(mons, ws)
    if how == "made":
        (ws / "src/new.py").write_text("new\n")
    else:
        (ws / "src/gone.py").unlink()
    res = mons.capture(ws)
    assert mons.looks == [True], "the full check ran: the monitor's answer was dropped"
    store = Store.open(mons.home / "file_snapshots", protected=[mons.home])
    try:
        files = store.files(res.id)
    finally:
        store.close()
    if how == "made":
        assert mons.content(res.id, "src/new.py") == b"new\n"
    else:
        gone = files.get("src/gone.py")
        assert gone is None or gone.kind == "-", gone  # no longer a file of the snapshot (as the full check had it)
    assert all(files[f"src/m{i}.py"].kind == "f" for i in range(20))


def test_a_change_while_the_monitor_restarts_is_recorded(mons: Monitors, tmp_path: Path) -> None:
    """The token bound to the walk is the killed monitor's: its successor does not know it, so the capture checks."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    os.kill(mons.pid(ws), signal.SIGKILL)
    (ws / "src/m5.py").write_text("print('while down')\n")
    mons.capture(ws)  # no monitor answers: this one starts the next and checks on its own
    mons.up(ws)
    (ws / "src/m6.py").write_text("print('after restart')\n")
    res = mons.capture(ws)
    assert mons.content(res.id, "src/m5.py") == b"print('while down')\n"
    assert mons.content(res.id, "src/m6.py") == b"print('after restart')\n"


def test_a_queue_overflow_makes_the_capture_check_on_its_own(mons: Monitors, tmp_path: Path) -> None:
    """Stopped while more events came than inotify queues, the monitor has lost some: it says so, and the capture
    looks at every file (the change among the lost events is recorded)."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    pid = mons.pid(ws)
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        a, b = os.open(ws / "src/m1.py", os.O_WRONLY), os.open(ws / "src/m2.py", os.O_WRONLY)
        try:
            for _i in range(limit // 2 + 100):  # alternating: identical consecutive events would be merged
                os.pwrite(a, b"x", 0)
                os.pwrite(b, b"y", 0)
        finally:
            os.close(a)
            os.close(b)
        (ws / "src/m7.py").write_text("print('lost in the flood')\n")
    finally:
        os.kill(pid, signal.SIGCONT)
    res = mons.capture(ws)
    assert mons.looks == [], "an overflowed monitor's answer was used"
    assert mons.content(res.id, "src/m7.py") == b"print('lost in the flood')\n"


class Sampler:
    """Counts the live monitors of a runtime directory, over and over on a thread, until stopped: the most seen."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.most = max(self.most, len(monitor_pids(self.run_dir)))
            time.sleep(0.005)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.most


def test_never_more_monitors_than_the_bound_and_an_evicted_workspace_is_still_captured_right(
        mons: Monitors, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Monitors for three workspaces more than CODEXR_MONITOR_MAX: no more than the bound ever run at once (counted
    as processes, all along); each new workspace makes the least recently asked monitor exit; a capture of a
    workspace whose monitor was sent away checks every file, and records each change."""
    bound = 3
    monkeypatch.setenv("CODEXR_MONITOR_MAX", str(bound))
    spaces = [workspace(tmp_path / f"w{i}") for i in range(bound + 3)]
    sampler = Sampler(mons.dir)
    try:
        pids = {}
        for ws in spaces[:bound]:
            settled(mons, ws)
            pids[ws] = mons.pid(ws)
        mons.capture(spaces[0])  # asked last: spaces[1] is now the least recently asked, then spaces[2]
        expected_out = [spaces[1], spaces[2], spaces[0]]
        for n, (ws, out) in enumerate(zip(spaces[bound:], expected_out, strict=True), start=1):
            mons.capture(ws)  # no slot free: this capture checks on its own and asks the oldest monitor to leave
            wait_until(lambda: pids[out] not in mons.running() or len(mons.running()) > bound, 30,  # noqa: B023
                       "the least recently asked monitor to exit")
            assert len(mons.running()) <= bound and pids[out] not in mons.running()
            settled(mons, ws)  # the next capture starts its monitor in the slot that was freed
            pids[ws] = mons.pid(ws)
            assert sorted(mons.running()) == sorted(pids[w] for w in pids if w not in expected_out[:n])
        for i, ws in enumerate(expected_out):  # sent away: their next capture records what changed (and makes room
            # for its own monitor, or starts it in the room made before)
            (ws / "src/m3.py").write_text(f"print('after eviction {i}')\n")
            (ws / "src/new.py").write_text(f"new {i}\n")
            mons.looks.clear()
            res = mons.capture(ws)
            assert mons.looks == []  # no monitor's answer was used: every file was checked
            assert mons.content(res.id, "src/m3.py") == f"print('after eviction {i}')\n".encode()
            assert mons.content(res.id, "src/new.py") == f"new {i}\n".encode()
    finally:
        most = sampler.stop()
    assert most <= bound, f"{most} monitors ran at once (bound {bound})"


def test_only_a_process_confined_as_the_monitor_can_make_it_exit(mons: Monitors, tmp_path: Path) -> None:
    """The request to exit passes the same peer checks as a question: a sandboxed process's is refused."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    path = socket_for(str(ws))
    assert path is not None
    pid = mons.pid(ws)
    out = subprocess.run(["setpriv", "--no-new-privs", sys.executable, "-c", TELL_EXIT, path], capture_output=True,
                         text=True, timeout=60, cwd=REPO).stdout
    assert "exiting" not in out and pid in mons.running(), out
    out = subprocess.run([sys.executable, "-c", TELL_EXIT, path], capture_output=True, text=True, timeout=60,
                         cwd=REPO).stdout
    assert "exiting" in out, out
    wait_until(lambda: pid not in mons.running(), 30, "the monitor to exit when its kin asked")


def test_a_monitor_is_stamped_as_asked_before_its_answer_leaves(tmp_path: Path) -> None:
    """The stamp by which the least recently asked monitor is sent away is in place before the asker has its answer:
    stamped after it, a monitor descheduled in between came out younger than one asked later, and the wrong
    monitor was sent away (the eviction test failed so under load)."""
    from snapshot_store.detect.monitor_daemon import serve

    ws = workspace(tmp_path / "ws")
    path = str(tmp_path / "m.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    answered = threading.Event()
    seen: list[bool] = []

    def asked() -> None:
        time.sleep(0.3)  # a monitor descheduled here: its asker must still be waiting
        seen.append(answered.is_set())

    server = threading.Thread(target=serve, args=(str(ws), listener, lambda _s: True, 2.0),  # idle 2 s: then ends
                              kwargs={"asked": asked}, daemon=True)
    server.start()
    try:
        client = monitor_mod.MonitorClient(path, lambda _s: True, timeout=10)
        answer = client.ask(str(ws), None)
        answered.set()
        assert answer is not None
    finally:
        server.join(30)
        listener.close()
    assert seen == [False], "the asker had its answer before the monitor was stamped as asked"


TELL_EXIT = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(10)
try:
    s.connect(sys.argv[1])
    s.sendall(b'{"v": 1, "exit": true}\\n')
    print("reply", s.recv(4096).decode(errors="replace"))
except OSError as exc:
    print("error", exc)
"""


def serve_fake(path: str, answer: bytes, stop: threading.Event) -> threading.Thread:
    """A listener on `path` (the real monitor's socket replaced) that answers every question with `answer`."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    os.unlink(path)
    listener.bind(path)
    listener.listen(4)
    listener.settimeout(0.2)

    def run() -> None:
        with listener:
            while not stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                with conn, contextlib.suppress(OSError):  # a client that checks first hangs up before asking
                    conn.recv(4096)
                    conn.sendall(answer)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


@pytest.mark.parametrize("kind", ["garbage", "liar"])
def test_a_replaced_socket_is_not_believed(mons: Monitors, tmp_path: Path, kind: str) -> None:
    """Whoever listens on the socket without being the monitor its lock names (garbage, or a well-formed "nothing
    changed" for any token) is not asked: the change is recorded."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    path = socket_for(str(ws))
    assert path is not None
    lie = json.dumps({"v": 1, "root": str(ws), "token": "x:1", "known": True, "files": [], "paths": [],
                      "structural": False, "lost": False}).encode() + b"\n"
    stop = threading.Event()
    t = serve_fake(path, b"\x00garbage\n" if kind == "garbage" else lie, stop)
    try:
        (ws / "src/m4.py").write_text("print('under a fake monitor')\n")
        res = mons.capture(ws)
    finally:
        stop.set()
        t.join()
    assert mons.looks == []
    assert mons.content(res.id, "src/m4.py") == b"print('under a fake monitor')\n"


def test_garbage_and_lies_are_refused_by_the_client() -> None:
    """The answer's every field is checked: another workspace's, a path out of the workspace, a malformed one."""
    good = {"v": 1, "root": "/w", "token": "r:2", "known": True, "files": ["a"], "paths": ["a"], "structural": False,
            "lost": False}
    assert monitor_mod.decode_answer(json.dumps(good).encode(), "/w") is not None
    for bad in ({**good, "root": "/other"}, {**good, "files": ["../etc/passwd"], "paths": ["../etc/passwd"]},
                {**good, "files": ["b"]}, {**good, "lost": "no"}, {**good, "token": 3}, {**good, "v": 2}):
        assert monitor_mod.decode_answer(json.dumps(bad).encode(), "/w") is None, bad
    assert monitor_mod.decode_answer(b"\xff\xfe", "/w") is None


ASK = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
    s.sendall(json.dumps({"v": 1, "root": sys.argv[2], "since": None}).encode() + b"\\n")
    s.settimeout(10)
    print("answer", s.recv(65536).decode(errors="replace"))
except OSError as exc:
    print("error", exc)
"""


def ask_as(wrap: tuple[str, ...], path: str, ws: Path) -> str:
    res = subprocess.run([*wrap, sys.executable, "-c", ASK, path, str(ws)], capture_output=True, text=True,
                         timeout=60, cwd=REPO)
    return res.stdout + res.stderr


def test_a_confined_process_gets_no_answer(mons: Monitors, tmp_path: Path) -> None:
    """A process confined otherwise (no_new_privs, as Codex's sandbox sets) is refused by the monitor before it
    hears anything, and its own codexr would use another socket (named by its confinement)."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    path = socket_for(str(ws))
    assert path is not None
    assert '"token"' in ask_as((), path, ws)  # the same process, unconfined: answered
    out = ask_as(("setpriv", "--no-new-privs"), path, ws)
    assert '"token"' not in out, out
    code = f"import sys; sys.path.insert(0, {str(REPO)!r}); " \
           "from snapshot_store.detect.monitor_launch import socket_for; " \
           f"print(socket_for({str(ws)!r}, create=False))"
    theirs = subprocess.run(["setpriv", "--no-new-privs", sys.executable, "-c", code], capture_output=True,
                            text=True, timeout=60, env=os.environ).stdout.strip()
    assert theirs and theirs != path


@needs_root
def test_another_user_can_neither_ask_nor_replace_the_socket(mons: Monitors, tmp_path: Path) -> None:
    """The socket lies in a mode-700 directory, itself mode 600: another uid cannot connect, nor put its own there."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    path = socket_for(str(ws))
    assert path is not None
    assert stat.S_IMODE(os.stat(mons.dir).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) & 0o077 == 0
    other = ("setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups")
    out = ask_as(other, path, ws)
    assert out.startswith("error") and "Permission denied" in out, out
    res = subprocess.run([*other, "sh", "-c", f"rm -f {path}; touch {path}"], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode != 0 and stat.S_ISSOCK(os.stat(path).st_mode)


def test_a_write_through_another_hard_link_is_recorded(mons: Monitors, tmp_path: Path) -> None:
    """inotify reports a write only under the name the writer used: a file with another name — one outside the
    workspace from before, or one made inside it later — is looked at by every capture."""
    ws = workspace(tmp_path)
    outside = tmp_path / "elsewhere.py"
    os.link(ws / "src/m8.py", outside)
    age_tree(ws)  # the link moved its ctime
    settled(mons, ws)
    os.link(ws / "src/m9.py", ws / "src/deep/m9-again.py")
    time.sleep(0.3)  # past the racy window: the next capture trusts (and keeps) the stat it sees
    mons.capture(ws)
    mons.capture(ws)
    with open(outside, "r+b") as f:  # same size: only the stat's times and the content move
        f.write(b"print(9)\n")
    with open(ws / "src/deep/m9-again.py", "r+b") as f:
        f.write(b"print(7)\n")
    mons.looks.clear()
    res = mons.capture(ws)
    assert mons.looks == [True]
    assert mons.content(res.id, "src/m8.py") == b"print(9)\n"
    assert mons.content(res.id, "src/m9.py") == b"print(7)\n"


def test_a_session_with_its_own_journal_records_every_change_and_leaves_a_token(mons: Monitors,
                                                                                 tmp_path: Path) -> None:
    """A long-running session (inotify journal of its own) uses the monitor's answer for its first capture, its
    journal after; either way each change is recorded, and the next one-shot capture can trust the token."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    store = mons.session(ws)
    try:
        store.at(ws).capture_thread(known_paths=(), kind="pre-turn")
        for i, rel in enumerate(("src/m10.py", "src/deep/d2.txt", "src/brand_new.py")):
            (ws / rel).write_text(f"session change {i}\n")
            res = store.at(ws).capture_thread(known_paths=(), kind="post-turn")
            assert mons.content(res.id, rel) == f"session change {i}\n".encode()
    finally:
        store.close()
    assert True in mons.looks
    time.sleep(0.3)
    mons.capture(ws)  # a one-shot capture after the session: binds a token to its own look
    (ws / "src/m11.py").write_text("after the session\n")
    mons.looks.clear()
    res = mons.capture(ws)
    assert mons.looks == [True]
    assert mons.content(res.id, "src/m11.py") == b"after the session\n"


def test_a_sessions_captures_after_its_first_go_on_from_its_journal_alone(mons: Monitors, tmp_path: Path) -> None:
    """`codexr exec` after a file was made by hand: its pre-turn capture reads the file, and the post-turn captures go
    on from what the journal says. They looked at the saved walk again through the monitor's answer and rebuilt the
    map from it (~0.35 s of each post-turn capture at 100,000 files, issue 35); what they record, and the token the
    next process trusts, are as before."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    (ws / "src/by_hand.py").write_text("made by hand\n")
    time.sleep(0.3)
    store = mons.session(ws)
    try:
        pre = store.at(ws).capture_thread(known_paths=(), kind="pre-turn")
        assert mons.looks == [True]  # the first capture: the monitor's answer names the new file
        mons.looks.clear()
        same = store.at(ws).capture_thread(known_paths=(), kind="post-turn")  # the turn changed nothing
        (ws / "src/m5.py").write_text("changed by the turn\n")
        post = store.at(ws).capture_thread(known_paths=(), kind="post-turn")
        assert mons.looks == [], "a capture after the session's first looked at the saved walk again"
    finally:
        store.close()
    assert mons.content(pre.id, "src/by_hand.py") == b"made by hand\n"
    assert same.unchanged or same.id == pre.id
    assert mons.content(post.id, "src/m5.py") == b"changed by the turn\n"
    assert mons.content(post.id, "src/by_hand.py") == b"made by hand\n"
    time.sleep(0.3)
    mons.looks.clear()
    res = mons.capture(ws)  # the next process, nothing changed since: the token the session left settles it
    assert mons.looks == [True], "the next process checked every file"
    assert res.unchanged and mons.content(res.id, "src/m5.py") == b"changed by the turn\n"


@pytest.mark.parametrize("last", ["made", "changed", "unchanged"])
def test_the_one_shot_capture_after_a_session_uses_the_token_its_journal_answered_capture_left(
        mons: Monitors, tmp_path: Path, last: str) -> None:
    """`codexr exec` then `codexr rewind`: the exec's post-turn capture is answered by its journal (a file made, a file
    changed, or nothing); the rewind's capture trusts the token it left (issue 35: it stat'ed every file, ~0.5 s at
    100,000) and still records what changed after the session, and what the session captured stands."""
    ws = workspace(tmp_path)
    settled(mons, ws)
    store = mons.session(ws)
    try:
        store.at(ws).capture_thread(known_paths=(), kind="pre-turn")
        (ws / "src/m3.py").write_text("the turn's first change\n")
        store.at(ws).capture_thread(known_paths=(), kind="post-turn")  # the journal names one file: re-read
        if last == "made":
            (ws / "src/deep/made.txt").write_text("made by the turn\n")
        elif last == "changed":
            (ws / "src/m4.py").write_text("changed by the turn\n")
        time.sleep(0.3)  # past the racy window: the session's keys are trusted
        session = store.at(ws).capture_thread(known_paths=(), kind="post-turn")
    finally:
        store.close()
    assert mons.content(session.id, "src/m3.py") == b"the turn's first change\n"
    mons.looks.clear()
    res = mons.capture(ws)  # the next process, nothing changed since: the token settles it
    assert mons.looks == [True], "the next process checked every file"
    assert res.id == session.id or res.unchanged
    (ws / "src/m11.py").write_text("after the session\n")
    mons.looks.clear()
    res = mons.capture(ws)
    assert mons.looks == [True]
    assert mons.content(res.id, "src/m11.py") == b"after the session\n"
    (ws / "src/deep/after.txt").write_text("made after the session\n")  # a new name: the full check decides
    res = mons.capture(ws)
    assert mons.content(res.id, "src/deep/after.txt") == b"made after the session\n"
    if last == "made":
        assert mons.content(res.id, "src/deep/made.txt") == b"made by the turn\n"
    if last == "changed":
        assert mons.content(res.id, "src/m4.py") == b"changed by the turn\n"


MOUNTINFO = """\
22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 27 0:40 / /home/me/nfs rw,relatime - nfs4 server:/export rw,vers=4.2
41 40 0:41 / /home/me/nfs/local\\040copy rw,relatime - ext4 /dev/vdb rw
42 27 0:42 / /mnt/remote rw,nosuid - fuse.sshfs me@host:/src rw
"""


def test_no_monitor_on_a_file_system_other_machines_change() -> None:
    """NFS, sshfs and their kind change without this kernel seeing it: the monitor is only asked where every change
    passes through it (the mount that holds the workspace decides, the innermost one)."""
    from snapshot_store.detect.monitor_launch import LOCAL_FS, fs_type

    assert fs_type("/home/me/nfs/ws", MOUNTINFO) == "nfs4"
    assert fs_type("/home/me/nfs/local copy/ws", MOUNTINFO) == "ext4"
    assert fs_type("/mnt/remote/ws", MOUNTINFO) == "fuse.sshfs"
    assert fs_type("/home/me/ws", MOUNTINFO) == "ext4"
    assert {"nfs4", "fuse.sshfs"}.isdisjoint(LOCAL_FS) and "ext4" in LOCAL_FS
