"""No function in app/ or snapshot_store/ passes 100 lines (issue 31), so each one reads as named steps.

Every function and method is measured on its own with `ast` (end_lineno - lineno + 1, from its `def` line,
decorators aside), nested ones included: a closure is checked as a function, and it still counts toward the
function around it, which is read as a whole too. That `snapshot_store` never imports `app` is enforced by
test_boundaries.py (its sources and a fresh interpreter's modules), not here.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).parents[1]
PACKAGES = ("app", "snapshot_store")
LIMIT = 100


def function_lengths(path: Path) -> dict[str, int]:
    """Qualified name ("Class.method", "outer.inner") -> lines, for every function in a source file."""
    out: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    assert child.end_lineno is not None
                    out[name] = max(out.get(name, 0), child.end_lineno - child.lineno + 1)
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(path.read_text("utf-8"), str(path)), "")
    return out


def long_functions() -> dict[tuple[str, str], int]:
    """(file relative to the repository, qualified name) -> lines, for every function over the limit."""
    out = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            out.update({(rel, name): n for name, n in function_lengths(path).items() if n > LIMIT})
    return out


def test_no_function_passes_100_lines() -> None:
    long = sorted(f"{rel}::{name} ({n} lines)" for (rel, name), n in long_functions().items())
    assert not long, f"functions over {LIMIT} lines; split them into named steps: {long}"


def test_the_measure_counts_nested_functions_on_their_own(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("class C:\n    @staticmethod\n    def m():\n        def inner():\n            return 1\n"
                   "        return inner()\n\n\nasync def f():\n    pass\n")
    assert function_lengths(src) == {"C.m": 4, "C.m.inner": 2, "f": 2}
