"""`codexr demo`: the real Codex, offline against a scripted model, rewound and redone.

On a terminal it opens the interactive session (the TUI, or the line mode with `--plain`) where the scripted
model answers free text (its vocabulary is on the first screen); on a non-terminal, or with `--script`, it
runs a self-checking story. Everything happens in a scratch directory (workspace and its own CODEX_HOME),
never in ~/.codex.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .context import Context

if TYPE_CHECKING:  # the scripted model (an HTTP server) and the session (the SDK) load only when the demo runs
    from ..codex.scripted_model import ScriptedModel
    from ..session import SessionOptions

PROMPT_1 = "Add a test for greet()"
PROMPT_2 = "Make greet() shout, drop the notes, regenerate the docs"


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the `demo` command."""
    p = sub.add_parser("demo", help="offline demo: the real Codex against a scripted model in a scratch workspace; "
                                    "interactive on a terminal, a self-checking story otherwise")
    p.add_argument("--dir", help="where to build the scratch workspace (default: a new temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the scratch workspace and CODEX_HOME afterwards")
    p.add_argument("--script", action="store_true", help="run the self-checking story even on a terminal")
    p.add_argument("--plain", action="store_true", default=argparse.SUPPRESS,
                   help="interactive in line mode instead of the full-screen app")
    p.add_argument("--json", action="store_true", help="print a JSON summary (of the story)")
    p.add_argument("--serve", action="store_true",
                   help="serve the scripted model and a scratch CODEX_HOME until Ctrl+C, and print the two lines to "
                        "paste in another shell to try exec, threads, rewind, redo and history offline")
    p.add_argument("--port", type=int, default=0, help="with --serve: the 127.0.0.1 port (default: a free one)")
    p.set_defaults(handler=dispatch)


def dispatch(ctx: Context, args: argparse.Namespace) -> int:
    """Interactive on a terminal; the self-checking story on a pipe, in CI, with --script or --json."""
    from ..codex.codex_bin import choose

    # `codexr --codex-bin X demo` tries build X; `ctx.loaded` (None: every setting a default) spares pydantic
    codex_bin = choose(args.codex_bin, ctx.loaded).sdk_value()
    if args.serve:
        return serve(ctx, args)
    if args.script or args.json or not (sys.stdin.isatty() and sys.stdout.isatty()):
        return run(ctx, args, codex_bin)
    return interactive(args, plain=bool(getattr(args, "plain", False)), codex_bin=codex_bin)


def banner(ws: Path, *, app: bool = False) -> str:
    """The first screen of the interactive demo: what this is and the scripted model's vocabulary."""
    from ..codex.scripted_model import RESPONDER_HELP

    if app:  # Markdown in the app's transcript: one line per idea, the app's own keys
        vocabulary = RESPONDER_HELP.replace("\n", " ")
        return (f"**codexr demo**: the real Codex against a scripted model on 127.0.0.1, in a scratch workspace "
                f"`{ws}`\n\n"
                f"- **Try**: {vocabulary}\n"
                "- **Esc Esc** (or `/rewind`) puts the files and the conversation back to before a prompt; "
                "`/redo` undoes the rewind\n"
                "- `/diff`, `/snapshots`, **F1** for the rest; **Ctrl+Q** (or `/quit`) leaves")
    return (f"codexr demo: the real Codex against a scripted model on 127.0.0.1, in a scratch workspace {ws}\n"
            f"Try: {RESPONDER_HELP}\n"
            "/rewind puts the files and the conversation back to before a prompt; /redo undoes the rewind\n"
            "/diff, /snapshots, /help for the rest; /quit (or Ctrl+D) leaves")


def interactive(args: argparse.Namespace, *, plain: bool, codex_bin: str | None = None) -> int:
    """The demo a person plays with: the TUI (or line mode) on a scratch workspace and CODEX_HOME."""
    splash = None
    if not plain:  # the app's first frame now: the SDK and Textual load behind it (app/tui/splash.py)
        from ..tui.splash import Splash

        splash = Splash.show()
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="codexr-demo-"))
    ws, home = base / "workspace", base / "codex-home"
    kept = bool(args.keep or args.dir)
    try:
        ws.mkdir(parents=True, exist_ok=True)
        from ..codex.scripted_model import ScriptedModel, responder, write_codex_home

        _new_workspace(ws)
        with ScriptedModel() as model:
            model.script("", [responder()])
            env = write_codex_home(home, model.base_url)

            def options() -> SessionOptions:
                """Built in the app's worker: importing the session (the SDK) does not delay the first frame."""
                from config import load_settings

                from ..session import SessionOptions

                return SessionOptions(cwd=ws, codex_home=home, settings=load_settings(home), env=env,
                                      codex_bin=codex_bin)

            def farewell(thread_id: str, _workspace: str) -> str:
                return demo_farewell(thread_id, base, kept=kept)

            if plain:
                from ..shared.plain import run_plain

                return run_plain(options(), banner=banner(ws), farewell=farewell)
            from ..tui.app import run_tui

            return int(run_tui(options, banner=banner(ws, app=True), workspace=str(ws), splash=splash,
                               farewell=farewell))
    except BaseException:
        if splash is not None and not splash.released:  # a failure before the app took the terminal
            splash.close()
        raise
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"(kept {base})")


