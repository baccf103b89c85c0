"""Restoring a snapshot: a pure plan (plan.py), its journaled apply (apply.py), and recovery (journal.py)."""

from __future__ import annotations

from .apply import Restorer, RestoreResult
from .journal import Recovery
from .plan import DELETE, LEAVE, RMDIR, WRITE, Action, RestorePlan, plan_restore

__all__ = [
           "DELETE",
           "LEAVE",
           "RMDIR",
           "WRITE",
           "Action",
           "Recovery",
           "RestorePlan",
           "RestoreResult",
           "Restorer",
           "plan_restore",
]
