"""The pack writer holds a bounded amount of file content in memory, however many files a capture reads.

Behaviour, not timing: the reads hand files to one compression worker in batches; content waits in memory until
its batch is written to the pack. The cold capture of 100,000 files (bench/scale.py) kept up to ~36 MiB waiting,
and freed buffers stay in the process's heap: `IN_FLIGHT_MAX` bounds it. Peak RSS is measured by the bench.
"""

from __future__ import annotations

import os
from pathlib import Path

from snapshot_store.detect.index import StatCache
from snapshot_store.manifest import FileEntry
from snapshot_store.readfiles import read_paths
from snapshot_store.repository.packs import IN_FLIGHT_MAX, STREAM_THRESHOLD
from snapshot_store.repository.repo import Repository
from snapshot_store.stamps import stat_key

MIB = 1024 * 1024


def test_reading_many_files_keeps_at_most_in_flight_max_waiting_and_stores_every_one(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    contents: dict[str, bytes] = {}
    for i in range(40):  # incompressible, so nothing is smaller in the pack than on disk
        contents[f"m{i:02}.bin"] = os.urandom(MIB)
    for i in range(6):  # the largest files read whole (larger ones stream, never batched)
        contents[f"big{i}.bin"] = os.urandom(STREAM_THRESHOLD)
    for rel, data in contents.items():
        (ws / rel).write_bytes(data)
    assert sum(map(len, contents.values())) > 2 * IN_FLIGHT_MAX  # more than the bound, or it shows nothing
    repo = Repository.open(tmp_path / "store")
    writer = repo.blob_writer()
    to_capture = {rel: stat_key(os.lstat(ws / rel)) for rel in contents}
    captured = read_paths(str(ws), to_capture, writer, StatCache(None))
    writer.commit()
    assert 0 < writer.most_in_flight <= IN_FLIGHT_MAX
    for rel, data in contents.items():
        entry = captured.entries[rel]
        assert isinstance(entry, FileEntry)
        assert repo.blobs.read(bytes.fromhex(entry.blob)) == data