def demo_farewell(thread_id: str, base: Path, *, kept: bool) -> str:
    """The interactive demo's exit line: its scratch directory (workspace, CODEX_HOME, threads) is deleted as it
    ends unless kept, and its scripted model stops, so a plain `codexr resume` line would name what is gone."""
    import shlex

    if not kept:
        return (f"The demo's scratch workspace and CODEX_HOME ({base}) are removed now, thread {thread_id} with "
                "them. To keep a demo workspace and go on with its threads: codexr demo --serve --dir DIR")
    return (f"To continue this thread: codexr demo --serve --dir {shlex.quote(str(base))}, paste the lines it prints "
            f"into another shell, then codexr resume {thread_id}")


def serve(ctx: Context, args: argparse.Namespace) -> int:
    """The scripted model on 127.0.0.1 and a scratch workspace and CODEX_HOME pointing at it, until Ctrl+C: every
    codexr command (and the official `codex`) can then be tried offline in another shell."""
    import shlex
    import signal
    import threading

    from ..codex.scripted_model import RESPONDER_HELP, ScriptedModel, last_user_text, responder, write_codex_home

    if not 0 <= args.port <= 65535:
        from .context import UsageError

        raise UsageError(f"--port {args.port}: not a port number")
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="codexr-demo-"))
    ws, home = base / "workspace", base / "codex-home"
    ws.mkdir(parents=True, exist_ok=True)
    _new_workspace(ws)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        model = ScriptedModel(port=args.port)
        try:
            model.start()
        except OSError as exc:
            from .context import UsageError

            raise UsageError(f"cannot serve the scripted model on 127.0.0.1:{args.port}: {exc.strerror}") from exc
        with model:
            model.script("", [responder()])
            env = write_codex_home(home, model.base_url)
            exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            bin_dir = codexr_dir()
            if bin_dir is not None:  # another shell has no venv activated: the line puts this codexr first on PATH
                exports = f'PATH={shlex.quote(str(bin_dir))}:"$PATH" {exports}'
            if ctx.json:
                ctx.emit({"workspace": str(ws), "codex_home": str(home), "env": env, "base_url": model.base_url,
                          "codexr": str(bin_dir / "codexr") if bin_dir is not None else None})
            else:
                print(f"codexr demo --serve: a scripted model on {model.base_url}, a scratch CODEX_HOME and a "
                      f"workspace in {base}")
                print("In another shell, paste these two lines, then try e.g. codexr exec 'create notes.txt hello', "
                      "codexr exec --last 'edit notes.txt more', codexr threads, codexr rewind --last --to 2, "
                      "codexr redo --last, codexr history search hello:")
                print()
                print(f"export {exports}")
                print(f"cd {shlex.quote(str(ws))}")
                print()
                if bin_dir is None:
                    print(f"(no codexr command is installed beside {sys.executable}: run it there as "
                          f"{shlex.quote(sys.executable)} -m app)")
                print(f"The model understands: {RESPONDER_HELP}")
                print("Ctrl+C stops it.", flush=True)
            seen = 0
            while not stop.wait(0.2):  # one line per model request, so the user sees the other shell's turns
                for request in model.requests[seen:]:
                    if not ctx.json:
                        print(f"model: answered {last_user_text(request)[:70]!r}", flush=True)
                seen = len(model.requests)
        return 0
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
        elif not ctx.json:
            print(f"(kept {base})")


def codexr_dir() -> Path | None:
    """The directory of the `codexr` command this Python runs (a venv's or pipx's `bin`), None if it has none: the
    shell the user pastes into may not have it on PATH (`python3 bootstrap.py` runs codexr from `.venv`)."""
    here = Path(sys.executable).parent
    script = here / "codexr"
    return here if script.is_file() and os.access(script, os.X_OK) else None


def _git(ws: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=codexr demo", "-c", "user.email=demo@codexr.invalid",
                    "-c", "init.defaultBranch=main", *args], cwd=ws, check=True, capture_output=True)


