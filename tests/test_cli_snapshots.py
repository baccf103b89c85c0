"""`codexr snapshots …` end to end: the real command line in a subprocess, on a scratch workspace."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import pytest
from fs_helpers import store_files, tree

from snapshot_store import Store

REPO = Path(__file__).parents[1]
HEX64 = re.compile(r"[0-9a-f]{64}")
PLAN_LINE = re.compile(r"^(write|delete|leave)\s+(\S+)\s+\((.+)\)$")


@dataclass
class Cli:
    ws: Path
    home: Path

    @property
    def store_dir(self) -> Path:
        return self.home / "file_snapshots"

    def run(self, *args: str, stdin: int | None = subprocess.DEVNULL, cwd: Path | None = None
            ) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(self.home)}
        return subprocess.run([sys.executable, "-m", "app", *args], cwd=cwd or self.ws, env=env,
                              stdin=stdin, capture_output=True, text=True, timeout=120)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        res = self.run(*args)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
        return res

    def json(self, *args: str) -> Any:
        return json.loads(self.ok(*args, "--json").stdout)

    def capture(self) -> str:
        """Capture in-process (fast setup); the same store the CLI opens."""
        with Store.open(self.store_dir, protected=[self.home]) as store:
            return store.at(self.ws).capture().id

    def listed(self) -> list[str]:
        return [i["id"] for i in self.json("snapshots", "list")]


def assert_one_line_error(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, (res.returncode, res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("codexr: error:"), res.stderr
    return lines[0]


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    ws = tmp_path / "ws"
    home = tmp_path / "codex-home"
    ws.mkdir()
    home.mkdir()
    c = Cli(Path(os.path.realpath(ws)), home)
    (c.ws / "a.txt").write_text("alpha\n")
    (c.ws / "sub").mkdir()
    (c.ws / "sub" / "b.txt").write_text("beta\n")
    (c.ws / "m.sh").write_text("#!/bin/sh\necho hi\n")
    os.chmod(c.ws / "m.sh", 0o644)
    return c


def change_workspace(ws: Path) -> None:
    """One of each kind of change relative to the fixture's tree."""
    (ws / "a.txt").write_text("alpha, edited\n")
    (ws / "c.txt").write_text("new file\n")
    (ws / "sub" / "b.txt").unlink()
    os.chmod(ws / "m.sh", 0o755)


EXPECTED_CHANGES = {("a.txt", "modified"), ("c.txt", "added"), ("sub/b.txt", "deleted"), ("m.sh", "mode")}


# ----------------------------------------------------------------------------- capture, list, show, diff


def test_capture_prints_the_id_and_json(cli: Cli) -> None:
    res = cli.ok("snapshots", "capture")
    assert HEX64.fullmatch(res.stdout.strip()), res.stdout
    assert len(res.stdout.splitlines()) == 1
    doc = cli.json("snapshots", "capture", "--label", "second")
    assert isinstance(doc, dict)
    assert {"id", "file_count", "bytes_hashed", "bytes_stored", "seconds"} <= doc.keys()
    assert HEX64.fullmatch(doc["id"])
    assert doc["file_count"] == 3
    assert isinstance(doc["bytes_hashed"], int) and isinstance(doc["bytes_stored"], int)
    assert isinstance(doc["seconds"], float | int)
    assert cli.listed() == [res.stdout.strip(), doc["id"]]


def test_list_show_and_diff_in_text_and_json(cli: Cli) -> None:
    first = cli.ok("snapshots", "capture", "--label", "before").stdout.strip()
    change_workspace(cli.ws)

    # diff ID: against the workspace as it is now.
    doc = cli.json("snapshots", "diff", first[:10])
    assert doc["from"] == first and doc["to"] == "workspace"
    assert {(c["path"], c["change"]) for c in doc["changes"]} == EXPECTED_CHANGES
    text = cli.ok("snapshots", "diff", first).stdout
    assert {tuple(reversed(line.split())) for line in text.splitlines()} == EXPECTED_CHANGES

    second = cli.ok("snapshots", "capture").stdout.strip()
    doc = cli.json("snapshots", "diff", first, second)
    assert doc["to"] == second
    assert {(c["path"], c["change"]) for c in doc["changes"]} == EXPECTED_CHANGES
    assert cli.ok("snapshots", "diff", second).stdout.strip() == "no differences"

    listing = cli.json("snapshots", "list")
    assert [i["id"] for i in listing] == [first, second]
    assert listing[0]["label"] == "before" and listing[0]["root"] == str(cli.ws)
    lines = cli.ok("snapshots", "list").stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith(first[:12]) and lines[1].startswith(second[:12])
    assert "before" in lines[0]

    shown = cli.json("snapshots", "show", first[:8])
    assert shown["id"] == first
    entries = {e["path"]: e for e in shown["entries"]}
    assert entries["a.txt"]["blob"] == blake3.blake3(b"alpha\n").hexdigest()
    assert entries["m.sh"]["mode"] == 0o644
    assert entries["sub/b.txt"]["size"] == len("beta\n")
    text = cli.ok("snapshots", "show", first).stdout
    assert f"snapshot {first}" in text
    assert {"a.txt", "sub/b.txt", "m.sh"} <= {line.split()[-1] for line in text.splitlines()[3:]}


