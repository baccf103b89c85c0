"""Load codexr's settings from the `config.toml` it shares with Codex, then `-c` and `--enable/--disable`."""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from snapshot_store.fsutil import NotSmallRegular, read_small_regular

from .settings import (
    FEATURE_FILE_SNAPSHOTS,
    SECTIONS,
    CodexrSettings,
    expected_value,
    toml_text,
)

CONFIG_FILE_NAME = "config.toml"

MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_NESTING = 32  # no setting nests deeper than a few levels; deeper input only feeds recursion
_TOML_POSITION_RE = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)$")


class ConfigError(Exception):
    """A settings problem, phrased as one line naming where it came from (file or `-c`) and which key."""


@dataclass(frozen=True)
class _Source:
    """Where a value came from, so an error can point at the file or at the exact `-c` argument."""

    label: str
    """Prefix of the error line: the config file's path or `-c key=value`."""
    dotted: bool
    """Name keys as `table.key` (command line) rather than `[table] key` (file)."""

    def name(self, loc: tuple[str, ...]) -> str:
        """Name a key the way the user wrote it in this source."""
        if self.dotted or len(loc) == 1:
            return ".".join(loc)
        return f"[{loc[0]}] {'.'.join(loc[1:])}"


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """Where Codex (and so codexr) keeps `config.toml`: non-empty `$CODEX_HOME`, else `~/.codex`."""
    environ = os.environ if env is None else env
    value = environ.get("CODEX_HOME", "")
    return Path(value) if value else Path.home() / ".codex"


def load_settings(
    codex_home: Path,
    *,
    overrides: Sequence[str] = (),
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
) -> CodexrSettings:
    """Read `codex_home/config.toml`, apply `-c` overrides, then `--enable/--disable`, and validate."""
    path = codex_home / CONFIG_FILE_NAME
    file_source = _Source(_display_path(path), dotted=False)
    document = _read_toml(path, file_source)
    sources: dict[tuple[str, ...], _Source] = {}
    for raw in overrides:
        key_path, value = _parse_override(raw)
        _apply_override(document, key_path, value)
        # Codex replaces whatever sat at the path, so everything below it now comes from this override;
        # re-inserting keeps `sources` in order of recency, which _source_of relies on.
        for loc in [loc for loc in sources if loc[: len(key_path)] == key_path]:
            del sources[loc]
        sources[key_path] = _Source(f"-c {raw}", dotted=True)

    data: dict[str, Any] = {"codex_home": codex_home}
    features = document.get("features")
    if isinstance(features, dict) and FEATURE_FILE_SNAPSHOTS in features:
        data["features"] = {FEATURE_FILE_SNAPSHOTS: features[FEATURE_FILE_SNAPSHOTS]}
    if "file_snapshots" in document:
        data["file_snapshots"] = document["file_snapshots"]
    tui = document.get("tui")
    if isinstance(tui, dict) and "keys" in tui:
        data["tui"] = {"keys": tui["keys"]}  # Codex's own [tui] keys (theme, notifications...) are not ours
    # Codex turns --enable then --disable into trailing `-c features.X=...`, so disable wins over enable.
    for flag, names in ((True, enable), (False, disable)):
        if FEATURE_FILE_SNAPSHOTS in names:
            data["features"] = {FEATURE_FILE_SNAPSHOTS: flag}

    try:
        return CodexrSettings.model_validate(data)
    except ValidationError as exc:
        problems: dict[str, list[str]] = {}
        for error in exc.errors():
            label, detail = _describe(error, data, sources, file_source)
            if detail not in problems.setdefault(label, []):
                problems[label].append(detail)
        raise ConfigError(
            "; ".join(f"{label}: {'; '.join(details)}" for label, details in problems.items())
        ) from None


def _display_path(path: Path) -> str:
    """Show a path with the home directory as `~`, the way users think of `~/.codex/config.toml`."""
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):
        return str(path)


