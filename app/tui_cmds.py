"""`codexr` (no subcommand), `codexr resume` and `codexr login`: the interactive entry points.

Nothing heavy is imported here: Textual loads when the app runs, the Codex SDK only in the app's worker,
so the first frame is not kept waiting.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from .agent_cmds import _codex_flags
from .context import Context, UsageError


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add `resume` and `login` (login is passed through before argparse sees its flags)."""
    p = sub.add_parser("resume", help="open the app on one of this workspace's threads")
    _codex_flags(p)
    who = p.add_mutually_exclusive_group()
    who.add_argument("thread", nargs="?", help="the thread id")
    who.add_argument("--last", action="store_true", help="the workspace's most recent thread")
    p.set_defaults(handler=_resume)
    p = sub.add_parser("login", help="log in to Codex (runs the bundled codex's `login` with your arguments)")
    p.set_defaults(handler=lambda _ctx, args: login(list(getattr(args, "rest", []))))


def run_app(ctx: Context, args: argparse.Namespace, *, thread_id: str | None = None,
            resume_last: bool = False) -> int:
    """Open the terminal UI on the workspace (-C) with the pass-through Codex flags."""
    if not sys.stdin.isatty() or not sys.stdout.isatty():
        raise UsageError("the app needs a terminal; use `codexr exec PROMPT` for scripts")
    from .agent_cmds import session_options
    from .codex_bin import choose

    choose(args.codex_bin, ctx.settings)  # a bad --codex-bin is one error line, not an app that cannot start
    from .tui.app import run_tui

    return run_tui(lambda: session_options(ctx, args), thread_id=thread_id, resume_last=resume_last,
                   settings=ctx.settings, workspace=str(args.cd))


def _resume(ctx: Context, args: argparse.Namespace) -> int:
    if not args.thread and not args.last:
        args.last = True  # `codexr resume` alone: the most recent thread here
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
