"""Faults in the Redis process itself: paused with SIGSTOP, killed and restarted empty."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.chaos.harness import Scenario
from tests.chaos.recorder import Section

pytestmark = pytest.mark.chaos

TRIALS = 3
MODES = ["sync", "asyncio"]

MakeScenario = Callable[..., Scenario]


def _trial(sc: Scenario, mode: str) -> Callable[..., None]:
    return sc.sync_trial if mode == "sync" else sc.async_trial


@pytest.mark.parametrize("mode", MODES)
def test_redis_paused_past_the_ttl(chaos: MakeScenario, mode: str) -> None:
    """SIGSTOP for 2.5 TTL: every client hangs, nothing expires while Redis sleeps, and on
    SIGCONT the key has expired.  The victims' own clocks must have declared the loss."""
    sc = chaos(f"Redis paused (SIGSTOP) 2.5xTTL [{mode}]", ttl_ms=200)

    def fault(victim: Section) -> None:
        sc.recorder.fault("redis-server paused")
        sc.target.pause(2.5 * sc.ttl)

    for trial in range(TRIALS):
        _trial(sc, mode)(trial, lambda: sc.inject(fault, expect_lapse=True), via_proxy=False)
    sc.finish(expect="lapse", min_overlaps=1)


@pytest.mark.parametrize("mode", MODES)
def test_redis_killed_and_restarted_empty(chaos: MakeScenario, mode: str) -> None:
    """SIGKILL, down for half a TTL, back on the same port with no data: the key is gone
    while its owner still runs.  Renewals fail, then are refused; the intruder takes the
    key at once; the owner must report the loss (and its release, finding nothing, too)."""
    sc = chaos(f"Redis killed, restarted empty [{mode}]", ttl_ms=200)

    def fault(victim: Section) -> None:
        sc.recorder.fault("redis-server killed and restarted without its data")
        sc.declare_data_loss()
        sc.target.lose_data(sc.prefix, down_for=0.5 * sc.ttl)
        sc.wait_signal(victim)

    for trial in range(TRIALS):
        _trial(sc, mode)(trial, lambda: sc.inject(fault, expect_lapse=True))
    sc.finish(expect="lapse", min_overlaps=1)
