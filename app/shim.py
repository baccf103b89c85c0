"""`codexr-codex`: a Codex executable for clients that start `codex app-server` themselves (the IDE extension's
`chatgpt.cliExecutable`, the SDK's `codex_bin`): `app-server` runs through codexr's proxy, so every prompt gets
file snapshots and can be rewound; every other command is the real Codex, unchanged.

A Codex setting that leads back to this shim (a `codex` wrapper script that execs `codexr-codex`) would start it
forever; the shim marks what it hands over to (`MARK`, carried across exec) and stops with one line when the
binary it handed over to starts it again."""

from __future__ import annotations

import os
import sys

#: Flags Codex takes before its subcommand with a value (the SDK passes `--config k=v` pairs there).
VALUE_FLAGS = frozenset({"-c", "--config", "--enable", "--disable"})
#: `codex app-server`'s own subcommands that serve no protocol to the caller: the real Codex's, as every command.
APP_SERVER_TOOLS = frozenset({"generate-ts", "generate-json-schema", "daemon", "help"})
#: Why `app-server proxy` (Codex's stdio bridge to its app-server daemon) is refused rather than handed to the
#: real Codex: the daemon's turns would run with no snapshot and nothing would say so.
PROXY_REFUSED = ("`app-server proxy` connects to Codex's app-server daemon, whose turns codexr cannot snapshot: "
                 "start `codexr-codex app-server` (codexr's app-server, on stdio) instead, or the real `codex` to "
                 "use the daemon without rewind")
#: "HOW:PID:START:DEPTH": the shim handed over by exec (HOW "exec": the real Codex is this very process) or to
#: `codexr app-server` (HOW "app-server": that process starts its Codex as its child); START tells a reused pid apart.
MARK = "CODEXR_CODEX_SHIM"
#: Shims nested this deep in one environment are a loop too (a wrapper that runs the shim as its child, no exec).
MAX_NESTING = 8


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


def started(pid: int) -> str:
    """When the process started (/proc/PID/stat, kept across exec): with its pid, which process it is."""
    from snapshot_store.procstat import start_time

    return start_time(pid) or ""


def looped(mark: str) -> str | None:
    """How the shim handed over before, when the binary it handed over to started it again; else None."""
    try:
        how, pid, start, depth = mark.split(":")
        handed, nested = int(pid), int(depth)
    except ValueError:
        return None
    me = os.getpid() if how == "exec" else os.getppid()
    return how if (handed == me and start == started(me)) or nested >= MAX_NESTING else None


def mark(how: str) -> None:
    """Say, in the environment of what the shim hands over to, that it came from here."""
    previous = os.environ.get(MARK, "").rpartition(":")[2]
    depth = int(previous) + 1 if previous.isdigit() else 1
    os.environ[MARK] = f"{how}:{os.getpid()}:{started(os.getpid())}:{depth}"


def leads_back(how: str) -> str:
    """The setting that chose the binary that started the shim again: the one `codexr app-server` reads (the
    environment, then the config), or the one the shim execs by (the environment)."""
    from .cmds.context import UsageError
    from .codex.codex_bin import choose

    settings = None
    if how == "app-server":
        from config import ConfigError, codex_home, defaults_apply, load_settings

        home = codex_home()
        try:
            settings = None if defaults_apply(home) else load_settings(home)
        except ConfigError:
            settings = None
    try:
        return choose(None, settings).setting()
    except UsageError:
        return "the Codex binary codexr runs"


def real_codex() -> str:
    """The Codex binary codexr would run (never this shim: `choose` refuses it)."""
    from .codex.codex_bin import choose

    return str(choose(None, None).path)


def main() -> int:
    """Hand `app-server` to `codexr app-server`, everything else (`app-server generate-ts` too) to the real Codex
    (exec: no process between)."""
    from .cmds.context import UsageError

    flags, command, rest = split(sys.argv[1:])
    try:
        how = looped(os.environ.get(MARK, ""))
        if how is not None:
            raise UsageError(f"{leads_back(how)} leads back to codexr-codex, which would start itself forever: "
                             f"point it at the real Codex binary")
        if command == "app-server" and rest[:1] == ["proxy"]:
            raise UsageError(PROXY_REFUSED)
        if command == "app-server" and not (rest[:1] and rest[0] in APP_SERVER_TOOLS):
            codexr = [sys.executable, "-m", "app.cli"]
            pairs = [(flags[i], flags[i + 1]) for i in range(0, len(flags), 2)]
            converted = [arg for flag, value in pairs for arg in (("-c", value) if flag in ("-c", "--config")
                                                                       else (flag, value))]
            mark("app-server")
            os.execv(sys.executable, [*codexr, *converted, "app-server", *rest])
        real = real_codex()
    except UsageError as exc:
        print(f"codexr-codex: error: {exc}", file=sys.stderr)
        return 2
    mark("exec")
    os.execv(real, [real, *sys.argv[1:]])
    return 127  # not reached


if __name__ == "__main__":
    sys.exit(main())
