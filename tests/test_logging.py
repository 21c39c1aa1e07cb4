"""The library leaves its output to the application: nothing reaches stderr unless the
application configured logging.  What the ``distlock`` logger says, on both drivers, is in
``tests/drivers/_async/test_logging.py``."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_package_adds_a_null_handler_and_prints_nothing_unconfigured() -> None:
    """The library convention: a ``NullHandler`` on the package's logger, so that Python's
    last-resort handler does not print to stderr behind the application's back; an
    application that configures logging sees everything."""
    handlers = logging.getLogger("distlock").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)
    code = (
        "import logging, distlock\n"
        "logging.getLogger('distlock').error('distlock: lock %r lost', 'x')\n"
    )
    quiet = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert quiet.stderr == ""
    shown = subprocess.run(
        [sys.executable, "-c", "import logging; logging.basicConfig(level=logging.WARNING)\n"
         + code],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )
    assert "distlock: lock 'x' lost" in shown.stderr
