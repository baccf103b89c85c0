"""Why a path was seen but not captured: the codes stored in `["x", reason]` / `["D", reason]` entries.

They are part of the on-disk format (FORMAT.md §3) and restores decide by them, so they are named
constants compared by identity of meaning, never re-typed strings: rewording one is a format change.
"""

from __future__ import annotations

from enum import StrEnum


class Reason(StrEnum):
    """A stored reason code (its value is what the manifest holds and what users read)."""

    GIT = "git"
    CODEXR_DATA = "codexr data"
    CHURN = "churn directory"
    HIDDEN = "hidden"
    IGNORED = "ignored"
    DIRECTORY = "directory"
    NOT_REGULAR = "not a regular file"
    BEHIND_SYMLINK = "behind a symlink"
    REPLACED = "replaced during capture"
    CHANGING = "kept changing during capture"
    TOO_LARGE = "larger than the residue size limit"
    OVER_LIMIT = "beyond the recent-file limit"


UNREADABLE = "unreadable: "  # followed by the system's error text


def unreadable(strerror: str | None) -> str:
    """The reason of a path the capture could not read."""
    return f"{UNREADABLE}{strerror}"


#: Directories a capture chose not to enter although it could have: a restore may write below them.
ENTERABLE_DIRS = frozenset({Reason.CHURN, Reason.HIDDEN, Reason.IGNORED, Reason.DIRECTORY})
#: Directories never reported to the user as "not looked into" when a restore leaves them.
NEVER_REPORTED_DIRS = frozenset({Reason.GIT, Reason.CODEXR_DATA})
#: Residue files held back only by the capture's limits (a restore's safety capture lifts them).
HELD_BACK = frozenset({Reason.TOO_LARGE, Reason.OVER_LIMIT})
