"""The user's file-by-file choices over a rewind's, a redo's or a restore's plan (issue 34): `--only` / `--except`,
a conflict's answer (keep mine / take the restored state / keep both), a preview's toggle — and the words the front
ends share to show and ask them. The rule they are laid over is owners.py's."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from snapshot_store.manifest import is_captured
from snapshot_store.restore import DELETE, LEAVE, WRITE, Action
from snapshot_store.vocab import RestoreOp

from .owners import Decision

NOT_CHOSEN = "left alone: not among the files chosen ({how})"
YOURS_CHOSEN = "kept yours, as you chose"
REWOUND_CHOSEN = "{what}, as you chose"
BESIDE = "the restored state beside yours, as you chose (keep both: {path} stays yours)"

#: The answers to a conflict (and a preview's toggle): keep the file as it is, take the restored state, keep both
#: (the restored state written beside it as `NAME.rewound`).
MINE, REWOUND, BOTH = "mine", "rewound", "both"


@dataclass
class Picks:
    """The user's file-by-file choices: `--only` / `--except` (paths or directories, workspace-relative), and a
    front end's answers (a conflict's, a picker's toggle): path -> MINE, REWOUND or BOTH."""

    only: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    choice: dict[str, str] = field(default_factory=dict)

    def chosen(self, path: str) -> bool:
        """Whether `--only` / `--except` let this path change."""
        return ((not self.only or any(within(path, n) for n in self.only))
                and not any(within(path, n) for n in self.exclude))

    def how(self) -> str:
        parts = [f"--only {' '.join(self.only)}"] if self.only else []
        return "; ".join(parts + ([f"--except {' '.join(self.exclude)}"] if self.exclude else []))


def within(path: str, name: str) -> bool:
    """Whether `path` is the workspace path `name` or below it (`""`: the whole workspace)."""
    return name == "" or path == name or path.startswith(name + "/")


def clean_paths(paths: Iterable[str]) -> tuple[str, ...]:
    """`--only` / `--except` arguments as workspace keys: `./a/` is `a`; `.` is the whole workspace."""
    out = []
    for p in paths:
        norm = os.path.normpath(p.strip()).replace(os.sep, "/")
        out.append("" if norm == "." else norm.removeprefix("./"))
    return tuple(out)


def _beside(root: Path, path: str, suffix: str, taken: set[str]) -> str:
    """A free name beside `path` for the restored state kept next to the user's: `NAME.rewound`, `NAME.rewound.2`…"""
    name, n = f"{path}.{suffix}", 1
    while name in taken or os.path.lexists(root / name):
        n += 1
        name = f"{path}.{suffix}.{n}"
    return name


def pick(actions: list[Action], decided: Mapping[str, Decision], picks: Picks, root: Path, suffix: str,
         beside: dict[str, str]) -> list[Action]:
    """The user's choices laid over the rule's plan, in place; returned: the actions to add (a kept-both's restored
    state written beside the user's file as `NAME.<suffix>`, recorded in `beside`). Idempotent, so the choices known
    before the plan and the answers given on seeing it go through the same door."""
    added: list[Action] = []
    taken = {a.path for a in actions}
    for a in actions:
        if not picks.chosen(a.path):
            if a.op in (WRITE, DELETE):
                a.op, a.reason = LEAVE, NOT_CHOSEN.format(how=picks.how())
            continue
        choice, d = picks.choice.get(a.path), decided.get(a.path)
        if choice == MINE and a.op in (WRITE, DELETE):
            a.op, a.reason = LEAVE, YOURS_CHOSEN
        elif choice == REWOUND and d is not None and (a.op == LEAVE or d.kind == "merged"):
            a.op, a.target, a.reason = d.op, d.target, REWOUND_CHOSEN.format(what=d.reason)
        elif choice == BOTH and d is not None and a.path not in beside:
            if a.op == WRITE:  # a merge: both sides are already in it
                continue
            if d.op == WRITE and is_captured(d.target):
                name = beside[a.path] = _beside(root, a.path, suffix, taken)
                taken.add(name)
                added.append(Action(WRITE, name, BESIDE.format(path=a.path), d.target, None))
                a.reason = YOURS_CHOSEN
            else:
                a.reason = YOURS_CHOSEN + " (the other side is no file: nothing to write beside it)"
    return added


def kind_of(reason: str) -> str | None:
    """Which way the rule decided a plan line, from its reason (a front end's row marker): "kept", "merged",
    "conflict", or None (the plain restore's)."""
    for kind in ("kept", "merged", "conflict"):
        if reason.startswith(kind):
            return kind
    return None


def short_reason(reason: str) -> str:
    """The reason without the word its row's marker already says (`kept: `, `merged: `, `conflict, `)."""
    for prefix in ("kept: ", "merged: ", "conflict, "):
        if reason.startswith(prefix):
            return reason[len(prefix):]
    return reason


def outside(path: str) -> bool:
    """A plan's path outside the workspace (shown absolute): no file is written beside it, since nothing is written
    outside the workspace but the states the agent's patches touched."""
    return path.startswith("/")


def toggled(kind: str | None, op: RestoreOp, now: str | None, path: str = "") -> str | None:
    """A preview's toggle of one file, cycling its choices: the plain restore's step -> kept as it is; a kept file ->
    the restored state; a conflict -> the restored state -> both (inside the workspace); a merge -> the restored
    state -> yours. None: the rule's own decision again."""
    if kind is None:
        cycle: tuple[str, ...] = (MINE,) if op in (WRITE, DELETE) else ()
    elif kind == "conflict":
        cycle = (REWOUND,) if outside(path) else (REWOUND, BOTH)
    elif kind == "merged":
        cycle = (REWOUND, MINE)
    else:
        cycle = (REWOUND,)
    if now is None:
        return cycle[0] if cycle else None
    at = cycle.index(now) if now in cycle else len(cycle) - 1
    return cycle[at + 1] if at + 1 < len(cycle) else None


def conflict_question(shown: str, suffix: str) -> str:
    """The question a line-based front end asks about one conflict (the CLI's and line mode's)."""
    if outside(shown):
        return f"{shown}: keep [m]ine or take the [r]{suffix[1:]}? [m] "
    return f"{shown}: keep [m]ine, take the [r]{suffix[1:]} or keep [b]oth (the {suffix} as {shown}.{suffix})? [m] "


def parse_choice(answer: str, suffix: str, shown: str = "") -> str | None:
    """A typed answer to `conflict_question` (Enter keeps mine), or None to ask again (`b` outside the workspace)."""
    choice = {"": MINE, "m": MINE, "mine": MINE, "r": REWOUND, suffix: REWOUND, "b": BOTH,
              "both": BOTH}.get(answer.strip().lower())
    return None if choice == BOTH and outside(shown) else choice


def choice_hint(shown: str) -> str:
    """What to answer again after an answer `parse_choice` did not take."""
    return "answer m or r" if outside(shown) else "answer m, r or b"


def conflict_header(shown: str, suffix: str) -> str:
    """The line above a conflict's two sides."""
    return f"conflict: {shown} — you and the agent both changed it, with no clean merge (yours -, the {suffix} +):"
