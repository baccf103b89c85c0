"""What changed between two captures, as each source reports it: a journal (journal.py), a stat check of the saved
walk (walkstate.py) or the change monitor's answer (monitor.py)."""

from __future__ import annotations

from ..records import field, record


@record
class Changes:
    """What happened since the last drain."""

    files: set[str] = field(default_factory=set)
    structural: bool = False
    paths: set[str] = field(default_factory=set)  # every path named by any event, structural or not
    lost: bool = False  # events may be missing (overflow, a dropped watch): only a walk can tell
