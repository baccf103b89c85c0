"""The workspace index is one file (`cache/<wskey>.index`, FORMAT.md §7): a store with the two files of before
migrates without hashing the workspace again, and a damaged or truncated index costs a walk, never a wrong answer."""

from __future__ import annotations

import marshal
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import blake3
import pytest
from store_helpers import WIDE, age_tree, write

import snapshot_store.scope as scope_mod
from snapshot_store import Store
from snapshot_store.detect.index import (
    ENCODE_SLICE,
    LEGACY_STAT_MAGIC,
    LEGACY_WALK_MAGIC,
    MAGIC,
    WorkspaceIndex,
    payload,
    read_stat_at,
    read_walk_section,
    sections,
)
from snapshot_store.manifest import is_captured
from snapshot_store.stamps import stat_key

REPO = Path(__file__).resolve().parents[1]
FILES = {f"src/m{i}.py": f"value = {i}\n" * (i + 1) for i in range(12)} | {"README.md": "readme\n"}


@pytest.fixture
def indexed(ws: Path, tmp_path: Path) -> Path:
    """A store whose index of `ws` holds a trusted walk and a stat entry for every file."""
    for rel, text in FILES.items():
        write(ws, rel, text)
    age_tree(ws)
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        s.at(ws).capture(scope=WIDE)
    return store_dir


def cache_files(store_dir: Path, suffix: str) -> list[Path]:
    return sorted((store_dir / "cache").glob(f"*{suffix}"))


def halves(store_dir: Path) -> tuple[bytes, bytes]:
    """The walk and per-path payloads of the one index file, checked."""
    [index] = cache_files(store_dir, ".index")
    parts = sections(index.read_bytes())
    assert parts is not None
    walk, stat = payload(parts[0]), payload(parts[1])
    assert walk is not None and stat is not None
    return bytes(walk), bytes(stat)


def make_legacy(store_dir: Path, *, walk: bool = True) -> None:
    """Turn the index into the two files a store had before (CRSTAT2 stat cache, CRWALK3 saved walk)."""
    walk_body, stat_body = halves(store_dir)
    [index] = cache_files(store_dir, ".index")
    stem = index.with_suffix("")
    stem.with_suffix(".stat").write_bytes(LEGACY_STAT_MAGIC + blake3.blake3(stat_body).digest() + stat_body)
    if walk:
        stem.with_suffix(".walk").write_bytes(LEGACY_WALK_MAGIC + blake3.blake3(walk_body).digest() + walk_body)
    index.unlink()


def assert_true_contents(store_dir: Path, ws: Path, snap: str) -> None:
    """The snapshot holds every file of the workspace with the blob of its bytes now."""
    with Store.open(store_dir) as s:
        files = s.files(snap)
    on_disk = {str(p.relative_to(ws)): p.read_bytes() for p in ws.rglob("*") if p.is_file()}
    assert {p for p, e in files.items() if is_captured(e)} == set(on_disk)
    for rel, data in on_disk.items():
        assert files[rel][3] == blake3.blake3(data).hexdigest(), rel


