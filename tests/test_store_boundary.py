"""Issue 17 §3: the store never loses history to a workspace that is, or lies inside, the store or Codex's home.

Every command here is the real `codexr` in a subprocess. A workspace or `--into` target that is (or lies
inside) `CODEX_HOME` or the store is refused in one line and nothing changes; a workspace that *contains*
`CODEX_HOME` works, but nothing inside `CODEX_HOME` is ever read, written or deleted — as `.git/` is not.
Directories are compared by (device, inode), so a symlink or a bind mount does not get past the check.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from fs_helpers import store_files, tree
from test_cli_snapshots import assert_one_line_error
from test_gc_safety import Cli

from snapshot_store import Store

REPO = Path(__file__).parents[1]
GIT_ENV = {**os.environ, "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
NO_AUTO_GC = ("-c", "file_snapshots.auto_gc=false")


def refused(res: subprocess.CompletedProcess[str]) -> str:
    """Exit 2 with exactly one `codexr: error:` line on stderr; returns it."""
    return assert_one_line_error(res)


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    """A workspace with two files and a CODEX_HOME with a config.toml, beside each other; one capture made."""
    ws = tmp_path / "ws"
    home = tmp_path / "codex-home"
    ws.mkdir()
    home.mkdir()
    c = Cli(Path(os.path.realpath(ws)), Path(os.path.realpath(home)))
    (c.ws / "a.txt").write_text("alpha\n")
    (c.ws / "config.toml").write_text('model = "not codex\'s"\n[[[broken\n')
    (c.home / "config.toml").write_text('model = "gpt-5.5"\n')
    (c.home / "sessions").mkdir()
    c.ok(*NO_AUTO_GC, "snapshots", "capture")
    return c


def everything(c: Cli) -> tuple[dict[str, Any], dict[str, bytes]]:
    """CODEX_HOME's tree (the store's lock files aside) and the store's files: what a refusal must not change."""
    return {k: v for k, v in tree(c.home).items() if "/locks/" not in k}, store_files(c.store_dir)


def targets(c: Cli) -> dict[str, Path]:
    """Directories that are, or lie inside, the store or Codex's home."""
    link = c.ws.parent / "link-to-home"
    if not link.exists():
        link.symlink_to(c.home)
    return {"home": c.home, "home/sessions": c.home / "sessions", "store": c.store_dir,
            "store/packs": c.store_dir / "packs", "symlink to home": link,
            "symlink into the store": link / "file_snapshots" / "refs"}


TARGETS = ["home", "home/sessions", "store", "store/packs", "symlink to home", "symlink into the store"]


@pytest.mark.parametrize("which", TARGETS)
def test_capture_refuses_the_store_or_codex_home_as_workspace(cli: Cli, which: str) -> None:
    target = targets(cli)[which]
    before = everything(cli)
    line = refused(cli.run(*NO_AUTO_GC, "snapshots", "capture", "-C", str(target)))
    assert "Codex's home" in line or "snapshot store" in line, line
    assert everything(cli) == before


@pytest.mark.parametrize("which", TARGETS)
def test_restore_into_the_store_or_codex_home_is_refused_and_changes_nothing(cli: Cli, which: str) -> None:
    [snap] = [i["id"] for i in cli.json("snapshots", "list")]
    target = targets(cli)[which]
    before = everything(cli)
    for extra in ((), ("--dry-run",)):
        refused(cli.run(*NO_AUTO_GC, "snapshots", "restore", snap, "--into", str(target), "--yes", *extra))
        refused(cli.run(*NO_AUTO_GC, "snapshots", "restore", snap, "-C", str(target), "--yes", *extra))
    refused(cli.run(*NO_AUTO_GC, "snapshots", "diff", snap, "-C", str(target)))
    assert everything(cli) == before
    assert (cli.home / "config.toml").read_text() == 'model = "gpt-5.5"\n'
    cli.ok("snapshots", "verify")


