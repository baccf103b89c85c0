"""The blob index answers a few lookups by searching the pack indexes' bytes (a one-file restore at 100,000 files
decoded ~310 ms of entries to find one blob, issue 35) and decodes them all past LAZY_LOOKUPS: either way it gives
the locations, the missing blobs and the damaged packs that decoding everything gives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from store_helpers import make_repo, write

from snapshot_store import ScopeSettings, Store
from snapshot_store.errors import MissingBlob
from snapshot_store.repository.packs import IDX_HEAD, LAZY_LOOKUPS, BlobIndex, search_index


def packed_store(tmp_path: Path, rounds: int = 4) -> tuple[Path, list[bytes]]:
    """A store of several packs (a capture each), and every blob it holds."""
    ws, store_dir = tmp_path / "ws", tmp_path / "store"
    make_repo(ws, {f"f{i}.txt": f"first {i}\n" for i in range(30)})
    with Store.open(store_dir) as s:
        for r in range(rounds):
            for i in range(0, 30, r + 1):
                write(ws, f"f{i}.txt", f"round {r} file {i}\n")
            s.at(ws).capture(scope=ScopeSettings())
    full = BlobIndex(store_dir / "packs")
    blobs = list(full.locations)
    full.close()
    assert len(list((store_dir / "packs").glob("*.idx"))) >= rounds
    assert rounds == 1 or len(blobs) > LAZY_LOOKUPS + 10, "the lookups should outnumber LAZY_LOOKUPS"
    return store_dir, blobs


def test_lookups_before_and_after_the_indexes_are_decoded_give_the_decoded_locations(tmp_path: Path) -> None:
    store_dir, blobs = packed_store(tmp_path)
    decoded = BlobIndex(store_dir / "packs")
    want = dict(decoded.locations)
    lazy = BlobIndex(store_dir / "packs")
    absent = os.urandom(32)
    for n, blob in enumerate(blobs):
        assert lazy.locate(blob) == want[blob], n
        assert blob in lazy
        if n == 3:
            assert absent not in lazy
            with pytest.raises(MissingBlob, match="missing from the store"):
                lazy.locate(absent)
    assert lazy.read(blobs[0]) == decoded.read(blobs[0])
    assert lazy.locations == want and lazy.loaded == decoded.loaded and not lazy.damaged
    decoded.close()
    lazy.close()


def test_bytes_of_an_index_that_straddle_two_entries_are_no_blob(tmp_path: Path) -> None:
    store_dir, _blobs = packed_store(tmp_path, rounds=1)
    idx = next((store_dir / "packs").glob("*.idx"))
    data = idx.read_bytes()
    size = idx.with_suffix(".pack").stat().st_size
    straddling = data[IDX_HEAD + 40:IDX_HEAD + 72]  # the end of one entry and the start of the next
    assert search_index(idx.stem, data, size, straddling) is None
    assert straddling not in BlobIndex(store_dir / "packs")


def test_a_pack_whose_index_points_outside_it_is_set_aside_as_when_every_index_was_decoded(tmp_path: Path) -> None:
    """A truncated pack: its index's checksum holds but its entries point past its end. A lookup that lands in it
    sets the pack aside as damaged, its blobs missing with the hint to verify, the other packs' blobs still found."""
    store_dir, blobs = packed_store(tmp_path)
    packs = sorted((store_dir / "packs").glob("*.pack"), key=lambda p: p.stat().st_size)
    victim = packs[-1]
    in_victim = [b for b, loc in BlobIndex(store_dir / "packs").locations.items() if loc.pack == victim.stem]
    elsewhere = [b for b in blobs if b not in in_victim]
    os.truncate(victim, 16)
    lazy = BlobIndex(store_dir / "packs")
    with pytest.raises(MissingBlob, match="some pack indexes are damaged"):
        lazy.locate(in_victim[0])
    assert victim.stem in lazy.damaged and victim.stem not in lazy.loaded
    assert lazy.locate(elsewhere[0]).pack != victim.stem
    assert not any(loc.pack == victim.stem for loc in lazy.locations.values())
    lazy.close()
