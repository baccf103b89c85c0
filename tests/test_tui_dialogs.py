"""The dialog screens against a real Codex: rewind picker, redo, threads, snapshots, diff — driven by keys."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import PipeSession, official_codex_exec, session_options
from rich.syntax import Syntax
from test_driver import Events
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import OptionList, Static
from textual.worker import WorkerCancelled
from tui_helpers import screen_text, until, until_shown

from app.codex.events import ApprovalAsked, Notice, ThreadLoaded, TurnFinished, UserPrompt
from app.codex.scripted_model import ScriptedModel, add_file, message, shell, update_file
from app.services.driver import Driver
from app.tui.ask_dialog import AskDialog
from app.tui.diff_screen import DiffScreen
from app.tui.driver_screen import CallDone, DriverScreen
from app.tui.plan_view import PlanView
from app.tui.redo_dialog import RedoDialog
from app.tui.rewind_picker import RewindPicker
from app.tui.snapshots_screen import SnapshotsScreen
from app.tui.threads_screen import ThreadsScreen

SIZE = (110, 34)
UNSET = object()


class Host(App[None]):
    """A bare app that pushes one dialog and keeps what it dismissed with."""

    def __init__(self, make: Callable[[], Screen[Any]]) -> None:
        super().__init__()
        self.make = make
        self.result: Any = UNSET

    def on_mount(self) -> None:
        self.push_screen(self.make(), callback=self._done)

    def _done(self, result: Any) -> None:
        self.result = result


def started(model: ScriptedModel, base: Path, prompts: list[str], *, config_extra: str = "") -> Driver:
    """A started Driver on a fresh workspace that has run `prompts` (each completed)."""
    ev = Events()
    d = Driver(session_options(model, base, {"keep.txt": "k\n"}, config_extra=config_extra), ev)
    assert d.start()
    for p in prompts:
        turn(d, ev, p)
    d.events = ev  # type: ignore[attr-defined]
    return d


def turn(d: Driver, ev: Events, text: str) -> None:
    d.submit(text)
    assert ev.wait(TurnFinished).status == "completed"


async def settle(pilot: Pilot[Any]) -> None:
    """Let every driver worker finish and its result reach the screen."""
    app = pilot.app
    deadline = time.monotonic() + 60
    quiet = 0
    while quiet < 2:
        assert time.monotonic() < deadline, "the dialog's workers did not finish"
        with contextlib.suppress(WorkerCancelled):  # a dismissed dialog cancels its workers; that is settled too
            await app.workers.wait_for_complete()
        await pilot.pause()
        waiting = getattr(app.screen, "in_flight", 0)  # results not yet shown (a posted message may be in transit)
        quiet = quiet + 1 if not waiting and not any(w.is_running for w in app.workers) else 0


def shown(screen: Screen[Any]) -> str:
    """The text a dialog shows: its labels, list rows (disabled ones marked) and the diff."""
    out = []
    for w in screen.query("*"):
        if not w.display:
            continue
        if isinstance(w, OptionList):
            out += [("(disabled) " if o.disabled else "") + str(o.prompt) for o in w.options]
        elif isinstance(w, Static):
            content = w.content
            out.append(content.code if isinstance(content, Syntax) else str(content))
    return "\n".join(out)


async def opened(pilot: Pilot[Any]) -> None:
    """The Host's dialog is on screen and has begun its first Driver call, then every call has come back."""
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, DriverScreen) and app.screen.is_mounted, "the dialog to open")
    await settle(pilot)


async def showing(pilot: Pilot[Any], *needles: str) -> str:
    """Wait until the dialog shows every needle (a key's effect arrives by messages); what it shows then."""
    await until(pilot, lambda: all(n in shown(pilot.app.screen) for n in needles), f"the dialog to show {needles}")
    return shown(pilot.app.screen)


def run(app: Host, story: Callable[[Pilot[Any]], Any]) -> None:
    async def go() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await opened(pilot)
            await story(pilot)
    asyncio.run(go())


def story_files(model: ScriptedModel, tag: str) -> list[str]:
    """Prompt 1 adds a.txt with apply_patch; prompt 2 changes files from the shell only."""
    model.script(f"{tag}-one", [add_file("a.txt", "one\ntwo\n"), message("made a.txt")])
    model.script(f"{tag}-two", [shell("printf 'x\\ny\\n' > b.txt && echo more >> a.txt"), message("shelled")])
    return [f"{tag}-one please", f"{tag}-two please"]