def test_a_capture_of_the_store_made_before_the_fix_cannot_be_restored_over_it(
        cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's loss: a snapshot *of the store* (made by an older codexr) restored later deleted packs."""
    from snapshot_store.roots import resolve_root

    with monkeypatch.context() as m, Store.open(cli.store_dir) as store:
        # What codexr did before the fix: any directory was a workspace.
        m.setattr(Store, "workspace", lambda self, root: resolve_root(root), raising=False)
        snap = store.at(cli.store_dir).capture().id
    for _ in range(2):
        (cli.ws / "a.txt").write_text((cli.ws / "a.txt").read_text() + "more\n")
        cli.ok(*NO_AUTO_GC, "snapshots", "capture")
    before = everything(cli)
    refused(cli.run(*NO_AUTO_GC, "snapshots", "restore", snap, "-C", str(cli.store_dir), "--yes"))
    refused(cli.run(*NO_AUTO_GC, "snapshots", "restore", snap, "--into", str(cli.store_dir), "--yes"))
    assert everything(cli) == before
    cli.ok("snapshots", "verify")


@pytest.mark.parametrize("command", ["exec", "rewind", "redo"])
def test_agent_commands_refuse_codex_home_as_workspace_before_starting_codex(cli: Cli, command: str) -> None:
    args = {"exec": ["exec", "hello"], "rewind": ["rewind", "--thread", "0" * 8, "--to", "1", "--yes"],
            "redo": ["redo", "--thread", "0" * 8, "--yes"]}[command]
    before = everything(cli)
    for target in (cli.home, cli.store_dir, cli.home / "sessions"):
        line = refused(cli.run(*NO_AUTO_GC, *args, "-C", str(target)))
        assert "Codex's home" in line or "snapshot store" in line, line
    assert everything(cli) == before


def test_line_mode_refuses_codex_home_as_workspace(cli: Cli) -> None:
    before = everything(cli)
    line = refused(cli.run(*NO_AUTO_GC, "--plain", "-C", str(cli.home)))
    assert "Codex's home" in line, line
    assert everything(cli) == before


def _bind_prefix(source: Path, mountpoint: Path) -> tuple[str, ...]:
    """Run the command in a private mount namespace where `mountpoint` is a bind mount of `source`."""
    user_ns = () if os.geteuid() == 0 else ("-r",)
    script = f"mount --bind {shlex.quote(str(source))} {shlex.quote(str(mountpoint))} && exec \"$@\""
    return ("unshare", *user_ns, "-m", "sh", "-c", script, "sh")


def test_a_bind_mount_of_codex_home_is_refused_as_workspace(cli: Cli) -> None:
    """No path names CODEX_HOME, but the directory is the same one (same device and inode)."""
    mnt = cli.ws.parent / "mnt"
    mnt.mkdir()
    before = everything(cli)
    for sub in ("", "file_snapshots"):
        res = cli.run(*NO_AUTO_GC, "snapshots", "capture", "-C", str(mnt / sub), prefix=_bind_prefix(cli.home, mnt))
        line = refused(res)
        assert "Codex's home" in line or "snapshot store" in line, line
    assert everything(cli) == before


# ------------------------------------------------------------------ a workspace that contains CODEX_HOME


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, env=GIT_ENV)


@pytest.fixture
def around(tmp_path: Path) -> Cli:
    """A workspace (a Git repository, like a dotfiles repo) whose `codexhome/` is CODEX_HOME, config tracked."""
    ws = Path(os.path.realpath(tmp_path)) / "dotfiles"
    home = ws / "codexhome"
    home.mkdir(parents=True)
    (home / "config.toml").write_text('model = "gpt-5.5"\n')
    (home / "history.jsonl").write_text("{}\n")
    (ws / "notes.txt").write_text("notes\n")
    git(ws, "init", "-q")
    git(ws, "add", "notes.txt", "codexhome/config.toml")
    git(ws, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "dotfiles")
    return Cli(ws, home)


def captured_paths(c: Cli, snap: str) -> set[str]:
    return {e["path"] for e in c.json("snapshots", "show", snap)["entries"] if e["kind"] in ("f", "l")}


