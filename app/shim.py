"""`codexr-codex`: a Codex executable for clients that start `codex app-server` themselves (the IDE extension's
`chatgpt.cliExecutable`, the SDK's `codex_bin`): `app-server` runs through codexr's proxy, so every prompt gets
file snapshots and can be rewound; every other command is the real Codex, unchanged."""

from __future__ import annotations

import os
import sys

#: Flags Codex takes before its subcommand with a value (the SDK passes `--config k=v` pairs there).
VALUE_FLAGS = frozenset({"-c", "--config", "--enable", "--disable"})


def split(argv: list[str]) -> tuple[list[str], str | None, list[str]]:
    """(the flags before the subcommand, the subcommand, what follows it)."""
    i = 0
    while i < len(argv):
        if argv[i] in VALUE_FLAGS and i + 1 < len(argv):
            i += 2
        elif argv[i].startswith("-"):
            return argv[:i], None, argv[i:]
        else:
            return argv[:i], argv[i], argv[i + 1:]
    return argv, None, []


def real_codex() -> str:
    """The Codex binary codexr would run (never this shim again, whatever CODEXR_CODEX_BIN says)."""
    from .codex_bin import ENV_VAR, choose, pinned_path

    me = os.path.realpath(sys.argv[0])
    chosen = choose(None, None)
    if os.path.realpath(chosen.path) == me:
        os.environ.pop(ENV_VAR, None)
        return str(pinned_path())
    return str(chosen.path)


def main() -> int:
    """Hand `app-server` to `codexr app-server`, everything else to the real Codex (exec: no process between)."""
    flags, command, rest = split(sys.argv[1:])
    if command == "app-server":
        codexr = [sys.executable, "-m", "app.cli"]
        pairs = [(flags[i], flags[i + 1]) for i in range(0, len(flags), 2)]
        converted = [arg for flag, value in pairs for arg in (("-c", value) if flag in ("-c", "--config")
                                                                   else (flag, value))]
        os.execv(sys.executable, [*codexr, *converted, "app-server", *rest])
    from .context import UsageError

    try:
        real = real_codex()
    except UsageError as exc:
        print(f"codexr-codex: error: {exc}", file=sys.stderr)
        return 2
    os.execv(real, [real, *sys.argv[1:]])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
