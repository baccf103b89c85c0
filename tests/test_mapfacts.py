"""MapFacts.after, updated from the changed entries only, must say what a pass over the whole map says."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from snapshot_store.detect.mapfacts import MapFacts
from snapshot_store.manifest import ABSENT, WALKED, Entry, FileEntry, LinkEntry, SkippedEntry, UnlistedDir
from snapshot_store.reasons import Reason

PATHS = [f"p{i}" for i in range(12)]
ENTRIES: list[Entry] = [
    FileEntry("f", 0o644, 1, "0" * 64), FileEntry("f", 0o755, 2, "1" * 64), LinkEntry("l", "t"), ABSENT, WALKED,
    SkippedEntry("x", Reason.TOO_LARGE), SkippedEntry("x", Reason.OVER_LIMIT), SkippedEntry("x", Reason.IGNORED),
    SkippedEntry("x", "unreadable: Permission denied"), UnlistedDir("D", Reason.CHURN),
    UnlistedDir("D", "unreadable: Permission denied"),
]
maps = st.dictionaries(st.sampled_from(PATHS), st.sampled_from(ENTRIES))
covers = st.frozensets(st.sampled_from(PATHS))


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(old=maps, new=maps, covered=covers, more=covers)
def test_facts_updated_from_the_changed_entries_equal_the_facts_of_the_whole_map(
        old: dict[str, Entry], new: dict[str, Entry], covered: frozenset[str], more: frozenset[str]) -> None:
    changed = {p for p in old.keys() | new.keys() if old.get(p) != new.get(p)}
    covered_now = covered | more  # a capture's covered set only grows from the state it starts from
    assert MapFacts.of(old, covered).after(old, new, changed, covered_now) == MapFacts.of(new, covered_now)


def test_the_facts_name_what_a_capture_reports() -> None:
    files: dict[str, Entry] = {"a": FileEntry("f", 0o644, 1, "0" * 64), "b": LinkEntry("l", "a"),
                               "big": SkippedEntry("x", Reason.TOO_LARGE), "n": UnlistedDir("D", Reason.CHURN),
                               "r": SkippedEntry("x", Reason.OVER_LIMIT), "gone": ABSENT}
    facts = MapFacts.of(files, frozenset({"a"}))
    assert facts == MapFacts(file_count=2, too_large=frozenset({"big"}), unstable=1, outside=frozenset({"b"}),
                             over_limit=1)  # "r": counted, never listed (there may be 100,000)
