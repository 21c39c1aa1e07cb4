"""Faults in the Redis process itself: paused with SIGSTOP, killed and restarted empty.

Only ever done to a redis-server this tool started (``Scenario.own_redis``); against a
Redis it did not start these scenarios are reported as not run.
"""

from __future__ import annotations

from collections.abc import Callable

from distlock.tools.chaos.harness import Scenario
from distlock.tools.chaos.recorder import Section
from distlock.tools.chaos.registration import MODES, Context, scenario

TRIALS = 3


def _trial(sc: Scenario, mode: str) -> Callable[..., None]:
    return sc.trials.run_sync if mode == "sync" else sc.trials.run_async


@scenario(
    "redis-paused-past-the-ttl",
    "Redis paused (SIGSTOP) 2.5xTTL [{mode}]",
    "redis-server paused with SIGSTOP for 2.5xTTL: the lapse is surfaced",
    modes=MODES,
    needs_own_redis=True,
)
def redis_paused_past_the_ttl(
    ctx: Context,
    mode: str,
    *,
    reentrant: bool = False,
    limit: int | None = None,
    ttl_ms: int = 200,
    trials: int = TRIALS,
) -> None:
    """SIGSTOP for 2.5 TTL: every client hangs, nothing expires while Redis sleeps, and on
    SIGCONT the key has expired.  The victims' own clocks must have declared the loss.
    (``limit``: on Semaphores of that many permits, whose expiry instants Redis's clock
    has passed by then.)"""
    sc = ctx.scenario(
        ttl_ms=ttl_ms, reentrant=reentrant, limit=limit, cooperative_every=min(3, trials)
    )
    server = sc.own_redis()

    def fault(victim: Section) -> None:
        sc.recorder.fault("redis-server paused")
        server.pause(2.5 * sc.params.ttl)

    for trial in range(trials):
        _trial(sc, mode)(trial, lambda: sc.faults.inject(fault, expect_lapse=True), via_proxy=False)
    sc.finish(expect="lapse", min_overlaps=1)


@scenario(
    "redis-killed-and-restarted-empty",
    "Redis killed, restarted empty [{mode}]",
    "redis-server SIGKILLed, down 0.5xTTL, restarted without data: the lapse is surfaced",
    modes=MODES,
    needs_own_redis=True,
)
def redis_killed_and_restarted_empty(
    ctx: Context,
    mode: str,
    *,
    reentrant: bool = False,
    limit: int | None = None,
    ttl_ms: int = 200,
    trials: int = TRIALS,
) -> None:
    """SIGKILL, down for half a TTL, back on the same port with no data: the key is gone
    while its owner still runs.  Renewals fail, then are refused; the intruder takes the
    key at once; the owner must report the loss (and its release, finding nothing, too)."""
    sc = ctx.scenario(
        ttl_ms=ttl_ms, reentrant=reentrant, limit=limit, cooperative_every=min(3, trials)
    )
    server = sc.own_redis()

    def fault(victim: Section) -> None:
        sc.recorder.fault("redis-server killed and restarted without its data")
        sc.trace.declare_data_loss()
        server.lose_data(down_for=0.5 * sc.params.ttl, down=sc.trace.declare_redis_down)
        sc.faults.wait_signal(victim)

    for trial in range(trials):
        _trial(sc, mode)(trial, lambda: sc.faults.inject(fault, expect_lapse=True))
    sc.finish(expect="lapse", min_overlaps=1)
