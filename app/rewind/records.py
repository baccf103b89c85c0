"""What a rewind writes into the sidecars of the threads it touches: its redo entry, a fork's copy of the turns, the
records cut after a revert, an undone rewind forgotten.

Why apart: every kind of rewind (flow.py's steps), the proxy's settling of a revert and the judge of one a kill
interrupted (held.py) record the same way; none of this imports the SDK, which the proxy never loads.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Container
from typing import Any

from ..recording.sidecar import RedoEntry, Sidecars, ThreadSidecar, TurnRecord


def saving_redo(entry: RedoEntry, **extra: str) -> Callable[[ThreadSidecar], None]:
    """What records a rewind in the sidecar of the thread it landed on: its redo entry (which pins its safety
    snapshots) and its history event (`extra` joins the event)."""
    event = {"event": "rewind", "from": entry.origin_thread, "to_prompt": entry.to_prompt, "mode": entry.mode,
             **extra, "safety_id": entry.safety_id, "outside_safety_id": entry.outside_safety_id, "at": time.time()}

    def add(s: ThreadSidecar) -> None:
        s.redo.append(entry)
        s.history.append(event)

    return add


def forked_sidecar(side: ThreadSidecar, fork: str, origin: str, cwd: str,
                   shared: Container[str] | None = None) -> ThreadSidecar:
    """A fork of `side`'s thread keeps the snapshots of the turns it shares with its origin (all, or those whose
    ids `shared` holds) and the agent-touched paths."""
    dest = ThreadSidecar(thread_id=fork, cwd=cwd, tracking=side.tracking, forked_from=origin)
    dest.turns = [TurnRecord(**vars(t)) for t in side.turns if shared is None or t.turn_id in shared]
    dest.touch(side.agent_touched)
    return dest


def copy_turns(sidecars: Sidecars, origin: str, fork: str) -> None:
    """The fork holding a reverted thread's turns keeps their snapshots (it is what `codexr redo` returns to)."""
    side = sidecars.load(origin)
    if side is not None:
        sidecars.save(forked_sidecar(side, fork, origin, side.cwd))


def cut_turns(sidecars: Sidecars, thread: str, before: str) -> None:
    """The conversation was reverted: the thread's records end before `before` (its fork keeps them)."""

    def cut(s: ThreadSidecar) -> None:
        ids = [t.turn_id for t in s.turns]
        if before in ids:
            s.turns = s.turns[: ids.index(before)]

    if sidecars.exists(thread):
        sidecars.update(thread, cut)


def forget_rewind(sidecars: Sidecars, thread: str, safety: Any, why: str) -> None:
    """A rewind whose files were put back: its redo entry goes (once, whoever gets here first) and the thread's
    history says why; `codexr redo` has nothing of it to redo."""

    def pop(s: ThreadSidecar) -> None:
        if s.redo and s.redo[-1].safety_id == safety:
            s.redo.pop()
            s.history.append({"event": "rewind-undone", "why": why, "at": time.time()})

    if sidecars.exists(thread):
        sidecars.update(thread, pop)


def forget_interrupted(sidecars: Sidecars, dest: str, origin: str, at: float) -> None:
    """A rewind whose files a signal rolled back: its redo entry (saved at `at`) goes from the thread it landed on."""

    def drop(s: ThreadSidecar) -> None:
        if s.redo and s.redo[-1].at == at and s.redo[-1].origin_thread == origin:
            s.redo.pop()
        s.history.append({"event": "rewind-interrupted", "from": origin, "at": time.time()})

    sidecars.update(dest, drop)


def note(sidecars: Sidecars, thread: str, event: dict[str, Any],
         new: Callable[[], ThreadSidecar] | None = None) -> None:
    """Append one event to a thread's history."""
    sidecars.update(thread, lambda s: s.history.append(event), new=new)
