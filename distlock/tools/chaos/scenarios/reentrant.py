"""The reentrant lock under the faults that make a lease lapse.

Victims and intruder hold ``ReentrantLock``s; each victim's body re-enters the key
(``with locks.hold(key) as inner``, depth 2) and does its work there, so every fault lands
while two levels are open.  Besides what every scenario checks, the loss must surface at
both levels: the inner level's exit and the outermost level's exit each raise
``LockLeaseLostError`` (``Scenario.finish`` and ``invariants.check`` hold them to it).  A
re-entry refreshes the TTL, so its reply of 1 counts as a lease write for the detection
bound, like a renewal's; an inner exit's does not.

The first trial of each is traced and checked by TLC against ``spec/Reentrant.tla``
(``spec/ReentrantTrace.tla``).  That trace check maps a key's sections onto the spec's
three holders, one section at a time each, so the traced trial has one victim
(``trials.TRACED_VICTIMS``, as the plain lock's has) beside the intruder and its waiter;
the others keep three.  A declared data loss (Redis restarted empty) is checked as the lock's is: a
key loss that may reset the fence counter; the sync trial of the restart is still skipped
for its failed round trips (the intruder's attempts refused while Redis is down, each a
new section).  The starving bodies are excluded as the lock's are.
"""

from __future__ import annotations

from distlock.tools.chaos.registration import MODES, Context, scenario
from distlock.tools.chaos.scenarios import network, redis_process, starvation


@scenario(
    "reentrant-renewal-that-hangs-forever",
    "reentrant, depth 2: renewal hangs forever (timeout toxic) [{mode}]",
    "ReentrantLock at depth 2, requests or replies dropped on an open connection: "
    "the lapse is surfaced at both levels",
    modes=MODES,
)
def reentrant_renewal_that_hangs_forever(ctx: Context, mode: str) -> None:
    network.renewal_that_hangs_forever(ctx, mode, reentrant=True)


@scenario(
    "reentrant-redis-paused-past-the-ttl",
    "reentrant, depth 2: Redis paused (SIGSTOP) 2.5xTTL [{mode}]",
    "ReentrantLock at depth 2, redis-server paused for 2.5xTTL: "
    "the lapse is surfaced at both levels",
    modes=MODES,
    needs_own_redis=True,
)
def reentrant_redis_paused_past_the_ttl(ctx: Context, mode: str) -> None:
    redis_process.redis_paused_past_the_ttl(ctx, mode, reentrant=True)


@scenario(
    "reentrant-redis-killed-and-restarted-empty",
    "reentrant, depth 2: Redis killed, restarted empty [{mode}]",
    "ReentrantLock at depth 2, redis-server SIGKILLed and restarted without data: "
    "the lapse is surfaced at both levels",
    modes=MODES,
    needs_own_redis=True,
)
def reentrant_redis_killed_and_restarted_empty(ctx: Context, mode: str) -> None:
    redis_process.redis_killed_and_restarted_empty(ctx, mode, reentrant=True)


@scenario(
    "reentrant-asyncio-body-blocks-the-event-loop",
    "reentrant, depth 2: body blocks the event loop 2xTTL [asyncio]",
    "ReentrantLock at depth 2, time.sleep(2xTTL) in the coroutine: "
    "the loss is surfaced at both levels when the loop resumes",
)
def reentrant_asyncio_body_blocks_the_event_loop(ctx: Context) -> None:
    starvation.asyncio_body_blocks_the_event_loop(ctx, reentrant=True)


@scenario(
    "reentrant-sync-body-holds-the-gil",
    "reentrant, depth 2: body holds the GIL 2xTTL in a C call [sync]",
    "ReentrantLock at depth 2, a C call keeps the GIL for 2xTTL (intruder in another "
    "process): the loss is surfaced at both levels",
)
def reentrant_sync_body_holds_the_gil(ctx: Context) -> None:
    starvation.sync_body_holds_the_gil(ctx, reentrant=True)