def library(c: Cli) -> Store:
    """The store as the app opens it: Codex's home protected. The library accepts a root that contains it (its
    own roots do: the states of paths outside a workspace live under "/"); the app refuses such a workspace."""
    return Store.open(c.store_dir, protected=[c.home])


def test_a_workspace_containing_codex_home_is_refused_and_the_library_never_captures_it(around: Cli) -> None:
    before = everything(around)
    line = refused(around.run(*NO_AUTO_GC, "snapshots", "capture"))
    assert "contains Codex's home" in line, line
    assert everything(around) == before
    with library(around) as store:
        snap = store.at(around.ws).capture().id
    paths = captured_paths(around, snap)
    assert "notes.txt" in paths
    assert not [p for p in paths if p.startswith("codexhome")], paths


def test_a_restore_into_a_directory_holding_codex_home_is_refused_and_the_library_never_writes_there(
        around: Cli, tmp_path: Path) -> None:
    """A snapshot of another directory holding `codexhome/config.toml`, restored --into the workspace."""
    other = tmp_path / "other"
    (other / "codexhome").mkdir(parents=True)
    (other / "codexhome" / "config.toml").write_text("[[[ not toml\n")
    (other / "notes.txt").write_text("other notes\n")
    snap = around.json(*NO_AUTO_GC, "snapshots", "capture", "-C", str(other))["id"]
    assert "codexhome/config.toml" in captured_paths(around, snap)  # outside CODEX_HOME it is just a file
    before = everything(around)
    line = refused(around.run(*NO_AUTO_GC, "snapshots", "restore", snap, "--into", str(around.ws), "--yes"))
    assert "contains Codex's home" in line, line
    assert (around.ws / "notes.txt").read_text() == "notes\n" and everything(around) == before
    with library(around) as store:
        res = store.at(around.ws).restore(snap, into=True)
    assert (around.ws / "notes.txt").read_text() == "other notes\n"
    assert (around.home / "config.toml").read_text() == 'model = "gpt-5.5"\n'
    assert "codexhome/config.toml" not in res.written
    home_now, _store = everything(around)
    assert {k: v for k, v in home_now.items() if not k.startswith("file_snapshots/")} == \
        {k: v for k, v in before[0].items() if not k.startswith("file_snapshots/")}
    around.ok("snapshots", "verify")


def test_codex_home_below_a_hidden_directory_is_never_written(tmp_path: Path) -> None:
    """CODEX_HOME at ~/.config/codex: the walk does not enter `.config`, so only the path itself can tell."""
    ws = Path(os.path.realpath(tmp_path)) / "home"
    home = ws / ".config" / "codex"
    home.mkdir(parents=True)
    (home / "config.toml").write_text('model = "gpt-5.5"\n')
    c = Cli(ws, home)
    other = tmp_path / "other"
    (other / ".config" / "codex").mkdir(parents=True)
    (other / ".config" / "codex" / "config.toml").write_text("[[[ not toml\n")
    git(other, "init", "-q")
    git(other, "add", ".config/codex/config.toml")
    snap = c.json(*NO_AUTO_GC, "snapshots", "capture", "-C", str(other))["id"]
    assert ".config/codex/config.toml" in captured_paths(c, snap)
    assert "contains Codex's home" in refused(c.run(*NO_AUTO_GC, "snapshots", "restore", snap, "--into", str(ws),
                                                     "--yes"))
    with library(c) as store:
        res = store.at(ws).restore(snap, into=True)
    assert (home / "config.toml").read_text() == 'model = "gpt-5.5"\n'
    assert ".config/codex/config.toml" not in res.written
    [left] = [a for a in res.left if a.path == ".config/codex/config.toml"]
    assert "Codex's home" in left.reason, left


