"""Resolving a workspace root: shared by capture, restore and the app, so it lives on its own."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import WorkspaceError


def resolve_root(root: str | os.PathLike[str]) -> Path:
    """The workspace's real absolute path; a missing workspace is a clear error."""
    path = Path(os.path.realpath(os.path.abspath(root)))
    if not path.exists():
        raise WorkspaceError(f"workspace {root} does not exist")
    if not path.is_dir():
        raise WorkspaceError(f"workspace {root} is not a directory")
    return path
