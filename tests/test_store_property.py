"""Property tests: random edit / capture / restore histories keep the store's promises.

Each example starts from a small committed Git repository with untracked, ignored, hidden and
churn-directory files, applies a generated list of operations (write, delete, chmod, rename,
symlink, capture, restore) and checks after every capture and restore:

* a capture holds exactly the eligible files, with the right content, mode and link target;
* after restoring capture C, every path C captured is byte-for-byte, mode-for-mode equal to C;
* nothing disappeared that C did not witness absent; nothing else changed;
* ignored paths, churn-directory contents, hidden untracked files and `.git` are untouched;
* restoring the safety capture gives back the exact pre-restore tree (files, modes, links).

With a tight residue limit only the safety properties are checked (a bounded capture proves
nothing about what it did not see).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from store_helpers import exact_tree, make_repo, tree
from test_monitor import monitor_pids
from test_server import private_base, wait_until

import snapshot_store.detect.monitor as monitor_mod
from snapshot_store import ScopeSettings, Store
from snapshot_store.detect.monitor_launch import Launcher
from snapshot_store.diff import diff_maps
from snapshot_store.manifest import is_captured, witnessed_absent

TRACKED = ["README.md", "src/a.py", "src/b.py", "docs/x/y.md", ".tracked_hidden", "build/keep.txt"]
UNTRACKED = ["notes.txt", "src/new.py", "deep/n1/n2/f.txt", "x", "x/y.txt", "link1", "src/link2"]
IGNORED = ["secret.env", "src/local.env", "logs/app.log"]
HIDDEN = [".hidden", "src/.hfile", ".config/settings.json"]
CHURN = ["node_modules/pkg/index.js", "node_modules/pkg/patched.js", "build/out.bin", "src/__pycache__/a.pyc"]
#: Hidden / churn paths an "agent" may touch: once known they are captured like any other file.
KNOWABLE = ["node_modules/pkg/patched.js", ".config/settings.json", "src/.hfile"]
ALL = TRACKED + UNTRACKED + IGNORED + HIDDEN + CHURN
PARENTS = {"x"}  # universe paths that are also the parent directory of another universe path
LEAF = [p for p in ALL if p not in PARENTS]
IGNORE_TEXT = "*.env\nlogs/\n"
CHURN_DIRS = ("node_modules", "build", "__pycache__")
CONTENTS = [b"", b"a", b"hello\n", b"\x00\xffbinary", b"longer content line\n" * 40, b"hello\n\n"]

WIDE = ScopeSettings(residue_max_files=1000)
TIGHT = ScopeSettings(residue_max_files=1)

RACY_S = 0.11  # past the stat cache's racy window (stamps.FINE_WINDOW_NS)
#: Where the examples' workspaces and stores are made: a tmpfs where there is one, as for the kill soak subset
#: (tests/test_soak_subset.py). These properties are about what captures and restores hold, not about durability
#: (the kill tests' business): on the shared disk the store's fsyncs made this module's time follow other jobs' I/O
#: (two of its tests: 71-92 s there, 40-43 s on /dev/shm, measured back to back on the project's 2-core machine).
SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None
PROFILE = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def ignored(rel: str) -> bool:
    return rel.split("/")[0] == "logs" or rel.endswith(".env")


def default_eligible(rel: str) -> bool:
    """Captured without being known: tracked, or a visible file outside churn directories."""
    if ignored(rel):
        return False
    if rel in TRACKED:
        return True
    parts = rel.split("/")
    return not any(p.startswith(".") for p in parts) and not any(p in CHURN_DIRS for p in parts[:-1])


def untouchable(rel: str) -> bool:
    """No restore may ever write or delete these: ignored, or hidden/churn and never known."""
    return ignored(rel) or (not default_eligible(rel) and rel not in KNOWABLE)


_template: Path | None = None


def template() -> Path:
    """A committed repo with the tracked files, built once and copied per example."""
    global _template
    if _template is None:
        root = Path(tempfile.mkdtemp(prefix="store-prop-template-", dir=SCRATCH))
        make_repo(root / "ws", {p: f"tracked {p}\n" for p in TRACKED})
        _template = root / "ws"
    return _template


# --------------------------------------------------------------------------- operations

path_st = st.sampled_from(ALL)
leaf_st = st.sampled_from(LEAF)
op_st = st.one_of(
    st.tuples(st.just("write"), path_st, st.integers(0, len(CONTENTS) - 1)),
    st.tuples(st.just("delete"), path_st),
    st.tuples(st.just("chmod"), path_st),
    st.tuples(st.just("rename"), path_st, path_st),
    st.tuples(st.just("symlink"), leaf_st, leaf_st),
    st.tuples(st.just("capture")),
    st.tuples(st.just("know"), st.sampled_from(KNOWABLE)),
    st.tuples(st.just("clean")),  # like `git clean -f`: every untracked visible file goes
    st.tuples(st.just("restore"), st.integers(0, 30)),
)
ops_st = st.lists(op_st, min_size=3, max_size=24)
#: Mostly files changed in place between captures (what a turn after an edit sees), or removed (what a rewind of a
#: turn that made them leaves), now and then anything else.
edit_st = st.tuples(st.just("write"), st.sampled_from(TRACKED[:4] + UNTRACKED[:2]), st.integers(0, len(CONTENTS) - 1))
removal_st = st.tuples(st.just("delete"), st.sampled_from(TRACKED[:4] + UNTRACKED[:2]))
edits_st = st.lists(st.one_of(edit_st, edit_st, st.tuples(st.just("capture")), st.tuples(st.just("capture")),
                              removal_st, st.tuples(st.just("chmod"), st.sampled_from(TRACKED[:4])), op_st),
                    min_size=3, max_size=16)


def _clear_way(ws: Path, rel: str) -> None:
    """Make room for a file at `rel`: files/links at ancestors go, a directory at `rel` goes."""
    parts = rel.split("/")
    for i in range(1, len(parts)):
        anc = ws.joinpath(*parts[:i])
        if os.path.islink(anc) or anc.is_file():
            os.unlink(anc)
    p = ws / rel
    if os.path.islink(p) or p.is_file():
        os.unlink(p)
    elif p.is_dir():
        shutil.rmtree(p)
    p.parent.mkdir(parents=True, exist_ok=True)


def apply_op(ws: Path, op: tuple) -> None:
    kind = op[0]
    if kind == "write":
        _, rel, ci = op
        p = ws / rel
        if p.is_file() and not p.is_symlink():
            p.write_bytes(CONTENTS[ci])  # modify in place (keeps the mode)
        else:
            _clear_way(ws, rel)
            p.write_bytes(CONTENTS[ci])
    elif kind == "delete":
        p = ws / op[1]
        if os.path.islink(p) or p.is_file():
            os.unlink(p)
    elif kind == "clean":
        for rel in UNTRACKED:
            p = ws / rel
            if os.path.islink(p) or p.is_file():
                os.unlink(p)
    elif kind == "chmod":
        p = ws / op[1]
        if p.is_file() and not p.is_symlink():
            os.chmod(p, stat.S_IMODE(os.lstat(p).st_mode) ^ 0o111)
    elif kind == "rename":
        _, src, dst = op
        s = ws / src
        if src == dst or not (os.path.islink(s) or s.is_file()) or dst.startswith(src + "/"):
            return
        if src.startswith(dst + "/"):
            return
        _clear_way(ws, dst)
        if os.path.lexists(s):
            os.rename(s, ws / dst)
    elif kind == "symlink":
        _, rel, target = op
        if rel == target:
            return
        _clear_way(ws, rel)
        os.symlink(os.path.relpath(target, os.path.dirname(rel) or "."), ws / rel)
FEWER = settings(PROFILE, max_examples=30)  # each capture waits RACY_S


# --------------------------------------------------------------------------- checks


def blob_sha(store: Store, entry: tuple) -> str:
    h = hashlib.sha256()
    for chunk in store.blob_chunks(entry[3]):
        h.update(chunk)
    return h.hexdigest()


def matches(store: Store, entry: tuple, now: tuple | None) -> bool:
    """Does the tree listing `now` hold exactly the captured entry?"""
    if now is None:
        return False
    if entry[0] == "l":
        return now == ("l", entry[1])
    return now[0] == "f" and now[1] == entry[1] and now[2] == blob_sha(store, entry)


def files_only(t: dict) -> dict:
    return {p: e for p, e in t.items() if e[0] != "d"}


def check_capture(store: Store, ws: Path, files: dict, scope: ScopeSettings, extra: set[str]) -> None:
    """`extra`: known paths plus what the previous snapshot captured (tracking grows)."""
    now = tree(ws)

    def capturable(p: str) -> bool:
        return not ignored(p) and (default_eligible(p) or p in extra)

    eligible = {p for p, e in now.items() if e[0] in ("f", "l") and capturable(p)}
    captured = {p for p, e in files.items() if is_captured(e)}
    for p in captured:
        assert capturable(p), f"captured a path that must not be captured: {p}"
        assert matches(store, files[p], now.get(p)), f"capture of {p} does not match the disk"
    if scope is WIDE:
        assert captured == eligible, f"missing {eligible - captured}, extra {captured - eligible}"
    else:
        assert captured >= {p for p in eligible if p in TRACKED or p in extra}
        assert captured <= eligible


def check_restore(store: Store, ws: Path, snap: str, scope: ScopeSettings, known: set[str]) -> None:
    target = store.files(snap)
    pre = tree(ws)
    git_pre = exact_tree(ws / ".git")
    r = store.origin(snap).restore(snap, scope=scope, known_paths=sorted(known))
    post = tree(ws)
    left = {a.path: a.reason for a in r.left}

    # 1. every path the target captured is back, exactly (or, with a bounded scope, reported left)
    for p, e in target.items():
        if not is_captured(e):
            continue
        ok = matches(store, e, post.get(p))
        if scope is WIDE:
            assert ok, f"{p} not restored to the target ({post.get(p)}); left={left.get(p)}"
        else:
            assert ok or p in left, f"{p} neither restored nor reported left"

    # 2. nothing vanished (or turned into a directory) unless the target witnessed it absent
    for p, e in pre.items():
        if e[0] == "d":
            continue
        after = post.get(p)
        if after is None or after[0] == "d":
            assert witnessed_absent(target, p) or target.get(p) == ("d",), \
                f"{p} was deleted but the target never witnessed it absent ({target.get(p)})"
            assert not untouchable(p), f"{p} (ignored/hidden/churn) was deleted"
        elif after != e:
            assert is_captured(target.get(p)), f"{p} changed although the target did not capture it"

    # 3. ignored / never-known hidden and churn paths, and .git, are untouched
    for p, e in pre.items():
        if untouchable(p) and e[0] != "d":
            assert post.get(p) == e, f"untouchable path {p} was touched"
    for p, e in post.items():
        if e[0] != "d" and p not in pre:
            assert is_captured(target.get(p)), f"{p} appeared although the target did not capture it"
    assert exact_tree(ws / ".git") == git_pre

    # 4. the safety capture undoes the restore exactly (files, modes, links)
    assert r.safety_id is not None
    undo = store.origin(r.safety_id).restore(r.safety_id, scope=scope, known_paths=sorted(known))
    back = tree(ws)
    assert files_only(back) == files_only(pre), (
        f"undo differs: missing {sorted(set(files_only(pre)) - set(back))}, "
        f"extra {sorted(set(files_only(back)) - set(files_only(pre)))}, "
        f"changed {sorted(p for p in pre if p in back and back[p] != pre[p] and pre[p][0] != 'd')}; "
        f"undo left {[(a.path, a.reason) for a in undo.left]}"
    )
    assert exact_tree(ws / ".git") == git_pre


def _extra(store: Store, ws: Path, known: set[str]) -> set[str]:
    latest = store.list_snapshots(ws)
    grown = {p for p, e in store.files(latest[-1].id).items() if is_captured(e)} if latest else set()
    return known | grown


def check_diffs(store: Store, snaps: list[str]) -> None:
    """Store.diff of any two captures (each way) is the comparison of their whole maps, though it compares only the
    paths their delta records name when one descends from the other."""
    chained = 0
    for a in dict.fromkeys(snaps):
        for b in dict.fromkeys(snaps):
            assert store.diff(a, b) == diff_maps(store.files(a), store.files(b)), (a, b)
            chained += a != b and store.named_between(a, b) is not None
    assert chained or len(set(snaps)) < 2, "no two captures of one delta chain: the short way was never taken"


def check_lookups(store_dir: Path, snaps: list[str]) -> None:
    """A map's entries read along its chain without decoding it (`entries_at`, a fresh store: no record decoded yet)
    are the decoded map's, for every path of the universe, its directories and the root."""
    paths = sorted({"", *ALL, *(p.rpartition("/")[0] for p in ALL)})
    with Store.open(store_dir) as fresh:
        for snap in dict.fromkeys(snaps):
            looked = fresh.entries_at(snap, paths)
            assert looked == {p: store_files(store_dir, snap).get(p) for p in paths}, snap


