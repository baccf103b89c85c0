"""How control moves through codexr's code during one rewind (and one redo): issue 31's measure of how a rewind reads.

Runs `codexr demo`'s self-checking story in this process (the real Codex against the scripted model) and traces, with
`sys.setprofile`, the calling thread while `Session.rewind(thread, 2)` runs (and `Session.redo` after it). At every
call and return the *box* that holds control is the innermost frame of the project's own code (app/, config/,
snapshot_store/): an app module is a box of its own, and the whole store (`snapshot_store.*`) is one box, as is
`config`. A *move* is control passing from one box to another; a move *back* goes to a box control had already
been in and left (every return from a call into another box is one). A call *up* is the store calling a function of
app/ (a callback such as the old rewind's closure that forked the conversation from inside the restore). Also
counted: the project modules the rewind ran code of (every snapshot_store module on its own).

    .venv/bin/python bench/trace_rewind.py [--json FILE] [--sequence]

Not a benchmark of speed (nothing is timed): the numbers are the same on a busy machine. docs/architecture.md gives
the results before and after issue 31's redesign.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
OWN = ("app", "config", "snapshot_store")


def own_module(frame: FrameType | None) -> tuple[str, FrameType] | None:
    """The innermost frame of the project's own code at or above `frame`, with its module name."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.split(".", 1)[0] in OWN:
            return name, frame
        frame = frame.f_back
    return None


def box_of(module: str, by: str = "module") -> str:
    """The box a module counts in: the store and config as one box each; an app module on its own (`by` "module"),
    or its layer (`by` "layer": the folder of app/ it lies in, a module at app/'s root on its own)."""
    parts = module.split(".")
    if parts[0] in ("snapshot_store", "config"):
        return parts[0]
    return ".".join(parts[:2]) if by == "layer" else module


class Trace:
    """Boxes and modules visited, in order, on one thread."""

    def __init__(self, by: str) -> None:
        self.by = by
        self.modules: dict[str, int] = {}
        self.boxes: list[str] = []  # the box holding control after each move (the first entry included)
        self.up: dict[str, int] = {}  # app functions the store called, with how often
        self.thread = threading.get_ident()

    def event(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event not in ("call", "return") or threading.get_ident() != self.thread:
            return
        found = own_module(frame if event == "call" else frame.f_back)
        if found is None:
            return
        module, _ = found
        if event == "call" and own_module(frame) is not None:
            self.modules[module] = self.modules.get(module, 0) + 1
            caller = own_module(frame.f_back)
            if frame.f_globals.get("__name__", "").startswith("app.") and caller is not None \
                    and caller[0].startswith("snapshot_store"):
                where = f"{module}.{frame.f_code.co_qualname}"
                self.up[where] = self.up.get(where, 0) + 1
        box = box_of(module, self.by)
        if not self.boxes or self.boxes[-1] != box:
            self.boxes.append(box)

    def summary(self) -> dict[str, Any]:
        seen: set[str] = set()
        back = 0
        for box in self.boxes:
            back += box in seen
            seen.add(box)
        return {"modules": len(self.modules), "boxes": len(seen), "moves": max(0, len(self.boxes) - 1),
                "moves_back": back, "calls_up": sum(self.up.values()),
                "up_list": sorted(self.up), "module_list": sorted(self.modules), "box_list": sorted(seen)}


@contextmanager
def traced(into: list[Trace], by: str) -> Iterator[None]:
    trace = Trace(by)
    into.append(trace)
    old = sys.getprofile()
    sys.setprofile(trace.event)
    try:
        yield
    finally:
        sys.setprofile(old)


def wrap(cls: Any, name: str, into: list[Trace], when: Callable[..., bool], by: str) -> None:
    """Trace calls of `cls.name` for which `when(*args, **kwargs)` holds."""
    original = getattr(cls, name)

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not when(*args, **kwargs):
            return original(self, *args, **kwargs)
        with traced(into, by):
            return original(self, *args, **kwargs)

    setattr(cls, name, run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the result as JSON to FILE")
    parser.add_argument("--sequence", action="store_true", help="also print the boxes in the order control took")
    parser.add_argument("--boxes", choices=("module", "layer"), default="module",
                        help="an app module per box (default), or app/'s folders (layers) as boxes")
    args = parser.parse_args(argv)

    import app.session as session_mod
    from app.cmds.context import Context
    from app.cmds.demo import run

    rewinds: list[Trace] = []
    redos: list[Trace] = []
    wrap(session_mod.Session, "rewind", rewinds, lambda *a, **k: not k.get("dry_run"), args.boxes)
    wrap(session_mod.Session, "redo", redos, lambda *a, **k: True, args.boxes)
    with tempfile.TemporaryDirectory(prefix="codexr-trace-") as tmp, open(os.devnull, "w") as quiet, \
            redirect_stdout(quiet):  # the story's own lines
        ns = argparse.Namespace(dir=str(Path(tmp) / "demo"), keep=False, json=False, script=True)
        rc = run(Context(home=Path(tmp) / "unused"), ns)
    if rc != 0 or len(rewinds) != 1 or len(redos) != 1:
        print(f"trace_rewind: the demo's story did not run as expected (rc {rc})", file=sys.stderr)
        return 1
    result = {"boxes": args.boxes, "rewind": rewinds[0].summary(), "redo": redos[0].summary()}
    for what, trace in (("rewind", rewinds[0]), ("redo", redos[0])):
        s = result[what]
        print(f"{what}: {s['modules']} modules of the project's code; {s['boxes']} boxes (the store one box, "
              f"{'an app module' if args.boxes == 'module' else 'a folder of app/'} one box); "
              f"{s['moves']} moves between them, {s['moves_back']} back to a box already left; "
              f"{s['calls_up']} calls from the store up into app/"
              + (f" ({', '.join(s['up_list'])})" if s["up_list"] else ""))
        if args.sequence:
            print("  " + " > ".join(b.removeprefix("app.") for b in trace.boxes))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
