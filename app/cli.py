"""`codexr` command line: parses arguments, loads settings, dispatches; user mistakes exit 2 in one line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from config import ConfigError, codex_home, load_settings
from snapshot_store import StoreError

from . import agent_cmds, demo, snapshot_cmds
from .context import Context, UsageError

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as one line with exit code 2 (its default) and no usage dump."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"codexr: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree; every command accepts --json."""
    parser = _Parser(prog="codexr", description="Codex with synchronized rewind of conversation and files.")
    parser.add_argument("-c", "--config", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config.toml setting (repeatable), like the official codex")
    parser.add_argument("--enable", action="append", default=[], metavar="FEATURE", help="enable a feature")
    parser.add_argument("--disable", action="append", default=[], metavar="FEATURE", help="disable a feature")
    parser.add_argument("-C", "--cd", dest="cd", default=".", metavar="DIR", help="the workspace directory")
    parser.add_argument("-m", "--model", help="model for Codex")
    parser.add_argument("-s", "--sandbox", choices=["read-only", "workspace-write", "danger-full-access"],
                        help="Codex sandbox policy")
    parser.add_argument("-a", "--ask-for-approval", choices=["untrusted", "on-failure", "on-request", "never"],
                        help="when Codex asks before running commands")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    snapshot_cmds.register(sub)
    agent_cmds.register(sub)
    demo.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `codexr` console script."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        home = codex_home()
        settings = load_settings(home, overrides=args.overrides, enable=args.enable, disable=args.disable)
        ctx = Context(home=home, settings=settings, json=bool(getattr(args, "json", False)))
        try:
            return int(args.handler(ctx, args))
        finally:
            ctx.close()
    except (StoreError, ConfigError, UsageError) as exc:
        lines = str(exc).strip().splitlines() or ["unknown error"]
        print(f"codexr: error: {lines[0]}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("codexr: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
