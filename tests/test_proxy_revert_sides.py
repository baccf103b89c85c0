"""A revert through the proxy (the official TUI's Esc Esc) changes files and conversation together or neither, even
when `codexr app-server` is SIGKILLed at a chosen syscall of it or the disk fills up part-way (issue 30 §3).

The invariant checked after every case, once the next codexr command ran: the files are as before the prompt
exactly when Codex's record of the thread no longer holds that prompt, and as they were otherwise. The client is
the official SDK pointed at the `codexr-codex` shim (as the IDE extension would be); the kill comes from strace
wrapped around it; Codex's record is read by a fresh, real app-server.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from fs_helpers import tree
from test_cli_agent import show
from test_proxy import SHIM, codexr, proxy_env, revert, run_turn, through_shim

from app.codex.codex_bin import pinned_path
from app.codex.codex_sdk import CodexClient, CodexConfig
from app.codex.scripted_model import ScriptedModel, message, shell
from app.rewind.held import thread_turn_ids
from snapshot_store.ids import workspace_key

STRACE = shutil.which("strace")
needs_strace = pytest.mark.skipif(STRACE is None, reason="needs strace (kills the proxy at a chosen syscall)")
FILES = 12


def killing_shim(tmp_path: Path, *strace_args: str) -> Path:
    """A Codex executable for the SDK: `codexr app-server` (what the `codexr-codex` shim execs) under strace, which
    kills or slows it as told. `-f` for its threads (the recorder's), `-b execve` to let go of the Codex it starts."""
    wrapper = tmp_path / "codex-under-strace"
    args = " ".join(f"'{a}'" for a in strace_args)
    wrapper.write_text(f"#!/bin/sh\nexec '{STRACE}' -f -b execve -qq -o /dev/null {args} "
                       f"'{sys.executable}' -m app.cli \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper


def two_prompts(model: ScriptedModel, ws: Path, env: dict[str, str], tag: str, codex_bin: Path
                ) -> tuple[CodexClient, str, str, dict[str, object], dict[str, object]]:
    """Prompt 1 rewrites every file by shell, prompt 2 only answers: the client, thread, prompt 1's turn id, and
    the workspace before and after them."""
    model.script(f"{tag} one", [shell(f"for i in $(seq 1 {FILES}); do echo changed > f$i.txt; done"),
                                message("changed them")])
    model.script(f"{tag} two", [message("nothing more")])
    before = tree(ws)
    client, thread = through_shim(ws, env, codex_bin)
    try:
        first = run_turn(client, thread, f"{tag} one")
        assert first["status"] == "completed"
        assert run_turn(client, thread, f"{tag} two")["status"] == "completed"
    except BaseException:
        client.close()
        raise
    after = tree(ws)
    assert after != before
    return client, thread, str(first["id"]), before, after


def workspace(tmp_path: Path, content: str = "original {i}\n") -> Path:
    ws = tmp_path / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    for i in range(1, FILES + 1):
        (ws / f"f{i}.txt").write_text(content.format(i=i))
    return Path(os.path.realpath(ws))


def slow_sidecars(model: ScriptedModel, tmp_path: Path) -> tuple[Path, dict[str, str], Path, Path]:
    """A workspace, its environment, the sidecars' directory and a shim under strace that delays each fsync of that
    directory by 1 s: every sidecar write, so the recorder's bookkeeping lags behind the frames it follows."""
    ws = workspace(tmp_path)
    env = proxy_env(model, tmp_path / "home")
    sidecars = tmp_path / "home" / "file_snapshots" / "refs" / "threads"
    sidecars.mkdir(parents=True)
    shim = killing_shim(tmp_path, "-P", str(sidecars), "-e", "trace=fsync", "-e", "inject=fsync:delay_enter=1000000")
    return ws, env, sidecars, shim


def codex_turns(env: dict[str, str], ws: Path, thread: str) -> int:
    """How many prompts Codex's own record of the thread holds (a fresh real app-server, not the proxy)."""
    client = CodexClient(CodexConfig(cwd=str(ws), env=env))
    client.start()
    try:
        client.initialize()
        return len(client.thread_read(thread, include_turns=True).thread.turns or [])
    finally:
        client.close()


def redo_entries(home: Path, thread: str) -> list[dict[str, object]]:
    doc = json.loads((home / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())
    entries: list[dict[str, object]] = doc["redo"]
    return entries


def killed_revert(client: CodexClient, thread: str, first: str) -> None:
    """Send the revert; the proxy is killed under it (the SDK sees its process end)."""
    try:
        revert(client, thread, first)
    except Exception:
        pass
    finally:
        client.close()


@needs_strace
def test_a_proxy_killed_while_its_revert_restores_files_leaves_files_and_conversation_as_they_were(
        model: ScriptedModel, tmp_path: Path) -> None:
    """SIGKILL at the 5th file the revert writes (renameat in the workspace): the revert never reached Codex, so the
    next command puts the 4 written files back (it does not finish them) and says why; no redo entry is left."""
    ws = workspace(tmp_path)
    env = proxy_env(model, tmp_path / "home")
    shim = killing_shim(tmp_path, "-P", str(ws), "-e", "trace=renameat,renameat2",
                        "-e", "inject=renameat,renameat2:signal=KILL:when=5")
    client, thread, first, before, after = two_prompts(model, ws, env, "kill mid restore", shim)
    killed_revert(client, thread, first)
    journal = tmp_path / "home" / "file_snapshots" / "journal" / f"{workspace_key(str(ws))}.json"
    assert journal.exists(), "the proxy was not killed mid-restore"
    assert tree(ws) not in (before, after), "the kill did not come part-way through the restore"
    nxt = codexr(env, ws, "snapshots", "capture")
    assert nxt.returncode == 0, show(nxt)
    assert "conversation was not reverted" in nxt.stderr, show(nxt)
    assert tree(ws) == after, "files were reverted while the conversation was not"
    assert codex_turns(env, ws, thread) == 2
    # What the next command's judge reads when a revert was sent: Codex's own record, by a short-lived app-server.
    ids = thread_turn_ids(str(pinned_path()), tmp_path / "home", thread)
    assert len(ids) == 2 and ids[0] == first
    assert redo_entries(tmp_path / "home", thread) == []


@needs_strace
def test_a_proxy_killed_once_codex_reverted_the_conversation_finishes_the_files(model: ScriptedModel,
                                                                                tmp_path: Path) -> None:
    """SIGKILL as the proxy lets go of the held restore, after Codex answered the revert: the next command asks Codex,
    finds the prompt gone, and finishes the files; the thread's records end before the prompt; redo brings both
    back."""
    ws = workspace(tmp_path)
    env = proxy_env(model, tmp_path / "home")
    journal = tmp_path / "home" / "file_snapshots" / "journal" / f"{workspace_key(str(ws))}.json"
    shim = killing_shim(tmp_path, "-P", str(journal), "-e", "trace=unlink,unlinkat",
                        "-e", "inject=unlink,unlinkat:signal=KILL")
    client, thread, first, before, after = two_prompts(model, ws, env, "kill at release", shim)
    killed_revert(client, thread, first)
    assert journal.exists(), "the proxy was not killed as it let go of the restore"
    nxt = codexr(env, ws, "snapshots", "capture")
    assert nxt.returncode == 0, show(nxt)
    assert "conversation was reverted" in nxt.stderr, show(nxt)
    assert codex_turns(env, ws, thread) == 0
    assert tree(ws) == before, "the conversation was reverted but the files were not"
    side = json.loads((tmp_path / "home" / "file_snapshots" / "refs" / "threads" / f"{thread}.json").read_text())
    assert side["turns"] == []
    redo = codexr(env, ws, "redo", "--thread", thread, "--yes")
    assert redo.returncode == 0, show(redo)
    assert tree(ws) == after


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (CI runs as root)")
def test_a_revert_that_fills_the_disk_puts_back_what_it_wrote_and_says_so(model: ScriptedModel,
                                                                         tmp_path: Path) -> None:
    """The workspace on an 8 MiB tmpfs with room for about three of the files the revert writes back: the revert is
    refused saying the written files were put back; files and conversation are as they were; nothing to redo. With
    space again the same revert works, and one redo brings everything back."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("tmpfs cannot be mounted here")
    try:
        ws = workspace(mnt, "{i}" + "o" * 400_000 + "\n")
        env = proxy_env(model, tmp_path / "home")
        client, thread, first, before, after = two_prompts(model, ws, env, "disk full", SHIM)
        try:
            filler = mnt / "filler"
            with open(filler, "wb") as fh:
                st = os.statvfs(mnt)
                fh.write(b"\0" * max(0, st.f_bavail * st.f_frsize - 1_300_000))
            why = revert(client, thread, first)
            assert why is not None and "nothing was reverted" in why, why
            assert "put back" in why, why
            assert tree(ws) == after, "the failed revert left files changed"
            assert len(client.thread_read(thread, include_turns=True).thread.turns or []) == 2
            assert redo_entries(tmp_path / "home", thread) == []
            filler.unlink()
            assert revert(client, thread, first) is None
            assert tree(ws) == before
        finally:
            client.close()
        redo = codexr(env, ws, "redo", "--thread", thread, "--yes")
        assert redo.returncode == 0, show(redo)
        assert tree(ws) == after
        again = codexr(env, ws, "redo", "--thread", thread, "--yes")
        assert again.returncode != 0 and "Traceback" not in again.stderr, show(again)
    finally:
        subprocess.run(["umount", "-l", str(mnt)])



class RawClient:
    """The app-server protocol spoken line by line to the shim (the SDK hides notifications of a finished turn,
    which is what the official TUI gets a revert's line as)."""

    def __init__(self, codex_bin: Path, ws: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([str(codex_bin), "app-server"], cwd=ws, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.ids = iter(range(1, 1 << 30))
        self.notes: list[dict[str, Any]] = []

    def next(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "the proxy closed"
        msg: dict[str, Any] = json.loads(line)
        return msg

    def ask(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        rid = next(self.ids)
        self.proc.stdin.write(json.dumps({"id": rid, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while (msg := self.next()).get("id") != rid or "method" in msg:
            self.notes.append(msg)
        return msg

    def until(self, method: str, text: str = "") -> dict[str, Any]:
        """The next notification of `method` whose text holds `text` (earlier ones first, then new ones)."""
        for i, msg in enumerate(self.notes):
            if msg.get("method") == method and text in json.dumps(msg):
                return self.notes.pop(i)
        while not ((msg := self.next()).get("method") == method and text in json.dumps(msg)):
            self.notes.append(msg)
        return msg

    def one_prompt(self, ws: Path, text: str) -> tuple[str, str]:
        """initialize, a thread in `ws`, one prompt run to its end: the thread's and the turn's ids."""
        self.ask("initialize", {"clientInfo": {"name": "t", "title": "t", "version": "1"},
                                "capabilities": {"experimentalApi": True}})
        thread = self.ask("thread/start", {"cwd": str(ws), "approvalPolicy": "never",
                                           "sandbox": "danger-full-access"})["result"]["thread"]["id"]
        turn = self.ask("turn/start", {"threadId": thread, "input": [{"type": "text", "text": text}]})
        self.until("turn/completed")
        return str(thread), str(turn["result"]["turn"]["id"])

    def close(self) -> None:
        """Close its stdin: the proxy finishes and exits."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)


@needs_strace
def test_the_line_saying_files_were_restored_comes_before_the_proxys_bookkeeping(model: ScriptedModel,
                                                                                  tmp_path: Path) -> None:
    """codexr's line about the files comes right after Codex's `thread/reverted` (the official TUI redraws the thread
    on it: a line sent before is drawn over) and does not wait for the recorder: with every sidecar write slowed by
    1 s (strace delays the fsync of their directory), the line arrives while the revert's held restore is not yet
    released (the recorder cuts the thread's records first, a slowed write, then releases it), and afterwards the
    sidecar ends without the prompt and the held restore's journal is gone. (It watched the sidecar, which the cut
    changes before its slowed fsync: since turn/completed waits for the turn's own sidecar writes, nothing is queued
    ahead of the cut on the recorder's thread to hold it back.)"""
    ws, env, sidecars, shim = slow_sidecars(model, tmp_path)
    journals = tmp_path / "home" / "file_snapshots" / "journal"
    model.script("line order one", [shell("echo changed > f1.txt"), message("changed f1")])
    client = RawClient(shim, ws, env)
    try:
        thread, first_id = client.one_prompt(ws, "line order one")
        sidecar = sidecars / f"{thread}.json"
        assert "error" not in client.ask("thread/revert", {"threadId": thread, "beforeTurnId": first_id})
        client.notes.clear()
        client.until("error", "files went back")
        # The official TUI redraws the reverted thread on `thread/reverted`, over anything drawn before it.
        assert any(n.get("method") == "thread/reverted" for n in client.notes), "the line came before thread/reverted"
        held_then = list(journals.glob("*.json"))
        deadline = time.monotonic() + 60
        while ((json.loads(sidecar.read_text())["turns"] or list(journals.glob("*.json")))
               and time.monotonic() < deadline):
            time.sleep(0.1)
        prompts_after = len(json.loads(sidecar.read_text())["turns"])
    finally:
        client.close()
    assert held_then, "the line waited for the recorder's bookkeeping (the held restore was released already)"
    assert prompts_after == 0 and not list(journals.glob("*.json"))
    assert (ws / "f1.txt").read_text() == "original 1\n"


@needs_strace
def test_a_file_saved_as_the_client_hears_the_turn_ended_is_the_users(model: ScriptedModel, tmp_path: Path) -> None:
    """The client (the official TUI, the IDE) shows a turn done on `turn/completed`: a file the user saves then is
    theirs, and a rewind of that prompt keeps it. The proxy forwarded the frame first and finished the turn after
    (sidecar, then the post-turn capture), so that capture could hold the user's file and the rewind took it for
    the agent's and deleted it. Here every sidecar write is slowed by 1 s (strace delays the fsync of their
    directory), which held the capture back while the file was saved."""
    ws, env, _sidecars, shim = slow_sidecars(model, tmp_path)
    model.script("heard it end", [shell("echo changed > f1.txt"), message("changed f1")])
    client = RawClient(shim, ws, env)
    try:
        thread, _turn = client.one_prompt(ws, "heard it end")
        (ws / "mine.txt").write_text("saved as the turn ended\n")
    finally:
        client.close()
    rewind = codexr(env, ws, "rewind", "--thread", thread, "--to", "1", "--yes")
    assert rewind.returncode == 0, show(rewind)
    assert (ws / "f1.txt").read_text() == "original 1\n", show(rewind)
    assert (ws / "mine.txt").read_text() == "saved as the turn ended\n", show(rewind)


def test_a_client_that_leaves_mid_revert_finds_files_and_conversation_on_one_side(model: ScriptedModel,
                                                                                   tmp_path: Path) -> None:
    """The client sends the revert and closes its end at once (the TUI killed, a closed IDE window): the proxy
    settles its held restore before it exits, by asking Codex, so nothing is left for later and the files are as
    before the prompt exactly when the conversation no longer holds it."""
    outcomes = []
    for trial, wait in enumerate((0.0, 0.3)):
        ws = workspace(tmp_path / f"t{trial}")
        env = proxy_env(model, tmp_path / f"t{trial}" / "home")
        model.script(f"leave mid revert {trial}", [shell("echo changed > f1.txt"), message("changed f1")])
        before = tree(ws)
        client = RawClient(Path(str(SHIM)), ws, env)
        thread, turn = client.one_prompt(ws, f"leave mid revert {trial}")
        after = tree(ws)
        assert client.proc.stdin is not None
        client.proc.stdin.write(json.dumps({"id": 99, "method": "thread/revert", "params": {
            "threadId": thread, "beforeTurnId": turn}}) + "\n")
        client.proc.stdin.flush()
        time.sleep(wait)
        client.close()
        journal = tmp_path / f"t{trial}" / "home" / "file_snapshots" / "journal" / f"{workspace_key(str(ws))}.json"
        assert not journal.exists(), "the proxy left its held restore for a later command"
        reverted = codex_turns(env, ws, thread) == 0
        assert tree(ws) == (before if reverted else after), f"trial {trial}: files and conversation disagree"
        outcomes.append(reverted)
    assert len(outcomes) == 2


def test_the_fork_a_revert_keeps_the_conversation_in_is_never_shown_to_the_client(model: ScriptedModel,
                                                                                  tmp_path: Path) -> None:
    """The proxy forks the thread before a revert (the fork is what `codexr redo` returns to) and keeps the fork's
    notifications from the client: the official TUI takes a `thread/started` it did not ask for as its new thread
    and then drops codexr's line about the files. Codex sends them right behind the fork's answer, before the
    proxy's own code reads that answer, so none may slip through in between."""
    for trial in range(3):
        ws = workspace(tmp_path / f"t{trial}")
        env = proxy_env(model, tmp_path / f"t{trial}" / "home")
        model.script(f"hidden fork {trial}", [shell("echo changed > f1.txt"), message("changed f1")])
        client = RawClient(Path(str(SHIM)), ws, env)
        try:
            thread, turn = client.one_prompt(ws, f"hidden fork {trial}")
            client.notes.clear()
            assert "error" not in client.ask("thread/revert", {"threadId": thread, "beforeTurnId": turn})
            line = json.dumps(client.until("error", "files went back"))
            fork = line.split("undone prompts stay in thread ")[1][:36]
            seen = [n.get("method") for n in client.notes if fork in json.dumps(n)]
        finally:
            client.close()
        assert seen == [], f"trial {trial}: the client was shown the proxy's fork: {seen}"
