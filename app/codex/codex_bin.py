"""Which Codex executable codexr runs: `--codex-bin`, else `$CODEXR_CODEX_BIN`, else the config key, else the pinned.

Imports nothing heavy (no SDK): `codexr --version` and the error for a bad path must stay quick.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from snapshot_store.records import record

from ..cmds.context import UsageError

if TYPE_CHECKING:
    from config import CodexrSettings

#: The environment variable naming the Codex executable (below `--codex-bin`, above the config key).
ENV_VAR = "CODEXR_CODEX_BIN"
#: The config key naming the Codex executable.
CONFIG_KEY = "file_snapshots.codex_bin"
#: codexr's own stand-in for Codex (app/shim.py): never the binary codexr runs, which would start codexr again.
SHIM_NAME = "codexr-codex"


@record(frozen=True)
class CodexBinary:
    """The chosen executable and where that choice came from, so errors and `doctor` can name it."""

    path: Path
    """Absolute path of the executable (the pinned one when no choice was made)."""
    source: str
    """"--codex-bin", "CODEXR_CODEX_BIN", the config key, or "pinned"."""
    written: str = ""
    """The value as the user wrote it (empty for the pinned binary)."""

    @property
    def pinned(self) -> bool:
        """No choice was made: the SDK starts its own pinned binary (and puts its helpers on PATH)."""
        return self.source == "pinned"

    def sdk_value(self) -> str | None:
        """What `SessionOptions.codex_bin` gets: None lets the SDK use the pinned binary its own way."""
        return None if self.pinned else str(self.path)

    def path_dirs(self) -> tuple[Path, ...]:
        """Directories put first on Codex's PATH: the pinned package's helpers, as the SDK does for it (none for a
        chosen binary)."""
        if not self.pinned:
            return ()
        try:
            from codex_cli_bin import bundled_path_dir  # type: ignore[import-untyped]

            found = bundled_path_dir()
        except (ImportError, AttributeError):
            return ()
        return (Path(found),) if found is not None else ()

    def describe(self) -> str:
        """One phrase naming the binary and its source, for output lines."""
        return f"{self.path} (pinned)" if self.pinned else f"{self.path} (from {self.source})"

    def setting(self) -> str:
        """The setting that chose it, as the user wrote it (for an error line)."""
        return f"the pinned Codex binary {self.path}" if self.pinned else where(self.source, self.written)


def where(source: str, value: str) -> str:
    """A setting as the user wrote it: `CODEXR_CODEX_BIN=…`, `file_snapshots.codex_bin = "…"`, `--codex-bin …`."""
    return {ENV_VAR: f"{ENV_VAR}={value}", CONFIG_KEY: f"{CONFIG_KEY} = {json.dumps(value)}"}.get(
        source, f"{source} {value}")


def pinned_path() -> Path:
    """The binary of the `openai-codex-cli-bin` package the SDK pins (raises UsageError when it is missing)."""
    try:
        from codex_cli_bin import bundled_codex_path

        return Path(bundled_codex_path())
    except (ImportError, FileNotFoundError) as exc:
        raise UsageError(f"cannot find the pinned Codex binary (openai-codex-cli-bin): {exc}; "
                         f"reinstall codexr or pass --codex-bin") from None


def choose(flag: str | None, settings: CodexrSettings | None, environ: Mapping[str, str] | None = None) -> CodexBinary:
    """Resolve the precedence flag > env > config > pinned; a bad choice is one UsageError line.

    `settings` None: no source sets a codexr key (`Context.loaded`), so the config has no binary either
    and the app's first frame need not wait for pydantic.
    """
    env = os.environ if environ is None else environ
    config_value = settings.file_snapshots.codex_bin if settings is not None else None
    candidates = (
        ("--codex-bin", flag, Path.cwd()),
        (ENV_VAR, env.get(ENV_VAR), Path.cwd()),
        (CONFIG_KEY, config_value, settings.codex_home if settings is not None else Path.cwd()),
    )
    for source, value, base in candidates:
        if value:
            path = _locate(value, source, base, env)
            if is_shim(path):
                raise UsageError(f"{where(source, value)}: that is {SHIM_NAME}, codexr's own stand-in for Codex (it "
                                 f"would start codexr again and again): give the real Codex binary")
            return CodexBinary(path, source, value)
    return CodexBinary(pinned_path(), "pinned")


def is_shim(path: Path) -> bool:
    """Whether `path` is codexr's `codexr-codex` as installed (beside this Python, in its scripts directories) or
    running; a copy elsewhere is caught when it runs (app/shim.py's loop mark)."""
    places = {Path(sys.executable).parent, *(Path(sysconfig.get_path("scripts", scheme))
                                             for scheme in {sysconfig.get_default_scheme(), f"{os.name}_user"})}
    shims = [place / SHIM_NAME for place in places]
    if Path(sys.argv[0]).name == SHIM_NAME:
        shims.append(Path(sys.argv[0]))
    real = os.path.realpath(path)
    return any(os.path.realpath(shim) == real for shim in shims)


def _locate(value: str, source: str, base: Path, env: Mapping[str, str]) -> Path:
    """Turn what the user wrote into an absolute executable path, or say in one line why it is not one."""
    setting = where(source, value)
    if os.sep not in value and not value.startswith("~"):
        found = shutil.which(value, path=env.get("PATH", os.defpath))
        if found is None:
            raise UsageError(f"{setting}: no such executable on PATH (for a file in this directory write ./{value})")
        return Path(found).absolute()
    path = base / Path(value).expanduser()
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UsageError(f"{setting}: no such file (give the path to a Codex binary)") from None
    except OSError as exc:
        raise UsageError(f"{setting}: cannot use it: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{setting}: not a regular file (give the path to the Codex binary itself)")
    if not os.access(path, os.X_OK):
        raise UsageError(f"{setting}: not executable (chmod +x it, or give another Codex binary)")
    return path.absolute()


def binary_version(path: Path, env: Mapping[str, str] | None = None) -> str:
    """The version `codex --version` prints ("codex-cli 0.163.0" -> "0.163.0"); raises OSError when it fails."""
    try:
        done = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=20,
                              env=dict(env) if env is not None else None, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise OSError(f"{path} --version did not answer in 20 s") from None
    words = done.stdout.split()
    if done.returncode != 0 or not words:
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise OSError(f"{path} --version failed: {tail[:200]}")
    return words[-1]
