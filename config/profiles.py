"""`-p/--profile NAME`, as `codex exec -p NAME` takes it: `$CODEX_HOME/NAME.config.toml` layered on config.toml.

Codex's app-server, which codexr runs, has no profile switch, so the profile's settings reach it as what it does take:
one `-c KEY=VALUE` per setting, before the user's own `-c` (which win, as over a profile in codex). Each table is
followed down to its values (`[model_providers.x] base_url = …` is `-c model_providers.x.base_url=…`), so the profile
is merged into config.toml's tables as codex merges it, not put in their place.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from .files import CONFIG_FILE_NAME, ConfigError, display_path, read_toml
from .tomltext import BARE_KEY, toml_text


def profile_path(home: Path, name: str) -> Path:
    """The profile's file (a name that is empty, or names a path rather than a file in CODEX_HOME: ConfigError)."""
    if not name or "/" in name or "\\" in name or "\0" in name or name.startswith("."):
        raise ConfigError(f"--profile {name!r}: a profile is named by a file $CODEX_HOME/NAME.config.toml, "
                          "so NAME has no slash and does not start with a dot")
    return home / f"{name}.config.toml"


def profile_overrides(home: Path, name: str) -> list[str]:
    """The profile's settings as `-c KEY=VALUE` overrides, in the file's order; none (and a warning on stderr) when
    the file is missing, as codex layers nothing then. ConfigError: config.toml still selects or defines the profile
    the legacy way (codex refuses that too), the file is not TOML, or a key cannot be spelled in a `-c` path."""
    path = profile_path(home, name)
    base = read_toml(home / CONFIG_FILE_NAME, display_path(home / CONFIG_FILE_NAME)) or {}
    legacy = base.get("profiles")
    if base.get("profile") == name or (isinstance(legacy, dict) and name in legacy):
        raise ConfigError(f"--profile {name}: {display_path(home / CONFIG_FILE_NAME)} still selects or defines it "
                          f"the legacy way (`profile = \"{name}\"` or `[profiles.{name}]`); move those settings into "
                          f"{display_path(path)} and remove them there, as codex asks")
    document = read_toml(path, display_path(path))
    if document is None:
        print(f"codexr: warning: --profile {name}: no {display_path(path)}, so nothing is layered (as in codex)",
              file=sys.stderr)
        return []
    out: list[str] = []
    _flatten(document, [], out, display_path(path))
    return out


def _flatten(table: dict[str, Any], prefix: list[str], out: list[str], label: str) -> None:
    """Each value below `table` as `a.b.c=VALUE`, tables followed down (an array of tables is one value)."""
    for key, value in table.items():
        if not BARE_KEY.fullmatch(key):  # codex splits a `-c` path at every dot and quotes nothing
            raise ConfigError(f"{label}: the key {key!r} cannot be passed to Codex as `-c KEY=VALUE` (only letters, "
                              "digits, `_` and `-`); put that setting in config.toml")
        if isinstance(value, dict):
            _flatten(value, [*prefix, key], out, label)
        else:
            out.append(f"{'.'.join([*prefix, key])}={toml_text(value)}")
