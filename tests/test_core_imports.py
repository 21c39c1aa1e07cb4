"""The core is pure: importing it brings in no event loop.

Each driver decides what counts as a cancelled body and tells the core so; the core itself
must not import ``asyncio``.  The check runs in a fresh interpreter, with the ``distlock``
package stood in by an empty module of the same path, so that its ``__init__`` (which loads
the drivers, and with them redis and asyncio) does not run and only the core's own imports
are counted.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import distlock._core

CORE_DIR = Path(distlock._core.__file__).parent
PACKAGE_DIR = CORE_DIR.parent

PROBE = """
import importlib, sys, types
package = types.ModuleType("distlock")
package.__path__ = [sys.argv[1]]
sys.modules["distlock"] = package
for name in sys.argv[2:]:
    importlib.import_module(name)
print(sorted(m for m in sys.modules if m == "asyncio" or m.startswith("asyncio.")))
print(sorted(m for m in sys.modules if m.startswith("distlock")))
"""


def core_modules() -> list[str]:
    return [f"distlock._core.{m.name}" for m in pkgutil.iter_modules([str(CORE_DIR)])]


def test_every_core_module_is_found() -> None:
    modules = core_modules()
    for name in ("section", "reentrant", "semaphore", "group", "waiting", "config", "lease"):
        assert f"distlock._core.{name}" in modules


def test_importing_the_core_imports_no_asyncio() -> None:
    modules = core_modules()
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(PACKAGE_DIR), *modules],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    loaded_asyncio, loaded_distlock = out
    assert loaded_asyncio == "[]"
    # The stand-in did its job: the core was imported, the drivers were not.
    for name in modules:
        assert repr(name) in loaded_distlock
    for driver in ("distlock._sync", "distlock.asyncio", "distlock._base"):
        assert repr(driver) not in loaded_distlock
