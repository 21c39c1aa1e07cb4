"""Which build of distlock is running: compiled with mypyc, or pure Python.

setup.py reads :data:`COMPILED_MODULES` from this file (without importing the package), so
the list of what a compiled build compiles is written once; this module therefore imports
nothing but the standard library at its top.
"""

from __future__ import annotations

import importlib
import importlib.machinery
from dataclasses import dataclass
from typing import Literal

from distlock._version import __version__

#: What a compiled build compiles with mypyc: the modules of the pure core (no IO, no
#: threads, typed throughout), the wire encoding every command goes through (``_protocol``:
#: the packing of each script's EVALSHA, and ``_direct``: the choice to send it on a pool
#: connection), the flows, whose ``act`` every transition of both drivers passes through,
#: with the clock it reads, and the birth of every lock cycle's section (``_base``: the
#: options, the config, the key and the token).  The flows never re-raise with a bare
#: ``raise`` after a yield in a handler: compiled, that raises nothing (see _flows).
#: ``_base``'s classes are the drivers' bases, which stay Python: they allow interpreted
#: subclasses, and what a subclass overrides of them is a ``ClassVar`` (an instance field
#: of a compiled class keeps its own default whatever the subclass sets).
COMPILED_MODULES: tuple[str, ...] = (
    "distlock._core.actions",
    "distlock._core.commands",
    "distlock._core.config",
    "distlock._core.election",
    "distlock._core.group",
    "distlock._core.lease",
    "distlock._core.readwrite",
    "distlock._core.reentrant",
    "distlock._core.section",
    "distlock._core.semaphore",
    "distlock._core.state",
    "distlock._core.waiting",
    "distlock._protocol",
    "distlock._flows",
    "distlock._clock",
    "distlock._direct",
    "distlock._base",
)

Build = Literal["compiled", "pure", "mixed"]


@dataclass(frozen=True)
class BuildInfo:
    """What :func:`build_info` reports."""

    #: distlock's version, e.g. ``"0.1.0"``.
    version: str
    #: ``"compiled"`` when every module of :data:`COMPILED_MODULES` is imported from an
    #: extension module built by mypyc, ``"pure"`` when none is; ``"mixed"`` only for a
    #: broken or stale build (a checkout with some ``.so`` files left next to the sources).
    build: Build
    #: The dotted names of the modules imported from extension modules, in the order of
    #: :data:`COMPILED_MODULES`; empty for the pure build.
    compiled: tuple[str, ...]


def _is_extension(name: str) -> bool:
    origin = getattr(importlib.import_module(name), "__file__", None) or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def build_info() -> BuildInfo:
    """Which build of distlock runs: its version, ``"compiled"`` or ``"pure"``, and the
    modules compiled with mypyc.

    >>> import distlock
    >>> distlock.build_info().build in ("compiled", "pure")
    True
    """
    compiled = tuple(name for name in COMPILED_MODULES if _is_extension(name))
    build: Build
    if len(compiled) == len(COMPILED_MODULES):
        build = "compiled"
    elif compiled:
        build = "mixed"
    else:
        build = "pure"
    return BuildInfo(version=__version__, build=build, compiled=compiled)


def describe(info: BuildInfo | None = None) -> str:
    """One line for ``python -m distlock --version``: of the build that runs, or of
    ``info``."""
    info = build_info() if info is None else info
    if info.build == "compiled":
        what = f"compiled with mypyc: {len(info.compiled)} modules"
    elif info.build == "pure":
        what = "pure Python"
    else:
        what = f"mixed: {len(info.compiled)} of {len(COMPILED_MODULES)} modules compiled"
    return f"distlock {info.version} ({what})"
