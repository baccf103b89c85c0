"""`codexr exec | threads | rewind | redo`: the non-interactive surface over the session core."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from ..shared.lines import done_lines, plan_lines, retry_line, show_path, since_rewind_lines, thread_counts
from ..shared.vocab import CONVERSATION_MODES, RewindMode, mode_words
from .context import Context, UsageError
from .exits import restore_exit
from .picks import add_choice_flags, picks_from
from .snapshot_cmds import print_plan

if TYPE_CHECKING:  # the SDK import costs ~0.5 s: only commands that start Codex pay it
    from ..services.thread_catalog import ThreadCatalog, ThreadSummary
    from ..session import ApprovalRequest, RedoPreview, RewindPreview, RewindResult, Session, SessionOptions


def _bypass_flag(p: argparse.ArgumentParser) -> None:
    """`--dangerously-bypass-approvals-and-sandbox` (`--yolo`) after the command too, as codex takes it there; its
    default is the one before the command (`apply_bypass` turns it into -s and -a)."""
    p.add_argument("--dangerously-bypass-approvals-and-sandbox", "--yolo", dest="bypass", action="store_true",
                   default=argparse.SUPPRESS,
                   help="as `codex exec` takes it: no sandbox and no approvals (-s danger-full-access -a never); "
                        "every turn is still snapshotted and can be rewound")


def apply_bypass(args: argparse.Namespace) -> None:
    """The bypass flag as what it means, `-s danger-full-access -a never`; beside an -s or -a that says otherwise,
    one line (UsageError) before anything starts."""
    if not getattr(args, "bypass", False):
        return
    if args.sandbox not in (None, "danger-full-access") or args.ask_for_approval not in (None, "never"):
        raise UsageError("--dangerously-bypass-approvals-and-sandbox means -s danger-full-access -a never: "
                         "drop the -s or -a that says otherwise")
    args.sandbox, args.ask_for_approval = "danger-full-access", "never"


def _codex_flags(p: argparse.ArgumentParser) -> None:
    """The pass-through flags are also accepted after the subcommand, as `codex exec -m …` does."""
    p.add_argument("-C", "--cd", dest="cd", default=argparse.SUPPRESS, metavar="DIR", help="the workspace directory")
    p.add_argument("-m", "--model", default=argparse.SUPPRESS, help="model for Codex")
    p.add_argument("-p", "--profile", default=argparse.SUPPRESS, metavar="NAME",
                   help="layer $CODEX_HOME/NAME.config.toml on config.toml, as `codex exec -p` does")
    p.add_argument("-s", "--sandbox", default=argparse.SUPPRESS,
                   choices=["read-only", "workspace-write", "danger-full-access"])
    p.add_argument("-a", "--ask-for-approval", default=argparse.SUPPRESS,
                   choices=["untrusted", "on-failure", "on-request", "never"])
    p.add_argument("--codex-bin", default=argparse.SUPPRESS, metavar="PATH", help="the Codex executable to run")
    p.add_argument("--add-dir", dest="add_dirs", action="append", default=argparse.SUPPRESS, metavar="DIR",
                   help="a directory the agent may write besides the workspace (repeatable), as `codex exec --add-dir`")


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the agent commands."""
    p = sub.add_parser("exec", help="run one prompt with snapshots and print the agent's final message")
    _codex_flags(p)
    p.add_argument("prompt", nargs="?",
                   help="the prompt text (`-`, or none with stdin piped: read it from stdin, as `codex exec` does; "
                        "with a prompt, what is piped on stdin is appended to it as a <stdin> block)")
    p.add_argument("-i", "--image", dest="images", action="append", default=argparse.SUPPRESS, metavar="FILE",
                   help="attach an image to the prompt (repeatable)")
    who = p.add_mutually_exclusive_group()
    who.add_argument("--thread", help="continue this thread (its id or a unique prefix of 4+ characters)")
    who.add_argument("--last", action="store_true", help="continue this workspace's most recent codexr thread")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="interrupt the turn when the model has sent nothing for SECONDS (a command the agent runs "
                        "stops the clock); 0: no limit. Default: none on a terminal, 300 otherwise")
    p.add_argument("-o", "--output-last-message", dest="output_last", metavar="FILE",
                   help="also write the agent's final message to FILE, as `codex exec -o` does")
    p.add_argument("--output-schema", metavar="FILE",
                   help="a JSON Schema file the agent's final message must follow (as `codex exec --output-schema`)")
    p.add_argument("--ephemeral", action="store_true", help=argparse.SUPPRESS)  # refused in _exec, saying why
    p.add_argument("--skip-git-repo-check", action="store_true",
                   help="accepted as `codex exec` takes it: codexr never requires a Git repository")
    p.add_argument("--color", choices=("always", "never", "auto"), default="auto",
                   help="accepted as `codex exec` takes it: codexr's output has no colors whatever it says")
    _bypass_flag(p)
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(handler=_exec)

    p = sub.add_parser("threads", help="threads of this workspace with prompt count, snapshot coverage, redo depth")
    _codex_flags(p)
    p.add_argument("--all", action="store_true", help="every workspace")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_threads)

    p = sub.add_parser("rewind", help="fork the conversation before prompt N and restore its files")
    _codex_flags(p)
    _which_thread(p)
    p.add_argument("--to", required=True, help="1-based prompt number or a turn id")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--files-only", action="store_true", help="restore files, keep the conversation")
    mode.add_argument("--conversation-only", action="store_true", help="fork the conversation, keep files")
    p.add_argument("--dry-run", action="store_true", help="print the plan and change nothing")
    p.add_argument("-y", "--yes", action="store_true",
                   help="do not ask for confirmation (a file you and the agent changed on the same or adjacent lines "
                        "is kept)")
    add_choice_flags(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_rewind)

    p = sub.add_parser("redo", help="undo the last rewind that landed on this thread")
    _codex_flags(p)
    _which_thread(p)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("-y", "--yes", action="store_true")
    add_choice_flags(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=_redo)


