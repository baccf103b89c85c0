"""gc never turns damage into loss, frees what retention drops, and survives a kill (issue 6, A.3 and D.17).

Every command here is the real `codexr` in a subprocess; kills are real SIGKILLs of that process.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import pytest
from fs_helpers import store_files, tree

from snapshot_store import CorruptStore, RetentionPolicy, ScopeSettings, Store
from snapshot_store.maint.gc import gc

REPO = Path(__file__).parents[1]
SCOPE = ScopeSettings(residue_max_files=1000)
GRACE0 = ("-c", "file_snapshots.gc_grace_seconds=0", "-c", "file_snapshots.auto_gc=false")


def keep_all(**kw: float) -> RetentionPolicy:
    """No retention rule unless named; grace 0."""
    base: dict[str, float] = {"max_age_days": 0, "max_snapshots_per_workspace": 0, "max_store_bytes": 0,
                              "grace_seconds": 0, "keep_latest": 1}
    base.update(kw)
    return RetentionPolicy(**base)  # type: ignore[arg-type]


def options_first(args: tuple[str, ...] | list[str]) -> list[str]:
    """`-c key=value` overrides go before the subcommand."""
    opts: list[str] = []
    rest: list[str] = []
    it = iter(args)
    for a in it:
        if a == "-c":
            opts += [a, next(it)]
        else:
            rest.append(a)
    return opts + rest


@dataclass
class Cli:
    ws: Path
    home: Path

    @property
    def store_dir(self) -> Path:
        return self.home / "file_snapshots"

    def env(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(REPO), "CODEX_HOME": str(self.home)}

    def run(self, *args: str, prefix: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
        """`codexr ARGS` in the workspace (under `prefix`, e.g. `unshare -m sh -c …`)."""
        return subprocess.run([*prefix, sys.executable, "-m", "app.cli", *options_first(args)], cwd=self.ws,
                              env=self.env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    def ok(self, *args: str) -> subprocess.CompletedProcess[str]:
        res = self.run(*args)
        assert res.returncode == 0, (args, res.stdout, res.stderr)
        assert "Traceback" not in res.stderr
        return res

    def json(self, *args: str) -> Any:
        """The command's `--json` document."""
        return json.loads(self.ok(*args, "--json").stdout)

    def refused(self, *args: str) -> str:
        """The command exits 2 with one `codexr: error:` line; returns that line."""
        res = self.run(*args)
        assert res.returncode == 2, (args, res.returncode, res.stdout, res.stderr)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("codexr: error: "), res.stderr
        return lines[0]

    def listed(self) -> list[str]:
        return [i["id"] for i in json.loads(self.ok("snapshots", "list", "--json").stdout)]

    def restores_exactly(self, snap: str, expected: dict[str, Any]) -> None:
        self.ok("snapshots", "restore", snap, "--yes")
        assert tree(self.ws) == expected


@pytest.fixture
def cli(tmp_path: Path, ws: Path) -> Iterator[Cli]:
    home = tmp_path / "home"
    home.mkdir()
    yield Cli(ws, home)


def capture(cli: Cli) -> str:
    with Store.open(cli.store_dir) as store:
        return store.at(cli.ws).capture(scope=SCOPE).id


def packs_of(store_dir: Path) -> set[str]:
    return {p.stem for p in (store_dir / "packs").glob("*.pack")}


