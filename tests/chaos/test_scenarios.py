"""Every registered chaos scenario, one test each, run through the same
:class:`~distlock.tools.chaos.runner.Runner` as ``python -m distlock chaos``.

The scenarios and their checks are in :mod:`distlock.tools.chaos.scenarios`; a failed
check fails the test with the scenario's message and timeline.  With ``CHAOS_REDIS_URL``
(a Redis this suite did not start) the scenarios that pause or kill Redis are skipped:
they are never done to a Redis the suite does not own.

TLC's verdict on each scenario's traced trial is ``test_trace[<scenario>]``'s, which runs
after every ``test_scenario``: the check of one scenario's trace runs on while the next
scenarios' trials do, instead of each scenario idling until its own check is done.  A
``test_scenario`` selected without its ``test_trace`` (``-k`` on a scenario's test id,
say) waits for its verdict itself, as ``python -m distlock chaos`` does.
"""

from __future__ import annotations

import pytest

from distlock.tools.chaos.registration import Entry
from distlock.tools.chaos.registry import entries
from distlock.tools.chaos.runner import Result, Runner

pytestmark = pytest.mark.chaos


def _verdict(entry: Entry, result: Result) -> None:
    if result.status == "not run":
        pytest.skip(f"{entry.title}: not run: {result.message}")
    if result.status == "failed":
        pytest.fail(result.message or "failed", pytrace=False)


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e.name)
def test_scenario(entry: Entry, chaos_runner: Runner) -> None:
    _verdict(entry, chaos_runner.run(entry))


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e.name)
def test_trace(entry: Entry, chaos_runner: Runner) -> None:
    """TLC's verdict on the traced trial of the scenario ``test_scenario`` ran."""
    if entry.name not in chaos_runner.defer_traces:
        pytest.skip(f"test_scenario[{entry.name}] is not selected: no run to check")
    _verdict(entry, chaos_runner.trace_verdict(entry))
