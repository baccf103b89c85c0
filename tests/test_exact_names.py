"""On a volume that tells every spelling apart (ext4: Linux), names differing only in case or Unicode form are
different files, exactly as before issue 32's folding rules: the probe says so, and a restore writes and deletes
each of them as its own file."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

from store_helpers import WIDE

from snapshot_store import Store
from snapshot_store.names import EXACT, probe


def test_two_spellings_are_two_files_here(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "Readme.md").write_text("upper\n")
    (ws / "readme.md").write_text("lower\n")
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    (ws / nfc).write_text("composed\n")
    (ws / nfd).write_text("decomposed\n")
    assert probe(ws) == EXACT
    with Store.open(tmp_path / "store") as store:
        both = store.at(ws).capture(scope=WIDE)
        (ws / "readme.md").unlink()
        os.rename(ws / nfd, ws / "other")
        (ws / "Readme.md").write_text("changed\n")
        store.at(ws).capture(scope=WIDE)
        done = store.at(ws).restore(both.id, scope=WIDE)
    assert sorted(done.written) == sorted(["Readme.md", "readme.md", nfd])
    assert done.deleted == ["other"]
    assert sorted(os.listdir(ws)) == sorted(["Readme.md", "readme.md", nfc, nfd])
    assert (ws / "Readme.md").read_text() == "upper\n" and (ws / "readme.md").read_text() == "lower\n"
    assert (ws / nfd).read_text() == "decomposed\n" and (ws / nfc).read_text() == "composed\n"