# ----------------------------------------------------------------------------- restore


def prepare_restore(cli: Cli) -> tuple[str, dict[str, object]]:
    """A target snapshot; then the workspace changes so a restore writes, deletes and leaves paths."""
    (cli.ws / "notes.txt").write_text("notes at target time\n")
    target = cli.capture()
    target_tree = tree(cli.ws)
    change_workspace(cli.ws)
    (cli.ws / ".codexsnapignore").write_text("notes.txt\n")
    (cli.ws / "notes.txt").write_text("notes the user keeps writing\n")
    return target, target_tree


def test_restore_dry_run_prints_the_plan_and_changes_nothing(cli: Cli) -> None:
    target, _ = prepare_restore(cli)
    before, store_before, listed_before = tree(cli.ws), store_files(cli.store_dir), cli.listed()
    out = cli.ok("snapshots", "restore", target[:12], "--dry-run").stdout
    plan = {}
    for line in out.splitlines():
        m = PLAN_LINE.match(line)
        if m:
            plan[m[2]] = (m[1], m[3])
    assert plan["a.txt"] == ("write", "content differs")
    assert plan["m.sh"] == ("write", "mode differs")
    assert plan["sub/b.txt"] == ("write", "missing now")
    assert plan["c.txt"][0] == "delete" and "witnessed" in plan["c.txt"][1]
    assert plan["notes.txt"][0] == "leave" and ".codexsnapignore" in plan["notes.txt"][1]
    assert "3 to write, 1 to delete, 1 left alone" in out
    doc = cli.json("snapshots", "restore", target, "--dry-run")
    assert doc["dry_run"] is True and doc["safety_id"] is None
    assert tree(cli.ws) == before
    assert cli.listed() == listed_before
    assert store_files(cli.store_dir) == store_before


def test_restore_dry_run_diff_compares_the_disk_with_the_snapshot(cli: Cli) -> None:
    """Issue 18 §1.1: the current side of each diff is the file on disk, which the store never held."""
    target = cli.ok("snapshots", "capture").stdout.strip()
    (cli.ws / "a.txt").write_text("alpha, edited after the capture\n")
    (cli.ws / "c.txt").write_text("created after the capture\n")
    (cli.ws / "sub" / "b.txt").unlink()
    before, store_before = tree(cli.ws), store_files(cli.store_dir)
    res = cli.run("snapshots", "restore", target[:12], "--dry-run", "--diff")
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert res.stderr == ""
    out = res.stdout
    lines = out.splitlines()
    assert "-alpha, edited after the capture" in lines and "+alpha" in lines, out
    assert "-created after the capture" in lines  # the deleted file's content comes from the disk too
    assert "+beta" in lines  # the missing file's content comes from the snapshot
    assert "2 to write, 1 to delete, 0 left alone" in out
    assert tree(cli.ws) == before and store_files(cli.store_dir) == store_before


def test_restore_without_yes_off_a_terminal_refuses_and_changes_nothing(cli: Cli) -> None:
    target, _ = prepare_restore(cli)
    before, store_before = tree(cli.ws), store_files(cli.store_dir)
    line = assert_one_line_error(cli.run("snapshots", "restore", target, stdin=subprocess.DEVNULL))
    assert "--yes" in line
    assert tree(cli.ws) == before
    assert store_files(cli.store_dir) == store_before


