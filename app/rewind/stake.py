"""Which files of a restore plan may be another live codexr session's work, and the warning that names them.

Why apart: the rewinder (app/rewind/rewinder.py: the app, line mode and `codexr rewind` show the lines and ask) and the
proxy's revert (app/rewind/revert.py: its client cannot be asked, so it refuses when a file is at stake) decide with
the same rule, and this module imports neither the SDK nor the proxy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from snapshot_store import RestorePlan, Store
from snapshot_store.restore import DELETE, WRITE

from ..recording.sidecar import ThreadSidecar


@dataclass(frozen=True)
class AtStake:
    """The files a plan deletes or overwrites that are not as the thread last captured them."""

    created: tuple[str, ...] = ()  # absent from that capture: created since
    changed: tuple[str, ...] = ()  # held by it with other content or metadata: changed since
    unknown: bool = False  # the thread has no capture to compare with: every file the plan deletes or overwrites

    @property
    def files(self) -> tuple[str, ...]:
        """Every file at stake, the created ones first."""
        return self.created + self.changed


def at_stake(store: Store, side: ThreadSidecar | None, plan: RestorePlan) -> AtStake:
    """The files `plan` deletes or overwrites that are not as `side`'s thread last captured them: created or
    changed since, so perhaps another session's work (DESIGN: a restore that would overwrite another live
    session's work asks first). A file as the thread last saw it is its own work and not at stake."""
    last = side.files_snapshot() if side is not None else None
    seen = store.files(last) if last is not None and store.exists(last) else None
    created: list[str] = []
    changed: list[str] = []
    for a in plan.actions:
        if a.op not in (WRITE, DELETE) or a.current is None or a.current.kind == "-":
            continue  # nothing there now: nothing of anyone's to lose
        then = seen.get(a.path) if seen is not None else None
        if seen is not None and then == a.current:
            continue  # as this session last saw it: its own work
        (created if then is None or then.kind == "-" else changed).append(a.path)
    return AtStake(tuple(created), tuple(changed), seen is None and bool(created or changed))


def others_warning(others: Sequence[str], store: Store, side: ThreadSidecar | None,
                   plan: RestorePlan | None) -> list[str]:
    """Warning lines for a restore plan while `others` (other live codexr sessions) work here; none when alone.

    The first line names the sessions; each further line names files at stake (none: the plan touches nothing
    but the thread's own files as it last captured them).
    """
    if not others or plan is None:
        return []
    lines = [f"! another codexr session is live in this workspace ({'; '.join(others)}): this restore may "
             "delete or overwrite its work (the safety snapshot keeps it)"]
    return lines + [f"! {line}" for line in stake_lines(at_stake(store, side, plan))]


def stake_lines(stake: AtStake) -> list[str]:
    """What is at stake, a line per kind (none: nothing): the warning's lines and the proxy's refusal."""
    if stake.unknown:
        return ["files it deletes or overwrites (this thread has no capture to tell whose they are): "
                + ", ".join(stake.files)]
    lines = []
    if stake.created:
        lines.append("created since this session last looked (another session's?), deleted or overwritten by this "
                     "restore: " + ", ".join(stake.created))
    if stake.changed:
        lines.append("changed since this session last looked (another session's?), overwritten by this restore: "
                     + ", ".join(stake.changed))
    return lines
