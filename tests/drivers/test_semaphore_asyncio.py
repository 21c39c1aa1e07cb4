"""The asyncio Semaphore only: a lost permit cancels the body, a blocked event loop is
caught at the body's end, and a waiter cancelled in the queue leaves nothing behind (a
thread is neither cancelled nor blocks a loop; what both drivers share is in
``tests/drivers/_async/test_semaphore.py`` and ``tests/drivers/_async/test_semaphore_wait.py``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest
import redis
import redis.asyncio as aredis

from distlock import LockLeaseLostError, LossReason
from distlock.asyncio import PermitHandle, Semaphore
from tests.redis_server import RedisServer, redis_ms
from tests.waiting import FOREVER_MS, queue, until_async, waiting_keys

T = TypeVar("T")
WAIT = 10.0
TTL = 30_000
QUICK = 100


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(60):
            return await fn()

    return asyncio.run(main())


def client_for(server: RedisServer) -> aredis.Redis:
    return aredis.Redis(port=server.port)



def wait_until_redis_passes(r: redis.Redis, instant: float) -> None:
    """Blocking on purpose where it is called: the loop must not run a timer meanwhile."""
    deadline = time.monotonic() + WAIT
    while redis_ms(r) <= instant:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_lost_permit_cancels_the_body(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with Semaphore(
            client_for(redis_server), limit=3, ttl_ms=TTL, heartbeat_ms=QUICK
        ) as sem:
            reached: list[str] = []

            async def body(permit: PermitHandle) -> None:
                r.zrem(permit.key, permit.token)
                reached.append("removed")
                await asyncio.sleep(WAIT * 2)  # cancelled at the next renewal
                reached.append("not cancelled")

            with pytest.raises(LockLeaseLostError) as info:
                await sem.run("k", body)
            assert reached == ["removed"]
            assert info.value.reason is LossReason.RENEW_REJECTED

    arun(main)


def test_the_completion_check_catches_a_loop_blocked_past_the_permit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        async with Semaphore(client_for(redis_server), limit=1, ttl_ms=1_000) as sem:

            async def body(permit: PermitHandle) -> str:
                ends = r.zscore(permit.key, permit.token)
                assert ends is not None
                # The loop is blocked until the permit is over in Redis's time: no timer
                # runs, so only the check at the body's end can see it.
                wait_until_redis_passes(r, ends)
                return "done"

            with pytest.raises(LockLeaseLostError) as info:
                await sem.run("k", body)
            assert info.value.reason is LossReason.DEADLINE_AT_COMPLETION
            assert r.exists("sem:k") == 0

    arun(main)


def test_asyncio_waiter_is_woken_and_a_cancelled_one_leaves_nothing(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def queued(n: int) -> bool:
        return len(queue(r, "sa:k")) == n

    async def main() -> None:
        client = aredis.Redis(port=redis_server.port)
        async with Semaphore(client, prefix="sa", limit=1, ttl_ms=30_000) as sems:
            holder = await sems.acquire("k")
            assert holder is not None
            woken = asyncio.ensure_future(sems.acquire("k", wait_ms=FOREVER_MS))
            await until_async(lambda: queued(1), "the first waiter queued")
            cancelled = asyncio.ensure_future(sems.acquire("k", wait_ms=FOREVER_MS))
            await until_async(lambda: queued(2), "the second waiter queued")
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert len(queue(r, "sa:k")) == 1  # the cancelled waiter's place is gone
            assert await holder.release() is True
            permit = await woken
            assert permit is not None and await permit.release() is True
        await client.aclose()

    arun(main)
    assert waiting_keys(r) == [] and r.exists("sa:k") == 0