def test_restore_yes_restores_and_its_safety_id_undoes_it(cli: Cli) -> None:
    target, target_tree = prepare_restore(cli)
    before = tree(cli.ws)
    res = cli.ok("snapshots", "restore", target[:12], "--yes")
    safety = re.search(r"safety snapshot ([0-9a-f]{64})", res.stdout)
    assert safety, res.stdout
    after = tree(cli.ws)
    # Everything is as in the target except the ignored file (left alone) and the ignore file itself.
    assert {k: v for k, v in after.items() if k not in ("notes.txt", ".codexsnapignore")} == \
        {k: v for k, v in target_tree.items() if k != "notes.txt"}
    assert after["notes.txt"] == before["notes.txt"]
    assert safety[1] in cli.listed()

    undo = cli.json("snapshots", "restore", safety[1], "--yes")
    assert tree(cli.ws) == before
    assert HEX64.fullmatch(undo["safety_id"])
    assert undo["safety_id"] in cli.listed()


# ----------------------------------------------------------------------------- errors


def _bad_ignore(cli: Cli) -> None:
    (cli.ws / ".codexsnapignore").write_text("ok.txt\n!\n")


def _broken_config(cli: Cli) -> None:
    (cli.home / "config.toml").write_text("[file_snapshots\nresidue_max_files = \n")


def _corrupt_format(cli: Cli) -> None:
    (cli.store_dir / "format").write_bytes(b"\x00garbage{")


ERROR_CASES = [
    # (test id, damage to set up first, argv; {id} stands for an existing snapshot's id)
    ("unknown-full-id", None, ["snapshots", "restore", "0" * 64, "--yes"]),
    ("unknown-prefix", None, ["snapshots", "show", "0000abcd"]),
    ("unknown-id-diff", None, ["snapshots", "diff", "f" * 64]),
    ("too-short-id", None, ["snapshots", "restore", "abc", "--yes"]),
    ("non-hex-id", None, ["snapshots", "restore", "zzzzzzzz", "--yes"]),
    ("path-like-id", None, ["snapshots", "show", "../../../etc/passwd"]),
    ("missing-workspace-capture", None, ["snapshots", "capture", "-C", "/nonexistent/ws"]),
    ("missing-workspace-restore", None, ["snapshots", "restore", "{id}", "-C", "/nonexistent/ws", "--yes"]),
    ("missing-workspace-list", None, ["snapshots", "list", "-C", "/nonexistent/ws"]),
    ("bad-override-capture", None, ["-c", "file_snapshots.residue_max_files=lots", "snapshots", "capture"]),
    ("bad-override-restore", None,
     ["-c", "file_snapshots.residue_max_files=lots", "snapshots", "restore", "{id}", "--yes"]),
    ("broken-config-capture", _broken_config, ["snapshots", "capture"]),
    ("broken-config-restore", _broken_config, ["snapshots", "restore", "{id}", "--yes"]),
    ("bad-ignore-capture", _bad_ignore, ["snapshots", "capture"]),
    ("bad-ignore-restore", _bad_ignore, ["snapshots", "restore", "{id}", "--yes"]),
    ("bad-ignore-dry-run", _bad_ignore, ["snapshots", "restore", "{id}", "--dry-run"]),
    ("corrupt-store-capture", _corrupt_format, ["snapshots", "capture"]),
    ("corrupt-store-restore", _corrupt_format, ["snapshots", "restore", "{id}", "--yes"]),
    ("corrupt-store-list", _corrupt_format, ["snapshots", "list"]),
    ("corrupt-store-verify", _corrupt_format, ["snapshots", "verify"]),
]


@pytest.mark.parametrize(("setup", "argv"), [pytest.param(s, a, id=i) for i, s, a in ERROR_CASES])
def test_errors_are_one_line_exit_2_and_change_nothing(
        cli: Cli, setup: Callable[[Cli], None] | None, argv: list[str]) -> None:
    target = cli.capture()
    change_workspace(cli.ws)  # so a restore that went ahead would be visible
    if setup is not None:
        setup(cli)
    ws_before, store_before = tree(cli.ws), store_files(cli.store_dir)
    res = cli.run(*(a.replace("{id}", target) for a in argv))
    assert_one_line_error(res)
    assert tree(cli.ws) == ws_before
    assert store_files(cli.store_dir) == store_before


