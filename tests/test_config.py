"""Tests for the `config` package: codexr's own codexr.toml, its old places in Codex's config.toml, -c, flags."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from config import (
    CODEXR_FILE_NAME,
    CONFIG_FILE_NAME,
    FEATURE_FILE_SNAPSHOTS,
    CodexrSettings,
    ConfigError,
    FeaturesSettings,
    FileSnapshotsSettings,
    TuiSettings,
    codex_home,
    format_size,
    is_codexr_key,
    load_config,
    load_settings,
    parse_size,
    settings_reference,
    settings_reference_markdown,
)
from snapshot_store.settings import DEFAULT_CHURN_DIRS, GIB, MIB, RetentionPolicy, ScopeSettings

README = Path(__file__).parents[1] / "README.md"
CONFIG_DOC = Path(__file__).parents[1] / "docs" / "configuration.md"  # the settings reference the README links


def write_config(home: Path, text: str, name: str = CODEXR_FILE_NAME) -> Path:
    """Write `home/codexr.toml` (or Codex's `config.toml`) and return its path."""
    path = home / name
    path.write_text(text, encoding="utf-8")
    return path


def config_error(home: Path, **kwargs: list[str]) -> str:
    """Load settings expecting failure and return the error line, checking it is a single line."""
    with pytest.raises(ConfigError) as info:
        load_settings(home, **kwargs)
    message = str(info.value)
    assert "\n" not in message
    return message


# --- defaults and the file ------------------------------------------------------------------------


def test_missing_file_gives_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings.codex_home == tmp_path
    assert settings.features.file_snapshots is True
    fs = settings.file_snapshots
    assert fs.churn_dirs == list(DEFAULT_CHURN_DIRS)
    assert fs.residue_max_files == 100
    assert fs.residue_max_file_bytes == 16 * MIB
    assert fs.include_hidden is False
    assert fs.retention_days == 30
    assert fs.retention_max_snapshots == 1000
    assert fs.max_store_bytes == 10 * GIB
    assert fs.gc_grace_seconds == 3600
    assert fs.auto_gc is True
    assert fs.approval_timeout_seconds == 300


def test_missing_codex_home_directory_gives_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path / "does-not-exist")
    assert settings.file_snapshots.residue_max_files == 100


