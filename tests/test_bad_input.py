"""Bad input gets one clear line, never a hang or a traceback: ignore files, odd names, unreadable stores, config."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from snapshot_store import IgnoreFileError, Store
from snapshot_store.scope import IGNORE_FILE, Ignore

REPO = Path(__file__).parents[1]
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}


def run_cli(home: Path, cwd: Path, *args: str, timeout: float = 120, extra_env: dict[str, str] | None = None,
            prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(home), **(extra_env or {})}
    return subprocess.run([*prefix, sys.executable, "-m", "app", *args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)


def assert_one_line_error(res: subprocess.CompletedProcess[bytes]) -> str:
    err = res.stderr.decode("utf-8", "replace")
    assert res.returncode == 2, (res.returncode, res.stdout, err)
    assert "Traceback" not in err, err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("codexr: error: "), err
    return lines[0]


# ------------------------------------------------------------------ .codexsnapignore vs git check-ignore


def _make_tree(root: Path, paths: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """Create every path (a path that is a prefix of another is a directory); return (files, dirs)."""
    dirs: set[bytes] = set()
    for p in paths:
        parts = p.split(b"/")
        for n in range(1, len(parts)):
            dirs.add(b"/".join(parts[:n]))
    files = sorted(set(paths) - dirs)
    for d in sorted(dirs, key=len):
        os.makedirs(os.path.join(os.fsencode(root), d), exist_ok=True)
    for f in files:
        with open(os.path.join(os.fsencode(root), f), "wb"):
            pass
    return files, sorted(dirs)


def _git_ignored(root: Path, rules: bytes, paths: list[bytes]) -> set[bytes]:
    (root / ".gitignore").write_bytes(rules)
    res = subprocess.run(["git", "check-ignore", "--no-index", "--stdin", "-z"], cwd=root, env=GIT_ENV,
                         input=b"\0".join(paths) + b"\0", capture_output=True, check=False)
    assert res.returncode in (0, 1), res.stderr
    return {p for p in res.stdout.split(b"\0") if p}


def _ours(root: Path, rules: bytes, files: list[bytes], dirs: list[bytes]) -> set[bytes]:
    (root / IGNORE_FILE).write_bytes(rules)
    ig = Ignore.load(root)
    out = {f for f in files if ig.file(os.fsdecode(f))}
    return out | {d for d in dirs if ig.directory(os.fsdecode(d))}


PATHS = [
    b"a.pyc", b"x.txt", b"keep.txt", b"b", b"build/x.o", b"build/sub/y.o", b"src/build/z.c", b"src/a/y",
    b"src/b/c/y", b"doc/a.md", b"sub/doc/b.md", b"a/b/c.txt", b"a/b/keep", b"a/x/y/b/c.txt", b"a/c.txt",
    b"deep/a/b/c/d.pyc", b"deep/d.pyc", b"[x]", b"#hash", b"!bang", b"a*b", b"aXb", b"q", b"qq", b"sp ",
    b"foo bar", b"back\\slash", b"ws-\xff", b"caf\xc3\xa9", b"9lives", b"Upper", b"x-y", b"dir.d/inner",
    b"logs/2024/app.log", b"logs/keep.log", b"node_modules/pkg/index.js", b"a/a/a/a", b"aaaa/bbbb",
]
RULE_SETS = [
    b"*.pyc\n", b"build/\n", b"/doc\n", b"doc/\n", b"a/**/c.txt\n", b"**/b\n", b"a/**\n!a/b/keep\n",
    b"a/\n!a/b/keep\n", b"deep/**/d.pyc\n", b"[abc]*\n", b"[!a-m]*\n", b"?\n", b"[[:digit:]]*\n",
    b"[[:upper:]]*\n", b"\\#hash\n", b"#hash\n", b"\\!bang\n", b"!bang\n", b"a\\*b\n", b"a*b\n", b"sp\\ \n",
    b"sp \n", b"foo bar\n", b"back\\\\slash\n", b"ws-?\n", b"caf?\n", b"caf??\n", b"src/*/y\n", b"src/**/y\n",
    b"*\n!*.txt\n", b"*\n!*/\n!*.txt\n", b"logs/*\n!logs/keep.log\n", b"logs/\n!logs/keep.log\n",
    b"**/node_modules\n", b"node_modules/**/*.js\n", b"x[-]y\n", b"x[!-]y\n", b"[]x]\n",
    b"a**b\n", b"a/**/**/c.txt\n", b"**\n!**/\n", b"dir.d/\n!dir.d/inner\n", b"*/b/*\n", b"/*/b\n",
    b"**/a/*\n", b"a/*/*\n!a/b/*\n", b"\xef\xbb\xbfx.txt\n", b"x.txt\r\n", b"*a*a*a*b\n", b"[a-c]/**\n",
    b"/a**\n", b"/a**/b\n", b"a/a/\n", b"aa*/\n", b"*/\n", b"[[:alpha:]][[:alpha:]]\n",
    b"[z-a]\n", b"a?b\n",
]


MALFORMED = [b"!\n", b"ok\n\\\n", b"[x\n", b"a[!\n", b"[[:bogus:]]\n", b"[[:alpha:]\n"]


@pytest.mark.parametrize("rules", MALFORMED, ids=[r.decode() for r in MALFORMED])
def test_rules_git_would_never_match_are_reported_with_their_line(tmp_path: Path, rules: bytes) -> None:
    (tmp_path / IGNORE_FILE).write_bytes(b"# comment\n" + rules)
    with pytest.raises(IgnoreFileError, match=r"line [23]: "):
        Ignore.load(tmp_path)


@pytest.fixture(scope="module")
def git_tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes], list[bytes]]:
    root = tmp_path_factory.mktemp("gitdiff")
    subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV)
    files, dirs = _make_tree(root, PATHS)
    return root, files, dirs


@pytest.mark.parametrize("rules", RULE_SETS, ids=[r.decode("utf-8", "replace") for r in RULE_SETS])
def test_ignore_rules_decide_like_git_check_ignore(git_tree: tuple[Path, list[bytes], list[bytes]],
                                                   rules: bytes) -> None:
    root, files, dirs = git_tree
    assert _ours(root, rules, files, dirs) == _git_ignored(root, rules, files + dirs)


def test_ignore_random_rules_decide_like_git_check_ignore(tmp_path: Path) -> None:
    """Random wildcard soup (stars of both kinds, classes, negations) against random trees."""
    rng = random.Random(6)
    atoms = ["a", "b", "ab", "/", "*", "*", "**", "?", "[ab]", "[!a]", "\\*"]
    names = ["a", "b", "aa", "ab", "ba", "bab", "*", "a*"]
    for trial in range(40):
        root = tmp_path / f"t{trial}"
        root.mkdir()
        subprocess.run(["git", "init", "-q", str(root)], check=True, env=GIT_ENV)
        paths = {"/".join(rng.choice(names) for _ in range(rng.randint(1, 4))).encode() for _ in range(40)}
        files, dirs = _make_tree(root, sorted(paths))
        lines = []
        for _ in range(rng.randint(1, 4)):
            pat = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 6)))
            lines.append(("!" if rng.random() < 0.3 else "") + pat + ("/" if rng.random() < 0.2 else ""))
        rules = ("\n".join(lines) + "\n").encode()
        assert _ours(root, rules, files, dirs) == _git_ignored(root, rules, files + dirs), rules


def test_pathological_ignore_rule_does_not_stall_capture(tmp_path: Path) -> None:
    """pathspec's backtracking regex needed minutes for this rule and a 40-character name."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / IGNORE_FILE).write_text("*a*a*a*a*a*a*a*a*a*a*a*a*b\n")
    (ws / ("a" * 40)).write_text("x")
    (ws / ("a" * 39 + "b")).write_text("y")
    try:
        res = run_cli(home, ws, "snapshots", "capture", "--json", timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("capture stalled on a backtracking ignore rule")
    assert res.returncode == 0, res.stderr
    with Store.open(home / "file_snapshots") as store:
        files = store.files(store.latest(ws) or "")
    assert files["a" * 40][0] == "f"
    assert files["a" * 39 + "b"] == ("x", "ignored")


@pytest.mark.parametrize("kind", ["fifo", "dev-zero-link", "huge", "directory"])
def test_ignore_file_that_is_not_a_small_regular_file_is_one_clear_error(tmp_path: Path, kind: str) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "a.txt").write_text("a")
    target = ws / IGNORE_FILE
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "dev-zero-link":
        target.symlink_to("/dev/zero")
    elif kind == "huge":
        target.write_bytes(b"#" * (2 * 1024 * 1024))
    else:
        target.mkdir()
    try:
        res = run_cli(home, ws, "snapshots", "capture", timeout=60,
                      extra_env={"PYTHONFAULTHANDLER": ""})
    except subprocess.TimeoutExpired:
        pytest.fail("capture hangs on the ignore file")
    line = assert_one_line_error(res)
    assert IGNORE_FILE in line
    assert not (home / "file_snapshots" / "refs" / "workspaces").exists() or not any(
        (home / "file_snapshots" / "refs" / "workspaces").iterdir())


