"""A workspace's threads through a session's Codex: start, resume, archive, and the catalog's reads
(thread_catalog.py: list, prompts, last).

Why apart: the rewinder and the front ends ask which thread and which prompt; that answer joins Codex's record
(`thread/list`, `thread/read`) with the sidecars, and it is the same whoever ran the turns.
"""

from __future__ import annotations

from pathlib import Path

from ..codex.codex_connection import CodexConnection, dump_payload
from ..codex.daemon import CONTROL, STOP, Holder, held_elsewhere, holder
from ..errors import SessionError
from ..recording.sidecar import Sidecars
from ..recording.workspace_lock import LastThread
from .choices import Choices
from .thread_catalog import Prompt as Prompt
from .thread_catalog import ThreadCatalog
from .thread_catalog import ThreadSummary as ThreadSummary
from .thread_catalog import thread_source as thread_source


class Threads(ThreadCatalog):
    """The threads of one workspace, through one Codex connection: the catalog's reads and what changes threads."""

    def __init__(self, conn: CodexConnection, choices: Choices, sidecars: Sidecars, last: LastThread,
                 cwd: Path, home: Path) -> None:
        super().__init__(conn.raw, sidecars, last, cwd)
        self.conn, self.choices = conn, choices
        self.home = home  # CODEX_HOME: where Codex's daemon and its writer locks are
        self.started: set[str] = set()  # threads this session started: no turn ran on them before ours

    def start_thread(self) -> str:
        """A new thread in this workspace; its sidecar is written with its first turn."""
        client = self.conn.client
        resp = self.conn.rpc("cannot start a thread",
                             lambda: client.thread_start(self.choices.thread_params(self.cwd)))
        self.choices.noted(resp, dump_payload(resp))
        self.started.add(str(resp.thread.id))
        return str(resp.thread.id)

    def resume_thread(self, thread_id: str) -> str:
        """Load an existing thread into this Codex process (a no-op if already loaded).

        A thread another app-server holds and serves on a unix socket (Codex's managed daemon, where the official TUI
        runs its threads, CODEX_FACTS §11; another `codexr codex`'s) is worked on through that app-server from then
        on, as one more client of it (app/codex/daemon.py); where codexr may not, or the holder serves no socket, one
        line says which process has it and what to do.
        """
        try:
            return self._resume(thread_id)
        except SessionError as exc:
            if not held_elsewhere(str(exc)):
                raise
            who = holder(self.home, thread_id)
            door = who.door if who is not None else None
            # no holder known (no /proc/locks off Linux): the daemon is the one that keeps threads open
            link = None if door else who.socket(self.home) if who is not None else self.home.joinpath(*CONTROL)
            if self.conn.attached or (door is None and link is None):
                raise self._held_line(thread_id, who) from exc
            daemon = who is None or who.daemon
            what = ("Codex's app-server daemon" if daemon else "the app-server of a codexr codex" if door
                    else "another Codex app-server") + (f" (pid {who.pid})" if who is not None else "")
            try:
                self.conn.attach(what, link=link, door=door)
            except SessionError as why:
                fix = f"quit the `codex` that has it and run `{STOP}`" if daemon else "quit what has it open"
                raise SessionError(f"thread {thread_id} is open in {what}, and codexr does not work through it: "
                                   f"{why}; {fix}, then try again") from exc
            self.conn.notice("codexr/attached", {"threadId": thread_id, "message": (
                f"thread {thread_id} is open in {what}: codexr works through it")})
            try:
                return self._resume(thread_id)
            except SessionError as again:
                if not held_elsewhere(str(again)):
                    raise
                raise self._held_line(thread_id, holder(self.home, thread_id)) from again

    def _resume(self, thread_id: str) -> str:
        params = self.choices.thread_params(self.cwd)
        params["excludeTurns"] = True
        client = self.conn.client
        resp = self.conn.rpc(f"cannot resume thread {thread_id}", lambda: client.thread_resume(thread_id, params))
        self.choices.noted(resp, dump_payload(resp))
        return str(resp.thread.id)

    @staticmethod
    def _held_line(thread_id: str, who: Holder | None) -> SessionError:
        """A thread another app-server has open, said so a user knows which one and what to do."""
        where = f" ({who})" if who else ""
        return SessionError(f"thread {thread_id} is open in another Codex app-server{where}: quit the codex or "
                            f"codexr that has it open (for Codex's daemon: `{STOP}`), then try again")

    def archive_thread(self, thread_id: str) -> None:
        """Archive a thread (Codex moves its rollout; its sidecar and snapshots stay)."""
        client = self.conn.client
        self.conn.rpc(f"cannot archive thread {thread_id}", lambda: client.thread_archive(thread_id))

    def unarchive_thread(self, thread_id: str) -> None:
        """Bring an archived thread back."""
        client = self.conn.client
        self.conn.rpc(f"cannot unarchive thread {thread_id}", lambda: client.thread_unarchive(thread_id))

    def mark_used(self, thread_id: str) -> None:
        """The user sent a prompt on `thread_id` or switched to it: `--last` means this thread from now on."""
        self.last.mark(thread_id)

