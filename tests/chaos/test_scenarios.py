"""Every registered chaos scenario, one test each, run through the same
:class:`~distlock.tools.chaos.runner.Runner` as ``python -m distlock chaos``.

The scenarios and their checks are in :mod:`distlock.tools.chaos.scenarios`; a failed
check fails the test with the scenario's message and timeline.  With ``CHAOS_REDIS_URL``
(a Redis this suite did not start) the scenarios that pause or kill Redis are skipped:
they are never done to a Redis the suite does not own.
"""

from __future__ import annotations

import pytest

from distlock.tools.chaos.registration import Entry
from distlock.tools.chaos.registry import entries
from distlock.tools.chaos.runner import Runner

pytestmark = pytest.mark.chaos


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e.name)
def test_scenario(entry: Entry, chaos_runner: Runner) -> None:
    result = chaos_runner.run(entry)
    if result.status == "not run":
        pytest.skip(f"{entry.title}: not run: {result.message}")
    if result.status == "failed":
        pytest.fail(result.message or "failed", pytrace=False)
