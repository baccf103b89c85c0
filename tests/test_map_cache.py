"""A record written whole is decoded once: later processes take its checksummed marshal (cache/<id>.map), and never
in place of a snapshot file that is gone or damaged (issue 35: a one-shot restore at 100,000 files spent ~0.5 s
decoding the target's map)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from store_helpers import write

from snapshot_store import Store
from snapshot_store.errors import CorruptStore, UnknownSnapshot
from snapshot_store.manifest import SnapshotRecord
from snapshot_store.repository import mapcache

FILES = 60


@pytest.fixture(autouse=True)
def small_records_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mapcache, "MIN_ENTRIES", 20)  # the real threshold (4,096) would make each test slow


def _captured(tmp_path: Path) -> tuple[Path, Path, str, dict[str, object]]:
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    for i in range(FILES):
        write(ws, f"d{i % 4}/f{i}.txt", f"file {i}\n")
    with Store.open(store_dir) as s:
        snap = s.at(ws).capture().id
        files = dict(s.files(snap))
    return ws, store_dir, snap, files


def _decodes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = SnapshotRecord.decode.__func__  # type: ignore[attr-defined]

    def counted(cls: type[SnapshotRecord], snap_id: str, data: bytes) -> SnapshotRecord:
        seen.append(snap_id)
        return real(cls, snap_id, data)  # type: ignore[no-any-return]

    monkeypatch.setattr(SnapshotRecord, "decode", classmethod(counted))
    return seen


def test_a_whole_record_is_decoded_once_then_read_from_its_copy(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _ws, store_dir, snap, files = _captured(tmp_path)
    decoded = _decodes(monkeypatch)
    with Store.open(store_dir) as s:  # a new process's store: nothing decoded yet
        assert dict(s.files(snap)) == files
    assert decoded == [snap]
    assert mapcache.cache_path(store_dir / "cache", snap).is_file()
    with Store.open(store_dir) as s:
        assert dict(s.files(snap)) == files
        from_copy = s.record(snap)
    assert decoded == [snap]  # the second store took the copy
    assert from_copy == SnapshotRecord.decode(snap, (store_dir / "snapshots" / snap[:2] / snap).read_bytes())


def test_a_damaged_copy_is_decoded_again_and_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _ws, store_dir, snap, files = _captured(tmp_path)
    with Store.open(store_dir) as s:
        s.files(snap)
    copy = mapcache.cache_path(store_dir / "cache", snap)
    data = bytearray(copy.read_bytes())
    for where in (len(data) - 5, len(mapcache.MAGIC) + 70, 3):  # the payload, its checksum, the magic
        damaged = bytearray(data)
        damaged[where] ^= 0x20
        copy.write_bytes(bytes(damaged))
        decoded = _decodes(monkeypatch)
        with Store.open(store_dir) as s:
            assert dict(s.files(snap)) == files
        assert decoded == [snap]
        assert copy.read_bytes() == bytes(data)  # written again, intact
        monkeypatch.undo()
        monkeypatch.setattr(mapcache, "MIN_ENTRIES", 20)
    copy.write_bytes(bytes(data[:len(data) // 2]))  # torn
    with Store.open(store_dir) as s:
        assert dict(s.files(snap)) == files
    assert copy.read_bytes() == bytes(data)


def test_a_copy_never_stands_in_for_a_snapshot_file_gone_or_damaged(tmp_path: Path) -> None:
    _ws, store_dir, snap, _files = _captured(tmp_path)
    with Store.open(store_dir) as s:
        s.files(snap)
    assert mapcache.cache_path(store_dir / "cache", snap).is_file()
    record = store_dir / "snapshots" / snap[:2] / snap
    original = record.read_bytes()
    record.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    with Store.open(store_dir) as s, pytest.raises(CorruptStore):
        s.files(snap)
    os.unlink(record)
    with Store.open(store_dir) as s, pytest.raises(UnknownSnapshot):
        s.files(snap)


def test_at_most_a_few_copies_are_kept(tmp_path: Path) -> None:
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    snaps = []
    for n in range(mapcache.KEEP + 2):
        for i in range(FILES):
            write(ws, f"d{i % 4}/f{i}.txt", f"round {n} file {i}\n")
        with Store.open(store_dir) as s:
            snaps.append(s.at(ws).capture().id)
    for snap in snaps:
        with Store.open(store_dir) as s:
            s.record(snap)
    kept = sorted(p.name for p in (store_dir / "cache").glob("*.map"))
    assert 0 < len(kept) <= mapcache.KEEP, kept
