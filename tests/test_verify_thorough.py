"""verify tells the truth: any single-byte change to a store file is reported, naming the object (issue 6, D.16)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import blake3
import pytest
from store_helpers import age_tree

from snapshot_store import ScopeSettings, Store, StoreError
from snapshot_store.ids import workspace_key
from snapshot_store.maint.verify import VerifyReport, verify
from snapshot_store.repository.packs import IDX_COUNT, IDX_ENTRY, IDX_MAGIC, RECORD

SCOPE = ScopeSettings(residue_max_files=1000)
THREAD = "thread-0123456789"


def build(ws: Path, store_dir: Path) -> list[str]:
    """Two packs (zstd and raw records), a full and a delta snapshot, a ref log and a thread sidecar."""
    (ws / "text.txt").write_text("compressible line of text\n" * 40)
    (ws / "raw.bin").write_bytes(os.urandom(200))
    (ws / "tiny").write_text("x")
    os.symlink("text.txt", ws / "link")
    with Store.open(store_dir) as store:
        first = store.at(ws).capture(scope=SCOPE).id
        (ws / "raw.bin").write_bytes(os.urandom(150))
        second = store.at(ws).capture(scope=SCOPE).id
        assert store.record(second).parent == first
    side = store_dir / "refs" / "threads" / f"{THREAD}.json"
    side.parent.mkdir(parents=True, exist_ok=True)
    side.write_text(json.dumps({
        "version": 1, "thread_id": THREAD, "cwd": str(ws), "tracking": True, "created": 1.0, "forked_from": None,
        "turns": [{"turn_id": "turn-1", "prompt": "hi", "pre": first, "post": second, "status": "completed",
                   "started": 1.0}],
        "agent_touched": ["raw.bin"], "redo": [], "history": []}, indent=1))
    return [first, second]


def run_verify(store_dir: Path) -> VerifyReport | str:
    """A full verify of a freshly opened store, or the one-line error opening it gives."""
    try:
        with Store.open(store_dir) as store:
            return verify(store, full=True)
    except StoreError as exc:
        return str(exc)


def assert_reported(store_dir: Path, path: Path, positions: list[int], name: str) -> None:
    """Flip each position of `path` (bit 0 or bit 4, alternately); every change is reported, naming `name`."""
    good = path.read_bytes()
    missed = []
    for pos in positions:
        for mask in (0x01 if pos % 2 else 0x10,):
            data = bytearray(good)
            data[pos] ^= mask
            path.write_bytes(bytes(data))
            outcome = run_verify(store_dir)
            if isinstance(outcome, str):
                reported = name in outcome
            else:
                reported = not outcome.ok and any(name in p for p in outcome.problems)
            if not reported:
                missed.append((pos, mask, outcome if isinstance(outcome, str) else outcome.problems))
    path.write_bytes(good)
    assert not missed, missed[:5]


@pytest.fixture
def store_dir(tmp_path: Path, ws: Path) -> Path:
    d = tmp_path / "store"
    build(ws, d)
    report = run_verify(d)
    assert isinstance(report, VerifyReport) and report.ok and not report.warnings, report
    return d


def every(path: Path, stride: int = 1) -> list[int]:
    return list(range(0, path.stat().st_size, stride))


def pack_positions(pack: Path) -> list[int]:
    """Every byte of the magic and of each record header, and every third byte of record data."""
    data = (pack.with_suffix(".idx")).read_bytes()
    headers = {0, 1, 2, 3, 4, 5, 6, 7}
    for e in IDX_ENTRY.iter_unpack(data[len(IDX_MAGIC) + 4:-32]):
        headers |= set(range(e[2] - RECORD.size, e[2]))
    return sorted(headers | set(range(0, pack.stat().st_size, 3)))


def test_every_byte_of_the_format_file(store_dir: Path) -> None:
    fmt = store_dir / "format"
    assert_reported(store_dir, fmt, every(fmt), "format")


def test_every_byte_of_every_pack_and_index(store_dir: Path) -> None:
    packs = sorted((store_dir / "packs").glob("*.pack"))
    assert len(packs) == 2
    for pack in packs:
        assert_reported(store_dir, pack, pack_positions(pack), pack.stem)
        idx = pack.with_suffix(".idx")
        assert_reported(store_dir, idx, every(idx), idx.name)
    # The packs did hold both kinds of record (so both were attacked).
    codecs = set()
    for pack in packs:
        data = pack.with_suffix(".idx").read_bytes()
        (count,) = IDX_COUNT.unpack_from(data, len(IDX_MAGIC))
        codecs |= {e[1] for e in IDX_ENTRY.iter_unpack(data[len(IDX_MAGIC) + 4:-32])}
        assert count
    assert codecs == {0, 1}


def test_every_byte_of_every_snapshot_file(store_dir: Path) -> None:
    for snap in sorted((store_dir / "snapshots").glob("*/*")):
        assert_reported(store_dir, snap, every(snap, 2), snap.name)


def test_every_byte_of_the_ref_log(store_dir: Path) -> None:
    [ref] = (store_dir / "refs" / "workspaces").glob("*.jsonl")
    assert_reported(store_dir, ref, every(ref), ref.name)


def test_ids_and_structure_of_a_thread_sidecar(store_dir: Path, ws: Path) -> None:
    side = store_dir / "refs" / "threads" / f"{THREAD}.json"
    text = side.read_text()
    ids = [i for i in json.loads(text)["turns"][0].values() if isinstance(i, str) and len(i) == 64]
    positions = [text.index(i) + k for i in ids for k in range(64)]
    positions += [n for n, c in enumerate(text) if c in '{}[]":,']
    assert_reported(store_dir, side, positions, f"refs/threads/{THREAD}.json")


def test_a_deleted_newest_snapshot_is_damage(store_dir: Path) -> None:
    newest = sorted((store_dir / "snapshots").glob("*/*"), key=lambda p: p.stat().st_mtime_ns)[-1]
    newest.unlink()
    report = run_verify(store_dir)
    assert isinstance(report, VerifyReport) and not report.ok
    assert any(newest.name in p and "does not exist" in p for p in report.problems), report.problems


def test_a_ref_line_whose_root_is_not_its_files_workspace_is_damage(store_dir: Path, tmp_path: Path) -> None:
    [ref] = (store_dir / "refs" / "workspaces").glob("*.jsonl")
    lines = ref.read_text().splitlines()
    doc = json.loads(lines[0])
    doc["root"] = str(tmp_path / "elsewhere")
    other = ref.parent / f"{workspace_key(doc['root'])}.jsonl"
    other.write_text(json.dumps(doc, separators=(",", ":")) + "\n")  # a valid line, in the wrong file too
    ref.write_text("\n".join([json.dumps(doc, separators=(",", ":")), *lines[1:]]) + "\n")
    report = run_verify(store_dir)
    assert isinstance(report, VerifyReport)
    assert any(ref.name in p and "line 1" in p and "key" in p for p in report.problems), report.problems
    assert any(other.name in p and "does not match snapshot" in p for p in report.problems), report.problems


def test_a_torn_final_ref_line_is_a_warning_but_a_damaged_newline_is_not(store_dir: Path) -> None:
    [ref] = (store_dir / "refs" / "workspaces").glob("*.jsonl")
    good = ref.read_bytes()
    ref.write_bytes(good + b'{"id":"ab')  # what a crash mid-append leaves
    report = run_verify(store_dir)
    assert isinstance(report, VerifyReport) and report.ok, report.problems
    assert any("torn" in w for w in report.warnings)
    ref.write_bytes(good[:-1] + b"\r")  # the last line's newline changed: that line is damaged, not torn
    report = run_verify(store_dir)
    assert isinstance(report, VerifyReport) and not report.ok
    assert any(ref.name in p and "line 2" in p for p in report.problems), report.problems


# ----------------------------------------------------------------------------- the stat cache


def forge_cache(cache: Path, swap: Callable[[bytes], bytes]) -> None:
    cache.write_bytes(swap(cache.read_bytes()))


def test_a_damaged_stat_cache_is_not_trusted(ws: Path, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    a, b = b"content of a\n" * 10, b"content of b\n" * 10
    (ws / "a.txt").write_bytes(a)
    (ws / "b.txt").write_bytes(b)
    age_tree(ws)
    ha, hb = blake3.blake3(a).hexdigest(), blake3.blake3(b).hexdigest()
    with Store.open(store_dir) as store:
        store.at(ws).capture(scope=SCOPE)
    [cache] = (store_dir / "cache").glob("*.index")
    assert ha.encode() in cache.read_bytes()
    # The cache now claims b's blob (which the store holds) for the unchanged a.txt.
    forge_cache(cache, lambda data: data.replace(ha.encode(), hb.encode()))
    with Store.open(store_dir) as store:
        snap = store.at(ws).capture(scope=SCOPE).id
        files = store.files(snap)
    assert files["a.txt"][3] == ha
    assert files["b.txt"][3] == hb


def test_a_stat_cache_entry_of_another_shape_is_no_hit(ws: Path, tmp_path: Path) -> None:
    """Entries are used as stored (no re-tupling on load): one of a wrong shape, with a valid checksum (a cache of
    another version, or forged), must read as a miss, never as a blob id or a traceback."""
    import marshal

    from snapshot_store.detect.index import join, payload, section, sections

    store_dir = tmp_path / "store"
    a = b"content of a\n" * 10
    (ws / "a.txt").write_bytes(a)
    (ws / "b.txt").write_bytes(b"b\n")
    age_tree(ws)
    with Store.open(store_dir) as store:
        store.at(ws).capture(scope=SCOPE)
    [cache] = (store_dir / "cache").glob("*.index")
    parts = sections(cache.read_bytes())
    assert parts is not None
    body = payload(parts[1])
    assert body is not None
    doc = marshal.loads(body)
    key = doc["a.txt"][:5]
    doc["a.txt"] = (*key, 12345)  # the blob is not text
    doc["b.txt"] = doc["b.txt"][:5]  # no blob at all
    # Without the walk half: else the capture checks the saved walk and asks the stat cache nothing.
    cache.write_bytes(join(b"", section(marshal.dumps(doc, 2))))
    with Store.open(store_dir) as store:
        res = store.at(ws).capture(scope=SCOPE)
        files = store.files(res.id)
    assert files["a.txt"][3] == blake3.blake3(a).hexdigest()
    assert files["b.txt"][3] == blake3.blake3(b"b\n").hexdigest()
    assert res.bytes_hashed > 0  # both were read again
