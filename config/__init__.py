"""codexr's settings: its own `$CODEX_HOME/codexr.toml`, plus what it still honours in Codex's `config.toml`.

The names load lazily (PEP 562): `config.files` (finding and reading the files) is cheap, while the loader and
the models import pydantic (~0.1-0.25 s, measured with bench/bench_startup.py), which a one-shot command whose
settings are all defaults never needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .files import CODEXR_FILE_NAME, CONFIG_FILE_NAME, ConfigError, codex_home, defaults_apply

if TYPE_CHECKING:
    from .loader import LoadedSettings, SettingOrigin, load_config, load_settings
    from .settings import (
        FEATURE_FILE_SNAPSHOTS,
        FORK_ALIASES,
        CodexrSettings,
        FeaturesSettings,
        FileSnapshotsSettings,
        TuiSettings,
        is_codexr_key,
        settings_reference,
        settings_reference_markdown,
        split_overrides,
    )
    from .sizes import format_size, parse_size  # decimal: ~3 ms that a command printing no size skips

#: Public name -> the submodule that defines it, imported on first use.
_LAZY = {
    **dict.fromkeys(("LoadedSettings", "SettingOrigin", "load_config", "load_settings"), "loader"),
    **dict.fromkeys(("FEATURE_FILE_SNAPSHOTS", "FORK_ALIASES", "CodexrSettings", "FeaturesSettings",
                     "FileSnapshotsSettings", "TuiSettings", "is_codexr_key", "settings_reference",
                     "settings_reference_markdown", "split_overrides"), "settings"),
    **dict.fromkeys(("format_size", "parse_size"), "sizes"),
}


def __getattr__(name: str) -> Any:
    """Import the submodule behind a public name the first time it is asked for."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """List the lazy names too."""
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "CODEXR_FILE_NAME",
    "CONFIG_FILE_NAME",
    "FEATURE_FILE_SNAPSHOTS",
    "FORK_ALIASES",
    "CodexrSettings",
    "ConfigError",
    "FeaturesSettings",
    "FileSnapshotsSettings",
    "LoadedSettings",
    "SettingOrigin",
    "TuiSettings",
    "codex_home",
    "defaults_apply",
    "format_size",
    "is_codexr_key",
    "load_config",
    "load_settings",
    "parse_size",
    "settings_reference",
    "settings_reference_markdown",
    "split_overrides",
]
