"""A full disk or bad input gives a clear StoreError and changes nothing.

The rule under test: a failure is a StoreError subclass with a one-line message (StoreFull for
ENOSPC/EDQUOT), no new snapshot is listed, no half-written pack or snapshot file is visible, the
workspace is byte-identical, the store still verifies, and it works again once the disk has room.

Disk-full faults are injected where the bytes really go:
  * pack data  -> PackWriter writes through a buffered Python file object; `packs.open` is
                  replaced so the BufferedWriter sits on a raw file whose write() runs out of space;
  * pack index, snapshot files, journal, stat cache -> fsutil.atomic_write -> os.write;
  * refs       -> fsutil.append_line -> os.write;
  * workspace  -> SafeRoot.write_file -> os.write into `.codexr-tmp-*`.
Faults are selected by the path of the file descriptor (via /proc/self/fd), so nothing else in the
process is affected. A "short write" fault models the kernel: a write that crosses the last free
byte returns a short count, the next write fails with ENOSPC.
"""

from __future__ import annotations

import errno
import io
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from store_helpers import WIDE, exact_tree, store_files, tree, write

import snapshot_store.repository.packs as packs_mod
import snapshot_store.scope as scope_mod
from snapshot_store import (
    IgnoreFileError,
    Store,
    StoreError,
    StoreFull,
    UnknownSnapshot,
    WorkspaceError,
)
from snapshot_store.maint.verify import verify

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="faults are matched by fd path")

WS_TMP = ".codexr-tmp-"
STORE_TMP = ".tmp-"


# --------------------------------------------------------------------------- fault injection


def _fd_path(fd: int) -> str | None:
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


class _FaultyRaw(io.RawIOBase):
    """A raw file whose writes draw on the Disk's free space (under the pack's BufferedWriter)."""

    def __init__(self, inner: io.FileIO, disk: Disk, path: str) -> None:
        super().__init__()
        self._inner, self._disk, self._path = inner, disk, path

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._inner.fileno()

    def seek(self, pos: int, whence: int = 0) -> int:
        return self._inner.seek(pos, whence)

    def tell(self) -> int:
        return self._inner.tell()

    def truncate(self, size: int | None = None) -> int:
        return self._inner.truncate(size)

    def write(self, b: Any) -> int:
        view = memoryview(b).cast("B")
        n = self._disk.grant(len(view), self._path)
        return self._inner.write(view[:n])

    def close(self) -> None:
        if not self.closed:
            try:
                self._inner.close()
            finally:
                super().close()


class Disk:
    """Free space for the files `where(path)` selects; beyond it writes fail with `err`."""

    def __init__(self, mp: pytest.MonkeyPatch, where: Callable[[str], bool], *, free: int = 0,
                 fsync: bool = False, err: int = errno.ENOSPC) -> None:
        self.where, self.free, self.err, self.fail_fsync = where, free, err, fsync
        self.refused: list[str] = []
        real_write, real_fsync, real_open = os.write, os.fsync, io.open

        def fake_write(fd: int, data: Any) -> int:
            path = _fd_path(fd)
            if path is None or not where(path):
                return real_write(fd, data)
            view = memoryview(data).cast("B")
            return real_write(fd, view[:self.grant(len(view), path)])

        def fake_fsync(fd: Any) -> None:
            if self.fail_fsync:
                path = _fd_path(fd if isinstance(fd, int) else fd.fileno())
                if path is not None and where(path):
                    self.refuse(path)
            real_fsync(fd)

        def pack_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            path = os.fspath(file)
            if mode != "xb" or not where(path):
                return real_open(file, mode, *args, **kwargs)
            return io.BufferedWriter(_FaultyRaw(cast(io.FileIO, real_open(file, mode, buffering=0)), self, path))

        mp.setattr(os, "write", fake_write)
        mp.setattr(os, "fsync", fake_fsync)
        mp.setattr(packs_mod, "open", pack_open, raising=False)

    def refuse(self, path: str) -> None:
        self.refused.append(path)
        raise OSError(self.err, os.strerror(self.err))

    def grant(self, want: int, path: str) -> int:
        if want == 0:
            return 0
        if self.free <= 0:
            self.refuse(path)
        n = min(want, self.free)
        self.free -= n
        return n