def three_packs(cli: Cli) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Three captures, each replacing f<i>.bin (new content in its own pack): {snapshot: tree}, packs."""
    trees: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    for i in range(3):
        if i:
            (cli.ws / f"f{i - 1}.bin").unlink()
        (cli.ws / f"f{i}.bin").write_bytes(os.urandom(3000))
        (cli.ws / "common.txt").write_text(f"version {i}\n" * 50)
        before = packs_of(cli.store_dir) if cli.store_dir.exists() else set()
        trees[capture(cli)] = tree(cli.ws)
        [new] = packs_of(cli.store_dir) - before
        order.append(new)
    return trees, order


def flip(path: Path, pos: int, mask: int = 0x01) -> None:
    data = bytearray(path.read_bytes())
    data[pos] ^= mask
    path.write_bytes(bytes(data))


def without_volatile(files: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in files.items() if not k.startswith("locks/") and k != "gc.last"}


# ----------------------------------------------------------------------------- A.3: damaged indexes


@pytest.mark.parametrize("damage", ["flip", "delete", "truncate"])
def test_gc_rebuilds_a_damaged_pack_index_and_never_deletes_the_pack(cli: Cli, damage: str) -> None:
    trees, order = three_packs(cli)
    idx = cli.store_dir / "packs" / f"{order[0]}.idx"
    if damage == "flip":
        flip(idx, 40)
    elif damage == "delete":
        idx.unlink()
    else:
        idx.write_bytes(idx.read_bytes()[:-1])
    past = time.time() - 7200
    for f in (cli.store_dir / "packs").iterdir():
        os.utime(f, (past, past))

    res = cli.ok("snapshots", "gc", *GRACE0)
    assert packs_of(cli.store_dir) == set(order)
    assert cli.listed() == list(trees)
    for snap, expected in trees.items():
        cli.restores_exactly(snap, expected)
    assert f"rebuilt the index of pack {order[0]}" in res.stdout, res.stdout
    assert cli.ok("snapshots", "verify", "--full").stdout.splitlines()[-1].startswith("ok:")


def test_gc_refuses_while_an_unindexed_pack_cannot_be_rebuilt(cli: Cli) -> None:
    _trees, order = three_packs(cli)
    pack = cli.store_dir / "packs" / f"{order[0]}.pack"
    (cli.store_dir / "packs" / f"{order[0]}.idx").unlink()
    flip(pack, pack.stat().st_size - 10)  # inside the last record's data: that blob no longer verifies
    past = time.time() - 7200
    os.utime(pack, (past, past))
    before = without_volatile(store_files(cli.store_dir))

    res = cli.run("snapshots", "gc", *GRACE0)
    assert without_volatile(store_files(cli.store_dir)) == before
    line = cli.refused("snapshots", "gc", *GRACE0)
    assert "nothing was deleted" in line and order[0] in line and "verify --repair" in line

    # verify names the pack; --repair indexes the records that verify and says what it left out.
    res = cli.run("snapshots", "verify")
    assert res.returncode == 1 and order[0] in res.stdout
    res = cli.run("snapshots", "verify", "--repair")
    assert f"repaired: rebuilt the index of pack {order[0]}" in res.stdout, res.stdout
    assert "damaged region" in res.stdout


def test_verify_repair_rebuilds_a_lost_index(cli: Cli) -> None:
    trees, order = three_packs(cli)
    (cli.store_dir / "packs" / f"{order[1]}.idx").unlink()
    res = cli.run("snapshots", "verify")
    assert res.returncode == 1, res.stdout  # the snapshots that need its blobs are incomplete now
    res = cli.ok("snapshots", "verify", "--repair")
    assert f"repaired: rebuilt the index of pack {order[1]} from its" in res.stdout
    assert cli.ok("snapshots", "verify", "--full").stdout.splitlines()[-1].startswith("ok:")
    snap = list(trees)[1]
    cli.restores_exactly(snap, trees[snap])


# ----------------------------------------------------------------------------- A.3: damaged refs, pins, chains


def other_hex(c: str) -> str:
    return "0" if c != "0" else "1"


def test_a_ref_line_naming_a_missing_snapshot_fails_verify_and_stops_gc(cli: Cli) -> None:
    trees, _order = three_packs(cli)
    newest = list(trees)[-1]
    [ref] = (cli.store_dir / "refs" / "workspaces").glob("*.jsonl")
    text = ref.read_text()
    at = text.rindex(newest) + 10
    ref.write_text(text[:at] + other_hex(text[at]) + text[at + 1:])
    before = without_volatile(store_files(cli.store_dir))

    res = cli.run("snapshots", "verify", "--full")
    assert res.returncode == 1, res.stdout
    assert any(line.startswith("damaged:") and ref.name in line and "line 3" in line
               for line in res.stdout.splitlines()), res.stdout
    gc_res = cli.run("snapshots", "gc", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1")
    assert (cli.store_dir / "snapshots" / newest[:2] / newest).exists()
    assert without_volatile(store_files(cli.store_dir)) == before
    line = cli.refused("snapshots", "gc", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1")
    assert ref.name in line and gc_res.stderr.strip() == line


def test_a_damaged_member_of_a_kept_chain_stops_gc(ws: Path, tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    for n in range(6):
        (ws / f"f{n}.txt").write_text(f"file {n}\n" * 20)
    with Store.open(store_dir) as store:
        ids = []
        for i in range(3):
            (ws / "f0.txt").write_text(f"small change {i}\n")
            ids.append(store.at(ws).capture(scope=SCOPE).id)
        assert store.record(ids[2]).parent == ids[1] and store.record(ids[1]).parent == ids[0]
        newest_tree = tree(ws)
    # Only the newest is listed; the older two are its delta bases.
    [ref] = (store_dir / "refs" / "workspaces").glob("*.jsonl")
    ref.write_text(ref.read_text().splitlines()[-1] + "\n")
    middle = store_dir / "snapshots" / ids[1][:2] / ids[1]
    good = middle.read_bytes()
    flip(middle, len(good) // 2)
    with Store.open(store_dir) as store, pytest.raises(CorruptStore, match=ids[1]):
        gc(store, keep_all())
    assert (store_dir / "snapshots" / ids[0][:2] / ids[0]).exists()
    middle.write_bytes(good)  # the damage was repairable (e.g. from a backup): nothing else was lost
    with Store.open(store_dir) as store:
        gc(store, keep_all())
        for p in ws.iterdir():
            p.unlink()
        store.at(ws).restore(ids[2], scope=SCOPE)
    assert tree(ws) == newest_tree


def pin(store_dir: Path, snap: str) -> Path:
    d = store_dir / "refs" / "threads"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "thread-0001.json"
    path.write_text(json.dumps({"version": 1, "thread_id": "thread-0001",
                                "turns": [{"turn_id": "t1", "pre": snap, "post": None}]}, indent=1))
    return path


@pytest.mark.parametrize("damage", ["id digit", "json", "newer version"])
def test_a_damaged_pin_file_stops_gc(cli: Cli, damage: str) -> None:
    """A pin gc cannot read — or one a newer codexr wrote, which may pin in ways this one cannot see — stops gc."""
    trees, _order = three_packs(cli)
    first = next(iter(trees))
    path = pin(cli.store_dir, first)
    text = path.read_text()
    if damage == "id digit":
        at = text.index(first) + 5
        path.write_text(text[:at] + other_hex(text[at]) + text[at + 1:])
    elif damage == "newer version":
        path.write_text(text.replace('"version": 1', '"version": 2', 1))
    else:
        path.write_text(text.replace("}", "", 1))
    gc_res = cli.run("snapshots", "gc", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1")
    assert (cli.store_dir / "snapshots" / first[:2] / first).exists()
    line = cli.refused("snapshots", "gc", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1")
    assert "refs/threads/thread-0001.json" in line and gc_res.stderr.strip() == line
    res = cli.run("snapshots", "verify")
    assert res.returncode == 1 and "refs/threads/thread-0001.json" in res.stdout


# ----------------------------------------------------------------------------- D.16: an interrupted gc

KILL_AT_UNLINK = textwrap.dedent("""
    import os, pathlib, signal, sys
    target = int(sys.argv[1])
    calls = 0
    real = pathlib.Path.unlink
    def unlink(self, missing_ok=False):
        global calls
        if self.suffix == ".pack":
            calls += 1
            if calls == target:
                os.kill(os.getpid(), signal.SIGKILL)  # a real kill: no cleanup handler runs
        return real(self, missing_ok)
    pathlib.Path.unlink = unlink
    sys.argv = ["codexr", *sys.argv[2:]]
    from app.cli import main
    sys.exit(main())
