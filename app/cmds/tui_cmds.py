"""`codexr` (no subcommand), `codexr resume`, `codexr login` and `codexr replay`: the interactive entry points.

Nothing heavy is imported here: Textual loads when the app runs, the Codex SDK only in the app's worker,
so the first frame is not kept waiting.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .agent_cmds import _bypass_flag, _codex_flags
from .context import Context, UsageError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `resume` and `login` (login is passed through before argparse sees its flags)."""
    p = sub.add_parser("resume", help="open the app on one of this workspace's threads")
    _codex_flags(p)
    _bypass_flag(p)
    p.add_argument("words", nargs="*", metavar="[THREAD] [PROMPT]",
                   help="the thread id or a unique prefix of 4+ characters, then a first prompt to send, as "
                        "`codex resume ID PROMPT` (with --last: the prompt alone)")
    p.add_argument("--last", action="store_true", help="the workspace's most recent thread")
    p.set_defaults(handler=_resume)
    p = sub.add_parser("login", help="log in to Codex (runs the bundled codex's `login` with your arguments)")
    p.set_defaults(handler=lambda _ctx, args: login(list(getattr(args, "rest", []))))
    p = sub.add_parser("replay", help="for developers: open the app on a recorded event log (codexr --record FILE)"
                                      " without Codex")
    p.add_argument("file", metavar="FILE", help="the log (JSON Lines)")
    p.add_argument("--delay", type=float, default=0.0, metavar="S", help="seconds between events (default 0)")
    p.set_defaults(handler=_replay)


def add_app_flags(parser: argparse.ArgumentParser) -> None:
    """Top-level flags that only the app takes."""
    parser.add_argument("--record", metavar="FILE", help="for developers: append the app session's events to FILE,"
                                                         " a log `codexr replay FILE` plays back")


def check_app_flags(args: argparse.Namespace) -> None:
    """--record with a command that is not the app: say so rather than ignore it."""
    if getattr(args, "record", None) and (args.handler not in (run_app, _resume) or getattr(args, "plain", False)):
        raise UsageError("--record works with the app only (codexr, codexr resume)")


def check_first_prompt(args: argparse.Namespace) -> None:
    """A first prompt and `-i FILE` go with the app (`resume` too), --plain and exec only; each image must be a
    readable image."""
    from .agent_cmds import _exec

    if args.handler not in (run_app, _exec, _resume) and not getattr(args, "plain", False):
        what = "-i/--image" if args.images else f"the prompt {args.first_prompt!r}"
        raise UsageError(f"{what}: a first prompt and images go with the app, resume, --plain or exec only")
    from ..codex.images import check_images
    from ..errors import SessionError

    try:
        check_images(args.images)
    except SessionError as exc:
        raise UsageError(str(exc)) from exc


def _record_path(args: argparse.Namespace) -> Path | None:
    """The --record file, opened once here so that a bad path is a one-line error before the app starts."""
    if not getattr(args, "record", None):
        return None
    path = Path(args.record)
    if path.is_dir():
        raise UsageError(f"--record {path}: is a directory")
    path.open("a", encoding="utf-8").close()  # OSError: one line from main
    return path


def run_app(ctx: Context, args: argparse.Namespace, *, thread_id: str | None = None,
            resume_last: bool = False) -> int:
    """Open the terminal UI on the workspace (-C) with the pass-through Codex flags."""
    _need_terminal()
    record = _record_path(args)
    from ..codex.codex_bin import choose
    from .agent_cmds import session_options

    # A bad --codex-bin is one error line, not an app that cannot start. `ctx.loaded` is None when every
    # setting is a default: pydantic (~0.2 s) then loads in the worker after the first frame.
    choose(args.codex_bin, ctx.loaded)
    ctx.workspace(args.cd)  # the store or Codex's home as workspace: one line, before the first frame
    from ..tui.splash import Splash

    splash = Splash.show()  # the first frame now; Textual and the app take ~0.5 s more to import
    try:
        from ..server.oneshot import Importing

        with Importing():
            from ..tui.app import run_tui
    except BaseException:
        if splash is not None:
            splash.close()
        raise
    return run_tui(lambda: session_options(ctx, args), thread_id=thread_id, resume_last=resume_last,
                   settings=ctx.loaded, workspace=str(args.cd), record=record, splash=splash,
                   prompt=getattr(args, "first_prompt", ""), images=tuple(getattr(args, "images", ())))


def _need_terminal() -> None:
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise UsageError("the app needs a terminal; use `codexr exec PROMPT` for scripts")


def _replay(ctx: Context, args: argparse.Namespace) -> int:
    """`codexr replay FILE`: the app drawing a recorded log, no Codex (for UI work and the benchmark)."""
    from ..errors import SessionError
    from ..shared.replay import ReplayDriver, read_log

    if args.delay < 0:
        raise UsageError("--delay must be 0 or more seconds")
    try:
        events = read_log(Path(args.file))
    except SessionError as exc:
        raise UsageError(str(exc)) from exc
    _need_terminal()
    from ..tui.app import run_tui

    delay = float(args.delay)
    return run_tui(driver_factory=lambda emit: ReplayDriver(events, emit, delay=delay), settings=ctx.settings,
                   workspace="(replay)")


def _resume(ctx: Context, args: argparse.Namespace) -> int:
    words = list(args.words)
    args.thread = None if args.last or not words else words.pop(0)
    if words:  # the first prompt, as `codex resume ID PROMPT` (and `codexr PROMPT`) send it at once
        args.first_prompt = " ".join(words)
    if args.thread:
        from ..errors import SessionError
        from ..services.thread_ids import known_on_disk, resolve_thread_id

        try:  # a prefix is resolved here: a bad one is one line, before the app draws
            args.thread = resolve_thread_id(args.thread, lambda: known_on_disk(ctx.home))
        except SessionError as exc:
            raise UsageError(str(exc)) from exc
    if not args.thread and not args.last:
        args.last = True  # `codexr resume` alone: the most recent thread here
    if getattr(args, "plain", False):  # line mode reads a pipe as well as a terminal: no terminal check
        from ..shared.plain import run_plain
        from .agent_cmds import session_options

        return run_plain(session_options(ctx, args), thread_id=args.thread, resume_last=bool(args.last),
                         prompt=getattr(args, "first_prompt", ""), images=tuple(args.images))
    return run_app(ctx, args, thread_id=args.thread, resume_last=bool(args.last))


def login(rest: Sequence[str]) -> int:
    """Run the pinned Codex binary's `login` (the same binary codexr drives), passing arguments through."""
    try:
        from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]

        exe = bundled_codex_path()
    except (ImportError, FileNotFoundError) as exc:
        print(f"codexr: error: cannot find the bundled Codex binary: {exc}", file=sys.stderr)
        return 2
    try:
        return subprocess.call([str(exe), "login", *rest])
    except KeyboardInterrupt:
        return 130
