"""Hypothesis profiles for the property tests, chosen by environment variables.

``DISTLOCK_PROFILE``: ``ci`` (default: the whole of tests/properties in a few minutes on a
2-core machine) or ``deep`` (``make test-deep``: long runs for finding rare interleavings).
``DISTLOCK_EXAMPLES``: overrides the number of examples of the pure-core machine; the tests
against a real redis-server scale it down by their own factor.
"""

from __future__ import annotations

import os
from typing import Final

from hypothesis import HealthCheck, settings

PROFILES: Final[dict[str, tuple[int, int]]] = {
    # name: (examples of the pure-core machine, steps per example)
    "ci": (1000, 60),
    "deep": (20_000, 120),
}

PROFILE: Final = os.environ.get("DISTLOCK_PROFILE", "ci")
if PROFILE not in PROFILES:
    raise RuntimeError(f"DISTLOCK_PROFILE must be one of {sorted(PROFILES)}, got {PROFILE!r}")

_examples, STEPS = PROFILES[PROFILE]
EXAMPLES: Final = int(os.environ.get("DISTLOCK_EXAMPLES", _examples))

for _name, (_count, _steps) in PROFILES.items():
    settings.register_profile(
        _name,
        max_examples=_count,
        stateful_step_count=_steps,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )


def scaled(divisor: int, floor: int = 3, steps: int | None = None) -> settings:
    """Settings for a test ``divisor`` times as costly per example as the pure-core machine
    (``steps``: at most this many steps per example, for tests whose steps take real time)."""
    return settings(
        settings.get_profile(PROFILE),
        max_examples=max(floor, EXAMPLES // divisor),
        stateful_step_count=min(STEPS, steps) if steps is not None else STEPS,
    )
