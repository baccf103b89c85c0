"""Reads and writes stay inside the workspace however its directories are swapped, nested or crashed."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
from pathlib import Path

import blake3
import pytest

from snapshot_store import Store, dirfd
from snapshot_store.detect.index import stat_key
from snapshot_store.safefs import ASIDE_PREFIX, TMP_PREFIX, SafeRoot, UnsafePath
from snapshot_store.scope import forbidden

REPO = Path(__file__).parents[1]

# Keeps swapping ws/sub between the real directory and a symlink to an outside directory until
# the stop file appears; always leaves the real directory in place when it stops.
SWAPPER = r"""
import os, sys, time
sub, parked, link_tmp, outside, stop, ready = sys.argv[1:7]
trash = 0

def clear() -> None:
    # Whatever stands at ws/sub now goes (a racing restore may have made a directory there).
    global trash
    try:
        os.unlink(sub)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        trash += 1
        os.rename(sub, f"{parked}-trash{trash}")

def put(src: str) -> None:
    # A racing restore may make ws/sub a directory again between the clear and the rename (it writes sub/data.txt):
    # cleared again until the rename lands (a CI run saw it win twice in a row)
    for _ in range(1000):
        try:
            os.rename(src, sub)
            return
        except OSError:
            clear()
    os.rename(src, sub)

open(ready, "w").close()
while not os.path.exists(stop):
    os.rename(sub, parked)
    os.symlink(outside, link_tmp)
    put(link_tmp)
    time.sleep(0.0003)  # stay a symlink a little while (the walk takes about a millisecond)
    clear()
    put(parked)
    time.sleep(0.0003)
"""


@pytest.fixture(params=["openat2", "walk"])
def resolve(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each directory chain reached by the kernel in one openat2 (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS), or walked
    one component at a time as where there is no openat2 (macOS, older kernels, seccomp filters): both must refuse
    every way out of the workspace."""
    if request.param == "walk":
        monkeypatch.setattr(dirfd, "_openat2_call", lambda: None)
    elif dirfd._openat2_call() is None:
        pytest.skip("this kernel has no openat2 (Linux < 5.6, or a seccomp filter refuses it)")
    return str(request.param)


def _all_blobs(store: Store, root: Path) -> dict[str, set[str]]:
    """Every blob id every snapshot of the workspace names, by snapshot id."""
    out: dict[str, set[str]] = {}
    for info in store.list_snapshots(root):
        out[info.id] = {e[3] for e in store.files(info.id).values() if e[0] == "f"}
    return out


def _link_and_dir(store: Store, root: Path) -> list[str]:
    """Snapshots that record a path as a symlink and also as a directory (walked, or holding files)."""
    bad = []
    for info in store.list_snapshots(root):
        files = store.files(info.id)
        links = {p for p, e in files.items() if e[0] == "l"}
        below = {p.rpartition("/")[0] for p, e in files.items() if "/" in p and e[0] in ("f", "l", "d")}
        if links & (below | {p for p, e in files.items() if e[0] == "d"}):
            bad.append(info.id)
    return bad


def _start_swapper(tmp_path: Path, ws: Path, outside: Path) -> tuple[subprocess.Popen[bytes], Path]:
    stop, ready = tmp_path / "stop", tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", SWAPPER, str(ws / "sub"), str(tmp_path / "parked"),
                             str(tmp_path / "link-tmp"), str(outside), str(stop), str(ready)])
    while not ready.exists():
        time.sleep(0.01)
    return proc, stop


