"""A restore leaves the freeing of the files it replaces and deletes to a thread (snapshot_store.lateclose): the
rename or unlink only moves a name while an O_PATH fd holds the old inode, and the thread's close frees it
(issue 35 §2: a third of a 100-file in-session restore was the kernel freeing old blocks inside rename). What a
user relies on: the restore's result is the same, every held inode is let go, nothing held is ever opened."""

from __future__ import annotations

import os
import signal
import stat
from pathlib import Path

import pytest

from snapshot_store import Store, lateclose
from tests.store_helpers import WIDE, write

pytestmark = pytest.mark.skipif(not hasattr(os, "O_PATH"), reason="O_PATH is Linux's; elsewhere nothing is held")


def _deleted_fds_below(root: Path) -> list[str]:
    """This process's fds that name a file below `root` which no longer has a name (held, not yet closed)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(root)) and target.endswith(" (deleted)"):
            out.append(target)
    return out


def _session(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    for i in range(5):
        write(ws, f"d{i % 2}/f{i}.txt", f"first {i}\n")
    return ws, tmp_path / "store"


def _five_rewritten_restored(tmp_path: Path) -> list[str]:
    """The five files rewritten after a capture and restored from it: the paths the restore wrote."""
    ws, store_dir = _session(tmp_path)
    with Store.open(store_dir) as store:
        first = store.at(ws).capture(scope=WIDE)
        for i in range(5):
            write(ws, f"d{i % 2}/f{i}.txt", f"second {i}\n")
        store.at(ws).capture(scope=WIDE)
        written = store.at(ws).restore(first.id, scope=WIDE).written
    assert all((ws / f"d{i % 2}/f{i}.txt").read_text() == f"first {i}\n" for i in range(5))
    return written


def test_a_restore_holds_what_it_replaces_and_deletes_until_the_thread_lets_go(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every file a restore replaces or deletes is still held (by O_PATH, link count 0) when its rename or unlink
    returns, and handed to the thread: the inodes handed over are exactly the old files'."""
    handed: list[int] = []
    monkeypatch.setattr(lateclose, "drop", lambda fd: handed.append(fd) if fd is not None else None)
    ws, store_dir = _session(tmp_path)
    with Store.open(store_dir) as store:
        first = store.at(ws).capture(scope=WIDE)
        old = {p.relative_to(ws).as_posix(): p.stat().st_ino for p in ws.rglob("*.txt")}
        for i in range(5):
            write(ws, f"d{i % 2}/f{i}.txt", f"second {i}\n")
        write(ws, "d0/new.txt", "made by the agent\n")
        old["d0/new.txt"] = (ws / "d0/new.txt").stat().st_ino
        store.at(ws).capture(scope=WIDE)
        res = store.at(ws).restore(first.id, scope=WIDE)
    try:
        held = [os.fstat(fd) for fd in handed]
        assert sorted(st.st_ino for st in held) == sorted(old.values())
        assert all(st.st_nlink == 0 and stat.S_ISREG(st.st_mode) for st in held)
    finally:
        for fd in handed:
            os.close(fd)
    assert sorted(res.written) == sorted(k for k in old if k != "d0/new.txt")
    assert res.deleted == ["d0/new.txt"]
    assert {p.relative_to(ws).as_posix(): p.read_text() for p in ws.rglob("*.txt")} == {
        f"d{i % 2}/f{i}.txt": f"first {i}\n" for i in range(5)}