def _which_thread(p: argparse.ArgumentParser) -> None:
    """`--thread ID` or `--last`, one of them: after `exec --last`, a rewind or redo is asked of the same thread."""
    who = p.add_mutually_exclusive_group(required=True)
    who.add_argument("--thread", help="the thread id or a unique prefix of 4+ characters")
    who.add_argument("--last", action="store_true",
                     help="this workspace's most recent codexr thread (as `exec --last`; after a rewind, its fork)")


def _named_thread(session: Session, args: argparse.Namespace) -> str:
    """The full id of the thread `--thread` or `--last` names (SessionError, one line, when there is none)."""
    from ..session import named_thread

    found = named_thread(session, args.thread, args.last, "`codexr threads` lists the others: --thread ID")
    assert found is not None  # argparse requires one of --thread and --last
    return found


def _seconds(text: str) -> float:
    """`--timeout`'s value: seconds, 0 or more (argparse words a mistake as one line, exit 2)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: give 0 (no limit) or more seconds")
    return value


def exec_timeout(args: argparse.Namespace) -> float:
    """The bound on the model's silence: `--timeout`, else none when a person at a terminal can press Ctrl+C, else
    Codex's own idle limit for a model stream (app/cmds/stall.py)."""
    from .stall import DEFAULT_TIMEOUT_S

    if args.timeout is not None:
        return float(args.timeout)
    return 0.0 if sys.stdin.isatty() else DEFAULT_TIMEOUT_S


