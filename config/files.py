"""codexr's settings files: where they are and how they are read; no pydantic, so start-up stays cheap.

`defaults_apply` lets a one-shot command skip validating (and importing pydantic for) settings nobody set:
`import config.loader` costs ~0.1-0.25 s (pydantic and the models), more than a whole unchanged capture
(measured with bench/bench_startup.py).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from snapshot_store.fsutil import NotSmallRegular, read_small_regular

if TYPE_CHECKING:
    import tomllib

#: codexr's own settings file under CODEX_HOME: Codex never reads it, so Codex never warns about it.
CODEXR_FILE_NAME = "codexr.toml"
#: `[features] file_snapshots`, `--enable/--disable file_snapshots` (also `settings.FEATURE_FILE_SNAPSHOTS`).
FEATURE_NAME = "file_snapshots"
#: Codex's file; codexr still reads `features.file_snapshots`, `[file_snapshots]` and `[tui] keys` from it.
CONFIG_FILE_NAME = "config.toml"

MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_NESTING = 32  # no setting nests deeper than a few levels; deeper input only feeds recursion
_TOML_POSITION_RE = re.compile(r"^(?P<msg>.*?)\s*\(at line (?P<line>\d+), column (?P<col>\d+)\)$")


class ConfigError(Exception):
    """A settings problem, phrased as one line naming where it came from (file or `-c`) and which key."""


def codex_home(env: Mapping[str, str] | None = None) -> Path:
    """Where Codex (and so codexr) keeps its files: non-empty `$CODEX_HOME`, else `~/.codex`."""
    environ = os.environ if env is None else env
    value = environ.get("CODEX_HOME", "")
    return Path(value) if value else Path.home() / ".codex"


def display_path(path: Path) -> str:
    """Show a path with the home directory as `~`, the way users think of `~/.codex/config.toml`."""
    try:
        return "~/" + path.relative_to(Path.home()).as_posix()
    except (ValueError, RuntimeError):
        return str(path)


def read_toml(path: Path, label: str) -> dict[str, Any] | None:
    """Parse a config file; None when it is missing (all defaults), any other failure is a ConfigError."""
    try:
        raw = _read_regular_file(path, label)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read file: {exc.strerror or exc}") from None
    import tomllib  # ~9 ms (python -X importtime), paid only when there is a file to parse

    try:
        document = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: invalid TOML: not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{label}: {_toml_error_text(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{label}: invalid TOML: nested too deeply") from None
    check_nesting(document, label)
    return document


def check_nesting(value: Any, label: str) -> None:
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


def _read_regular_file(path: Path, label: str) -> bytes:
    """The file's bytes if it is a regular file of sane size: a FIFO must not hang the command."""
    try:
        return read_small_regular(path, MAX_CONFIG_BYTES)
    except NotSmallRegular as exc:
        raise ConfigError(f"{label}: cannot read file: {exc}") from exc


def _toml_error_text(exc: tomllib.TOMLDecodeError) -> str:
    """Turn tomllib's "Msg (at line 3, column 5)" into "invalid TOML at line 3, column 5: msg"."""
    message = str(exc).splitlines()[0] if str(exc) else "parse error"
    match = _TOML_POSITION_RE.match(message)
    if match is None:
        return f"invalid TOML: {message}"
    return f"invalid TOML at line {match['line']}, column {match['col']}: {match['msg']}"




def defaults_apply(
    codex_home: Path,
    *,
    overrides: Sequence[str] = (),
    enable: Sequence[str] = (),
    disable: Sequence[str] = (),
) -> bool:
    """True when no source sets a codexr setting: the defaults apply and there is nothing to validate.

    Reads both files as `load_config` does (Codex's first), so a malformed file is the same one-line error.
    Conservative: any `-c` (telling codexr's keys from Codex's needs the models), any `codexr.toml`, or a
    place `load_config` reads in `config.toml` means "validate".
    """
    if overrides or FEATURE_NAME in enable or FEATURE_NAME in disable:
        return False
    from . import verdict

    shared_path, own_path = codex_home / CONFIG_FILE_NAME, codex_home / CODEXR_FILE_NAME
    key = None if os.path.lexists(own_path) else verdict.key_of(shared_path)
    if key is not None:
        known = verdict.recall(codex_home, key)
        if known is not None:
            return known  # the same config.toml as when it was parsed: not parsed again (config/verdict.py)
    shared = read_toml(shared_path, display_path(shared_path))
    if read_toml(own_path, display_path(own_path)) is not None:
        return False
    answer = shared is None or not codex_config_sets_codexr(shared)
    if key is not None and key == verdict.key_of(shared_path):  # not kept for a file that changed while it was read
        verdict.remember(codex_home, key, answer)
    return answer


def codex_config_sets_codexr(doc: Mapping[str, Any]) -> bool:
    """Whether Codex's `config.toml` holds one of the places codexr still reads there (see `load_config`)."""
    features = doc.get("features")
    tui = doc.get("tui")
    return ((isinstance(features, dict) and FEATURE_NAME in features) or "file_snapshots" in doc
            or (isinstance(tui, dict) and "keys" in tui))
