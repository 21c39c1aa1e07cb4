"""The semaphore under the faults that make a lease lapse, and a permit holder killed.

Victims and intruder hold permits of one ``Semaphore`` key of ``LIMIT`` permits: three
victims (two sharing one Semaphore) and the intruder contend for two permits, so when a
fault lapses the victims' permits, the intruder takes one while their oblivious bodies
still run.  The checks are every scenario's, with the overlap check for ``LIMIT``
permits (``invariants.check``): never more than ``LIMIT`` successful bodies at once,
and at every instant at most ``LIMIT`` running bodies that kept quiet about a loss (each
one beyond that must have surfaced it).  Each scenario must also have seen more than
``LIMIT`` bodies at once: the fault really let someone in.  Where the fault holds the
other victims back (the hung renewal), the lapsed victim's oblivious trial does not
leave that to timing: ``LIMIT`` crowders take the permits on direct connections while
its body still runs (``Faults.crowd``).

The TTL is 500 ms rather than the lock scenarios' 200 ms, and two trials each (the second
with cooperative bodies) rather than three: the claims are about the faults, and a
longer lease keeps a loaded machine's scheduling out of the verdict at the same cost.

The first trial of each is traced and checked by TLC against ``spec/Semaphore.tla``
(``spec/SemaphoreTrace.tla``), as the lock's are against ``spec/DistLock.tla``: the
starving bodies' too (a starvation that ends mid-body is the trace's ``Resume``), and the
killed permit holder's (its process records its events up to the kill; to the trace check
it is a section that stops, its permit lapsing at its own expiry beside the live holder's
permit of ten times its TTL: each section has its own TTL in the trace model).
"""

from __future__ import annotations

import random
import threading
import time

from distlock.tools.chaos import waiters
from distlock.tools.chaos.failures import require
from distlock.tools.chaos.harness import Scenario
from distlock.tools.chaos.processes import Child
from distlock.tools.chaos.recorder import Section, now
from distlock.tools.chaos.registration import MODES, Context, scenario
from distlock.tools.chaos.scenarios import network, redis_process, starvation
from distlock.tools.chaos.sections import Body

#: Permits of the key every scenario here contends for.
LIMIT = 2
TTL_MS = 500
TRIALS = 2

#: The killed holder's TTL, and the live holder's beside it: ten times longer, so that
#: its lease never lapses on a loaded machine.
KILL_TTL_MS = 1_000
LIVE_TTL_MS = 10_000
#: The live holder renews this often, four times within the dead permit's TTL: a renewal
#: that kept every permit of the key alive (one TTL shared by the whole key) would keep
#: the dead one for the live one's 10 s.  The dead holder's heartbeat (a quarter of its
#: TTL), as the trace check wants one heartbeat for a trace's renewed sections (each
#: permit has its own TTL there).
LIVE_HEARTBEAT_MS = KILL_TTL_MS // 4
POLLERS = 2
#: Redis's TIME has microseconds; a score of whole milliseconds is up to 1 ms early.
TOLERANCE = 0.002


@scenario(
    "semaphore-renewal-that-hangs-forever",
    "semaphore, limit 2: renewal hangs forever (timeout toxic) [{mode}]",
    "Semaphore of 2 permits, requests or replies dropped on an open connection: the lapse "
    "is surfaced, never more than 2 bodies succeed at once",
    modes=MODES,
)
def semaphore_renewal_that_hangs_forever(ctx: Context, mode: str) -> None:
    network.renewal_that_hangs_forever(ctx, mode, limit=LIMIT, ttl_ms=TTL_MS, trials=TRIALS)


@scenario(
    "semaphore-redis-paused-past-the-ttl",
    "semaphore, limit 2: Redis paused (SIGSTOP) 2.5xTTL [{mode}]",
    "Semaphore of 2 permits, redis-server paused for 2.5xTTL: the lapse is surfaced, "
    "never more than 2 bodies succeed at once",
    modes=MODES,
    needs_own_redis=True,
)
def semaphore_redis_paused_past_the_ttl(ctx: Context, mode: str) -> None:
    redis_process.redis_paused_past_the_ttl(
        ctx, mode, limit=LIMIT, ttl_ms=TTL_MS, trials=TRIALS
    )


