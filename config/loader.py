"""Load codexr's settings: its own `codexr.toml`, its old places in Codex's `config.toml`, `-c`, flags."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from .files import CODEXR_FILE_NAME as CODEXR_FILE_NAME
from .files import CONFIG_FILE_NAME as CONFIG_FILE_NAME
from .files import MAX_NESTING, ConfigError, check_nesting, display_path, read_toml
from .files import codex_home as codex_home
from .settings import (
    FEATURE_FILE_SNAPSHOTS,
    FORK_ALIASES,
    FORK_RETIRED,
    INTERNAL_FIELDS,
    SECTIONS,
    CodexrSettings,
    expected_value,
    field_extra,
    is_codexr_key,
    setting_fields,
)
from .sizes import format_size
from .tomltext import toml_text


@dataclass(frozen=True)
class _Source:
    """Where a value came from, so an error can point at the file or `-c` argument and `codexr config` name it."""

    label: str
    """Prefix of the error line: the config file's path or `-c key=value`."""
    dotted: bool
    """Name keys as `table.key` (command line) rather than `[table] key` (file)."""
    origin: str
    """What `codexr config` shows: `codexr.toml`, `config.toml`, `-c`, `--enable` or `--disable`."""
    detail: str = ""
    """The `-c` argument, or the fork's key name an alias was read under."""
    alias: str = ""
    """The key name the user wrote when it differs from codexr's (a codex-rewind alias)."""

    def name(self, loc: tuple[str, ...]) -> str:
        """Name a key the way the user wrote it in this source."""
        if self.alias and len(loc) == 2:
            loc = (loc[0], self.alias)
        if self.dotted or len(loc) == 1:
            return ".".join(loc)
        return f"[{loc[0]}] {'.'.join(loc[1:])}"


@dataclass(frozen=True)
class SettingOrigin:
    """One effective setting for `codexr config`: its value and where it came from."""

    key: str
    value: Any
    """The value as JSON data (byte counts as integers)."""
    text: str
    """The value as TOML text (byte counts as sizes such as "16MiB"); empty when the setting is unset."""
    origin: str
    """`default`, `codexr.toml`, `config.toml`, `-c`, `--enable` or `--disable`."""
    detail: str = ""


@dataclass(frozen=True)
class LoadedSettings:
    """The validated settings plus what `codexr config` and the CLI's warnings need."""

    settings: CodexrSettings
    origins: tuple[SettingOrigin, ...]
    warnings: tuple[str, ...]
    """One-line notes about `config.toml` (unknown keys ignored, keys that belong in `codexr.toml`)."""
    files: tuple[tuple[Path, bool], ...]
    """(path, exists) of `codexr.toml` and `config.toml`, in precedence order (first wins)."""


def load_settings(
    codex_home: Path,
    *,
    overrides: Sequence[str] = (),
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
) -> CodexrSettings:
    """The validated settings (see load_config); warnings are dropped, errors raise ConfigError."""
    return load_config(codex_home, overrides=overrides, enable=enable, disable=disable).settings


def load_config(
    codex_home: Path,
    *,
    overrides: Sequence[str] = (),
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
) -> LoadedSettings:
    """Merge defaults < `config.toml` < `codexr.toml` < `-c` (in order) < `--enable`/`--disable`, and validate."""
    own_path, shared_path = codex_home / CODEXR_FILE_NAME, codex_home / CONFIG_FILE_NAME
    own = _Source(display_path(own_path), dotted=False, origin=CODEXR_FILE_NAME)
    shared = _Source(display_path(shared_path), dotted=False, origin=CONFIG_FILE_NAME)
    shared_doc = read_toml(shared_path, shared.label)
    own_doc = read_toml(own_path, own.label)
    data: dict[str, Any] = {}
    # Insertion order is recency: _set re-inserts, and _latest relies on it.
    sources: dict[tuple[str, ...], _Source] = {}
    warnings: list[str] = []
    if shared_doc is not None:
        _take_from_codex_config(shared_doc, shared, own.label, data, sources, warnings)
    for key, value in (own_doc or {}).items():
        if key in INTERNAL_FIELDS:
            raise ConfigError(f"{own.label}: unknown setting {key}")
        if isinstance(value, dict) and key in SECTIONS:
            for sub, sub_value in value.items():
                _set(data, sources, (key, sub), sub_value, own)
        else:
            _set(data, sources, (key,), value, own)
    for raw in overrides:
        key_path, value = _parse_override(raw)
        if is_codexr_key(key_path):  # everything else is Codex's, passed on to it untouched
            _set(data, sources, key_path, value, _Source(f"-c {raw}", dotted=True, origin="-c", detail=raw))
    # Codex turns --enable then --disable into trailing `-c features.X=...`, so disable wins over enable.
    for flag, names in ((True, enable), (False, disable)):
        if FEATURE_FILE_SNAPSHOTS in names:
            option = "--enable" if flag else "--disable"
            source = _Source(f"{option} {FEATURE_FILE_SNAPSHOTS}", dotted=True, origin=option)
            _set(data, sources, ("features", FEATURE_FILE_SNAPSHOTS), flag, source)

    try:
        settings = CodexrSettings.model_validate({**data, "codex_home": codex_home})
    except ValidationError as exc:
        problems: dict[str, list[str]] = {}
        for error in exc.errors():
            label, detail = _describe(error, data, sources)
            if detail not in problems.setdefault(label, []):
                problems[label].append(detail)
        raise ConfigError(
            "; ".join(f"{label}: {'; '.join(details)}" for label, details in problems.items())
        ) from None
    return LoadedSettings(
        settings=settings,
        origins=_origins(settings, data, sources),
        warnings=tuple(warnings),
        files=((own_path, own_doc is not None), (shared_path, shared_doc is not None)),
    )


