"""Races: N codexr processes capturing, restoring and collecting garbage (grace 0) on one CODEX_HOME, plus a
long-lived in-process store capturing every second, for a bounded time; then every snapshot is restored."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import blake3

from . import trees
from .kills import GC_ARGS
from .runner import REPO, Codexr, Run

#: The session's store: open once, watched, capturing every second like `Session` does between turns.
SESSION_CHILD = r"""
import json, sys, time
from snapshot_store import Store
store_dir, ws, out, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
store = Store.open(store_dir, protected=[store_dir])
store.capturer.watch(ws)
end = time.time() + seconds
with open(out, "a") as fh:
    while time.time() < end:
        try:
            res = store.at(ws).capture(label="session")
            fh.write(json.dumps({"ok": res.id}) + "\n")
        except Exception as exc:
            fh.write(json.dumps({"error": f"{type(exc).__name__}: {exc}"}) + "\n")
        fh.flush()
        time.sleep(1.0)
store.close()
"""

MAX_CHECKED = 60


def run_races(base: Path, files: int, seed: int, seconds: float, procs: int,
              log: Callable[[str], None], server_env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Run the race and check every snapshot it left; one result entry per check.

    With `server_env` (--server) every command goes through the launcher and a resident server: the racing
    commands are workers forked from one process."""
    rng = random.Random(f"{seed}-races")
    lay = trees.Layout(base)
    base.mkdir(parents=True)
    lay.home.mkdir()
    lay.scratch.mkdir()
    trees.build_initial(lay.ws, lay.outside, rng, files)
    outside_before = trees.tree_hash(lay.outside)
    cx = Codexr(lay.home, lay.ws, dict(server_env or {}))
    first = cx.run("snapshots", "capture")
    if first.rc != 0:
        raise RuntimeError(first.show())
    runs: list[tuple[str, Run]] = []
    lock = threading.Lock()
    deadline = time.time() + seconds

    def worker(k: int) -> None:
        wr = random.Random(f"{seed}-race-{k}")
        while time.time() < deadline:
            what = ("capture", "restore", "gc", "shell")[k % 4] if k < 4 else wr.choice(["capture", "restore", "gc"])
            if what == "shell":
                with lock:
                    tag = f"r{k}x{len(runs)}"
                with contextlib.suppress(OSError):  # a concurrent restore moved things: a shell would see the same
                    trees.shell_changes(lay.ws, wr, tag, fraction=0.01)
                what = "capture"
            if what == "capture":
                r = cx.run("snapshots", "capture")
            elif what == "gc":
                r = cx.run(*GC_ARGS, "snapshots", "gc")
            else:
                listed = cx.run("snapshots", "list", "--json")
                ids = [d["id"] for d in json.loads(listed.stdout)] if listed.rc == 0 else []
                if not ids:
                    continue
                r = cx.run("snapshots", "restore", wr.choice(ids), "--yes")
            with lock:
                runs.append((what, r))

    session_log = base / "session.jsonl"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen([sys.executable, "-c", SESSION_CHILD, str(lay.home / "file_snapshots"), str(lay.ws),
                              str(session_log), str(seconds)], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(procs)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(seconds + 180)
    try:
        _out, child_err = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        _out, child_err = child.communicate()

    out: list[dict[str, Any]] = []
    cmd_fail: dict[str, str] = {}
    for what, r in runs:
        # Exit 3 (README "Exit codes"): a restore that could not make every change it planned, here a path a
        # racing writer changed after the safety capture; each such path is named on a `left` line.
        partial = what == "restore" and r.rc == 3 and "\nleft " in "\n" + r.stdout
        if "Traceback" in r.stderr or (r.rc not in (0, 2) and not partial):
            cmd_fail.setdefault(f"race_{what}_crashed", r.show())
        elif r.rc == 2 and len(r.stderr.strip().splitlines()) != 1:
            cmd_fail.setdefault(f"race_{what}_unclear_error", r.show())
    session_errors = []
    if session_log.exists():
        session_errors = [json.loads(line)["error"] for line in session_log.read_text().splitlines()
                          if "error" in json.loads(line)]
    if child.returncode != 0 or session_errors:
        cmd_fail["session_store_failed"] = f"exit {child.returncode}; {session_errors[:3]}; {child_err[-800:]}"
    stats = {w: sum(1 for x, _ in runs if x == w) for w in ("capture", "restore", "gc")}
    ok = {w: sum(1 for x, r in runs if x == w and r.rc == 0) for w in ("capture", "restore", "gc")}
    log(f"[soak] races: {len(runs)} commands in {seconds:.0f}s ({stats}, exit 0: {ok}), "
        f"session captures {sum(1 for _ in session_log.open()) if session_log.exists() else 0}")
    out.append({"op": "races", "faults": len(runs), "killed": False, "failures": cmd_fail, "files_lost": 0,
                "wrote_outside": False, "check": "commands"})

    ver = cx.run("snapshots", "verify", "--full")
    listed = cx.run("snapshots", "list", "--json")
    snaps = json.loads(listed.stdout) if listed.rc == 0 else []
    safety = [d for d in snaps if d["kind"] == "safety"]
    others = [d for d in snaps if d["kind"] != "safety"]
    chosen = safety[-MAX_CHECKED // 2:] + others[-(MAX_CHECKED - min(len(safety), MAX_CHECKED // 2)):]
    out.append({"op": "races", "killed": False, "files_lost": 0, "wrote_outside": False, "check": "verify",
                "failures": {} if ver.rc == 0 else {"verify_full": ver.show()}})
    into = "--into" in cx.run("snapshots", "restore", "--help").stdout
    for n, d in enumerate(chosen):
        res = {"op": "races", "killed": False, "files_lost": 0, "wrote_outside": False, "failures": {},
               "check": f"{d['kind']} {d['id'][:12]}"}
        dest = lay.scratch / f"s{n}"
        dest.mkdir()
        flag = ("--into", str(dest)) if into else ("-C", str(dest))
        r = cx.run("snapshots", "restore", d["id"], *flag, "--yes")
        shown = cx.run("snapshots", "show", d["id"], "--json")
        if r.rc != 0 or shown.rc != 0:
            res["failures"]["listed_restores"] = f"{r.show()}\n{shown.show()}"
        else:
            bad = _compare(dest, shown.json()["entries"])
            if bad:
                res["files_lost"] = len(bad)
                key = "safety_undo_exact" if d["kind"] == "safety" else "listed_restores_exactly"
                res["failures"][key] = f"{d['id'][:12]}: " + "; ".join(bad[:6])
        out.append(res)
    if trees.tree_hash(lay.outside) != outside_before:
        out[0]["wrote_outside"] = True
        out[0]["failures"]["wrote_outside"] = "the sentinel directory changed"
    log(f"[soak] races: checked {len(chosen)} of {len(snaps)} listed snapshots ({len(safety)} safety)")
    return out


def _compare(dest: Path, entries: list[dict[str, Any]]) -> list[str]:
    """Paths of a snapshot whose restored copy differs from the manifest (content hash, size, mode, target)."""
    bad = []
    for e in entries:
        p = dest / e["path"]
        try:
            st = os.lstat(p)
        except OSError:
            if e["kind"] in ("f", "l"):
                bad.append(f"{e['path']}: missing")
            continue
        if e["kind"] == "f":
            data = p.read_bytes() if not os.path.islink(p) else b""
            got = (os.path.islink(p), st.st_mode & 0o7777, len(data), blake3.blake3(data).hexdigest())
            want = (False, e["mode"], e["size"], e["blob"])
            if got != want:
                bad.append(f"{e['path']}: {got} != {want}")
        elif e["kind"] == "l" and (not os.path.islink(p) or os.readlink(p) != e["target"]):
            bad.append(f"{e['path']}: not a symlink to {e['target']}")
    return bad
