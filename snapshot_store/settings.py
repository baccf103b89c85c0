"""Plain value objects that tune capture scope and retention; the app builds them from config."""

from __future__ import annotations

from .records import record

#: Directory names a residue walk never descends into (build output, dependencies, caches).
DEFAULT_CHURN_DIRS: tuple[str, ...] = (
    "node_modules",
    "target",
    "build",
    "dist",
    "out",
    ".venv",
    "venv",
    "env",
    "__pycache__",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".tox",
    ".nox",
    "vendor",
    ".gradle",
    ".next",
    ".nuxt",
    ".cache",
    ".parcel-cache",
    ".turbo",
    "coverage",
    ".terraform",
    "bower_components",
    "Pods",
    "DerivedData",
)

MIB = 1024 * 1024
GIB = 1024 * MIB


@record(frozen=True)
class ScopeSettings:
    """What a capture looks at beyond Git-tracked and caller-known paths."""

    churn_dirs: tuple[str, ...] = DEFAULT_CHURN_DIRS
    """Directory names never descended into by the recent-residue walk."""
    residue_max_files: int = 100
    """At most this many recently modified, otherwise uncovered files are captured."""
    residue_max_file_bytes: int = 16 * MIB
    """Residue files larger than this are seen and reported, not captured."""
    include_hidden: bool = False
    """Capture dot-files found by the walk (Git-tracked and known dot-files are always captured)."""


@record(frozen=True)
class RetentionPolicy:
    """Which unreferenced-by-threads workspace snapshots garbage collection may drop."""

    max_age_days: float = 30.0
    """Workspace snapshots older than this are dropped (0 disables the age rule)."""
    max_snapshots_per_workspace: int = 1000
    """Only the newest this many snapshots of each workspace are kept (0 disables the count rule)."""
    max_store_bytes: int = 10 * GIB
    """Oldest workspace snapshots are dropped until the store is below this size (0 disables)."""
    grace_seconds: float = 3600.0
    """Unreachable objects younger than this are kept, protecting captures still in progress."""
    keep_latest: int = 1
    """Each workspace always keeps at least this many newest snapshots, whatever the other rules say."""
    thread_idle_days: float = 30.0
    """A thread sidecar not written for this many days pins nothing any more (0: sidecars always pin)."""