""")


def test_a_killed_gc_is_reported_as_pending_and_finished_by_the_next(cli: Cli) -> None:
    trees, _order = three_packs(cli)
    newest = list(trees)[-1]
    args = ["snapshots", "gc", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1"]
    killed = subprocess.run([sys.executable, "-c", KILL_AT_UNLINK, "2", *options_first(args)], cwd=cli.ws,
                            env=cli.env(), capture_output=True, text=True, timeout=120)
    assert killed.returncode == -9, (killed.stdout, killed.stderr)
    # The first dead pack lost its index and pack; the second only its index.
    assert (cli.store_dir / "gc.pending").exists()

    res = cli.ok("snapshots", "verify", "--full")
    assert "warning: an interrupted gc is pending" in res.stdout, res.stdout
    assert "damaged" not in res.stdout and res.stdout.splitlines()[-1].startswith("ok:")

    res = cli.ok("snapshots", "gc", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1")
    assert "finished an interrupted gc" in res.stdout, res.stdout
    assert not (cli.store_dir / "gc.pending").exists()
    res = cli.ok("snapshots", "verify", "--full")
    assert res.stdout.splitlines() == [res.stdout.splitlines()[-1]] and res.stdout.startswith("ok:"), res.stdout
    assert cli.listed() == [newest]
    cli.restores_exactly(newest, trees[newest])


# ----------------------------------------------------------------------------- D.17: retention frees space


def data_bin_history(cli: Cli, n: int = 3) -> list[str]:
    """The issue's repro: a workspace whose 300 kB incompressible data.bin changes at every capture."""
    (cli.ws / "notes.txt").write_text("a small file that never changes\n")
    blobs = []
    for _ in range(n):
        data = os.urandom(300_000)
        (cli.ws / "data.bin").write_bytes(data)
        cli.ok("snapshots", "capture", "-c", "file_snapshots.auto_gc=false")
        blobs.append(blake3.blake3(data).hexdigest())
    return blobs


