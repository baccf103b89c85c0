"""codexr's settings: the `[features]` flag and `[file_snapshots]` table of Codex's `config.toml`."""

from .loader import ConfigError, codex_home, load_settings
from .settings import (
    FEATURE_FILE_SNAPSHOTS,
    CodexrSettings,
    FeaturesSettings,
    FileSnapshotsSettings,
    TuiSettings,
    settings_reference,
    settings_reference_markdown,
)
from .sizes import format_size, parse_size

__all__ = [
    "FEATURE_FILE_SNAPSHOTS",
    "CodexrSettings",
    "ConfigError",
    "FeaturesSettings",
    "FileSnapshotsSettings",
    "TuiSettings",
    "codex_home",
    "format_size",
    "load_settings",
    "parse_size",
    "settings_reference",
    "settings_reference_markdown",
]
