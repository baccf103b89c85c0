#!/usr/bin/env python3
"""How fast `codexr history` is on years of sessions, against `grep -rli` over the same rollouts.

Run from the repository root:  .venv/bin/python bench/bench_history.py [--sessions 1000] [--rounds 3] [--keep]

It generates a CODEX_HOME of synthetic rollouts shaped like the ones codex 0.163.0 writes (session_meta
with ~20 KB of instructions, developer and environment messages, world_state, per turn task_started,
turn_context, user/agent messages as response_item and item_completed records, exec_command calls with
their CommandExecution items and outputs — a few of MBs —, apply_patch FileChange items, token counts),
~200 MB for 1,000 sessions over 40 workspaces, 5 % forks (paginated `history_base`) and 5 % archived.
A needle phrase is planted in ~1 % of the sessions. Then, in the same process and interleaved rounds:

- grep:     `grep -rli NEEDLE sessions archived_sessions`          (the baseline)
- cold:     `codexr history search NEEDLE --archived -n 0` with no index (the scan path)
- index:    building the index (`HistoryStore.refresh()` from nothing), once
- repeat:   the same search with the index current
- list:     `codexr history list --all` (the issue's command: text, the 20 newest) with the index current,
            and `codexr history list --all --archived -n 0 --json` (every session, ~0.8 MB of JSON)

With `--baseline DIR` (another checkout, e.g. `git archive main | tar -x -C DIR`), the same commands of that
code run in the same interleaved rounds against a hard-linked copy of the rollouts with its own index (index
formats may differ): before/after in one run, on a machine whose load swings wall times ~2x between runs.

Whole commands are timed (python start-up included), medians reported with ratios and PASS/MISS
against the targets: cold <= 2x grep, repeat <= 0.2 s, list <= 0.3 s; and the index's size. The commands run
as an installed codexr does: with its bytecode cached (PYTHONDONTWRITEBYTECODE is dropped and every command
runs once before the timed rounds), and CODEX_HOME holds a small Codex `config.toml`, as a user's does.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from app.history.index import index_path  # noqa: E402
from app.history.render import session_json  # noqa: E402
from app.history.search import Matcher  # noqa: E402
from app.history.store import Filter, HistoryStore  # noqa: E402

NEEDLE = "connection pool exhausted"
_VOCABULARY = ("the of and to in is that for it with as was on be by this are from or at an but not have all can "
               "function error test build module config retry timeout cache database query index request handler "
               "thread lock queue worker parser token stream buffer socket server client route schema migration")
WORDS = _VOCABULARY.split()


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def line(ts: str, ordinal: int, typ: str, payload: dict[str, object]) -> str:
    return json.dumps({"timestamp": ts, "ordinal": ordinal, "type": typ, "payload": payload},
                      separators=(",", ":")) + "\n"


def make_session(rng: random.Random, tid: str, cwd: str, day: int, planted: bool,
                 base: dict[str, object] | None, start_ordinal: int) -> tuple[str, list[int]]:
    """One rollout's text, and the byte offsets at which each turn starts (for forks of it)."""
    ts = f"2025-{1 + day // 28:02d}-{1 + day % 28:02d}T10:00:00.000Z"
    o = start_ordinal
    out: list[str] = []
    meta: dict[str, object] = {"session_id": tid, "id": tid, "timestamp": ts, "cwd": cwd,
                               "originator": "codex_cli_rs",
                               "cli_version": "0.163.0", "source": rng.choice(["cli", "vscode", "exec"]),
                               "model_provider": "openai", "history_mode": "paginated",
                               "base_instructions": {"text": words(rng, 3300)}}
    if base:
        meta.update({"forked_from_id": base["thread_id"], "history_base": base})
    out.append(line(ts, o, "session_meta", meta))
    o += 1
    turn_starts: list[int] = []
    size = len(out[0])
    turns = rng.randint(3, 12) if not base else rng.randint(1, 4)
    plant_at = rng.randrange(turns) if planted else -1
    for t in range(turns):
        turn_starts.append(size)
        turn = str(uuid.UUID(int=rng.getrandbits(128)))
        recs = [line(ts, 0, "event_msg", {"type": "task_started", "turn_id": turn, "started_at": 1})]
        if t == 0:
            recs.append(line(ts, 0, "response_item", {"type": "message", "role": "developer", "content": [
                {"type": "input_text", "text": words(rng, 800)}]}))
            recs.append(line(ts, 0, "world_state", {"state": words(rng, 800)}))
        recs.append(line(ts, 0, "turn_context", {"turn_id": turn, "cwd": cwd, "model": "gpt-5.5",
                                                 "approval_policy": "on-request"}))
        prompt = words(rng, rng.randint(5, 40))
        if t == plant_at:
            prompt += f" — the {NEEDLE.title()} error again"
        recs.append(line(ts, 0, "response_item", {"type": "message", "role": "user",
                                                  "content": [{"type": "input_text", "text": prompt}]}))
        recs.append(line(ts, 0, "event_msg", {"type": "item_completed", "thread_id": tid, "turn_id": turn, "item": {
            "type": "UserMessage", "id": str(uuid.uuid4()), "content": [{"type": "text", "text": prompt}]}}))
        for c in range(rng.randint(0, 3)):
            cmd = f"rg -n {rng.choice(WORDS)} src/"
            big = rng.random() < 0.004
            out_text = words(rng, 200_000 if big else rng.randint(20, 900))
            call = f"call_{t}_{c}"
            recs.append(line(ts, 0, "response_item", {"type": "function_call", "name": "exec_command",
                                                      "call_id": call, "arguments": json.dumps({"cmd": cmd})}))
            recs.append(line(ts, 0, "event_msg", {"type": "item_completed", "thread_id": tid, "turn_id": turn,
                                                  "item": {"type": "CommandExecution", "id": call,
                                                           "command": ["/bin/bash", "-lc", cmd], "status": "completed",
                                                           "aggregated_output": out_text, "exit_code": 0}}))
            recs.append(line(ts, 0, "response_item", {"type": "function_call_output", "call_id": call,
                                                      "output": out_text[:4000]}))
            recs.append(line(ts, 0, "event_msg", {"type": "token_count", "info": {"total": rng.randint(1, 10**6)},
                                                  "rate_limits": words(rng, 30)}))
            recs.append(line(ts, 0, "token_usage_record", {"turn_id": turn, "usage": words(rng, 40)}))
        if rng.random() < 0.4:
            path = f"{cwd}/src/{rng.choice(WORDS)}.py"
            recs.append(line(ts, 0, "event_msg", {"type": "item_completed", "thread_id": tid, "turn_id": turn,
                                                  "item": {"type": "FileChange", "id": f"p{t}", "status": "completed",
                                                           "changes": {path: {"type": "add",
                                                                              "content": words(rng, 150)}}}}))
        answer = words(rng, rng.randint(30, 300))
        recs.append(line(ts, 0, "event_msg", {"type": "item_completed", "thread_id": tid, "turn_id": turn, "item": {
            "type": "AgentMessage", "id": f"msg_{t}", "content": [{"type": "Text", "text": answer}]}}))
        recs.append(line(ts, 0, "response_item", {"type": "message", "role": "assistant",
                                                  "content": [{"type": "output_text", "text": answer}]}))
        recs.append(line(ts, 0, "event_msg", {"type": "task_complete", "turn_id": turn, "last_agent_message": answer}))
        for r in recs:
            d = json.loads(r)
            d["ordinal"] = o
            o += 1
            s = json.dumps(d, separators=(",", ":")) + "\n"
            out.append(s)
            size += len(s.encode())
    return "".join(out), turn_starts


