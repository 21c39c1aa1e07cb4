"""The documentation site builds with ``mkdocs build --strict`` (no broken link, no missing
page, no API name mkdocstrings cannot render), and its API reference documents every public
name of every public module."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: The public modules, and the page of the API reference that documents each.
REFERENCE = {
    "distlock": "distlock",
    "distlock.asyncio": "asyncio",
    "distlock.errors": "errors",
    "distlock.events": "events",
    "distlock.options": "options",
    "distlock.signal": "signal",
    "distlock.fencing": "fencing",
    "distlock.trace": "trace",
    "distlock.otel": "otel",
}

#: Public names of distlock.options (it has no ``__all__``: the rest is its machinery).
OPTIONS_PUBLIC = (
    "OPTIONS", "Option", "AcquireOptions", "HoldOptions", "AsyncHoldOptions", "LockOptions",
    "AsyncLockOptions",
)


def public_names(module: str) -> list[str]:
    """``__all__``, or the names a module without one defines for its callers; a submodule
    has a page of its own."""
    if module == "distlock.options":
        return list(OPTIONS_PUBLIC)
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [
            name for name, value in vars(mod).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module
        ]
    return [name for name in names if not isinstance(getattr(mod, name), ModuleType)]


#: Not --quiet: it hides the warnings from the count that --strict fails on.
@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, (
        "mkdocs build --strict failed (pip install -e '.[docs]' installs it):\n"
        + done.stdout + done.stderr
    )
    return out


def test_the_site_builds_strictly(site: Path) -> None:
    assert (site / "index.html").is_file()


@pytest.mark.parametrize("module", sorted(REFERENCE))
def test_the_reference_documents_every_public_name(site: Path, module: str) -> None:
    page = (site / "reference" / REFERENCE[module] / "index.html").read_text(encoding="utf-8")
    names = public_names(module)
    missing = [name for name in names if f'id="{module}.{name}"' not in page]
    assert not missing, f"{module}: not in the API reference: {missing}"


def test_no_docstring_role_is_rendered_as_text(site: Path) -> None:
    # The docstrings' ``:class:`X``` cross-references read as code, not as reST markup.
    leftover = sorted(
        str(page.relative_to(site))
        for page in site.rglob("*.html")
        if re.search(r":(?:py:)?[a-z]+:<code>", page.read_text(encoding="utf-8"))
    )
    assert not leftover, f"reST roles shown as text in: {leftover}"