def store_files(store_dir: Path, snap: str) -> dict:
    with Store.open(store_dir) as other:
        return dict(other.files(snap))


def run_history(ops: list[tuple], scope: ScopeSettings, *, watch: bool = False, processes: bool = False,
                monitored: bool = False) -> None:
    """`processes`: each capture starts a new process's store (watched too if `watch`, the next capture then going on
    from its journal until every third one starts over), asking for the id and counts only, as a one-shot command and
    a session's turns do: a capture after files changed then reads only those (Capturer._reread_only), and a session
    goes on from the last capture it built when next needed. `monitored`: every store asks the change monitor (the
    caller's environment points at a private runtime directory), and every third capture is a one-shot command's
    (no journal) between two sessions, as `codexr rewind` after `codexr exec`."""
    base = Path(tempfile.mkdtemp(prefix="store-prop-", dir=SCRATCH))
    try:
        ws = base / "ws"
        shutil.copytree(template(), ws, symlinks=True)
        (ws / ".codexsnapignore").write_text(IGNORE_TEXT)
        for i, rel in enumerate(UNTRACKED[:3] + IGNORED[:2] + HIDDEN[:1] + CHURN[:2]):
            apply_op(ws, ("write", rel, i % len(CONTENTS)))
        known: set[str] = set()
        def opened(watched: bool) -> Store:
            fresh = Store.open(base / "store")
            fresh.capturer.use_monitors(monitored)
            if watched:
                assert fresh.capturer.watch(ws), "inotify change journal unavailable"
            return fresh

        store = opened(watch)
        try:
            if processes:
                time.sleep(RACY_S)
            c0 = store.at(ws).capture(scope=scope)
            if monitored:
                wait_until(lambda: Launcher().ask(str(ws), None) is not None, 30, "the change monitor")
            check_capture(store, ws, c0.files, scope, set())
            snaps = [c0.id]
            for op in ops:
                if op[0] == "capture" and processes:
                    extra = _extra(store, ws, known)
                    one_shot = monitored and len(snaps) % 3 == 2
                    if not watch or len(snaps) % 3 == 0 or one_shot:
                        store.close()
                        store = opened(watch and not one_shot)
                    time.sleep(RACY_S)  # stats the saved walk can trust: else every check ends in a walk
                    c = store.at(ws).capture_summary(scope=scope, known_paths=sorted(known))
                    check_capture(store, ws, store_files(base / "store", c.id), scope, extra)
                    snaps.append(c.id)
                elif op[0] == "capture":
                    extra = _extra(store, ws, known)
                    c = store.at(ws).capture(scope=scope, known_paths=sorted(known))
                    check_capture(store, ws, c.files, scope, extra)
                    snaps.append(c.id)
                elif op[0] == "restore":
                    check_restore(store, ws, snaps[op[1] % len(snaps)], scope, known)
                elif op[0] == "know":
                    known.add(op[1])
                else:
                    apply_op(ws, op)
            # always finish with restores to the newest and the first capture
            if snaps[-1] != c0.id:
                check_restore(store, ws, snaps[-1], scope, known)
            check_restore(store, ws, c0.id, scope, known)
            check_diffs(store, snaps)
            check_lookups(base / "store", snaps)
        finally:
            store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