def session_options(ctx: Context, args: argparse.Namespace) -> SessionOptions:
    """How to start Codex for the workspace with the pass-through flags (also for the interactive front ends)."""
    from ..codex.codex_bin import choose

    ctx.workspace(args.cd)  # the store or Codex's home as workspace stops here, before Codex starts
    apply_bypass(args)  # the app, line mode and resume (exec has applied it already)
    codex_bin = choose(args.codex_bin, ctx.settings).sdk_value()  # a bad path stops here, before the SDK loads
    from ..session import SessionOptions

    return SessionOptions(cwd=args.cd, codex_home=ctx.home, settings=ctx.settings, model=args.model,
                          sandbox=args.sandbox, approval_policy=args.ask_for_approval,
                          config_overrides=codex_overrides(args), codex_bin=codex_bin,
                          add_dirs=added_dirs(getattr(args, "add_dirs", None) or []))


def added_dirs(dirs: list[str]) -> tuple[str, ...]:
    """`--add-dir` directories as absolute paths (relative ones from where the user stands, as codex takes them);
    one that is not a directory is refused before Codex starts."""
    out: list[str] = []
    for d in dirs:
        path = added_dir_path(d)
        if not os.path.isdir(path):
            raise UsageError(f"--add-dir {d}: no such directory")
        if path not in out:
            out.append(path)
    return tuple(out)


def added_dir_path(d: str) -> str:
    """An `--add-dir` directory as the absolute path Codex is given (`~` expanded, relative to where the user stands,
    links resolved)."""
    return os.path.realpath(os.path.expanduser(d))


def codex_overrides(args: argparse.Namespace) -> tuple[str, ...]:
    """The `-c`, `--enable` and `--disable` flags meant for Codex (codexr's own keys stay with codexr)."""
    overrides: list[str] = []
    if args.overrides:  # telling codexr's keys from Codex's needs the settings models (pydantic, ~40 ms)
        from config import split_overrides

        overrides += split_overrides(args.overrides)
    overrides += [f"features.{f}=true" for f in args.enable if f != "file_snapshots"]
    overrides += [f"features.{f}=false" for f in args.disable if f != "file_snapshots"]
    return tuple(overrides)


def open_session(ctx: Context, args: argparse.Namespace, approval: Any = None, ahead: str | None = None,
                 watch: bool = True, read_ahead: bool = False) -> Session:
    """Start Codex for the workspace with the pass-through flags (`ahead`, `watch`, `read_ahead`: Session's)."""
    opts = session_options(ctx, args)  # a bad --codex-bin fails here, before the SDK loads
    from ..server.oneshot import imports_done
    from ..session import Session
    from .context import say_recovery

    imports_done()  # the SDK's models are imported: the collector runs again for the turn (app/server/oneshot.py)

    # An interrupted restore this command finishes is never silent (the capture taken ahead may finish one).
    return Session(opts, approval=approval, on_notice=_say_attached, on_recovery=say_recovery, ahead=ahead,
                   watch=watch, read_ahead=read_ahead)


def _say_attached(method: str, params: dict[str, Any]) -> None:
    """A command that works through Codex's daemon says so (app/services/threads.py), on stderr."""
    if method == "codexr/attached":
        print(f"codexr: {params.get('message')}", file=sys.stderr)


def _decline_noninteractive(req: ApprovalRequest) -> str:
    what = req.command or ", ".join(str(c.get("path")) for c in req.changes) or req.kind
    print(f"codexr: declined an approval request (non-interactive): {what}", file=sys.stderr)
    return "decline"


