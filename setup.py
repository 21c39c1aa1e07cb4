"""Packaging lives in pyproject.toml; this file only adds the opt-in compiled core.

``DISTLOCK_MYPYC=1 pip install --no-build-isolation .`` (or, in a checkout,
``DISTLOCK_MYPYC=1 python setup.py build_ext --inplace``) compiles the pure core
(``distlock/_core``) and the wire encoding (``distlock/_protocol``) with mypyc, which must
be installed (it comes with mypy), and a C compiler with Python's headers.  Without the
variable nothing is compiled: the pure-Python package is the default.  CI tests both:
``make test`` the pure package, then ``make test-compiled`` (.ci/test-compiled) builds
COMPILED in a scratch copy of the checkout and runs the tests of the core and both drivers
against it.  The compiled core
decides exactly as the Python one does (it is the same source); it only spends less of the
client's time on each transition.
"""

from __future__ import annotations

import os

from setuptools import setup

#: What DISTLOCK_MYPYC=1 compiles: the modules of the pure core (no IO, no threads, typed
#: throughout), the wire encoding every command goes through (_protocol: a tenth fewer
#: instructions per cycle than the compiled core alone, and the packing of each script's
#: EVALSHA), and the flows, whose ``act`` every transition of both drivers passes through,
#: with the clock it reads.  The flows never re-raise with a bare ``raise`` after a yield
#: in a handler: compiled, that raises nothing (see _flows).
#: tests/test_compiled.py reads this list to check which build it runs on.
COMPILED = [
    "distlock/_core/actions.py",
    "distlock/_core/commands.py",
    "distlock/_core/config.py",
    "distlock/_core/group.py",
    "distlock/_core/lease.py",
    "distlock/_core/reentrant.py",
    "distlock/_core/section.py",
    "distlock/_core/semaphore.py",
    "distlock/_core/waiting.py",
    "distlock/_protocol.py",
    "distlock/_flows.py",
    "distlock/_clock.py",
]

ext_modules = []
if os.environ.get("DISTLOCK_MYPYC") == "1":
    from mypyc.build import mypycify

    ext_modules = mypycify(COMPILED, opt_level="3")

setup(ext_modules=ext_modules)
