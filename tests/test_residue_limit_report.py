"""Issue 36 §5: untracked files held back by the recent-file limit (`residue_max_files`) are said when the capture
happens — `snapshots capture` said "100 files" with `"skipped": []`, and only a later restore's plan said "beyond
the recent-file limit". The store counts them (MapFacts.over_limit) and names a bounded sample in `skipped`; the
command line and the app (once a session) phrase it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from e2e_helpers import session_options
from store_helpers import git
from test_cli_agent import Cli, show
from test_cli_agent import cli as cli  # the fixture: codexr against the real Codex and the scripted model
from test_driver import Events

from app.codex.events import Notice, Ready, TurnFinished
from app.codex.scripted_model import ScriptedModel, add_file, message
from app.services.driver import Driver
from snapshot_store import Store
from snapshot_store.settings import ScopeSettings

LINE = re.compile(r"(\d+) untracked files beyond `file_snapshots\.residue_max_files` \((\d+)\) not captured: "
                  r"add them to Git or raise the limit")


def _untracked(ws: Path, n: int) -> None:
    for i in range(n):
        (ws / "gen" / f"u{i:04}.txt").parent.mkdir(exist_ok=True)
        (ws / "gen" / f"u{i:04}.txt").write_text(f"{i}\n")


def test_the_store_counts_them_and_names_a_bounded_sample(tmp_path: Path) -> None:
    """A count for any number (a walk's map and a session's journal alike), never a list of every one."""
    ws = tmp_path / "ws"
    ws.mkdir()
    git(ws, "init", "-q")
    (ws / "tracked.txt").write_text("t\n")
    git(ws, "add", "tracked.txt")
    _untracked(ws, 150)
    with Store.open(tmp_path / "store") as store:
        res = store.at(ws).capture_summary(scope=ScopeSettings(residue_max_files=100))
    assert res.file_count == 101 and res.over_limit == 50 and res.residue_max_files == 100, res
    held = [(p, why) for p, why in res.skipped if why.startswith("beyond the recent-file limit")]
    assert len(held) == 20 and all(why == "beyond the recent-file limit (100 files); not captured" for _p, why in held)
    assert all(p.startswith("gen/u") for p, _why in held), held
    assert res.as_json()["over_limit"] == {"count": 50, "limit": 100}


def test_snapshots_capture_says_how_many_the_limit_held_back(cli: Cli) -> None:
    git(cli.ws, "init", "-q")
    (cli.ws / "tracked.txt").write_text("t\n")
    git(cli.ws, "add", "tracked.txt")
    _untracked(cli.ws, 12)
    first = cli.ok("-c", "file_snapshots.residue_max_files=5", "snapshots", "capture")
    assert re.search(r"^6 files, ", first.stderr, re.M), show(first)
    said = [m.groups() for m in map(LINE.search, first.stderr.splitlines()) if m]
    assert said == [("7", "5")], show(first)
    assert re.search(r"^  e\.g\. gen/u\d{4}\.txt, gen/u\d{4}\.txt, gen/u\d{4}\.txt and 4 more$", first.stderr, re.M), \
        show(first)
    # the next capture covers what this one took (tracking grows): 5 more taken, 2 held back, and said so
    doc = json.loads(cli.ok("-c", "file_snapshots.residue_max_files=5", "snapshots", "capture", "--json").stdout)
    assert doc["file_count"] == 11 and doc["over_limit"] == {"count": 2, "limit": 5}, doc
    held = [s for s in doc["skipped"] if s["reason"] == "beyond the recent-file limit (5 files); not captured"]
    assert len(held) == 2, doc["skipped"]


def test_the_app_says_it_once_a_session(model: ScriptedModel, tmp_path: Path) -> None:
    model.script("lim-one", [add_file("a.txt", "a\n"), message("one")])
    model.script("lim-two", [add_file("b.txt", "b\n"), message("two")])
    files = {f"gen/u{i:04}.txt": f"{i}\n" for i in range(30)}
    ev = Events()
    d = Driver(session_options(model, tmp_path, files, config_extra="[file_snapshots]\nresidue_max_files = 5"), ev)
    try:
        assert d.start()
        ev.wait(Ready)
        for prompt in ("lim-one please", "lim-two please"):
            d.submit(prompt)
            assert ev.wait(TurnFinished).status == "completed"
        d.submit("lim-one again")  # a third turn: whatever follows the second's end has been emitted by then
        ev.wait(TurnFinished)
    finally:
        d.close()
    said = [e.text for e in ev.seen if isinstance(e, Notice) and LINE.search(e.text)]
    assert len(said) == 1, said
    match = LINE.search(said[0])
    assert match is not None and int(match.group(1)) > 0 and match.group(2) == "5", said


def test_exec_says_it_on_stderr(cli: Cli) -> None:
    """`codexr exec`'s captures held files back without a word (issue 36 §5 named the capture and the app)."""
    cli.model.script("lim-exec", [add_file("a.txt", "a\n"), message("done")])
    git(cli.ws, "init", "-q")
    _untracked(cli.ws, 9)
    res = cli.ok("-c", "file_snapshots.residue_max_files=5", "exec", "--json", "lim-exec please")
    said = [m.groups() for m in map(LINE.search, res.stderr.splitlines()) if m]
    assert said and all(int(count) > 0 and limit == "5" for count, limit in said) and len(said) == 1, show(res)
    assert json.loads(res.stdout)["status"] == "completed"
