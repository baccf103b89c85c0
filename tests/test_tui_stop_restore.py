"""Ctrl+C in the app while a rewind restores files (issue 36): it was ignored without a word, where the CLI rolls back
and exits 130. Now the restore stops between two steps and rolls back, the fork goes, and the app says so in one line.

Real Codex, scripted model: the agent rewrites 3,000 tracked files from the shell, the rewind puts them back; Ctrl+C
is pressed once the restore has begun changing them (seen on disk, no fixed pause)."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path
from typing import Any

from e2e_helpers import session_options
from fs_helpers import tree
from test_tui_app import drive, ready, turns_done, type_and_send
from test_tui_dialogs import started, story_files
from textual.pilot import Pilot
from tui_helpers import screen_text, until, until_shown, words

from app.codex.scripted_model import ScriptedModel, message, shell
from app.errors import SessionError, Stopped
from app.tui.app import CodexrApp
from app.tui.rewind_picker import RewindPicker

FILES = 3000


def _workspace_tree(ws: Path) -> dict[str, Any]:
    """Every file below the workspace but Git's own (Codex's `git status` may refresh the index's stat data)."""
    return {p: v for p, v in tree(ws).items() if not p.startswith(".git/")}


def test_ctrl_c_while_a_rewind_restores_3000_files_rolls_them_back_and_says_so(model: ScriptedModel,
                                                                               tmp_path: Path) -> None:
    model.script("stop-many", [shell(f"for i in $(seq -w 0 {FILES - 1}); do echo after $i > many/f$i.txt; done"),
                               message("rewrote them all")])
    model.script("stop-after", [message("still here")])
    opts = session_options(model, tmp_path, {f"many/f{i:04}.txt": f"before {i}\n" for i in range(FILES)})
    ws = opts.cwd
    subprocess.run("git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm base", shell=True,
                   cwd=ws, check=True)
    first = [ws / "many" / f"f{i:04}.txt" for i in range(64)]  # the first writes of the restore (in path order)
    app = CodexrApp(opts)
    seen: dict[str, Any] = {}

    def begun() -> bool:
        """The restore has put back at least one file (it is under way, not done)."""
        return any(p.read_text() == f"before {i}\n" for i, p in enumerate(first))

    async def scenario(pilot: Pilot[Any]) -> None:
        await ready(pilot)
        await type_and_send(pilot, "stop-many please")
        await until(pilot, lambda: turns_done(app) == 1 and not app.busy, "the turn that rewrites the files")
        assert app.driver is not None
        thread = app.driver.thread_id
        assert (ws / "many" / "f2999.txt").read_text() == "after 2999\n"
        seen["before"] = _workspace_tree(ws)
        await pilot.press("ctrl+r")
        await until(pilot, lambda: isinstance(app.screen, RewindPicker) and app.screen._ready
                    and not app.screen.in_flight, "the plan of the rewind to prompt 1")
        await pilot.press("enter")
        await until(pilot, begun, "the restore to begin")
        await pilot.press("ctrl+c")
        text = await until_shown(pilot, "Ctrl+C: the rewind was rolled back: files as before")
        assert len(app.screen_stack) == 1, "the picker closes: nothing changed"
        line = next(ln for ln in words(text).split("• ") if "Ctrl+C: the rewind" in ln)
        assert "nothing changed" in line and "is archived" in line, line
        assert app.driver.thread_id == thread and app.composer.text == ""  # no fork, no prompt put back
        seen["after"] = _workspace_tree(ws)
        assert "↷ redo" not in screen_text(app).splitlines()[-2]  # nothing to redo
        await type_and_send(pilot, "stop-after please")  # the app goes on, on the same thread
        await until(pilot, lambda: turns_done(app) == 2 and not app.busy, "a prompt after the stopped rewind")
        assert app.driver.thread_id == thread

    drive(app, scenario)
    before, after = seen["before"], seen["after"]
    assert len([p for p in before if p.startswith("many/f")]) == FILES
    assert after == before  # byte for byte, modes too: every file as it was before the rewind


def test_ctrl_c_before_a_rewind_or_redo_changes_a_file_stops_it_with_nothing_changed(model: ScriptedModel,
                                                                                      tmp_path: Path) -> None:
    """The driver's side of Ctrl+C, before the restore begins: the rewind (waiting here for the driver's lock, which
    the test holds, as behind any store operation) declines at its confirmation, so no fork is made and no file
    changes; a redo likewise. Asked with nothing running, there is nothing to stop."""
    d = started(model, tmp_path, story_files(model, "early"))
    ws, origin = d.opts.cwd, d.thread_id
    assert d.session is not None and origin is not None
    try:
        assert d.stop_restore() is None

        def stopped_early(run: Any) -> str:
            out: dict[str, BaseException] = {}

            def work() -> None:
                try:
                    run()
                except SessionError as exc:
                    out["exc"] = exc

            with d._ops:  # the operation waits for the lock: Ctrl+C comes before its first step
                t = threading.Thread(target=work)
                t.start()
                while d.stop_restore() is None:  # the operation has begun (and is waiting)
                    assert t.is_alive(), out
                    t.join(0.01)
            t.join(60)
            assert isinstance(out.get("exc"), Stopped), out
            return str(out["exc"])

        before = _workspace_tree(ws)
        threads = {t.thread_id for t in d.session.threads()}
        text = stopped_early(lambda: d.rewind(1))
        assert text == "Ctrl+C: the rewind was stopped before any file changed; nothing changed"
        assert _workspace_tree(ws) == before and d.thread_id == origin
        assert {t.thread_id for t in d.session.threads()} == threads  # no fork was made
        assert len(d.session.sidecar(origin).redo) == 0

        d.rewind(1)
        rewound = _workspace_tree(ws)
        text = stopped_early(d.redo)
        assert text == "Ctrl+C: the redo was stopped before any file changed; nothing changed"
        assert _workspace_tree(ws) == rewound and d.thread_id != origin  # still on the fork, its redo kept
        d.redo()
        assert _workspace_tree(ws) == before and d.thread_id == origin
    finally:
        d.close()
