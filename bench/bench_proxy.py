#!/usr/bin/env python3
"""What codexr's app-server proxy adds (issue 19): per-message latency, streaming throughput, turn overhead.

Run from the repository root:  .venv/bin/python bench/bench_proxy.py [--rounds N] [--files N] [--json out.json]

Two clients of the same shape speak JSON-RPC lines on stdio, one to the pinned `codex app-server` (direct), one
to `codexr app-server` (the relay in front of the same binary, recording every turn), against one local
ScriptedModel. In interleaved rounds (the order alternates):

* rtt:    the median round trip of a request the app-server answers at once (an unknown method, 300 per round):
          the relay's added latency per message is the difference of the medians (target <= 1 ms).
* stream: one turn whose answer streams ~N deltas (`item/agentMessage/delta`, 12 characters each): deltas per
          second from the first delta to `turn/completed`; proxy / direct (target >= 95 %).
* turn:   a trivial turn (one message) in a generated workspace of `--files` tracked files (default 11,000):
          `turn/start` to `turn/completed`, four turns in a row per round, so that each turn's pre-turn capture
          waits for the previous one's post-turn capture: what recording adds to a turn in a large workspace.

The report gives medians over rounds and, for each row, the median of the per-round ratios (bench/README.md,
/work/shared/BENCH_NOTES.md: single timings on these machines are +-50 %). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for _p in (str(REPO_ROOT), str(BENCH_DIR)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from workspace_gen import WorkspaceSpec, generate  # noqa: E402

from app.codex.scripted_model import Message, ScriptedModel, message, write_codex_home  # noqa: E402


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Client:
    """A JSON-RPC client over a child's stdin/stdout (one reader thread; notifications queued)."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)
        self.answers: dict[int, queue.Queue[dict[str, Any]]] = {}
        self.notes: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        self.call("initialize", {"clientInfo": {"name": "bench", "title": "bench", "version": "1"},
                                 "capabilities": {"experimentalApi": True}})
        self.send({"method": "initialized"})

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "method" in msg:
                if "id" in msg:  # a server request (approval): decline, nothing here asks for one
                    self.send({"id": msg["id"], "result": {"decision": "decline"}})
                else:
                    self.notes.put((time.perf_counter(), msg))
            elif isinstance(msg.get("id"), int) and msg["id"] in self.answers:
                self.answers[msg["id"]].put(msg)

    def send(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg).encode() + b"\n")

    def ping(self) -> float:
        """The round trip of a request the server answers at once (an unknown method: its error)."""
        self.next_id += 1
        rid = self.next_id
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        self.answers[rid] = box
        t0 = time.perf_counter()
        self.send({"id": rid, "method": "bench/ping", "params": {}})
        box.get(timeout=120)
        took = time.perf_counter() - t0
        del self.answers[rid]
        return took

    def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        box: queue.Queue[dict[str, Any]] = queue.Queue()
        self.answers[rid] = box
        self.send({"id": rid, "method": method, "params": params})
        answer = box.get(timeout=120)
        del self.answers[rid]
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        result: dict[str, Any] = answer["result"]
        return result

    def turn(self, thread: str, text: str) -> tuple[float, list[float]]:
        """Run one turn: its wall time (turn/start sent to turn/completed read) and the times of its deltas."""
        while not self.notes.empty():
            self.notes.get_nowait()
        t0 = time.perf_counter()
        turn_id = self.call("turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]})["turn"]["id"]
        deltas: list[float] = []
        while True:
            at, note = self.notes.get(timeout=120)
            params = note.get("params") or {}
            if note["method"] == "item/agentMessage/delta" and params.get("turnId") == turn_id:
                deltas.append(at)
            if note["method"] == "turn/completed" and (params.get("turn") or {}).get("id") == turn_id:
                return at - t0, deltas

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def clients(kind: str, ws: Path, env: dict[str, str]) -> Client:
    from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]

    if kind == "direct":
        argv = [str(bundled_codex_path()), "app-server", "--listen", "stdio://"]
    else:
        argv = [sys.executable, "-m", "app.cli", "app-server"]
    return Client(argv, ws, {**env, "PYTHONPATH": str(REPO_ROOT), "CODEXR_SERVER": "0"})


