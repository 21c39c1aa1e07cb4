"""Which build of the core a run tests, so that neither can stand in for the other unseen.

``make test`` must test the pure-Python modules: a checkout where someone once ran
``DISTLOCK_MYPYC=1 python setup.py build_ext --inplace`` would otherwise import the ``.so``
files left next to the sources, and the pure path would go untested.  ``make test-compiled``
(``.ci/test-compiled``) sets ``DISTLOCK_EXPECT_CORE=compiled``: a build that failed to
replace a module would otherwise pass as a test of the compiled one.
"""

from __future__ import annotations

import ast
import importlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def compiled_modules() -> list[str]:
    """The dotted names of the modules setup.py compiles (its ``COMPILED`` list)."""
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "COMPILED"):
            paths: list[str] = ast.literal_eval(node.value)
            return [p.removesuffix(".py").replace("/", ".") for p in paths]
    raise AssertionError("setup.py has no COMPILED list")


def test_setup_compiles_the_core() -> None:
    names = compiled_modules()
    assert "distlock._core.section" in names, names
    for name in names:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name


@pytest.mark.parametrize("name", compiled_modules())
def test_the_imported_module_is_the_build_under_test(name: str) -> None:
    expected = os.environ.get("DISTLOCK_EXPECT_CORE", "python")
    assert expected in ("python", "compiled"), expected
    origin = str(importlib.import_module(name).__file__)
    if expected == "compiled":
        assert origin.endswith(".so"), f"{name} is not compiled: {origin}"
    else:
        assert origin.endswith(".py"), (
            f"{name} imports {origin}, not its source: remove the in-place build "
            "(git clean -fX distlock) to test the pure package, or run make test-compiled"
        )