def test_capture_racing_a_directory_swapped_for_an_outside_symlink_never_stores_outside_content(
        tmp_path: Path, ws: Path, resolve: str) -> None:
    secret = secrets.token_bytes(4096)
    outside = tmp_path / "outside"
    outside.mkdir()
    (ws / "sub").mkdir()
    for name in ("data.txt", "other.txt", "third.txt"):
        (outside / name).write_bytes(secret + name.encode())
        (ws / "sub" / name).write_text(f"harmless {name}\n")
    (ws / "top.txt").write_text("top\n")
    secret_ids = {blake3.blake3(secret + n.encode()).hexdigest() for n in ("data.txt", "other.txt", "third.txt")}
    home = tmp_path / "home"
    with Store.open(home) as store:
        first = store.at(ws).capture().id
        proc, stop = _start_swapper(tmp_path, ws, outside)
        try:
            for n in range(150):
                if n % 10 == 9:
                    store.at(ws).restore(first, known_paths=["sub/data.txt"])
                else:
                    store.at(ws).capture(known_paths=["sub/data.txt", "sub/other.txt"])
        finally:
            stop.touch()
            assert proc.wait(timeout=30) == 0
        blobs = _all_blobs(store, ws)
        assert len(blobs) > 10
        leaked = {sid for sid, ids in blobs.items() if ids & secret_ids}
        assert not leaked, f"{len(leaked)} of {len(blobs)} snapshots hold an outside file's content"
        store.blobs.refresh()
        assert not any(bytes.fromhex(s) in store.blobs for s in secret_ids), "outside content stored in a pack"
        assert not _link_and_dir(store, ws)
    for name in ("data.txt", "other.txt", "third.txt"):
        assert (outside / name).read_bytes() == secret + name.encode()


def test_a_symlink_to_an_outside_directory_is_never_descended(tmp_path: Path, ws: Path) -> None:
    secret = secrets.token_bytes(2048)
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "s.txt").write_bytes(secret)
    (outside / "deeper" / "s.txt").write_bytes(secret)
    (ws / "real").mkdir()
    (ws / "real" / "link").symlink_to(outside)
    (ws / "top").symlink_to(outside)
    (ws / "f.txt").write_text("f\n")
    known = ["top/s.txt", "top/deeper/s.txt", "real/link/s.txt", "real/link/deeper/s.txt"]
    with Store.open(tmp_path / "home") as store:
        res = store.at(ws).capture(known_paths=known)
        files = store.files(res.id)
        assert files["top"] == ("l", str(outside))
        assert files["real/link"] == ("l", str(outside))
        for p in known:
            assert files[p][0] == "x", (p, files[p])
        assert blake3.blake3(secret).hexdigest() not in {e[3] for e in files.values() if e[0] == "f"}
        store.blobs.refresh()
        assert blake3.blake3(secret).digest() not in store.blobs


# ----------------------------------------------------------------------------- writes


def test_safe_root_does_not_write_into_a_directory_moved_out_of_the_workspace(tmp_path: Path, ws: Path,
                                                                             resolve: str) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "a.txt").write_text("a\n")
    outside = tmp_path / "moved-out"
    with SafeRoot(str(ws)) as fs:
        fs.write_file("sub/b.txt", [b"b\n"], 0o644)  # the directory is now known to the SafeRoot
        os.rename(ws / "sub", outside)  # moved out of the workspace mid-restore
        fs.write_file("sub/c.txt", [b"c\n"], 0o644)
        assert fs.lstat("sub/a.txt") is None
    assert sorted(os.listdir(outside)) == ["a.txt", "b.txt"]
    assert (ws / "sub" / "c.txt").read_text() == "c\n"


