"""`codexr` command line: parses arguments, loads settings, dispatches; user mistakes exit 2 in one line."""

from __future__ import annotations

import argparse
import codecs
import os
import sys
from collections.abc import Callable, Sequence
from importlib import import_module
from typing import TYPE_CHECKING, Any

from .cmds.exits import EXIT_USAGE, end_by_signal
from .stdfds import open_standard_fds

if TYPE_CHECKING:
    from pathlib import Path

    from config import CodexrSettings

    from .cmds.context import Context

PATH_SAFE = "codexr-path"
#: The command modules, in the order `codexr --help` lists their commands.
COMMAND_MODULES = ("snapshot_cmds", "agent_cmds", "demo", "tui_cmds", "doctor", "history_cmds", "config_cmds",
                   "server_cmds", "proxy_cmds")
#: Top-level command -> the module that registers it. `codexr CMD ...` imports and builds only that module's
#: parsers: the whole tree costs ~97 ms CPU (imports ~78, argparse ~19; history's part alone ~4 ms once the shared
#: modules are loaded), most of which `codexr history ...` never uses. A command missing here still works, through
#: the whole tree.
COMMANDS = {
    "snapshots": "snapshot_cmds", "exec": "agent_cmds", "threads": "agent_cmds", "rewind": "agent_cmds",
    "redo": "agent_cmds", "demo": "demo", "resume": "tui_cmds", "login": "tui_cmds", "replay": "tui_cmds",
    "doctor": "doctor", "history": "history_cmds", "config": "config_cmds", "server": "server_cmds",
    "codex": "proxy_cmds", "app-server": "proxy_cmds",
}


def _path_safe(exc: UnicodeError) -> tuple[str, int]:
    """Codec error handler: bytes a path could not decode (surrogateescape) print as \\xNN, as show_path does.

    Paths are not text: a workspace named b'ws-\\xff' must print under a strict UTF-8 stdout too.
    """
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    out = []
    for ch in exc.object[exc.start:exc.end]:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        else:
            out.append(ch.encode("ascii", "backslashreplace").decode())
    return "".join(out), exc.end


codecs.register_error(PATH_SAFE, _path_safe)


def _safe_streams() -> None:
    """Never let an unencodable character in a path turn output into a traceback."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors=PATH_SAFE)


def _columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the width of the terminal on sys.__stdout__, else 80."""
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns if columns > 0 else 80


class _Formatter(argparse.HelpFormatter):
    """argparse's help layout with the width found as argparse finds it, without importing shutil for it: argparse
    makes a formatter for every argument it adds (to check its metavar), and shutil with the compression modules it
    loads was ~1.7 ms of every one-shot command (measured, `-X importtime`)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


class _Parser(argparse.ArgumentParser):
    """argparse that reports mistakes as one line with exit code 2 (its default) and no usage dump."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"codexr: error: {message} (see `{self.prog} --help`)\n")


class _Retry(Exception):
    """The narrowed parse could not settle the command line: the whole tree parses it (and words any error)."""


class _TryParser(_Parser):
    """A parser of the narrowed tree: a mistake is never reported from here, the whole tree parses again."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _Retry(message)


class _Unbuilt:
    """A subcommand the narrowed tree leaves out, as the command line names another: whatever is asked, nothing."""

    def __getattr__(self, _name: str) -> Callable[..., _Unbuilt]:
        return lambda *_args, **_kwargs: self


class _OneSubParsers(argparse._SubParsersAction):  # type: ignore[type-arg]
    """A command group's subcommands in a narrowed tree: only the one the command line names is built (building
    `snapshots`' seven was ~2 ms of a one-shot `codexr snapshots capture`'s ~55, measured)."""

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        wanted: str = getattr(self._parser_class, "wanted", "")
        if name != wanted and wanted not in kwargs.get("aliases", ()):
            return _Unbuilt()
        return super().add_parser(name, **kwargs)


def _group_parser(word: str) -> type[_TryParser]:
    """The parser class of a narrowed tree's command, whose group (if it has one) builds only subcommand `word`."""

    class _GroupParser(_TryParser):
        wanted = word

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.register("action", "parsers", _OneSubParsers)

    return _GroupParser