def test_an_old_snapshot_holding_codex_home_files_neither_writes_nor_deletes_them(around: Cli) -> None:
    """A snapshot that captured `codexhome/` (an older codexr, another CODEX_HOME) restored in place."""
    with Store.open(around.store_dir) as store:  # unprotected: codexhome/ is captured like any directory
        snap = store.at(around.ws).capture().id
    assert "codexhome/config.toml" in store_paths(around, snap)
    (around.home / "config.toml").write_text('model = "changed since"\n')
    (around.home / "history.jsonl").unlink()
    (around.home / "new-session.jsonl").write_text("{}\n")  # witnessed absent by the old snapshot
    (around.ws / "notes.txt").write_text("edited\n")
    assert "contains Codex's home" in refused(around.run(*NO_AUTO_GC, "snapshots", "restore", snap, "--yes"))
    assert (around.ws / "notes.txt").read_text() == "edited\n"
    with library(around) as store:
        res = store.at(around.ws).restore(snap)
    assert (around.ws / "notes.txt").read_text() == "notes\n"
    assert (around.home / "config.toml").read_text() == 'model = "changed since"\n'
    assert not (around.home / "history.jsonl").exists()
    assert (around.home / "new-session.jsonl").read_text() == "{}\n"
    assert not [p for p in [*res.written, *res.deleted] if p.startswith("codexhome")], res


def store_paths(c: Cli, snap: str) -> set[str]:
    return captured_paths(c, snap)


def test_a_bind_mount_of_codex_home_inside_the_workspace_is_not_captured(cli: Cli) -> None:
    mnt = cli.ws / "mnt"
    mnt.mkdir()
    res = cli.run(*NO_AUTO_GC, "snapshots", "capture", "--json", prefix=_bind_prefix(cli.home, mnt))
    assert res.returncode == 0, res.stderr
    snap = json.loads(res.stdout)["id"]
    paths = captured_paths(cli, snap)
    assert "a.txt" in paths
    assert not [p for p in paths if p.startswith("mnt")], paths


# ------------------------------------------------------------------ a lost workspace ref never lets gc erase history

GRACE0 = ("-c", "file_snapshots.gc_grace_seconds=0")


def age_store(c: Cli, seconds: float = 7200.0) -> None:
    """Every store file older than the grace period and than a capture in progress could be."""
    past = time.time() - seconds
    for dirpath, _dirs, files in os.walk(c.store_dir):
        for f in files:
            os.utime(os.path.join(dirpath, f), (past, past))


@pytest.fixture
def three(cli: Cli) -> tuple[list[str], Path, bytes]:
    """Three snapshots of the workspace (the fixture's and two more), aged; (ids, ref file, its bytes)."""
    for n in range(2):
        (cli.ws / "a.txt").write_text(f"version {n}\n" * 40)
        (cli.ws / f"new{n}.bin").write_bytes(os.urandom(2000))
        cli.ok(*NO_AUTO_GC, "snapshots", "capture")
    ids = [i["id"] for i in cli.json("snapshots", "list")]
    assert len(ids) == 3
    [ref] = (cli.store_dir / "refs" / "workspaces").glob("*.jsonl")
    age_store(cli)
    return ids, ref, ref.read_bytes()


def test_a_deleted_ref_file_is_damage_that_gc_refuses_and_repair_rebuilds(cli: Cli, three: tuple[list[str], Path,
                                                                                                  bytes]) -> None:
    ids, ref, original = three
    ref.unlink()
    before = store_files(cli.store_dir)
    res = cli.run(*NO_AUTO_GC, "snapshots", "verify")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert any(line.startswith("damaged: ") and str(cli.ws) in line and "--repair" in line
               for line in res.stdout.splitlines()), res.stdout
    for dry in ((), ("--dry-run",)):
        line = refused(cli.run(*NO_AUTO_GC, *GRACE0, "snapshots", "gc", *dry))
        assert "codexr snapshots verify --repair" in line, line
    assert store_files(cli.store_dir) == before  # gc deleted nothing
    res = cli.ok(*NO_AUTO_GC, "snapshots", "verify", "--repair")
    assert any(line.startswith("repaired: ") and str(cli.ws) in line for line in res.stdout.splitlines()), res.stdout
    assert ref.read_bytes() == original  # the very lines the captures wrote, rebuilt from the snapshots
    cli.ok(*NO_AUTO_GC, "snapshots", "verify")
    cli.ok(*NO_AUTO_GC, *GRACE0, "snapshots", "gc")
    assert [i["id"] for i in cli.json("snapshots", "list")] == ids
    for snap in ids:
        cli.ok(*NO_AUTO_GC, "snapshots", "restore", snap, "--dry-run")


