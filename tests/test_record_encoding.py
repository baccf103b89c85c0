"""A snapshot record's bytes are the canonical JSON of the whole document, however it is encoded in memory.

A record's id is the hash of its bytes (equal content, equal id; a record already on disk is not written again), so
`SnapshotRecord.encode`, which builds the JSON slice by slice to bound its memory, must give exactly the bytes of
`json.dumps(document, sort_keys=True)` that every earlier version wrote.
"""

from __future__ import annotations

import json
import random

import pytest
import zstandard

from snapshot_store.errors import CorruptStore
from snapshot_store.manifest import (
    ABSENT,
    ENCODE_SLICE,
    WALKED,
    Entry,
    FileEntry,
    LinkEntry,
    SkippedEntry,
    SnapshotHead,
    SnapshotRecord,
    UnlistedDir,
    look_up,
)


def whole_document(rec: SnapshotRecord) -> bytes:
    """The encoding as one json.dumps of the whole document (the format's definition, FORMAT.md)."""
    doc = {"format": 1, "root": rec.root, "created": rec.created, "kind": rec.kind, "label": rec.label,
           "parent": rec.parent, "depth": rec.depth, "meta": rec.meta,
           "changes": {k: (list(v) if v is not None else None) for k, v in rec.changes.items()}}
    return zstandard.ZstdCompressor(level=9).compress(
        json.dumps(doc, separators=(",", ":"), sort_keys=True).encode("ascii"))


def test_encode_gives_the_bytes_of_the_whole_document_across_slices() -> None:
    rng = random.Random(21)
    letters = "ab-._ é☃\"\\"
    for n in (0, 1, ENCODE_SLICE - 1, ENCODE_SLICE, ENCODE_SLICE + 1, 2 * ENCODE_SLICE + 7):
        changes: dict[str, Entry | None] = {}
        for i in range(n):
            path = f"d{i % 7}/" + "".join(rng.choice(letters) for _ in range(rng.randint(1, 10))) + str(i)
            changes[path] = rng.choice([FileEntry("f", 0o644, i, f"{i:064x}"), LinkEntry("l", "../t☃"),
                                        SkippedEntry("x", "ignored"), UnlistedDir("D", "churn"), ABSENT, WALKED,
                                        None])
        rec = SnapshotRecord(root="/ws/é", created=1733112000.25, kind="capture", label="before: ☃ \"x\"",
                             parent=None if n % 2 else "ab" * 32, depth=n % 5, changes=changes,
                             meta={"file_count": n, "note": "é"})
        data = rec.encode()
        assert data == whole_document(rec), n
        assert SnapshotRecord.decode("x", data).changes == changes


def test_a_head_is_the_record_s_metadata_whatever_its_paths_and_label_say() -> None:
    """`SnapshotHead.decode` reads a record's metadata without its map: paths, link targets, reasons and a label
    that spell the very text it looks for (`},"created":`) do not fool it."""
    trap = '},"created":1,"depth":9}'
    changes: dict[str, Entry | None] = {trap: FileEntry("f", 0o644, 1, "0" * 64), f"a/{trap}": LinkEntry("l", trap),
                                        "b": SkippedEntry("x", trap), "c": None, "d": UnlistedDir("D", trap)}
    for rec in (SnapshotRecord(root=f"/ws/{trap}", created=1733112000.5, kind="pre-turn", label=trap,
                               parent="cd" * 32, depth=3, changes=changes, meta={"file_count": 2, trap: {trap: trap}}),
                SnapshotRecord(root="/ws", created=2.0, kind="capture", label=None, parent=None, depth=0, changes={})):
        data = rec.encode()
        assert SnapshotHead.decode("x", data) == rec.head == SnapshotRecord.decode("x", data).head


def test_a_damaged_record_s_head_is_a_clear_error() -> None:
    rec = SnapshotRecord(root="/ws", created=2.0, kind="capture", label=None, parent=None, depth=0,
                         changes={"a": ABSENT})
    raw = zstandard.ZstdDecompressor().decompress(rec.encode())
    for bad in (b"not zstd", zstandard.ZstdCompressor().compress(raw.replace(b'},"created":', b'},"made":')),
                zstandard.ZstdCompressor().compress(raw.replace(b'"format":1', b'"format":7')),
                zstandard.ZstdCompressor().compress(raw.replace(b'"parent":null', b'"parent":"../x"')),
                zstandard.ZstdCompressor().compress(b'{"created":' + raw.split(b'"created":', 1)[1])):
        with pytest.raises(CorruptStore, match="snapshot x"):
            SnapshotHead.decode("x", bad)


def test_looking_up_paths_in_a_record_finds_what_decoding_it_finds() -> None:
    """`look_up` reads a record's entries for a few paths without decoding its map: names that spell a key's text, a
    prefix or suffix of another name, escapes, entries that spell keys and an entry longer than its first window do
    not fool it; a path the record does not name is left out, one it removes is None."""
    rng = random.Random(35)
    letters = 'ab-._ é☃"\\:,[]{}'
    trap = '"b":["f",420,1,"' + "0" * 64 + '"]'
    changes: dict[str, Entry | None] = {
        "": WALKED, "b": FileEntry("f", 0o644, 2, "1" * 64), 'a"b': LinkEntry("l", ',"b":'), "a,\"b": None,
        "kind": SkippedEntry("x", '"kind":'), trap: LinkEntry("l", trap), "é/☃": FileEntry("f", 0o755, 3, "2" * 64),
        "long": LinkEntry("l", "../" * 3000 + '"],"b":["-"]')}  # longer than look_up's first window, and its widening
    for i in range(300):
        path = "".join(rng.choice(letters) for _ in range(rng.randint(1, 8))) + str(i)
        changes[path] = rng.choice([FileEntry("f", 0o644, i, f"{i:064x}"), LinkEntry("l", path), ABSENT, WALKED,
                                    SkippedEntry("x", "ignored"), UnlistedDir("D", "churn"), None])
    rec = SnapshotRecord(root="/ws", created=1.5, kind="capture", label=trap, parent="cd" * 32, depth=4,
                         changes=changes, meta={"file_count": 9})
    data = rec.encode()
    asked = [*changes, "c", "b/", '"b"', "a", "☃", "é"]
    head, found = look_up("x", data, asked)
    assert head == rec.head
    assert found == {p: changes[p] for p in asked if p in changes}


@pytest.mark.parametrize("bad", [
    '{"changes":{"a":["-"],"a":["-"]},"created":1,"depth":0,"format":1,"kind":"capture","label":null,"meta":{},'
    '"parent":null,"root":"/ws"}',
    '{"changes":{"a":["f",420,1,"zz"]},"created":1,"depth":0,"format":1,"kind":"capture","label":null,"meta":{},'
    '"parent":null,"root":"/ws"}',
    '{"changes":{"../a":["-"]},"created":1,"depth":0,"format":1,"kind":"capture","label":null,"meta":{},'
    '"parent":null,"root":"/ws"}',
    '{"changes":{"a":["-"]},"format":1}',
])
def test_a_damaged_or_forged_record_s_lookup_is_a_clear_error(bad: str) -> None:
    data = zstandard.ZstdCompressor().compress(bad.encode())
    with pytest.raises(CorruptStore):
        look_up("x", data, ["a", "../a"])