@PROFILE
@given(ops=ops_st)
def test_history_wide_residue(ops: list[tuple]) -> None:
    run_history(ops, WIDE)


@PROFILE
@given(ops=ops_st)
def test_history_tight_residue_never_deletes_unwitnessed(ops: list[tuple]) -> None:
    run_history(ops, TIGHT)


@PROFILE
@given(ops=ops_st)
def test_history_wide_residue_watched(ops: list[tuple]) -> None:
    """The same promises when a long-running session keeps an inotify change journal
    (captures reuse the previous map and re-read only what changed)."""
    run_history(ops, WIDE, watch=True)


#: Untracked files made, captured and removed, a tracked one removed: the capture after files were made reads them,
#: the removal's capture writes tombstones and the next one drops them, each without decoding its parent
#: (Capturer._reread_only, _tombstones_dropped).
MADE_AND_REMOVED = [("write", "notes.txt", 0), ("capture",), ("delete", "notes.txt"), ("capture",), ("capture",),
                    ("write", "x", 2), ("symlink", "src/link2", "README.md"), ("capture",), ("capture",),
                    ("write", "deep/n1/n2/f.txt", 1), ("capture",), ("delete", "deep/n1/n2/f.txt"),
                    ("delete", "README.md"), ("capture",), ("capture",), ("restore", 1), ("capture",)]


