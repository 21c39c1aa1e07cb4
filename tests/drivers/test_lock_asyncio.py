"""The asyncio Lock only: a loss cancels the body, a blocked event loop, and cancellation
at every await point (a thread cannot be cancelled, so the sync driver has none of these;
what both drivers share is in ``tests/drivers/_async/test_lock.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio as aredis

from distlock import LockLeaseLostError, LossReason
from distlock.asyncio import Lock, LockHandle
from tests.redis_server import RedisServer

T = TypeVar("T")
WAIT = 10.0
#: A renewal interval far below the TTL: a test that waits for a renewal's verdict gets it
#: within one heartbeat, and no stall of the machine short of the whole TTL can turn it
#: into a deadline loss instead.
QUICK_HEARTBEAT_MS = 100


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(60):  # no extra task, unlike wait_for on 3.11
            return await fn()

    return asyncio.run(main())


def client_for(server: RedisServer, **kw: Any) -> aredis.Redis:
    return aredis.Redis(port=server.port, **kw)


def test_loss_cancels_the_body_and_raises(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        # The deadline is ten seconds away: the next renewal, one short heartbeat later, is
        # what must find the key gone.
        async with Lock(client_for(redis_server), prefix="c", ttl_ms=10_000,
                        heartbeat_ms=QUICK_HEARTBEAT_MS) as locks:
            reached: list[str] = []

            async def body(h: LockHandle) -> None:
                r.delete(h.key)
                try:
                    await asyncio.sleep(WAIT)
                except asyncio.CancelledError:
                    reached.append("cancelled")
                    raise
                reached.append("finished")

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", body)
            assert reached == ["cancelled"]
            assert info.value.reason is LossReason.RENEW_REJECTED
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0  # our cancel was consumed

    arun(main)


def test_blocked_event_loop_is_caught_at_completion(redis_server: RedisServer) -> None:
    ttl_ms = 500
    sent_at: list[float] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            sent_at.append(event["t"])

    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="b", ttl_ms=ttl_ms,
                        trace=trace) as locks:
            ran: list[int] = []

            async def body(h: LockHandle) -> str:
                ran.append(1)
                # The fault: the loop is blocked until the lease, counted from the acquire's
                # send, is over on the client's clock (the trace's t); no timer runs, and
                # the body ends past its deadline.  The grant and the start of the body are
                # one step of the task, so no renewal tick can run before the block either.
                left_ms = sent_at[0] + ttl_ms - time.monotonic() * 1000
                time.sleep(max(0.0, left_ms) / 1000 + 0.001)  # noqa: ASYNC251
                return "done"

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", body)
            assert ran == [1]
            assert info.value.reason is LossReason.DEADLINE_AT_COMPLETION

    arun(main)


# -- cancellation at every await point ------------------------------------------------------
#
# Each test parks a task at one await point (writes paused with CLIENT PAUSE WRITE, which
# holds scripts unexecuted, or an event never set), cancels it there, lets Redis go on, and
# checks that the key is free again and no task is left behind.
#
# The clients have no socket timeout.  With one, redis-py sends each command under
# asyncio.wait_for, which on Python 3.11 returns the send's result and drops a cancel that
# arrives after the send completed but before the task resumed: exactly when a script is
# first seen parked in Redis.  The cancel would then be lost before distlock ever saw it.


def cancellable_client(server: RedisServer) -> aredis.Redis:
    return client_for(server, socket_timeout=None)


async def settle(locks: Lock) -> None:
    """Wait for shielded releases still in flight (what aclose() does)."""
    await locks.aclose()


async def parked_scripts(r: redis.Redis, count: int) -> None:
    """Until ``count`` clients are held by the pause with a script call."""
    while True:
        blocked = [
            c for c in r.client_list() if c.get("cmd") in ("evalsha", "eval") and "b" in c["flags"]
        ]
        if len(blocked) >= count:
            return
        await asyncio.sleep(0.005)  # polling the server: it has no event to wait on


def pause_writes(r: redis.Redis) -> None:
    r.client_pause(60_000, all=False)  # writes only: scripts wait unexecuted


def unpause(r: redis.Redis) -> None:
    r.client_unpause()


def test_cancel_during_acquire_round_trip(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="x", ttl_ms=60_000)
        pause_writes(r)
        try:
            task = asyncio.create_task(locks.run("k", lambda h: asyncio.sleep(0)))
            await parked_scripts(r, 1)
            task.cancel()
            await asyncio.sleep(0)  # the shielded cleanup release is sent
        finally:
            unpause(r)
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle(locks)
        assert r.get("x:k") is None  # never acquired, or acquired and released with our token

    arun(main)


def test_cancel_during_retry_backoff(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        refused = asyncio.Event()

        def trace(event: dict[str, Any]) -> None:
            if event["action"] == "AcquireReply" and not event["granted"]:
                refused.set()

        locks = Lock(cancellable_client(redis_server), prefix="y", ttl_ms=60_000, trace=trace)
        holder = await locks.acquire("k")
        assert holder is not None
        task = asyncio.create_task(
            locks.run("k", lambda h: asyncio.sleep(0), retries=1000, retry_delay_ms=20)
        )
        # The refusal is traced inside the task, which then awaits its backoff: by the time
        # this wakes up, the task is parked in that sleep.
        await asyncio.wait_for(refused.wait(), WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert r.get("y:k") == holder.token.encode()  # the holder was never disturbed
        assert await holder.release() is True
        await settle(locks)

    arun(main)


def test_cancel_during_body_releases(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="z", ttl_ms=60_000)
        entered = asyncio.Event()

        async def body(h: LockHandle) -> None:
            entered.set()
            await asyncio.Event().wait()

        task = asyncio.create_task(locks.run("k", body))
        await entered.wait()
        assert r.get("z:k") is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert r.get("z:k") is None
        await settle(locks)

    arun(main)


def test_cancel_during_release_still_releases(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="w", ttl_ms=60_000)

        async def body(h: LockHandle) -> None:
            pause_writes(r)  # the release will be held until unpaused

        try:
            task = asyncio.create_task(locks.run("k", body))
            await parked_scripts(r, 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert r.get("w:k") is not None  # the release has not run yet...
        finally:
            unpause(r)
        await settle(locks)
        assert r.get("w:k") is None  # ...and it still ran to the end

    arun(main)


def test_cancel_during_manual_extend_and_release(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="v", ttl_ms=60_000)
        h = await locks.acquire("k")
        assert h is not None
        pause_writes(r)
        try:
            extending = asyncio.create_task(h.extend())
            await parked_scripts(r, 1)
            extending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await extending
        finally:
            unpause(r)
        assert h.held  # a cancelled extend says nothing about ownership

        pause_writes(r)
        try:
            releasing = asyncio.create_task(h.release())
            await parked_scripts(r, 1)
            releasing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await releasing
        finally:
            unpause(r)
        await settle(locks)
        assert r.get("v:k") is None

    arun(main)