def _add_global_flags(parser: argparse.ArgumentParser) -> None:
    """The flags taken before the command (all but the app's own, `tui_cmds.add_app_flags`)."""
    parser.add_argument("-c", "--config", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a setting (repeatable), like the official codex")
    parser.add_argument("--enable", action="append", default=[], metavar="FEATURE", help="enable a feature")
    parser.add_argument("--disable", action="append", default=[], metavar="FEATURE", help="disable a feature")
    parser.add_argument("-C", "--cd", dest="cd", default=".", metavar="DIR", help="the workspace directory")
    parser.add_argument("-m", "--model", help="model for Codex")
    parser.add_argument("-p", "--profile", metavar="NAME",
                        help="layer $CODEX_HOME/NAME.config.toml on config.toml, as the official codex -p does")
    parser.add_argument("-s", "--sandbox", choices=["read-only", "workspace-write", "danger-full-access"],
                        help="Codex sandbox policy")
    parser.add_argument("-a", "--ask-for-approval", choices=["untrusted", "on-failure", "on-request", "never"],
                        help="when Codex asks before running commands")
    parser.add_argument("--dangerously-bypass-approvals-and-sandbox", "--yolo", dest="bypass", action="store_true",
                        help="as the official codex takes it: no sandbox and no approvals (-s danger-full-access "
                             "-a never); every turn is still snapshotted and can be rewound")
    parser.add_argument("--add-dir", dest="add_dirs", action="append", default=[], metavar="DIR",
                        help="a directory the agent may write besides the workspace (repeatable), as the official "
                             "codex takes it (workspace-write sandbox); codexr snapshots the workspace only")
    parser.add_argument("--codex-bin", metavar="PATH",
                        help="the Codex executable to run (else $CODEXR_CODEX_BIN, file_snapshots.codex_bin, pinned)")
    parser.add_argument("--version", action="store_true",
                        help="print the versions of codexr, the SDK and the Codex binary (--json too)")
    parser.add_argument("--json", dest="json_global", action="store_true", help="print JSON")
    parser.add_argument("--plain", action="store_true",
                        help="line mode: the interactive session in a plain REPL (no full screen); with `demo` too")
    parser.add_argument("-i", "--image", dest="images", action="append", default=[], metavar="FILE",
                        help="attach an image to the first prompt (repeatable): the app, --plain, exec")


def build_parser(modules: Sequence[str] = COMMAND_MODULES, parser_class: type[_Parser] = _Parser,
                 app_flags: bool = True, command_class: type[_Parser] | None = None) -> argparse.ArgumentParser:
    """The command tree (by default the whole of it); every command accepts --json. The commands' parsers are of
    `command_class` (by default `parser_class`)."""
    parser = parser_class(prog="codexr", description="Codex with synchronized rewind of conversation and files.")
    _add_global_flags(parser)
    if app_flags:
        from .cmds.tui_cmds import add_app_flags

        add_app_flags(parser)
    sub = parser.add_subparsers(dest="command", parser_class=command_class or parser_class)
    for name in modules:
        import_module(f".cmds.{name}", __package__).register(sub)
    _flags_after_every_command(parser)
    return parser


#: The settings flags a (sub)command also takes after its name: (flags, dest before the command, dest after it,
#: metavar, help).
_SETTINGS_AFTER = ((("-c", "--config"), "overrides", "overrides_after", "KEY=VALUE", "override a setting (repeatable)"),
                   (("--enable",), "enable", "enable_after", "FEATURE", "enable a feature"),
                   (("--disable",), "disable", "disable_after", "FEATURE", "disable a feature"))


def _flags_after_every_command(parser: argparse.ArgumentParser) -> None:
    """`-C/--cd DIR` after any (sub)command too, meaning what it means before it: users type it where they think
    of it (`codexr history list -C DIR`). Given in both places, the one after the command wins, as for any option
    a subcommand takes (its default is SUPPRESS, so the global value stands when it is absent).

    `-c/--config`, `--enable` and `--disable` too, as `codex exec -c k=v` and `codex app-server -c k=v` take them
    (the IDE extension starts `codex app-server` with its flags after the subcommand): given in both places, both
    count, those after the command last (`_settings_merged`). Not for `codex`, whose words go to the official TUI.
    """
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        for name, sub in action.choices.items():
            if name == "login":
                continue  # Codex's own flags: `codexr login` passes them through untouched
            if "-C" not in sub._option_string_actions:
                sub.add_argument("-C", "--cd", dest="cd", default=argparse.SUPPRESS, metavar="DIR",
                                 help="the workspace directory (as before the command)")
            for flags, _before, after, metavar, what in _SETTINGS_AFTER if name != "codex" else ():
                if flags[0] not in sub._option_string_actions:
                    sub.add_argument(*flags, dest=after, action="append", default=argparse.SUPPRESS, metavar=metavar,
                                     help=f"{what}, as before the command")
            _flags_after_every_command(sub)


def _settings_merged(args: argparse.Namespace) -> argparse.Namespace:
    """The settings flags given after the command appended to those given before it (`_flags_after_every_command`)."""
    for _flags, before, after, _metavar, _what in _SETTINGS_AFTER:
        if hasattr(args, after):
            setattr(args, before, [*getattr(args, before, []), *getattr(args, after)])
            delattr(args, after)
    return args


def _narrowed(argv: list[str]) -> tuple[str | None, list[str], bool, str] | None:
    """(the command, the modules and whether the app's flags are needed to parse `argv`, the word after the command
    if it is no option: a group's subcommand), or None: use everything.

    The global flags are parsed as the whole tree parses them; the first string left over is the command.
    Anything unusual before it (-h, an unknown or misspelt flag, --record, `--`) means the whole tree. A command
    line that starts with the command needs no parser to find it (~0.3 ms of every command, argparse's set-up).
    """
    rest = argv
    if not argv or argv[0] not in COMMANDS:
        pre = _TryParser(prog="codexr", add_help=False)
        _add_global_flags(pre)
        try:
            _ns, rest = pre.parse_known_args(argv)
        except _Retry:
            return None
    if not rest:
        return None, [], True, ""  # no command: the app (or --plain, --version)
    module = COMMANDS.get(rest[0])
    if module is None:
        return None
    word = rest[1] if len(rest) > 1 and not rest[1].startswith("-") else ""
    return rest[0], [module], module == "tui_cmds", word


_NARROW_PARSERS: dict[tuple[tuple[str, ...], bool, str], argparse.ArgumentParser] = {}


def narrow_parser(modules: Sequence[str], app_flags: bool, word: str = "") -> argparse.ArgumentParser:
    """The narrowed tree for `modules`, built once per process (the resident server builds them before it forks:
    ~5-10 ms of every command, argparse and its gettext look-ups). Given `word`, a command group in it builds
    only that subcommand, unless the whole of `modules`' tree is built already."""
    parser = _NARROW_PARSERS.get((tuple(modules), app_flags, ""))
    if parser is not None:
        return parser
    key = (tuple(modules), app_flags, word)
    parser = _NARROW_PARSERS.get(key)
    if parser is None:
        command_class = _group_parser(word) if word else None
        parser = _NARROW_PARSERS[key] = build_parser(modules, _TryParser, app_flags, command_class)
    return parser


def first_prompt(argv: list[str]) -> tuple[list[str], str]:
    """`codexr [FLAGS] PROMPT`: the app's (or --plain's) first prompt split off the command line, as `codex PROMPT`.

    Words after the flags that name no command are the prompt (they must come last). A single word alone (no
    `-i`) stays what it was, a command name: a misspelt command is an error naming the commands, never a prompt.
    """
    from .server.oneshot import command_of  # the console script's own: already loaded, and light

    if command_of(argv) in COMMANDS:  # `codexr history list`: no app flags to build (they load the app's commands)
        return argv, ""
    pre = _TryParser(prog="codexr", add_help=False)
    _add_global_flags(pre)
    from .cmds.tui_cmds import add_app_flags

    add_app_flags(pre)
    try:
        ns, rest = pre.parse_known_args(argv)
    except _Retry:
        return argv, ""
    if not rest or rest[0] in COMMANDS or rest[0].startswith("-") or argv[-len(rest):] != rest:
        return argv, ""
    if len(rest) == 1 and len(rest[0].split()) == 1 and not ns.images:
        return argv, ""
    return argv[:-len(rest)], " ".join(rest)


def _codex_resume(argv: list[str], cmd: int) -> list[str]:
    """`codexr exec resume …` (`exec` at `cmd`) as `codex exec resume …` means it (app/cmds/agent_cmds.py:
    codex_resume_words)."""
    if "resume" not in argv:
        return argv
    from .cmds.agent_cmds import codex_resume_words

    at = cmd + 1
    sub = next(a for a in narrow_parser(["agent_cmds"], False)._actions if isinstance(a, argparse._SubParsersAction))
    options = sub.choices["exec"]._option_string_actions
    try:
        return argv[:at] + codex_resume_words(argv[at:], lambda o: o in options and options[o].nargs != 0)
    except ValueError as exc:
        _Parser(prog="codexr").error(str(exc))
        raise  # not reached: error() exits


def _tui_words(argv: list[str], at: int) -> list[str]:
    """`codexr codex ARGS`: every word after `codex` is the official TUI's (`-m MODEL`, `-c k=v`, `--search`, a
    prompt), set apart with `--`; argparse's remainder collects only from the first word that is not an option,
    so `codexr codex -m o3` was "unrecognized arguments". Kept as codexr's: a leading `-C/--cd DIR` (the
    workspace, as after every command) and a lone `-h/--help`. `codex` stands at `at`."""
    head, rest = argv[:at + 1], argv[at + 1:]
    if rest in (["-h"], ["--help"]):
        return argv
    while rest:
        if rest[0] in ("-C", "--cd") and len(rest) > 1:
            head, rest = head + rest[:2], rest[2:]
        elif rest[0].startswith("--cd=") or (rest[0].startswith("-C") and len(rest[0]) > 2):
            head, rest = head + rest[:1], rest[1:]
        else:
            break
    return [*head, "--", *rest[1:]] if rest[:1] == ["--"] else [*head, "--", *rest] if rest else head


def parse(argv: list[str]) -> argparse.Namespace:
    """Parse as the whole command tree would, building only the part `argv` uses when that is enough."""
    from .server.oneshot import command_at

    at = command_at(argv)  # the words of `exec resume` and `codex` are rewritten first, as the command is theirs
    if at is not None and argv[at] == "exec":
        argv = _codex_resume(argv, at)
    elif at is not None and argv[at] == "codex":
        argv = _tui_words(argv, at)
    narrow = _narrowed(argv)
    if narrow is not None:
        command, modules, app_flags, word = narrow
        try:
            args = narrow_parser(modules, app_flags, word).parse_args(argv)
        except _Retry:
            pass
        else:
            if getattr(args, "command", None) == command:
                return _settings_merged(args)
    return _settings_merged(build_parser().parse_args(argv))


def _plain(ctx: Context, args: argparse.Namespace) -> int:
    """`codexr --plain`: the interactive session in line mode on the workspace (-C) with the Codex flags."""
    from .cmds.agent_cmds import session_options
    from .shared.plain import run_plain

    return run_plain(session_options(ctx, args), prompt=getattr(args, "first_prompt", ""),
                     images=tuple(args.images))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `codexr` console script."""
    open_standard_fds()  # the launcher did (`python -m app.cli` does not pass it)
    _safe_streams()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["login"]:  # Codex's own flags, untouched by our parser
        from .cmds.tui_cmds import login

        return login(argv[1:])
    argv, prompt = first_prompt(argv)
    args = parse(argv)
    args.first_prompt = prompt
    if args.version:
        from .cmds.doctor import version

        args.handler = version
    elif not getattr(args, "handler", None):
        if args.plain:
            args.handler = _plain
        elif not (sys.stdin.isatty() and sys.stdout.isatty()):
            build_parser().print_help()  # no terminal to draw the app on: say what the commands are
            return EXIT_USAGE
        else:
            from .cmds.tui_cmds import run_app

            args.handler = run_app  # no subcommand: the app on the current directory
    from config import ConfigError, codex_home
    from snapshot_store.errors import Interrupted, StoreError

    from .cmds.context import Context, UsageError

    try:
        if getattr(args, "record", None):
            from .cmds.tui_cmds import check_app_flags

            check_app_flags(args)
        if args.images or prompt:
            from .cmds.tui_cmds import check_first_prompt

            check_first_prompt(args)
        home = codex_home()
        if args.profile and getattr(args, "command", None) != "codex":  # the official TUI takes its own (tui_words)
            from config.profiles import profile_overrides

            args.overrides = [*profile_overrides(home, args.profile), *args.overrides]
        config_error = None
        try:
            settings = _settings(args, home)
        except ConfigError:
            config_error = _doctor_goes_on(args, home)
            if config_error is None:
                raise
            settings = None
        ctx = Context(home=home, loaded=settings, json=bool(getattr(args, "json", False) or args.json_global),
                      codex_bin=lambda: _codex_path(args, settings), config_error=config_error)
        try:
            return int(args.handler(ctx, args))
        finally:
            ctx.close()
    except (StoreError, ConfigError, UsageError) as exc:
        lines = str(exc).strip().splitlines() or ["unknown error"]
        print(f"codexr: error: {lines[0]}", file=sys.stderr)
        return EXIT_USAGE
    except Interrupted as exc:  # a restore stopped by a signal: it says what it undid
        print(f"codexr: interrupted: {exc}", file=sys.stderr)
        return end_by_signal(exc.signum)
    except KeyboardInterrupt:
        print("codexr: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:
        # The environment refused something (an unreadable store file, a lock, a full disk): one line.
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"codexr: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE


def _settings(args: argparse.Namespace, home: Path) -> CodexrSettings | None:
    """The validated settings; None when no source sets a codexr key (the defaults, validated only if asked)."""
    from config import defaults_apply

    if defaults_apply(home, overrides=args.overrides, enable=args.enable, disable=args.disable):
        return None
    from config import load_config  # pydantic: ~0.1-0.25 s (bench/bench_startup.py)

    loaded = load_config(home, overrides=args.overrides, enable=args.enable, disable=args.disable)
    for warning in loaded.warnings:
        print(f"codexr: warning: {warning}", file=sys.stderr)
    return loaded.settings


def _doctor_goes_on(args: argparse.Namespace, home: Path) -> str | None:
    """For `codexr doctor` with a settings file that cannot be read: that file's one-line error, which doctor reports
    as its first failure before the checks that need no settings (doctor is what to run when nothing starts).
    None for any other command, or when the fault is a flag on the command line (a usage mistake, exit 2)."""
    if getattr(args, "command", None) != "doctor" or args.version:
        return None
    from config import ConfigError, load_config

    try:
        load_config(home)
    except ConfigError as exc:
        return (str(exc).strip().splitlines() or ["unknown error"])[0]
    return None


def _codex_path(args: argparse.Namespace, settings: CodexrSettings | None) -> str:
    """The Codex executable this command runs, chosen only when something asks (codex_bin is not light)."""
    from .codex.codex_bin import choose

    return str(choose(getattr(args, "codex_bin", None), settings).path)


if __name__ == "__main__":
    sys.exit(main())