@scenario(
    "semaphore-redis-killed-and-restarted-empty",
    "semaphore, limit 2: Redis killed, restarted empty [{mode}]",
    "Semaphore of 2 permits, redis-server SIGKILLed and restarted without data: the lapse "
    "is surfaced, never more than 2 bodies succeed at once",
    modes=MODES,
    needs_own_redis=True,
)
def semaphore_redis_killed_and_restarted_empty(ctx: Context, mode: str) -> None:
    redis_process.redis_killed_and_restarted_empty(
        ctx, mode, limit=LIMIT, ttl_ms=TTL_MS, trials=TRIALS
    )


@scenario(
    "semaphore-asyncio-body-blocks-the-event-loop",
    "semaphore, limit 2: body blocks the event loop 2xTTL [asyncio]",
    "Semaphore of 2 permits, time.sleep(2xTTL) in the coroutine: the loss is surfaced "
    "when the loop resumes",
)
def semaphore_asyncio_body_blocks_the_event_loop(ctx: Context) -> None:
    starvation.asyncio_body_blocks_the_event_loop(
        ctx, limit=LIMIT, ttl_ms=TTL_MS, trials=TRIALS
    )


@scenario(
    "semaphore-sync-body-holds-the-gil",
    "semaphore, limit 2: body holds the GIL 2xTTL in a C call [sync]",
    "Semaphore of 2 permits, a C call keeps the GIL for 2xTTL (intruder in another "
    "process): the loss is surfaced when the GIL is released",
)
def semaphore_sync_body_holds_the_gil(ctx: Context) -> None:
    starvation.sync_body_holds_the_gil(ctx, limit=LIMIT, ttl_ms=TTL_MS, trials=TRIALS)