def test_file_values_are_read(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
[features]
file_snapshots = false

[file_snapshots]
churn_dirs = ["node_modules", "my-build"]
residue_max_files = 7
residue_max_file_bytes = 2048
include_hidden = true
retention_days = 2.5
retention_max_snapshots = 0
max_store_bytes = 123456
gc_grace_seconds = 60
auto_gc = false
approval_timeout_seconds = 12.5
""",
    )
    settings = load_settings(tmp_path)
    assert settings.features.file_snapshots is False
    fs = settings.file_snapshots
    assert fs.churn_dirs == ["node_modules", "my-build"]
    assert fs.residue_max_files == 7
    assert fs.residue_max_file_bytes == 2048
    assert fs.include_hidden is True
    assert fs.retention_days == 2.5
    assert fs.retention_max_snapshots == 0
    assert fs.max_store_bytes == 123456
    assert fs.gc_grace_seconds == 60.0
    assert fs.auto_gc is False
    assert fs.approval_timeout_seconds == 12.5


def test_codex_keys_and_tables_are_ignored(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        """
model = "gpt-5-codex"
approval_policy = "on-request"
sandbox_mode = "workspace-write"

[model_providers.local]
name = "Local"
base_url = "http://localhost:8080/v1"

[mcp_servers.docs]
command = "docs-server"

[profiles.fast.features]
file_snapshots = "not ours to check"

[features]
web_search_request = true
unified_exec = false
some_future_flag = { nested = 1 }

[file_snapshots]
residue_max_files = 5
""",
        CONFIG_FILE_NAME,
    )
    settings = load_settings(tmp_path)
    assert settings.features.file_snapshots is True
    assert settings.file_snapshots.residue_max_files == 5


def test_features_that_is_not_a_table_is_left_to_codex(tmp_path: Path) -> None:
    write_config(tmp_path, "features = 3\n", CONFIG_FILE_NAME)
    assert load_settings(tmp_path).features.file_snapshots is True


# --- errors ---------------------------------------------------------------------------------------


def test_unknown_file_snapshots_key_is_an_error_naming_it(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[file_snapshots]\nresidue_max_file = 5\n")
    message = config_error(tmp_path)
    assert message == f"{path}: unknown setting [file_snapshots] residue_max_file"


def test_wrong_type_is_a_one_line_error_naming_file_key_and_value(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[file_snapshots]\nresidue_max_files = "lots"\n')
    assert config_error(tmp_path) == (
        f'{path}: [file_snapshots] residue_max_files must be an integer >= 0 (got "lots")'
    )


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("residue_max_files = -1", "[file_snapshots] residue_max_files must be an integer >= 0 (got -1)"),
        ("residue_max_files = 1.5", "[file_snapshots] residue_max_files must be an integer >= 0 (got 1.5)"),
        ("residue_max_files = true", "[file_snapshots] residue_max_files must be an integer >= 0 (got true)"),
        ("retention_days = -0.5", "[file_snapshots] retention_days must be a number >= 0 (got -0.5)"),
        ("retention_days = inf", "[file_snapshots] retention_days must be a number >= 0 (got inf)"),
        ("gc_grace_seconds = nan", "[file_snapshots] gc_grace_seconds must be a number >= 0 (got nan)"),
        ("retention_max_snapshots = -3", "[file_snapshots] retention_max_snapshots must be an integer >= 0"),
        (
            "approval_timeout_seconds = 0",
            "[file_snapshots] approval_timeout_seconds must be a number > 0 (got 0)",
        ),
        ('include_hidden = "yes"', '[file_snapshots] include_hidden must be true or false (got "yes")'),
        ("auto_gc = 1", "[file_snapshots] auto_gc must be true or false (got 1)"),
        (
            'churn_dirs = "build"',
            '[file_snapshots] churn_dirs must be a list of plain directory names (got "build")',
        ),
        (
            'churn_dirs = ["ok", 3]',
            '[file_snapshots] churn_dirs must be a list of plain directory names (got ["ok", 3])',
        ),
        ("max_store_bytes = -1", "[file_snapshots] max_store_bytes must be a byte count >= 0"),
        (
            'max_store_bytes = "lots"',
            "[file_snapshots] max_store_bytes must be a byte count >= 0 or a size such as",
        ),
        (
            'residue_max_file_bytes = "-5MB"',
            "[file_snapshots] residue_max_file_bytes must be a byte count >= 0",
        ),
    ],
)
def test_invalid_values_are_one_line_errors(tmp_path: Path, line: str, expected: str) -> None:
    path = write_config(tmp_path, f"[file_snapshots]\n{line}\n")
    message = config_error(tmp_path)
    assert message.startswith(f"{path}: {expected}")


@pytest.mark.parametrize("name", ["a/b", "", ".", "..", "/abs", "x\\\\y"])
def test_churn_dirs_must_be_plain_names(tmp_path: Path, name: str) -> None:
    write_config(tmp_path, f'[file_snapshots]\nchurn_dirs = ["ok", "{name}"]\n')
    message = config_error(tmp_path)
    assert "[file_snapshots] churn_dirs must contain plain directory names" in message


def test_feature_flag_must_be_boolean(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[features]\nfile_snapshots = "off"\n')
    assert config_error(tmp_path) == f'{path}: [features] file_snapshots must be true or false (got "off")'


def test_file_snapshots_must_be_a_table(tmp_path: Path) -> None:
    path = write_config(tmp_path, "file_snapshots = true\n")
    assert config_error(tmp_path) == f"{path}: file_snapshots must be a table (got true)"


def test_several_problems_stay_on_one_line(tmp_path: Path) -> None:
    write_config(tmp_path, "[file_snapshots]\nresidue_max_files = -1\nauto_gc = 0\ntypo = 1\n")
    message = config_error(tmp_path)
    assert "residue_max_files" in message
    assert "auto_gc" in message
    assert "unknown setting [file_snapshots] typo" in message


def test_malformed_toml_is_one_line_error_with_path_and_line(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'model = "o3"\n\n[file_snapshots\nauto_gc = true\n')
    message = config_error(tmp_path)
    assert message.startswith(f"{path}: invalid TOML at line 3")


def test_duplicate_key_is_invalid_toml(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[file_snapshots]\nauto_gc = true\nauto_gc = false\n")
    assert config_error(tmp_path).startswith(f"{path}: invalid TOML at line 3")


def test_non_utf8_file_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_bytes(b'model = "\xff"\n')
    assert config_error(tmp_path).startswith(f"{path}: invalid TOML")


def test_config_path_that_is_a_directory_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "config.toml").mkdir()
    message = config_error(tmp_path)
    assert message.startswith(f"{tmp_path / 'config.toml'}: cannot read file")


def test_error_shows_home_as_tilde(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    home = tmp_path / ".codex"
    home.mkdir()
    write_config(home, "[file_snapshots]\nauto_gc = 3\n")
    assert (
        config_error(home) == "~/.codex/codexr.toml: [file_snapshots] auto_gc must be true or false (got 3)"
    )


# --- codexr.toml beside Codex's config.toml ---------------------------------------------------------


def test_a_codex_rewind_fork_config_toml_is_read_with_the_forks_key_names(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "[features]\nfile_snapshots = false\nweb_search_request = true\n"
        "[file_snapshots]\ntrack_hidden_files = true\n",
        CONFIG_FILE_NAME,
    )
    loaded = load_config(tmp_path)
    assert loaded.settings.file_snapshots.include_hidden is True
    assert loaded.settings.features.file_snapshots is False
    assert loaded.warnings == ()
    origin = {o.key: o for o in loaded.origins}["file_snapshots.include_hidden"]
    assert (origin.origin, origin.detail) == ("config.toml", "as track_hidden_files")


def test_a_bad_value_under_a_fork_name_is_reported_under_that_name(tmp_path: Path) -> None:
    path = write_config(tmp_path, '[file_snapshots]\ntrack_hidden_files = "yes"\n', CONFIG_FILE_NAME)
    assert config_error(tmp_path) == (
        f'{path}: [file_snapshots] track_hidden_files must be true or false (got "yes")'
    )


def test_fork_names_are_errors_in_codexr_toml_with_codexrs_name(tmp_path: Path) -> None:
    path = write_config(tmp_path, "[file_snapshots]\ntrack_hidden_files = true\n")
    assert config_error(tmp_path) == (
        f"{path}: unknown setting [file_snapshots] track_hidden_files"
        " (codex-rewind's name; codexr calls it include_hidden)"
    )


def test_unknown_keys_in_config_toml_are_one_warning_and_the_rest_is_read(tmp_path: Path) -> None:
    path = write_config(
        tmp_path, "[file_snapshots]\nresidue_max_file = 5\nseed_recent = 9\nauto_gc = false\n", CONFIG_FILE_NAME
    )
    loaded = load_config(tmp_path)
    assert loaded.settings.file_snapshots.auto_gc is False
    assert loaded.warnings == (
        f"{path}: ignored [file_snapshots] residue_max_file (unknown setting),"
        " [file_snapshots] seed_recent (retired in codex-rewind)",
    )


def test_codex_keys_in_codexr_toml_are_errors(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'model = "o3"\n')
    assert config_error(tmp_path) == f"{path}: unknown setting model"
    write_config(tmp_path, '[tui]\ntheme = "dark"\n')
    assert config_error(tmp_path) == f"{path}: unknown setting [tui] theme"
    write_config(tmp_path, 'codex_home = "/elsewhere"\n')
    assert config_error(tmp_path) == f"{path}: unknown setting codex_home"


def test_codexr_toml_wins_key_by_key_then_c_then_flags(tmp_path: Path) -> None:
    write_config(
        tmp_path,
        "[features]\nfile_snapshots = false\n[file_snapshots]\nresidue_max_files = 7\nretention_days = 3\n",
        CONFIG_FILE_NAME,
    )
    write_config(tmp_path, "[file_snapshots]\nresidue_max_files = 9\nauto_gc = false\n")
    loaded = load_config(tmp_path, overrides=["file_snapshots.auto_gc=true"])
    fs = loaded.settings.file_snapshots
    assert (fs.residue_max_files, fs.retention_days, fs.auto_gc) == (9, 3, True)
    assert loaded.settings.features.file_snapshots is False
    origins = {o.key: (o.origin, o.detail) for o in loaded.origins}
    assert origins["file_snapshots.residue_max_files"] == ("codexr.toml", "")
    assert origins["file_snapshots.retention_days"] == ("config.toml", "")
    assert origins["file_snapshots.auto_gc"] == ("-c", "file_snapshots.auto_gc=true")
    assert origins["features.file_snapshots"] == ("config.toml", "")
    assert origins["file_snapshots.churn_dirs"] == ("default", "")
    flagged = load_config(tmp_path, enable=[FEATURE_FILE_SNAPSHOTS])
    assert flagged.settings.features.file_snapshots is True
    assert {o.key: o.origin for o in flagged.origins}["features.file_snapshots"] == "--enable"


def test_a_bad_value_in_codexr_toml_is_blamed_on_codexr_toml(tmp_path: Path) -> None:
    write_config(tmp_path, "[file_snapshots]\nauto_gc = true\n", CONFIG_FILE_NAME)
    path = write_config(tmp_path, "[file_snapshots]\nauto_gc = 3\n")
    assert config_error(tmp_path) == f"{path}: [file_snapshots] auto_gc must be true or false (got 3)"


def test_tui_keys_in_config_toml_are_read_with_a_warning_and_codexr_toml_wins(tmp_path: Path) -> None:
    shared = write_config(
        tmp_path, '[tui]\ntheme = "dark"\nkeymap = { quit = "q" }\nkeys = { rewind = "f2" }\n', CONFIG_FILE_NAME
    )
    loaded = load_config(tmp_path)
    assert loaded.settings.tui.keys == {"rewind": "f2"}  # Codex's own theme/keymap are not ours
    assert loaded.warnings == (
        f"{shared}: [tui] keys sits in Codex's [tui] table; "
        f"move it to the [tui] table of {tmp_path / CODEXR_FILE_NAME}",
    )
    write_config(tmp_path, '[tui]\nkeys = { interrupt = "ctrl+g" }\n')
    assert load_settings(tmp_path).tui.keys == {"interrupt": "ctrl+g"}


@pytest.mark.parametrize(
    ("key", "ours"),
    [
        ("file_snapshots.residue_max_files", True),
        ("file_snapshots", True),
        ("features.file_snapshots", True),
        ("tui.keys.rewind", True),
        ("features.web_search_request", False),
        ("features", False),
        ("tui.theme", False),
        ("file_snapshots_extra", False),
        ("model", False),
        ("codex_home", False),
    ],
)
def test_which_c_keys_are_codexrs_and_which_go_to_codex(key: str, ours: bool) -> None:
    assert is_codexr_key(tuple(key.split("."))) is ours


# --- -c overrides ---------------------------------------------------------------------------------


def test_override_int_and_list(tmp_path: Path) -> None:
    settings = load_settings(
        tmp_path,
        overrides=["file_snapshots.residue_max_files=50", 'file_snapshots.churn_dirs=["a", "b"]'],
    )
    assert settings.file_snapshots.residue_max_files == 50
    assert settings.file_snapshots.churn_dirs == ["a", "b"]


def test_override_beats_file_and_keeps_other_file_values(tmp_path: Path) -> None:
    write_config(tmp_path, "[file_snapshots]\nresidue_max_files = 7\nretention_days = 3\n")
    settings = load_settings(tmp_path, overrides=["file_snapshots.residue_max_files = 9"])
    assert settings.file_snapshots.residue_max_files == 9
    assert settings.file_snapshots.retention_days == 3


def test_later_override_wins(tmp_path: Path) -> None:
    settings = load_settings(
        tmp_path, overrides=["file_snapshots.residue_max_files=1", "file_snapshots.residue_max_files=2"]
    )
    assert settings.file_snapshots.residue_max_files == 2


def test_override_whole_table_replaces_file_table(tmp_path: Path) -> None:
    write_config(tmp_path, "[file_snapshots]\nresidue_max_files = 7\nauto_gc = false\n")
    settings = load_settings(tmp_path, overrides=["file_snapshots={ auto_gc = true }"])
    assert settings.file_snapshots.auto_gc is True
    assert settings.file_snapshots.residue_max_files == 100


def test_override_value_that_is_not_toml_is_a_plain_string(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, overrides=["file_snapshots.max_store_bytes=500MB"])
    assert settings.file_snapshots.max_store_bytes == 500 * MIB
    message = config_error(tmp_path, overrides=["file_snapshots.churn_dirs=[unquoted]"])
    assert '(got "[unquoted]")' in message


def test_override_plain_string_for_non_string_setting_names_the_argument(tmp_path: Path) -> None:
    message = config_error(tmp_path, overrides=["file_snapshots.residue_max_files=lots"])
    assert message == (
        "-c file_snapshots.residue_max_files=lots: "
        'file_snapshots.residue_max_files must be an integer >= 0 (got "lots")'
    )


def test_unknown_override_key_is_an_error(tmp_path: Path) -> None:
    message = config_error(tmp_path, overrides=["file_snapshots.foo=1"])
    assert message == "-c file_snapshots.foo=1: unknown setting file_snapshots.foo"


def test_bad_file_value_fixed_by_override_is_accepted(tmp_path: Path) -> None:
    write_config(tmp_path, '[file_snapshots]\nresidue_max_files = "lots"\n')
    settings = load_settings(tmp_path, overrides=["file_snapshots.residue_max_files=3"])
    assert settings.file_snapshots.residue_max_files == 3


def test_error_is_blamed_on_the_latest_override_that_touched_the_key(tmp_path: Path) -> None:
    message = config_error(
        tmp_path, overrides=["file_snapshots={ auto_gc = true }", "file_snapshots.churn_dirs.x=1"]
    )
    assert message.startswith("-c file_snapshots.churn_dirs.x=1: file_snapshots.churn_dirs must be")


def test_overrides_for_codex_keys_are_ignored(tmp_path: Path) -> None:
    settings = load_settings(
        tmp_path,
        overrides=[
            "model=o3",
            "sandbox_workspace_write.network_access=true",
            "features.web_search_request=true",
        ],
    )
    assert settings == load_settings(tmp_path)


def test_override_feature_flag(tmp_path: Path) -> None:
    assert (
        load_settings(tmp_path, overrides=["features.file_snapshots=false"]).features.file_snapshots is False
    )


@pytest.mark.parametrize("raw", ["file_snapshots.auto_gc", "=1", "file_snapshots..auto_gc=true"])
def test_malformed_override_is_an_error(tmp_path: Path, raw: str) -> None:
    assert config_error(tmp_path, overrides=[raw]).startswith(f"-c {raw}: ")


# --- --enable / --disable -------------------------------------------------------------------------


def test_disable_turns_off_snapshots(tmp_path: Path) -> None:
    assert load_settings(tmp_path, disable=[FEATURE_FILE_SNAPSHOTS]).features.file_snapshots is False


def test_enable_beats_file_and_override(tmp_path: Path) -> None:
    write_config(tmp_path, "[features]\nfile_snapshots = false\n")
    assert load_settings(tmp_path).features.file_snapshots is False
    settings = load_settings(tmp_path, overrides=["features.file_snapshots=false"], enable=["file_snapshots"])
    assert settings.features.file_snapshots is True


def test_enable_repairs_an_invalid_flag_value(tmp_path: Path) -> None:
    write_config(tmp_path, '[features]\nfile_snapshots = "nope"\n')
    assert load_settings(tmp_path, enable=["file_snapshots"]).features.file_snapshots is True


def test_disable_wins_over_enable(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, enable=["file_snapshots"], disable=["file_snapshots"])
    assert settings.features.file_snapshots is False


def test_other_feature_names_are_ignored(tmp_path: Path) -> None:
    settings = load_settings(tmp_path, enable=["web_search_request"], disable=["unified_exec"])
    assert settings.features.file_snapshots is True


# --- sizes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4096", 4096),
        ("100B", 100),
        ("1K", 1024),
        ("1kb", 1024),
        ("3KiB", 3 * 1024),
        ("500MB", 500 * MIB),
        ("16MiB", 16 * MIB),
        ("2G", 2 * GIB),
        ("10GiB", 10 * GIB),
        ("1 TB", 1024 * GIB),
        ("1.5G", 3 * GIB // 2),
        (" 0 ", 0),
    ],
)
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "lots", "-5MB", "5 XB", "5iB", "1e3", "MB", "5 M B"])
def test_parse_size_rejects_garbage(text: str) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


def test_size_strings_in_file(tmp_path: Path) -> None:
    write_config(tmp_path, '[file_snapshots]\nmax_store_bytes = "2G"\nresidue_max_file_bytes = "64MB"\n')
    fs = load_settings(tmp_path).file_snapshots
    assert fs.max_store_bytes == 2 * GIB
    assert fs.residue_max_file_bytes == 64 * MIB


def test_format_size_round_trips() -> None:
    for size in (0, 1, 1000, 1024, 16 * MIB, 10 * GIB, 3 * 1024**4):
        assert parse_size(format_size(size)) == size
    assert format_size(10 * GIB) == "10GiB"
    assert format_size(1000) == "1000"


# --- CODEX_HOME -----------------------------------------------------------------------------------


def test_codex_home_from_env(tmp_path: Path) -> None:
    assert codex_home({"CODEX_HOME": str(tmp_path)}) == tmp_path


@pytest.mark.parametrize("env", [{}, {"CODEX_HOME": ""}])
def test_codex_home_defaults_to_dot_codex(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert codex_home(env) == tmp_path / ".codex"


def test_codex_home_reads_process_environment_by_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "custom"))
    assert codex_home() == tmp_path / "custom"
    monkeypatch.delenv("CODEX_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert codex_home() == tmp_path / ".codex"


# --- mapping onto snapshot_store ------------------------------------------------------------------


def test_scope_and_retention_mapping(tmp_path: Path) -> None:
    settings = load_settings(
        tmp_path,
        overrides=[
            'file_snapshots={ churn_dirs = ["x"], residue_max_files = 3, residue_max_file_bytes = "1K",'
            " include_hidden = true, retention_days = 1.5, retention_max_snapshots = 9,"
            ' max_store_bytes = "1M", gc_grace_seconds = 5 }'
        ],
    )
    scope = settings.scope()
    assert scope == ScopeSettings(
        churn_dirs=("x",), residue_max_files=3, residue_max_file_bytes=1024, include_hidden=True
    )
    assert settings.retention() == RetentionPolicy(
        max_age_days=1.5,
        max_snapshots_per_workspace=9,
        max_store_bytes=MIB,
        grace_seconds=5.0,
        keep_latest=RetentionPolicy().keep_latest,
    )


def test_default_settings_match_snapshot_store_defaults(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert settings.scope() == ScopeSettings()
    assert settings.retention() == RetentionPolicy()


def test_settings_are_immutable(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    with pytest.raises(ValueError):
        settings.file_snapshots.auto_gc = False


def test_models_forbid_unknown_fields() -> None:
    with pytest.raises(ValueError):
        FileSnapshotsSettings.model_validate({"nope": 1})
    with pytest.raises(ValueError):
        CodexrSettings.model_validate({"codex_home": "/x", "model": "o3"})


# --- reference and docs ----------------------------------------------------------------------------


def test_settings_reference_covers_every_field_with_a_description() -> None:
    reference = settings_reference()
    keys = [key for key, _, _ in reference]
    expected = [f"features.{name}" for name in FeaturesSettings.model_fields]
    expected += [f"file_snapshots.{name}" for name in FileSnapshotsSettings.model_fields]
    expected += [f"tui.{name}" for name in TuiSettings.model_fields]
    assert keys == expected
    for key, _default, description in reference:
        assert description.strip(), key
        assert "\n" not in description, key


def test_settings_reference_defaults_are_toml_that_loads_to_the_default(tmp_path: Path) -> None:
    defaults = load_settings(tmp_path)
    for key, default, _ in settings_reference():
        loaded = load_settings(tmp_path, overrides=[f"{key}={default}"])
        assert loaded == defaults, key


def test_the_configuration_reference_documents_every_setting() -> None:
    """The full settings reference moved from README.md to docs/configuration.md (issue 18 §3); the README
    keeps the common settings and must link the reference."""
    assert "docs/configuration.md" in README.read_text(encoding="utf-8"), "README.md does not link the reference"
    text = CONFIG_DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- config:start -->(.*?)<!-- config:end -->", text, re.DOTALL)
    assert match is not None, "docs/configuration.md lacks the config markers"
    section = match.group(1)
    for key, _, _ in settings_reference():
        assert f"`{key}`" in section, f"docs/configuration.md does not document {key}"
    assert settings_reference_markdown() in section, "docs/configuration.md settings table is stale; regenerate it"


def test_a_command_with_nothing_configured_skips_validation_and_gets_the_same_defaults(tmp_path: Path) -> None:
    """One-shot commands skip pydantic when no source sets a codexr key (`defaults_apply`); that shortcut must
    give exactly the models' defaults, and must never be taken when some file, `-c` or flag sets one."""
    from app.cmds.context import Context
    from config import defaults_apply

    write_config(tmp_path, 'model = "o3"\n[features]\nweb_search_request = true\n[tui]\ntheme = "dark"\n',
                 CONFIG_FILE_NAME)  # Codex's own keys only
    assert defaults_apply(tmp_path, enable=["web_search_request"])
    quick, full = Context(home=tmp_path), load_settings(tmp_path)
    assert (quick.scope(), quick.retention(), quick.auto_gc()) == (full.scope(), full.retention(), True)
    assert quick.settings == full  # asked for, the settings are validated then
    assert not defaults_apply(tmp_path, overrides=["model=o3"])
    assert not defaults_apply(tmp_path, disable=[FEATURE_FILE_SNAPSHOTS])
    for name, text in ((CONFIG_FILE_NAME, "[file_snapshots]\nauto_gc = false\n"),
                       (CONFIG_FILE_NAME, "[features]\nfile_snapshots = false\n"),
                       (CONFIG_FILE_NAME, '[tui]\nkeys = { rewind = "f2" }\n'),
                       (CODEXR_FILE_NAME, "")):
        home = tmp_path / f"home-{len(text)}-{name}"
        home.mkdir()
        write_config(home, text, name)
        assert not defaults_apply(home), (name, text)


def test_a_profile_s_settings_read_back_as_the_profile_holds_them(tmp_path: Path) -> None:
    """`-p NAME` hands Codex each setting of NAME.config.toml as `-c KEY=VALUE`, the value written as TOML by codexr's
    own writer: each must read back (as Codex's TOML reader takes it) as the profile holds it, arrays of tables,
    escapes, dates and odd keys inside inline tables included; a key a `-c` path cannot spell is refused."""
    import datetime
    import tomllib

    from config.profiles import profile_overrides

    text = ('model = "o3 \\"quoted\\"\\n\\t\\u00e9\\u007f"\nratio = 0.25\nbig = 1e300\nflags = [true, false]\n'
            'when = 1979-05-27T07:32:00Z\nday = 1979-05-27\n\n[model_providers.mine]\nbase_url = "http://x/v1"\n'
            'retries = 3\n\n[[mcp_servers.tools.args]]\n"odd key" = "v"\nplain = [1, [2, 3]]\n')
    (tmp_path / "p.config.toml").write_text(text)
    overrides = profile_overrides(tmp_path, "p")
    assert [o.split("=", 1)[0] for o in overrides] == [
        "model", "ratio", "big", "flags", "when", "day", "model_providers.mine.base_url",
        "model_providers.mine.retries", "mcp_servers.tools.args"]
    read: dict[str, object] = {}
    for o in overrides:
        key, value = o.split("=", 1)
        read[key] = tomllib.loads(f"x = {value}")["x"]
    held = tomllib.loads(text)
    assert read["model"] == held["model"] == 'o3 "quoted"\n\t\u00e9\x7f'
    assert read["when"] == datetime.datetime(1979, 5, 27, 7, 32, tzinfo=datetime.UTC)
    assert read["mcp_servers.tools.args"] == held["mcp_servers"]["tools"]["args"]
    same = ("ratio", "big", "flags", "day")
    assert {k: read[k] for k in same} == {k: held[k] for k in same}
    assert read["model_providers.mine.retries"] == 3
    (tmp_path / "q.config.toml").write_text('[model_providers."my.provider"]\nbase_url = "x"\n')
    with pytest.raises(ConfigError, match="cannot be passed to Codex"):
        profile_overrides(tmp_path, "q")


@pytest.fixture
def verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The store's cache directory in the CODEX_HOME `tmp_path` (where config/verdict.py keeps its answer, once the
    store exists), timestamps trusted at once."""
    from config import verdict

    cache = tmp_path / "file_snapshots" / "cache"
    cache.mkdir(parents=True)
    monkeypatch.setattr(verdict, "RACY_NS", 0)
    return cache


def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count tomllib's parses from now on."""
    import tomllib

    seen: list[str] = []
    real = tomllib.loads

    def counting(text: str, **kw: Any) -> dict[str, Any]:
        seen.append(text)
        return real(text, **kw)

    monkeypatch.setattr(tomllib, "loads", counting)
    return seen