def test_a_store_with_the_two_old_files_checks_the_migrated_walk_instead_of_walking(
        ws: Path, indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_legacy(indexed)
    write(ws, "src/m3.py", "value = 'changed'\n")  # same directory listing: the check reads just this file

    def no_walk(*_a: object, **_k: object) -> None:
        raise AssertionError("walked: the old saved walk was not migrated")

    monkeypatch.setattr(scope_mod, "select", no_walk)
    with Store.open(indexed) as s:
        res = s.at(ws).capture(scope=WIDE)
    monkeypatch.undo()
    assert res.bytes_hashed == len("value = 'changed'\n")
    assert_true_contents(indexed, ws, res.id)
    assert cache_files(indexed, ".stat") == cache_files(indexed, ".walk") == []  # read once, then removed
    assert len(cache_files(indexed, ".index")) == 1


def test_a_store_with_the_old_stat_cache_walks_without_hashing_the_workspace_again(
        ws: Path, indexed: Path) -> None:
    make_legacy(indexed, walk=False)  # no saved walk: the capture walks and asks the migrated stat cache
    write(ws, "new.txt", "a new file\n")
    with Store.open(indexed) as s:
        res = s.at(ws).capture(scope=WIDE)
    assert res.bytes_hashed == len("a new file\n")  # every other file is vouched for by its stat entry
    assert_true_contents(indexed, ws, res.id)
    assert cache_files(indexed, ".stat") == []
    _walk, stat = halves(indexed)
    assert "new.txt" not in marshal.loads(stat)  # written within the racy window: never vouched for yet


def _damaged(data: bytes) -> list[tuple[str, bytes]]:
    """Truncations, and single flipped bytes spread over the file and inside a blob id of the per-path half."""
    out = [(f"truncated to {n}", data[:n]) for n in (0, 5, len(MAGIC) + 4, len(data) // 3, len(data) // 2,
                                                      len(data) - 1)]
    blob_at = data.index(blake3.blake3(FILES["src/m5.py"].encode()).hexdigest().encode())
    for at in [*range(0, len(data), max(1, len(data) // 16)), blob_at, blob_at + 7, len(data) - 1]:
        flipped = bytearray(data)
        flipped[at] ^= 0x01
        out.append((f"byte {at} flipped", bytes(flipped)))
    out.append(("padded", data + b"\0"))
    return out


def test_a_damaged_or_truncated_index_costs_a_walk_never_a_wrong_answer(ws: Path, indexed: Path) -> None:
    [index] = cache_files(indexed, ".index")
    pristine = index.read_bytes()
    for n, (how, data) in enumerate(_damaged(pristine)):
        index.write_bytes(data)
        write(ws, f"new{n}.txt", f"added while the index was {how}\n")  # a new listing: the capture walks
        with Store.open(indexed) as s:
            res = s.at(ws).capture(scope=WIDE)
        assert_true_contents(indexed, ws, res.id)
        assert sections(index.read_bytes()) is not None, how  # rewritten whole


KILLED_MID_WRITE = r"""
import os, signal, sys
store_dir, ws, when = sys.argv[1], sys.argv[2], int(sys.argv[3])
cache = os.path.realpath(os.path.join(store_dir, "cache"))
real_write, count = os.write, 0

def write(fd, data):
    global count
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        where = ""
    if os.path.dirname(where) == cache:
        count += 1
        if count == when:  # half of this write reaches the file, then the process is killed
            real_write(fd, bytes(data)[:len(data) // 2])
            os.kill(os.getpid(), signal.SIGKILL)
    return real_write(fd, data)

os.write = write
from snapshot_store import ScopeSettings, Store
with Store.open(store_dir) as s:
    s.at(ws).capture(scope=ScopeSettings(residue_max_files=1000))
"""


def test_a_process_killed_while_writing_the_index_leaves_the_old_or_the_new_one(ws: Path, indexed: Path) -> None:
    """SIGKILL halfway through each write of a file in the cache (one run each, until a run gets past them all):
    the index is always a whole one, the old or the new, and the next capture records the true contents."""
    [index] = cache_files(indexed, ".index")
    outcomes = []
    for when in range(1, 12):  # the index is written in five pieces (index.parts), each a point to be killed at
        old = index.read_bytes()
        write(ws, f"d{when}/new.txt", f"new directory {when}\n")  # a walk: both halves of the index change
        age_tree(ws)
        run = subprocess.run([sys.executable, "-c", KILLED_MID_WRITE, str(indexed), str(ws), str(when)],
                             cwd=REPO, capture_output=True, text=True, timeout=120)
        assert run.returncode in (0, -signal.SIGKILL), run.stderr
        now = index.read_bytes()
        assert sections(now) is not None, when
        assert now == old if run.returncode else now != old, when
        outcomes.append(run.returncode)
        with Store.open(indexed) as s:
            res = s.at(ws).capture(scope=WIDE)
        assert_true_contents(indexed, ws, res.id)
        if run.returncode == 0:
            break
    assert outcomes[0] == -signal.SIGKILL and outcomes[-1] == 0, outcomes  # killed at some writes, then none left


def read_in_parts(path: Path) -> tuple[bytes, bytes] | None:
    """The two sections as a command reads them: the walk half, then the per-path half where that read found it."""
    got = read_walk_section(path)
    if got is None:
        return None
    stat = read_stat_at(path, got[1])
    return None if stat is None else (got[0], stat)


def test_the_index_read_in_parts_refuses_what_the_whole_read_refuses(indexed: Path, tmp_path: Path) -> None:
    """The index read a section at a time (the walk half, then the per-path half when first asked) answers as
    sections() of the whole bytes, damage included."""
    [index] = cache_files(indexed, ".index")
    pristine = index.read_bytes()
    probe = tmp_path / "probe.index"
    for how, data in [("intact", pristine), *_damaged(pristine)]:
        probe.write_bytes(data)
        assert read_in_parts(probe) == sections(data), how


def test_stat_entries_changed_before_the_cache_is_decoded_are_kept(ws: Path, indexed: Path) -> None:
    """The per-path half is decoded only when looked up: a restore's forget and a capture's update_some made before
    that are what the lookups and the next save then see."""
    [index_path] = cache_files(indexed, ".index")
    _walk, stat_body = halves(indexed)
    on_disk = marshal.loads(stat_body)
    kept, forgotten, reread = "src/m1.py", "src/m2.py", "src/m3.py"
    st_kept = os.lstat(ws / kept)
    assert on_disk[kept][:5] == stat_key(st_kept)
    cache = WorkspaceIndex(index_path).stat
    cache.forget([forgotten])
    st = os.lstat(ws / reread)
    fresh_key = (st.st_size, 1, 2, st.st_ino, st.st_mode)  # old enough to be trusted
    cache.update_some({reread: ()}, {reread: (fresh_key, "ab" * 32)}, time.time_ns())
    assert cache.lookup(kept, stat_key(st_kept)) == on_disk[kept][5]
    assert cache.lookup(forgotten, stat_key(os.lstat(ws / forgotten))) is None
    assert cache.entries[reread] == (*fresh_key, "ab" * 32)
    assert set(cache.entries) == set(on_disk) - {forgotten}
    assert marshal.loads(cache.encode()) == cache.entries  # what a save that rewrites the half writes


def test_the_per_path_half_is_read_when_asked_from_the_index_in_place_then(ws: Path, indexed: Path,
                                                                            tmp_path: Path) -> None:
    """A command reads the walk half first and the per-path half only when it looks a file up (an unchanged capture
    never does): by then another process may have renamed its own index over the file. The lookups then answer from
    that index's entries, which vouch for themselves (each holds the stat it was true for); an index gone by then
    leaves the half empty, so lookups miss and the capture hashes again, never a wrong answer."""
    [index_path] = cache_files(indexed, ".index")
    rel = "src/m4.py"
    key_then = stat_key(os.lstat(ws / rel))
    reader = WorkspaceIndex(index_path)
    assert reader.saved_walk() is not None  # the walk half only, so far
    blob_then = WorkspaceIndex(index_path).lookup(rel, key_then)
    assert blob_then is not None

    other = WorkspaceIndex(index_path)  # another process's index, renamed over the one `reader` read the walk of
    key_now = (*key_then[:1], key_then[1] + 1, *key_then[2:])
    other.stat.entries[rel] = (*key_now, "cd" * 32)
    other.stat.dirty = True
    other.save()
    assert reader.lookup(rel, key_now) == "cd" * 32  # the entries of the index in place now
    assert reader.lookup(rel, key_then) is None

    gone = WorkspaceIndex(index_path)
    assert gone.saved_walk() is not None
    index_path.rename(tmp_path / "elsewhere.index")
    assert gone.lookup(rel, key_now) is None and gone.stat.entries == {}
    write(ws, rel, "changed\n")
    with Store.open(indexed) as s:
        snap = s.at(ws).capture(scope=WIDE)
    assert_true_contents(indexed, ws, snap.id)


def test_the_per_path_half_written_in_pieces_is_the_one_marshal_of_its_entries(tmp_path: Path) -> None:
    """The index writes its per-path half slice by slice (bounded memory); the file must hold exactly what one
    marshal of the entries is, so any reader (and any earlier version) loads the same map."""
    for n in (0, 1, ENCODE_SLICE - 1, ENCODE_SLICE, 2 * ENCODE_SLICE + 3):
        index = WorkspaceIndex(tmp_path / f"{n}.index")
        entries = {f"d/é{i}": (i, 10**18 + i, 10**18, 2**40 + i, 0o100644, f"{i:064x}") for i in range(n)}
        index.stat.entries = dict(entries)
        index.stat.dirty = True
        index.save()
        parts = sections((tmp_path / f"{n}.index").read_bytes())
        assert parts is not None
        body = payload(parts[1])
        assert body is not None and bytes(body) == marshal.dumps(entries, 2)
        assert WorkspaceIndex(tmp_path / f"{n}.index").stat.entries == entries


def test_a_capturer_released_before_gc_left_its_index_saved_and_captures_on(ws: Path, tmp_path: Path) -> None:
    """`snapshots capture` lets the capture's indexes go before its automatic gc (Capturer.release, memory): what
    the next capture in the same process, and in the next one, goes on from is the saved index, read again: an
    unchanged workspace reads no file, and a change is found and read."""
    for rel, text in FILES.items():
        write(ws, rel, text)
    age_tree(ws)
    store_dir = tmp_path / "store"
    with Store.open(store_dir) as s:
        first = s.at(ws).capture_summary(scope=WIDE)
        s.capturer.release()
        again = s.at(ws).capture_summary(scope=WIDE)
        assert (again.bytes_hashed, again.unchanged) == (0, True)
        write(ws, "src/m3.py", "value = 'changed'\n")
        time.sleep(0.3)  # past the racy-timestamp window (age_tree would change every file's ctime)
        changed = s.at(ws).capture_summary(scope=WIDE)
        assert changed.bytes_hashed == len("value = 'changed'\n") and not changed.unchanged
        s.capturer.release()
    with Store.open(store_dir) as s:
        later = s.at(ws).capture_summary(scope=WIDE)
    assert (later.bytes_hashed, later.unchanged) == (0, True)
    assert first.id != changed.id
    assert_true_contents(store_dir, ws, later.id)
