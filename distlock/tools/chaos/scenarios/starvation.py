"""Bodies that starve the lock's own timers: the event loop blocked, or the GIL held.

No renewal can be sent and no deadline timer can fire while the body starves them, so the
lease lapses and the intruder takes the key.  The checks: the loss is still surfaced
(the deadline is read again the moment the body finishes), and the signal fires as soon
as the starvation ends.  The first trial's trace is checked by TLC like any other (the
reentrant lock's too, whose body starves at depth 2): the starvation ends mid-body there
(the trace check's ``Resume``), the lease timer fires then, and the body ends judged on
the deadline the clock made (see distlock.tools.tracecheck).
"""

from __future__ import annotations

from collections.abc import Callable

from distlock.tools.chaos.harness import Scenario
from distlock.tools.chaos.processes import Child, merge_result
from distlock.tools.chaos.recorder import Section
from distlock.tools.chaos.registration import Context, scenario
from distlock.tools.chaos.sections import Body

TRIALS = 3


def _starving_bodies(sc: Scenario, what: str) -> Callable[[int, int], list[Body]]:
    def starve(section: Section) -> None:
        sc.faults.targets.append(section)
        sc.recorder.fault(what)

    def bodies(trial: int, index: int) -> list[Body]:
        cooperative = sc.params.cooperative(trial)
        ttl_ms = sc.params.ttl_ms
        first = Body(ttl_ms * 3.0, cooperative=cooperative, starve_ms=ttl_ms * 2.0)
        first.at_start = starve
        return [first, Body(sc.params.ttl_ms * 0.5, cooperative=True)]

    return bodies


@scenario(
    "asyncio-body-blocks-the-event-loop",
    "asyncio body blocks the event loop 2xTTL [asyncio]",
    "time.sleep(2xTTL) inside the coroutine: the loss is surfaced when the loop resumes",
)
def asyncio_body_blocks_the_event_loop(
    ctx: Context,
    *,
    reentrant: bool = False,
    limit: int | None = None,
    ttl_ms: int = 200,
    trials: int = TRIALS,
) -> None:
    """``time.sleep`` inside the coroutine for 2 TTL: no timer of the loop runs."""
    sc = ctx.scenario(
        ttl_ms=ttl_ms, reentrant=reentrant, limit=limit, cooperative_every=min(3, trials)
    )
    bodies = _starving_bodies(sc, "event loop blocked 2xTTL by the body")
    for trial in range(trials):
        sc.trials.run_async(trial, None, bodies=bodies, via_proxy=False)
    sc.finish(expect="lapse", min_overlaps=1)


@scenario(
    "sync-body-holds-the-gil",
    "sync body holds the GIL 2xTTL in a C call [sync]",
    "a C call keeps the GIL for 2xTTL (intruder in another process): the loss is surfaced",
)
def sync_body_holds_the_gil(
    ctx: Context,
    *,
    reentrant: bool = False,
    limit: int | None = None,
    ttl_ms: int = 200,
    trials: int = TRIALS,
) -> None:
    """A C call that keeps the GIL (``usleep`` through ``ctypes.PyDLL``) for 2 TTL: no
    thread of the process runs, the Lock's timer thread included.  The intruder has to be
    another process."""
    sc = ctx.scenario(
        ttl_ms=ttl_ms, reentrant=reentrant, limit=limit, cooperative_every=min(3, trials)
    )
    bodies = _starving_bodies(sc, "GIL held 2xTTL by the body")
    for trial in range(trials):
        part = sc.trace.part(trial)
        extra: tuple[str, ...] = () if part is None else (part,)
        if limit is not None:
            mode, extra = "intrude-semaphore", (str(limit), *extra)
        else:
            mode = "intrude-reentrant" if reentrant else "intrude"
        params = sc.params
        child = Child(mode, sc.target.url, params.prefix, params.key_id, params.ttl_ms, *extra)
        try:
            child.expect("READY", 20)
            sc.trials.run_sync(
                trial, None, victims=2, bodies=bodies, intruder=False, via_proxy=False
            )
            merge_result(sc.recorder, child.finish(20))
        finally:
            child.close()
        if part is not None:
            sc.trace.add_part(part, "intruder-process")
    sc.finish(expect="lapse", min_overlaps=1)