def test_an_unchanged_config_toml_is_not_parsed_again(tmp_path: Path, verdicts: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """defaults_apply's answer is kept for the same config.toml (~4-6 ms of every one-shot command): an edit, even
    to the same size, or a codexr.toml beside it, is seen at once."""
    from config import defaults_apply

    write_config(tmp_path, 'model = "o3"\n[features]\nweb_search_request = true\n', CONFIG_FILE_NAME)
    seen = parses(monkeypatch)
    assert defaults_apply(tmp_path) and len(seen) == 1
    assert defaults_apply(tmp_path) and defaults_apply(tmp_path) and len(seen) == 1  # kept
    write_config(tmp_path, 'model = "o3"\n[features]\nfile_snapshots = false\n', CONFIG_FILE_NAME)  # same size
    assert not defaults_apply(tmp_path) and len(seen) == 2
    assert not defaults_apply(tmp_path) and len(seen) == 2
    write_config(tmp_path, 'model = "o4"\n', CONFIG_FILE_NAME)
    assert defaults_apply(tmp_path) and len(seen) == 3
    write_config(tmp_path, "", CODEXR_FILE_NAME)
    assert not defaults_apply(tmp_path)  # codexr.toml: validate, whatever was kept for config.toml
    (tmp_path / CODEXR_FILE_NAME).unlink()
    assert len(seen) == 5  # both files, with codexr.toml there
    assert defaults_apply(tmp_path) and len(seen) == 5  # the answer kept before still holds
    other = tmp_path / "other"
    (other / "file_snapshots" / "cache").mkdir(parents=True)
    write_config(other, "[file_snapshots]\nauto_gc = false\n", CONFIG_FILE_NAME)
    assert not defaults_apply(other) and not defaults_apply(other) and defaults_apply(tmp_path)  # each its own
    assert len(seen) == 6
    fresh = tmp_path / "fresh"  # no store yet: nowhere to keep an answer, so parsed each time
    fresh.mkdir()
    write_config(fresh, 'model = "o3"\n', CONFIG_FILE_NAME)
    assert defaults_apply(fresh) and defaults_apply(fresh) and len(seen) == 8
    assert not (fresh / "file_snapshots").exists()


def test_no_answer_is_kept_for_a_recent_broken_or_changing_config(tmp_path: Path, verdicts: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from config import defaults_apply, verdict

    write_config(tmp_path, "[features\n", CONFIG_FILE_NAME)
    seen = parses(monkeypatch)
    for _ in range(2):
        with pytest.raises(ConfigError, match="invalid TOML"):
            defaults_apply(tmp_path)
    assert len(seen) == 2 and not (verdicts / "config.verdict").exists()
    monkeypatch.setattr(verdict, "RACY_NS", 3_600 * 10**9)  # written within the hour: its timestamps may not move
    write_config(tmp_path, 'model = "o3"\n', CONFIG_FILE_NAME)
    assert defaults_apply(tmp_path) and defaults_apply(tmp_path) and len(seen) == 4
    assert not (verdicts / "config.verdict").exists()
    monkeypatch.setattr(verdict, "RACY_NS", 0)
    import config.files as files

    real_read = files.read_toml

    def edited_while_read(path: Path, label: str) -> dict[str, object] | None:
        doc = real_read(path, label)
        if path.name == CONFIG_FILE_NAME:
            write_config(tmp_path, "[features]\nfile_snapshots = false\n", CONFIG_FILE_NAME)
        return doc

    monkeypatch.setattr(files, "read_toml", edited_while_read)
    assert defaults_apply(tmp_path)  # what was read said so; the file now says otherwise: nothing kept
    assert not (verdicts / "config.verdict").exists()
    monkeypatch.setattr(files, "read_toml", real_read)
    assert not defaults_apply(tmp_path) and not defaults_apply(tmp_path) and len(seen) == 6  # kept now


def test_a_damaged_or_planted_answer_only_means_the_file_is_parsed(tmp_path: Path, verdicts: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from config import defaults_apply

    write_config(tmp_path, "[features]\nfile_snapshots = false\n", CONFIG_FILE_NAME)
    seen = parses(monkeypatch)
    kept = verdicts / "config.verdict"
    for junk in (b"", b"\xff\x00garbage", b'{"v": 1}', b"[1, 2]", b'{"v": 1, "home": 3, "key": [], "apply": true}'):
        kept.write_bytes(junk)
        assert not defaults_apply(tmp_path)
    assert len(seen) == 5
    text = kept.read_text()
    kept.write_text(text.replace('"apply": false', '"apply": true').replace('"key": [', '"key": [1'))
    assert not defaults_apply(tmp_path) and len(seen) == 6  # an answer for another version of the file: not used
    planted = tmp_path / "planted"
    planted.write_text(text.replace('"apply": false', '"apply": true'))  # the right version, the wrong answer
    kept.unlink()
    kept.symlink_to(planted)
    assert not defaults_apply(tmp_path) and len(seen) == 7  # never read through a symlink


def test_a_command_in_codexs_sandbox_cannot_plant_a_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """As an attacker: an agent's command, in Codex's workspace-write sandbox, in a workspace that holds the user's
    cache directory and CODEX_HOME both (the home directory as the workspace, no XDG_RUNTIME_DIR: the runtime
    directory falls back to the cache directory). A planted "defaults apply" would have codexr ignore the user's
    settings (a longer retention: gc would drop snapshots the user meant to keep). The cache directory is writable
    there; CODEX_HOME, where config/verdict.py keeps its answer, is not."""
    import os
    import subprocess
    import sys
    import tempfile
    import time

    from codex_cli_bin import bundled_codex_path  # type: ignore[import-untyped]

    from config import defaults_apply, verdict

    base = Path.home() / ".cache" / "codexr-tests"  # not below /tmp, where no runtime directory may lie
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    user = Path(tempfile.mkdtemp(prefix="home-", dir=base))
    try:
        home = user / ".codex"
        (home / "file_snapshots" / "cache").mkdir(parents=True)
        write_config(home, "[file_snapshots]\nretention_days = 365\n", CONFIG_FILE_NAME)
        for name in ("XDG_RUNTIME_DIR", "CODEXR_RUNTIME_DIR", "XDG_CACHE_HOME"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HOME", str(user))
        key = verdict.stat_key(os.stat(home / CONFIG_FILE_NAME))
        forged = json.dumps({"v": verdict.VERSION, "home": str(home), "key": key, "apply": True})
        run_dir = user / ".cache" / "codexr" / f"run-{os.uname().nodename or 'host'}"
        plant = ("import os, sys\n"
                 "text = sys.stdin.read()\n"
                 "for d in sys.argv[1:]:\n"
                 "    try:\n"
                 "        os.makedirs(d, mode=0o700, exist_ok=True)\n"
                 "        with open(os.path.join(d, 'config.verdict'), 'w') as f:\n"
                 "            f.write(text)\n"
                 "        print('planted', d)\n"
                 "    except OSError as e:\n"
                 "        print('refused', d, e.strerror)\n")
        targets = [str(run_dir), str(home / "file_snapshots" / "cache")]
        res = subprocess.run([str(bundled_codex_path()), "sandbox", "-P", ":workspace", "-C", str(user), "--",
                              sys.executable, "-c", plant, *targets], input=forged, capture_output=True, text=True,
                             timeout=60, env={**os.environ, "CODEX_HOME": str(home)}, cwd=user)
        assert res.returncode == 0, res.stderr
        lines = res.stdout.splitlines()
        assert lines[0] == f"planted {targets[0]}", res.stdout  # the sandbox runs, and writes the workspace
        assert lines[1].startswith(f"refused {targets[1]}"), res.stdout
        time.sleep(max(0.0, os.stat(home / CONFIG_FILE_NAME).st_ctime + 2.1 - time.time()))
        assert not defaults_apply(home) and not defaults_apply(home)  # the user's setting, parsed then kept
        assert json.loads((home / "file_snapshots" / "cache" / "config.verdict").read_text())["apply"] is False
    finally:
        shutil.rmtree(user, ignore_errors=True)
