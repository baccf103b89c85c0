"""Issue 36 §7 and §8: a turn's tokens are the sum of its model requests, and a rewind or a redo keeps what the
context window holds, from the usage Codex reported for the turn the thread now ends with.

The real Codex against the scripted model: each prompt here is two model requests (a patch, then the answer), so
Codex sends two `thread/tokenUsage/updated` notifications per turn, the second's `last` being only the answer's.
"""

from __future__ import annotations

import io
from pathlib import Path

from e2e_helpers import session_options
from test_driver import Events

from app.codex.context_window import UNKNOWN
from app.codex.events import Ready, ThreadLoaded, TokenUsage, TurnFinished
from app.codex.scripted_model import ScriptedModel, add_file, message
from app.services.driver import Driver
from app.shared.lines import status_lines
from app.shared.plain import Printer
from app.tui.blocks import _turn_line


def _turn(d: Driver, ev: Events, prompt: str) -> tuple[TurnFinished, list[TokenUsage]]:
    """Send a prompt and wait for its end: the turn's end and the usage events Codex sent during it."""
    start = len(ev.seen)
    d.submit(prompt)
    done = ev.wait(TurnFinished)
    assert done.status == "completed", done
    return done, [e for e in ev.seen[start:] if isinstance(e, TokenUsage)]


def _loaded(ev: Events, thread_id: str) -> ThreadLoaded:
    loaded = ev.wait(ThreadLoaded)
    while loaded.thread_id != thread_id:
        loaded = ev.wait(ThreadLoaded)
    return loaded


def _two_turns(model: ScriptedModel, tmp_path: Path, ev: Events
               ) -> tuple[Driver, tuple[TurnFinished, list[TokenUsage]], tuple[TurnFinished, list[TokenUsage]]]:
    """A driver that ran two prompts of two model requests each: each turn's end and its usage events."""
    model.script("tu-one", [add_file("one.txt", "1\n"), message("one made")])
    model.script("tu-two", [add_file("two.txt", "2\n"), message("two made")])
    d = Driver(session_options(model, tmp_path, {"keep.txt": "k\n"}), ev)
    try:
        assert d.start()
        ev.wait(Ready)
        one = _turn(d, ev, "tu-one please")
        two = _turn(d, ev, "tu-two please")
        assert len(one[1]) == 2 and len(two[1]) == 2, (one, two)
    except BaseException:
        d.close()
        raise
    return d, one, two


def test_a_turns_tokens_are_its_requests_summed(model: ScriptedModel, tmp_path: Path) -> None:
    """The turn line said the last request's tokens (`6,993 tokens (thread 13,867)` on a thread's first turn of two
    requests)."""
    ev = Events()
    d, (first, used1), (second, used2) = _two_turns(model, tmp_path, ev)
    try:
        sum1 = used1[0].last_total + used1[1].last_total
        sum2 = used2[0].last_total + used2[1].last_total
        assert used1[-1].thread_total == sum1 and used2[-1].thread_total == sum1 + sum2  # Codex's running total
        # the app's turn line and line mode's say the turn's sum and the thread's total
        assert f" · {sum1:,} tokens this turn (thread {sum1:,})" in _turn_line(first, used1[-1]).plain
        assert f" · {sum2:,} tokens this turn (thread {sum1 + sum2:,})" in _turn_line(second, used2[-1]).plain
        out = io.StringIO()
        printer = Printer(out)
        for e in [*used2, second]:
            printer.show(e)
        assert f"{sum2:,} tokens this turn (thread {sum1 + sum2:,})" in out.getvalue(), out.getvalue()
    finally:
        d.close()


def test_a_rewind_or_a_redo_keeps_the_context_window(model: ScriptedModel, tmp_path: Path) -> None:
    """/status said "unknown until Codex answers a prompt of this thread" after a rewind or a redo, though the
    thread had answered."""
    ev = Events()
    d, (_first, used1), (_second, used2) = _two_turns(model, tmp_path, ev)
    try:
        origin = d.thread_id
        assert d.status().context_used == used2[-1].last_total
        res = d.rewind(2)
        _loaded(ev, res.thread_id)
        after = d.status()
        # the fork ends with prompt 1's turn: the context is what that turn's last request held
        assert (after.context_used, after.context_window) == (used1[-1].last_total, used1[-1].context_window)
        assert not any(UNKNOWN in line for line in status_lines(after)), status_lines(after)
        assert origin is not None
        d.redo()
        _loaded(ev, origin)
        back = d.status()
        assert (back.context_used, back.context_window) == (used2[-1].last_total, used2[-1].context_window)
    finally:
        d.close()