def test_error_messages_say_what_is_wrong(cli: Cli) -> None:
    cli.capture()
    assert "/nonexistent/ws" in assert_one_line_error(cli.run("snapshots", "capture", "-C", "/nonexistent/ws"))
    assert "residue_max_files" in assert_one_line_error(
        cli.run("-c", "file_snapshots.residue_max_files=lots", "snapshots", "capture"))
    _bad_ignore(cli)
    assert ".codexsnapignore" in assert_one_line_error(cli.run("snapshots", "capture"))
    (cli.ws / ".codexsnapignore").unlink()
    _broken_config(cli)
    assert "config.toml" in assert_one_line_error(cli.run("snapshots", "capture"))
    (cli.home / "config.toml").unlink()
    _corrupt_format(cli)
    assert "format" in assert_one_line_error(cli.run("snapshots", "list"))


# ----------------------------------------------------------------------------- verify, gc


def test_verify_ok_on_a_fresh_store(cli: Cli) -> None:
    cli.capture()
    res = cli.ok("snapshots", "verify", "--full")
    assert res.stdout.splitlines()[-1].startswith("ok:")
    doc = cli.json("snapshots", "verify")
    assert doc["ok"] is True and doc["problems"] == []


def test_verify_full_names_a_damaged_blob(cli: Cli) -> None:
    content = b"verify-marker: a short file stored raw in its pack\n"
    (cli.ws / "marker.txt").write_bytes(content)
    cli.capture()
    [pack] = [p for p in (cli.store_dir / "packs").glob("*.pack") if content in p.read_bytes()]
    data = bytearray(pack.read_bytes())
    data[data.find(content) + 5] ^= 0x20
    pack.write_bytes(bytes(data))
    blob = blake3.blake3(content).hexdigest()
    res = cli.run("snapshots", "verify", "--full")
    assert res.returncode not in (0, 2), (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    assert any(blob in line and line.startswith("damaged:") for line in res.stdout.splitlines()), res.stdout
    res = cli.run("snapshots", "verify", "--full", "--json")
    doc = json.loads(res.stdout)
    assert doc["ok"] is False and any(blob in p for p in doc["problems"])


def test_verify_reports_a_missing_parent_snapshot(cli: Cli) -> None:
    for n in range(4):
        (cli.ws / f"f{n}.txt").write_text(f"file {n}\n")
    parent = cli.capture()
    (cli.ws / "a.txt").write_text("one small change\n")
    child = cli.capture()
    with Store.open(cli.store_dir) as store:
        assert store.record(child).parent == parent
    (cli.store_dir / "snapshots" / parent[:2] / parent).unlink()
    res = cli.run("snapshots", "verify")
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert any(line.startswith("damaged:") and child in line and parent in line
               for line in res.stdout.splitlines()), res.stdout


def test_gc_dry_run_changes_nothing(cli: Cli) -> None:
    (cli.home / "config.toml").write_text(
        "[file_snapshots]\nretention_max_snapshots = 1\ngc_grace_seconds = 0\nauto_gc = false\n")
    for i in range(3):
        for n in ("a.txt", "m.sh", "sub/b.txt"):
            (cli.ws / n).write_text(f"{n} version {i}\n")
        cli.ok("snapshots", "capture")
    before = store_files(cli.store_dir)
    res = cli.ok("snapshots", "gc", "--dry-run")
    assert res.stdout.startswith("would remove 2 snapshots")
    doc = cli.json("snapshots", "gc", "--dry-run")
    assert doc["dry_run"] is True and len(doc["dropped_by_retention"]) == 2
    assert store_files(cli.store_dir) == before
    assert len(cli.listed()) == 3
    # Without --dry-run the same settings do remove them.
    assert cli.ok("snapshots", "gc").stdout.startswith("removed 2 snapshots")
    assert len(cli.listed()) == 1


# ----------------------------------------------------------------------------- demo, help, usage


def test_demo_passes(cli: Cli) -> None:
    res = cli.ok("demo")
    assert "passed" in res.stdout


@pytest.mark.parametrize("argv", [[], ["snapshots"]], ids=["no-args", "snapshots"])
def test_help_without_a_command_exits_2(cli: Cli, argv: list[str]) -> None:
    res = cli.run(*argv)
    assert res.returncode == 2
    assert "usage:" in res.stdout
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("argv", [["frobnicate"], ["snapshots", "frobnicate"], ["snapshots", "restore"]],
                         ids=["top", "snapshots", "missing-arg"])
def test_unknown_subcommand_exits_2_without_traceback(cli: Cli, argv: list[str]) -> None:
    assert_one_line_error(cli.run(*argv))
