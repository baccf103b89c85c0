"""snapshot_store keeps no process-wide mutable state (issue 21): what one command learnt cannot leak into the
next, or into gc and verify, except through objects a caller owns and passes in.

Process-wide mutable state, as read from the sources with `ast`:
* a `global` statement anywhere (a function rebinding a module name);
* a module-level name bound to a mutable container (a dict, list, set or bytearray display or comprehension, or a
  call of dict, list, set, bytearray, OrderedDict, defaultdict, deque, Counter, WeakValueDictionary...) that the
  module mutates: a mutating method called on it, an item assigned or deleted, an augmented assignment;
* `globals()` used to change the module's namespace;
* `functools.cache` / `lru_cache` on a function that reads the disk (opens, stats or lists a path).
Read-only tables built once at import (a dict of constants) are fine.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]
CONTAINERS = {"dict", "list", "set", "bytearray", "OrderedDict", "defaultdict", "deque", "Counter",
              "WeakValueDictionary", "WeakKeyDictionary", "WeakSet", "ChainMap"}
MUTATORS = {"append", "extend", "insert", "pop", "popitem", "remove", "clear", "update", "add", "discard",
            "setdefault", "move_to_end", "appendleft", "extendleft", "sort", "reverse", "__setitem__",
            "__delitem__", "intersection_update", "difference_update", "symmetric_difference_update"}
DISK = {"open", "stat", "lstat", "fstat", "scandir", "listdir", "walk", "read_bytes", "read_text", "exists",
        "is_file", "is_dir", "iterdir", "glob", "rglob", "readlink", "realpath"}


def _name(node: ast.expr) -> str | None:
    """The called name: `f` of f(...), `attr` of x.attr(...)."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_container(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Dict | ast.List | ast.Set | ast.DictComp | ast.ListComp | ast.SetComp):
        return True
    return isinstance(value, ast.Call) and _name(value.func) in CONTAINERS


def _target(node: ast.expr) -> str | None:
    """The module-level name an item assignment, deletion or augmented assignment changes."""
    while isinstance(node, ast.Subscript):  # d[a][b] = ... changes d
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def problems(path: Path) -> list[str]:
    """Every piece of process-wide mutable state in one source file."""
    tree = ast.parse(path.read_text("utf-8"), str(path))
    where = path.relative_to(REPO)
    out: list[str] = []
    containers = set()
    for node in tree.body:
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        else:
            continue
        if _is_container(value):
            containers.update(t.id for t in targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Global):
            out.append(f"{where}:{node.lineno}: global {', '.join(node.names)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            if isinstance(owner, ast.Name) and owner.id in containers and node.func.attr in MUTATORS:
                out.append(f"{where}:{node.lineno}: {owner.id}.{node.func.attr}(...)")
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript):
                    name = _target(t.value)
                    if name in containers or (isinstance(t.value, ast.Call) and _name(t.value.func) == "globals"):
                        out.append(f"{where}:{node.lineno}: {name or 'globals()'}[...] changed")
                elif isinstance(node, ast.AugAssign) and isinstance(t, ast.Name) and t.id in containers:
                    out.append(f"{where}:{node.lineno}: {t.id} changed in place")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            cached = any(_name(d.func if isinstance(d, ast.Call) else d) in ("cache", "lru_cache")
                         for d in node.decorator_list)
            reads = {_name(c.func) for c in ast.walk(node) if isinstance(c, ast.Call)} & DISK
            if cached and reads:
                out.append(f"{where}:{node.lineno}: {node.name} is cached for the process and reads the disk "
                           f"({', '.join(sorted(n for n in reads if n))})")
    return out


def test_snapshot_store_keeps_no_process_wide_state() -> None:
    found = [p for path in sorted((REPO / "snapshot_store").rglob("*.py")) for p in problems(path)]
    assert not found, "process-wide mutable state in snapshot_store:\n" + "\n".join(found)


@pytest.mark.parametrize(("source", "expected"), [
    ("_cache = {}\ndef f(k):\n    _cache[k] = 1\n", "_cache[...] changed"),
    ("_seen: set[str] = set()\ndef f(k):\n    _seen.add(k)\n", "_seen.add(...)"),
    ("_n = 0\ndef f():\n    global _n\n    _n += 1\n", "global _n"),
    ("import functools, os\n@functools.lru_cache\ndef f(p):\n    return os.stat(p)\n", "reads the disk"),
    ("def f(k, v):\n    globals()[k] = v\n", "globals()[...] changed"),
])
def test_the_check_finds_each_kind(tmp_path: Path, source: str, expected: str, monkeypatch: pytest.MonkeyPatch
                                   ) -> None:
    path = tmp_path / "mod.py"
    path.write_text(source)
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    found = problems(path)
    assert any(expected in p for p in found), found


def test_a_constant_table_is_fine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "mod.py"
    path.write_text("_KINDS = {'f': 1}\ndef kind(k):\n    return _KINDS[k]\n")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert problems(path) == []
