"""A restore stopped by SIGINT/SIGTERM/SIGHUP rolls back; one killed is finished by the next command, which says so.

Real processes and real signals: strace delivers the signal at a chosen `renameat` (each write of a restore renames
its temp file over the path; a delete renames the file aside first), so it lands mid-apply every time. With the
resident server on, the server runs under strace and the worker that runs the restore gets the signal.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fs_helpers import tree
from test_server import Servers

REPO = Path(__file__).parents[1]
STRACE = shutil.which("strace")
HEX64 = re.compile(r"\b[0-9a-f]{64}\b")
pytestmark = pytest.mark.skipif(STRACE is None, reason="needs strace")


def _files(ws: Path, version: str) -> None:
    """300 files in three directories; `version` changes every file's bytes."""
    for d in range(3):
        for i in range(100):
            p = ws / f"d{d}" / f"f{i:03}.txt"
            p.parent.mkdir(exist_ok=True)
            p.write_text(f"{version} {d} {i}\n" * (i % 7 + 1))


class Rig:
    """A workspace with snapshot `target` taken, then changed: restoring `target` writes ~300 files, deletes 40."""

    def __init__(self, tmp: Path, servers: Servers | None) -> None:
        self.ws = tmp / "ws"
        self.home = tmp / "home"
        self.ws.mkdir()
        self.home.mkdir()
        self.servers: Servers | None = None  # the set-up runs without: its first command would start a server
        _files(self.ws, "old")
        self.target = self.ok("snapshots", "capture").stdout.strip()
        _files(self.ws, "new")
        (self.ws / "d1" / "f007.txt").unlink()
        (self.ws / "new").mkdir()
        for i in range(40):
            (self.ws / "new" / f"n{i}.txt").write_text(f"added {i}\n")
        os.chmod(self.ws / "new", 0o705)  # a directory the restore removes: the rollback makes it as it was
        self.before = tree(self.ws)
        self.servers = servers

    def env(self) -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(self.home), "CODEXR_SERVER": "0"}
        if self.servers is not None:
            env.update(self.servers.env)
        return env

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "app", *args]

    def run(self, *args: str, strace: list[str] | None = None) -> subprocess.CompletedProcess[str]:
        argv = self.argv(*args)
        if strace is not None:
            argv = [str(STRACE), "-f", "-qq", "-o", os.devnull, *strace, *argv]
        return subprocess.run(argv, cwd=self.ws, env=self.env(), capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        res = self.run(*args)
        assert res.returncode == 0, (args, res.returncode, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
        return res

    def journals(self) -> list[Path]:
        return list((self.home / "file_snapshots" / "journal").glob("*.json"))


def _inject(sig: str, when: int) -> list[str]:
    return ["-e", "trace=renameat", "-e", f"inject=renameat:signal={sig}:when={when}"]


@pytest.fixture(params=["local", "server"])
def mode(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class TracedServer:
    """The resident server started under strace: the worker that runs a command gets the injected signal."""

    def __init__(self, servers: Servers, strace: list[str]) -> None:
        env = {**os.environ, **servers.env}
        probe = subprocess.run(
            [sys.executable, "-c", "import sys, os, marshal; from app.server.runtime import socket_path; "
             "print(socket_path()); print(marshal.dumps([os.path.abspath(p) if p else os.getcwd() "
             "for p in sys.path]).hex())"], env=env, capture_output=True, text=True, check=True, cwd=REPO)
        path, sys_path = probe.stdout.split()
        assert path != "None", f"no server can run in {servers.dir}: {probe.stderr}"
        code = ("import sys, os, marshal; sys.path[:] = marshal.loads(bytes.fromhex(os.environ.pop("
                "'CODEXR_SERVER_SYS_PATH'))); from app.server.server import main; main(sys.argv[1])")
        with open(path + ".log", "ab") as log:
            self.proc = subprocess.Popen(
                [str(STRACE), "-f", "-qq", "-o", os.devnull, *strace, sys.executable, "-c", code, path],
                env={**env, "CODEXR_SERVER_SYS_PATH": sys_path}, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=log, start_new_session=True, cwd="/")
        while True:  # listening once it accepts (no time limit asserted: the test's own timeout bounds it)
            with socket.socket(socket.AF_UNIX) as s:
                try:
                    s.connect(path)
                    break
                except OSError:
                    assert self.proc.poll() is None, servers.log()
                    time.sleep(0.05)
        self.servers = servers

    def close(self) -> None:
        self.servers.stop()
        self.proc.wait(timeout=60)


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    try:
        yield s
    finally:
        with __import__("contextlib").suppress(Exception):
            s.stop()
        shutil.rmtree(s.dir, ignore_errors=True)


def _restore_with_signal(rig: Rig, mode: str, servers: Servers, sig: str, when: int
                         ) -> subprocess.CompletedProcess[str]:
    """`snapshots restore TARGET --yes` with signal `sig` delivered at its `when`-th renameat."""
    if mode == "local":
        return rig.run("snapshots", "restore", rig.target, "--yes", strace=_inject(sig, when))
    traced = TracedServer(servers, _inject(sig, when))
    try:
        res = rig.run("snapshots", "restore", rig.target, "--yes")
        assert any(cmd == "snapshots" for _w, _c, cmd in servers.served()), servers.log()
    finally:
        traced.close()
    return res


@pytest.mark.parametrize("sig", ["INT", "TERM", "HUP"])
def test_a_signal_mid_restore_rolls_it_back_and_says_so(tmp_path: Path, mode: str, servers: Servers,
                                                        sig: str) -> None:
    rig = Rig(tmp_path, servers if mode == "server" else None)
    res = _restore_with_signal(rig, mode, servers, sig, 120)
    signum = getattr(signal, f"SIG{sig}")
    assert res.returncode == (130 if sig == "INT" else -signum), (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("codexr: interrupted: the restore was rolled back; nothing changed (safety snapshot "), \
        lines[0]
    assert tree(rig.ws) == rig.before, "the workspace is not as it was before the restore"
    assert (rig.ws / "new").stat().st_mode & 0o7777 == 0o705
    assert rig.journals() == []
    # The next, unrelated command finishes nothing and changes nothing.
    cap = rig.ok("snapshots", "capture")
    assert "interrupted" not in cap.stderr, cap.stderr
    assert tree(rig.ws) == rig.before


def test_a_restore_killed_mid_apply_is_finished_by_the_next_command_which_names_both_snapshots(
        tmp_path: Path, mode: str, servers: Servers) -> None:
    rig = Rig(tmp_path, servers if mode == "server" else None)
    target_tree = None
    res = _restore_with_signal(rig, mode, servers, "KILL", 120)
    assert res.returncode == -9, (res.returncode, res.stdout, res.stderr)
    assert len(rig.journals()) == 1
    cap = rig.ok("snapshots", "capture")
    line = [x for x in cap.stderr.splitlines() if "interrupted restore" in x]
    assert len(line) == 1, cap.stderr
    assert f"finished an interrupted restore of snapshot {rig.target[:12]} into {rig.ws}" in line[0], line[0]
    safety = re.search(r"safety snapshot ([0-9a-f]{12}) holds the state before it", line[0])
    assert safety is not None, line[0]
    assert rig.journals() == []
    # The finished restore is the target's state: restoring the target again changes nothing.
    target_tree = tree(rig.ws)
    again = rig.ok("snapshots", "restore", rig.target, "--yes")
    assert "wrote" not in again.stdout and "deleted" not in again.stdout, again.stdout
    # And the named safety snapshot is the state before the restore.
    rig.ok("snapshots", "restore", safety.group(1), "--yes")
    assert tree(rig.ws) == rig.before
    assert target_tree != rig.before


GC_DROPPING_THE_TARGET = ("-c", "file_snapshots.gc_grace_seconds=0", "-c", "file_snapshots.auto_gc=false",
                          "-c", "file_snapshots.retention_max_snapshots=1")


def test_gc_between_a_killed_restore_and_the_next_command_keeps_what_finishing_it_needs(tmp_path: Path) -> None:
    """`snapshots gc` run before the next command finishes a killed restore: retention keeping one snapshot dropped
    the restore's target, and from then every capture and restore of the workspace failed ("no snapshot ...") on a
    journal nothing could finish, the files half restored. The journal's snapshots are kept: the next command
    finishes the restore, and the safety snapshot still holds the state before it."""
    rig = Rig(tmp_path, None)
    res = rig.run("snapshots", "restore", rig.target, "--yes", strace=_inject("KILL", 120))
    assert res.returncode == -9, (res.returncode, res.stdout, res.stderr)
    assert len(rig.journals()) == 1
    rig.ok(*GC_DROPPING_THE_TARGET, "snapshots", "gc")
    cap = rig.ok("snapshots", "capture")
    line = [x for x in cap.stderr.splitlines() if "interrupted restore" in x]
    assert len(line) == 1 and f"of snapshot {rig.target[:12]} into" in line[0], cap.stderr
    safety = re.search(r"safety snapshot ([0-9a-f]{12}) holds the state before it", line[0])
    assert safety is not None, line[0]
    assert rig.journals() == []
    again = rig.ok("snapshots", "restore", rig.target, "--yes")
    assert "wrote" not in again.stdout and "deleted" not in again.stdout, again.stdout
    rig.ok("snapshots", "restore", safety.group(1), "--yes")
    assert tree(rig.ws) == rig.before


def test_a_journal_whose_target_an_older_gc_removed_names_the_way_out_and_that_way_works(tmp_path: Path) -> None:
    """A store from before gc kept those snapshots: the target gone, every capture and restore of the workspace failed
    "no snapshot ..." on the journal, for good. A capture now says which restore puts back the state before (one line,
    nothing changed), and that restore works: the half-restored files kept in a safety snapshot first."""
    rig = Rig(tmp_path, None)
    res = rig.run("snapshots", "restore", rig.target, "--yes", strace=_inject("KILL", 120))
    assert res.returncode == -9 and len(rig.journals()) == 1
    (journal,) = rig.journals()
    kept = journal.read_bytes()
    journal.unlink()  # the store as an older gc saw it: no journal read, the target dropped by retention
    rig.ok(*GC_DROPPING_THE_TARGET, "snapshots", "gc")
    journal.write_bytes(kept)
    safety = json.loads(kept)["safety"]
    half = tree(rig.ws)
    assert half not in (rig.before, None)
    refused = rig.run("snapshots", "capture")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert len(lines) == 1 and f"`codexr snapshots restore {safety[:12]} --yes` puts it back" in lines[0], lines
    assert tree(rig.ws) == half and rig.journals() == [journal]
    verify = rig.run("snapshots", "verify")
    assert f"whose target snapshot {json.loads(kept)['target'][:12]} is gone: `codexr snapshots restore " \
           f"{safety[:12]} --yes`" in verify.stdout + verify.stderr, (verify.stdout, verify.stderr)
    back = rig.ok("snapshots", "restore", safety[:12], "--yes")
    assert tree(rig.ws) == rig.before and rig.journals() == []
    kept_half = re.search(r"undo: codexr snapshots restore ([0-9a-f]{12}) --yes", back.stdout)
    assert kept_half is not None, back.stdout
    rig.ok("snapshots", "capture")
    rig.ok("snapshots", "restore", kept_half.group(1), "--yes")
    # the killed restore's staged temps went with its journal, as recovery cleans them; every file of it is kept
    assert tree(rig.ws) == {p: v for p, v in half.items() if not p.rpartition("/")[2].startswith(".codexr-tmp-")}


@pytest.mark.parametrize("gone", ["safety", "both"])
def test_a_journal_whose_safety_snapshot_is_gone_names_the_way_out_and_that_way_works(tmp_path: Path, gone: str
                                                                                     ) -> None:
    """Damage took a killed restore's safety snapshot (or it and the target): every capture and restore of the
    workspace failed "no snapshot ..." on the journal, for good, with no way out named. A capture now says in one
    line, nothing changed, which restore goes past it: the target's, which finishes what the restore began, or with
    both gone any restore; that restore works, the half-restored files kept in a safety snapshot first."""
    rig = Rig(tmp_path, None)
    (rig.ws / "marker.txt").write_text("another state\n")
    other = rig.ok("snapshots", "capture").stdout.strip()
    (rig.ws / "marker.txt").unlink()
    res = rig.run("snapshots", "restore", rig.target, "--yes", strace=_inject("KILL", 120))
    assert res.returncode == -9 and len(rig.journals()) == 1
    (journal,) = rig.journals()
    doc = json.loads(journal.read_bytes())
    lost = [doc["safety"]] + ([doc["target"]] if gone == "both" else [])
    for snap in lost:  # the damage: the snapshot files gone from the store
        (rig.home / "file_snapshots" / "snapshots" / snap[:2] / snap).unlink()
    half = tree(rig.ws)
    refused = rig.run("snapshots", "capture")
    lines = refused.stderr.strip().splitlines()
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    way = (f"`codexr snapshots restore {doc['target'][:12]} --yes` finishes it" if gone == "safety"
           else "any `codexr snapshots restore ID --yes` goes past it")
    assert len(lines) == 1 and f"its safety snapshot {doc['safety'][:12]} is gone or unreadable" in lines[0], lines
    assert way in lines[0], lines
    assert tree(rig.ws) == half and rig.journals() == [journal]
    verify = rig.run("snapshots", "verify")
    assert f"whose safety snapshot {doc['safety'][:12]} is gone: " in verify.stdout + verify.stderr, verify.stdout
    assert way in verify.stdout + verify.stderr, (verify.stdout, verify.stderr)
    if gone == "safety":  # another snapshot's restore is not the way: it is refused the same way
        assert rig.run("snapshots", "restore", other, "--yes").returncode != 0 and tree(rig.ws) == half
    to = rig.target if gone == "safety" else other
    back = rig.ok("snapshots", "restore", to, "--yes")
    assert rig.journals() == []
    kept_half = re.search(r"undo: codexr snapshots restore ([0-9a-f]{12}) --yes", back.stdout)
    assert kept_half is not None, back.stdout
    again = rig.ok("snapshots", "restore", to, "--yes")  # the restore is complete: nothing left to write
    assert "wrote" not in again.stdout and "deleted" not in again.stdout, again.stdout
    rig.ok("snapshots", "restore", kept_half.group(1), "--yes")
    assert tree(rig.ws) == {p: v for p, v in half.items() if not p.rpartition("/")[2].startswith(".codexr-tmp-")}


def test_gc_stops_at_a_restore_journal_it_cannot_read(tmp_path: Path) -> None:
    """A damaged journal would pin nothing: gc says so in one line and removes nothing."""
    rig = Rig(tmp_path, None)
    res = rig.run("snapshots", "restore", rig.target, "--yes", strace=_inject("KILL", 120))
    assert res.returncode == -9 and len(rig.journals()) == 1
    (journal,) = rig.journals()
    journal.write_bytes(journal.read_bytes()[:-40])
    store = rig.home / "file_snapshots"
    before = sorted(p.relative_to(store) for p in store.rglob("*") if "journal" not in p.parts)
    res = rig.run(*GC_DROPPING_THE_TARGET, "snapshots", "gc")
    assert res.returncode != 0 and "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"restore journal journal/{journal.name} cannot be read" in lines[0], res.stderr
    assert sorted(p.relative_to(store) for p in store.rglob("*") if "journal" not in p.parts) == before


CHATTR = shutil.which("chattr")


@pytest.mark.skipif(CHATTR is None or os.geteuid() != 0, reason="needs chattr as root (mode bits do not stop root)")
@pytest.mark.parametrize("as_json", [False, True])
def test_a_restore_that_could_not_write_a_path_exits_3_and_names_it(tmp_path: Path, as_json: bool) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "a.txt").write_text("a old\n")
    (ws / "b.txt").write_text("b old\n")
    rig_env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), "CODEXR_SERVER": "0"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "app", *args], cwd=ws, env=rig_env, capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)

    snap = run("snapshots", "capture").stdout.strip()
    (ws / "a.txt").write_text("a new\n")
    (ws / "b.txt").write_text("b new\n")
    subprocess.run([str(CHATTR), "+i", str(ws / "a.txt")], check=True)
    try:
        res = run("snapshots", "restore", snap, "--yes", *(["--json"] if as_json else []))
    finally:
        subprocess.run([str(CHATTR), "-i", str(ws / "a.txt")], check=True)
    assert res.returncode == 3, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert (ws / "a.txt").read_text() == "a new\n" and (ws / "b.txt").read_text() == "b old\n"
    if as_json:
        doc = __import__("json").loads(res.stdout)
        assert [f["path"] for f in doc["failed"]] == ["a.txt"], doc
        assert doc["failed"][0]["reason"].startswith("could not write"), doc
        assert doc["written"] == ["b.txt"]
    else:
        assert re.search(r"^left    a\.txt  \(could not write: ", res.stdout, re.M), res.stdout
        assert "codexr: error: the restore is incomplete: 1 planned change(s) were not made" in res.stderr