def test_a_capture_after_the_ref_was_lost_does_not_orphan_the_earlier_snapshots(
        cli: Cli, three: tuple[list[str], Path, bytes]) -> None:
    """The next capture starts a new ref file: the earlier snapshots are still no garbage, even to automatic gc."""
    ids, ref, _original = three
    ref.unlink()
    (cli.store_dir / "gc.last").unlink(missing_ok=True)  # automatic gc is due at this capture
    (cli.ws / "a.txt").write_text("after the loss\n")
    res = cli.ok(*GRACE0, "snapshots", "capture")  # auto gc on: it must skip, not fail the capture
    assert "automatic gc skipped" in res.stderr and "verify --repair" in res.stderr, res.stderr
    newest = res.stdout.strip()
    for snap in ids:
        cli.ok(*NO_AUTO_GC, "snapshots", "show", snap)  # nothing was collected
    refused(cli.run(*NO_AUTO_GC, *GRACE0, "snapshots", "gc"))
    assert cli.run(*NO_AUTO_GC, "snapshots", "verify").returncode == 1
    cli.ok(*NO_AUTO_GC, "snapshots", "verify", "--repair")
    assert [i["id"] for i in cli.json("snapshots", "list")] == [*ids, newest]
    cli.ok(*NO_AUTO_GC, *GRACE0, "snapshots", "gc")
    assert [i["id"] for i in cli.json("snapshots", "list")] == [*ids, newest]
    cli.ok(*NO_AUTO_GC, "snapshots", "verify")


def test_snapshots_dropped_by_retention_are_not_mistaken_for_lost_history(cli: Cli) -> None:
    """Retention's drops (kept as delta bases, or young when dropped) never make gc or verify cry wolf."""
    for n in range(4):
        (cli.ws / "a.txt").write_text(f"version {n}\n")
        cli.ok(*NO_AUTO_GC, "snapshots", "capture")
    keep2 = ("-c", "file_snapshots.retention_max_snapshots=2")
    cli.ok(*NO_AUTO_GC, *keep2, "snapshots", "gc")  # drops 3 of 5 while they are young: their files stay
    assert len(cli.json("snapshots", "list")) == 2
    cli.ok(*NO_AUTO_GC, "snapshots", "verify")
    age_store(cli)
    cli.ok(*NO_AUTO_GC, "snapshots", "verify")
    cli.ok(*NO_AUTO_GC, *keep2, "snapshots", "gc")
    cli.ok(*NO_AUTO_GC, *GRACE0, *keep2, "snapshots", "gc")
    assert len(cli.json("snapshots", "list")) == 2
    cli.ok(*NO_AUTO_GC, "snapshots", "verify")


def test_a_tracked_path_inside_a_bind_mount_of_codex_home_below_a_hidden_directory_is_not_read(cli: Cli) -> None:
    """The walk does not enter `.hidden`, so the tracked path's unlisted ancestor is checked by identity."""
    mnt = cli.ws / ".hidden" / "mnt"
    mnt.mkdir(parents=True)
    (mnt / "config.toml").write_text("tracked before the mount\n")
    git(cli.ws, "init", "-q")
    git(cli.ws, "add", "a.txt", ".hidden/mnt/config.toml")
    (mnt / "config.toml").unlink()  # the index still names it; under the mount it is Codex's config.toml
    res = cli.run(*NO_AUTO_GC, "snapshots", "capture", "--json", prefix=_bind_prefix(cli.home, mnt))
    assert res.returncode == 0, res.stderr
    paths = captured_paths(cli, json.loads(res.stdout)["id"])
    assert "a.txt" in paths
    assert ".hidden/mnt/config.toml" not in paths, paths
