"""Content-addressed workspace snapshots with witnessed-deletion restore (standalone library).

The public names load lazily (PEP 562): `config` imports `snapshot_store.settings` and `.fsutil`, and every
one-shot `codexr` command imports `StoreError`; running this file eagerly pulled in restore, capture, store,
packs and pygit2 (~0.25 s of a 0.5 s start-up, measured with `python -X importtime`) for commands that
never open a store.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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
from .settings import DEFAULT_CHURN_DIRS, RetentionPolicy, ScopeSettings

if TYPE_CHECKING:
    from .capture import CaptureResult
    from .diff import Change
    from .repository.listing import SnapshotInfo
    from .restore import Action, RestorePlan, RestoreResult
    from .store import Store
    from .workspace import Workspace

#: Public name -> the submodule that defines it, imported on first use.
_LAZY = {
    "Action": "restore", "RestorePlan": "restore", "RestoreResult": "restore",
    "CaptureResult": "capture", "Change": "diff", "SnapshotInfo": "repository.listing", "Store": "store",
    "Workspace": "workspace",
}


def __getattr__(name: str) -> Any:
    """Import the submodule behind a public name the first time it is asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # Not cached in this module's namespace (no process-wide state here): sys.modules makes a repeat cheap.
    return getattr(importlib.import_module(f".{module}", __name__), name)


def __dir__() -> list[str]:
    """List the lazy names too."""
    return sorted(set(globals()) | set(_LAZY))


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
    "Workspace",
    "WorkspaceError",
]
