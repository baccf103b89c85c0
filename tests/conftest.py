"""Fixtures shared by several test modules (a module's own fixture of the same name takes precedence)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from child_signals import give_children_default_signals
from e2e_helpers import RigFactory

from app.codex.scripted_model import ScriptedModel

# This process caches the test modules pytest compiles (its rewritten asserts) as it does by default, also where
# PYTHONDONTWRITEBYTECODE is set, as in this project's sandboxes and CI: collecting the suite took each worker ~11 s
# there, ~3 s with the cache (2-core machine). The variable stays as it is for the processes the tests start.
sys.dont_write_bytecode = False
# Before anything is started: the suite's processes begin with a terminal's signal defaults even when the suite
# runs as a background job, under nohup or with signals blocked (tests/child_signals.py says why).
give_children_default_signals()
# No test starts a resident server by accident (in the user's runtime directory, outliving the run):
# tests/test_server.py gives its commands a private runtime directory and turns it back on.
os.environ["CODEXR_SERVER"] = "0"
# Nor a change monitor (snapshot_store/detect/): tests/test_monitor.py gives its own a private runtime directory.
os.environ["CODEXR_MONITOR"] = "0"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """An empty workspace directory `ws` below tmp_path, by its real path."""
    root = tmp_path / "ws"
    root.mkdir()
    return Path(os.path.realpath(root))


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModel]:
    """One scripted Responses server per test module (tests script it with their own trigger words)."""
    with ScriptedModel() as m:
        yield m


@pytest.fixture
def rigs(model: ScriptedModel, tmp_path: Path) -> Iterator[RigFactory]:
    """Fresh CODEX_HOME + workspace + Session rigs against the module's model, closed after the test."""
    factory = RigFactory(model, tmp_path)
    yield factory
    factory.close()
