"""The pin check of app/codex/codex_sdk.py: the SDK's generated models are still built lazily with the pinned
versions."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

PROBE = """
import app.session, app.codex.codex_sdk as sdk
from pydantic import BaseModel, RootModel
from openai_codex.generated import v2_all
print(sdk.lazy_models_usable())
print(sdk.lazy_models, v2_all.Thread.__pydantic_complete__)
print('defer_build' in BaseModel.model_config, 'defer_build' in RootModel.model_config)
"""


def test_the_sdk_models_are_built_on_first_use_and_pydantic_is_left_as_it_was() -> None:
    """A fresh process (as every `codexr exec`): app/codex/codex_sdk.py relies on setting pydantic's root
    `model_config` during the SDK import; if a pydantic or SDK upgrade breaks that, it silently falls back
    to the eager import (0.3-0.5 s slower per command, see bench/bench_startup.py) — this says so loudly."""
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, capture_output=True, text=True, check=True)
    why, lazy, root_configs = out.stdout.splitlines()
    assert why == "None", f"app/codex/codex_sdk.py cannot defer the SDK's models any more: {why}; re-measure and adapt"
    assert lazy == "True False", ("the SDK's models were built eagerly (app/codex/codex_sdk.py fell back or did not "
                                  f"take effect): lazy_models, Thread complete = {lazy}")
    assert root_configs == "False False", "pydantic's BaseModel/RootModel kept defer_build after the SDK import"


def test_the_listing_names_the_sdks_version_as_its_metadata_says() -> None:
    """The read-only app-server's `initialize` names the SDK's version as the SDK does, read from the name of its
    `.dist-info` directory instead of importlib.metadata (issue 35 §3)."""
    import importlib.metadata

    from app.codex.rpc_lines import _sdk_version

    assert _sdk_version() == importlib.metadata.version("openai-codex")