def retry_notices(limit: float = 0.0) -> Callable[[str, dict[str, Any]], None]:
    """A turn's event callback that says each of Codex's own retries on stderr as it happens.

    Codex retries a failing provider by itself (`error` notifications with `willRetry`); without these
    lines `codexr exec` looked hung. When nothing answers at the provider's address at all, Codex waits
    for the network with no limit of its own (verified with 0.163.0: retries 5, 10, 20, 40 s apart and
    on, `stream_max_retries` does not bound it), so the first such notice says how it ends: after `limit`
    seconds without an answer (`exec --timeout`), or by Ctrl+C. Codex's giving up (`willRetry: false`) is the
    turn's error, which the caller prints once.
    """
    waiting_said = False

    def on_event(method: str, params: dict[str, Any]) -> None:
        nonlocal waiting_said
        if method != "error" or not params.get("willRetry"):
            return
        err = params.get("error")
        err = err if isinstance(err, dict) else {"message": str(err)}
        message = " ".join(str(err.get("message") or "").split())
        line = "codexr: " + retry_line(message, str(err.get("additionalDetails") or ""))
        if "waiting for network" in message and not waiting_said:
            waiting_said = True
            line += ("; it cannot reach the model provider and keeps waiting"
                     + (f": codexr gives up after {limit:g} s without an answer (--timeout), Ctrl+C stops now"
                        if limit else " without a limit: Ctrl+C stops"))
        print(line, file=sys.stderr, flush=True)

    return on_event


def positional_words(words: list[str], takes_value: Callable[[str], bool], *, past_dashdash: bool = True
                     ) -> list[int]:
    """Where the words that are neither an option nor an option's value stand (`takes_value(option)`: it consumes the
    next word). `--` ends the options: the words after it are all positional, or not looked at (`past_dashdash`)."""
    spots: list[int] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            if past_dashdash:
                spots += range(i + 1, len(words))
            break
        if word.startswith("-") and word != "-":
            i += 2 if "=" not in word and takes_value(word) else 1
            continue
        spots.append(i)
        i += 1
    return spots


def codex_resume_words(words: list[str], takes_value: Callable[[str], bool]) -> list[str]:
    """`exec resume [--last | ID] PROMPT`, `codex exec`'s spelling (its subcommand comes right after `exec`), as
    codexr's `exec [--last | --thread ID] PROMPT`: it ran a turn on the prompt "resume". `words` follow `exec`;
    `takes_value(option)` says which options consume the next word. ValueError for one naming no thread (the
    prompt may be piped on stdin, as for `exec`)."""
    if words[:1] != ["resume"]:
        return words  # `exec --last resume` sends that word, as it always did
    words = words[1:]
    if "--last" in words or any(w == "--thread" or w.startswith("--thread=") for w in words):
        return words
    spots = positional_words(words, takes_value)
    if not spots:  # the prompt may come on stdin (`… | codex exec resume ID`), the thread may not
        raise ValueError("`exec resume` needs a thread, as `codex exec resume ID PROMPT` does (or `--last PROMPT`); "
                         "codexr spells them `exec --thread ID PROMPT` and `exec --last PROMPT` too")
    return [*words[:spots[0]], "--thread", words[spots[0]], *words[spots[0] + 1:]]


#: How long `codexr exec PROMPT` looks for input on a piped stdin before it goes on without (`codex exec` waits for
#: the end of it however long: a harness or an ssh session that leaves stdin open then waits forever).
STDIN_GRACE_S = 0.5


def _stdin_fd() -> int | None:
    """stdin's descriptor when it is open and not a terminal (what `codex exec` reads), else None."""
    try:
        fd = sys.stdin.fileno()
        return None if os.isatty(fd) else fd
    except (AttributeError, ValueError, OSError):
        return None


def _prompt_from_stdin(what: str = "the prompt read from stdin") -> str:
    """`codexr exec -` (or no PROMPT with stdin piped): the prompt is stdin's whole text, as `codex exec` takes it."""
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{what} is not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what}: {exc.strerror or exc}") from None


