"""Which build a run tests, so that neither can stand in for the other unseen, and what
``distlock.build_info()`` and ``python -m distlock --version`` say about it.

``make test`` runs the whole suite on the compiled build (``.ci/test-compiled``, which sets
``DISTLOCK_EXPECT_CORE=compiled``: a build that failed to replace a module would otherwise
pass as a test of the compiled one), then the core's and drivers' tests on the pure package
of the checkout, which must import the sources: a checkout where someone once ran
``DISTLOCK_BUILD=compiled python setup.py build_ext --inplace`` would otherwise import the
``.so`` files left next to them, and the pure path would go untested.
"""

from __future__ import annotations

import dataclasses
import importlib
import os
import subprocess
import sys
import tomllib
import typing
from pathlib import Path

import pytest

import distlock
from distlock._build import COMPILED_MODULES, BuildInfo

ROOT = Path(__file__).resolve().parent.parent


def expected_build() -> str:
    expected = os.environ.get("DISTLOCK_EXPECT_CORE", "python")
    assert expected in ("python", "compiled"), expected
    return "compiled" if expected == "compiled" else "pure"


def test_the_compiled_modules_are_the_core_and_exist() -> None:
    assert "distlock._core.section" in COMPILED_MODULES, COMPILED_MODULES
    # The election's pure machine is core too: its campaigns' sections are compiled.
    assert "distlock._core.election" in COMPILED_MODULES, COMPILED_MODULES
    for name in COMPILED_MODULES:
        assert (ROOT / (name.replace(".", "/") + ".py")).is_file(), name


@pytest.mark.parametrize("name", COMPILED_MODULES)
def test_the_imported_module_is_the_build_under_test(name: str) -> None:
    origin = str(importlib.import_module(name).__file__)
    if expected_build() == "compiled":
        assert origin.endswith(".so"), f"{name} is not compiled: {origin}"
    else:
        assert origin.endswith(".py"), (
            f"{name} imports {origin}, not its source: remove the in-place build "
            "(git clean -fX distlock) to test the pure package, or run make test-compiled"
        )


def test_build_info_names_the_build_under_test() -> None:
    info = distlock.build_info()
    assert isinstance(info, BuildInfo)
    assert info.version == distlock.__version__
    assert info.build == expected_build(), info
    assert info.compiled == (COMPILED_MODULES if info.build == "compiled" else ()), info
    # Typed: the three builds it can name, and nothing mutable.
    hints = typing.get_type_hints(BuildInfo)
    assert typing.get_args(hints["build"]) == ("compiled", "pure", "mixed")
    assert hints["compiled"] == tuple[str, ...]
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.build = "pure"  # type: ignore[misc]


def test_python_m_distlock_version_says_which_build_runs() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "distlock", "--version"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=True,
    )
    what = (f"compiled with mypyc: {len(COMPILED_MODULES)} modules"
            if expected_build() == "compiled" else "pure Python")
    assert done.stdout.strip() == f"distlock {distlock.__version__} ({what})", done.stdout


def test_the_version_is_written_once() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "distlock._version.__version__"}
    assignments = [
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "distlock").rglob("*.py")
        if "__version__ =" in path.read_text(encoding="utf-8")
    ]
    assert assignments == ["distlock/_version.py"], assignments


def test_each_primitive_makes_its_own_section_in_either_build() -> None:
    # The compiled build compiles the drivers' base class and not the drivers: a class
    # attribute a driver's class sets must reach the compiled base's methods (an instance
    # field of a compiled class would keep the base's default, a plain Section).
    import redis
    import redis.asyncio as aredis

    import distlock.asyncio
    from distlock._core.commands import Kind
    from distlock._core.election import CampaignSection
    from distlock._core.readwrite import ReadSection, WriteSection
    from distlock._core.reentrant import ReentrantSection
    from distlock._core.section import Section
    from distlock._core.semaphore import SemaphoreSection

    sync_client, async_client = redis.Redis(), aredis.Redis()
    made = {
        "Lock": Section, "ReentrantLock": ReentrantSection, "Semaphore": SemaphoreSection,
    }
    for module, client in ((distlock, sync_client), (distlock.asyncio, async_client)):
        for name, expected in made.items():
            cls = getattr(module, name)
            primitive = cls(client, limit=2) if name == "Semaphore" else cls(client)
            config = primitive._config(primitive.defaults, watch=False, cancel_on_loss=False)
            section = primitive._new_section("k", 1, config, "c", False)
            assert type(section) is expected, (module.__name__, name, type(section))
        rw = module.ReadWriteLock(client)
        for side, expected_role in ((rw.read, ReadSection), (rw.write, WriteSection)):
            config = side._config(side.defaults, watch=False, cancel_on_loss=False)
            section = side._new_section("k", 1, config, "c", False)
            assert type(section) is expected_role, (module.__name__, type(section))
        # An Election's campaigns (its _candidates primitive, a driver's class over the
        # compiled base) make the campaign's section, which carries the identity.
        candidates = module.Election(client, "e", identity="me")._candidates
        config = candidates._config(candidates.defaults, watch=True, cancel_on_loss=False)
        section = candidates._new_section("k", 1, config, "c", False)
        assert type(section) is CampaignSection, (module.__name__, type(section))
        section.identity = "me"
        command = section.acquire(0.0).send
        assert command is not None and command.identity == "me", (module.__name__, command)
        assert command.kind is Kind.CAMPAIGN, (module.__name__, command.kind)
