#!/usr/bin/env python3
"""Benchmark the terminal UI: first frame, keystroke echo at 500 turns, scrolling and memory, vs bare Textual.

Run from the repository root:  .venv/bin/python bench/bench_tui.py [--rounds N] [--turns 500] [--mb 20]

Every app runs as a user runs it, in a pseudo-terminal (pexpect), except the resume measurement
(headless `run_test()`; keys are never timed headless: Pilot's own waits cost O(widgets) per key).
The baseline is a bare Textual app (a TextArea and a Footer) run the same way in the same rounds, so
the ratios say what codexr adds to Textual's own cost on this machine. Reports medians over interleaved
rounds; no PASS is a promise on another machine.

* first frame: exec of the `codexr` console script (scratch CODEX_HOME without a login, scratch
  workspace) until the composer's placeholder is on screen (codexr: its splash, drawn before Textual
  loads); then three keys typed at once until the composer shows them (since issue 20 the splash draws
  them itself; the live app shows them later, see the live session). Codex starts in a worker after the frame.
* keystroke echo: `codexr replay LOG` of `tui_log.session_log()` (500 turns, 20 MB of command output)
  vs `codexr replay` of an empty log vs bare Textual: send one character, wait until the composer
  shows everything typed so far.
* memory: VmRSS of those processes after the log is drawn.
* scrolling: block cursor in the transcript (Alt+Up), Page Up until the top, `e` (show earlier
  blocks) whenever blocks were folded away, until the first prompt is on screen; each key timed until
  the screen is quiet; vs Page Up in a bare Textual VerticalScroll (an empty transcript cannot scroll).
* resuming: headless, the time to draw a 500-turn thread (Transcript.reset) vs a 1-turn thread.
* live session (issue 20 §2): codexr (the real pinned Codex against the scripted model on 127.0.0.1, a scratch
  CODEX_HOME) and the official TUI (the pinned `codex` binary run interactively on the same kind of CODEX_HOME)
  in the same interleaved rounds, each a fresh process: a word typed at spawn until the composer shows it; two
  prompts, Enter on the second until its answer is on screen; codexr only: a third prompt, then Ctrl+R until
  the picker lists the prompts (twice); then a prompt whose command prints 20 lines/s for 8 s, and one key at a
  time until the composer shows it. Screens are read with pyte (see ScreenApp).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import re
import shlex
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from math import nan
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
for _p in (str(BENCH_DIR), str(REPO_ROOT)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import pexpect  # noqa: E402

SIZE = (120, 40)  # columns, rows
PLACEHOLDER = "Ask Codex"  # the composer's placeholder: in codexr (its splash, then the app) and in the bare app
TYPED_AHEAD = "zq7"  # typed as soon as the placeholder shows; on screen once the app has read and drawn it
FIRST_FRAME_TARGET_S = 0.5
KEY_TARGET_S = 0.050
ANSI = re.compile(r"\x1b\[[0-9;?<>=$]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][0-9A-Za-z]|\x1b[=>78]")
BARE_APP = '''
from textual.app import App, ComposeResult
from textual.widgets import Footer, TextArea


class Bare(App[None]):
    BINDINGS = [("ctrl+q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield TextArea(placeholder="Ask Codex (bare Textual)", id="prompt")
        yield Footer()


Bare().run()
'''


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


# ------------------------------------------------------------------------------------------ a pty app


class PtyApp:
    """One process in a pseudo-terminal; waits read its output with the escape sequences stripped."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.t0 = time.monotonic()
        self.child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(cwd), dimensions=(SIZE[1], SIZE[0]),
                                   encoding="utf-8", codec_errors="replace", timeout=None)
        self.child.delaybeforesend = None  # pexpect sleeps 50 ms before every send by default
        self.raw = ""

    def wait_for(self, text: str, timeout: float = 60.0) -> float:
        """Seconds since spawn when `text` first shows in the output since the last wait (TimeoutError)."""
        deadline = time.monotonic() + timeout
        while True:
            if text in ANSI.sub("", self.raw):
                self.raw = ""
                return time.monotonic() - self.t0
            left = deadline - time.monotonic()
            if left <= 0:
                tail = ANSI.sub("", self.raw)[-400:]
                raise TimeoutError(f"{text!r} not shown within {timeout:.0f}s; output ends: {tail!r}")
            try:
                self.raw += self.child.read_nonblocking(1 << 20, timeout=min(left, 0.5))
            except pexpect.TIMEOUT:
                pass
            except pexpect.EOF as exc:
                raise RuntimeError(f"the app exited while waiting for {text!r}: {ANSI.sub('', self.raw)[-400:]!r}") \
                    from exc

    def drain(self, quiet: float = 0.3, limit: float = 10.0) -> None:
        """Read until the app has been quiet for `quiet` seconds (the cursor blinks every 0.5 s)."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            try:
                self.child.read_nonblocking(1 << 20, timeout=quiet)
            except pexpect.TIMEOUT:
                break
        self.raw = ""

    def key_echo(self, typed_before: str, ch: str, timeout: float = 10.0) -> float:
        """Seconds from writing `ch` until the composer shows `typed_before + ch`."""
        self.raw = ""
        t = time.monotonic()
        self.child.send(ch)
        self.wait_for(typed_before + ch, timeout)
        return time.monotonic() - t

    def rss_mb(self) -> float:
        status = Path(f"/proc/{self.child.pid}/status").read_text()
        kb = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
        return kb / 1024

    def quit(self) -> None:
        """Ctrl+Q (codexr and the bare app quit on it); force only if it does not."""
        with contextlib.suppress(Exception):
            self.child.send("\x11")
            self.child.expect(pexpect.EOF, timeout=20)
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close()


# ------------------------------------------------------------------------------------------ setup


class Scratch:
    """A scratch CODEX_HOME (no login) and workspace, the bare app's script and the replay logs."""

    def __init__(self, base: Path, turns: int, mb: float) -> None:
        self.base = base
        self.home = base / "codex-home"
        self.ws = base / "workspace"
        self.home.mkdir()
        self.ws.mkdir()
        for i in range(20):
            (self.ws / f"module_{i}.py").write_text(f"def f_{i}():\n    return {i}\n")
        (self.ws / "README.md").write_text("# a scratch workspace\n")
        self.bare = base / "bare_app.py"
        self.bare.write_text(BARE_APP)
        self.empty_log = base / "empty.jsonl"
        self.empty_log.write_text("")
        self.big_log = base / "session.jsonl"
        self.turns, self.mb = turns, mb
        self.events: list[Any] = []
        self.env = dict(os.environ, CODEX_HOME=str(self.home), TERM="xterm-256color", COLORTERM="truecolor",
                        PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.env.pop("NO_COLOR", None)
        self.env.pop("TEXTUAL", None)

    def write_big_log(self) -> None:
        from tui_log import session_log

        from app.shared.replay import write_log

        self.events = session_log(self.turns, self.mb)
        write_log(self.big_log, self.events)

    def codexr(self, *args: str) -> list[str]:
        exe = Path(sys.executable).with_name("codexr")  # the real console entry point
        return [str(exe), *args] if exe.exists() else [sys.executable, "-m", "app.cli", *args]

    def bare_argv(self) -> list[str]:
        return [sys.executable, str(self.bare)]


# ------------------------------------------------------------------------------------------ first frame


def first_frame(sc: Scratch, rounds: int) -> dict[str, Any]:
    """Exec -> placeholder on screen (codexr: the splash), then a key typed at once -> shown in the composer.

    The second number is when the app is live: codexr's splash (app/tui/splash.py) has echo off, so the key
    shows only once Textual has read it from the terminal's queue and drawn it in the composer.
    """
    samples: dict[str, list[float]] = {"bare": [], "codexr": []}
    live: dict[str, list[float]] = {"bare": [], "codexr": []}
    argvs = {"bare": sc.bare_argv(), "codexr": sc.codexr()}
    for r in range(rounds):
        order = list(argvs) if r % 2 == 0 else list(reversed(argvs))
        for name in order:
            app = PtyApp(argvs[name], sc.env, sc.ws)
            try:
                samples[name].append(app.wait_for(PLACEHOLDER, 30))
                app.child.send(TYPED_AHEAD)
                live[name].append(app.wait_for(TYPED_AHEAD, 30))
            finally:
                app.quit()
            time.sleep(0.3)
        log(f"  first frame round {r + 1}/{rounds}: bare {samples['bare'][-1]:.3f}s (key shown "
            f"{live['bare'][-1]:.3f}s), codexr {samples['codexr'][-1]:.3f}s (key shown {live['codexr'][-1]:.3f}s)")
    ratios = [c / b for c, b in zip(samples["codexr"], samples["bare"], strict=True)]
    live_ratios = [c / b for c, b in zip(live["codexr"], live["bare"], strict=True)]
    return {"samples": samples, "median": {k: median(v) for k, v in samples.items()},
            "ratio_median": median(ratios), "target_s": FIRST_FRAME_TARGET_S,
            "pass": median(samples["codexr"]) <= FIRST_FRAME_TARGET_S,
            "live_samples": live, "live_median": {k: median(v) for k, v in live.items()},
            "live_ratio_median": median(live_ratios)}


# ------------------------------------------------------------------------------------------ keys + memory


def keys_and_memory(sc: Scratch, rounds: int, keys_per_round: int) -> dict[str, Any]:
    apps: dict[str, PtyApp] = {}
    loaded: dict[str, float] = {}
    try:
        apps["bare"] = PtyApp(sc.bare_argv(), sc.env, sc.ws)
        apps["bare"].wait_for(PLACEHOLDER, 30)
        apps["empty"] = PtyApp(sc.codexr("replay", str(sc.empty_log)), sc.env, sc.ws)
        loaded["empty"] = apps["empty"].wait_for("○ idle", 60)
        apps["500"] = PtyApp(sc.codexr("replay", str(sc.big_log)), sc.env, sc.ws)
        apps["500"].wait_for(PLACEHOLDER, 120)
        loaded["500"] = apps["500"].wait_for("resumed (thread", 300)
        log(f"  replay drawn: empty log {loaded['empty']:.2f}s, {sc.turns}-turn log {loaded['500']:.2f}s")
        for app in apps.values():
            app.drain(quiet=1.0)
        rss = {name: app.rss_mb() for name, app in apps.items()}
        samples: dict[str, list[float]] = {name: [] for name in apps}
        typed = {name: "" for name in apps}
        alphabet = "ZQXJ"
        for r in range(rounds):
            order = list(apps) if r % 2 == 0 else list(reversed(apps))
            for name in order:
                app = apps[name]
                for _ in range(keys_per_round):
                    ch = alphabet[len(typed[name]) % len(alphabet)]
                    samples[name].append(app.key_echo(typed[name], ch))
                    typed[name] += ch
                    time.sleep(0.05)
                # clear the composer between rounds so the line never wraps (Ctrl+U: select-all-free clear)
                for _ in typed[name]:
                    app.child.send("\x7f")
                typed[name] = ""
                app.drain(quiet=0.6)
            log(f"  keys round {r + 1}/{rounds}: " + ", ".join(
                f"{n} {1000 * median(samples[n][-keys_per_round:]):.1f}ms" for n in apps))
        rss_after = {name: app.rss_mb() for name, app in apps.items()}
    finally:
        for app in apps.values():
            app.quit()
    med = {n: median(v) for n, v in samples.items()}
    return {
        "samples": samples, "median": med, "p90": {n: pct(v, 0.9) for n, v in samples.items()},
        "ratio_500_vs_empty": med["500"] / med["empty"], "ratio_500_vs_bare": med["500"] / med["bare"],
        "ratio_empty_vs_bare": med["empty"] / med["bare"], "target_s": KEY_TARGET_S,
        "pass": med["500"] <= KEY_TARGET_S, "rss_mb": rss, "rss_mb_after_typing": rss_after,
        "replay_drawn_s": loaded,
    }


# ------------------------------------------------------------------------------------------ scrolling

PAGE_UP = "\x1b[5~"
HOME, END = "\x1b[H", "\x1b[F"  # xterm Home / End: the transcript's jumps to its first and last block
# Focus the transcript with a mouse click near its top right (SGR mouse report, 1-based column;row):
# Alt+Up arrives from an xterm as ESC + Up under Textual 8 (see bench/README.md), so it cannot be used here.
CLICK = "\x1b[<0;115;2M\x1b[<0;115;2m"
FOLDED = "earlier blocks folded away"


def settle(app: PtyApp, key: str, quiet: float = 0.15, limit: float = 120.0) -> tuple[float, str]:
    """Send `key`; (seconds until the last repaint before `quiet` s of silence, what was painted).

    The first repaint is awaited up to 10 s (a key that changes nothing paints nothing: 0 s).
    """
    app.raw = ""
    t = time.monotonic()
    last = t
    end = t + limit
    app.child.send(key)
    wait = 10.0
    while time.monotonic() < end:
        try:
            app.raw += app.child.read_nonblocking(1 << 20, timeout=wait)
            last = time.monotonic()
            wait = quiet
        except pexpect.TIMEOUT:
            break
    return last - t, ANSI.sub("", app.raw)


def scroll_to_top(app: PtyApp, top_marker: str, max_keys: int, max_s: float) -> dict[str, Any]:
    """Page Up (and `e` where blocks were folded away) until `top_marker` shows and nothing is folded.

    Gives up after `max_keys` keys or `max_s` seconds (the report says how far it got).
    """
    settle(app, CLICK)  # the transcript (or the bare app's scroll view) gets the keys
    per_key: list[float] = []
    earlier: list[float] = []
    key = PAGE_UP
    start = time.monotonic()
    reached = False
    folded_left: int | None = None
    while len(per_key) + len(earlier) < max_keys and time.monotonic() - start < max_s:
        took, painted = settle(app, key)
        (earlier if key == "e" else per_key).append(took)
        m = re.search(r"(\d+) earlier blocks folded away", painted)
        if m:
            folded_left = int(m.group(1))
        if top_marker in painted and FOLDED not in painted:
            reached = True
            break
        key = "e" if FOLDED in painted else PAGE_UP
    return {"total_s": time.monotonic() - start, "page_ups": len(per_key), "show_earlier": len(earlier),
            "page_up_s": per_key, "show_earlier_s": earlier, "reached_top": reached,
            "folded_left": 0 if reached else folded_left}


def jump(app: PtyApp, key: str, marker: str, limit: float = 60.0) -> tuple[float, bool]:
    """Send `key`; (seconds until `marker` is painted, whether it was within `limit`)."""
    app.drain(quiet=0.3)
    t = time.monotonic()
    app.child.send(key)
    try:
        app.wait_for(marker, limit)
    except TimeoutError:
        return limit, False
    return time.monotonic() - t, True


BARE_SCROLL_APP = '''
import sys
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static


class BareScroll(App[None]):
    BINDINGS = [("ctrl+q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        blocks = int(sys.argv[1])
        with VerticalScroll(id="log"):
            for i in range(blocks):
                yield Static("\\n".join(f"block {i} line {j}: the bare Textual baseline" for j in range(6)))

    def on_mount(self) -> None:
        self.query_one("#log").focus()
        self.query_one("#log").scroll_end(animate=False)


BareScroll().run()
'''


def scrolling(sc: Scratch, max_keys: int, max_s: float, blocks: int) -> dict[str, Any]:
    script = sc.base / "bare_scroll.py"
    script.write_text(BARE_SCROLL_APP)
    out: dict[str, Any] = {}
    big = PtyApp(sc.codexr("replay", str(sc.big_log)), sc.env, sc.ws)
    try:
        big.wait_for("resumed (thread", 300)
        big.drain(quiet=1.0)
        out["500"] = scroll_to_top(big, "Prompt 1:", max_keys, max_s)
        # the jumps (timed until what they jump to is painted): End to the newest, Home to the first prompt
        out["end_s"], _ = jump(big, END, f"Turn {sc.turns}")
        out["home_s"], out["home_reached"] = jump(big, HOME, "Prompt 1:")
    finally:
        big.quit()
    bare = PtyApp([sys.executable, str(script), str(blocks)], sc.env, sc.ws)
    try:
        bare.wait_for(f"block {blocks - 1} line 5:", 60)
        bare.drain(quiet=1.0)
        out["bare"] = scroll_to_top(bare, "block 0 line 0:", max_keys, max_s)
    finally:
        bare.quit()
    out["page_up_median"] = {k: median(out[k]["page_up_s"]) for k in ("500", "bare")}
    out["page_up_p90"] = {k: pct(out[k]["page_up_s"], 0.9) for k in ("500", "bare")}
    out["show_earlier_median"] = median(out["500"]["show_earlier_s"])
    out["ratio_page_up"] = out["page_up_median"]["500"] / out["page_up_median"]["bare"]
    out["bare_blocks"] = blocks
    return out


async def _resume_draw(events: list[Any]) -> float:
    """Headless: seconds to draw a resumed thread (Transcript.reset) until the screen has settled."""
    from app.codex.events import ThreadLoaded
    from app.shared.replay import ReplayDriver
    from app.tui.app import CodexrApp

    app = CodexrApp(driver_factory=lambda emit: ReplayDriver([], emit), workspace="(replay)")
    async with app.run_test(size=SIZE) as pilot:
        while app.status_bar.state != "ready":
            await pilot.pause(0.05)
        await pilot.pause(0.3)
        t = time.perf_counter()
        await app._thread_loaded(ThreadLoaded("bench", tuple(events), "resumed"))
        await pilot.pause()
        return time.perf_counter() - t


def resume_draw(sc: Scratch, rounds: int) -> dict[str, Any]:
    one_turn = [e for e in sc.events[0].events[:10]]
    samples: dict[str, list[float]] = {"1": [], "500": []}
    for _ in range(rounds):
        samples["1"].append(asyncio.run(_resume_draw(one_turn)))
        samples["500"].append(asyncio.run(_resume_draw(list(sc.events[0].events))))
    med = {k: median(v) for k, v in samples.items()}
    return {"samples": samples, "median": med, "ratio": med["500"] / med["1"]}


# ------------------------------------------------------------------------------------------ a live session
# (issue 20 §2) The real app with the real pinned Codex against the scripted model, next to the official TUI (the
# pinned Codex binary run interactively on the same kind of scratch CODEX_HOME), in the same interleaved rounds.
# What is on screen is read with pyte (a VT100 emulator): a diff-painting TUI (the official one) redraws single
# cells, so the typed text never appears contiguously in the raw output the way Textual's line repaints do.

MARK = "ZQXJ"  # typed characters; no screen text of either app contains them in this order
LAUNCH_WORD = "ZQXJW"
STREAM_LINES_PER_S = 20
STREAM_SECONDS = 8.0  # under exec_command's 10 s yield, so the command streams inside its turn
KEY_GAP_S = 0.1  # between a key's echo and the next key
LIVE_TARGETS = {"echo_median": 0.030, "echo_p99": 0.100, "launch": 0.5, "enter": 0.2, "picker": 0.3}


STREAM_SCRIPT = f"""import sys, time
t = time.time()
for i in range({int(STREAM_LINES_PER_S * STREAM_SECONDS)}):
    print(f"{{sys.argv[1]}} stream line {{i:04d}}: tests/test_module.py::test_case_{{i}} PASSED", flush=True)
    time.sleep(max(0.0, t + (i + 1) / {STREAM_LINES_PER_S} - time.time()))
"""


def stream_command(tag: str) -> str:
    """A shell command printing STREAM_LINES_PER_S lines a second for STREAM_SECONDS, on a schedule (a script in
    the workspace, so the command is one short line on screen)."""
    return f"{shlex.quote(sys.executable)} stream_lines.py {tag}"


class ScreenApp:
    """One TUI in a pseudo-terminal whose output is played into a pyte screen (which also answers the app's
    cursor-position queries, as a terminal does)."""

    def __init__(self, kind: str, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        import pyte

        self.kind = kind  # "codexr" | "official"
        self.prefix = "│ " if kind == "codexr" else "\u203a "  # how the composer's line starts (a box; a quote mark)
        self.screen = pyte.Screen(SIZE[0], SIZE[1])
        self.stream = pyte.ByteStream(self.screen)
        self.t0 = self.arrived = time.monotonic()
        self.child = pexpect.spawn(argv[0], argv[1:], env=env, cwd=str(cwd), dimensions=(SIZE[1], SIZE[0]),
                                   timeout=None)
        self.child.delaybeforesend = None
        self.screen.write_process_input = lambda data: self.child.send(data.encode())

    def send(self, data: str) -> None:
        self.child.send(data.encode())

    def _read(self, timeout: float) -> None:
        """Play what the app wrote into the screen; `arrived` is when it was read (pyte takes ~1.5 ms a KB here, a
        terminal next to nothing: a full repaint's 100 KB would otherwise count ~150 ms of pyte against the app)."""
        try:
            data = self.child.read_nonblocking(1 << 20, timeout=timeout)
        except pexpect.TIMEOUT:
            return
        except pexpect.EOF as exc:
            raise RuntimeError(f"{self.kind} exited; the screen shows:\n{self.text()}") from exc
        self.arrived = time.monotonic()
        self.stream.feed(data)

    def lines(self) -> list[str]:
        return [ln.rstrip() for ln in self.screen.display]

    def text(self) -> str:
        return "\n".join(ln for ln in self.lines() if ln)

    def wait(self, cond: Callable[[], object], what: str, timeout: float = 60.0) -> float:
        """Seconds since spawn when the output that makes `cond()` hold for the screen arrived."""
        deadline = time.monotonic() + timeout
        self.arrived = time.monotonic()  # already true: now
        while not cond():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"{self.kind}: {what} not on screen within {timeout:.0f}s; it shows:\n{self.text()}")
            self._read(min(left, 0.2))
        return self.arrived - self.t0

    def shows(self, text: str) -> bool:
        return any(text in ln for ln in self.lines())

    def composer_is(self, typed: str) -> bool:
        """The composer's line holds exactly `typed`."""
        want = self.prefix + typed
        return any(ln.strip().rstrip("│").rstrip() == want.rstrip() for ln in self.lines())

    def composer_has_mark(self) -> bool:
        return any(ln.strip().startswith(self.prefix + MARK[0]) for ln in self.lines())

    def settle(self, quiet: float = 0.3, limit: float = 5.0) -> None:
        end = time.monotonic() + limit
        while time.monotonic() < end:
            try:
                self.stream.feed(self.child.read_nonblocking(1 << 20, timeout=quiet))
            except pexpect.TIMEOUT:
                return

    def ready(self) -> bool:
        """Ready for a prompt: codexr's status bar says Codex is idle; the official TUI shows its model line under
        the composer and no running turn."""
        if self.kind == "codexr":
            return self.shows("○ idle")
        return self.shows("GPT-5.5") and not self.shows("esc to interrupt")

    def timed(self, data: str, cond: Callable[[], object], what: str, timeout: float = 30.0) -> float:
        """Seconds from writing `data` until the output that makes `cond()` hold arrived."""
        t = time.monotonic()
        self.send(data)
        return self.wait(cond, what, timeout) + self.t0 - t

    def timed_key(self, typed: str, ch: str) -> float:
        return self.timed(ch, lambda: self.composer_is(typed + ch), f"the key {ch!r} in the composer", 10)

    def clear(self, typed: str) -> None:
        self.send("\x7f" * len(typed))
        self.wait(lambda: not self.composer_has_mark(), "an empty composer", 10)

    def type_text(self, text: str) -> None:
        """Type `text` a key at a time, as a person does (a burst would be a paste to either app)."""
        for ch in text:
            self.send(ch)
            time.sleep(0.02)
        self.wait(lambda: self.composer_is(text), f"{text!r} in the composer", 30)

    def prompt(self, text: str, answer: str) -> float:
        """Type `text`, let the composer show it, Enter; seconds from Enter until `answer` is on screen."""
        self.type_text(text)
        time.sleep(0.4)  # typing and Enter in one burst is a paste to the official TUI (and to codexr)
        self.settle(0.1, 1.0)
        took = self.timed("\r", lambda: self.shows(answer), f"the answer {answer!r}", 60)
        self.wait(self.ready, "the end of the turn", 60)
        return took

    def quit(self) -> None:
        with contextlib.suppress(Exception):
            if self.kind == "codexr":
                self.send("\x11")
            else:
                self.send("\x03")
                time.sleep(0.3)
                self.send("\x03")
            self.child.expect(pexpect.EOF, timeout=20)
        if self.child.isalive():
            self.child.terminate(force=True)
        self.child.close()


class LiveSetup:
    """The scripted model, one scratch CODEX_HOME and workspace per app, and how to start each app."""

    def __init__(self, base: Path, model: Any) -> None:
        from app.codex.codex_bin import pinned_path
        from app.codex.scripted_model import message, write_codex_home

        self.model = model
        self.dirs: dict[str, tuple[Path, Path]] = {}
        self.env: dict[str, dict[str, str]] = {}
        for kind in ("codexr", "official"):
            home, ws = base / f"live-{kind}-home", base / f"live-{kind}-ws"
            ws.mkdir()
            for i in range(20):
                (ws / f"module_{i}.py").write_text(f"def f_{i}():\n    return {i}\n")
            (ws / "stream_lines.py").write_text(STREAM_SCRIPT)
            env = dict(os.environ, **write_codex_home(home, model.base_url), TERM="xterm-256color",
                       COLORTERM="truecolor", NO_PROXY="127.0.0.1,localhost",
                       PYTHONPATH=str(REPO_ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
            for var in ("NO_COLOR", "TEXTUAL", "COLUMNS", "LINES", "CODEXR_SERVER"):
                env.pop(var, None)
            if kind == "official":  # what it writes itself once the user answered "Use existing model" (its
                # model announcement would otherwise come first at every start)
                with (home / "config.toml").open("a") as f:
                    f.write('\n[tui]\nscreen_reader_detection_done = true\n\n[notice.model_migrations]\n'
                            '"gpt-5.5" = "gpt-6-sol"\n')
            self.dirs[kind], self.env[kind] = (home, ws), env
        self.codex = str(pinned_path())
        for i, word in enumerate(("first", "second", "third"), 1):
            model.script(f"bench-{word}", [message(f"answer number {i} of the bench")])

    def argv(self, kind: str) -> list[str]:
        if kind == "codexr":
            exe = Path(sys.executable).with_name("codexr")
            return [str(exe) if exe.exists() else sys.executable, *([] if exe.exists() else ["-m", "app.cli"]),
                    "-C", str(self.dirs[kind][1])]
        return [self.codex, "-C", str(self.dirs[kind][1])]

    def spawn(self, kind: str) -> ScreenApp:
        return ScreenApp(kind, self.argv(kind), self.env[kind], self.dirs[kind][1])

    def warm_up(self, kind: str) -> None:
        """First start on a fresh CODEX_HOME: Codex installs its skills; the official TUI asks about a new model."""
        app = self.spawn(kind)
        try:
            app.wait(lambda: app.ready() or app.shows("Use existing model"), "the first screen", 60)
            if app.shows("Use existing model"):
                app.send("2")
                time.sleep(0.2)
                app.send("\r")
            app.wait(app.ready, "the composer", 60)
            app.settle(0.5)
        finally:
            app.quit()


def live_round(setup: LiveSetup, kind: str, r: int, keys: dict[str, list[float]], out: dict[str, list[float]]) -> None:
    from app.codex.scripted_model import message, shell

    app = setup.spawn(kind)
    try:
        # a word typed at launch, on screen in the composer
        app.send(LAUNCH_WORD)
        out["launch"].append(app.wait(lambda: app.composer_is(LAUNCH_WORD), "the word typed at launch", 60))
        if kind == "codexr":  # codexr's splash shows it first: when the live app (its footer) shows it too
            out["launch_live"].append(app.wait(lambda: app.shows("palette") and app.composer_is(LAUNCH_WORD),
                                               "the live app", 60))
        app.wait(app.ready, "Codex started", 60)
        app.clear(LAUNCH_WORD)
        # Enter -> the answer of the second prompt
        app.prompt("bench-first prompt", "answer number 1 of the bench")
        out["enter"].append(app.prompt("bench-second prompt", "answer number 2 of the bench"))
        if kind == "codexr":  # the rewind picker on a thread of three prompts
            app.prompt("bench-third prompt", "answer number 3 of the bench")
            for _ in range(2):
                app.settle(0.3)
                t = time.monotonic()
                out["picker"].append(app.timed("\x12", lambda: app.shows("[snapshot]  bench-third prompt"),
                                               "the picker's rows"))
                app.wait(lambda: app.shows("prompt 3 · files and conversation"), "the picker's plan", 30)
                out["picker_plan"].append(app.arrived - t)
                app.send("\x1b")
                app.wait(lambda: not app.shows("Rewind — choose"), "the picker to close", 30)
        # keystroke echo while a command prints STREAM_LINES_PER_S lines a second
        tag = f"s{r}{kind[0]}"
        setup.model.script(f"bench-stream-{tag}", [shell(stream_command(tag)), message(f"stream {tag} finished")])
        app.type_text(f"bench-stream-{tag} go")
        time.sleep(0.4)
        app.settle(0.1, 1.0)
        app.send("\r")
        started = time.monotonic()
        if kind == "codexr":
            app.wait(lambda: app.shows(f"{tag} stream line"), "the command's output", 60)
        else:
            app.wait(lambda: app.shows("Working") or app.shows("background terminal"), "the turn", 60)
            time.sleep(0.5)  # the official TUI shows a command's output when it ends: give it time to start
        typed = ""
        while time.monotonic() - started < STREAM_SECONDS - 1.0:
            ch = MARK[len(typed) % len(MARK)]
            keys[kind].append(app.timed_key(typed, ch))
            typed += ch
            time.sleep(KEY_GAP_S)
        app.clear(typed)
        app.wait(lambda: app.shows(f"stream {tag} finished"), "the end of the stream turn", 60)
        app.wait(app.ready, "the end of the stream turn", 60)
    finally:
        app.quit()


def stop_daemons(home: Path) -> None:
    """End the app-server daemon the official TUI started from `home` (it outlives the TUI: ten runs left twenty
    processes of ~290 MB each behind, taking memory and CPU from every later measurement)."""
    prefix = str(home.resolve()) + os.sep
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                argv0 = (entry / "cmdline").read_bytes().split(b"\0", 1)[0].decode(errors="replace")
                if argv0.startswith(prefix):
                    pids.append(int(entry.name))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 3
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and _alive(p)]
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Still running (not a zombie waiting for a parent that is not this process)."""
    with contextlib.suppress(OSError):
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    return False


def live_session(base: Path, rounds: int) -> dict[str, Any]:
    """Launch, Enter, Ctrl+R and keystroke echo while a command streams: codexr vs the official TUI."""
    from app.codex.scripted_model import ScriptedModel

    kinds = ("codexr", "official")
    keys: dict[str, list[float]] = {k: [] for k in kinds}
    out: dict[str, dict[str, list[float]]] = {
        k: {"launch": [], "launch_live": [], "enter": [], "picker": [], "picker_plan": []} for k in kinds}
    with ScriptedModel() as model:
        setup = LiveSetup(base, model)
        try:
            for kind in kinds:
                setup.warm_up(kind)
            for r in range(rounds):
                for kind in (kinds if r % 2 == 0 else tuple(reversed(kinds))):
                    live_round(setup, kind, r, keys, out[kind])
                log(f"  live round {r + 1}/{rounds}: " + "; ".join(
                    f"{k}: launch {out[k]['launch'][-1]:.2f}s, enter {out[k]['enter'][-1]:.2f}s, keys "
                    f"{1000 * median(keys[k][-10:]):.0f}ms" + (f", picker {out[k]['picker'][-1]:.2f}s"
                                                                 if out[k]['picker'] else "") for k in kinds))
        finally:
            stop_daemons(setup.dirs["official"][0])
    res: dict[str, Any] = {"keys": keys, "samples": out, "targets": LIVE_TARGETS, "rate": STREAM_LINES_PER_S}
    res["echo"] = {k: {"median": median(v), "p90": pct(v, 0.9), "p99": pct(v, 0.99), "max": max(v) if v else nan}
                   for k, v in keys.items()}
    res["median"] = {k: {m: median(v) for m, v in out[k].items()} for k in kinds}
    return res


# ------------------------------------------------------------------------------------------ report


def report(res: dict[str, Any]) -> str:
    out = [f"machine: {res['machine']}", f"command: {res['command']}", ""]
    ff = res.get("first_frame")
    if ff:
        m = ff["median"]
        lm = ff["live_median"]
        out += ["first frame (exec -> composer on screen; codexr: its splash), then a key typed at once -> shown "
                f"(codexr: by its splash), median of {len(ff['samples']['codexr'])} rounds:",
                f"  bare Textual app   frame {m['bare']:.3f} s   key shown {lm['bare']:.3f} s",
                f"  codexr             frame {m['codexr']:.3f} s   key shown {lm['codexr']:.3f} s   ratios "
                f"{ff['ratio_median']:.2f}x / {ff['live_ratio_median']:.2f}x   "
                f"frame target {ff['target_s']} s: {'PASS' if ff['pass'] else 'MISS'}", ""]
    ks = res.get("keys")
    if ks:
        m, p = ks["median"], ks["p90"]
        out += [f"keystroke echo in a pty (median / p90 of {len(ks['samples']['500'])} keys each):",
                f"  bare Textual app         {1000 * m['bare']:.1f} / {1000 * p['bare']:.1f} ms",
                f"  codexr, empty replay     {1000 * m['empty']:.1f} / {1000 * p['empty']:.1f} ms",
                f"  codexr, {res['turns']} turns      {1000 * m['500']:.1f} / {1000 * p['500']:.1f} ms   "
                f"vs empty {ks['ratio_500_vs_empty']:.2f}x, vs bare {ks['ratio_500_vs_bare']:.2f}x   "
                f"target {1000 * ks['target_s']:.0f} ms: {'PASS' if ks['pass'] else 'MISS'}",
                f"  replay drawn after       empty {ks['replay_drawn_s']['empty']:.2f} s, "
                f"{res['turns']} turns {ks['replay_drawn_s']['500']:.2f} s (incl. reading the log)",
                "memory (VmRSS after drawing):",
                "  " + ", ".join(f"{n} {v:.0f} MB" for n, v in ks["rss_mb"].items()), ""]
    sc = res.get("scroll")
    if sc:
        b, bare = sc["500"], sc["bare"]
        out += ["scrolling end -> top in a pty (Page Up; `e` where blocks were folded away; each key timed until "
                "the screen is quiet for 0.15 s):",
                f"  codexr, {res['turns']} turns: {b['page_ups']} Page Ups + {b['show_earlier']} x `e` in "
                f"{b['total_s']:.1f} s (reached the top: {b['reached_top']}; blocks still folded: "
                f"{b['folded_left']}); Page Up "
                f"{1000 * sc['page_up_median']['500']:.0f} ms median / {1000 * sc['page_up_p90']['500']:.0f} ms "
                f"p90, `e` {1000 * sc['show_earlier_median']:.0f} ms median",
                f"  bare Textual, {sc['bare_blocks']} six-line Statics: {bare['page_ups']} Page Ups in "
                f"{bare['total_s']:.1f} s; Page Up {1000 * sc['page_up_median']['bare']:.0f} ms median",
                f"  Page Up ratio codexr / bare: {sc['ratio_page_up']:.2f}x",
                f"  jumps in the transcript: End (the newest blocks) {1000 * sc['end_s']:.0f} ms, Home (the first "
                f"prompt, window moved there) {1000 * sc['home_s']:.0f} ms, first prompt on screen: "
                f"{sc['home_reached']}", ""]
    lv = res.get("live")
    if lv:
        e, m, tg = lv["echo"], lv["median"], lv["targets"]
        n_rounds = len(lv["samples"]["codexr"]["launch"])

        def ms(x: float) -> str:
            return f"{1000 * x:.0f}"

        out += [f"a live session (the real Codex, the scripted model; median of {n_rounds} interleaved rounds):",
                f"  keystroke echo while a command prints {lv['rate']} lines/s (median / p90 / p99 / max ms, "
                f"{len(lv['keys']['codexr'])} / {len(lv['keys']['official'])} keys):"]
        for k in ("codexr", "official"):
            out.append(f"    {k:<9} {ms(e[k]['median'])} / {ms(e[k]['p90'])} / {ms(e[k]['p99'])} / {ms(e[k]['max'])}")
        echo_ok = e["codexr"]["median"] <= tg["echo_median"] and e["codexr"]["p99"] <= tg["echo_p99"]
        out += [f"    ratio codexr / official (median) {e['codexr']['median'] / e['official']['median']:.1f}x; target "
                f"median <= {ms(tg['echo_median'])} ms, p99 <= {ms(tg['echo_p99'])} ms: "
                f"{'PASS' if echo_ok else 'MISS'}",
                f"  a word typed at launch, in the composer: codexr {m['codexr']['launch']:.2f} s (the live app "
                f"shows it at {m['codexr']['launch_live']:.2f} s), official {m['official']['launch']:.2f} s; target "
                f"{tg['launch']} s: {'PASS' if m['codexr']['launch'] <= tg['launch'] else 'MISS'}",
                f"  Enter -> the answer, second prompt: codexr {m['codexr']['enter']:.2f} s, official "
                f"{m['official']['enter']:.2f} s; target {tg['enter']} s: "
                f"{'PASS' if m['codexr']['enter'] <= tg['enter'] else 'MISS'}",
                f"  Ctrl+R -> the picker's rows (three prompts): codexr {m['codexr']['picker']:.2f} s (its plan "
                f"{m['codexr']['picker_plan']:.2f} s); target {tg['picker']} s: "
                f"{'PASS' if m['codexr']['picker'] <= tg['picker'] else 'MISS'}", ""]
    rd = res.get("resume")
    if rd:
        out += ["drawing a resumed thread (headless Transcript.reset until settled), median:",
                f"  1 turn {rd['median']['1']:.2f} s, {res['turns']} turns {rd['median']['500']:.2f} s "
                f"(ratio {rd['ratio']:.1f}x)"]
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    p.add_argument("--keys", type=int, default=10, help="keystrokes per app per round (default 10)")
    p.add_argument("--turns", type=int, default=500)
    p.add_argument("--mb", type=float, default=20.0, help="MB of command output in the log (default 20)")
    p.add_argument("--scroll-keys", type=int, default=3000, help="give up scrolling after this many keys")
    p.add_argument("--scroll-seconds", type=float, default=180.0, help="give up scrolling after this long")
    p.add_argument("--bare-blocks", type=int, default=100,
                   help="Statics in the bare scroll baseline (default 100: as many as the transcript mounts)")
    p.add_argument("--live-rounds", type=int, default=5, help="rounds of the live session (default 5)")
    p.add_argument("--only", default="frame,keys,scroll,resume,live", help="comma-separated parts (default all)")
    p.add_argument("--json", type=Path, help="write every sample as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    parts = set(args.only.split(","))
    res: dict[str, Any] = {
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores, {platform.system()} "
                   f"{platform.release()}, Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}",
        "command": " ".join(["bench/bench_tui.py", *(argv if argv is not None else sys.argv[1:])]),
        "turns": args.turns, "mb": args.mb,
    }
    import textual

    res["machine"] += f", Textual {textual.__version__}"
    with tempfile.TemporaryDirectory(prefix="bench-tui-") as tmp:
        sc = Scratch(Path(tmp), args.turns, args.mb)
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("frame", lambda: first_frame(sc, args.rounds)),
            ("keys", lambda: keys_and_memory(sc, max(3, args.rounds // 2), args.keys)),
            ("scroll", lambda: scrolling(sc, args.scroll_keys, args.scroll_seconds, args.bare_blocks)),
            ("resume", lambda: resume_draw(sc, 3)),
            ("live", lambda: live_session(Path(tmp), args.live_rounds)),
        ]
        if parts & {"keys", "scroll", "resume"}:
            log(f"building the {args.turns}-turn log ({args.mb} MB of output)…")
            sc.write_big_log()
        for name, fn in steps:
            if name in parts:
                log(f"{name}…")
                res["first_frame" if name == "frame" else name] = fn()
    res["load_after"] = os.getloadavg()[0]
    print(report(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
