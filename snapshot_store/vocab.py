"""The store's words, each spelled once: what a restore does to a path, and what a snapshot was taken for.

The values are the strings on disk (snapshot records, ref logs, restore journals) and in JSON output; a StrEnum
member compares, hashes and serialises as its string, so a value read back from disk needs no converting.
"""

from __future__ import annotations

from enum import StrEnum


class RestoreOp(StrEnum):
    """One step of a restore plan (restore/plan.py), as journaled and shown."""

    WRITE = "write"
    DELETE = "delete"
    RMDIR = "rmdir"
    LEAVE = "leave"


class SnapshotKind(StrEnum):
    """Why a snapshot was taken (its record's and ref line's `kind`)."""

    CAPTURE = "capture"  # `codexr snapshots capture`, and any capture that names no other kind
    SAFETY = "safety"  # a restore's, before it touches anything
    PRE_TURN = "pre-turn"  # a session's, committed before the prompt is sent
    POST_TURN = "post-turn"  # a session's, after the turn
    REWIND_TARGET = "rewind-target"  # a rewind's target: the pre-turn snapshot with pre-edit states laid over it
    PRE_EDIT = "pre-edit"  # single files by absolute path, as the agent's patches found them (states.py)
    STATES_SAFETY = "states-safety"  # single files as they were before a rewind or redo restored pre-edit states
    POST_EDIT = "post-edit"  # single files by absolute path, as a turn's patches left them outside the workspace


#: Kinds of snapshot that no workspace ref lists (a pin keeps them); every other kind with a workspace root is
#: history that a ref must name, and gc refuses while one is named by none (FORMAT.md §4).
UNLISTED_KINDS = frozenset({SnapshotKind.REWIND_TARGET, SnapshotKind.PRE_EDIT, SnapshotKind.STATES_SAFETY,
                            SnapshotKind.POST_EDIT})
#: Kinds that record single files by absolute path: rewind and redo restore them, never a workspace restore.
STATES_KINDS = frozenset({SnapshotKind.PRE_EDIT, SnapshotKind.STATES_SAFETY, SnapshotKind.POST_EDIT})
