"""A proxy revert's two sides kept together across a kill: its file restore is *held* (snapshot_store's journal stays
until the conversation side is known, restore/journal.py), and whoever finds such a journal after a crash asks Codex
whether the conversation was reverted, then finishes the files or rolls them back to match.

Why apart: the proxy holds the restore (app/proxy/observer.py), but the journal is found by whatever codexr command
next captures or restores the workspace (app/cmds/context.py, app/recording/recording.py): both need the same judge.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snapshot_store import StoreBusy
from snapshot_store.locks import owner_alive, owner_info

from ..recording.sidecar import Sidecars
from .records import cut_turns, forget_rewind

if TYPE_CHECKING:
    from snapshot_store import Store

KIND = "thread/revert"
#: How long a settle waits for the app-server that was sent the revert to exit (it does ~30 ms after its stdin
#: closes, which a killed proxy's does) before it leaves the journal for a later command.
BACKEND_EXIT_S = 10.0
ASK_TIMEOUT_S = 30.0


def revert_hold(thread_id: str, before_turn: str, backend_pid: int | None) -> dict[str, Any]:
    """The journal's data for a proxy revert: which thread and prompt, and the app-server the revert goes to."""
    return {"kind": KIND, "thread": thread_id, "before": before_turn, "forwarded": False,
            "backend": owner_info(backend_pid) if backend_pid is not None else None}


def settler(store: Store, codex_home: Path, codex_bin: Callable[[], str]) -> Callable[[dict[str, Any]], bool]:
    """The store's judge of an interrupted held restore (Repository.on_held) for this CODEX_HOME, asking the Codex
    `codex_bin()` names: True when the conversation was reverted (finish the files), False when it was not (roll
    them back); raises StoreBusy when that cannot be known yet (the journal stays for the next command)."""

    def settle(hold: dict[str, Any]) -> bool:
        if hold.get("kind") != KIND:
            return False  # not ours to finish: undone, which loses nothing (the safety snapshot is the state now)
        thread, before = str(hold.get("thread") or ""), str(hold.get("before") or "")
        reverted = bool(hold.get("forwarded")) and _reverted(codex_home, codex_bin, hold, thread, before)
        if reverted:
            cut_turns(Sidecars(codex_home / "file_snapshots"), thread, before)
        else:
            forget_rewind(Sidecars(codex_home / "file_snapshots"), thread, hold.get("safety"),
                          "the conversation was not reverted (interrupted)")
            outside = hold.get("outside_safety")
            if isinstance(outside, str):  # the paths outside the workspace it wrote go back too
                from snapshot_store.states import prepare_states_restore

                prepare_states_restore(store, outside, protected=[str(codex_home)]).apply()
        return reverted

    return settle


def _reverted(codex_home: Path, codex_bin: Callable[[], str], hold: dict[str, Any], thread: str, before: str) -> bool:
    """Whether Codex's record of `thread` no longer holds turn `before` (asked once the old app-server is gone)."""
    backend = hold.get("backend")
    deadline = time.monotonic() + BACKEND_EXIT_S
    while isinstance(backend, dict) and owner_alive(backend):
        if time.monotonic() > deadline:
            raise StoreBusy(f"the app-server that was sent a revert of thread {thread} (pid {backend.get('pid')}) "
                            "is still running; the revert is settled once it has exited")
        time.sleep(0.05)
    try:
        turns = thread_turn_ids(codex_bin(), codex_home, thread)
    except Exception as exc:  # no Codex to ask (a bad binary setting, a refusal, no answer): decide later
        raise StoreBusy(f"an interrupted revert of thread {thread} cannot be settled now: Codex could not be asked "
                        f"whether it was reverted ({exc}); the next codexr command tries again") from exc
    return before not in turns


def thread_turn_ids(codex: str, codex_home: Path, thread: str) -> list[str]:
    """The turn ids of `thread` as Codex records them, from a short-lived `codex app-server` (no SDK: the proxy and
    the one-shot commands never load it). Raises RuntimeError with Codex's message when it refuses."""
    env = {**os.environ, "CODEX_HOME": str(codex_home)}
    proc = subprocess.Popen([codex, "app-server", "--listen", "stdio://"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=codex_home,
                            start_new_session=True)
    assert proc.stdin is not None and proc.stdout is not None
    lines = _Lines(proc.stdout.fileno(), time.monotonic() + ASK_TIMEOUT_S)
    try:
        def ask(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps({"id": rid, "method": method, "params": params}).encode() + b"\n")
            proc.stdin.flush()
            while True:
                msg = json.loads(lines.next())
                if isinstance(msg, dict) and msg.get("id") == rid and "method" not in msg:
                    if "error" in msg:
                        raise RuntimeError(str((msg.get("error") or {}).get("message") or msg["error"]))
                    result = msg.get("result")
                    return result if isinstance(result, dict) else {}

        ask(1, "initialize", {"clientInfo": {"name": "codexr", "title": "codexr", "version": "0"},
                              "capabilities": {"experimentalApi": True}})
        proc.stdin.write(b'{"method":"initialized"}\n')
        ids: list[str] = []
        cursor: Any = None
        for rid in range(2, 10_000):
            page = ask(rid, "thread/turns/list", {"threadId": thread, "cursor": cursor, "limit": 100,
                                                  "sortDirection": "asc", "itemsView": "notLoaded"})
            ids += [str(t.get("id")) for t in page.get("data") or [] if isinstance(t, dict)]
            cursor = page.get("nextCursor")
            if not cursor:
                break
        return ids
    finally:
        proc.stdin.close()
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class _Lines:
    """Lines from a pipe, each within the deadline (TimeoutError otherwise, RuntimeError at its end)."""

    def __init__(self, fd: int, deadline: float) -> None:
        self.fd, self.deadline, self.buf = fd, deadline, b""

    def next(self) -> bytes:
        while b"\n" not in self.buf:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError("no answer from Codex")
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise RuntimeError("Codex exited without answering")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line


def held_clause(held: dict[str, Any] | None, rolled_back: bool) -> str:
    """What an interrupted held restore's settling did to the conversation, for the recovery line ('' if none)."""
    if not held or held.get("kind") != KIND:
        return ""
    thread = str(held.get("thread") or "")[:12]
    if rolled_back:
        return (f" — it was a revert of thread {thread} whose conversation was not reverted, so its files were put "
                "back too: files and conversation are as before the revert")
    return (f" — it was a revert of thread {thread} whose conversation was reverted, so its files were finished too: "
            "files and conversation are both as before that prompt")