def test_deep_ignore_paths_need_no_recursion(tmp_path: Path) -> None:
    (tmp_path / IGNORE_FILE).write_text("x/\n")
    ig = Ignore.load(tmp_path)
    deep = "/".join(["d"] * 5000)
    assert not ig.file(deep + "/f")
    assert ig.file(deep + "/x/f")



# ------------------------------------------------------------------ undecodable names under a strict stdout


@pytest.mark.parametrize("command", ["list", "list --all", "show", "capture"])
def test_undecodable_workspace_name_prints_under_strict_utf8_stdout(tmp_path: Path, command: str) -> None:
    ws = os.path.join(os.fsencode(tmp_path), b"ws-\xff")
    os.mkdir(ws)
    with open(os.path.join(ws, b"f\xfe.txt"), "wb") as f:
        f.write(b"x")
    home = tmp_path / "home"
    home.mkdir()
    strict = {"PYTHONIOENCODING": "utf-8:strict"}
    first = run_cli(home, Path(os.fsdecode(ws)), "snapshots", "capture", "--label", "l\udcfd", extra_env=strict)
    assert first.returncode == 0, first.stderr
    args = command.split()
    if command == "show":
        args.append(first.stdout.decode().strip())
    res = run_cli(home, Path(os.fsdecode(ws)), "snapshots", *args, extra_env=strict)
    assert res.returncode == 0, res.stderr
    assert b"Traceback" not in res.stderr
    if command != "capture":
        assert b"\\xfd" in res.stdout  # the label, as show_path spells undecodable bytes
    if command in ("list --all", "show"):
        assert b"ws-\\xff" in res.stdout