def under(d: Path, *, suffix: str | None = None, not_suffix: str | None = None) -> Callable[[str], bool]:
    prefix = str(d) + "/"

    def where(path: str) -> bool:
        if not path.startswith(prefix):
            return False
        if suffix is not None and not path.endswith(suffix):
            return False
        return not (not_suffix is not None and path.endswith(not_suffix))

    return where


def ws_temp(ws: Path) -> Callable[[str], bool]:
    prefix = str(ws) + "/"
    return lambda p: p.startswith(prefix) and os.path.basename(p).startswith(WS_TMP)


# --------------------------------------------------------------------------- fixtures & checks


@pytest.fixture
def base(tmp_path: Path) -> Path:
    return Path(os.path.realpath(tmp_path))


@pytest.fixture
def ws(base: Path) -> Path:
    root = base / "ws"
    root.mkdir()
    return root


@pytest.fixture
def store(base: Path) -> Iterator[Store]:
    s = Store.open(base / "store")
    yield s
    s.close()


def rand(n: int) -> bytes:
    return os.urandom(n)


def one_line(exc: BaseException) -> str:
    assert isinstance(exc, StoreError), f"{type(exc).__name__} is not a StoreError: {exc}"
    msg = str(exc)
    assert msg and "\n" not in msg and "Traceback" not in msg, repr(msg)
    return msg


def full_disk_error(monkeypatch: pytest.MonkeyPatch, where: Callable[[str], bool], action: Callable[[], object],
                    *, free: int = 0, fsync: bool = False) -> StoreFull:
    """Run `action` with a `Disk` full at `where`: it must raise StoreFull after a refused write; the error."""
    with monkeypatch.context() as m:
        disk = Disk(m, where, free=free, fsync=fsync)
        with pytest.raises(StoreFull) as info:
            action()
        assert disk.refused
    return info.value


def ids(store: Store, ws: Path) -> list[str]:
    return [i.id for i in store.list_snapshots(ws)]


def store_temps(store_dir: Path) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(store_dir):
        out += [os.path.relpath(os.path.join(dirpath, f), store_dir) for f in files if f.startswith(STORE_TMP)]
    return sorted(out)


def ws_temps(root: Path) -> list[str]:
    out = []
    for dirpath, _dirs, files in os.walk(root):
        out += [os.path.relpath(os.path.join(dirpath, f), root) for f in files if f.startswith(WS_TMP)]
    return sorted(out)


def journals(store_dir: Path) -> list[str]:
    return sorted(p.name for p in (store_dir / "journal").iterdir())


def assert_store_sound(store_dir: Path) -> None:
    """No visible half-written objects, no temp files, no journal, and a full verify passes."""
    names = [n for n in os.listdir(store_dir / "packs") if not n.startswith(STORE_TMP)]
    packs = {n[:-5] for n in names if n.endswith(".pack")}
    idxs = {n[:-4] for n in names if n.endswith(".idx")}
    assert packs - idxs == set(), f"pack file(s) without an index left visible: {sorted(packs - idxs)}"
    assert idxs - packs == set(), f"index file(s) without a pack left visible: {sorted(idxs - packs)}"
    assert store_temps(store_dir) == [], "temporary files left behind"
    assert journals(store_dir) == [], "a restore journal was left behind"
    with Store.open(store_dir, create=False) as fresh:
        report = verify(fresh, full=True)
    assert report.ok, report.problems


def assert_works_again(store: Store, ws: Path) -> None:
    """With space back: capture, scribble, restore -> exactly the captured tree; store still sound."""
    res = store.at(ws).capture(scope=WIDE)
    assert res.id in ids(store, ws)
    want = tree(ws)
    write(ws, "scribble.txt", "after the disk filled up")
    for p in sorted(ws.rglob("*.bin"))[:1]:
        p.write_bytes(b"overwritten")
    store.at(ws).restore(res.id, scope=WIDE)
    assert tree(ws) == want
    assert_store_sound(store.path)