def generate(home: Path, n: int, seed: int) -> int:
    rng = random.Random(seed)
    made: list[tuple[str, list[int], int]] = []  # (id, turn offsets, last ordinal)
    total = 0
    for i in range(n):
        day = i * 300 // n
        tid = str(uuid.UUID(int=rng.getrandbits(128)))
        cwd = f"/home/dev/project-{rng.randrange(40):02d}"
        base = None
        if made and rng.random() < 0.05:
            pid, offsets, _ = rng.choice(made[-50:])
            cut = rng.randrange(len(offsets))
            base = {"thread_id": pid, "end_ordinal_exclusive": 0, "end_byte_offset": offsets[cut]}
        text, offsets = make_session(rng, tid, cwd, day, rng.random() < 0.01, base, 0)
        archived = rng.random() < 0.05
        date = f"2025-{1 + day // 28:02d}-{1 + day % 28:02d}"
        name = f"rollout-{date}T10-00-{i % 60:02d}-{tid}.jsonl"
        d = home / "archived_sessions" if archived else home / "sessions" / date[:4] / date[5:7] / date[8:10]
        d.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text)
        total += len(text.encode())
        made.append((tid, offsets, 0))
    return total


CPU: dict[str, list[float]] = {}  # command name -> CPU seconds (user + system) of each timed run