# ------------------------------------------------------------------ unreadable store files (root ignores chmod)


@pytest.fixture
def stocked(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A workspace with two snapshots made by the CLI; returns (ws, home, store dir)."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "a.txt").write_text("a")
    assert run_cli(home, ws, "snapshots", "capture").returncode == 0
    (ws / "a.txt").write_text("changed")
    assert run_cli(home, ws, "snapshots", "capture").returncode == 0
    return ws, home, home / "file_snapshots"


def _target(store: Path, what: str) -> Path:
    if what == "ref":
        return next((store / "refs" / "workspaces").glob("*.jsonl"))
    if what == "bucket":
        return next(p for p in (store / "snapshots").iterdir() if p.is_dir())
    if what == "idx":
        return next((store / "packs").glob("*.idx"))
    if what == "pack":
        return next((store / "packs").glob("*.pack"))
    if what == "packs":
        return store / "packs"
    return store / "locks" / "store.lock"


UNREADABLE = [("ref", "list"), ("ref", "list --all"), ("ref", "verify"), ("bucket", "verify"),
              ("bucket", "verify --full"), ("idx", "capture"), ("idx", "verify"),
              ("pack", "verify --full"), ("packs", "capture"), ("lock", "gc")]


@pytest.mark.parametrize(("what", "command"), UNREADABLE, ids=[f"{w}-{c}" for w, c in UNREADABLE])
def test_unreadable_store_file_is_one_clear_line(stocked: tuple[Path, Path, Path], what: str, command: str) -> None:
    """Every open of the chosen path fails with EACCES (strace injects it: chmod does not stop root)."""
    ws, home, store = stocked
    target = _target(store, what)
    (ws / "a.txt").write_text("changed again")
    before = sorted(p.name for p in store.rglob("*") if "locks" not in p.parts)
    strace = ("strace", "-f", "-qq", "-o", "/dev/null", "-P", str(target), "-e", "trace=openat,open",
              "-e", "inject=openat,open:error=EACCES")
    res = run_cli(home, ws, "snapshots", *command.split(), prefix=strace)
    if command.startswith("verify") and res.returncode == 1:
        # verify's job is to report what it cannot check: exit 1, the object named among its problems
        out = res.stdout.decode("utf-8", "replace")
        assert "Traceback" not in res.stderr.decode("utf-8", "replace")
        assert "Permission denied" in out and "DAMAGED" in out, out
    else:
        line = assert_one_line_error(res)
        assert "Permission denied" in line
    assert sorted(p.name for p in store.rglob("*") if "locks" not in p.parts) == before


def test_listing_snapshots_needs_no_pack_index(stocked: tuple[Path, Path, Path]) -> None:
    """The blob index loads on first use: `list` works (and changes nothing) while a pack index cannot be read."""
    ws, home, store = stocked
    target = _target(store, "idx")
    before = sorted(p.name for p in store.rglob("*") if "locks" not in p.parts)
    strace = ("strace", "-f", "-qq", "-o", "/dev/null", "-P", str(target), "-e", "trace=openat,open",
              "-e", "inject=openat,open:error=EACCES")
    res = run_cli(home, ws, "snapshots", "list", prefix=strace)
    assert res.returncode == 0, res.stderr
    assert len(res.stdout.decode().splitlines()) == 2
    assert sorted(p.name for p in store.rglob("*") if "locks" not in p.parts) == before


# ------------------------------------------------------------------ deeply nested config


@pytest.mark.parametrize("depth", [40, 2000])
@pytest.mark.parametrize("where", ["file", "-c"])
def test_deeply_nested_config_is_one_clear_line(tmp_path: Path, depth: int, where: str) -> None:
    home = tmp_path / "home"
    home.mkdir()
    value = "[" * depth + "]" * depth
    args: list[str] = []
    if where == "file":
        (home / "config.toml").write_text(f"[file_snapshots]\nauto_gc = {value}\n")
    else:
        args = ["-c", f"file_snapshots.auto_gc={{a={value}}}"]
    line = assert_one_line_error(run_cli(home, tmp_path, *args, "snapshots", "list"))
    assert "nested" in line


# ------------------------------------------------------------------ honest reports


def test_untracked_file_over_the_size_limit_is_reported_as_skipped(tmp_path: Path) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "big.bin").write_bytes(b"x" * 5000)
    (ws / "small.txt").write_text("s")
    limit = ("-c", "file_snapshots.residue_max_file_bytes=1000")
    res = run_cli(home, ws, *limit, "snapshots", "capture", "--json")
    assert res.returncode == 0, res.stderr
    skipped = {s["path"]: s["reason"] for s in json.loads(res.stdout)["skipped"]}
    assert "big.bin" in skipped and "size limit" in skipped["big.bin"]
    assert "small.txt" not in skipped
    text = run_cli(home, ws, *limit, "snapshots", "capture")
    assert b"skipped big.bin: larger than the residue size limit" in text.stderr


def test_restore_never_reports_a_path_both_deleted_and_left(tmp_path: Path) -> None:
    """A file now stands where the snapshot had a directory: it is deleted, and only reported so."""
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "d").mkdir()
    (ws / "d" / "x.txt").write_text("x")
    (ws / "keep.txt").write_text("k")
    first = run_cli(home, ws, "snapshots", "capture")
    snap = first.stdout.decode().strip()
    (ws / "d" / "x.txt").unlink()
    (ws / "d").rmdir()
    (ws / "d").write_text("a file now")
    res = run_cli(home, ws, "snapshots", "restore", snap, "--yes")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.decode().splitlines()
    assert "deleted d" in lines and "wrote   d/x.txt" in lines
    assert not [line for line in lines if line.startswith("left    d ")], lines
    assert (ws / "d" / "x.txt").read_text() == "x"
