"""Fixtures shared by several test modules (a module's own fixture of the same name takes precedence)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory `ws` below tmp_path, by its real path."""
    root = tmp_path / "ws"
    root.mkdir()
    return Path(os.path.realpath(root))