def _take_from_codex_config(
    doc: Mapping[str, Any],
    source: _Source,
    own_label: str,
    data: dict[str, Any],
    sources: dict[tuple[str, ...], _Source],
    warnings: list[str],
) -> None:
    """Read codexr's old places in Codex's file; keys codexr does not know there are warnings, not errors.

    The places read here are the ones `files.codex_config_sets_codexr` looks for: keep the two in step.
    """
    features = doc.get("features")
    if isinstance(features, dict) and FEATURE_FILE_SNAPSHOTS in features:
        _set(data, sources, ("features", FEATURE_FILE_SNAPSHOTS), features[FEATURE_FILE_SNAPSHOTS], source)
    table = doc.get("file_snapshots")
    if isinstance(table, dict):
        aliases, retired = FORK_ALIASES["file_snapshots"], FORK_RETIRED["file_snapshots"]
        model = SECTIONS["file_snapshots"]
        ignored: list[str] = []
        for key, value in table.items():
            name = aliases.get(key, key)
            if name not in model.model_fields:
                why = "retired in codex-rewind" if key in retired else "unknown setting"
                ignored.append(f"[file_snapshots] {key} ({why})")
            elif name != key and name in table:
                ignored.append(f"[file_snapshots] {key} ({name} is set too)")
            else:
                via = replace(source, alias=key, detail=f"as {key}") if name != key else source
                _set(data, sources, ("file_snapshots", name), value, via)
        if ignored:
            warnings.append(f"{source.label}: ignored {', '.join(ignored)}")
    elif "file_snapshots" in doc:
        _set(data, sources, ("file_snapshots",), table, source)  # not a table: validation names it
    tui = doc.get("tui")
    if isinstance(tui, dict) and "keys" in tui:  # Codex's own [tui] keys (theme, keymap...) are not ours
        _set(data, sources, ("tui", "keys"), tui["keys"], source)
        warnings.append(
            f"{source.label}: [tui] keys sits in Codex's [tui] table; move it to the [tui] table of {own_label}"
        )


def _set(
    data: dict[str, Any], sources: dict[tuple[str, ...], _Source], key_path: tuple[str, ...], value: Any,
    source: _Source,
) -> None:
    """Set a key like Codex's `-c` does and remember its source (as the most recent for that key)."""
    _apply_override(data, key_path, value)
    # Whatever sat at or below the path now comes from this source.
    for loc in [loc for loc in sources if loc[: len(key_path)] == key_path]:
        del sources[loc]
    sources[key_path] = source


def _origins(
    settings: CodexrSettings, data: Mapping[str, Any], sources: Mapping[tuple[str, ...], _Source]
) -> tuple[SettingOrigin, ...]:
    """Each setting's effective value and the latest source that set it (or `default`)."""
    dumped = settings.model_dump(mode="json")
    out = []
    for loc, field in setting_fields():
        value: Any = settings
        for part in loc:
            value = getattr(value, part)
        if value is None:
            text = ""  # TOML has no null: an unset setting is a key left out
        elif field_extra(field).get("size") and isinstance(value, int):
            text = toml_text(format_size(value))
        else:
            text = toml_text(value)
        json_value = _lookup(dumped, loc)
        source = _latest(loc, sources) if _present(data, loc) else None
        origin = source.origin if source is not None else "default"
        detail = source.detail if source is not None else ""
        out.append(SettingOrigin(".".join(loc), json_value, text, origin, detail))
    return tuple(out)


def _present(data: Mapping[str, Any], loc: tuple[str, ...]) -> bool:
    """Whether a key was set by some source (else its value is the default)."""
    value: Any = data
    for part in loc:
        if not isinstance(value, Mapping) or part not in value:
            return False
        value = value[part]
    return True


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
    check_nesting(value, f"-c {key}=...")
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
    error: ErrorDetails, data: Mapping[str, Any], sources: Mapping[tuple[str, ...], _Source]
) -> tuple[str, str]:
    """Turn one pydantic error into (source label, "key must be ... (got ...)")."""
    loc = tuple(str(part) for part in error["loc"])
    section = SECTIONS.get(loc[0])
    key_loc = loc[:2] if section is not None else loc[:1]
    source = _latest(key_loc, sources) or _Source("codexr", dotted=True, origin="default")
    name = source.name(key_loc)
    value = _lookup(data, key_loc)
    if error["type"] == "extra_forbidden":
        detail = f"unknown setting {name}"
        fork_names = FORK_ALIASES.get(loc[0], {})
        if len(key_loc) == 2 and key_loc[1] in fork_names:
            detail += f" (codex-rewind's name; codexr calls it {fork_names[key_loc[1]]})"
    elif section is not None and len(key_loc) == 1:
        detail = f"{name} must be a table (got {toml_text(value)})"
    elif error["type"] == "value_error" and "error" in error.get("ctx", {}):
        detail = f"{name} {error['ctx']['error']}"
    else:
        model = section or CodexrSettings
        field = model.model_fields.get(key_loc[-1])
        expects = expected_value(field) if field is not None else "valid"
        detail = f"{name} must be {expects} (got {toml_text(value)})"
    return source.label, detail


def _latest(loc: tuple[str, ...], sources: Mapping[tuple[str, ...], _Source]) -> _Source | None:
    """The latest source that set `loc`, a table above it or a key inside it."""
    related = [
        source for path, source in sources.items() if path[: len(loc)] == loc or loc[: len(path)] == path
    ]
    return related[-1] if related else None


def _lookup(data: Mapping[str, Any], loc: tuple[str, ...]) -> Any:
    """Fetch the raw value at `loc` so errors quote what the user wrote, not a fragment of it."""
    value: Any = data
    for part in loc:
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value
