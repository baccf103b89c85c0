"""Binds file snapshots to a workspace's turns, whoever sends them: the SDK-driven turns (app/services/turns.py) or the
proxy in front of another client's app-server (app/proxy/). One recorder, fed app-server messages.

A turn is recorded in four steps: `begin` (the pre-turn capture, committed before `turn/start` is sent),
`bind` (the turn id the server answered, in the thread's sidecar), `observe` (each notification of the turn:
agent-touched paths, patches, commands, items) and `finish` (the patches' pre-edit states, the sidecar's record of
the turn, the post-turn capture). The sidecar is changed only by read-modify-write under its lock, and the turn's
agent-touched paths are saved before the post-turn capture, so a failing capture cannot lose them.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from snapshot_store import Store, StoreError
from snapshot_store.manifest import Entry, SnapshotRecord, captured_items
from snapshot_store.safefs import SafeRoot
from snapshot_store.scope import forbidden
from snapshot_store.settings import ScopeSettings
from snapshot_store.states import STATES_ROOT, capture_states, save_states
from snapshot_store.vocab import SnapshotKind

from . import pre_edit as pe
from .sidecar import Sidecars, ThreadSidecar, TurnRecord, relative_to

#: Items that change no file: a turn of only these leaves the workspace as it was (Recorder.observe).
TALK_ITEMS = frozenset({"userMessage", "agentMessage", "reasoning", "plan", "webSearch", "contextCompaction",
                        "enteredReviewMode", "exitedReviewMode"})


@dataclass
class TurnState:
    """What the notifications of one turn said so far."""

    open_items: dict[str, dict[str, Any]] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)
    final: str = ""
    patches: list[pe.PatchChange] = field(default_factory=list)  # every completed fileChange, in order
    turn_diff: str = ""  # Codex's latest cumulative diff of the turn (turn/diff/updated)
    commands: int = 0
    building: bool = False  # the store was asked to build what the post-turn capture may go on from


@dataclass
class Finished:
    """What `finish` made of a turn."""

    post: str | None
    post_seconds: float
    capture_error: str | None
    changed: list[str]
    """Workspace paths the turn changed: its patches' and, from the two snapshots, its shell commands'."""


class Recorder:
    """Snapshots and sidecar records of the turns run in one workspace."""

    def __init__(self, store: Store, sidecars: Sidecars, cwd: Path, scope: ScopeSettings, tracking: bool) -> None:
        self.store, self.sidecars, self.cwd, self.scope, self.tracking = store, sidecars, cwd, scope, tracking
        #: (count, limit) of the untracked files the last capture held back by the recent-file limit: front ends say
        #: it (a restore's plan said it first, long after).
        self.over_limit: tuple[int, int] = (0, 0)

    def sidecar(self, thread_id: str) -> ThreadSidecar:
        """The thread's sidecar, created (untracked turns and all) if codexr never saw it."""
        side = self.sidecars.load(thread_id)
        if side is None:
            side = ThreadSidecar(thread_id=thread_id, cwd=str(self.cwd), tracking=self.tracking)
        return side

    def known_paths(self, side: ThreadSidecar) -> list[str]:
        """Agent-touched paths plus everything the thread captured before (tracking only grows).

        A damaged snapshot is an error, not an empty list: capturing less than the thread tracks
        would let a later restore treat those paths as never seen.
        """
        known = list(side.agent_touched)
        latest = side.latest_snapshot()
        if latest is not None:
            known.extend(p for p, _e in captured_items(self.store.files(latest)))
        return known

    def capture(self, side: ThreadSidecar, kind: str, label: str) -> str | None:
        """A snapshot of the workspace with everything the thread tracks (None when the thread is untracked)."""
        if not side.tracking:
            return None
        # The thread's latest snapshot is passed, not decoded here: when it is the workspace's latest too (no other
        # capture since), the capture grows from it and an unchanged tree decodes no manifest.
        res = self.store.at(self.cwd).capture_thread_summary(
            known_paths=side.agent_touched, thread_latest=side.latest_snapshot(), label=label, scope=self.scope,
            kind=kind)
        self.over_limit = (res.over_limit, res.residue_max_files)
        return res.id

    def begin(self, side: ThreadSidecar, text: str) -> tuple[str | None, float]:
        """The pre-turn capture (committed before the turn is sent) and the seconds it took."""
        t0 = time.perf_counter()
        pre = self.capture(side, SnapshotKind.PRE_TURN, f"before: {text[:60]}")
        return pre, time.perf_counter() - t0

    def bind(self, thread_id: str, side: ThreadSidecar, turn_id: str, text: str, pre: str | None) -> None:
        """Record the turn the server started, with its pre-turn snapshot, in the thread's sidecar."""

        def add_turn(s: ThreadSidecar) -> None:
            if s.turn(turn_id) is None:
                s.turns.append(TurnRecord(turn_id=turn_id, prompt=text, pre=pre))

        self.sidecars.update(thread_id, add_turn, new=lambda: side)

    def observe(self, state: TurnState, method: str, d: dict[str, Any]) -> None:
        """Take in one notification of the turn. Its first item that may change files (not talk) lets the store
        build what the post-turn capture may go on from while the turn runs (Capturer.build_ahead): a turn that only
        talks needs no map (the journal says nothing changed), and a thread building it beside the post-turn
        capture slowed that capture ~4x through the GIL (100,000 files, issue 35)."""
        if method in ("item/started", "item/completed"):
            item = d.get("item") or {}
            if not state.building and item.get("type") not in TALK_ITEMS:
                state.building = True
                self.store.capturer.build_ahead(self.cwd)
            if item.get("type") == "fileChange":
                for ch in item.get("changes") or []:
                    self._touch(state, ch)
                if method == "item/completed":
                    state.patches.extend(_patch_changes(item))
            elif item.get("type") == "commandExecution" and method == "item/completed":
                state.commands += 1
            if method == "item/started":
                state.open_items[str(item.get("id"))] = item
            else:
                state.open_items.pop(str(item.get("id")), None)
            if method == "item/completed":
                state.items.append(item)
                if item.get("type") == "agentMessage":
                    state.final = str(item.get("text") or "")
        elif method == "turn/diff/updated":
            state.turn_diff = str(d.get("diff") or "")

    def finish(self, thread_id: str, turn_id: str, text: str, state: TurnState, status: str,
               pre: str | None) -> Finished:
        """The turn's pre-edit states and sidecar record, then the post-turn capture bound to it."""
        side = self.sidecar(thread_id)
        capture_error: str | None = None
        pre_edit: str | None = None
        post_edit: str | None = None
        # Outside the workspace only the agent's patches are recorded (and a rewind restores them).
        outside = sorted({path for ch in state.patches for path in (ch.path, ch.move_path)
                          if path and relative_to(str(self.cwd), path) is None})
        if side.tracking:
            try:
                pre_edit = self._save_pre_edit(state, text, side, pre)
            except (StoreError, OSError) as exc:
                capture_error = f"the pre-edit states of the turn's patches could not be saved: {exc}"
            try:  # as the turn left them: a rewind keeps what the user changed there since (issue 34)
                post_edit = capture_states(self.store, outside, label=f"post-edit: {text[:60]}") if outside else None
            except (StoreError, OSError) as exc:  # without it a rewind restores those paths as before issue 34
                capture_error = capture_error or f"the states the turn's patches left outside the workspace " \
                                                 f"could not be saved: {exc}"

        def finish(s: ThreadSidecar) -> None:
            s.touch(state.touched)
            rec = s.turn(turn_id)
            if rec is not None:
                rec.status = status
                rec.pre_edit = pre_edit
                rec.post_edit = post_edit
                rec.commands = state.commands

        side = self.sidecars.update(thread_id, finish)
        t1 = time.perf_counter()
        post: str | None = None
        try:
            post = self.capture(side, SnapshotKind.POST_TURN, f"after: {text[:60]}")
        except StoreError as exc:
            capture_error = f"the snapshot after the turn failed: {exc}"  # (replaces a pre-edit error)
        post_seconds = time.perf_counter() - t1
        if post is not None:
            def bind_post(s: ThreadSidecar) -> None:
                rec = s.turn(turn_id)
                if rec is not None:
                    rec.post = post

            self.sidecars.update(thread_id, bind_post)
        changed = set(state.touched)
        changed.update(outside)  # by absolute path, as the rewind's plan names them
        if pre is not None and post is not None:
            # Shell commands change files too: the snapshots, not apply_patch items, say what changed.
            with contextlib.suppress(StoreError):
                changed.update(c.path for c in self.store.diff(pre, post))
        return Finished(post, post_seconds, capture_error, sorted(changed))

    def _save_pre_edit(self, state: TurnState, text: str, side: ThreadSidecar, pre: str | None) -> str | None:
        """Record what every patched path held before the turn (content-addressed, keyed by absolute path)."""
        if not state.patches:
            return None
        with SafeRoot(STATES_ROOT) as fs:
            states, unknown = pe.pre_edit_states(state.patches, lambda p: pe.read_file_now(fs, p))
        patched = set(states) | set(unknown)
        deleted = pe.settle_deleted(states, unknown, lambda paths: self.last_seen(side, pre, paths),
                                    lambda path, content: pe.sibling_twin(path, content, patched))
        for path in [p for p in states if forbidden(p.lstrip("/"))]:
            del states[path]
            unknown[path] = "not recoverable: inside .git (never recorded or written)"
        existed = pe.existed_before_turn(state.turn_diff, str(self.cwd))
        for path in [p for p, st in states.items() if st.content is None and st.link is None and p in existed]:
            del states[path]  # an Add File over an existing file: its earlier content is not in the patch
            unknown[path] = "not recoverable: the patch added it over an existing file"
        return save_states(self.store, states, label=f"pre-edit: {text[:60]}",
                           meta={"unrecoverable": unknown, "deleted": deleted})

    def last_seen(self, side: ThreadSidecar, pre: str | None, paths: list[str]) -> dict[str, tuple[Entry, str]]:
        """The newest file or symlink entry this thread's snapshots and records hold for each path (and by whom).

        Newest first: this prompt's snapshot, then each earlier prompt's (after, its patches' record, before),
        then the rewinds' safety snapshots. A witnessed absence ends the search for a path: whatever stood
        there later was never seen.
        """
        order: list[tuple[str | None, str]] = [(pre, "this prompt's snapshot")]
        for rec in reversed(side.turns):
            order += [(rec.post, "an earlier prompt's snapshot"), (rec.pre_edit, "an earlier prompt's patch record"),
                      (rec.pre, "an earlier prompt's snapshot")]
        for entry in reversed(side.redo):
            order += [(entry.outside_safety_id, "a rewind's safety snapshot"),
                      (entry.safety_id, "a rewind's safety snapshot")]
        found: dict[str, tuple[Entry, str]] = {}
        left = set(paths)
        looked: set[str] = set()
        for snap, what in order:
            if not left:
                break
            if not snap or snap in looked:
                continue
            looked.add(snap)
            try:
                if not self.store.exists(snap):
                    continue
                root = self.store.head(snap).root
                keys = {p: p.lstrip("/") if root == STATES_ROOT else relative_to(root, p) for p in left}
                if not any(keys.values()):
                    continue
                files = self.store.files(snap)
            except StoreError:
                continue  # a damaged or collected snapshot says nothing
            for path, key in keys.items():
                e = files.get(key) if key else None
                if e is not None and e.kind in ("f", "l"):
                    found[path] = (e, what)
                    left.discard(path)
                elif e is not None and e.kind == "-":
                    left.discard(path)
        return found

    def _touch(self, state: TurnState, change: dict[str, Any]) -> None:
        for key in ("path", "movePath", "move_path"):
            value = change.get(key)
            kind = change.get("kind")
            if key != "path" and isinstance(kind, dict):
                value = kind.get("move_path") or kind.get("movePath")
            if isinstance(value, str) and value:
                rel = relative_to(str(self.cwd), os.path.realpath(value))
                if rel is not None and rel not in state.touched:
                    state.touched.append(rel)


