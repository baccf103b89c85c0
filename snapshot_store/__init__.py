"""Content-addressed workspace snapshots with witnessed-deletion restore (standalone library)."""

from .errors import (
    AmbiguousSnapshot,
    CorruptStore,
    IgnoreFileError,
    MissingBlob,
    StoreBusy,
    StoreError,
    StoreFull,
    UnknownSnapshot,
    UnsupportedFormat,
    WorkspaceError,
)
from .restore import Action, RestorePlan, RestoreResult
from .settings import DEFAULT_CHURN_DIRS, RetentionPolicy, ScopeSettings
from .store import CaptureResult, Change, SnapshotInfo, Store

__all__ = [
    "DEFAULT_CHURN_DIRS",
    "Action",
    "AmbiguousSnapshot",
    "CaptureResult",
    "Change",
    "CorruptStore",
    "IgnoreFileError",
    "MissingBlob",
    "RestorePlan",
    "RestoreResult",
    "RetentionPolicy",
    "ScopeSettings",
    "SnapshotInfo",
    "Store",
    "StoreBusy",
    "StoreError",
    "StoreFull",
    "UnknownSnapshot",
    "UnsupportedFormat",
    "WorkspaceError",
]
