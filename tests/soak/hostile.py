"""Hostile store, ref, sidecar and journal files: each command answers one clear line with the right exit code,
changes nothing in the workspace, and writes nothing outside it."""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import blake3
import zstandard

from . import trees
from .kills import GC_ARGS
from .runner import Codexr, Run

ZERO = "0" * 64


@dataclass
class Case:
    """One damage, and the exit codes each command may answer with."""

    name: str
    damage: Callable[[Path, dict[str, Any]], str]  # (store dir, facts) -> snapshot id the commands name
    expect: dict[str, set[int]]  # command name -> allowed exit codes


def wskey(root: Path) -> str:
    return blake3.blake3(str(root).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def forge_snapshot(store: Path, raw: bytes, facts: dict[str, Any], *, compress: bool = True,
                   truncate: bool = False) -> str:
    """Write `raw` (JSON bytes) as a snapshot whose name matches its bytes, and append a ref line naming it."""
    data = zstandard.ZstdCompressor().compress(raw) if compress else raw
    if truncate:
        data = data[: len(data) // 2]
    sid = blake3.blake3(data).hexdigest()
    (store / "snapshots" / sid[:2]).mkdir(parents=True, exist_ok=True)
    (store / "snapshots" / sid[:2] / sid).write_bytes(data)
    append_ref(store, facts, {"id": sid, "root": facts["root"], "created": facts["created"] + 1, "kind": "capture",
                              "label": "forged", "file_count": 1})
    return sid


def append_ref(store: Path, facts: dict[str, Any], line: dict[str, Any] | str) -> None:
    text = line if isinstance(line, str) else json.dumps(line, separators=(",", ":"))
    with (store / "refs" / "workspaces" / f"{facts['wskey']}.jsonl").open("a") as fh:
        fh.write(text + "\n")


def snapshot_doc(facts: dict[str, Any], changes: dict[str, Any], **over: Any) -> bytes:
    doc = {"format": 1, "root": facts["root"], "created": facts["created"] + 1, "kind": "capture", "label": None,
           "parent": None, "depth": 0, "changes": changes, "meta": {"file_count": len(changes)}}
    doc.update(over)
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _file(facts: dict[str, Any], **over: Any) -> list[Any]:
    e = ["f", facts["mode"], facts["size"], facts["blob"]]
    if "size" in over:
        e[2] = over["size"]
    if "mode" in over:
        e[1] = over["mode"]
    return e


def snap_case(name: str, changes: Callable[[dict[str, Any]], dict[str, Any]], **kw: Any) -> Case:
    def damage(store: Path, facts: dict[str, Any]) -> str:
        return forge_snapshot(store, snapshot_doc(facts, changes(facts)), facts, **kw)
    return Case(name, damage, SNAP_EXPECT)


SNAP_EXPECT = {"restore": {2}, "show": {2}, "verify": {1}, "gc": {2}, "capture": {0, 2}, "list": {0, 2}}
REF_EXPECT = {"restore": {2}, "show": {2}, "verify": {1}, "gc": {2}, "capture": {0, 2}, "list": {0, 2}}
JOURNAL_EXPECT = {"capture": {2}, "restore": {2}, "list": {0, 2}, "verify": {0, 1}}
SIDECAR_EXPECT = {"verify": {1}, "gc": {2}, "capture": {0, 2}, "list": {0, 2}}
REFUSE_ALL = {"restore": {2}, "show": {2}, "verify": {1, 2}, "gc": {2}, "capture": {2}, "list": {2}}


def _raw_snapshot(raw: Callable[[dict[str, Any]], bytes], **kw: Any) -> Callable[[Path, dict[str, Any]], str]:
    return lambda store, facts: forge_snapshot(store, raw(facts), facts, **kw)


def _dup_keys(facts: dict[str, Any]) -> bytes:
    f = json.dumps(_file(facts))
    other = json.dumps(["l", "../../escaped_dup"])
    return (f'{{"changes":{{"dup.txt":{f},"dup.txt":{other}}},"created":{facts["created"] + 1},'
            f'"depth":0,"format":1,"kind":"capture","label":null,"meta":{{"file_count":1}},"parent":null,'
            f'"root":{json.dumps(facts["root"])}}}').encode()


def _ref(line: Callable[[dict[str, Any]], dict[str, Any] | str], returns: Callable[[dict[str, Any]], str]
         ) -> Callable[[Path, dict[str, Any]], str]:
    def damage(store: Path, facts: dict[str, Any]) -> str:
        append_ref(store, facts, line(facts))
        return returns(facts)
    return damage


def _ref_middle(store: Path, facts: dict[str, Any]) -> str:
    p = store / "refs" / "workspaces" / f"{facts['wskey']}.jsonl"
    lines = p.read_text().splitlines(keepends=True)
    lines.insert(1, '{"id":"' + facts["s2"][:20] + "\n")
    p.write_text("".join(lines))
    return facts["s2"]


def _journal(actions: Callable[[dict[str, Any]], Any], raw: bool = False, returns: str = "s1"
             ) -> Callable[[Path, dict[str, Any]], str]:
    def damage(store: Path, facts: dict[str, Any]) -> str:
        (store / "journal").mkdir(exist_ok=True)
        body = actions(facts)
        doc = body if raw else json.dumps({"root": facts["root"], "target": facts["s1"], "safety": facts["s2"],
                                           "started": facts["created"], "actions": body})
        (store / "journal" / f"{facts['wskey']}.json").write_text(doc)
        return str(facts[returns])  # the snapshot the case's restore and show name
    return damage


def _sidecar(doc: Callable[[dict[str, Any]], str]) -> Callable[[Path, dict[str, Any]], str]:
    def damage(store: Path, facts: dict[str, Any]) -> str:
        (store / "refs" / "threads").mkdir(parents=True, exist_ok=True)
        (store / "refs" / "threads" / "0199aaaa-hostile-thread.json").write_text(doc(facts))
        return facts["s1"]
    return damage


def _sidecar_doc(facts: dict[str, Any], **over: Any) -> str:
    doc = {"version": 1, "thread_id": "0199aaaa-hostile-thread", "cwd": facts["root"], "tracking": True,
           "created": facts["created"], "forked_from": None,
           "turns": [{"turn_id": "t1", "prompt": "p", "pre": facts["s1"], "post": facts["s2"],
                      "status": "completed", "started": facts["created"]}],
           "agent_touched": ["a.txt"], "redo": [], "history": []}
    doc.update(over)
    return json.dumps(doc)


def cases(base: Path) -> list[Case]:
    esc = str(base / "escaped_abs.txt")
    return [
        snap_case("snapshot ../ path", lambda f: {"../escaped.txt": _file(f)}),
        snap_case("snapshot a/../../ path", lambda f: {"a/../../escaped2.txt": _file(f)}),
        snap_case("snapshot absolute path", lambda f: {esc: _file(f)}),
        snap_case("snapshot NUL in path", lambda f: {"nul\u0000name.txt": _file(f)}),
        snap_case("snapshot .git path", lambda f: {".git/hooks/post-checkout": _file(f, mode=0o755)}),
        snap_case("snapshot absurd size", lambda f: {"huge.txt": _file(f, size=10**18)}),
        snap_case("snapshot absurd mode", lambda f: {"mode.txt": _file(f, mode=0o177777777)}),
        # Not hostile in itself: a snapshot where `escape` was a directory. Restoring it replaces the symlink by a
        # directory (as `git checkout` would); what must never happen is a write through it (the sentinel check).
        Case("snapshot symlink escaping via parent link",
             lambda store, f: forge_snapshot(store, snapshot_doc(f, {"escape/planted.txt": _file(f)}), f),
             {"restore": {0, 2}, "show": {0, 2}, "verify": {0, 1}, "gc": {0, 2}, "capture": {0, 2}, "list": {0, 2}}),
        Case("snapshot unknown blob", lambda store, f: forge_snapshot(
            store, snapshot_doc(f, {"ghost.txt": ["f", 420, 5, ZERO]}), f), SNAP_EXPECT | {"show": {0, 2}}),
        Case("snapshot duplicate keys", _raw_snapshot(_dup_keys), SNAP_EXPECT),
        Case("snapshot unknown format version",
             _raw_snapshot(lambda f: snapshot_doc(f, {"v.txt": _file(f)}, format=99)), SNAP_EXPECT),
        Case("snapshot truncated JSON",
             _raw_snapshot(lambda f: snapshot_doc(f, {"t.txt": _file(f)})[:-40]), SNAP_EXPECT),
        Case("snapshot truncated zstd", _raw_snapshot(lambda f: snapshot_doc(f, {"t.txt": _file(f)}), truncate=True),
             SNAP_EXPECT),
        Case("snapshot parent cycle", _raw_snapshot(lambda f: snapshot_doc(f, {"c.txt": _file(f)}, parent=ZERO,
                                                                             depth=1)), SNAP_EXPECT),
        Case("ref id ../", _ref(lambda f: {"id": "../../../../escaped", "root": f["root"], "created": 1.0,
                                            "kind": "capture", "label": None, "file_count": 1},
                                lambda f: "../../../../escaped"), REF_EXPECT),
        Case("ref id NUL", _ref(lambda f: {"id": "ab\u0000cd" + "0" * 58, "root": f["root"], "created": 1.0,
                                           "kind": "capture", "label": None, "file_count": 1},
                                lambda f: "ab"), REF_EXPECT),
        Case("ref id of a missing snapshot", _ref(lambda f: {"id": ZERO, "root": f["root"], "created": 1.0,
                                                              "kind": "capture", "label": None, "file_count": 1},
                                                  lambda f: ZERO), REF_EXPECT),
        Case("ref absurd numbers", _ref(lambda f: {"id": f["s2"], "root": f["root"], "created": 1e300,
                                                    "kind": "capture", "label": "x" * 100000, "file_count": 10**30},
                                        lambda f: f["s2"]),
             {"restore": {0, 2}, "show": {0, 2}, "verify": {0, 1}, "gc": {0, 2}, "capture": {0, 2}, "list": {0, 2}}),
        Case("ref torn middle line", _ref_middle, REF_EXPECT | {"restore": {0, 2}, "show": {0, 2}}),
        Case("store format version 99",
             lambda store, f: (store / "format").write_text('{"format": "codex-rewind-snapshots", "version": 99}')
             and f["s1"], REFUSE_ALL),
        Case("journal write ../", _journal(lambda f: [["write", "../escaped_j.txt", _file(f), None]]), JOURNAL_EXPECT),
        Case("journal write absolute", _journal(lambda f: [["write", esc, _file(f), None]]), JOURNAL_EXPECT),
        Case("journal delete through symlink", _journal(lambda f: [["delete", "escape/sentinel.txt", None, None]]),
             JOURNAL_EXPECT),
        Case("journal NUL path", _journal(lambda f: [["write", "a\u0000b", _file(f), None]]), JOURNAL_EXPECT),
        Case("journal absurd size", _journal(lambda f: [["write", "big.txt", _file(f, size=10**18), None]]),
             JOURNAL_EXPECT),
        Case("journal truncated JSON", _journal(lambda f: '{"root": "' + f["root"] + '", "actions": [["wr', raw=True),
             JOURNAL_EXPECT),
        # Its safety snapshot gone, a journal can be neither finished nor undone: every command refuses, in one line
        # naming the restore of its target, which alone goes past it (after its own safety capture).
        Case("journal missing safety snapshot, its target restored",
             _journal(lambda f: json.dumps({"root": f["root"], "target": f["s1"], "safety": ZERO, "started": 1,
                                            "actions": [["delete", "f0.txt", None, None]]}), raw=True),
             JOURNAL_EXPECT | {"restore": {0}}),
        Case("journal missing safety snapshot, another restored",
             _journal(lambda f: json.dumps({"root": f["root"], "target": f["s1"], "safety": ZERO, "started": 1,
                                            "actions": [["delete", "f0.txt", None, None]]}), raw=True,
                      returns="s2"),
             JOURNAL_EXPECT),
        Case("sidecar truncated JSON", _sidecar(lambda f: _sidecar_doc(f)[:50]), SIDECAR_EXPECT),
        Case("sidecar unknown version", _sidecar(lambda f: _sidecar_doc(f, version=99)), SIDECAR_EXPECT),
        Case("sidecar ../ and absolute touched paths",
             _sidecar(lambda f: _sidecar_doc(f, agent_touched=["../escaped_s.txt", esc, "a\u0000b"])),
             SIDECAR_EXPECT | {"verify": {0, 1}, "gc": {0, 2}}),
        Case("sidecar pins a missing snapshot",
             _sidecar(lambda f: _sidecar_doc(f, redo=[{"origin_thread": "x", "mode": "both", "safety_id": ZERO,
                                                       "target_snapshot": ZERO, "to_prompt": 1, "prompt": "p",
                                                       "origin_turns": 1, "at": 1}])),
             SIDECAR_EXPECT | {"gc": {0, 2}}),
        Case("sidecar absurd size",
             _sidecar(lambda f: _sidecar_doc(f, turns=[{"turn_id": "t", "pre": f["s1"]}] * 200000)),
             SIDECAR_EXPECT | {"verify": {0, 1}, "gc": {0, 2}}),
    ]


def _args(cmd: str, sid: str) -> tuple[str, ...]:
    return {"restore": ("snapshots", "restore", sid, "--yes"), "show": ("snapshots", "show", sid),
            "verify": ("snapshots", "verify", "--full"), "gc": (*GC_ARGS, "snapshots", "gc"),
            "capture": ("snapshots", "capture"), "list": ("snapshots", "list")}[cmd]


def judge(r: Run, allowed: set[int]) -> str:
    """Empty if the answer is acceptable, else why not."""
    if "Traceback" in r.stderr or r.rc == -999:
        return "crashed or hung"
    if r.rc not in allowed:
        return f"exit {r.rc}, expected {sorted(allowed)}"
    if r.rc == 2:
        lines = r.stderr.strip().splitlines()
        if len(lines) != 1 or not lines[0].startswith("codexr: error:"):
            return "exit 2 without exactly one `codexr: error:` line"
    return ""


def run_hostile(base: Path, seed: int, log: Callable[[str], None], only: str | None = None
                ) -> list[dict[str, Any]]:
    """Every case x every command on a fresh copy of a small store; one result entry per case."""
    rng = random.Random(f"{seed}-hostile")
    lay = trees.Layout(base / "trial")
    tpl = base / "template"
    base.mkdir(parents=True)
    lay.base.mkdir()
    lay.home.mkdir()
    trees.build_initial(lay.ws, lay.outside, rng, 150)
    cx = Codexr(lay.home, lay.ws)
    s1 = cx.run("snapshots", "capture").stdout.split()[0]
    trees.shell_changes(lay.ws, rng, "a")
    s2 = cx.run("snapshots", "capture").stdout.split()[0]
    shown = cx.run("snapshots", "show", s1, "--json").json()
    f0 = next(e for e in shown["entries"] if e["kind"] == "f" and e["size"] > 0)
    created = dt.datetime.fromisoformat(shown["created"]).timestamp()  # --json times are ISO 8601 (app/shared/times.py)
    facts = {"root": str(lay.ws), "wskey": wskey(lay.ws), "created": created, "s1": s1, "s2": s2,
             "blob": f0["blob"], "size": f0["size"], "mode": f0["mode"]}
    tpl.mkdir()
    for part in ("ws", "home", "outside"):
        trees.copy_tree(lay.base / part, tpl / part)
    top_before = sorted(p.name for p in base.iterdir())
    out: list[dict[str, Any]] = []
    for case in cases(lay.base):
        if only and only not in case.name:
            continue
        failures: dict[str, str] = {}
        lost = 0
        outside_bad = False
        for cmd, allowed in case.expect.items():
            for part in ("ws", "home", "outside"):
                trees.copy_tree(tpl / part, lay.base / part)
            before = trees.listing(lay.ws)
            outside = trees.tree_hash(lay.outside)
            sid = case.damage(lay.home / "file_snapshots", facts)
            r = cx.run(*_args(cmd, sid), timeout=60)
            why = judge(r, allowed)
            if why:
                failures[f"{cmd}: {why}"] = r.show()
            after = trees.listing(lay.ws)
            changed = [k for k in set(before) | set(after) if before.get(k) != after.get(k)]
            if changed and not (cmd in ("restore",) and r.rc == 0 and 0 in allowed):
                lost += len(changed)
                failures[f"{cmd}: changed the workspace"] = trees.diff(after, before)
            extra = sorted(set(p.name for p in lay.base.iterdir()) - {"ws", "home", "outside"})
            if trees.tree_hash(lay.outside) != outside or extra or sorted(p.name for p in base.iterdir()) != top_before:
                outside_bad = True
                failures[f"{cmd}: wrote outside the workspace"] = f"new entries beside the workspace: {extra}"
                for name in extra:
                    p = lay.base / name
                    (p.unlink() if not p.is_dir() or p.is_symlink() else trees.copy_tree(tpl / "outside", p))
        log(f"[soak] hostile: {case.name:<44} {'ok' if not failures else 'FAIL ' + '; '.join(failures)}")
        out.append({"op": "hostile", "case": case.name, "killed": False, "faults": 1, "files_lost": lost,
                    "wrote_outside": outside_bad, "failures": failures})
    return out