def _patch_changes(item: dict[str, Any]) -> list[pe.PatchChange]:
    """A completed patch's changes; one that failed part-way leaves its paths not recoverable."""
    status = item.get("status")
    changes = pe.changes_of(item)
    if status == "completed":
        return changes
    if status == "failed":
        return [pe.PatchChange(c.path, "failed", "") for c in changes]
    return []  # declined: nothing was written


class PreTurnAhead:
    """The pre-turn capture of a new thread's first prompt, taken on a thread while Codex starts (`codexr exec`): at
    100,000 files the capture (~130 ms) and Codex's start each took about as long, one after the other, and together
    were most of what `codexr exec` cost over `codex exec` (issue 35). A new thread tracks nothing yet, so the capture
    is the one `Recorder.begin` would take once the thread exists; it is committed before the turn is sent."""

    def __init__(self, recorder: Recorder, text: str) -> None:
        self.text = text
        self._out: tuple[str | None, float] | None = None
        self._error: BaseException | None = None
        side = ThreadSidecar(thread_id="", cwd=str(recorder.cwd), tracking=recorder.tracking)
        self._thread = threading.Thread(target=self._run, args=(recorder, side), name="codexr-pre-turn", daemon=True)
        self._thread.start()

    def _run(self, recorder: Recorder, side: ThreadSidecar) -> None:
        try:
            self._out = recorder.begin(side, self.text)
        except BaseException as exc:  # the caller takes the capture again, and meets the error in its own thread
            self._error = exc

    def wait(self) -> None:
        """Until the capture has ended (the store is not closed under it)."""
        self._thread.join()

    def result(self) -> tuple[str | None, float] | None:
        """The pre-turn snapshot and the seconds it took (None: the capture failed; take it again)."""
        self.wait()
        return None if self._error is not None else self._out


class RecordsAhead:
    """The records of the workspace's newest snapshot's chain, read on a thread while Codex starts (`codexr rewind`
    and `redo`, Repository.chain_aside): the rewind's target map is then replayed from them instead of decoded
    after Codex has started. Only a head start: on any error the rewind reads the records itself, and meets it."""

    def __init__(self, store: Store, cwd: Path) -> None:
        self._store = store
        self._records: dict[str, SnapshotRecord] = {}
        self._thread = threading.Thread(target=self._run, args=(cwd,), name="codexr-records-ahead", daemon=True)
        self._thread.start()

    def _run(self, cwd: Path) -> None:
        with contextlib.suppress(Exception):
            self._records = self._store.chain_aside(cwd)

    def wait(self) -> None:
        """Until the reads have ended (the store is not closed under them)."""
        self._thread.join()

    def keep(self) -> None:
        """Wait, then hand what was read to the store's caches (this thread owns them)."""
        self.wait()
        self._store.keep_records(self._records)