def _read_toml(path: Path, source: _Source) -> dict[str, Any]:
    """Parse the config file; a missing file means all defaults, any other failure is a ConfigError."""
    try:
        raw = _read_regular_file(path, source)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"{source.label}: cannot read file: {exc.strerror or exc}") from None
    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source.label}: invalid TOML: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source.label}: {_toml_error_text(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{source.label}: invalid TOML: nested too deeply") from None
    _check_nesting(document, source.label)
    return document


def _check_nesting(value: Any, label: str) -> None:
    """Refuse values nested beyond MAX_NESTING (walked without recursion), before recursive code sees them."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_NESTING:
            raise ConfigError(f"{label}: nested more than {MAX_NESTING} levels deep")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)


def _read_regular_file(path: Path, source: _Source) -> bytes:
    """The file's bytes if it is a regular file of sane size: a FIFO must not hang the command."""
    try:
        return read_small_regular(path, MAX_CONFIG_BYTES)
    except NotSmallRegular as exc:
        raise ConfigError(f"{source.label}: cannot read file: {exc}") from exc


def _toml_error_text(exc: tomllib.TOMLDecodeError) -> str:
    """Turn tomllib's "Msg (at line 3, column 5)" into "invalid TOML at line 3, column 5: msg"."""
    message = str(exc).splitlines()[0] if str(exc) else "parse error"
    match = _TOML_POSITION_RE.match(message)
    if match is None:
        return f"invalid TOML: {message}"
    return f"invalid TOML at line {match['line']}, column {match['col']}: {match['msg']}"


def _parse_override(raw: str) -> tuple[tuple[str, ...], Any]:
    """Split a Codex-style `-c key=value`; the value is TOML, or a plain string when it is not TOML."""
    key, sep, value_text = raw.partition("=")
    key, value_text = key.strip(), value_text.strip()
    if not sep:
        raise ConfigError(f"-c {raw}: expected key=value")
    parts = tuple(part.strip() for part in key.split("."))
    if not all(parts):
        raise ConfigError(f"-c {raw}: invalid key {key!r}")
    if len(parts) > MAX_NESTING:
        raise ConfigError(f"-c {key[:80]}...: the key is nested more than {MAX_NESTING} levels deep")
    try:
        value: Any = tomllib.loads(f"_x_ = {value_text}")["_x_"]
    except tomllib.TOMLDecodeError:
        value = value_text
    except RecursionError:
        raise ConfigError(f"-c {key}=...: the value is nested too deeply") from None
    _check_nesting(value, f"-c {key}=...")
    return parts, value


def _apply_override(document: dict[str, Any], key_path: tuple[str, ...], value: Any) -> None:
    """Set a dotted path like Codex does: create missing tables and replace anything that is not a table."""
    table = document
    for part in key_path[:-1]:
        child = table.get(part)
        if not isinstance(child, dict):
            child = table[part] = {}
        table = child
    table[key_path[-1]] = value


def _describe(
    error: ErrorDetails, data: Mapping[str, Any], sources: Mapping[tuple[str, ...], _Source], file: _Source
) -> tuple[str, str]:
    """Turn one pydantic error into (source label, "key must be ... (got ...)")."""
    loc = tuple(str(part) for part in error["loc"])
    key_loc = loc[:2]
    source = _source_of(key_loc, sources, file)
    name = source.name(key_loc)
    value = _lookup(data, key_loc)
    if len(key_loc) == 1:
        detail = f"{name} must be a table (got {toml_text(value)})"
    elif error["type"] == "extra_forbidden":
        detail = f"unknown setting {name}"
    elif error["type"] == "value_error" and "error" in error.get("ctx", {}):
        detail = f"{name} {error['ctx']['error']}"
    else:
        model = SECTIONS.get(key_loc[0])
        field = model.model_fields.get(key_loc[1]) if model is not None else None
        expects = expected_value(field) if field is not None else "valid"
        detail = f"{name} must be {expects} (got {toml_text(value)})"
    return source.label, detail


def _source_of(loc: tuple[str, ...], sources: Mapping[tuple[str, ...], _Source], file: _Source) -> _Source:
    """Find the latest `-c` that set `loc`, a table above it or a key inside it; else it is the file's."""
    related = [
        source for path, source in sources.items() if path[: len(loc)] == loc or loc[: len(path)] == path
    ]
    return related[-1] if related else file


def _lookup(data: Mapping[str, Any], loc: tuple[str, ...]) -> Any:
    """Fetch the raw value at `loc` so errors quote what the user wrote, not a fragment of it."""
    value: Any = data
    for part in loc:
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value
