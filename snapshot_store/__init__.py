"""Content-addressed workspace snapshots with witnessed-deletion restore (standalone library).

The public names load lazily (PEP 562): `config` imports `snapshot_store.settings` and `.fsutil`, and every
one-shot `codexr` command imports `StoreError`; running this file eagerly pulled in restore, capture, store,
packs and pygit2 (~0.25 s of a 0.5 s start-up, measured with `python -X importtime`) for commands that
never open a store. Nothing loads with the package itself: the console script's launcher imports rundir.py and
confinement.py in every one-shot command, and `typing`, the errors and the settings' dataclasses were ~17 ms.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not `typing`'s: importing typing costs ~9 ms; mypy reads this name as True
if TYPE_CHECKING:
    from typing import Any

    from .capture import CaptureResult
    from .diff import Change
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
    from .repository.listing import SnapshotInfo
    from .restore import Action, RestorePlan, RestoreResult
    from .settings import DEFAULT_CHURN_DIRS, RetentionPolicy, ScopeSettings
    from .store import Store
    from .workspace import Workspace

#: Public name -> the submodule that defines it, imported on first use.
_LAZY = {
    "Action": "restore", "RestorePlan": "restore", "RestoreResult": "restore",
    "CaptureResult": "capture", "Change": "diff", "SnapshotInfo": "repository.listing", "Store": "store",
    "Workspace": "workspace", "DEFAULT_CHURN_DIRS": "settings", "RetentionPolicy": "settings",
    "ScopeSettings": "settings",
    **dict.fromkeys(("AmbiguousSnapshot", "CorruptStore", "IgnoreFileError", "MissingBlob", "StoreBusy", "StoreError",
                     "StoreFull", "UnknownSnapshot", "UnsupportedFormat", "WorkspaceError"), "errors"),
}


def __getattr__(name: str) -> Any:
    """Import the submodule behind a public name the first time it is asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

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