def test_picker_lists_prompts_previews_the_plan_and_rewinds_both(model: ScriptedModel, tmp_path: Path) -> None:
    d = started(model, tmp_path, story_files(model, "pk"))
    origin = d.thread_id
    try:
        app = Host(lambda: RewindPicker(d, start_prompt=2))

        async def story(pilot: Pilot[Any]) -> None:
            text = shown(pilot.app.screen)
            assert "pk-one please" in text and "A a.txt +2 -0" in text
            assert "M a.txt +1 -0, A b.txt +2 -0" in text  # the shell-made changes, with line counts
            assert "[snapshot]" in text
            # the plan of prompt 2 (preselected), each step with its reason, and the diff of the first file
            assert "W write: a.txt +0 -1" in text
            assert "D delete: b.txt +0 -2 — absent in the target snapshot" in text
            assert "-x\n-y" in text  # the diff of the first step
            await pilot.press("tab", "tab", "down")  # into the plan: the diff follows the highlighted file
            await showing(pilot, "-more")
            await pilot.press("enter")
            await settle(pilot)

        run(app, story)
        assert app.result == ("rewound to prompt 2 (files and conversation): 1 file written, 1 deleted; "
                              "/redo brings it back")
        ws = d.opts.cwd
        assert (ws / "a.txt").read_text() == "one\ntwo\n" and not (ws / "b.txt").exists()
        assert d.thread_id != origin  # a fork holding prompt 1 only
        assert [r.text for r in d.prompt_rows()] == ["pk-one please"]
    finally:
        d.close()


def test_picker_files_only_keeps_the_thread_and_conversation_only_keeps_the_files(
        model: ScriptedModel, tmp_path: Path) -> None:
    d = started(model, tmp_path, story_files(model, "md"))
    origin = d.thread_id
    ws = d.opts.cwd
    try:
        app = Host(lambda: RewindPicker(d, start_prompt=2))

        async def files_only(pilot: Pilot[Any]) -> None:
            await pilot.press("f")
            await showing(pilot, "prompt 2 · files only · conversation: stays as it is")
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)

        run(app, files_only)
        assert app.result == "rewound to prompt 2 (files only): 1 file written, 1 deleted; /redo brings it back"
        assert (ws / "a.txt").read_text() == "one\ntwo\n" and not (ws / "b.txt").exists()
        assert d.thread_id == origin and len(d.prompt_rows()) == 2  # the conversation is untouched

        (ws / "a.txt").write_text("mine\n")
        app = Host(lambda: RewindPicker(d, start_prompt=2))

        async def conversation_only(pilot: Pilot[Any]) -> None:
            await pilot.press("c")
            text = await showing(pilot, "files: left exactly as they are (conversation only)")
            await settle(pilot)
            assert "D delete" not in text  # no plan: files are not touched
            await pilot.press("enter")
            await settle(pilot)

        run(app, conversation_only)
        assert app.result == "rewound to prompt 2 (conversation only); /redo brings it back"
        assert (ws / "a.txt").read_text() == "mine\n"
        assert d.thread_id != origin and [r.text for r in d.prompt_rows()] == ["md-one please"]
    finally:
        d.close()