def indexed_blobs(store_dir: Path) -> set[str]:
    with Store.open(store_dir) as store:
        return {b.hex() for b in store.blobs.locations}


def test_retention_frees_what_only_dropped_snapshots_used(cli: Cli) -> None:
    blobs = data_bin_history(cli)
    res = cli.ok("snapshots", "gc", "--json", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1")
    doc = json.loads(res.stdout)
    assert len(doc["dropped_by_retention"]) == 2
    assert doc["bytes_after"] < doc["bytes_before"] - 550_000, doc
    assert doc["freed_by_retention"] >= 600_000, doc
    assert not set(blobs[:2]) & indexed_blobs(cli.store_dir)  # the packs no longer hold old versions
    pack_bytes = sum(p.stat().st_size for p in (cli.store_dir / "packs").glob("*.pack"))
    assert pack_bytes < 320_000
    assert cli.ok("snapshots", "verify", "--full").stdout.startswith("ok:")
    expected = tree(cli.ws)
    (cli.ws / "data.bin").write_bytes(b"changed")
    cli.restores_exactly(cli.listed()[0], expected)


def test_text_output_says_what_retention_freed(cli: Cli) -> None:
    data_bin_history(cli)
    res = cli.ok("snapshots", "gc", *GRACE0, "-c", "file_snapshots.retention_max_snapshots=1")
    freed = re.search(r"retention freed (\d+\.\d) KiB", res.stdout)
    assert freed is not None and float(freed.group(1)) > 580, res.stdout


def test_a_size_cap_gets_the_store_under_it(cli: Cli) -> None:
    data_bin_history(cli)
    doc = json.loads(cli.ok("snapshots", "gc", "--json", *GRACE0,
                            "-c", "file_snapshots.max_store_bytes=700000").stdout)
    assert len(doc["dropped_by_retention"]) == 1, doc
    assert doc["bytes_after"] <= 700_000 and doc["over_cap_bytes"] == 0, doc
    assert len(cli.listed()) == 2


def test_a_size_cap_below_the_newest_snapshot_says_it_cannot_be_met(cli: Cli) -> None:
    data_bin_history(cli)
    res = cli.ok("snapshots", "gc", *GRACE0, "-c", "file_snapshots.max_store_bytes=100000")
    assert "over max_store_bytes" in res.stderr, res.stderr
    assert len(cli.listed()) == 1
    doc = json.loads(cli.ok("snapshots", "gc", "--json", "--dry-run", *GRACE0,
                            "-c", "file_snapshots.max_store_bytes=100000").stdout)
    assert doc["dropped_by_retention"] == [] and 200_000 < doc["over_cap_bytes"] < 300_000, doc
    assert doc["bytes_before"] < 320_000, doc


def test_a_size_cap_never_drops_a_snapshot_that_frees_nothing(cli: Cli) -> None:
    """Captures of an unchanged workspace are delta bases of the newest: dropping them frees nothing."""
    (cli.ws / "data.bin").write_bytes(os.urandom(300_000))
    for _ in range(3):
        cli.ok("snapshots", "capture", "-c", "file_snapshots.auto_gc=false")
    res = cli.ok("snapshots", "gc", *GRACE0, "-c", "file_snapshots.max_store_bytes=1000")
    assert len(cli.listed()) == 3
    assert "over max_store_bytes" in res.stderr, res.stderr


# ----------------------------------------------------------------------------- concurrency: real processes

PAUSED_RESTORE = textwrap.dedent("""
    import json, os, sys, time
    from pathlib import Path
    from snapshot_store import ScopeSettings, Store
    store_dir, ws, snap, ready, go = sys.argv[1:6]
    def confirm(plan):
        Path(ready).write_text("paused")
        deadline = time.monotonic() + 60
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                sys.exit(3)
            time.sleep(0.01)
        return True
    with Store.open(store_dir) as store:
        res = store.at(ws).restore(snap, scope=ScopeSettings(residue_max_files=1000), confirm=confirm)
    print(json.dumps({"safety": res.safety_id}))
""")

TRY_GC_NOW = textwrap.dedent("""
    import sys
    from snapshot_store import RetentionPolicy, Store, StoreBusy
    from snapshot_store.maint.gc import gc
    with Store.open(sys.argv[1]) as store:
        try:
            gc(store, RetentionPolicy(max_snapshots_per_workspace=1, grace_seconds=0), wait=False)
        except StoreBusy:
            print("busy")
            sys.exit(0)
    print("ran")
""")


def blocked_on(lock: Path, pid: int) -> bool:
    """True when `pid` waits for an flock on `lock` (a `->` line of /proc/locks)."""
    inode = lock.stat().st_ino
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields and str(pid) in fields and any(f.endswith(f":{inode}") for f in fields):
            return True
    return False


def test_gc_in_another_process_waits_for_a_restore_awaiting_confirmation(cli: Cli, tmp_path: Path) -> None:
    trees, _order = three_packs(cli)
    target = next(iter(trees))
    (cli.ws / "f2.bin").write_bytes(b"edited after the last capture\n")
    before = tree(cli.ws)
    ready, go = tmp_path / "ready", tmp_path / "go"
    env = cli.env()
    restore = subprocess.Popen([sys.executable, "-c", PAUSED_RESTORE, str(cli.store_dir), str(cli.ws), target,
                                str(ready), str(go)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    waiting_gc: subprocess.Popen[str] | None = None
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert restore.poll() is None, restore.communicate()
            assert time.monotonic() < deadline, "the restore never reached its confirmation"
            time.sleep(0.01)
        # A gc that does not wait finds the store busy (the restore holds it across the confirmation) ...
        now = subprocess.run([sys.executable, "-c", TRY_GC_NOW, str(cli.store_dir)], env=env,
                             capture_output=True, text=True, timeout=60)
        assert now.stdout.strip() == "busy", (now.stdout, now.stderr)
        # ... and one that waits blocks on the store lock until the restore is done.
        waiting_gc = subprocess.Popen([sys.executable, "-m", "app.cli", *GRACE0, "-c",
                                       "file_snapshots.retention_max_snapshots=1", "snapshots", "gc", "--json"],
                                      cwd=cli.ws, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        lock = cli.store_dir / "locks" / "store.lock"
        while not blocked_on(lock, waiting_gc.pid):
            assert waiting_gc.poll() is None, waiting_gc.communicate()
            assert time.monotonic() < deadline, "gc never queued for the store lock"
            time.sleep(0.01)
        go.write_text("go")
        out, err = restore.communicate(timeout=60)
        assert restore.returncode == 0, (out, err)
        safety = json.loads(out)["safety"]
        gc_out, gc_err = waiting_gc.communicate(timeout=60)
        assert waiting_gc.returncode == 0, (gc_out, gc_err)
    finally:
        go.write_text("go")
        for proc in (restore, waiting_gc):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    assert tree(cli.ws) == trees[target]
    doc = json.loads(gc_out)
    assert target in doc["dropped_by_retention"] and len(doc["dropped_by_retention"]) == 3  # gc did run
    assert cli.listed() == [safety]
    assert cli.ok("snapshots", "verify", "--full").stdout.startswith("ok:")
    cli.restores_exactly(safety, before)  # the undo still has everything the restore replaced


def test_a_capture_whose_auto_gc_refuses_still_succeeds_and_says_why(cli: Cli) -> None:
    trees, _order = three_packs(cli)
    first = next(iter(trees))
    pin(cli.store_dir, first).write_text("{ damaged")
    (cli.ws / "new.txt").write_text("new\n")
    res = cli.run("snapshots", "capture", "-c", "file_snapshots.auto_gc=true")
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert "automatic gc skipped: gc stopped, nothing was deleted" in res.stderr
    assert len(cli.listed()) == 4