def _tree(ws: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirs, files in os.walk(ws):
        dirs[:] = [d for d in dirs if d != ".git"]
        for f in files:
            p = Path(dirpath, f)
            out[p.relative_to(ws).as_posix()] = p.read_bytes()
    return out


def _new_workspace(ws: Path) -> None:
    """The demo project, unless `--dir` names a demo kept before: its workspace is taken as it is, so its threads
    go on (rewriting its files or committing again would undo what was done there)."""
    if not any(ws.iterdir()):
        _make_workspace(ws)


def _make_workspace(ws: Path) -> None:
    (ws / "src").mkdir(parents=True, exist_ok=True)
    (ws / "src" / "app.py").write_text("def greet(name):\n    return f'hello {name}'\n")
    (ws / "README.md").write_text("# demo project\n")
    if shutil.which("git"):
        _git(ws, "init", "-q")
        _git(ws, "add", "-A")
        _git(ws, "commit", "-qm", "initial")
    (ws / "local-notes.md").write_text("an uncommitted idea\n")


def _script(model: ScriptedModel) -> None:
    from ..codex.scripted_model import add_file, delete_file, message, shell, update_file

    model.script(PROMPT_1, [
        add_file("tests/test_app.py", "from src.app import greet\n\n\ndef test_greet():\n"
                                      "    assert greet('x') == 'hello x'\n"),
        message("Added tests/test_app.py."),
    ])
    model.script(PROMPT_2, [
        update_file("src/app.py", "    return f'hello {name}'", "    return f'HELLO {name.upper()}!'"),
        delete_file("local-notes.md"),
        shell("mkdir -p docs && echo 'generated by a shell command' > docs/api.txt"),
        message("Done: greet() shouts, notes removed, docs regenerated."),
    ])


def run(ctx: Context, args: argparse.Namespace, codex_bin: str | None = None) -> int:
    """Two prompts, the second a bad experiment; rewind to it, then redo."""
    from config import load_settings

    from ..codex.scripted_model import ScriptedModel, write_codex_home
    from ..session import Session, SessionOptions

    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="codexr-demo-"))
    ws, home = base / "workspace", base / "codex-home"
    ws.mkdir(parents=True, exist_ok=True)
    say = ctx.info
    checks: dict[str, bool] = {}
    try:
        _make_workspace(ws)
        with ScriptedModel() as model:
            _script(model)
            env = write_codex_home(home, model.base_url)
            settings = load_settings(home)
            say(f"workspace:  {ws}\nCODEX_HOME: {home}  (a scratch one; your ~/.codex is not touched)\n")
            opts = SessionOptions(cwd=ws, codex_home=home, settings=settings, env=env, codex_bin=codex_bin)
            with Session(opts) as session:
                thread = session.start_thread()
                one = session.run_turn(thread, PROMPT_1)
                say(f"prompt 1: {PROMPT_1!r}\n  agent: {one.final_message}  (files: {', '.join(one.files_changed)})")
                before_two = _tree(ws)
                two = session.run_turn(thread, PROMPT_2)
                after_two = _tree(ws)
                say(f"prompt 2: {PROMPT_2!r}\n  agent: {two.final_message}")
                gone = sorted(set(before_two) - set(after_two))
                made = sorted(set(after_two) - set(before_two))
                say(f"  now deleted: {', '.join(gone) or '-'}; created: {', '.join(made) or '-'}")

                plan = session.rewind(thread, 2, dry_run=True)
                say("\n/rewind to prompt 2 — preview:")
                if plan.restore is not None:
                    from ..shared.lines import plan_lines

                    for line in plan_lines(plan.restore.plan, "  "):
                        say(line)
                rew = session.rewind(thread, 2)
                checks["files back to before prompt 2"] = _tree(ws) == before_two
                fork_prompts = [p.text for p in session.prompts(rew.thread_id)]
                checks["conversation forked before prompt 2"] = fork_prompts == [PROMPT_1]
                checks["prompt 2 returned for editing"] = rew.prompt == PROMPT_2
                say(f"  conversation continues on {rew.thread_id} with prompts {fork_prompts}")
                say(f"  safety snapshot {str(rew.safety_id)[:12]}; prompt back in the composer: {rew.prompt!r}")

                redo = session.redo(rew.thread_id)
                checks["redo restores every file"] = _tree(ws) == after_two
                checks["redo returns to the original thread"] = redo.thread_id == thread
                say(f"\n/redo: back on {redo.thread_id}; files as after prompt 2 again")
        ok = all(checks.values())
        for name, passed in checks.items():
            say(f"  [{'ok' if passed else 'FAILED'}] {name}")
        if ctx.json:
            ctx.emit({"workspace": str(ws), "checks": checks, "ok": ok})
        say("\ndemo " + ("passed: nothing was lost" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
        elif not ctx.json:
            print(f"(kept {base})")