def thread_of(c: Client, ws: Path) -> str:
    params = {"cwd": str(ws), "approvalPolicy": "never", "sandbox": "danger-full-access"}
    return str(c.call("thread/start", params)["thread"]["id"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--files", type=int, default=11000, help="tracked files of the turn row's workspace")
    ap.add_argument("--deltas", type=int, default=4000, help="deltas of the stream row's answer")
    ap.add_argument("--json", help="write the raw results here")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    small, big = base / "small", base / "big"
    small.mkdir()
    (small / "a.txt").write_text("a\n")
    log(f"generating a {args.files}-file workspace ...")
    generate(big, WorkspaceSpec(files=args.files, mb=args.files * 75 / 11000))
    rows: dict[str, dict[str, list[float]]] = {"rtt": {}, "stream": {}, "turn": {}}
    long_text = "x" * (12 * args.deltas)
    with ScriptedModel() as model:
        model.script("bench stream", [Message(long_text)])
        model.script("bench turn", [message("ok")])
        for r in range(args.rounds):
            order = ("direct", "proxy") if r % 2 == 0 else ("proxy", "direct")
            for kind in order:
                home = base / f"home-{kind}-{r}"
                env = {**os.environ, **write_codex_home(home, model.base_url)}
                c = clients(kind, small, env)
                try:
                    rtts = [c.ping() for _ in range(300)]
                    rows["rtt"].setdefault(kind, []).append(statistics.median(rtts) * 1000)
                    _wall, deltas = c.turn(thread_of(c, small), "bench stream")
                    rate = (len(deltas) - 1) / (deltas[-1] - deltas[0]) if len(deltas) > 1 else 0.0
                    rows["stream"].setdefault(kind, []).append(rate)
                finally:
                    c.close()
                c = clients(kind, big, env)
                try:
                    thread = thread_of(c, big)
                    walls = [c.turn(thread, "bench turn")[0] * 1000 for _ in range(4)]
                    rows["turn"].setdefault(kind, []).append(statistics.median(walls[1:]))
                finally:
                    c.close()
                log(f"round {r + 1}/{args.rounds} {kind}: rtt {rows['rtt'][kind][-1]:.2f} ms, "
                    f"stream {rows['stream'][kind][-1]:.0f} deltas/s, turn {rows['turn'][kind][-1]:.0f} ms")
    report(rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


def report(rows: dict[str, dict[str, list[float]]]) -> None:
    med = statistics.median
    rtt_d, rtt_p = rows["rtt"]["direct"], rows["rtt"]["proxy"]
    added = [p - d for d, p in zip(rtt_d, rtt_p, strict=True)]
    print("| row | direct (median) | through codexr (median) | per-round | target |")
    print("|---|---:|---:|---:|---|")
    print(f"| round trip of a message | {med(rtt_d):.2f} ms | {med(rtt_p):.2f} ms | +{med(added):.2f} ms "
          f"(min {min(added):.2f}, max {max(added):.2f}) | <= +1 ms |")
    ratio = [p / d for d, p in zip(rows["stream"]["direct"], rows["stream"]["proxy"], strict=True) if d]
    print(f"| streamed deltas per second | {med(rows['stream']['direct']):.0f} | {med(rows['stream']['proxy']):.0f} "
          f"| {med(ratio) * 100:.0f} % | >= 95 % |")
    turn_d, turn_p = rows["turn"]["direct"], rows["turn"]["proxy"]
    extra = [p - d for d, p in zip(turn_d, turn_p, strict=True)]
    print(f"| trivial turn, large workspace | {med(turn_d):.0f} ms | {med(turn_p):.0f} ms | +{med(extra):.0f} ms "
          f"(the captures) | - |")


if __name__ == "__main__":
    sys.exit(main())
