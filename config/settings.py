"""codexr's settings models: what `$CODEX_HOME/codexr.toml` (and the command line) may set."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, get_args

from annotated_types import Ge, Gt
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic.fields import FieldInfo

from snapshot_store.settings import DEFAULT_CHURN_DIRS, GIB, MIB, RetentionPolicy, ScopeSettings

from .files import FEATURE_NAME
from .sizes import format_size, parse_size
from .tomltext import toml_text

#: The feature name used by `[features] file_snapshots` and `codexr --enable/--disable file_snapshots`.
FEATURE_FILE_SNAPSHOTS = FEATURE_NAME

_SIZE_EXPECTS = 'a byte count >= 0 or a size such as "500MB" or "10GiB"'

#: Shared model configuration: strict TOML types, typos rejected, field docstrings become descriptions.
_MODEL_CONFIG = ConfigDict(extra="forbid", strict=True, frozen=True, use_attribute_docstrings=True)


def _coerce_size(value: Any) -> Any:
    """Accept size strings for byte-count settings; other values fall through to the strict int check."""
    if isinstance(value, str):
        try:
            return parse_size(value)
        except ValueError:
            raise ValueError(f"must be {_SIZE_EXPECTS} (got {toml_text(value)})") from None
    return value


#: A byte count written either as an integer or as a size string such as "500MB".
ByteCount = Annotated[
    int,
    BeforeValidator(_coerce_size),
    Field(ge=0, json_schema_extra={"expects": _SIZE_EXPECTS, "size": True}),
]


class FeaturesSettings(BaseModel):
    """The one `[features]` flag codexr owns; every other feature flag belongs to Codex."""

    model_config = _MODEL_CONFIG

    file_snapshots: bool = True
    """Snapshot workspace files so a rewind restores them too; on by default since that is codexr's point."""


class FileSnapshotsSettings(BaseModel):
    """The `[file_snapshots]` table: what captures look at and how long snapshots are kept."""

    model_config = _MODEL_CONFIG

    churn_dirs: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CHURN_DIRS),
        json_schema_extra={"expects": "a list of plain directory names"},
    )
    """Directory names the recent-file walk never enters, so build output and dependencies stay out."""
    residue_max_files: int = Field(default=100, ge=0)
    """Cap on recent files outside Git's view captured per snapshot, so stray output stays cheap."""
    residue_max_file_bytes: ByteCount = 16 * MIB
    """Recent untracked files above this size (e.g. "64MB") are reported, not captured, to keep it small."""
    include_hidden: bool = False
    """Also capture untracked dot-files found by the walk (tracked dot-files are always captured)."""
    retention_days: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    """Garbage collection drops workspace snapshots older than this many days (0 disables the age rule)."""
    thread_retention_days: float = Field(default=30.0, ge=0, allow_inf_nan=False)
    """A conversation thread unused for this many days stops pinning its snapshots (0: threads always pin)."""
    retention_max_snapshots: int = Field(default=1000, ge=0)
    """Keep only this many newest snapshots per workspace so long sessions stay bounded (0 disables)."""
    max_store_bytes: ByteCount = 10 * GIB
    """GC drops the oldest snapshots until the store fits this size, e.g. "500MB" (0 disables)."""
    gc_grace_seconds: float = Field(default=3600.0, ge=0, allow_inf_nan=False)
    """Unreferenced objects younger than this survive garbage collection, protecting captures in progress."""
    auto_gc: bool = True
    """Run garbage collection automatically, so the store does not grow without bound."""
    approval_timeout_seconds: float = Field(default=300.0, gt=0, allow_inf_nan=False)
    """Seconds the UI may take to answer a Codex approval request before it is declined, so none stalls."""
    codex_bin: str = ""
    """The Codex executable codexr runs, e.g. "~/bin/codex" ("": the pinned one; a bare name is looked up on PATH)."""

    @field_validator("churn_dirs")
    @classmethod
    def _plain_dir_names(cls, names: list[str]) -> list[str]:
        """Reject paths and special names: churn dirs are matched by single directory name."""
        for name in names:
            if not name or name in (".", "..") or "/" in name or "\\" in name:
                raise ValueError(f"must contain plain directory names, not paths (got {toml_text(name)})")
        return names


class TuiSettings(BaseModel):
    """codexr's `[tui]` table: key remapping for the `codexr` app (Codex's own `[tui]` is a different table)."""

    model_config = _MODEL_CONFIG

    keys: dict[str, str] = Field(
        default_factory=dict,
        json_schema_extra={"expects": 'a table of action id = "key", e.g. { rewind = "f2" }'},
    )
    """Remap app keys by action id, e.g. `keys = { rewind = "f2", interrupt = "ctrl+g" }` (see /help for ids)."""