@FEWER
@example(ops=MADE_AND_REMOVED)
@given(ops=edits_st)
def test_history_one_shot_captures(ops: list[tuple]) -> None:
    """The same promises when each capture is a new process's, asking only for the id and counts."""
    run_history(ops, WIDE, processes=True)


@FEWER
@example(ops=MADE_AND_REMOVED)
@given(ops=edits_st)
def test_history_tight_residue_session_captures(ops: list[tuple]) -> None:
    """And when those processes are sessions that keep a change journal between their captures."""
    run_history(ops, TIGHT, watch=True, processes=True)


def test_history_sessions_and_one_shot_captures_through_the_change_monitor(monkeypatch: pytest.MonkeyPatch) -> None:
    """And when the sessions and one-shot commands ask a real change monitor: a one-shot capture after a session's
    (journal-answered) capture trusts the token that capture left, and every capture still holds the disk's files."""
    run_dir = Path(tempfile.mkdtemp(prefix="crp-", dir=private_base()))
    os.chmod(run_dir, 0o700)
    monkeypatch.setenv("CODEXR_RUNTIME_DIR", str(run_dir))
    monkeypatch.setenv("CODEXR_MONITOR_IDLE", "60")
    settled: list[bool] = []
    real = monitor_mod.check_since

    def spy(*args: object, **kw: object) -> object:
        out = real(*args, **kw)  # type: ignore[arg-type]
        settled.append(out is not None)
        return out

    monkeypatch.setattr(monitor_mod, "check_since", spy)

    @settings(FEWER, max_examples=20)  # each example starts a monitor; the suite is near its 10 minutes
    @given(ops=edits_st)
    def history(ops: list[tuple]) -> None:
        try:
            run_history(ops, WIDE, watch=True, processes=True, monitored=True)
        finally:
            for pid in monitor_pids(run_dir):  # one per example's workspace: none left to the next
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)

    try:
        history()
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
    assert True in settled, "no capture went by the monitor's answer: this test proved nothing"


def test_universe_classification() -> None:
    """The oracle itself: what this file treats as captured by default / never touchable."""
    assert not any(default_eligible(p) for p in IGNORED + HIDDEN + CHURN)
    assert all(default_eligible(p) for p in TRACKED + UNTRACKED)
    assert all(untouchable(p) for p in IGNORED)
    assert not any(untouchable(p) for p in KNOWABLE + TRACKED + UNTRACKED)


@pytest.fixture(autouse=True, scope="module")
def _cleanup_template():
    yield
    if _template is not None:
        shutil.rmtree(_template.parent, ignore_errors=True)
