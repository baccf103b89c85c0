"""The interactive session core both front ends share: prompts queue, events stream, rewind/redo reload."""

from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import session_options

from app.codex.events import (
    TRANSCRIPT_TYPES,
    AgentMessage,
    ApprovalAsked,
    ApprovalDecided,
    CodexDied,
    CommandFinished,
    FileChanges,
    Notice,
    Ready,
    ThreadLoaded,
    TurnFinished,
    UserPrompt,
    from_json,
    to_json,
)
from app.codex.scripted_model import ScriptedModel, add_file, last_user_text, message, shell, tool_outputs
from app.errors import SessionError
from app.services.driver import Busy, Driver
from app.shared.replay import Recorder, read_log


class Events:
    """Collects what the driver emits, from any thread."""

    def __init__(self) -> None:
        self.q: queue.Queue[Any] = queue.Queue()
        self.seen: list[Any] = []

    def __call__(self, ev: Any) -> None:
        self.q.put(ev)

    def wait(self, kind: type, timeout: float = 30.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                seen = [type(e).__name__ for e in self.seen]
                raise AssertionError(f"no {kind.__name__} within {timeout}s; saw {seen}")
            try:
                ev = self.q.get(timeout=left)
            except queue.Empty:
                continue
            self.seen.append(ev)
            if isinstance(ev, kind):
                return ev


def test_turns_stream_events_and_report_shell_made_files(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("drv-one", [add_file("a.txt", "one\ntwo\n"), message("made **a.txt**")])
    model.script("drv-two", [shell("printf 'x\\ny\\n' > b.txt && echo more >> a.txt"), message("shelled")])
    ev = Events()
    log = tmp_path / "session.jsonl"
    rec = Recorder(ev, log)
    d = Driver(session_options(model, tmp_path, {"keep.txt": "k\n"}), rec)
    try:
        assert d.start()
        assert isinstance(ev.wait(Ready), Ready)
        d.submit("drv-one please")
        d.submit("drv-two please")  # queued behind the first
        first = ev.wait(TurnFinished)
        assert first.status == "completed"
        assert [(f.path, f.change, f.added, f.removed) for f in first.files] == [("a.txt", "added", 2, 0)]
        second = ev.wait(TurnFinished)
        # shell-made changes count, with line numbers, from the turn's snapshots
        assert [(f.path, f.change, f.added, f.removed) for f in second.files] == [
            ("a.txt", "modified", 1, 0), ("b.txt", "added", 2, 0)]
        kinds = {type(e) for e in ev.seen}
        assert {UserPrompt, FileChanges, CommandFinished, AgentMessage} <= kinds
        assert [e.number for e in ev.seen if isinstance(e, UserPrompt)] == [1, 2]
        transcript = [e for e in ev.seen if type(e) in TRANSCRIPT_TYPES]
        assert transcript and all(from_json(to_json(e)) == e for e in transcript)  # replay logs round-trip
        assert [e for e in read_log(log) if type(e) in TRANSCRIPT_TYPES] == transcript  # what was recorded

        rows = d.prompt_rows()
        assert [r.text for r in rows] == ["drv-one please", "drv-two please"]
        assert [f.path for f in rows[1].files or ()] == ["a.txt", "b.txt"]
        pv = d.rewind_preview(2)
        assert pv.restore is not None and set(pv.diffs) == {"a.txt", "b.txt"}
        assert "-more" in pv.diffs["a.txt"][1] and pv.diffs["b.txt"][0].change == "deleted"

        origin = d.thread_id
        res = d.rewind(2)
        loaded = ev.wait(ThreadLoaded)
        while loaded.thread_id != res.thread_id:
            loaded = ev.wait(ThreadLoaded)
        assert loaded.composer == "drv-two please"
        assert [e.text for e in loaded.events if isinstance(e, UserPrompt)] == ["drv-one please"]
        assert not (d.opts.cwd / "b.txt").exists() and (d.opts.cwd / "a.txt").read_text() == "one\ntwo\n"

        d.redo()
        back = ev.wait(ThreadLoaded)
        assert back.thread_id == origin
        assert [e.text for e in back.events if isinstance(e, UserPrompt)] == ["drv-one please", "drv-two please"]
        assert (d.opts.cwd / "b.txt").read_text() == "x\ny\n"
    finally:
        d.close()
        rec.close()


def test_a_prompt_being_prepared_counts_as_busy_and_blocks_a_rewind(model: ScriptedModel, tmp_path: Path) -> None:
    """Between leaving the queue and Codex's turn/started (the pre-turn capture) a rewind must be refused."""
    model.script("drv-prep-one", [add_file("one.txt", "1\n"), message("one")])
    model.script("drv-prep-two", [add_file("two.txt", "2\n"), message("two")])
    ev = Events()
    d = Driver(session_options(model, tmp_path, {"keep.txt": "k\n"}), ev)
    try:
        assert d.start()
        assert d.status().tracked_files is None  # no snapshot of a thread yet: no count (it read "0 files")
        d.submit("drv-prep-one")
        assert ev.wait(TurnFinished).status == "completed"
        session = d.session
        assert session is not None
        entered, release = threading.Event(), threading.Event()
        real = session.run_turn

        def held(*args: Any, **kwargs: Any) -> Any:  # the prompt has left the queue; its turn has not begun
            entered.set()
            release.wait(30)
            return real(*args, **kwargs)

        session.run_turn = held  # type: ignore[method-assign]
        d.submit("drv-prep-two")
        assert entered.wait(30)
        try:
            assert d.pending() == [] and d.busy
            with pytest.raises(Busy):
                d.rewind(1)
        finally:
            release.set()
        assert ev.wait(TurnFinished).status == "completed"
        assert (d.opts.cwd / "one.txt").exists() and (d.opts.cwd / "two.txt").exists()
        assert [r.text for r in d.prompt_rows()] == ["drv-prep-one", "drv-prep-two"]
        d.rewind(1)  # idle now: back before the first prompt, on a fork with no turns of its own
        assert not (d.opts.cwd / "one.txt").exists()
        assert d.status().tracked_files == len([p for p in d.opts.cwd.rglob("*") if p.is_file()]) > 0
    finally:
        d.close()


def test_model_switch_applies_to_the_next_prompt_and_refuses_unknown_names(model: ScriptedModel,
                                                                           tmp_path: Path) -> None:
    model.script("drv-model-a", [message("first")])
    model.script("drv-model-b", [message("second")])
    ev = Events()
    d = Driver(session_options(model, tmp_path), ev)
    try:
        assert d.start()
        d.submit("drv-model-a")
        assert ev.wait(TurnFinished).status == "completed"
        used = [r.get("model") for r in model.model_requests if "drv-model-a" in str(r)]
        offered = d.models()
        assert offered, "Codex offers at least one model"
        other = next(m for m in offered if m not in used)
        with pytest.raises(SessionError, match="does not offer the model 'no-such-model'"):
            d.set_model("no-such-model")
        assert d.set_model(other) == other
        assert d.status().model == other
        d.submit("drv-model-b")
        assert ev.wait(TurnFinished).status == "completed"
        assert [r.get("model") for r in model.model_requests if "drv-model-b" in str(r)][-1] == other
    finally:
        d.close()


def test_chosen_model_effort_and_permissions_hold_on_a_new_thread_and_after_codex_restarts(model: ScriptedModel,
                                                                                            tmp_path: Path) -> None:
    """/model's model and effort and /permissions' preset are sent with every later turn: a new thread and a
    restarted Codex keep them, whether the restart starts a thread or resumes one (asserted on what Codex did: the
    model and effort it asked for, the sandbox its command met)."""
    model.script("drv-keep-one", [shell("touch kept-one.txt"), message("one")])
    model.script("drv-keep-two", [shell("touch kept-two.txt"), message("two")])
    model.script("drv-keep-three", [shell("touch kept-three.txt"), message("three")])
    ev = Events()
    d = Driver(session_options(model, tmp_path), ev)
    try:
        assert d.start()
        chosen = next(m.id for m in d.model_catalog() if m.id != "gpt-5.5" and m.supports("low"))  # not config's
        d.set_model(chosen, "low")
        assert d.set_permissions("Read Only").id == "read-only"  # the label works as well as the id
        with pytest.raises(SessionError, match="no permissions preset 'root'"):
            d.set_permissions("root")
        d.submit("drv-keep-one")
        assert ev.wait(TurnFinished).status == "completed"
        d.new_thread()
        for prompt in ("drv-keep-two", "drv-keep-three"):  # a new thread on the new Codex; then that thread resumed
            assert d.session is not None
            d.session.client._proc.kill()
            d.session.client._proc.wait()
            d.submit(prompt)
            assert ev.wait(CodexDied).restarted
            assert ev.wait(TurnFinished).status == "completed"
        st = d.status()
        assert (st.model, st.effort, st.approval, st.sandbox) == (chosen, "low", "on-request", "read-only")
        assert [r.text for r in d.prompt_rows()] == ["drv-keep-two", "drv-keep-three"]
    finally:
        d.close()
    for trigger in ("drv-keep-one", "drv-keep-two", "drv-keep-three"):
        turn = [r for r in model.model_requests if trigger in last_user_text(r)]
        assert {r["model"] for r in turn} == {chosen}, trigger
        assert {r["reasoning"]["effort"] for r in turn} == {"low"}, trigger
        assert "Read-only file system" in "".join(str(o.get("output")) for r in turn for o in tool_outputs(r))
    assert not any((d.opts.cwd / f"kept-{n}.txt").exists() for n in ("one", "two", "three"))


def one_turn_on(binary: Path, model: ScriptedModel, tmp_path: Path, prompt: str) -> tuple[Driver, Events, Any]:
    """A driver whose Codex is `binary`, started, with one completed turn of `prompt` (closed by the caller)."""
    from dataclasses import replace

    opts = replace(session_options(model, tmp_path), codex_bin=str(binary))
    ev = Events()
    d = Driver(opts, ev)
    try:
        assert d.start()
        d.submit(prompt)
        assert ev.wait(TurnFinished).status == "completed"
    except BaseException:
        d.close()
        raise
    return d, ev, opts


def test_codex_that_cannot_be_restarted_is_said_once_and_the_session_lets_go(model: ScriptedModel,
                                                                            tmp_path: Path) -> None:
    """Codex died and its binary is gone: the front end is told it could not be restarted, the workspace's session
    lock is let go (other sessions stop warning about this one), and a later prompt says Codex is not running."""

    from app.codex.codex_bin import pinned_path
    from app.recording.workspace_lock import SessionLock

    model.script("drv-gone", [message("before")])
    binary = tmp_path / "codex"
    binary.symlink_to(pinned_path())
    d, ev, opts = one_turn_on(binary, model, tmp_path, "drv-gone once")
    try:
        assert d.session is not None
        ws = d.session.cwd
        mine = SessionLock(opts.codex_home / "file_snapshots", ws).path
        assert mine.exists()
        binary.unlink()
        d.session.client._proc.kill()
        d.session.client._proc.wait()
        d.submit("drv-gone twice")
        died = ev.wait(CodexDied)
        assert not died.restarted and "could not be restarted: cannot start Codex" in died.message, died.message
        assert d.session is None and not mine.exists()
        d.submit("drv-gone thrice")
        assert "Codex is not running" in ev.wait(Notice).text
    finally:
        d.close()
    assert not any("drv-gone t" in last_user_text(r) for r in model.model_requests)


def test_approval_is_a_future_the_front_end_resolves(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("drv-ask", [shell("echo asked > asked.txt"), message("ran it")])
    ev = Events()
    d = Driver(session_options(model, tmp_path, approval_policy="untrusted", sandbox="read-only"), ev)
    try:
        assert d.start()
        d.submit("drv-ask now")
        asked = ev.wait(ApprovalAsked)
        assert asked.request.kind == "command" and "asked.txt" in (asked.request.command or "")
        with pytest.raises(Busy):
            d.rewind_preview(1)
        with pytest.raises(Busy, match="cannot switch threads while a turn is running"):
            d.require_idle("switch threads")  # dialogs ask before listing (listing waits for the turn)
        asked.future.set_result("decline")
        decided = ev.wait(ApprovalDecided)
        assert decided.decision == "decline"
        done = ev.wait(TurnFinished)
        assert done.status == "completed" and not (d.opts.cwd / "asked.txt").exists()
    finally:
        d.close()


def test_codex_that_died_while_idle_is_restarted_and_the_prompt_is_not_lost(model: ScriptedModel,
                                                                            tmp_path: Path) -> None:
    model.script("drv-before", [add_file("a.txt", "a\n"), message("before")])
    model.script("drv-after", [add_file("b.txt", "b\n"), message("after")])
    ev = Events()
    d = Driver(session_options(model, tmp_path), ev)
    try:
        assert d.start()
        d.submit("drv-before death")
        assert ev.wait(TurnFinished).status == "completed"
        thread = d.thread_id
        assert d.session is not None
        d.session.client._proc.kill()
        d.session.client._proc.wait()
        d.submit("drv-after while dead")  # never reached the dead Codex: sent again to the restarted one
        died = ev.wait(CodexDied)
        assert died.restarted and "restarted" in died.message
        assert ev.wait(TurnFinished).status == "completed"
        assert d.thread_id == thread
        assert [r.text for r in d.prompt_rows()] == ["drv-before death", "drv-after while dead"]
        assert [e.text for e in ev.seen if isinstance(e, UserPrompt)].count("drv-after while dead") == 1
        assert (d.opts.cwd / "b.txt").read_text() == "b\n"
    finally:
        d.close()


def test_codex_whose_pipe_closes_before_its_process_ends_is_restarted(model: ScriptedModel, tmp_path: Path) -> None:
    """Codex's pipe closes a moment before its process can be reaped (longer under load): a prompt that finds the
    pipe closed while the process still shows as running must restart Codex, not just say it stopped responding.
    The real Codex runs under a shell that closes its own end of the pipes when Codex dies and lingers a second."""
    import os
    import signal

    from app.codex.codex_bin import pinned_path

    model.script("drv-linger", [message("before")])
    model.script("drv-lingered", [message("after")])
    binary = tmp_path / "codex-lingering"
    binary.write_text(f'#!/bin/sh\n"{pinned_path()}" "$@"\nexec 0<&- 1>&- 2>&-\nsleep 1\n')
    binary.chmod(0o755)
    d, ev, _opts = one_turn_on(binary, model, tmp_path, "drv-linger once")
    try:
        assert d.session is not None
        shell_pid = d.session.client._proc.pid
        children = Path(f"/proc/{shell_pid}/task/{shell_pid}/children").read_text().split()
        assert len(children) == 1, children
        os.kill(int(children[0]), signal.SIGKILL)  # Codex dies; the shell it ran under lingers with the pipes closed
        d.submit("drv-lingered after")
        died = ev.wait(CodexDied)
        assert died.restarted, died.message
        assert ev.wait(TurnFinished).status == "completed"
        assert [r.text for r in d.prompt_rows()] == ["drv-linger once", "drv-lingered after"]
    finally:
        d.close()


def test_threads_are_read_page_by_page_without_deprecated_full_history(model: ScriptedModel, tmp_path: Path) -> None:
    """Reading a thread back (the transcript on resume, its prompts for the rewind picker) pages `thread/turns/list`:
    Codex answers a full-history `thread/read` with a deprecation notice (0.163.0 and 0.171.0), and the paged
    read gives the same prompts and transcript."""
    from app.session import Session

    model.script("paged one", [add_file("p1.txt", "1\n"), message("paged first")])
    model.script("paged two", [message("paged second")])
    opts = session_options(model, tmp_path)
    seen: list[str] = []
    with Session(opts, on_notice=lambda method, _params: seen.append(method)) as s:
        thread = s.start_thread()
        for text in ("paged one", "paged two"):
            assert s.run_turn(thread, text).status == "completed"
        prompts = s.prompts(thread)
        seen.clear()
        d = Driver(opts, Events())
        d.session = s
        events = d.transcript(thread)
        assert [p.text for p in s.prompts(thread)] == [p.text for p in prompts] == ["paged one", "paged two"]
        assert [e.text for e in events if isinstance(e, UserPrompt)] == ["paged one", "paged two"]
        assert any(isinstance(e, AgentMessage) and "paged second" in e.text for e in events)
        time.sleep(0.5)  # a notice comes after the answer it belongs to
        assert "deprecationNotice" not in seen