def with_piped_stdin(prompt: str) -> str:
    """`cmd | codexr exec PROMPT`: what stdin holds appended as `codex exec` appends it (a `<stdin>` block; blank
    input adds nothing). A pipe or socket that has given nothing, not even its end, within STDIN_GRACE_S is not
    waited for (one line on stderr says so): the one place codexr differs, so an open, silent stdin never hangs it.
    Unless the pipe's writers are commands of the same pipeline (`make | codexr exec "why"`, app/cmds/piped.py):
    their output is waited for, as `codex exec` waits, with one line saying whose."""
    fd = _stdin_fd()
    if fd is None:
        return prompt
    import select
    import stat

    try:
        mode = os.fstat(fd).st_mode
        silent = (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)) and not select.select([fd], [], [], STDIN_GRACE_S)[0]
    except (OSError, ValueError):
        return prompt
    if silent:
        from .piped import command_name, producers

        found = producers(fd)
        if not found:
            print(f"codexr: stdin gave nothing in {STDIN_GRACE_S:g} s: not read (codex exec would wait for it); to "
                  "send a slow command's output, pipe the whole prompt to `codexr exec -`", file=sys.stderr)
            return prompt
        names = ", ".join(f"{command_name(pid)} (pid {pid})" for pid in found[:3])
        print(f"codexr: waiting for stdin: {names} of this pipeline still writing it (Ctrl+C stops)",
              file=sys.stderr, flush=True)
    extra = _prompt_from_stdin("the text piped on stdin")
    if not extra.strip():
        return prompt
    end = "" if extra.endswith("\n") else "\n"
    return f"{prompt}\n\n<stdin>\n{extra}{end}</stdin>"


def _check_writable(path: str) -> None:
    """`-o FILE`: refused before Codex starts when FILE can be neither written nor made (nothing else changes)."""
    parent = os.path.dirname(path)
    writable = os.access(path, os.W_OK) if os.path.exists(path) else os.access(parent, os.W_OK)
    if os.path.isdir(path) or not os.path.isdir(parent) or not writable:
        raise UsageError(f"-o {path}: cannot write there (a directory, a missing directory, or no permission)")