def test_every_held_inode_is_let_go(tmp_path: Path) -> None:
    """With the real thread: once it has caught up, no fd of this process names a replaced or deleted file."""
    ws, store_dir = _session(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    with Store.open(store_dir) as store:
        first = store.at(ws).capture(scope=WIDE)
        for i in range(5):
            write(ws, f"d{i % 2}/f{i}.txt", f"second {i}\n")
        write(ws, "d1/new.txt", "made by the agent\n")
        store.at(ws).capture(scope=WIDE)
        store.at(ws).restore(first.id, scope=WIDE)
    lateclose.settle()
    assert _deleted_fds_below(tmp_path) == []
    assert len(os.listdir("/proc/self/fd")) == before


def test_more_files_than_may_be_held_wait_for_the_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond HELD_MAX fds the restore waits for the thread instead of holding more (a low RLIMIT_NOFILE)."""
    monkeypatch.setattr(lateclose, "HELD_MAX", 2)
    monkeypatch.setattr(lateclose, "_closer", lateclose._Closer())
    ws = tmp_path / "ws"
    for i in range(40):
        write(ws, f"f{i}.txt", f"first {i}\n")
    with Store.open(tmp_path / "store") as store:
        first = store.at(ws).capture(scope=WIDE)
        for i in range(40):
            write(ws, f"f{i}.txt", f"second {i}\n")
        store.at(ws).capture(scope=WIDE)
        assert len(store.at(ws).restore(first.id, scope=WIDE).written) == 40
    lateclose.settle()
    assert _deleted_fds_below(tmp_path) == []
    assert all((ws / f"f{i}.txt").read_text() == f"first {i}\n" for i in range(40))


def test_holding_opens_nothing_and_follows_no_link(tmp_path: Path) -> None:
    """A FIFO held does not wait for a writer (a read open would), and a symlink is held itself, not its target."""
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to("pipe")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    old = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("holding a FIFO waited for a writer"))
    signal.alarm(10)
    try:
        fifo, link = lateclose.hold(dir_fd, "pipe"), lateclose.hold(dir_fd, "link")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.close(dir_fd)
    assert fifo is not None and link is not None
    try:
        assert stat.S_ISFIFO(os.fstat(fifo).st_mode)
        assert stat.S_ISLNK(os.fstat(link).st_mode)
    finally:
        lateclose.drop(fifo)
        lateclose.drop(link)
        lateclose.settle()


def test_a_forked_child_lets_go_with_its_own_thread(tmp_path: Path) -> None:
    """A child forked after the parent's thread started (the resident server's worker) starts its own: the parent's
    thread is not in the child, so handing it an fd there would never close it."""
    (tmp_path / "f").write_text("x")
    dir_fd = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    lateclose.drop(lateclose.hold(dir_fd, "f"))
    lateclose.settle()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        signal.alarm(10)  # a child waiting on a thread it does not have dies of SIGALRM
        before = len(os.listdir("/proc/self/fd"))
        lateclose.drop(lateclose.hold(dir_fd, "f"))
        lateclose.settle()
        os._exit(0 if len(os.listdir("/proc/self/fd")) == before else 1)
    os.close(dir_fd)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_without_o_path_nothing_is_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the system has no O_PATH (macOS) the restore frees in the call, as before, with the same result."""
    monkeypatch.setattr(lateclose, "_O_PATH", 0)
    handed: list[int | None] = []
    real_drop = lateclose.drop
    monkeypatch.setattr(lateclose, "drop", lambda fd: (handed.append(fd), real_drop(fd)))
    assert len(_five_rewritten_restored(tmp_path)) == 5
    assert handed and set(handed) == {None}
    assert _deleted_fds_below(tmp_path) == []


def test_a_thread_that_does_not_keep_up_never_stops_the_restore(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """With the queue full and nothing taking from it, a held fd is closed in the caller after PUT_WAIT_S: the
    restore goes on (a thread gone at interpreter exit must not hang the last restore)."""
    import queue

    stuck = lateclose._Closer()
    stuck._pid, stuck._queue = os.getpid(), queue.Queue(1)  # started, as far as it knows, but no thread takes
    stuck._queue.put(-1)
    monkeypatch.setattr(lateclose, "_closer", stuck)
    monkeypatch.setattr(lateclose, "PUT_WAIT_S", 0.05)
    assert len(_five_rewritten_restored(tmp_path)) == 5
    assert _deleted_fds_below(tmp_path) == []