def test_files_modes_are_disabled_with_the_reason_when_a_prompt_has_no_snapshot(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.script("off-one", [add_file("c.txt", "c\n"), message("made c.txt")])
    d = started(model, tmp_path, ["off-one please"], config_extra="[features]\nfile_snapshots = false")
    origin = d.thread_id
    try:
        app = Host(lambda: RewindPicker(d))

        async def story(pilot: Pilot[Any]) -> None:
            text = shown(pilot.app.screen)
            assert "[no snapshot]  off-one please" in text
            why = "unavailable: prompt 1 ran without a file snapshot"
            assert f"(disabled) ( ) [b] files and conversation — {why}" in text
            assert f"(disabled) ( ) [f] files only — {why}" in text
            assert "(•) [c] conversation only" in text
            assert "prompt 1 · conversation only" in text  # the one mode that applies is chosen
            await pilot.press("f")
            await showing(pilot, "error: files only is unavailable: prompt 1 ran without a file snapshot")
            await pilot.press("enter")
            await settle(pilot)

        run(app, story)
        assert app.result == "rewound to prompt 1 (conversation only); /redo brings it back"
        assert (d.opts.cwd / "c.txt").read_text() == "c\n"
        assert d.thread_id != origin and d.prompt_rows() == []
    finally:
        d.close()


def test_a_thread_the_official_codex_started_is_listed_continued_and_its_prompt_is_conversation_only(
        model: ScriptedModel, tmp_path: Path) -> None:
    model.script("oc-codex", [add_file("o.txt", "by codex\n"), message("codex made o.txt")])
    model.script("oc-codexr", [add_file("p.txt", "by codexr\n"), message("codexr made p.txt")])
    model.script("oc-again", [message("nothing")])
    opts = session_options(model, tmp_path, {"keep.txt": "k\n"})
    assert opts.env is not None
    t = official_codex_exec(opts.env, opts.cwd, "oc-codex please")
    ev = Events()
    d = Driver(opts, ev, thread_id=t)
    try:
        assert d.start()
        app = Host(lambda: ThreadsScreen(d))

        async def listed(pilot: Pilot[Any]) -> None:
            rows = [str(o.prompt) for o in pilot.app.screen.query_one("#threads", OptionList).options]
            mine = [r for r in rows if t in r]
            assert len(mine) == 1, f"the thread `codex exec` started is not listed once: {rows}"
            assert mine[0].startswith("* oc-codex please"), mine
            assert "1 conversation-only" in mine[0] and "from exec" in mine[0], mine
            await pilot.press("escape")

        run(app, listed)
        loaded = ev.wait(ThreadLoaded)
        (first,) = [e for e in loaded.events if isinstance(e, UserPrompt)]
        assert getattr(first, "outside", None) is True and not first.has_snapshot  # the transcript marks it
        turn(d, ev, "oc-codexr please")
        turn(d, ev, "oc-again please")
        said = [e.text for e in ev.seen if isinstance(e, Notice) and "outside codexr" in e.text]
        assert said == [f"thread {t} was started outside codexr (exec): its 1 earlier prompt is conversation-only; "
                        "each prompt codexr sends gets file snapshots"], said
        app = Host(lambda: RewindPicker(d, start_prompt=1))

        async def picker(pilot: Pilot[Any]) -> None:
            text = shown(pilot.app.screen)
            assert "[no snapshot: sent outside codexr]  oc-codex please" in text
            assert "[snapshot]  oc-codexr please" in text
            why = "unavailable: prompt 1 was sent outside codexr, so it has no file snapshot"
            assert f"(disabled) ( ) [f] files only — {why}" in text, text
            assert "(•) [c] conversation only" in text
            await pilot.press("escape")

        run(app, picker)
    finally:
        d.close()


def test_redo_lists_the_conflicts_first_then_brings_everything_back(model: ScriptedModel, tmp_path: Path) -> None:
    """A file the user rewrote after the rewind is a conflict the redo keeps unless chosen: Space on its row takes
    the redone state (issue 34: the user chooses file by file in the preview)."""
    model.script("rd-fork", [message("on the fork")])
    d = started(model, tmp_path, story_files(model, "rd"))
    ev: Events = d.events  # type: ignore[attr-defined]
    origin = d.thread_id
    ws = d.opts.cwd
    try:
        d.rewind(2)
        (ws / "a.txt").write_text("edited after the rewind\n")
        turn(d, ev, "rd-fork please")
        app = Host(lambda: RedoDialog(d))

        async def story(pilot: Pilot[Any]) -> None:
            text = shown(pilot.app.screen)
            assert "! conflict: a.txt" in text and "by you since the rewind" in text, text
            assert "! 1 prompt sent on this fork since the rewind" in text
            assert "W write: b.txt +2 -0" in text
            assert "conversation: back to the original thread with all its turns" in text
            assert "-edited after the rewind" in text and "+more" in text, text  # the conflict's two sides
            await pilot.press("space")  # the highlighted row is the conflict: take the redone state
            await showing(pilot, "the restored state taken (your choice)")
            await pilot.press("enter")
            await settle(pilot)

        run(app, story)
        assert app.result == "redo: back where the rewind started (files and conversation): 2 files written, 0 deleted"
        assert (ws / "a.txt").read_text() == "one\ntwo\nmore\n" and (ws / "b.txt").read_text() == "x\ny\n"
        assert d.thread_id == origin and len(d.prompt_rows()) == 2

        app = Host(lambda: RedoDialog(d))

        async def nothing(pilot: Pilot[Any]) -> None:
            assert "Nothing to redo" in shown(pilot.app.screen)
            await pilot.press("enter")  # nothing happens
            await pilot.press("escape")

        run(app, nothing)
        assert app.result is None
    finally:
        d.close()


def test_threads_screen_resumes_an_older_thread(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("th-old", [add_file("o.txt", "o\n"), message("old")])
    model.script("th-new", [message("new")])
    d = started(model, tmp_path, ["th-old please"])
    ev: Events = d.events  # type: ignore[attr-defined]
    old = d.thread_id
    try:
        d.new_thread()
        turn(d, ev, "th-new please")
        assert d.thread_id != old
        app = Host(lambda: ThreadsScreen(d))

        async def story(pilot: Pilot[Any]) -> None:
            rows = pilot.app.screen.query_one("#threads", OptionList).options
            assert [str(o.prompt).split("\n")[0] for o in rows] == ["* th-new please", "  th-old please"]
            assert "1 prompt · 1 with snapshots" in str(rows[1].prompt)
            await pilot.press("down", "enter")
            await settle(pilot)

        run(app, story)
        assert app.result == f"resumed thread {old}: th-old please"
        assert d.thread_id == old and [r.text for r in d.prompt_rows()] == ["th-old please"]
    finally:
        d.close()


def test_snapshots_screen_previews_and_restores(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("sn-one", [add_file("s.txt", "s\n"), message("made s.txt")])
    d = started(model, tmp_path, ["sn-one please"])
    try:
        oldest = d.snapshots()[-1]
        app = Host(lambda: SnapshotsScreen(d))

        async def story(pilot: Pilot[Any]) -> None:
            await pilot.press("end")  # the oldest: before the prompt ran
            await showing(pilot, f"id {oldest.id[:8]}", "D delete: s.txt +0 -1", "-s")
            await settle(pilot)
            await pilot.press("enter")
            await settle(pilot)

        run(app, story)
        assert str(app.result).startswith(f"restored snapshot {oldest.id[:8]}: 0 files written, 1 deleted")
        assert not (d.opts.cwd / "s.txt").exists() and (d.opts.cwd / "keep.txt").read_text() == "k\n"
    finally:
        d.close()


def test_snapshot_rows_never_show_two_ids_on_one_line(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 20 §5: a safety snapshot's label names the snapshot it restored; wrapped, it put that id beside the
    row's own (`0673221bbb89 · 3 files · id 009fd5e9`). Now a row's id leads its first line, the label is beneath."""
    d = started(model, tmp_path, story_files(model, "two"))
    try:
        d.rewind(2)  # its safety snapshot: "before restoring <id>"
        snaps = d.snapshots()
        assert any(s.label.startswith("before restoring ") for s in snaps)
        for size in ((60, 20), (80, 24), SIZE):
            async def story(pilot: Pilot[Any]) -> None:
                await opened(pilot)
                screen = await until_shown(pilot, f"id {snaps[0].id[:8]}", "before restoring")
                for line in screen.splitlines():
                    assert len(set(re.findall(r"\b[0-9a-f]{8,}\b", line))) <= 1, (line, screen)

            async def go(size: tuple[int, int] = size) -> None:
                async with Host(lambda: SnapshotsScreen(d)).run_test(size=size) as pilot:
                    await story(pilot)

            asyncio.run(go())
    finally:
        d.close()


def test_diff_screen_shows_each_file_and_its_diff(model: ScriptedModel, tmp_path: Path) -> None:
    d = started(model, tmp_path, story_files(model, "df"))
    try:
        app = Host(lambda: DiffScreen(d, None))

        async def last(pilot: Pilot[Any]) -> None:
            text = shown(pilot.app.screen)
            assert "M a.txt +1 -0\nA b.txt +2 -0" in text and "2 files changed, +3 -0" in text
            assert "+more" in text
            await pilot.press("down")
            await showing(pilot, "+x\n+y")
            await pilot.press("escape")

        run(app, last)
        assert app.result is None
        app = Host(lambda: DiffScreen(d, 1))

        async def first(pilot: Pilot[Any]) -> None:
            assert "A a.txt +3 -0\nA b.txt +2 -0" in shown(pilot.app.screen)

        run(app, first)
    finally:
        d.close()


def test_snapshots_of_the_rewind_picker_and_the_redo_dialog(model: ScriptedModel, tmp_path: Path,
                                                            snap_compare: Any) -> None:
    d = started(model, tmp_path, story_files(model, "sv"))
    try:
        async def plan_shown(pilot: Pilot[Any]) -> None:
            await opened(pilot)
            await until_shown(pilot, "prompt 2 · files and conversation", "D delete: b.txt", "-y")

        assert snap_compare(Host(lambda: RewindPicker(d, start_prompt=2)), terminal_size=SIZE, run_before=plan_shown)
        d.rewind(2)
        (d.opts.cwd / "a.txt").write_text("edited after the rewind\n")

        async def redo_shown(pilot: Pilot[Any]) -> None:
            await opened(pilot)
            await until_shown(pilot, "! 1 file you changed since the rewind: kept", "! conflict: a.txt",
                              "W write: b.txt", "+more", "conversation: back to the original thread")

        assert snap_compare(Host(lambda: RedoDialog(d)), terminal_size=SIZE, run_before=redo_shown)
    finally:
        d.close()


def story_owners(model: ScriptedModel, tag: str) -> list[str]:
    """Prompt 1 makes a.txt and c.txt; prompt 2 changes line 1 of a.txt, line 2 of c.txt and makes k.txt."""
    model.script(f"{tag}-one", [add_file("a.txt", "1\n2\n3\n4\n5\n"), add_file("c.txt", "1\n2\n3\n"),
                                message("made them")])
    model.script(f"{tag}-two", [update_file("a.txt", "1", "ONE"), update_file("c.txt", "2", "TWO"),
                                add_file("k.txt", "k\n"), message("changed them")])
    return [f"{tag}-one please", f"{tag}-two please"]


def hand_work(ws: Path) -> None:
    """After prompt 2, by hand: a new file, a hidden one, an edit of a file the agent never touched, a line of the
    user's in a.txt (merges), line 2 of c.txt (the agent's line: a conflict)."""
    (ws / "hand.txt").write_text("mine\n")
    (ws / ".secret").write_text("hidden, by hand\n")
    (ws / "keep.txt").write_text("edited by hand\n")  # a file the agent never touched
    with (ws / "a.txt").open("a") as f:
        f.write("my line\n")
    (ws / "c.txt").write_text("1\nmy two\n3\n")


def test_the_app_rewind_keeps_hand_work_merges_and_a_space_takes_a_conflicts_rewound_side(
        model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 34 in the app: the picker's plan marks what the rule keeps (K), merges (M) and cannot merge (!); Space
    on the conflict takes the rewound side; Enter rewinds: the agent's work goes, the user's stays."""
    d = started(model, tmp_path, story_owners(model, "ow"))
    ws = d.opts.cwd
    hand_work(ws)
    try:
        app = Host(lambda: RewindPicker(d, start_prompt=2))

        async def story(pilot: Pilot[Any]) -> None:
            text = await showing(pilot, "M merge: a.txt", "! conflict: c.txt", "K keep yours: hand.txt",
                                 "D delete: k.txt")
            assert "+my line" not in text or "-my line" not in text
            await pilot.press("tab", "tab")  # into the plan
            while "c.txt" not in str(pilot.app.screen.query_one("#plan-actions", OptionList).highlighted_option
                                     .prompt):
                await pilot.press("down")
            await pilot.press("space")
            await showing(pilot, "the restored state taken (your choice)")
            await pilot.press("enter")
            await settle(pilot)

        run(app, story)
    finally:
        d.close()
    # the line left on the screen says what was not simply put back (c.txt, whose rewound side was chosen, was)
    assert app.result == ("rewound to prompt 2 (files and conversation): 2 files written, 1 deleted; merged with "
                          "yours: a.txt; kept as you left them: hand.txt and keep.txt; /redo brings it back"
                          ), app.result
    assert not (ws / "k.txt").exists(), "the agent's file stayed"
    assert (ws / "hand.txt").read_text() == "mine\n" and (ws / ".secret").read_text() == "hidden, by hand\n"
    assert (ws / "keep.txt").read_text() == "edited by hand\n"
    assert (ws / "a.txt").read_text() == "1\n2\n3\n4\n5\nmy line\n", "not merged"
    assert (ws / "c.txt").read_text() == "1\n2\n3\n", "the chosen rewound side was not taken"


def test_the_app_rewind_line_names_a_conflict_it_kept(model: ScriptedModel, tmp_path: Path) -> None:
    """Enter with the conflict left as it is: c.txt keeps the user's line (and the agent's edit in it), and the line
    the app shows after the rewind says so; it said only what was written and deleted."""
    d = started(model, tmp_path, story_owners(model, "oc"))
    ws = d.opts.cwd
    hand_work(ws)
    try:
        app = Host(lambda: RewindPicker(d, start_prompt=2))

        async def story(pilot: Pilot[Any]) -> None:
            await showing(pilot, "M merge: a.txt", "! conflict: c.txt", "K keep yours: hand.txt")
            await pilot.press("enter")
            await settle(pilot)

        run(app, story)
    finally:
        d.close()
    assert (ws / "c.txt").read_text() == "1\nmy two\n3\n"
    assert app.result == ("rewound to prompt 2 (files and conversation): 1 file written, 1 deleted; merged with "
                          "yours: a.txt; kept as you left them: hand.txt and keep.txt; kept yours in a conflict: "
                          "c.txt; /redo brings it back"), app.result


def test_a_space_on_a_file_outside_the_workspace_is_honoured(model: ScriptedModel, tmp_path: Path) -> None:
    """The agent patched a file outside the workspace; Space on its row says "kept yours, as you chose", and the
    rewind kept it. The choice was dropped (choices reached only the workspace's plan): the file was written over
    with its state before the patch all the same."""
    out = tmp_path / "elsewhere" / "x.txt"
    out.parent.mkdir()
    out.write_text("before\n")
    model.script("os-one", [update_file(str(out), "before", "by the agent"), add_file("a.txt", "a\n"),
                            message("patched")])
    d = started(model, tmp_path, ["os-one please"])
    ws = d.opts.cwd
    try:
        app = Host(lambda: RewindPicker(d, start_prompt=1))

        async def story(pilot: Pilot[Any]) -> None:
            await showing(pilot, f"W write: {out}", "D delete: a.txt")
            await pilot.press("tab", "tab")  # into the plan
            while str(out) not in str(pilot.app.screen.query_one("#plan-actions", OptionList).highlighted_option
                                      .prompt):
                await pilot.press("down")
            await pilot.press("space")
            await until(pilot, lambda: pilot.app.screen.query_one(PlanView).choices.get(str(out)) == "mine",
                        "the row chosen: yours kept")
            await pilot.press("enter")
            await settle(pilot)

        run(app, story)
    finally:
        d.close()
    assert not (ws / "a.txt").exists(), "the agent's file stayed"
    assert out.read_text() == "by the agent\n", "the file chosen to be kept was written over"


def test_snapshot_of_the_pickers_kept_merged_and_conflict_rows(model: ScriptedModel, tmp_path: Path,
                                                               snap_compare: Any) -> None:
    d = started(model, tmp_path, story_owners(model, "os"))
    hand_work(d.opts.cwd)
    try:
        async def rows_shown(pilot: Pilot[Any]) -> None:
            await opened(pilot)
            await until_shown(pilot, "M merge: a.txt", "! conflict: c.txt", "K keep yours: hand.txt")

        assert snap_compare(Host(lambda: RewindPicker(d, start_prompt=2)), terminal_size=(110, 44),
                            run_before=rows_shown)
    finally:
        d.close()


def picker_rows(screen: str) -> list[int]:
    """The numbers of the prompt rows the picker shows on screen (each row's first line: number, age, snapshot)."""
    return [int(m.group(1)) for m in re.finditer(r"^\W*(\d+)  [\w ]+  \[snapshot\]  sm-", screen, re.M)]


def test_picker_and_redo_fit_80x24_and_60x20(model: ScriptedModel, tmp_path: Path, snap_compare: Any) -> None:
    """Issue 20 §4: at 80x24 the picker showed about one prompt row, at 60x20 none, and the redo dialog at 60x20
    no step of its plan. Now the dialogs fill a small screen: ≥ 4 rows at 80x24 and ≥ 2 at 60x20 with the
    highlighted prompt among them, and Tab to the plan brings its steps and the diff into view."""
    prompts = story_files(model, "sm")
    for i in range(3, 7):
        model.script(f"sm-{i}", [message(f"answer {i}")])
        prompts.append(f"sm-{i} please")
    d = started(model, tmp_path, prompts)
    try:
        for size, least in (((80, 24), 4), ((60, 20), 2)):
            async def fits(pilot: Pilot[Any], least: int = least) -> None:
                await opened(pilot)
                screen = await until_shown(pilot, "prompt 2 · files and conversation", "files: 1 file to write")
                rows = picker_rows(screen)
                assert len(rows) >= least and 2 in rows, screen
                await pilot.press("tab", "tab")  # the modes, then the plan
                await until_shown(pilot, "D delete: b.txt +0 -2", "W write: a.txt +0 -1", "-x", "sm-two please")
                await pilot.press("shift+tab", "shift+tab")  # back to the prompts: they have the room again
                await until(pilot, lambda: len(picker_rows(screen_text(pilot.app))) >= least, "the rows back")

            assert snap_compare(Host(lambda: RewindPicker(d, start_prompt=2)), terminal_size=size, run_before=fits)
        d.rewind(2)
        (d.opts.cwd / "a.txt").write_text("edited after the rewind\n")
        for size in ((80, 24), (60, 20)):
            async def redo_fits(pilot: Pilot[Any]) -> None:
                await opened(pilot)
                await until_shown(pilot, "! 1 file you changed since the rewind: kept", "! conflict: a.txt",
                                  "W write: b.txt +2 -0", "-edited after the rewind", "Enter redo")

            assert snap_compare(Host(lambda: RedoDialog(d)), terminal_size=size, run_before=redo_fits)
    finally:
        d.close()


def test_a_running_turn_is_an_error_in_the_dialog_not_a_crash(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("bz-ask", [shell("echo asked > asked.txt"), message("ran it")])
    ev = Events()
    d = Driver(session_options(model, tmp_path, approval_policy="untrusted", sandbox="read-only"), ev)
    try:
        assert d.start()
        d.submit("bz-ask now")
        asked = ev.wait(ApprovalAsked)  # the turn now waits for an answer
        for make in (lambda: RewindPicker(d), lambda: RedoDialog(d)):
            app = Host(make)

            async def story(pilot: Pilot[Any]) -> None:
                text = shown(pilot.app.screen)
                assert "error: " in text and "while a turn is running: wait for it, or interrupt it (Esc)" in text
                await pilot.press("enter", "escape")

            run(app, story)
            assert app.result is None
        asked.future.set_result("decline")
        assert ev.wait(TurnFinished).status == "completed"
        assert not (d.opts.cwd / "asked.txt").exists()
    finally:
        d.close()


def test_rewind_redo_and_restore_warn_and_ask_while_another_session_is_live(model: ScriptedModel, tmp_path: Path
                                                                          ) -> None:
    """Issue 20: with `codexr --plain` live in the same workspace, Ctrl+R ↑ Enter deleted the file it had just
    created with no dialog and no line in the plan; so did /redo. Now a dialog asks first, and (issue 34) the plan
    keeps the other session's files, saying so."""
    model.script("ls-other", [add_file("other.txt", "theirs\n"), message("made other.txt")])
    model.script("ls-later", [add_file("later.txt", "later\n"), message("made later.txt")])
    d = started(model, tmp_path, story_files(model, "ls"))
    ws = d.opts.cwd
    other = PipeSession(ws, {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]), **(d.opts.env or {})})
    try:
        other.until("type a prompt")
        other.prompt("ls-other please")
        assert (ws / "other.txt").read_text() == "theirs\n"
        app = Host(lambda: RewindPicker(d, start_prompt=2))

        async def rewind(pilot: Pilot[Any]) -> None:
            text = await showing(pilot, "! another codexr session is live in this workspace (pid ")
            assert "K keep yours: other.txt — changed by you after prompt 2's turn" in text, text
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(pilot.app.screen, AskDialog), "the question")
            assert (ws / "other.txt").exists()  # nothing happened before the answer
            await pilot.press("n")
            await showing(pilot, "no rewind: nothing changed")
            assert (ws / "other.txt").exists()
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(pilot.app.screen, AskDialog), "the question again")
            await pilot.press("y")
            await settle(pilot)

        run(app, rewind)
        assert isinstance(app.result, str) and app.result.startswith("rewound to prompt 2"), app.result
        assert "; kept as you left it: other.txt; /redo brings it back" in app.result, app.result
        assert (ws / "other.txt").read_text() == "theirs\n" and not (ws / "b.txt").exists()

        other.prompt("ls-later please")
        app = Host(lambda: RedoDialog(d))

        async def redo(pilot: Pilot[Any]) -> None:
            text = await showing(pilot, "! another codexr session is live in this workspace (pid ")
            assert "K keep yours: later.txt — changed by you since the rewind" in text, text
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(pilot.app.screen, AskDialog), "the question")
            await pilot.press("escape")
            await showing(pilot, "no redo: nothing changed")
            await pilot.press("escape")

        run(app, redo)
        assert app.result is None and (ws / "later.txt").read_text() == "later\n"
    finally:
        other.close()
        d.close()


