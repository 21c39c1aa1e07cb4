"""The asyncio Semaphore against a real redis-server.

As in the sync tests, what depends on time waits on Redis's own clock passing a permit's
expiry instant, and losses are forced by removing a permit behind its holder's back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from distlock import LockLeaseLostError, LockNotAcquiredError, LossReason, ValidationError
from distlock.asyncio import Lock, LockHandle, PermitHandle, ReentrantLock, Semaphore
from tests.redis_server import RedisServer, free_port

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


def redis_ms(r: redis.Redis) -> int:
    seconds, micros = r.time()
    return int(seconds) * 1000 + int(micros) // 1000


def wait_until_redis_passes(r: redis.Redis, instant: float) -> None:
    """Blocking on purpose where it is called: the loop must not run a timer meanwhile."""
    deadline = time.monotonic() + WAIT
    while redis_ms(r) <= instant:
        assert time.monotonic() < deadline
        time.sleep(0.02)


async def until_redis_passes(r: redis.Redis, instant: float) -> None:
    deadline = time.monotonic() + WAIT
    while redis_ms(r) <= instant:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.02)


def test_at_most_limit_permits_and_the_key_goes_with_the_last(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        async with Semaphore(client_for(redis_server), limit=2, ttl_ms=TTL) as sem:
            a, b = await sem.acquire("pool"), await sem.acquire("pool")
            assert a is not None and b is not None
            assert isinstance(a, PermitHandle) and a.key == "sem:pool"
            assert await sem.acquire("pool") is None
            with pytest.raises(LockNotAcquiredError):
                await sem.run("pool", _noop)
            assert r.zcard("sem:pool") == 2
            assert await a.release() is True
            assert await a.release() is False
            assert await sem.run("pool", _token) != b.token
            assert await b.release() is True
            assert r.exists("sem:pool") == 0

    arun(main)


async def _noop(permit: PermitHandle) -> None:
    return None


async def _token(permit: PermitHandle) -> str:
    return permit.token


def test_a_waiter_gets_a_permit_when_one_is_given_back(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        refused = asyncio.Event()

        def watch(event: dict[str, Any]) -> None:
            if event["action"] == "AcquireReply" and not event["granted"]:
                refused.set()

        async with Semaphore(client_for(redis_server), limit=1, ttl_ms=TTL, trace=watch) as sem:
            holder = await sem.acquire("k")
            assert holder is not None
            waiter = asyncio.create_task(sem.run("k", _token, retries=1_000, retry_delay_ms=10))
            await asyncio.wait_for(refused.wait(), WAIT)
            assert await holder.release() is True
            assert await asyncio.wait_for(waiter, WAIT) != holder.token

    arun(main)


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


def test_a_lost_permit_fires_the_signal_without_cancelling_when_asked(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        async with Semaphore(
            client_for(redis_server), limit=1, ttl_ms=TTL, heartbeat_ms=QUICK
        ) as sem:

            seen: list[bool] = []

            async def body(permit: PermitHandle) -> None:
                r.zrem(permit.key, permit.token)
                await asyncio.wait_for(permit.signal.wait(), WAIT)
                await asyncio.sleep(0)  # a cancel, had one been sent, would land here
                seen.append(permit.held)

            with pytest.raises(LockLeaseLostError) as info:
                await sem.run("k", body, cancel_on_loss=False)
            assert seen == [False]
            assert info.value.reason is LossReason.RENEW_REJECTED

    arun(main)


def test_renewal_keeps_the_permit_while_the_body_outlives_its_ttl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # The heartbeat is a tenth of the TTL: only a stall of the machine of nearly a whole
    # TTL between two renewals could cost the permit.
    async def main() -> None:
        async with Semaphore(
            client_for(redis_server), limit=1, ttl_ms=2_000, heartbeat_ms=200
        ) as sem:
            seen: list[float] = []

            async def body(permit: PermitHandle) -> bool:
                first = r.zscore(permit.key, permit.token)
                assert first is not None
                # Past the first TTL in Redis's time: only renewals can have kept it.
                await until_redis_passes(r, first)
                later = r.zscore(permit.key, permit.token)
                seen.extend([first, later or 0.0])
                return permit.held

            assert await sem.run("k", body) is True
            assert seen[1] > seen[0]
            assert r.exists("sem:k") == 0

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


def test_a_dead_holder_s_permit_is_reclaimed_while_another_renews(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        async with Semaphore(client_for(redis_server), limit=2, ttl_ms=TTL) as sem:
            dead = await sem.acquire("k", ttl_ms=1_000)
            assert dead is not None
            ends = r.zscore("sem:k", dead.token)
            assert ends is not None
            async with sem.hold("k", heartbeat_ms=QUICK) as alive:
                await until_redis_passes(r, ends)
                assert r.zscore("sem:k", dead.token) == ends  # renewals left it alone
                third = await sem.acquire("k")
                assert third is not None
                assert r.zscore("sem:k", dead.token) is None
                assert alive.held
                assert await third.release() is True
            assert await dead.release() is False

    arun(main)


def test_locks_and_semaphores_refuse_each_other_s_keys(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        client = client_for(redis_server)
        async with (
            Semaphore(client, limit=2, ttl_ms=TTL) as sem,
            Lock(client, prefix="sem") as locks,
            ReentrantLock(client, prefix="sem") as rlocks,
        ):
            permit = await sem.acquire("shared")
            assert permit is not None
            assert await locks.acquire("shared") is None
            assert await rlocks.acquire("shared") is None
            lock = await locks.acquire("lock-held")
            rlock = await rlocks.acquire("rlock-held")
            assert lock is not None and rlock is not None
            assert await sem.acquire("lock-held") is None
            assert await sem.acquire("rlock-held") is None
            with pytest.raises(LockNotAcquiredError, match="sem:rlock-held"):
                await sem.run("rlock-held", _noop)
            assert await permit.release() is True
            assert await lock.release() is True and await rlock.release() is True

    arun(main)


@pytest.mark.parametrize("limit", [0, -3, 1.5, "1", True, None])
def test_a_bad_limit_is_rejected_before_any_command(limit: object) -> None:
    made: list[int] = []

    def factory() -> aredis.Redis:
        made.append(1)
        return aredis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0))

    with pytest.raises(ValidationError, match="limit"):
        Semaphore(factory, limit=limit)  # type: ignore[arg-type]
    assert made == []


def test_bad_options_are_rejected_before_any_command() -> None:
    async def main() -> None:
        client = aredis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0))
        async with Semaphore(client, limit=1) as sem:
            with pytest.raises(ValidationError):
                await sem.acquire("k", ttl_ms=0)
            with pytest.raises(ValidationError):
                sem.hold("k", heartbeat_ms=-1)
            with pytest.raises(ValidationError):
                await sem.run("", _noop)

    arun(main)


def test_a_semaphore_offers_only_what_it_supports(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """As the sync one: no Lock, no ``hold_many``/``run_many`` nor ``owner``, and permits
    with no fence: the attributes are absent, not ones that raise."""

    async def fenced(permit: PermitHandle) -> bool:
        return hasattr(permit, "fence")

    async def main() -> None:
        async with Semaphore(client_for(redis_server), limit=2, ttl_ms=TTL) as sem:
            assert not isinstance(sem, Lock | ReentrantLock)
            for name in ("hold_many", "run_many", "owner"):
                assert not hasattr(Semaphore, name) and not hasattr(sem, name)
                with pytest.raises(AttributeError):
                    getattr(sem, name)
            permit = await sem.acquire("k")
            assert permit is not None and not isinstance(permit, LockHandle)
            assert not hasattr(PermitHandle, "fence") and not hasattr(permit, "fence")
            with pytest.raises(AttributeError):
                _ = permit.fence  # type: ignore[attr-defined]
            async with sem.hold("k") as held:
                assert not hasattr(held, "fence") and held.held
            assert await sem.run("k", fenced) is False
            assert await permit.release() is True
            assert await sem.locked("k") is False and await sem.force_unlock("k") is False
            assert r.exists("sem:k") == 0

    arun(main)
