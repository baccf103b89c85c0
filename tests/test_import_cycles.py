"""No import cycle inside snapshot_store/ or app/ (issue 21): each layer builds on the ones below it only.

Imports are read with `ast`, every one of them: module-level, inside functions (lazy), and under
`if TYPE_CHECKING:` (a cycle a type checker follows is a cycle a reader follows). Importing a package's
submodule always initialises the package first, so an edge from a module to its own ancestor package is not
counted, and `from . import x` names the submodule `x`, not the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).parents[1]


def module_files(package: str) -> dict[str, Path]:
    """Dotted module name -> its file, for every module of the package."""
    out = {}
    for path in sorted((REPO / package).rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of `modules` that the file imports anywhere in it (not its own ancestor packages)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            prefix = ".".join([*base, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{prefix}.{alias.name}"
                found.add(sub if sub in modules else prefix)
    ancestors = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in modules and m != name and m not in ancestors}


def cycles(package: str) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan), each sorted."""
    modules = module_files(package)
    graph = {name: sorted(imports_of(name, path, modules)) for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return out


@pytest.mark.parametrize("package", ["snapshot_store", "app"])
def test_no_import_cycle(package: str) -> None:
    found = cycles(package)
    assert not found, f"import cycles in {package}/: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_check_sees_a_lazy_cycle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle closed only by an import inside a function, or under TYPE_CHECKING, is found."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f() -> None:\n    from .. import a\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .d import X\n")
    (pkg / "d.py").write_text("from . import c\n")
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    assert sorted(cycles("pkg")) == [["pkg.a", "pkg.sub.b"], ["pkg.c", "pkg.d"]]
