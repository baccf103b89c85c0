"""`codexr demo`: an offline walk-through of capture, rewind and redo on a scratch workspace."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from snapshot_store import Store

from .context import Context


def register(sub: argparse._SubParsersAction[Any]) -> None:
    """Add the `demo` command."""
    p = sub.add_parser("demo", help="offline demo: capture, damage, rewind, redo (scratch workspace)")
    p.add_argument("--dir", help="where to build the scratch workspace (default: a new temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the scratch workspace and store afterwards")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.set_defaults(handler=run)


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


def run(ctx: Context, args: argparse.Namespace) -> int:
    """Build a workspace, capture it, break it like a bad agent turn would, rewind, then redo."""
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="codexr-demo-"))
    ws, store_dir = base / "workspace", base / "file_snapshots"
    ws.mkdir(parents=True, exist_ok=True)
    say = ctx.info
    try:
        (ws / "src").mkdir(exist_ok=True)
        (ws / "src" / "app.py").write_text("def greet(name):\n    return f'hello {name}'\n")
        (ws / "README.md").write_text("# demo project\n")
        if shutil.which("git"):
            _git(ws, "init", "-q")
            _git(ws, "add", "-A")
            _git(ws, "commit", "-qm", "initial")
        (ws / "local-notes.md").write_text("an uncommitted idea\n")
        say(f"workspace: {ws}\nstore:     {store_dir}\n")
        with Store.open(store_dir) as store:
            scope = ctx.settings.scope()
            first = store.capture(ws, label="before the experiment", scope=scope)
            before = _tree(ws)
            say(f"1. captured {first.file_count} files -> {first.id[:12]}")

            (ws / "src" / "app.py").write_text("def greet(name):\n    raise NotImplementedError\n")
            (ws / "local-notes.md").unlink()
            (ws / "generated.log").write_text("made by a shell command\n")
            second = store.capture(ws, label="after the experiment", scope=scope)
            after = _tree(ws)
            say("2. a bad experiment edited src/app.py, deleted local-notes.md, created generated.log")
            for c in store.diff(first.id, second.id):
                say(f"     {c.change:<9} {c.path}")

            plan = store.restore(first.id, ws, dry_run=True, scope=scope).plan
            say("3. preview of the rewind:")
            for a in plan.actions:
                if a.op != "rmdir":
                    say(f"     {a.op:<6} {a.path}  ({a.reason})")
            rewind = store.restore(first.id, ws, scope=scope)
            ok_rewind = _tree(ws) == before
            say(f"4. rewound: wrote {len(rewind.written)}, deleted {len(rewind.deleted)}; "
                f"workspace equals step 1: {ok_rewind}")

            assert rewind.safety_id is not None
            redo = store.restore(rewind.safety_id, ws, scope=scope)
            ok_redo = _tree(ws) == after
            say(f"5. redo (restore the safety snapshot {rewind.safety_id[:12]}): wrote {len(redo.written)}, "
                f"deleted {len(redo.deleted)}; workspace equals step 2: {ok_redo}")
        ok = ok_rewind and ok_redo
        if ctx.json:
            ctx.emit({"workspace": str(ws), "rewind_ok": ok_rewind, "redo_ok": ok_redo,
                      "snapshots": [first.id, second.id]})
        say("\ndemo " + ("passed: nothing was lost" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        if not args.keep and not args.dir:
            shutil.rmtree(base, ignore_errors=True)
        elif not ctx.json:
            print(f"(kept {base})")
