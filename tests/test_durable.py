"""The store's flush to disk (`fsutil.durable`): on Darwin fsync leaves data in the drive's cache, so the commit
points ask for F_FULLFSYNC, and a file system that refuses it still gets the fsync (issue 32 §4). Linux has no
F_FULLFSYNC; its branch is driven here with Darwin's number and a real fd, and what only a Mac can prove (the
flush itself, its cost) is listed in docs/development.md."""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

import pytest

from snapshot_store import fsutil

F_FULLFSYNC_DARWIN = 51


def _calls(monkeypatch: pytest.MonkeyPatch, refuse: bool) -> list[str]:
    seen: list[str] = []
    real_fsync = os.fsync

    def fcntl_call(fd: int, cmd: int, *rest: object) -> int:
        seen.append(f"fcntl {cmd}")
        if refuse:
            raise OSError(errno.ENOTSUP, "not supported by this file system")
        return 0

    def fsync(fd: int) -> None:
        seen.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(fsutil, "_F_FULLFSYNC", F_FULLFSYNC_DARWIN)
    monkeypatch.setattr(fcntl, "fcntl", fcntl_call)
    monkeypatch.setattr(os, "fsync", fsync)
    return seen


@pytest.mark.parametrize(("refuse", "expected"), [(False, [f"fcntl {F_FULLFSYNC_DARWIN}"]),
                                                  (True, [f"fcntl {F_FULLFSYNC_DARWIN}", "fsync"])])
def test_a_flush_asks_the_drive_where_the_system_can(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                     refuse: bool, expected: list[str]) -> None:
    seen = _calls(monkeypatch, refuse)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        fsutil.durable(fd)
    finally:
        os.close(fd)
    assert seen == expected


def test_every_commit_point_of_the_store_flushes_through_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A capture and a restore flush only through `durable`: with F_FULLFSYNC available, no bare fsync is left."""
    from snapshot_store import Store

    seen = _calls(monkeypatch, refuse=False)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("one\n")
    with Store.open(tmp_path / "store") as store:
        first = store.at(ws).capture()
        (ws / "a.txt").write_text("two\n")
        store.at(ws).capture()
        store.at(ws).restore(first.id)
    assert (ws / "a.txt").read_text() == "one\n"
    assert seen and "fsync" not in seen, seen