@scenario(
    "semaphore-holder-killed-beside-a-live-one",
    "semaphore, limit 2: a permit holder killed (SIGKILL) beside a renewing one [sync]",
    "one of two permit holders SIGKILLed, the other renewing: its permit is refused to "
    "others until its own expiry, granted right after",
)
def semaphore_holder_killed_beside_a_live_one(ctx: Context) -> None:
    """Two permits: one held by a live holder in this process (long TTL, renewing all
    along), the other by a child process, SIGKILLed after a renewal.  Pollers (fail fast)
    must be refused until the dead permit's own expiry instant in Redis, however often
    the live holder renews, and granted within its TTL after it."""
    sc = ctx.scenario(ttl_ms=KILL_TTL_MS, limit=LIMIT)
    rng = random.Random(20_261_201)
    for trial in range(TRIALS):
        sc.recorder.trials += 1
        # The first trial's trace has the killed holder's events too, up to the kill (as
        # the lock's holder-killed-mid-section has): to the trace check it is a section
        # that stops, its permit lapsing at its own expiry; the live holder's permit has
        # its own TTL (the trace model's TTL is per section).
        part = sc.trace.part(trial)
        extra = () if part is None else (part,)
        sc.trace.start(trial)
        done = threading.Event()
        live = _live_holder(sc, trial, done)
        child = Child(
            "hold-semaphore",
            sc.target.url,
            sc.params.prefix,
            sc.params.key_id,
            sc.params.ttl_ms,
            str(LIMIT),
            *extra,
        )
        try:
            acquired = child.expect("ACQUIRED", 20)
            child.expect("RENEWED", 20)
            attempts: list[Section] = []
            pollers = waiters.beside_a_dead_holder(
                sc.clients, sc.sections, trial, done, attempts, POLLERS
            )
            for t in pollers:
                t.start()
            # Kill at a random point of the heartbeat cycle (a fault's timing, not a wait).
            time.sleep(rng.uniform(0, sc.params.ttl / 4))
            killed_at = child.kill()
            sc.recorder.fault("permit holder SIGKILLed beside a renewing one")
            asked = now()
            score, redis_now = _score_and_time(sc, acquired["token"])
            answered = now()
            for t in pollers:
                t.join(timeout=sc.params.ttl + 10)
            require(not any(t.is_alive() for t in pollers), "pollers never finished")
        finally:
            done.set()
            child.close()
            live.join(timeout=10)
        sc.clients.close_sync()
        sc.trace.stop()
        if part is not None:
            sc.trace.add_part(part, "holder-process")

        require(
            score is not None,
            f"the dead holder's permit {acquired['token']} was not in {sc.params.key} right after "
            "the kill",
        )
        assert score is not None
        left_ms = score - redis_now
        require(
            0 < left_ms <= sc.params.ttl_ms,
            f"the dead permit had {left_ms:.0f} ms left right after the kill, want within its "
            f"own TTL ({sc.params.ttl_ms} ms): did another holder's renewal re-date it?",
        )
        expires_lo = asked + left_ms / 1000 - TOLERANCE
        expires_hi = answered + left_ms / 1000 + TOLERANCE
        # In the order the permit was granted: a waiter asks long before it is granted.
        granted = sorted((s for s in attempts if s.entered), key=lambda s: s.start or 0.0)
        refused = [s for s in attempts if s.outcome == "not_acquired"]
        require(granted, "nobody got the dead holder's permit")
        first = granted[0]
        assert first.start is not None
        early = [s for s in granted if s.start is not None and s.start < expires_lo]
        require(not early, f"a permit granted before the dead holder's expiry: {early}")
        require(
            any(
                s.attempt_started > killed_at
                and s.finished is not None
                and s.finished < expires_lo
                for s in refused
            ),
            "no attempt was refused between the kill and the expiry: the 'not before' check "
            "proved nothing",
        )
        # Within its own TTL of the kill: the live holder's renewals did not keep it.
        require(
            first.start <= max(expires_hi, killed_at + sc.params.ttl) + sc.params.slack,
            f"the dead permit was freed {1000 * (first.start - killed_at):.0f} ms after the "
            f"kill (TTL {sc.params.ttl_ms} ms, {left_ms:.0f} ms left at the kill)",
        )
    live_sections = [s for s in sc.recorder.sections if s.client == "live"]
    require(
        len(live_sections) == TRIALS and all(s.outcome == "ok" for s in live_sections),
        "the live holder did not keep its permit through every trial: "
        + "; ".join(s.describe(sc.recorder.origin) for s in live_sections),
    )
    sc.finish(expect="none")


def _live_holder(sc: Scenario, trial: int, done: threading.Event) -> threading.Thread:
    """A holder of one permit for the whole trial (until ``done``), renewed every
    ``LIVE_HEARTBEAT_MS``; returns once it is inside its body."""
    lock = sc.clients.sync_lock(
        sc.clients.sync_client(f"live-t{trial}", via_proxy=False),
        ttl_ms=LIVE_TTL_MS,
        heartbeat_ms=LIVE_HEARTBEAT_MS,
    )

    def hold_until_done(section: Section) -> None:
        done.wait(sc.params.ttl + 30)

    body = Body(0.0, at_start=hold_until_done)
    thread = threading.Thread(
        target=sc.sections.run_sync,
        args=(lock, "live", body),
        kwargs={"retries": 0, "retry_delay_ms": 0, "ttl_ms": LIVE_TTL_MS},
        name="chaos-live-holder",
        daemon=True,
    )
    thread.start()
    entered = sc.recorder.wait_until(
        lambda: any(s.client == "live" and s.end is None for s in sc.recorder.in_body())
        or not thread.is_alive(),
        20,
    )
    require(entered and thread.is_alive(), "the live holder never got its permit")
    return thread


def _score_and_time(sc: Scenario, token: str) -> tuple[float | None, float]:
    """The permit's expiry instant and Redis's clock, read together (ms)."""
    pipe = sc.admin.pipeline(transaction=True)
    pipe.zscore(sc.params.key, token)
    pipe.time()
    score, (seconds, micros) = pipe.execute()
    return score, seconds * 1000 + micros / 1000
