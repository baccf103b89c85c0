"""Resolving a workspace root: shared by capture, restore and the app, so it lives on its own (light to import)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .errors import WorkspaceError

Identity = tuple[int, int]
"""(st_dev, st_ino): what makes two paths the same directory, through symlinks and bind mounts."""


def resolve_root(root: str | os.PathLike[str]) -> Path:
    """The workspace's real absolute path; a missing workspace is a clear error."""
    path = Path(os.path.realpath(os.path.abspath(root)))
    if not path.exists():
        raise WorkspaceError(f"workspace {root} does not exist")
    if not path.is_dir():
        raise WorkspaceError(f"workspace {root} is not a directory")
    return path


def identity(path: str | os.PathLike[str]) -> Identity | None:
    """The directory's (device, inode), or None when it cannot be looked at (then nothing lies inside it)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def protected_identities(dirs: Iterable[str | os.PathLike[str]]) -> frozenset[Identity]:
    """The identities of the directories no capture or restore may enter (the store, Codex's home)."""
    return frozenset(i for i in map(identity, dirs) if i is not None)


def workspace_root(root: str | os.PathLike[str], protected: Iterable[str | os.PathLike[str]] = (),
                   store: str | os.PathLike[str] | None = None, containing: bool = False) -> Path:
    """resolve_root, refusing a directory that is or lies inside the store or a protected one (Codex's home),
    and with `containing` one that contains either (a user's workspace: the app refuses all three).

    A restore there would overwrite or delete the store's own files (its packs, its format file) or
    Codex's `config.toml`. Directories are compared by (device, inode) along every ancestor, so a
    symlink or a bind mount of the store is the store. Without `containing` (the library's own roots:
    the states of paths outside a workspace live under "/") a root that contains one is accepted:
    captures never enter it and restores never write or delete there (FORMAT.md §1).
    """
    path = resolve_root(root)
    named = [(Path(store), "the snapshot store")] if store is not None else []
    named += [(Path(p), "Codex's home (CODEX_HOME)") for p in protected]
    ids: dict[Identity, tuple[Path, str]] = {}
    for p, label in named:
        i = identity(p)
        if i is not None:
            ids.setdefault(i, (p, label))
    if not ids:
        return path
    for anc in (path, *path.parents):
        hit = ids.get(identity(anc) or (-1, -1))
        if hit is not None:
            where, label = hit
            how = "is" if anc == path else "lies inside"
            raise WorkspaceError(f"workspace {root} {how} {label} {where}; codexr never captures, restores or "
                                 "deletes files there: pick another directory")
    if containing:
        own = identity(path)
        for p, label in sorted(named, key=lambda n: len(str(n[0]))):  # the outermost first: Codex's home
            for anc in (Path(os.path.realpath(p)).parents):
                if identity(anc) == own:
                    raise WorkspaceError(f"workspace {path} contains {label} {p}; a workspace that holds Codex's "
                                         "own files or the snapshot store is refused: pick a directory below it, "
                                         "or set CODEX_HOME elsewhere")
    return path