def populate(ws: Path, kind: str) -> None:
    """Content the next capture must store in a new pack."""
    if kind == "big":  # each blob larger than BufferedWriter's 8 KiB buffer: written straight through
        for n in range(5):
            write(ws, f"new/big{n}.bin", rand(40_000))
    elif kind == "small":  # everything fits in the buffer: the bytes hit the disk at the pack's flush
        for n in range(5):
            write(ws, f"new/small{n}.bin", rand(300))
    elif kind == "streamed":  # above STREAM_THRESHOLD: PackWriter.add_stream
        write(ws, "new/huge.bin", rand(packs_mod.STREAM_THRESHOLD + 300_000))
    else:
        raise AssertionError(kind)


def base_capture(store: Store, ws: Path) -> str:
    write(ws, "keep.txt", "kept\n")
    write(ws, "dir/old.bin", rand(20_000))
    return store.at(ws).capture(scope=WIDE).id


# --------------------------------------------------------------------------- 1. pack write fails

PACK_CASES: dict[str, tuple[str, str, int, dict[str, int]]] = {
    # id: (content kind, what fails, free bytes, extra)
    "data-enospc": ("big", "data", 0, {}),
    "data-edquot": ("big", "data", 0, {"err": errno.EDQUOT}),
    "data-short-write-mid-blob": ("big", "data", 100_000, {}),
    "data-at-final-flush": ("small", "data", 0, {}),
    "data-fsync": ("big", "data", 10**9, {"fsync": True}),
    "data-streamed-blob": ("streamed", "data", 1_000_000, {}),
    "second-pack-after-rotation": ("big", "data", 150_000, {"rotate": 100_000}),
    "index-enospc": ("big", "index", 0, {}),
    "index-short-write": ("big", "index", 50, {}),
}


