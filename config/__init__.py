"""codexr's settings: its own `$CODEX_HOME/codexr.toml`, plus what it still honours in Codex's `config.toml`."""

from .loader import (
    CODEXR_FILE_NAME,
    CONFIG_FILE_NAME,
    ConfigError,
    LoadedSettings,
    SettingOrigin,
    codex_home,
    load_config,
    load_settings,
)
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
)
from .sizes import format_size, parse_size

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
    "format_size",
    "is_codexr_key",
    "load_config",
    "load_settings",
    "parse_size",
    "settings_reference",
    "settings_reference_markdown",
]