def test_every_safe_root_call_refuses_a_symlink_on_the_way(tmp_path: Path, ws: Path, resolve: str) -> None:
    """A directory on the way swapped for a symlink to an outside directory: nothing is read, written, removed or
    made there, at the top or deeper down, whichever way the chain is opened."""
    outside = tmp_path / "outside"
    (outside / "deeper").mkdir(parents=True)
    (outside / "f.txt").write_text("outside\n")
    (outside / "deeper" / "f.txt").write_text("outside deeper\n")
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "top").symlink_to(outside)
    (ws / "a" / "b" / "link").symlink_to(outside)
    before = sorted((p.relative_to(outside), p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*"))
    with SafeRoot(str(ws)) as fs:
        for via in ("top", "a/b/link", "a/b/link/deeper"):
            for name in ("f.txt", "new.txt"):
                rel = f"{via}/{name}"
                with pytest.raises(UnsafePath):
                    fs.write_file(rel, [b"x\n"], 0o644)
                with pytest.raises(UnsafePath):
                    fs.write_link(rel, "/etc/passwd")
                with pytest.raises(UnsafePath):
                    fs.unlink(rel)
                with pytest.raises(UnsafePath):
                    fs.read(rel)
                with pytest.raises(UnsafePath):
                    fs.mkdir(rel, 0o755)
                assert fs.lstat(rel) is None
                assert fs.stage([(rel, [b"x\n"], 0o644)]) == {}
    after = sorted((p.relative_to(outside), p.read_bytes() if p.is_file() else b"") for p in outside.rglob("*"))
    assert after == before


def test_safe_root_delete_leaves_a_file_that_changed_after_it_was_checked(ws: Path) -> None:
    (ws / "f.txt").write_text("seen by the safety capture\n")
    expected = stat_key(os.lstat(ws / "f.txt"))
    time.sleep(0.01)
    (ws / "f.txt").write_text("written by the user later\n")
    with SafeRoot(str(ws)) as fs:
        assert fs.unlink("f.txt", expected) is False
        assert (ws / "f.txt").read_text() == "written by the user later\n"
        assert fs.unlink("f.txt", stat_key(os.lstat(ws / "f.txt"))) is True
    assert os.listdir(ws) == []


def test_safe_root_delete_rechecks_after_detaching_the_name(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is renamed aside before the final check: a write landing in between is kept."""
    (ws / "f.txt").write_text("seen\n")
    expected = stat_key(os.lstat(ws / "f.txt"))
    real_rename = os.rename

    def rename_then_write(src: str, dst: str, **kw: int) -> None:
        real_rename(src, dst, **kw)
        if str(src) == "f.txt":  # another process writes through its open fd right after the detach
            fd = os.open(dst, os.O_WRONLY | os.O_APPEND, dir_fd=kw["src_dir_fd"])
            os.write(fd, b"more\n")
            os.close(fd)

    monkeypatch.setattr(os, "rename", rename_then_write)
    with SafeRoot(str(ws)) as fs:
        assert fs.unlink("f.txt", expected) is False
    monkeypatch.undo()
    assert (ws / "f.txt").read_text() == "seen\nmore\n"
    assert os.listdir(ws) == ["f.txt"]


def test_a_file_set_aside_by_a_crashed_delete_gets_its_name_back(ws: Path) -> None:
    """Recovery never deletes a file a delete had renamed aside: it may have changed before the check."""
    (ws / f"{ASIDE_PREFIX}0123456789ab-notes.txt").write_text("mine\n")
    (ws / f"{ASIDE_PREFIX}ba9876543210-taken.txt").write_text("older\n")
    (ws / "taken.txt").write_text("made since\n")
    (ws / f"{TMP_PREFIX}0123456789ab").write_text("half-written restore temp")
    with SafeRoot(str(ws)) as fs:
        fs.clean_temps("")
    assert sorted(os.listdir(ws)) == [f"{ASIDE_PREFIX}ba9876543210-taken.txt", "notes.txt", "taken.txt"]
    assert (ws / "notes.txt").read_text() == "mine\n" and (ws / "taken.txt").read_text() == "made since\n"


@pytest.mark.parametrize("rel", [".GIT/config", "sub/.Git/HEAD", ".gIt", "a/.GIT"])
def test_git_guard_is_case_insensitive(rel: str, ws: Path, resolve: str) -> None:
    assert forbidden(rel)
    assert not forbidden("sub/.gitignore") and not forbidden(".github/x") and not forbidden("git/x")
    with SafeRoot(str(ws)) as fs, pytest.raises(UnsafePath):
        fs.write_file(rel if "/" in rel else rel + "/x", [b"x"], 0o644)
    assert os.listdir(ws) == []


def test_capture_never_enters_a_git_directory_in_another_letter_case(tmp_path: Path, ws: Path) -> None:
    (ws / ".GIT").mkdir()
    (ws / ".GIT" / "config").write_text("[core]\n")
    (ws / "a.txt").write_text("a\n")
    with Store.open(tmp_path / "home") as store:
        files = store.at(ws).capture(known_paths=[".GIT/config"]).files
    assert files[".GIT"] == ("D", "git") and ".GIT/config" not in files


# ----------------------------------------------------------------------------- deep trees

DEPTH = 1200
NAME = "ddd"  # 4 bytes a level: 4,800 bytes, beyond PATH_MAX (4,096)


def _deep_dir(ws: Path) -> int:
    """Create the chain with dir-fd relative calls and return an fd of its deepest directory."""
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(DEPTH):
        os.mkdir(NAME, dir_fd=fd)
        nfd = os.open(NAME, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = nfd
    return fd


def _write_at(fd: int, name: str, data: bytes) -> None:
    f = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=fd)
    os.write(f, data)
    os.close(f)


def _read_at(fd: int, name: str) -> bytes:
    f = os.open(name, os.O_RDONLY, dir_fd=fd)
    try:
        return os.read(f, 1 << 16)
    finally:
        os.close(f)


def _remove_chain(ws: Path) -> None:
    """Remove the chain without recursion (pytest's own cleanup would hit RecursionError on it)."""
    fd = os.open(ws, os.O_RDONLY | os.O_DIRECTORY)
    try:
        while True:
            try:
                top = os.open(NAME, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                return
            try:
                for name in os.listdir(top):
                    if name == NAME:
                        os.rename(name, "up", src_dir_fd=top, dst_dir_fd=fd)
                    else:
                        os.unlink(name, dir_fd=top)
            finally:
                os.close(top)
            os.rmdir(NAME, dir_fd=fd)
            if os.path.lexists(ws / "up"):
                os.rename("up", NAME, src_dir_fd=fd, dst_dir_fd=fd)
    finally:
        os.close(fd)


def _cli(home: Path, ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    res = subprocess.run([sys.executable, "-m", "app.cli", *args], cwd=ws, env=env, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, timeout=300)
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.returncode == 0, (args, res.stdout[-2000:], res.stderr[-2000:])
    return res


def test_a_tree_deeper_than_path_max_captures_and_restores(tmp_path: Path, ws: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (ws / "top.txt").write_text("top v1\n")
    deep = _deep_dir(ws)
    try:
        _write_at(deep, "deep.txt", b"deep v1\n")
        deep_rel = "/".join([NAME] * DEPTH) + "/deep.txt"
        with Store.open(home / "file_snapshots") as store:  # the store the CLI opens
            snap = store.at(ws).capture().id
            assert store.files(snap).get(deep_rel, ("missing",))[0] == "f"
        _write_at(deep, "deep.txt", b"deep v2, changed\n")
        _write_at(deep, "new.txt", b"created after the capture\n")
        (ws / "top.txt").write_text("top v2\n")
        _cli(home, ws, "snapshots", "restore", snap, "--yes")
        assert _read_at(deep, "deep.txt") == b"deep v1\n"
        assert sorted(os.listdir(deep)) == ["deep.txt"]  # witnessed absent: deleted
        assert (ws / "top.txt").read_text() == "top v1\n"
        again = _cli(home, ws, "snapshots", "capture", "--json")
        assert '"id"' in again.stdout
    finally:
        os.close(deep)
        _remove_chain(ws)


# ----------------------------------------------------------------------------- durability

STRACE_LINE = re.compile(r"^(?:\[pid\s+\d+\]\s+|\d+\s+)?(\w+)\((.*)$")
TMP_FD = re.compile(r"^(\d+)<([^>]*)>")


def _strace_restore(tmp_path: Path, ws: Path, home: Path, snap: str, calls: str) -> list[str]:
    """The strace lines (`-y`: fds with their paths) of these calls by a real `codexr snapshots restore SNAP`."""
    log = tmp_path / "strace.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    res = subprocess.run(["strace", "-f", "-y", "-qq", "-s", "4096", "-o", str(log), "-e", f"trace={calls}",
                          sys.executable, "-m", "app.cli", "snapshots", "restore", snap, "--yes"],
                         cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    return log.read_text().splitlines()


def test_every_restored_file_is_synced_before_it_is_renamed_into_place(tmp_path: Path, ws: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    for i in range(30):
        (ws / f"d{i % 3}").mkdir(exist_ok=True)
        (ws / f"d{i % 3}" / f"f{i}.txt").write_text(f"version one of {i}\n")
    with Store.open(home / "file_snapshots") as store:
        snap = store.at(ws).capture().id
    for i in range(30):
        (ws / f"d{i % 3}" / f"f{i}.txt").write_text(f"version two of {i}, longer\n")
    log = _strace_restore(tmp_path, ws, home, snap, "fdatasync,fsync,rename,renameat,renameat2")
    synced: set[str] = set()
    renamed: list[str] = []
    unsynced: list[str] = []
    for line in log:
        m = STRACE_LINE.match(line)
        if m is None:
            continue
        call, args = m.groups()
        if call in ("fsync", "fdatasync"):
            fd = TMP_FD.match(args)
            if fd:
                synced.add(fd.group(2))
        elif call.startswith("rename"):
            names = re.findall(r'"([^"]*)"', args)
            dirs = re.findall(r"\d+<([^>]*)>", args)
            if not names or not os.path.basename(names[0]).startswith(TMP_PREFIX):
                continue
            src = names[0] if names[0].startswith("/") else os.path.join(dirs[0] if dirs else str(ws), names[0])
            renamed.append(src)
            if src not in synced:
                unsynced.append(src)
    assert len(renamed) == 30, renamed
    assert not unsynced, f"{len(unsynced)} of {len(renamed)} temp files renamed into place unsynced"
    for i in range(30):
        assert (ws / f"d{i % 3}" / f"f{i}.txt").read_text() == f"version one of {i}\n"
    # Issue 35: the 30 files' content is synced together (a few threads), before the first of them is put in place —
    # not one fsync after each file, each paying a journal commit of its own.
    order = [("sync" if (m := STRACE_LINE.match(line)) and m.group(1) in ("fsync", "fdatasync")
              and TMP_PREFIX in line else "rename" if m and m.group(1).startswith("rename") and TMP_PREFIX in line
              else "") for line in log]
    order = [o for o in order if o]
    assert order.index("rename") >= 30 and order[:30] == ["sync"] * 30, order


def _traced_restore(tmp_path: Path, ws: Path, home: Path, snap: str) -> list[tuple[str, list[str]]]:
    """(call, directory paths its fds name) of a real `codexr snapshots restore` under strace, in order."""
    calls = []
    for line in _strace_restore(tmp_path, ws, home, snap,
                                "fsync,syncfs,rename,renameat,renameat2,unlink,unlinkat,mkdir,mkdirat"):
        m = STRACE_LINE.match(line)
        if m is not None and "= -1" not in line:
            calls.append((m.group(1), re.findall(r"\d+<([^>]*)>", m.group(2))))
    return calls


def test_a_small_restore_syncs_each_directory_it_changed_not_the_whole_file_system(tmp_path: Path, ws: Path) -> None:
    """syncfs waits for every dirty page of the file system (0.6 s of a one-file restore after a big write); a
    restore that changed a few directories fsyncs each of them after its last change there instead."""
    home = tmp_path / "home"
    home.mkdir()
    (ws / "a.txt").write_text("a one\n")
    (ws / "d").mkdir()
    (ws / "d" / "b.txt").write_text("b one\n")
    (ws / "n" / "m").mkdir(parents=True)
    (ws / "n" / "m" / "deep.txt").write_text("deep one\n")
    with Store.open(home / "file_snapshots") as store:
        snap = store.at(ws).capture().id
    (ws / "a.txt").write_text("a two, longer\n")
    (ws / "d" / "b.txt").unlink()
    (ws / "d" / "new.txt").write_text("not in the snapshot\n")
    (ws / "n" / "m" / "deep.txt").unlink()
    (ws / "n" / "m").rmdir()
    (ws / "n").rmdir()
    calls = _traced_restore(tmp_path, ws, home, snap)
    assert (ws / "n" / "m" / "deep.txt").read_text() == "deep one\n" and not (ws / "d" / "new.txt").exists()
    assert not [c for c in calls if c[0] == "syncfs"], calls
    root = os.path.realpath(ws)
    last_change: dict[str, int] = {}
    for i, (call, dirs) in enumerate(calls):
        if call != "fsync":
            for d in dirs:
                if d == root or d.startswith(root + "/"):
                    last_change[d] = i
    assert set(last_change) == {root, f"{root}/d", f"{root}/n", f"{root}/n/m"}, last_change
    for d, i in last_change.items():
        assert any(call == "fsync" and dirs == [d] for call, dirs in calls[i + 1:]), f"{d} not synced after its change"


def test_a_restore_that_changed_many_directories_fsyncs_each_never_the_whole_file_system(tmp_path: Path,
                                                                                          ws: Path) -> None:
    """Issue 35: beyond 64 changed directories a restore called syncfs, which waits for every dirty page of the file
    system, other processes' too (377 ms of a 100-file restore while a test suite ran). Now each directory is fsynced
    after its last change, a few at once, and no syncfs."""
    home = tmp_path / "home"
    home.mkdir()
    for i in range(70):
        (ws / f"d{i}").mkdir()
        (ws / f"d{i}" / "f.txt").write_text(f"one {i}\n")
    with Store.open(home / "file_snapshots") as store:
        snap = store.at(ws).capture().id
    for i in range(70):
        (ws / f"d{i}" / "f.txt").write_text(f"two {i}, longer\n")
    calls = _traced_restore(tmp_path, ws, home, snap)
    assert all((ws / f"d{i}" / "f.txt").read_text() == f"one {i}\n" for i in range(70))
    assert not [c for c in calls if c[0] == "syncfs"], [c for c in calls if c[0] == "syncfs"]
    root = os.path.realpath(ws)
    last_change: dict[str, int] = {}
    for i, (call, dirs) in enumerate(calls):
        if call != "fsync":
            for d in dirs:
                if d.startswith(root + "/d"):
                    last_change[d] = i
    assert len(last_change) == 70, sorted(last_change)
    for d, i in last_change.items():
        assert any(call == "fsync" and dirs == [d] for call, dirs in calls[i + 1:]), f"{d} not synced after its change"


def test_a_restore_that_removes_a_directory_syncs_its_parent_not_the_whole_file_system(tmp_path: Path,
                                                                                      ws: Path) -> None:
    """A restore deleted the files of a directory the snapshot does not have, then the directory: the directory was
    still among those to fsync, could not be opened any more, and the restore fell back to syncfs (the soak's
    reference restore and rewind: one each). Its removal is durable once its parent is synced after it."""
    home = tmp_path / "home"
    home.mkdir()
    (ws / "a.txt").write_text("a one\n")
    with Store.open(home / "file_snapshots") as store:
        snap = store.at(ws).capture().id
    (ws / "gen" / "sub").mkdir(parents=True)
    for rel in ("gen/out1.txt", "gen/out2.txt", "gen/sub/deep.txt"):
        (ws / rel).write_text(f"made after the snapshot: {rel}\n")
    calls = _traced_restore(tmp_path, ws, home, snap)
    assert not (ws / "gen").exists() and (ws / "a.txt").read_text() == "a one\n"
    assert not [c for c in calls if c[0] == "syncfs"], calls
    root = os.path.realpath(ws)
    removed = max(i for i, (call, dirs) in enumerate(calls) if call != "fsync" and dirs == [root])
    assert any(call == "fsync" and dirs == [root] for call, dirs in calls[removed + 1:]), calls


def _deep_restore_case(ws: Path, home: Path) -> tuple[str, int]:
    """40 files five directories down, captured, then all changed: (the snapshot, how many files it restores)."""
    for i in range(40):
        d = ws / "src" / f"m{i % 4}" / "pkg" / f"p{i % 2}" / "impl"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.py").write_text(f"one {i}\n")
    with Store.open(home / "file_snapshots") as store:
        snap = store.at(ws).capture().id
    for f in ws.rglob("*.py"):
        f.write_text(f.read_text().replace("one", "two, longer"))
    return snap, 40


def _dir_opens(log: list[str], root: str) -> list[str]:
    """The strace lines that open a directory below `root` through a directory fd (openat or openat2)."""
    return [line for line in log if (m := STRACE_LINE.match(line)) and m.group(1) in ("openat", "openat2")
            and "O_DIRECTORY" in line and re.match(rf"\d+<{re.escape(root)}[/>]", m.group(2))]


def test_a_restore_opens_each_directory_chain_in_one_call(tmp_path: Path, ws: Path) -> None:
    """Issue 35 §2: each step of a restore opened its directory chain from the root one component at a time (a file
    five directories down: ~30 opens and as many closes, ~22-30 per restored file in the soak). One openat2
    (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS) now opens a chain: the kernel refuses any symlink on it, as the walk did."""
    if dirfd._openat2_call() is None:
        pytest.skip("this kernel has no openat2 (Linux < 5.6, or a seccomp filter refuses it)")
    home = tmp_path / "home"
    home.mkdir()
    snap, n = _deep_restore_case(ws, home)
    log = _strace_restore(tmp_path, ws, home, snap, "openat,openat2")
    assert all(f.read_text().startswith("one ") for f in ws.rglob("*.py"))
    opens = _dir_opens(log, os.path.realpath(ws))
    assert len(opens) <= 7 * n, f"{len(opens)} directory opens to restore {n} files:\n" + "\n".join(opens[:40])


def test_a_restore_where_openat2_is_refused_walks_each_chain_and_stops_asking(tmp_path: Path, ws: Path) -> None:
    """Where the kernel has no openat2 or a seccomp filter refuses it (ENOSYS, EPERM), a real restore walks each
    chain component by component, as before, and its writer asks no more after the first refusal (the restore's
    other SafeRoot, if any, asks once too: ~200 chains here)."""
    home = tmp_path / "home"
    home.mkdir()
    snap, _n = _deep_restore_case(ws, home)
    log = tmp_path / "strace.log"
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home)}
    for errname in ("ENOSYS", "EPERM"):
        res = subprocess.run(["strace", "-f", "-qq", "-o", str(log), "-e", "trace=openat2",
                              "-e", f"inject=openat2:error={errname}",
                              sys.executable, "-m", "app.cli", "snapshots", "restore", snap, "--yes"],
                             cwd=ws, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr[-3000:]
        assert all(f.read_text().startswith("one ") for f in ws.rglob("*.py"))
        asked = [line for line in log.read_text().splitlines() if "openat2(" in line]
        assert 1 <= len(asked) <= 3, asked
        for f in ws.rglob("*.py"):  # changed again, for the next refusal
            f.write_text(f.read_text().replace("one", "two, longer"))
