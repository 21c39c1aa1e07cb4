"""The client clock both drivers, their flows and their timers read.

A module of its own so that the compiled build (setup.py) compiles it: every core
transition reads the clock, and a compiled function is a C call where a Python one costs
a frame.
"""

from __future__ import annotations

import time


def now_ms() -> float:
    """The client's monotonic clock, in milliseconds."""
    return time.monotonic() * 1000.0