def _wrote_last(path: str, text: str) -> bool:
    """Write the final message for `-o`; a failure is one line on stderr (the turn itself stands)."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return True
    except OSError as exc:
        print(f"codexr: error: -o {path}: the final message was not written: {exc.strerror or exc}", file=sys.stderr)
        return False


def _exec(ctx: Context, args: argparse.Namespace) -> int:
    apply_bypass(args)
    if args.ephemeral:
        raise UsageError("--ephemeral: codexr keeps every thread it runs, so that a rewind can fork its conversation "
                         "and restore its files; run `codex exec --ephemeral` for a turn nothing keeps")
    schema = _output_schema(args.output_schema) if args.output_schema else None
    if args.output_last:  # where the user stands, as any path they type
        args.output_last = os.path.abspath(args.output_last)
        _check_writable(args.output_last)
    from ..codex.images import check_images
    from ..errors import SessionError

    try:  # a missing or unreadable image: one line, before Codex starts
        check_images(getattr(args, "images", ()))
    except SessionError as exc:
        raise UsageError(str(exc)) from exc
    # stdin last: a flag refused above is said at once, not after the input ends
    if args.prompt is None and _stdin_fd() is None:
        raise UsageError("no prompt: give the prompt text as the argument (or `-` and the text on stdin)")
    if args.prompt is None or args.prompt == "-":
        args.prompt = _prompt_from_stdin()
    else:
        args.prompt = with_piped_stdin(args.prompt)
    if not args.prompt.strip():  # `codex exec` refuses it too ("No prompt provided"): before Codex starts
        raise UsageError("empty prompt: give the prompt text as the argument (or `-` and the text on stdin)")
    # A new thread's pre-turn capture is taken while Codex starts (app/recording/recorder.py, PreTurnAhead).
    ahead = None if args.thread or args.last else args.prompt
    limit = exec_timeout(args)
    with open_session(ctx, args, approval=_decline_noninteractive, ahead=ahead) as session:
        from ..session import ensure_thread
        from .stall import StallGuard

        thread = ensure_thread(session, args.thread, args.last)
        if session.opts.add_dirs and session.choices.turn_settings.current()[2] == "read-only":
            print("codexr: --add-dir has no effect: the sandbox is read-only (with -s workspace-write the agent may "
                  "write there)", file=sys.stderr)
        notices = retry_notices(limit)
        guard = StallGuard(session, limit)

        def on_event(method: str, params: dict[str, Any]) -> None:
            notices(method, params)
            guard.on_event(method, params)

        images = tuple(getattr(args, "images", ()))
        if limit:
            with guard:
                out = session.run_turn(thread, args.prompt, on_event, images, schema)
        else:
            out = session.run_turn(thread, args.prompt, notices, images, schema)
        held, most = session.recorder.over_limit  # the turn's last capture: untracked files it held back
    if held:
        from ..shared.lines import over_limit_line

        print(f"codexr: warning: {over_limit_line(held, most)}", file=sys.stderr)
    if guard.fired and out.status != "completed":
        out.error = _timed_out(ctx, args, limit) + (f" (Codex: {out.error})" if out.error else "")
    if out.notice:
        print(f"codexr: {out.notice}", file=sys.stderr)
    unwritten = bool(args.output_last) and not _wrote_last(args.output_last, out.final_message or "")
    if ctx.json:
        ctx.emit(out.as_json())
    else:
        if out.final_message:
            print(out.final_message)
        if out.error:
            print(f"codexr: turn {out.status}: {out.error}", file=sys.stderr)
        if out.capture_error:
            print(f"codexr: warning: {out.capture_error}", file=sys.stderr)
        print(f"thread {out.thread_id}  turn {out.turn_id}  {out.status}"
              + (f"  files: {len(out.files_changed)}" if out.files_changed else ""), file=sys.stderr)
    return 0 if out.status == "completed" and not unwritten else 1


def _output_schema(path: str) -> dict[str, Any]:
    """`--output-schema FILE`'s JSON object, read before Codex starts: a missing file or one that is not a JSON
    object is one line (Codex checks the schema itself when the turn starts)."""
    import json

    try:
        with open(path, "rb") as fh:
            doc = json.loads(fh.read())
    except OSError as exc:
        raise UsageError(f"--output-schema {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(f"--output-schema {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"--output-schema {path}: a JSON Schema is a JSON object, this file holds a "
                         f"{type(doc).__name__}")
    return doc


def _timed_out(ctx: Context, args: argparse.Namespace, limit: float) -> str:
    """Why exec interrupted the turn, naming the provider's address when config.toml gives it."""
    from ..codex.provider import configured_provider

    provider = configured_provider(ctx.home, codex_overrides(args))
    who = "the model provider"
    if provider is not None:
        who += f" {provider.name}" + (f" at {provider.base_url}" if provider.base_url and provider.from_table else "")
    return (f"no answer from {who} for {limit:g} s (exec --timeout SECONDS, 0: no limit); what the turn changed "
            "is captured")


@contextlib.contextmanager
def read_threads(ctx: Context, args: argparse.Namespace) -> Iterator[ThreadCatalog]:
    """The workspace's thread catalog through a read-only app-server: neither the SDK nor a recording is started
    to list (app/codex/rpc_lines.py says why); Codex is chosen and configured as for a session."""
    from ..codex.codex_bin import choose
    from ..codex.rpc_lines import ReadOnlyAppServer
    from ..recording.sidecar import Sidecars
    from ..recording.workspace_lock import LastThread
    from ..services.thread_catalog import ThreadCatalog

    cwd = ctx.workspace(args.cd)
    binary = choose(args.codex_bin, ctx.loaded)  # None: no source sets codexr keys, so none sets codex_bin
    with ReadOnlyAppServer(binary.path, cwd=cwd, env={"CODEX_HOME": str(ctx.home)},
                           config_overrides=codex_overrides(args), path_dirs=binary.path_dirs()) as server:
        yield ThreadCatalog(server.call, Sidecars(ctx.store_dir, create=False), LastThread(ctx.store_dir, cwd), cwd)