class CodexrSettings(BaseModel):
    """Everything codexr reads from `codexr.toml`, its old places in `config.toml`, and the command line."""

    model_config = _MODEL_CONFIG

    features: FeaturesSettings = Field(default_factory=FeaturesSettings)
    """The `[features]` flags codexr honours."""
    file_snapshots: FileSnapshotsSettings = Field(default_factory=FileSnapshotsSettings)
    """The `[file_snapshots]` table."""
    tui: TuiSettings = Field(default_factory=TuiSettings)
    """The `[tui]` keys codexr reads (Codex's own `[tui]` keys are left to Codex)."""
    codex_home: Path = Field(strict=False)
    """The Codex home directory these settings were read from (never set by a file)."""

    def scope(self) -> ScopeSettings:
        """Build the snapshot store's capture-scope settings from the `[file_snapshots]` table."""
        fs = self.file_snapshots
        return ScopeSettings(
            churn_dirs=tuple(fs.churn_dirs),
            residue_max_files=fs.residue_max_files,
            residue_max_file_bytes=fs.residue_max_file_bytes,
            include_hidden=fs.include_hidden,
        )

    def retention(self) -> RetentionPolicy:
        """Build the snapshot store's garbage-collection policy from the `[file_snapshots]` table."""
        fs = self.file_snapshots
        return RetentionPolicy(
            max_age_days=fs.retention_days,
            thread_idle_days=fs.thread_retention_days,
            max_snapshots_per_workspace=fs.retention_max_snapshots,
            max_store_bytes=fs.max_store_bytes,
            grace_seconds=fs.gc_grace_seconds,
        )


#: The config tables codexr reads, in documentation order, with the model that validates each.
SECTIONS: dict[str, type[BaseModel]] = {
    "features": FeaturesSettings, "file_snapshots": FileSnapshotsSettings, "tui": TuiSettings,
}

#: Tables that also exist in Codex's own config: codexr owns only its model's keys in them, so `-c tui.theme=...`
#: or `-c features.web_search_request=...` stay Codex's.
SHARED_SECTIONS = frozenset({"features", "tui"})

#: Names the codex-rewind Rust fork gives codexr's settings in `config.toml` (its `FileSnapshotsToml`):
#: `track_hidden_files` scans dot-files too, with edited files and `.git` handled as here -> `include_hidden`.
FORK_ALIASES: dict[str, dict[str, str]] = {"file_snapshots": {"track_hidden_files": "include_hidden"}}

#: Keys the fork once had and retired with the tracking mode they tuned (no codexr equivalent): ignored.
FORK_RETIRED: dict[str, frozenset[str]] = {
    "file_snapshots": frozenset({"seed_full_limit", "seed_recent", "max_tracked_files"}),
}

#: Fields set by codexr itself, never by a file or `-c`.
INTERNAL_FIELDS = frozenset({"codex_home"})


def setting_fields() -> list[tuple[tuple[str, ...], FieldInfo]]:
    """Every user setting as (key path, field): a table's keys, or a top-level key, in model order."""
    out: list[tuple[tuple[str, ...], FieldInfo]] = []
    for name, field in CodexrSettings.model_fields.items():
        if name in INTERNAL_FIELDS:
            continue
        model = field.annotation
        if isinstance(model, type) and issubclass(model, BaseModel):
            out.extend(((name, sub), sub_field) for sub, sub_field in model.model_fields.items())
        else:
            out.append(((name,), field))
    return out


def is_codexr_key(path: tuple[str, ...]) -> bool:
    """Whether a dotted `-c` key is codexr's (kept here) rather than Codex's (passed on to Codex)."""
    if not path or path[0] in INTERNAL_FIELDS or path[0] not in CodexrSettings.model_fields:
        return False
    if path[0] in SHARED_SECTIONS:
        model = SECTIONS[path[0]]
        return len(path) > 1 and path[1] in model.model_fields
    return True


def split_overrides(overrides: Iterable[str]) -> tuple[str, ...]:
    """`-c` overrides meant for Codex: codexr's own keys (`file_snapshots.*`, `tui.keys`...) would make it warn."""
    out = []
    for kv in overrides:
        key = kv.split("=", 1)[0].strip()
        if is_codexr_key(tuple(part.strip() for part in key.split("."))):
            continue
        out.append(kv)
    return tuple(out)


def field_extra(field: FieldInfo) -> dict[str, Any]:
    """The `json_schema_extra` dict of a field (empty when absent) where codexr keeps its own hints."""
    extra = field.json_schema_extra
    return dict(extra) if isinstance(extra, dict) else {}


def expected_value(field: FieldInfo) -> str:
    """Describe what a field accepts, e.g. "an integer >= 0", for one-line error messages."""
    expects = field_extra(field).get("expects")
    if isinstance(expects, str):
        return expects
    kinds = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    annotation = field.annotation
    optional = [arg for arg in get_args(annotation) if arg is not type(None)]
    if len(optional) == 1:  # `X | None`: unset is written by leaving the key out, so describe X
        annotation = optional[0]
    text = kinds.get(annotation, "a valid value") if isinstance(annotation, type) else "a value"
    for item in field.metadata:
        if isinstance(item, Ge):
            text += f" >= {item.ge}"
        elif isinstance(item, Gt):
            text += f" > {item.gt}"
    return text


def settings_reference() -> list[tuple[str, str, str]]:
    """List (dotted key, default as TOML text, description) for every setting, so docs can be checked."""
    rows: list[tuple[str, str, str]] = []
    for section, model in SECTIONS.items():
        for name, field in model.model_fields.items():
            default = field.get_default(call_default_factory=True)
            if field_extra(field).get("size") and isinstance(default, int):
                default_text = toml_text(format_size(default))
            else:
                default_text = toml_text(default)
            if not field.description:
                raise RuntimeError(f"setting {section}.{name} has no docstring")
            rows.append((f"{section}.{name}", default_text, field.description))
    return rows


def settings_reference_markdown() -> str:
    """Render settings_reference() as the Markdown table embedded in docs/configuration.md."""
    lines = ["| Key | Default | Meaning |", "| --- | --- | --- |"]
    for key, default, description in settings_reference():
        cell = description.replace("|", "\\|")
        lines.append(f"| `{key}` | `{default}` | {cell} |")
    return "\n".join(lines) + "\n"
