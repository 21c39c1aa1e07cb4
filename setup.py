"""Packaging lives in pyproject.toml; this file only adds the compiled build.

Building distlock (``pip install .``, ``pip wheel .``, ``python -m build``) compiles the
modules listed in ``distlock/_build.py`` (``COMPILED_MODULES``: the pure core, the wire
encoding, the flows, the clock and the making of each section) with mypyc whenever it can: mypyc importable (it comes
with mypy, which pyproject.toml's build requirements bring), and a C compiler that builds
against Python's headers.  When it cannot, it builds the pure-Python package and says why
in one line; the build never fails for want of them.  ``DISTLOCK_BUILD`` decides instead:

- ``DISTLOCK_BUILD=compiled``: compile, and fail if it cannot;
- ``DISTLOCK_BUILD=pure``: compile nothing;
- unset (or ``auto``): as above.

An in-place build (``pip install -e .``, ``python setup.py build_ext --inplace``) stays pure
unless ``DISTLOCK_BUILD=compiled`` asks for it: ``.so`` files next to the sources would be
imported in place of the sources a developer edits.  The compiled build decides exactly as
the pure one does (it is the same source); it only spends less of the client's time on
each transition.  ``distlock.build_info()`` and ``python -m distlock --version`` say which
build is installed.
"""

from __future__ import annotations

import ast
import os
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
MODES = ("auto", "compiled", "pure")


def compiled_modules() -> list[str]:
    """The source files of ``COMPILED_MODULES`` (read, not imported: importing distlock
    needs its dependencies, which a build environment does not have)."""
    tree = ast.parse((HERE / "distlock" / "_build.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                and node.target.id == "COMPILED_MODULES" and node.value is not None):
            names: tuple[str, ...] = ast.literal_eval(node.value)
            return [name.replace(".", "/") + ".py" for name in names]
    raise SystemExit("setup.py: distlock/_build.py has no COMPILED_MODULES")


def mode() -> str:
    value = os.environ.get("DISTLOCK_BUILD", "").strip().lower() or "auto"
    if value not in MODES:
        raise SystemExit(f"setup.py: DISTLOCK_BUILD={value!r}: expected one of {', '.join(MODES)}")
    return value


def notice(text: str) -> None:
    print(f"distlock: {text}", file=sys.stderr, flush=True)


def _compiler_problem() -> str | None:
    """Why a C extension cannot be built here (None when it can): compiles and links a
    small one against Python's headers, with the compiler the build would use (``CC``)."""
    from setuptools._distutils.ccompiler import new_compiler
    from setuptools._distutils.errors import CCompilerError, DistutilsError
    from setuptools._distutils.sysconfig import customize_compiler

    include = sysconfig.get_paths()["include"]
    if not (Path(include) / "Python.h").is_file():
        return f"no Python.h in {include} (Python's headers, e.g. python3-dev)"
    with tempfile.TemporaryDirectory(prefix="distlock-cc-") as tmp:
        source = Path(tmp) / "probe.c"
        source.write_text("#include <Python.h>\nint distlock_probe(void) { return 0; }\n")
        compiler = new_compiler()
        customize_compiler(compiler)
        try:
            objects = compiler.compile([str(source)], output_dir=tmp, include_dirs=[include])
            compiler.link_shared_object(objects, str(Path(tmp) / "probe.so"))
        except (CCompilerError, DistutilsError, OSError) as exc:
            name = getattr(compiler, "compiler_so", ["cc"])[0]
            return (f"no working C compiler ({name!r} could not build a test extension: "
                    f"{type(exc).__name__})")
    return None


#: Commands that build extension modules (bdist_wheel is what pip and ``python -m build``
#: run); for the others (egg_info, dist_info, sdist) mypyc is not run at all.
BUILDING = ("build", "build_ext", "bdist_wheel", "bdist", "bdist_egg", "install",
            "develop", "editable_wheel")
#: Builds whose extension modules go next to the sources.
IN_PLACE = ("develop", "editable_wheel")


def in_place(argv: list[str]) -> bool:
    return any(a in IN_PLACE for a in argv) or (
        "build_ext" in argv and ("--inplace" in argv or "-i" in argv)
    )


FALLBACK = "building the pure-Python package: {}; DISTLOCK_BUILD=compiled makes this an error"


def extensions(argv: list[str]) -> list[Any]:
    """The extension modules mypyc makes, or none: decided once per build, from
    DISTLOCK_BUILD, the command and what is installed here."""
    if not any(a in BUILDING for a in argv):
        return []
    wanted = mode()
    if wanted == "pure":
        return []
    if wanted == "auto" and in_place(argv):
        notice("an in-place (editable) build stays pure; "
               "DISTLOCK_BUILD=compiled compiles in place")
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as exc:
        problem: str | None = f"mypyc is not importable ({exc}; it comes with mypy)"
    else:
        problem = _compiler_problem()
    if problem is not None:
        if wanted == "compiled":
            raise SystemExit(f"distlock: DISTLOCK_BUILD=compiled, but {problem}")
        notice(FALLBACK.format(problem))
        return []
    try:
        # group_name: the runtime the compiled modules share is distlock__mypyc.
        made: list[Any] = mypycify(compiled_modules(), opt_level="3", group_name="distlock")
    except (Exception, SystemExit) as exc:
        if wanted == "compiled":
            raise
        notice(FALLBACK.format(f"mypyc failed ({type(exc).__name__}: {exc})"))
        return []
    return made


class build_mypyc(build_ext):
    """Falls back to the pure package when an automatic build cannot compile what mypyc
    made (the compiler probe passed, so this is rare; the wheel is then tagged for this
    platform but holds no extension module)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            if mode() == "compiled":
                raise
            for ext in self.extensions:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            self.extensions = []
            notice(FALLBACK.format(f"compiling failed ({type(exc).__name__}: {exc})"))


setup(ext_modules=extensions(sys.argv[1:]), cmdclass={"build_ext": build_mypyc})
