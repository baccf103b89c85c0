"""What a capture reports and saves about its map, kept with a session's last capture so that the next one updates
them from the entries that changed instead of passing over the whole map again for each."""

from __future__ import annotations

from collections.abc import Iterable

from ..manifest import CAPTURED_KINDS, Entry, FileMap, SkippedEntry, UnlistedDir
from ..reasons import Reason
from ..records import record
from .walkstate import STABLE_REASONS


@record(frozen=True)
class MapFacts:
    """Per map: how many files it captures, which untracked files it held back by size, how many verdicts a saved
    walk could not re-check, which captured paths lie outside the covered set (a capture that grows adds them), and
    how many untracked files the recent-file limit held back (a count: they may be 100,000)."""

    file_count: int
    too_large: frozenset[str]
    unstable: int
    outside: frozenset[str]
    over_limit: int = 0

    @classmethod
    def of(cls, files: FileMap, covered: frozenset[str]) -> MapFacts:
        """One pass over the whole map (a walk's, or a state whose facts were not kept)."""
        count = unstable = over = 0
        too_large: list[str] = []
        outside: list[str] = []
        for p, e in files.items():
            if e.kind in CAPTURED_KINDS:
                count += 1
                if p not in covered:
                    outside.append(p)
            elif isinstance(e, SkippedEntry | UnlistedDir):
                _captured, held, unsure, beyond = _weigh(e)
                unstable += unsure
                over += beyond
                if held:
                    too_large.append(p)
        return cls(count, frozenset(too_large), unstable, frozenset(outside), over)

    def after(self, old: FileMap, new: FileMap, keys: Iterable[str], covered: frozenset[str]) -> MapFacts:
        """The facts of `new`, which differs from `old` (whose facts these are) at most at `keys`; `covered` is
        `new`'s covered set, a superset of `old`'s."""
        count, unstable, over = self.file_count, self.unstable, self.over_limit
        too_large, outside = set(self.too_large), {p for p in self.outside if p not in covered}
        for p in keys:
            before, now = old.get(p), new.get(p)
            if before == now:
                continue
            for entry, sign in ((before, -1), (now, 1)):
                if entry is None:
                    continue
                captured, held, unsure, beyond = _weigh(entry)
                count += sign * captured
                unstable += sign * unsure
                over += sign * beyond
                if held:
                    (too_large.add if sign > 0 else too_large.discard)(p)
            if now is not None and now.kind in CAPTURED_KINDS and p not in covered:
                outside.add(p)
            else:
                outside.discard(p)
        return MapFacts(count, frozenset(too_large), unstable, frozenset(outside), over)


def _weigh(e: Entry) -> tuple[int, bool, int, int]:
    """What one entry adds: (captured, held back by size, unstable, held back by the recent-file limit)."""
    if e.kind in CAPTURED_KINDS:
        return 1, False, 0, 0
    if isinstance(e, SkippedEntry | UnlistedDir):
        skipped = e.kind == "x"
        return (0, skipped and e.reason == Reason.TOO_LARGE, int(e.reason not in STABLE_REASONS),
                int(skipped and e.reason == Reason.OVER_LIMIT))
    return 0, False, 0, 0