def _threads(ctx: Context, args: argparse.Namespace) -> int:
    from ..shared.times import json_time, screen_time
    with read_threads(ctx, args) as catalog:
        rows = catalog.threads(all_workspaces=args.all)
        short = catalog.thread_prefixes([r.thread_id for r in rows])
    if ctx.json:
        ctx.emit([{"thread_id": r.thread_id, "id_prefix": short[r.thread_id], "source": r.source,
                   "preview": r.preview, "prompts": r.prompts,
                   "prompts_with_snapshots": r.with_snapshots, "conversation_only": r.conversation_only,
                   "redo_depth": r.redo_depth, "updated": json_time(r.updated or None), "tracking": r.tracking,
                   "forked_from": r.forked_from, "rewound_before_prompt": r.rewound_before, "label": r.label,
                   "cwd": r.cwd, "damaged": r.damaged}
                  for r in rows])
        _say_damaged(rows)
        return 0
    if not rows:
        print("no threads" + ("" if args.all else " in this workspace"))
    width = max((len(p) for p in short.values()), default=0)
    for r in rows:  # the full id, then the shortest prefix `--thread` takes for it
        print(f"{r.thread_id}  {short[r.thread_id]:<{width}}  {screen_time(r.updated or None)}  {r.source:<10}  "
              f"{thread_counts(r)}  {r.label}")
    _say_damaged(rows)
    return 0


def _say_damaged(rows: list[ThreadSummary]) -> None:
    """A line on stderr for each thread whose sidecar cannot be read: what is wrong and the way out."""
    for r in rows:
        if r.damaged:
            print(f"codexr: warning: {r.damaged}", file=sys.stderr)


def _confirm(ctx: Context, args: argparse.Namespace, session: Session, what: str) -> Any:
    """The confirmation a rewind or redo asks before anything changes (with --yes: none, only warnings)."""
    from ..session import RedoPreview

    others = session.other_sessions()
    if not args.yes and not sys.stdin.isatty():
        raise UsageError(f"{what} changes files and the conversation: pass --yes to confirm when not on a "
                         "terminal (or --dry-run to preview)")

    def ask(preview: RewindPreview | RedoPreview) -> bool:
        out = sys.stderr if ctx.json else sys.stdout
        if others:
            print(f"warning: other codexr sessions are live in this workspace: {'; '.join(others)}", file=out)
            for line in session.others_warning(preview.thread_id, preview.plan)[1:]:  # the files at stake
                print(f"warning: {line.removeprefix('! ')}", file=out)
        if not ctx.json and isinstance(preview, RedoPreview):
            for line in since_rewind_lines(preview.changed_since_rewind, preview.turns_since_rewind):
                print(line)
        if args.yes:
            return True
        if preview.plan is not None:  # with --json stdout holds the JSON alone: the plan and questions go to stderr
            print_plan(session.store, preview.plan, False, out)
            ask_conflicts(session.store, preview, what, out)
        answer = asked(f"Apply this {what}? A safety snapshot has been taken. [y/N] ", out)
        return answer.strip().lower() in ("y", "yes")

    return ask


def asked(question: str, out: TextIO) -> str:
    """One typed line, the question written to `out` ('' at end of input)."""
    print(question, end="", file=out, flush=True)
    try:
        return input()
    except EOFError:
        return ""


def ask_conflicts(store: Any, preview: RewindPreview | RedoPreview, what: str, out: TextIO) -> None:
    """Each file the agent and the user changed on the same or adjacent lines: both sides shown, then keep mine / take
    the restored state / keep both (the restored state beside it). The answers go in `preview.choices`."""
    from ..rewind.picks import choice_hint, conflict_header, conflict_question, parse_choice
    from ..services.changes import sides_diff

    suffix = "rewound" if what == "rewind" else "redone"
    for path, theirs in preview.sides.items():
        assert preview.plan is not None
        print(conflict_header(show_path(path), suffix), file=out)
        diff = sides_diff(store, preview.plan.root, path, theirs).splitlines()
        for line in diff[:40]:
            print(f"  {show_path(line)}", file=out)
        if len(diff) > 40:
            print(f"  … {len(diff) - 40} more lines", file=out)
        while (choice := parse_choice(asked(conflict_question(show_path(path), suffix), out), suffix, path)) is None:
            print(choice_hint(path), file=out)
        preview.choices[path] = choice


