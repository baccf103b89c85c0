"""Decoded store files kept in memory (snapshot_store/decoded.py, what the resident server hands its workers).

What a user relies on: a file is never served from memory once it changed on disk in any way (even with its size
and mtime put back), nothing written within the racy window is kept, `verify` always reads the disk, and the
memory kept is bounded. The server's side (warming between commands) is in tests/test_server.py.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from store_helpers import WIDE, write

import snapshot_store.repository.repo as repo_mod
from snapshot_store import CorruptStore, Store
from snapshot_store.decoded import DecodedFiles, _signature
from snapshot_store.maint.verify import verify
from snapshot_store.store import decoded_files

HELD: list[DecodedFiles] = []  # the decoded files of the running test (what a resident server holds)


def open_store(path: Path) -> Store:
    """Open a store as a command in the resident server does: with the decoded files it holds, if any."""
    return Store.open(path, decoded=HELD[0] if HELD else None)


@pytest.fixture
def memo_on() -> Iterator[dict[str, int]]:
    """Decoded files held, with every disk read counted by kind."""
    reads: dict[str, int] = {}
    held = decoded_files()

    def counting(kind: str, real: Callable[[str], Any]) -> Callable[[str], Any]:
        def load(path: str) -> Any:
            reads[kind] = reads.get(kind, 0) + 1
            return real(path)
        return load

    held.readers = {kind: counting(kind, real) for kind, real in held.readers.items()}
    HELD.append(held)
    try:
        yield reads
    finally:
        HELD.clear()


def _settled_store(tmp_path: Path) -> tuple[Store, Path, str]:
    ws = tmp_path / "ws"
    for i in range(5):
        write(ws, f"f{i}.txt", f"content {i}\n")
    store = open_store(tmp_path / "store")
    snap = store.capture(ws, scope=WIDE).id
    store.close()
    time.sleep(0.25)  # past the racy window (statcache.FINE_WINDOW_NS): these files may be kept now
    return store, ws, snap


def _snapshot_file(tmp_path: Path, snap: str) -> Path:
    return tmp_path / "store" / "snapshots" / snap[:2] / snap


def test_an_unchanged_file_is_decoded_once(tmp_path: Path, memo_on: dict[str, int]) -> None:
    _store, _ws, snap = _settled_store(tmp_path)
    first = open_store(tmp_path / "store").files(snap)
    second = open_store(tmp_path / "store").files(snap)
    assert first == second
    assert memo_on["snapshot"] == 1


def test_memoizing_is_off_unless_enabled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _store, _ws, snap = _settled_store(tmp_path)
    reads: list[str] = []
    real = repo_mod.read_record
    monkeypatch.setattr(repo_mod, "read_record", lambda path: reads.append(path) or real(path))
    for _ in range(2):
        assert open_store(tmp_path / "store").decoded is None  # no decoded files held: nothing kept
        open_store(tmp_path / "store").record(snap)
    assert len(reads) == 2  # each store read the disk


def test_a_file_changed_with_its_size_and_mtime_put_back_is_read_again(tmp_path: Path,
                                                                      memo_on: dict[str, int]) -> None:
    """Damage through the file system moves ctime, which nobody can set back: the damaged bytes are read."""
    _store, _ws, snap = _settled_store(tmp_path)
    open_store(tmp_path / "store").record(snap)
    path = _snapshot_file(tmp_path, snap)
    st = path.stat()
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
    with pytest.raises(CorruptStore, match="does not match its hash"):
        open_store(tmp_path / "store").record(snap)
    assert memo_on["snapshot"] == 2


def test_a_file_written_within_the_racy_window_is_not_kept(tmp_path: Path, memo_on: dict[str, int]) -> None:
    ws = tmp_path / "ws"
    write(ws, "a.txt", "a\n")
    store = open_store(tmp_path / "store")
    snap = store.capture(ws, scope=WIDE).id
    store.close()
    for _ in range(2):  # at once: the snapshot file is younger than the window
        open_store(tmp_path / "store").record(snap)
    assert memo_on["snapshot"] == 2


def test_every_kind_is_kept_and_replaced_when_rewritten(tmp_path: Path, memo_on: dict[str, int]) -> None:
    """A capture's pack index, stat cache and saved walk are kept; a capture that rewrites them is seen."""
    _store, ws, _snap = _settled_store(tmp_path)
    for _ in range(2):
        store = open_store(tmp_path / "store")
        store.capture(ws, scope=WIDE)
        store.close()
    assert {k for k, _p in HELD[0].take_used()} >= {"snapshot", "pack", "stat", "walk", "git"}
    before = dict(memo_on)
    write(ws, "f0.txt", "changed\n")
    store = open_store(tmp_path / "store")
    result = store.capture(ws, scope=WIDE)
    store.close()
    assert not result.unchanged and result.files["f0.txt"] != open_store(tmp_path / "store").files(_snap)["f0.txt"]
    assert memo_on["pack"] == before["pack"]  # the old pack index: unchanged, not read again


def test_verify_reads_the_disk_even_when_a_good_copy_is_kept(tmp_path: Path, memo_on: dict[str, int]) -> None:
    """Bit rot leaves the stat as it was: verify must not take the kept copy's word for the file."""
    _store, _ws, snap = _settled_store(tmp_path)
    good = open_store(tmp_path / "store").record(snap)
    path = _snapshot_file(tmp_path, snap)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    time.sleep(0.25)
    # What rot under an unchanged stat would look like: the kept entry matches the damaged file's stat.
    sig = _signature((str(path),), time.time_ns())
    assert sig is not None
    HELD[0].entries[("snapshot", str(path))] = (sig, good, 1)
    assert open_store(tmp_path / "store").record(snap) is good  # served from memory
    report = verify(open_store(tmp_path / "store"))
    assert not report.ok and any(snap in p for p in report.problems), report.problems


def test_what_is_kept_is_bounded(tmp_path: Path, memo_on: dict[str, int], monkeypatch: pytest.MonkeyPatch) -> None:
    HELD[0].max_files = 3
    ws = tmp_path / "ws"
    store = open_store(tmp_path / "store")
    snaps = []
    for i in range(5):
        write(ws, "a.txt", f"{i}\n")
        snaps.append(store.capture(ws, scope=WIDE).id)
    store.close()
    time.sleep(0.25)
    for snap in snaps:
        open_store(tmp_path / "store").record(snap)
    assert len(HELD[0].entries) == 3
    assert [p for (_k, p) in HELD[0].entries] == [str(_snapshot_file(tmp_path, s)) for s in snaps[2:]]
