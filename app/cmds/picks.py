"""`--only` / `--except`: the file-by-file choice a rewind, a redo and `snapshots restore` share (issue 34)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .context import UsageError

if TYPE_CHECKING:  # the rule's modules load the store's restore code: only a command that restores pays for them
    from ..rewind.picks import Picks


def add_choice_flags(p: argparse.ArgumentParser) -> None:
    """The two flags, worded once for the three commands."""
    p.add_argument("--only", nargs="+", default=[], metavar="PATH",
                   help="change only these files or directories (workspace paths); the rest are left alone")
    p.add_argument("--except", dest="exclude", nargs="+", default=[], metavar="PATH",
                   help="leave these files or directories alone")


def picks_from(args: argparse.Namespace, root: str | Path) -> Picks:
    """The flags as workspace keys: an absolute path must be inside the workspace (else one line, rc 2)."""
    from ..rewind.picks import Picks, clean_paths

    def keys(paths: list[str]) -> tuple[str, ...]:
        out = []
        for p in paths:
            if os.path.isabs(p):
                rel = os.path.relpath(os.path.normpath(p), os.path.realpath(root))
                if rel == ".." or rel.startswith("../"):
                    raise UsageError(f"{p}: not inside the workspace {root}")
                p = rel
            if p == ".." or p.startswith("../"):
                raise UsageError(f"{p}: not inside the workspace {root}")
            out.append(p)
        return clean_paths(out)
    return Picks(keys(getattr(args, "only", []) or []), keys(getattr(args, "exclude", []) or []))