def _mode(args: argparse.Namespace) -> RewindMode:
    return (RewindMode.FILES if args.files_only else RewindMode.CONVERSATION if args.conversation_only
            else RewindMode.BOTH)


def _print_rewind(res: RewindResult) -> None:
    if res.dry_run:
        print(f"rewind thread {res.origin_thread} to prompt {res.to_prompt} ({res.mode}):")
        if res.restore is not None:
            for line in plan_lines(res.restore.plan, "  "):
                print(line)
        if res.no_snapshot_reason:
            print(f"files: left as they are ({res.no_snapshot_reason}: conversation only)")
        if res.mode in CONVERSATION_MODES:
            print("the conversation would continue on a fork ending just before that prompt")
        print(f"prompt {res.to_prompt}: {res.prompt}")
        return
    headline = f"rewound thread {res.origin_thread} to before prompt {res.to_prompt} ({mode_words(res.mode)})"
    for line in done_lines(headline, res.thread_id, res.safety_id, res.restore, res.no_snapshot_reason):
        print(line)
    print(f"prompt {res.to_prompt} (edit and send it again):")
    print(res.prompt)


def _rewind(ctx: Context, args: argparse.Namespace) -> int:
    from ..errors import Declined

    mode = _mode(args)
    with open_session(ctx, args, watch=False, read_ahead=True) as session:
        args.thread = _named_thread(session, args)
        confirm = None if args.dry_run else _confirm(ctx, args, session, "rewind")
        try:
            res = session.rewind(args.thread, args.to, mode, dry_run=args.dry_run, confirm=confirm,
                                 picks=picks_from(args, session.cwd), resume=not args.dry_run, yes=args.yes)
        except Declined as exc:
            print(exc)
            return 1
    if ctx.json:
        ctx.emit(res.as_json())
    else:
        _print_rewind(res)
    return 0 if res.dry_run else restore_exit(res.restore, "rewind")


def _redo(ctx: Context, args: argparse.Namespace) -> int:
    from ..errors import Declined

    with open_session(ctx, args, watch=False, read_ahead=True) as session:
        args.thread = _named_thread(session, args)
        confirm = None if args.dry_run else _confirm(ctx, args, session, "redo")
        try:
            res = session.redo(args.thread, dry_run=args.dry_run, confirm=confirm, picks=picks_from(args, session.cwd),
                               resume=not args.dry_run)
        except Declined as exc:
            print(exc)
            return 1
    if ctx.json:
        ctx.emit(res.as_json())
        return 0 if res.dry_run else restore_exit(res.restore, "redo")
    if res.dry_run:
        for line in since_rewind_lines(res.changed_since_rewind, res.turns_since_rewind):
            print(line)
        if res.restore is not None:
            for line in plan_lines(res.restore.plan, "  "):
                print(line)
        print(f"redo would return to thread {res.thread_id}")
        return 0
    headline = f"redo: back on thread {res.thread_id}, where the rewind started ({mode_words(res.mode)})"
    for line in done_lines(headline, res.thread_id, res.safety_id, res.restore):
        print(line)
    if res.thread_id != args.thread:  # the conversation went back to another thread: say how to reach it
        print(f"the conversation is thread {res.thread_id}: go on with `codexr resume {res.thread_id}`, or in the "
              f"official TUI with /resume (`codexr codex resume {res.thread_id}`)")
    return restore_exit(res.restore, "redo")