def test_the_pickers_first_frame_shows_the_prompts(model: ScriptedModel, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20 §2 (Ctrl+R -> the picker's rows <= 0.3 s): the picker drew a frame saying "loading the prompts…" and
    the rows in a second one (~60 ms of Ctrl+R at load 9). Rows that come within ROWS_WAIT_S are set while the
    picker mounts, before its first frame."""
    model.script("ff-one", [message("one")])
    d = started(model, tmp_path, ["ff-one please"])
    loaded_in: list[bool] = []
    starting = [False]
    real_start, real_loaded = RewindPicker.start, RewindPicker._rows_loaded

    def start(self: RewindPicker) -> None:
        starting[0] = True
        try:
            real_start(self)
        finally:
            starting[0] = False

    def rows_loaded(self: RewindPicker, msg: CallDone) -> None:
        loaded_in.append(starting[0])
        real_loaded(self, msg)

    monkeypatch.setattr(RewindPicker, "start", start)
    monkeypatch.setattr(RewindPicker, "_rows_loaded", rows_loaded)
    try:
        app = Host(lambda: RewindPicker(d))

        async def story(pilot: Pilot[Any]) -> None:
            await showing(pilot, "ff-one please")

        run(app, story)
        assert loaded_in == [True]
    finally:
        d.close()


async def _open_held(pilot: Pilot[Any], dialog: type[DriverScreen[Any]]) -> DriverScreen[Any]:
    """The dialog open with its first Driver call waiting (for the driver's lock the test holds)."""
    app = pilot.app
    await until(pilot, lambda: isinstance(app.screen, dialog) and app.screen.is_mounted and app.screen.in_flight > 0,
                "the dialog to open and work out its plan")
    screen = app.screen
    assert isinstance(screen, DriverScreen)
    return screen


def test_an_enter_pressed_while_the_redo_plan_is_worked_out_waits_for_it(model: ScriptedModel, tmp_path: Path
                                                                         ) -> None:
    """Issue 36: the redo dialog's first Enter, pressed while its plan was still worked out, was lost (a second one
    worked). The plan is held back here by holding the driver's operation lock, as any store operation holds it, so
    the Enter surely comes first; it goes ahead once the plan is on screen."""
    d = started(model, tmp_path, story_files(model, "eq"))
    ws, origin = d.opts.cwd, d.thread_id
    try:
        d.rewind(2)
        app = Host(lambda: RedoDialog(d))

        async def go() -> None:
            held = d._ops.acquire()
            try:
                async with app.run_test(size=SIZE) as pilot:
                    dialog = await _open_held(pilot, RedoDialog)
                    assert "working out what the redo brings back" in shown(dialog)
                    await pilot.press("enter")
                    await showing(pilot, "Enter noted: the redo goes ahead as soon as its plan is worked out")
                    d._ops.release()
                    held = False
                    await until(pilot, lambda: app.result is not UNSET, "the redo the Enter asked for")
            finally:
                if held:
                    d._ops.release()

        asyncio.run(go())
        assert app.result == "redo: back where the rewind started (files and conversation): 2 files written, 0 deleted"
        assert (ws / "a.txt").read_text() == "one\ntwo\nmore\n" and (ws / "b.txt").read_text() == "x\ny\n"
        assert d.thread_id == origin
    finally:
        d.close()


def test_an_enter_pressed_while_the_rewind_plan_is_worked_out_rewinds_to_that_prompt(model: ScriptedModel,
                                                                                     tmp_path: Path) -> None:
    """Issue 36, the picker: an Enter pressed while the plan of the prompt just highlighted is worked out waits for
    that plan and then rewinds (it did nothing); moving to another prompt drops it."""
    d = started(model, tmp_path, story_files(model, "pq"))
    ws = d.opts.cwd
    try:
        app = Host(lambda: RewindPicker(d))

        async def go() -> None:
            async with app.run_test(size=SIZE) as pilot:
                await opened(pilot)
                await showing(pilot, "prompt 2 · files and conversation")
                d._ops.acquire()  # the next plans wait for the driver's lock
                try:
                    await pilot.press("up")
                    await _open_held(pilot, RewindPicker)
                    await pilot.press("enter", "down")  # an Enter for prompt 1, then prompt 2 again
                finally:
                    d._ops.release()
                await settle(pilot)
                await showing(pilot, "prompt 2 · files and conversation")
                assert app.result is UNSET and (ws / "b.txt").exists()  # that Enter was not for prompt 2's plan
                d._ops.acquire()
                try:
                    await pilot.press("up")  # prompt 1: its plan is being worked out
                    await _open_held(pilot, RewindPicker)
                    await pilot.press("enter")
                    await showing(pilot, "Enter noted: rewinding to prompt 1 (files and conversation) as soon as")
                finally:
                    d._ops.release()
                await until(pilot, lambda: app.result is not UNSET, "the rewind the Enter asked for")

        asyncio.run(go())
        assert isinstance(app.result, str) and app.result.startswith("rewound to prompt 1 (files and conversation)")
        assert not (ws / "a.txt").exists() and not (ws / "b.txt").exists()
    finally:
        d.close()


def test_ctrl_c_in_a_dialog_that_runs_nothing_does_what_esc_does(model: ScriptedModel, tmp_path: Path) -> None:
    """Issue 36: Ctrl+C in a dialog was ignored without a word; with no rewind, redo or restore running it closes the
    dialog as Esc does (while one runs it stops it: tests/test_tui_stop_restore.py)."""
    d = started(model, tmp_path, [])
    try:
        for make in (lambda: RedoDialog(d), lambda: SnapshotsScreen(d)):
            app = Host(make)

            async def story(pilot: Pilot[Any]) -> None:
                await pilot.press("ctrl+c")
                await until(pilot, lambda: app.result is not UNSET, "the dialog to close")  # noqa: B023

            run(app, story)
            assert app.result is None
    finally:
        d.close()
