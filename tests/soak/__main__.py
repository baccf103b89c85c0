"""`python -m tests.soak run --op capture --trials 200 [--seed N]`: the soak's command line (see README.md)."""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .kills import AGENT_OPS, OPS, STORE_OPS, Soak, Trial
from .report import summarize, table

EXTRA = ("races", "hostile", "diskfull")


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run trials and print the results table")
    r.add_argument("--op", action="append", choices=[*OPS, *EXTRA, "all"],
                   help="operation(s) to soak (repeatable; default all)")
    r.add_argument("--trials", type=int, default=200, help="kill trials per operation (default 200)")
    r.add_argument("--agent-trials", type=int, help="trials for rewind and redo (default: --trials)")
    r.add_argument("--seed", type=int, default=1, help="seed of the workspace and of the faults (default 1)")
    r.add_argument("--files", type=int, default=2000, help="tracked files in the workspace (default 2000)")
    r.add_argument("--race-seconds", type=float, default=30.0, help="how long the race runs (default 30)")
    r.add_argument("--race-procs", type=int, default=4, help="concurrent codexr processes (default 4)")
    r.add_argument("--dir", type=Path, default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
                   help="parent of the scratch directory (default: /dev/shm, a tmpfs, else /tmp)")
    r.add_argument("--json", type=Path, help="write every trial's result here")
    r.add_argument("--keep", action="store_true", help="keep the scratch directory")
    r.add_argument("--fail-fast", action="store_true", help="stop an operation at its first failing trial")
    r.add_argument("--max-minutes", type=float,
                   help="start no kill trial after this many minutes (the table then says how many ran)")
    r.add_argument("--cli-checks", action="store_true",
                   help="run the recovery capture and the redo after a kill as `codexr` commands, not in-process")
    r.add_argument("--server", action="store_true",
                   help="run every command through the console script's launcher and a resident server; kills "
                        "(of the caller) at random instants only")
    t = sub.add_parser("table", help="print the results table of a --json file")
    t.add_argument("json", type=Path)
    args = p.parse_args(argv)
    if args.cmd == "table":
        doc = json.loads(args.json.read_text())
        print(table(doc["summary"]))
        return 0
    ops = [*OPS, *EXTRA] if not args.op or "all" in args.op else args.op
    return run(args, ops)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(args: argparse.Namespace, ops: list[str]) -> int:
    base = Path(tempfile.mkdtemp(prefix="codexr-soak-", dir=args.dir))
    log(f"[soak] scratch directory {base}")
    results: dict[str, list[dict[str, Any]]] = {}
    soak = Soak(base, files=args.files, seed=args.seed, log=log, cli_checks=args.cli_checks,
                server=args.server)
    started = time.time()
    def save() -> None:
        if args.json:
            args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                             "seconds": round(time.time() - started),
                                             "summary": summarize(results), "results": results}, indent=1))

    try:
        if any(op in STORE_OPS for op in ops):
            soak.build_store_fixtures()
        if any(op in AGENT_OPS for op in ops):
            soak.build_agent_fixtures()
        kill_ops = [o for o in ops if o in OPS]
        counts = {op: (args.agent_trials or args.trials) if op in AGENT_OPS else args.trials for op in kill_ops}
        rngs = {op: random.Random(f"{args.seed}-{op}") for op in kill_ops}
        for op in kill_ops:
            results[op] = []
        # round-robin, so a run stopped early still has trials of every operation
        deadline = time.time() + args.max_minutes * 60 if args.max_minutes else None
        for i in range(max(counts.values(), default=0)):
            if deadline is not None and time.time() > deadline:
                log(f"[soak] --max-minutes reached: stopped after {i} round(s) of kill trials")
                break
            for op in kill_ops:
                if i < counts[op] and not (args.fail_fast and any(t["failures"] for t in results[op])):
                    results[op].append(kill_trial(soak, op, i, rngs[op]))
                    save()
        for fx in soak.fixtures.values():
            for note in fx.notes:
                log(f"[soak] note ({fx.op}): {note}")
        if "races" in ops:
            if args.server:
                soak.start_server()
            from .races import run_races
            results["races"] = run_races(base / "races", args.files // 4, args.seed, args.race_seconds,
                                         args.race_procs, log, server_env=soak.env if args.server else None)
        if args.server:
            log(f"[soak] the resident server ran {soak.served()} commands")
        log(f"[soak] change monitors started: {soak.monitors()}")
        if "hostile" in ops:
            from .hostile import run_hostile
            results["hostile"] = run_hostile(base / "hostile", args.seed, log)
        if "diskfull" in ops:
            from .diskfull import run_diskfull
            results["diskfull"] = run_diskfull(base / "diskfull", args.seed, log)
    finally:
        soak.close()
        if not args.keep:
            import shutil
            shutil.rmtree(base, ignore_errors=True)
    save()
    summary = summarize(results)
    print(table(summary))
    return 0 if all(not row["failing_trials"] for row in summary) else 1


def kill_trial(soak: Soak, op: str, i: int, rng: random.Random) -> dict[str, Any]:
    """One kill trial, logged as one line (plus one per failing check)."""
    t: Trial = soak.trial(op, i, rng)
    status = "FAIL " + ",".join(t.failures) if t.failures else "ok"
    log(f"[soak] {op} #{i} {t.fault:<28} {'killed' if t.killed else 'finished':<8} "
        f"{'journal ' if t.journal_left else ''}{t.seconds:5.1f}s {status}")
    for check, detail in t.failures.items():
        log(f"[soak]     {check}: {detail[:600]}")
    return t.as_json()


if __name__ == "__main__":
    sys.exit(main())
