"""No two modules of ``distlock`` import each other, directly or around a loop.

Read statically (``ast``, nothing imported): every ``import`` that runs counts, at the top
of a module or inside a function, for a cycle broken only by importing late is still a
cycle.  What is imported under ``if TYPE_CHECKING:`` is left out: it names a type for the
checker and never runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

import distlock

PACKAGE_DIR = Path(distlock.__file__).parent


def module_name(path: Path, package_dir: Path) -> str:
    parts = path.relative_to(package_dir.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that can run: under ``if TYPE_CHECKING:`` none does (its
    ``else`` branch is kept)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for branch in node.orelse:
                visit(branch)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(package_dir: Path = PACKAGE_DIR) -> dict[str, set[str]]:
    """Each module of the package, and the modules of the package it imports."""
    paths = {module_name(p, package_dir): p for p in package_dir.rglob("*.py")}

    def known(name: str) -> str | None:
        # ``from a.b import c``: module ``a.b.c`` if there is one, else ``a.b`` (or the
        # nearest package above it that is a module here).
        while name and name not in paths:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(t for a in node.names if (t := known(a.name)))
                continue
            base = node.module or ""
            if node.level:
                above = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*above, base] if base else above)
            for alias in node.names:
                target = known(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base)
                if target:
                    targets.add(target)
        targets.discard(name)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert "distlock._core.section" in graph and len(graph) > 50
    assert cycles(graph) == []


def test_a_cycle_is_found_through_a_late_import_and_a_relative_one(tmp_path: Path) -> None:
    """The check sees the kinds of cycle it is there for: one closed by an import inside a
    function, one by a relative import, and none through ``if TYPE_CHECKING:``."""
    package = tmp_path / "distlock"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from distlock.b import B\n")
    (package / "b.py").write_text("def f():\n    from distlock import a\n")
    (package / "sub" / "c.py").write_text("from .d import D\n")
    (package / "sub" / "d.py").write_text("from . import c\n")
    (package / "e.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from distlock import f\n"
    )
    (package / "f.py").write_text("import distlock.e\n")
    assert sorted(cycles(import_graph(package))) == [
        ["distlock.a", "distlock.b"],
        ["distlock.sub.c", "distlock.sub.d"],
    ]