def timed(cmd: list[str], env: dict[str, str], label: str = "", cwd: Path = ROOT) -> tuple[float, str]:
    """Wall seconds and stdout of one run; its CPU time goes to CPU (less swayed by a busy machine)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=cwd)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{cmd} failed: {r.stderr}")
    CPU.setdefault(label, []).append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return dt, r.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=9)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--baseline", type=Path, metavar="DIR", help="also time the code checked out in DIR")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-history-"))
    home = base / "home"
    try:
        t = time.perf_counter()
        total = generate(home, args.sessions, args.seed)
        print(f"generated {args.sessions} sessions, {total / 1e6:.0f} MB in {time.perf_counter() - t:.1f} s",
              file=sys.stderr)
        # Codex's own config, as every user has (codexr reads it at start-up: parsing TOML is part of the cost).
        (home / "config.toml").write_text('model = "gpt-5.5"\n\n[projects."/home/dev/project-00"]\n'
                                          'trust_level = "trusted"\n')
        env = {**os.environ, "CODEX_HOME": str(home), "CODEXR_HISTORY_BACKGROUND": "0"}
        # Without cached bytecode every changed module is compiled on every run (~80 ms for the history path
        # when this checkout's __pycache__ is stale); pip compiles an installed codexr once, at install time.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        py = sys.executable
        grep = ["grep", "-rli", NEEDLE, str(home / "sessions"), str(home / "archived_sessions")]
        search = [py, "-m", "app.cli", "history", "search", NEEDLE, "--archived", "-n", "0", "--json"]
        listing = [py, "-m", "app.cli", "history", "list", "--all", "--archived", "-n", "0", "--json"]
        list_all = [py, "-m", "app.cli", "history", "list", "--all"]
        idx = index_path(home)
        old: dict[str, list[float]] = {}  # --baseline: label -> wall times of the baseline's commands
        if args.baseline:
            home_b = base / "home-baseline"
            for d in ("sessions", "archived_sessions"):
                shutil.copytree(home / d, home_b / d, copy_function=os.link)
            shutil.copy(home / "config.toml", home_b / "config.toml")
            env_b = {**env, "CODEX_HOME": str(home_b)}
            idx_b = index_path(home_b)

        def baseline(cmd: list[str], label: str) -> None:
            if args.baseline:
                cmd = [str(home_b) if x == str(home) else x for x in cmd]
                old.setdefault(label, []).append(timed(cmd, env_b, label and f"{label} (baseline)", args.baseline)[0])

        for _ in range(2):  # warm the page cache, as a user's rollouts would be after a day's work
            timed(grep, env)
        timed(search, env)  # writes the bytecode caches (an untimed cold search)
        baseline(search, "")
        g, c = [], []
        grep_files = cold_hits = 0
        for _ in range(args.rounds):
            shutil.rmtree(idx.parent, ignore_errors=True)
            dt, out = timed(search, env, "cold search")
            c.append(dt)
            cold_hits = len(json.loads(out)["results"])
            dt, out = timed(grep, env, "grep")
            g.append(dt)
            grep_files = len(out.split())
            if args.baseline:
                shutil.rmtree(idx_b.parent, ignore_errors=True)
                baseline(search, "cold search")
        shutil.rmtree(idx.parent, ignore_errors=True)
        if args.baseline:
            shutil.rmtree(idx_b.parent, ignore_errors=True)
            subprocess.run([py, "-m", "app.history", "refresh", str(home_b)], env=env_b, cwd=args.baseline,
                           check=True)
        t = time.perf_counter()
        store = HistoryStore(home, background=False)
        store.refresh()
        store.close()
        build = time.perf_counter() - t
        r, lst, lst_all = [], [], []
        warm_hits = 0
        for _ in range(args.rounds):
            dt, out = timed(search, env, "repeated search")
            r.append(dt)
            warm_hits = len(json.loads(out)["results"])
            dt, out = timed(listing, env, "list --all -n 0 --json")
            lst.append(dt)
            listed = json.loads(out)["total"]
            dt, out = timed(list_all, env, "list --all")
            lst_all.append(dt)
            baseline(search, "repeated search")
            baseline(listing, "list --all -n 0 --json")
            baseline(list_all, "list --all")
        # The same operations in this process: what the history code costs without codexr's start-up.
        ip_cold, ip_rep, ip_list = [], [], []
        for _ in range(args.rounds):
            t = time.perf_counter()
            st = HistoryStore(home, use_index=False, background=False)
            st.search(Matcher(NEEDLE), Filter(archived=True), 0)
            ip_cold.append(time.perf_counter() - t)
            t = time.perf_counter()
            st = HistoryStore(home, background=False)
            st.search(Matcher(NEEDLE), Filter(archived=True), 0)
            st.close()
            ip_rep.append(time.perf_counter() - t)
            t = time.perf_counter()
            st = HistoryStore(home, background=False)
            cat = st.catalog()
            json.dumps([session_json(x, cat) for x in cat.sessions.values()])
            st.close()
            ip_list.append(time.perf_counter() - t)
        startup = statistics.median(timed([py, "-c", "import app.cli"], env, "import app.cli")[0]
                                    for _ in range(args.rounds))
        bare = statistics.median(timed([py, "-c", "pass"], env, "python -c pass")[0] for _ in range(args.rounds))
        size = sum(p.stat().st_size for p in idx.parent.iterdir() if p.is_file())
        gm, cm, rm, lm, lam = (statistics.median(x) for x in (g, c, r, lst, lst_all))

        def verdict(ok: bool) -> str:
            return "PASS" if ok else "MISS"

        print(f"rollouts: {args.sessions} sessions, {total / 1e6:.0f} MB; needle in {grep_files} files (grep), "
              f"{cold_hits} sessions (cold search), {warm_hits} (indexed search)")
        print(f"grep -rli            median {gm:.3f} s  (runs {', '.join(f'{x:.3f}' for x in g)})")
        print(f"cold search (scan)   median {cm:.3f} s  = {cm / gm:.2f}x grep   target <= 2x   {verdict(cm <= 2 * gm)}")
        print(f"index build          {build:.2f} s (once; a cold search starts it in the background)")
        print(f"repeated search      median {rm:.3f} s  target <= 0.2 s   {verdict(rm <= 0.2)}")
        print(f"list --all           median {lam:.3f} s  target <= 0.3 s   {verdict(lam <= 0.3)}")
        print(f"list --all --archived -n 0 --json ({listed})  median {lm:.3f} s  {verdict(lm <= 0.3)}")
        print("CPU (user+system) medians: "
              + "; ".join(f"{k} {statistics.median(v):.3f} s" for k, v in CPU.items() if k))
        print(f"index size           {size / 1e6:.1f} MB ({100 * size / total:.0f} % of the rollouts)")
        if args.baseline:
            gm_old = statistics.median(g)
            print(f"baseline ({args.baseline}), same rounds: " + "; ".join(
                f"{k} {statistics.median(v):.3f} s" + (f" = {statistics.median(v) / gm_old:.2f}x grep"
                                                       if k == "cold search" else "")
                for k, v in old.items() if k))
        ic, ir, il = (statistics.median(x) for x in (ip_cold, ip_rep, ip_list))
        print(f"python start-up      median {bare:.3f} s (`python -c pass`, this interpreter and its site-packages)")
        print(f"codexr start-up      median {startup:.3f} s (`import app.cli`, paid by every codexr command)")
        print(f"in-process: cold search {ic:.3f} s = {ic / gm:.2f}x grep {verdict(ic <= 2 * gm)}; repeated search "
              f"{ir:.3f} s {verdict(ir <= 0.2)}; list --all {il:.3f} s {verdict(il <= 0.3)}")
    finally:
        if args.keep:
            print(f"kept {base}", file=sys.stderr)
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