@pytest.mark.parametrize("case", list(PACK_CASES))
def test_capture_failing_while_writing_a_pack(case: str, ws: Path, store: Store,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    kind, part, free, extra = PACK_CASES[case]
    base_capture(store, ws)
    populate(ws, kind)
    listed, before = store.list_snapshots(ws), exact_tree(ws)
    packs = store.path / "packs"
    where = under(packs, suffix=".pack") if part == "data" else under(packs, not_suffix=".pack")
    with monkeypatch.context() as m:
        if "rotate" in extra:
            m.setattr(packs_mod, "PACK_TARGET_BYTES", extra["rotate"])
        disk = Disk(m, where, free=free, fsync=bool(extra.get("fsync")), err=extra.get("err", errno.ENOSPC))
        with pytest.raises(StoreFull) as info:
            store.at(ws).capture(scope=WIDE)
        assert disk.refused, "the fault was never hit: the test does not exercise the pack write"
    assert "disk is full" in one_line(info.value)
    assert store.list_snapshots(ws) == listed
    assert exact_tree(ws) == before
    assert_store_sound(store.path)
    assert_works_again(store, ws)


# --------------------------------------------------------------------------- 2. snapshot file fails


@pytest.mark.parametrize(("free", "fsync"), [(0, False), (10, False), (10**9, True)],
                         ids=["enospc", "short-write", "fsync"])
def test_capture_failing_while_writing_the_snapshot_file(free: int, fsync: bool, ws: Path, store: Store,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    base_capture(store, ws)
    populate(ws, "big")
    listed, before = store.list_snapshots(ws), exact_tree(ws)
    packs_before = set(os.listdir(store.path / "packs"))
    one_line(full_disk_error(monkeypatch, under(store.path / "snapshots"), lambda: store.at(ws).capture(scope=WIDE),
                             free=free, fsync=fsync))
    # The pack did commit before the snapshot (write order); it is merely unreferenced now.
    assert len(set(os.listdir(store.path / "packs")) - packs_before) == 2
    assert store.list_snapshots(ws) == listed
    assert exact_tree(ws) == before
    assert_store_sound(store.path)
    assert_works_again(store, ws)


@pytest.mark.parametrize("free", [0, 20], ids=["enospc", "short-write"])
def test_capture_failing_while_appending_the_ref(free: int, ws: Path, store: Store,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk that fills up in the middle of the ref line: the kernel returns a short count first."""
    base_capture(store, ws)
    populate(ws, "small")
    listed, before = store.list_snapshots(ws), exact_tree(ws)
    with monkeypatch.context() as m:
        Disk(m, under(store.path / "refs"), free=free)
        with pytest.raises(StoreFull) as info:
            store.at(ws).capture(scope=WIDE)
    one_line(info.value)
    assert store.list_snapshots(ws) == listed
    assert exact_tree(ws) == before
    assert_store_sound(store.path)
    # Two more captures: a torn ref line must not turn into a damaged ref file later.
    assert_works_again(store, ws)
    write(ws, "later.txt", "later")
    store.at(ws).capture(scope=WIDE)
    assert len(store.list_snapshots(ws)) == len(listed) + 3  # works-again capture, its restore's safety, this


@pytest.mark.parametrize("free", [0, 20], ids=["enospc", "short-write"])
def test_a_capture_failing_at_its_ref_line_leaves_no_snapshot_file_without_one(
        free: int, ws: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error says nothing was committed, and that holds for the snapshot file too: written before the ref line
    failed, it is taken back, so no snapshot named by no ref line is left to be called lost history once it is old."""
    base_capture(store, ws)
    populate(ws, "small")
    snapshots = sorted(store.path.glob("snapshots/*/*"))
    with monkeypatch.context() as m:
        Disk(m, under(store.path / "refs"), free=free)
        with pytest.raises(StoreFull):
            store.at(ws).capture(scope=WIDE)
    assert sorted(store.path.glob("snapshots/*/*")) == snapshots
    assert journals(store.path) == []
    past = time.time() - 3600
    for p in store.path.rglob("*"):
        os.utime(p, (past, past))
    assert_store_sound(store.path)


def test_stat_cache_write_failure_is_not_reported_as_nothing_committed(
        ws: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The stat cache is disposable (FORMAT.md §5.4); if its save fails the capture must not claim
    StoreFull("nothing was committed") while the snapshot is in fact committed and listed."""
    write(ws, "a.txt", "a")
    write(ws, "b.bin", rand(5000))
    old = 1_600_000_000_123_456_789
    for p in ("a.txt", "b.bin"):
        os.utime(ws / p, ns=(old, old))
    time.sleep(0.15)  # entries are only cached once their ctime is > 100 ms older than the capture start
    listed = store.list_snapshots(ws)
    with monkeypatch.context() as m:
        disk = Disk(m, under(store.path / "cache"))
        try:
            res = store.at(ws).capture(scope=WIDE)
        except StoreFull:
            assert disk.refused
            assert store.list_snapshots(ws) == listed, (
                "capture raised StoreFull ('nothing was committed') but its snapshot was committed and listed")
        else:
            assert ids(store, ws) == [*[i.id for i in listed], res.id]
    assert_store_sound(store.path)


# --------------------------------------------------------------------------- 3. restore: safety capture fails


def make_restore_case(store: Store, ws: Path) -> str:
    write(ws, "a.txt", "target a\n")
    write(ws, "b.bin", rand(30_000))
    write(ws, "sub/c.txt", "target c\n")
    target = store.at(ws).capture(scope=WIDE).id
    write(ws, "a.txt", "edited a, longer\n")
    write(ws, "b.bin", rand(30_000))
    write(ws, "sub/c.txt", "edited c\n")
    write(ws, "n1.bin", rand(25_000))
    return target


SAFETY_FAULTS: dict[str, Callable[[Path], tuple[Callable[[str], bool], int]]] = {
    "pack-data": lambda s: (under(s / "packs", suffix=".pack"), 0),
    "pack-data-short-write": lambda s: (under(s / "packs", suffix=".pack"), 20_000),
    "snapshot-file": lambda s: (under(s / "snapshots"), 0),
    "ref-line": lambda s: (under(s / "refs"), 0),
}


@pytest.mark.parametrize("fault", list(SAFETY_FAULTS))
def test_restore_failing_during_its_safety_capture(fault: str, ws: Path, store: Store,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    target = make_restore_case(store, ws)
    listed, before, edited = store.list_snapshots(ws), exact_tree(ws), tree(ws)
    where, free = SAFETY_FAULTS[fault](store.path)
    one_line(full_disk_error(monkeypatch, where, lambda: store.at(ws).restore(target, scope=WIDE), free=free))
    assert exact_tree(ws) == before
    assert journals(store.path) == []
    assert store.list_snapshots(ws) == listed, "a safety snapshot was listed although the restore failed"
    assert_store_sound(store.path)
    # Space is back: the same restore works, and its safety snapshot undoes it.
    res = store.at(ws).restore(target, scope=WIDE)
    assert (ws / "a.txt").read_text() == "target a\n" and not (ws / "n1.bin").exists()
    store.at(ws).restore(res.safety_id, scope=WIDE)
    assert tree(ws) == edited
    assert_store_sound(store.path)


def test_restore_failing_while_writing_its_journal(ws: Path, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    target = make_restore_case(store, ws)
    before = exact_tree(ws)
    one_line(full_disk_error(monkeypatch, under(store.path / "journal"),
                             lambda: store.at(ws).restore(target, scope=WIDE)))
    assert exact_tree(ws) == before
    assert journals(store.path) == []
    assert_store_sound(store.path)
    store.at(ws).restore(target, scope=WIDE)
    assert (ws / "a.txt").read_text() == "target a\n"


# --------------------------------------------------------------------------- 4. restore: workspace write fails


@pytest.mark.parametrize("free", [0, 2500], ids=["first-write", "short-write-in-third-file"])
@pytest.mark.parametrize("finish", ["recover", "capture"])
def test_restore_failing_while_writing_workspace_files(free: int, finish: str, ws: Path, store: Store,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name in "abcdef":
        write(ws, f"{name}.bin", rand(1000))
    write(ws, "sub/g.bin", rand(1000))
    target = store.at(ws).capture(scope=WIDE).id
    target_tree = tree(ws)
    for name in "abcde":
        write(ws, f"{name}.bin", rand(700))
    (ws / "f.bin").unlink()
    write(ws, "sub/g.bin", rand(700))
    write(ws, "n1.txt", "created later\n")
    pre_tree = tree(ws)

    one_line(full_disk_error(monkeypatch, ws_temp(ws), lambda: store.at(ws).restore(target, scope=WIDE), free=free))

    now = tree(ws)
    for p in sorted(set(now) | set(pre_tree) | set(target_tree)):
        assert now.get(p) in (pre_tree.get(p), target_tree.get(p)), (
            f"{p} is neither at its pre-restore nor at its target state: {now.get(p)}")
    assert ws_temps(ws) == [], "a partial temp file was left in the workspace"
    # (the files' content is staged and synced together before any is put in place, issue 35: a disk that fills
    # while the third is staged leaves every file as it was, and the journal finishes the restore)
    assert len(journals(store.path)) == 1, "the journal must stay so the restore can be finished"

    if finish == "recover":
        report = store.at(ws).recover()
        assert report is not None and report.left == []
    else:
        store.at(ws).capture(scope=WIDE)
    assert ws_temps(ws) == []
    assert journals(store.path) == []
    assert tree(ws) == target_tree
    assert_store_sound(store.path)
    # The failed restore's safety snapshot still takes the workspace back to where it was.
    safety = [i for i in store.list_snapshots(ws) if i.kind == "safety"][-1]
    store.at(ws).restore(safety.id, scope=WIDE)
    assert tree(ws) == pre_tree
    assert_store_sound(store.path)


# --------------------------------------------------------------------------- 5. vanished workspace


@pytest.mark.parametrize("how", ["removed", "replaced-by-file"])
def test_capture_of_a_vanished_workspace(how: str, ws: Path, base: Path) -> None:
    write(ws, "a.txt", "a")
    with Store.open(base / "store") as store:
        store.at(ws).capture(scope=WIDE)
        files_before, listed = store_files(store.path), store.list_snapshots()
        shutil.rmtree(ws)
        if how == "replaced-by-file":
            ws.write_text("not a directory")
        with pytest.raises(WorkspaceError) as info:
            store.at(ws).capture(scope=WIDE)
        one_line(info.value)
        assert store.list_snapshots() == listed
        assert store_files(store.path) == files_before
        assert_store_sound(store.path)


@pytest.mark.parametrize("root_arg", [False, True], ids=["recorded-root", "explicit-root"])
def test_restore_into_a_vanished_workspace(root_arg: bool, ws: Path, store: Store) -> None:
    write(ws, "a.txt", "a")
    snap = store.at(ws).capture(scope=WIDE).id
    files_before, listed = store_files(store.path), store.list_snapshots()
    shutil.rmtree(ws)
    with pytest.raises(WorkspaceError) as info:
        (store.at(ws) if root_arg else store.origin(snap)).restore(snap, scope=WIDE)
    one_line(info.value)
    assert not ws.exists(), "restore must not recreate a vanished workspace"
    assert store.list_snapshots() == listed
    assert store_files(store.path) == files_before
    assert_store_sound(store.path)


def _vanish_on_ignore_load(m: pytest.MonkeyPatch, ws: Path) -> None:
    real = scope_mod.Ignore.load.__func__  # type: ignore[attr-defined]

    def load(cls: type, root: Path, *rest: Any) -> scope_mod.Ignore:
        if ws.exists():
            shutil.rmtree(ws)
        return cast(scope_mod.Ignore, real(cls, root, *rest))

    m.setattr(scope_mod.Ignore, "load", classmethod(load))


def test_capture_when_the_workspace_vanishes_during_the_capture(ws: Path, store: Store,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The workspace is removed after capture() resolved it (e.g. `rm -rf` of a worktree meanwhile)."""
    write(ws, "a.txt", "a")
    write(ws, "sub/b.txt", "b")
    store.at(ws).capture(scope=WIDE)
    files_before, listed = store_files(store.path), store.list_snapshots(ws)
    with monkeypatch.context() as m:
        _vanish_on_ignore_load(m, ws)
        with pytest.raises(WorkspaceError) as info:
            store.at(ws).capture(scope=WIDE)
    one_line(info.value)
    assert store.list_snapshots(ws) == listed, (
        "a snapshot of the vanished workspace was committed (it records its files as absent)")
    assert store_files(store.path) == files_before


def test_restore_when_the_workspace_vanishes_during_the_restore(ws: Path, store: Store,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    write(ws, "a.txt", "a")
    snap = store.at(ws).capture(scope=WIDE).id
    write(ws, "a.txt", "changed")
    files_before, listed = store_files(store.path), store.list_snapshots(ws)
    with monkeypatch.context() as m:
        _vanish_on_ignore_load(m, ws)
        with pytest.raises(WorkspaceError) as info:
            store.at(ws).restore(snap, scope=WIDE)
    one_line(info.value)
    assert not ws.exists()
    assert store.list_snapshots(ws) == listed
    assert store_files(store.path) == files_before


# --------------------------------------------------------------------------- 6. unknown ids


BAD_IDS = {
    "unknown-full-id": "0123456789abcdef" * 4,
    "prefix-of-nothing": "deadbeef",
    "thread-uuid": "0194c3a2-7d1e-7c3a-9f00-123456789abc",
    "path-traversal": "../../../etc/passwd",
    "empty": "",
    "uppercase-of-existing": "<UPPER>",
    "existing-with-newline": "<NEWLINE>",
}


@pytest.mark.parametrize("bad", list(BAD_IDS))
def test_restore_with_an_unknown_id_changes_nothing(bad: str, ws: Path, store: Store) -> None:
    write(ws, "a.txt", "a")
    snap = store.at(ws).capture(scope=WIDE).id
    write(ws, "a.txt", "changed")
    write(ws, "new.txt", "new")
    ref = {"<UPPER>": snap.upper(), "<NEWLINE>": snap + "\n"}.get(BAD_IDS[bad], BAD_IDS[bad])
    files_before, listed, before = store_files(store.path), store.list_snapshots(), exact_tree(ws)
    with pytest.raises(UnknownSnapshot) as info:
        store.at(ws).restore(ref, scope=WIDE)
    one_line(info.value)
    assert store.list_snapshots() == listed, "a safety snapshot was listed for a restore that never started"
    assert exact_tree(ws) == before
    assert store_files(store.path) == files_before
    assert_store_sound(store.path)


# --------------------------------------------------------------------------- 7. bad ignore file


@pytest.mark.parametrize("bad", ["directory", "invalid-utf8"])
def test_capture_with_a_bad_ignore_file_commits_nothing(bad: str, ws: Path, store: Store) -> None:
    write(ws, "a.txt", "a")
    store.at(ws).capture(scope=WIDE)
    write(ws, "a.txt", "changed")
    if bad == "directory":
        (ws / scope_mod.IGNORE_FILE).mkdir()
        write(ws, f"{scope_mod.IGNORE_FILE}/x", "*.txt\n")
    else:
        write(ws, scope_mod.IGNORE_FILE, b"*.log\n\xff\xfe\n")
    files_before, listed, before = store_files(store.path), store.list_snapshots(ws), exact_tree(ws)
    with pytest.raises(IgnoreFileError) as info:
        store.at(ws).capture(scope=WIDE)
    assert scope_mod.IGNORE_FILE in one_line(info.value)
    assert store.list_snapshots(ws) == listed
    assert store_files(store.path) == files_before
    assert exact_tree(ws) == before
    assert_store_sound(store.path)


def test_restore_with_an_ignore_file_that_is_a_directory_changes_nothing(ws: Path, store: Store) -> None:
    write(ws, "a.txt", "a")
    snap = store.at(ws).capture(scope=WIDE).id
    write(ws, "a.txt", "changed")
    (ws / scope_mod.IGNORE_FILE).mkdir()
    files_before, listed, before = store_files(store.path), store.list_snapshots(ws), exact_tree(ws)
    with pytest.raises(IgnoreFileError) as info:
        store.at(ws).restore(snap, scope=WIDE)
    one_line(info.value)
    assert store.list_snapshots(ws) == listed
    assert store_files(store.path) == files_before
    assert exact_tree(ws) == before
    assert journals(store.path) == []


# --------------------------------------------------------------------------- locks on a full disk


@pytest.mark.parametrize("op", ["capture", "restore"])
def test_lock_file_that_cannot_be_created_is_a_store_error(op: str, ws: Path, base: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating a file needs an inode/directory block: on a full disk `locks/*.lock` creation fails
    with ENOSPC like any other write, and must surface as StoreFull, not a raw OSError."""
    write(ws, "a.txt", "a")
    with Store.open(base / "store") as store:
        if op == "restore":
            snap = store.at(ws).capture(scope=WIDE).id  # store.lock exists; the workspace lock does not yet
            write(ws, "a.txt", "changed")
        locks = str(store.path / "locks") + "/"
        real_open = os.open

        def full_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            p = os.fspath(path)
            if isinstance(p, str) and p.startswith(locks) and flags & os.O_CREAT and not os.path.exists(p):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), p)
            return real_open(path, flags, *args, **kwargs)

        listed, before = store.list_snapshots(ws), exact_tree(ws)
        with monkeypatch.context() as m:
            m.setattr(os, "open", full_open)
            with pytest.raises(Exception) as info:  # the exception type is what this test checks
                if op == "capture":
                    store.at(ws).capture(scope=WIDE)
                else:
                    store.at(ws).restore(snap, scope=WIDE)
        assert isinstance(info.value, StoreFull), f"got {type(info.value).__name__}: {info.value}"
        one_line(info.value)
        assert store.list_snapshots(ws) == listed
        assert exact_tree(ws) == before
