"""Which command lines a resident server may run: the console script (app/launch.py), the CLI and the server agree.

Imports: `os` and `sys` only, as app/launch.py's per-command cost requires.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not `typing`'s: importing typing costs ~15 ms (it imports re); mypy reads this name as True
if TYPE_CHECKING:
    from collections.abc import Sequence

#: The one-shot commands a server may run (the rest need this process: the app, line mode, login, replay, demo).
ONESHOT = frozenset({"snapshots", "exec", "threads", "rewind", "redo", "history", "config", "doctor"})
#: Global flags taking a value (`app/cli.py`'s `_add_global_flags`; tests/test_server.py checks they agree).
VALUE_FLAGS = frozenset({"-c", "--config", "--enable", "--disable", "-C", "--cd", "-m", "--model", "-p", "--profile",
                         "-s", "--sandbox", "-a", "--ask-for-approval", "--codex-bin", "-i", "--image", "--add-dir"})
#: Global flags without a value that a server may see before the command.
PLAIN_FLAGS = frozenset({"--json", "--dangerously-bypass-approvals-and-sandbox", "--yolo"})


def hold_collector(argv: Sequence[str]) -> None:
    """Run a restoring one-shot command (`rewind`, `redo`, `snapshots restore`) without Python's cyclic collector.

    Such a command decodes a snapshot's whole map (100,000 entries at 100,000 files, none in a reference cycle), and
    its process ends with the command (`os._exit`, in a server's worker as without a server): the collector's passes
    over what it built were 100-200 ms of a one-shot 100,000-file rewind without a server (987 -> 886 ms, 6 rounds
    each, alternating; fewer through the server, whose fork starts with its imports frozen: bench/README.md), for no
    memory the process would use again: a restore of 30,000 rewritten files peaked at 129-135 MB without it, 134-147
    MB with it. Not a capture, whose walk leaves reference cycles (a cold 100,000-file capture peaked at 160 MB
    without the collector, 145 MB with it), nor `exec`, whose agent turn may run for hours. Only for a process that
    ends with the command: the console script's one-shot path and a server's worker.
    """
    global _FOR_LIFE
    at = command_at(argv)
    if at is None:
        return
    word = argv[at]
    if word in ("rewind", "redo") or (word == "snapshots" and "restore" in argv[at + 1:at + 2]):
        import gc

        gc.disable()
        _FOR_LIFE = True


_HELD = False  # the collector is off until the command's modules are imported (hold_startup, imports_done)
_FOR_LIFE = False  # ... and stays off after that (hold_collector)


def hold_startup(argv: Sequence[str]) -> None:
    """Import a one-shot command's modules without the collector; `imports_done` lets it run again.

    Importing codexr's modules builds ~100,000 objects that live as long as the process, and the collector's
    young passes walked them ~25 times: ~3 ms of a one-shot unchanged `snapshots capture` (~52 ms, no server; a
    server's worker starts with them imported and frozen); the SDK's ~1,000 models `exec` imports made ~195 passes,
    ~40 ms. `imports_done` comes when the command's store is open, or (`exec`, `rewind`, `redo`) once the session's
    modules are imported, before Codex starts: an agent turn, which may run for hours, always has its collector. A
    command that reaches neither keeps the collector off to its end (`threads`, `history`, `config`, `doctor`, all
    short).
    """
    global _HELD
    if command_of(argv) is None:
        return
    import gc

    if gc.isenabled():
        gc.disable()
        _HELD = True


def imports_done() -> None:
    """The command's modules are imported (its store is open): hide them from the collector for good (`gc.freeze`:
    the process ends with the command) and let it run again, unless the command runs without it."""
    global _HELD
    if not _HELD:
        return
    _HELD = False
    import gc

    gc.freeze()
    if not _FOR_LIFE:
        gc.enable()


class Importing:
    """`with Importing():` around a long-running command's own big import (the app's Textual modules): no
    collector passes while it builds objects that live as long as the process, which are then frozen out of the
    collector's sight; the collector is back on at the end, whatever happened (~15 ms of the app's ~150 ms import).
    """

    def __enter__(self) -> None:
        import gc

        self._was = gc.isenabled()
        gc.disable()

    def __exit__(self, *_exc: object) -> None:
        import gc

        gc.freeze()
        if self._was:
            gc.enable()


def command_of(argv: Sequence[str]) -> str | None:
    """The command `argv` names when only known global flags come before it (else None: run here)."""
    at = command_at(argv)
    return None if at is None else argv[at]


def command_at(argv: Sequence[str]) -> int | None:
    """Where `command_of`'s command stands in `argv` (None: none)."""
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in VALUE_FLAGS:
            i += 2
        elif (arg.startswith("--") and "=" in arg and arg.split("=", 1)[0] in VALUE_FLAGS) or arg in PLAIN_FLAGS:
            i += 1
        elif arg.startswith("-"):
            return None
        else:
            return i
    return None


def server_off() -> bool:
    """Whether the user turned the resident server off (`CODEXR_SERVER=0`)."""
    return os.environ.get("CODEXR_SERVER", "1").strip().lower() in ("0", "off", "no", "false")


def server_wanted(argv: Sequence[str]) -> bool:
    """Whether this command may run in the resident server."""
    if server_off():
        return False
    flags = sys.flags
    if (flags.dev_mode or flags.isolated or flags.ignore_environment or flags.no_site or flags.verbose
            or sys.warnoptions or getattr(sys, "_xoptions", None)):
        return False
    if confinement_vars_set():
        return False  # a command Codex runs in its sandbox: never a server's (issue 17)
    return command_of(argv) in ONESHOT


def confinement_vars_set() -> bool:
    """Whether this process runs inside Codex's sandbox, by the variables Codex sets there (`CODEX_SANDBOX*`)."""
    from .confinement import in_codex_sandbox

    return in_codex_sandbox(os.environ)
