"""Every failure the store reports is a StoreError with a one-line, user-facing message."""

from __future__ import annotations


class StoreError(Exception):
    """Base class: callers show str(error) as one line and exit without a traceback."""


class UnknownSnapshot(StoreError):
    """The id (or prefix) names no snapshot in this store."""


class TargetGone(StoreError):
    """An interrupted restore cannot be finished: its target snapshot is gone (a gc of a codexr that did not keep a
    restore journal's snapshots dropped it). Its safety snapshot, which still holds the state before the restore, is
    the one restore that may go past the journal (Workspace.prepare)."""

    def __init__(self, root: str, target: str, safety: str) -> None:
        self.target, self.safety = target, safety
        self.way_out: str | None = safety  # the one restore that may go past the journal
        super().__init__(
            f"an interrupted restore into {root} cannot be finished: its target snapshot {target[:12]} is gone (a gc "
            f"before codexr kept a restore's snapshots removed it); snapshot {safety[:12]} holds the state before that "
            f"restore: `codexr snapshots restore {safety[:12]} --yes` puts it back (the files as they are now are kept "
            f"in a safety snapshot first)")


class SafetyGone(StoreError):
    """An interrupted restore can be neither finished nor rolled back: its safety snapshot, which says what each path
    held before it, is gone (only damage does that: gc keeps a journal's snapshots). The restore of its target, which
    finishes what it began, goes past the journal; with the target gone too (`way_out` None), any restore does."""

    def __init__(self, root: str, target: str, safety: str, target_there: bool) -> None:
        self.target, self.safety = target, safety
        self.way_out: str | None = target if target_there else None
        how = (f"`codexr snapshots restore {target[:12]} --yes` finishes it" if target_there else
               f"its target snapshot {target[:12]} is gone too: any `codexr snapshots restore ID --yes` goes past it")
        super().__init__(
            f"an interrupted restore into {root} can be neither finished nor undone: its safety snapshot {safety[:12]} "
            f"is gone or unreadable (the store is damaged: `codexr snapshots verify`); the files stand as it left "
            f"them: {how} (the files as they are now are kept in a safety snapshot first)")


class AmbiguousSnapshot(StoreError):
    """The prefix matches more than one snapshot."""


class CorruptStore(StoreError):
    """An object on disk does not match its name or cannot be parsed."""


class MissingBlob(CorruptStore):
    """A snapshot refers to content the store does not hold."""


class WorkspaceError(StoreError):
    """The workspace root is missing, not a directory, or otherwise unusable."""


class IgnoreFileError(StoreError):
    """`.codexsnapignore` cannot be read or has an invalid pattern."""


class StoreBusy(StoreError):
    """Another process holds a lock this operation needs."""


class StoreFull(StoreError):
    """The disk filled up; nothing was committed."""


class UnsupportedFormat(StoreError):
    """The store was written by a newer, unknown format version."""


class Interrupted(Exception):
    """SIGINT, SIGTERM or SIGHUP stopped a restore; `str()` says what state the files are in (one line).

    Not a StoreError: the caller ends as that signal would (exit 130 for SIGINT), not as a failure.
    """

    def __init__(self, text: str, signum: int, rolled_back: bool) -> None:
        super().__init__(text)
        self.signum = signum
        self.rolled_back = rolled_back
