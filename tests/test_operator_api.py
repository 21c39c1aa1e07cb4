"""``locked``, ``owner`` and ``force_unlock``: what users of redis-py's Lock,
python-redis-lock and Redisson reach for, on both drivers, against a real redis-server.

Clients are built as users build them (``from_url`` with defaults, and with
``decode_responses=True``); waits are on events, or on Redis's own state where only
Redis knows (a waiter in the queue)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import (
    Lock,
    LockLeaseLostError,
    LockOwner,
    LossReason,
    ReentrantLock,
    Semaphore,
    ValidationError,
)
from distlock._protocol import fence_key, queue_keys
from tests.redis_server import RedisServer
from tests.waiting import Waiter, until

FOREVER_MS = 60_000


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def client(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[redis.Redis]:
    made = redis.Redis.from_url(redis_server.url, decode_responses=request.param)
    made.flushall()
    yield made
    made.close()


# -- locked ------------------------------------------------------------------------------


def test_locked_is_whether_anyone_holds_the_key(client: redis.Redis) -> None:
    with Lock(client, prefix="op", ttl_ms=FOREVER_MS) as mine, \
            Lock(client, prefix="op") as theirs:
        assert mine.locked("k") is False
        handle = mine.acquire("k")
        assert handle is not None
        assert mine.locked("k") is True and theirs.locked("k") is True
        assert theirs.locked("other") is False
        assert handle.release() is True
        assert mine.locked("k") is False


def test_semaphore_locked_is_no_permit_free_for_its_limit(client: redis.Redis) -> None:
    with Semaphore(client, limit=2, prefix="ops", ttl_ms=FOREVER_MS) as sem, \
            Semaphore(client, limit=3, prefix="ops") as wider:
        first = sem.acquire("k")
        assert first is not None
        assert sem.locked("k") is False  # one of two taken
        second = sem.acquire("k")
        assert second is not None
        assert sem.locked("k") is True and wider.locked("k") is False
        assert first.release() is True
        assert sem.locked("k") is False
        assert not hasattr(sem, "owner")  # its permits have several holders


def test_bad_ids_are_refused_before_anything_is_sent(client: redis.Redis) -> None:
    with Lock(client, prefix="op") as locks:
        for call in (locks.locked, locks.owner, locks.force_unlock):
            with pytest.raises(ValidationError):
                call("")


# -- owner --------------------------------------------------------------------------------


def test_owner_tells_its_own_holder_from_another_lock_objects(client: redis.Redis) -> None:
    with Lock(client, prefix="op", ttl_ms=FOREVER_MS) as mine, \
            Lock(client, prefix="op") as theirs:
        assert mine.owner("k") is None
        handle = mine.acquire("k")
        assert handle is not None
        seen = mine.owner("k")
        assert isinstance(seen, LockOwner)
        assert seen.key == "op:k" and seen.token_prefix == handle.token[:8]
        assert seen.ttl_ms is not None and 0 < seen.ttl_ms <= FOREVER_MS
        assert seen.fence is None  # a Lock's fence lives in its handle only
        other = theirs.owner("k")
        assert other is not None
        assert other.token_prefix == handle.token[:8]
        with pytest.raises(AttributeError):
            seen.ttl_ms = 0  # type: ignore[misc]  # frozen
        handle.release()
        assert mine.owner("k") is None


def test_owner_of_a_reentrant_lock_knows_its_fence(client: redis.Redis) -> None:
    with ReentrantLock(client, prefix="opr", ttl_ms=FOREVER_MS) as rlocks, \
            rlocks.hold("k") as outer, rlocks.hold("k"):
        seen = rlocks.owner("k")
        assert seen is not None
        assert seen.fence == outer.fence and seen.token_prefix == outer.token[:8]
        # A plain Lock on the same key (another type) reads it without a WRONGTYPE error.
        with Lock(client, prefix="opr") as plain:
            assert plain.locked("k") is True
            foreign = plain.owner("k")
            assert foreign is not None
            assert foreign.fence == outer.fence


def test_owner_of_a_key_held_by_a_semaphore_is_reported_without_wrongtype(
    client: redis.Redis,
) -> None:
    with Semaphore(client, limit=2, prefix="opx", ttl_ms=FOREVER_MS) as sem, \
            Lock(client, prefix="opx") as locks, sem.hold("k"):
        seen = locks.owner("k")
        assert seen is not None
        assert seen.token_prefix is None and seen.fence is None
        assert seen.ttl_ms is not None and seen.ttl_ms > 0
        assert locks.locked("k") is True


def test_a_key_without_a_ttl_is_reported_as_such(client: redis.Redis) -> None:
    client.set("op:stuck", "0" * 32)
    with Lock(client, prefix="op") as locks:
        seen = locks.owner("stuck")
        assert seen is not None and seen.ttl_ms is None and seen.token_prefix == "0" * 8


# -- force_unlock -------------------------------------------------------------------------


def test_force_unlock_evicts_the_holder_bumps_the_fence_and_the_holder_learns_it(
    client: redis.Redis,
) -> None:
    evicted = threading.Event()
    fences: dict[str, int] = {}

    def body(handle: distlock.LockHandle) -> None:
        fences["evicted"] = handle.fence
        evicted.set()
        # Its next renewal finds the key gone: the signal fires.
        assert handle.signal.wait(30)

    with Lock(client, prefix="opf", ttl_ms=FOREVER_MS, heartbeat_ms=20) as locks, \
            Lock(client, prefix="opf") as operator:
        holder = Waiter(lambda: locks.run("k", body))
        holder.start()
        assert evicted.wait(30)
        counter = int(client.get(fence_key("opf:k")) or 0)
        assert operator.force_unlock("k") is True
        # The counter moved in the same step: above the evicted holder's fence already (by
        # one, or up to the floor of Redis's clock if that is further: lib/fence.lua).
        assert int(client.get(fence_key("opf:k")) or 0) > counter
        holder.join(30)
        assert isinstance(holder.error, LockLeaseLostError)
        assert holder.error.reason is LossReason.RENEW_REJECTED
        assert operator.force_unlock("k") is False  # nothing left to delete
        taken = operator.acquire("k")
        assert taken is not None and taken.fence > fences["evicted"] + 1
        taken.release()


def test_force_unlock_wakes_the_first_waiter(client: redis.Redis) -> None:
    with Lock(client, prefix="opw", ttl_ms=FOREVER_MS) as locks:
        held = locks.acquire("k")
        assert held is not None
        waiter = Waiter(lambda: locks.acquire("k", wait_ms=FOREVER_MS))
        waiter.start()
        until(lambda: client.llen(queue_keys("opw:k")[0]) == 1, "the waiter queued")
        assert locks.force_unlock("k") is True
        waiter.join(30)
        assert not waiter.is_alive()
        woken = waiter.result
        assert isinstance(woken, distlock.LockHandle) and woken.fence > held.fence + 1
        assert held.release() is False  # the evicted handle learns at its release
        woken.release()


def test_force_unlock_of_a_semaphore_frees_every_permit(client: redis.Redis) -> None:
    with Semaphore(client, limit=1, prefix="opsf", ttl_ms=FOREVER_MS) as sem:
        permit = sem.acquire("k")
        assert permit is not None and sem.locked("k") is True
        assert sem.force_unlock("k") is True
        assert sem.locked("k") is False
        again = sem.acquire("k")
        assert again is not None
        again.release()


# -- asyncio ------------------------------------------------------------------------------


def test_asyncio_locked_owner_and_force_unlock(redis_server: RedisServer) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        await client.flushall()
        async with distlock.asyncio.Lock(client, prefix="aop", ttl_ms=FOREVER_MS) as mine, \
                distlock.asyncio.Lock(client, prefix="aop") as theirs:
            assert await mine.locked("k") is False and await mine.owner("k") is None
            handle = await mine.acquire("k")
            assert handle is not None
            assert await theirs.locked("k") is True
            seen = await mine.owner("k")
            assert seen is not None
            assert seen.token_prefix == handle.token[:8] and seen.fence is None
            other = await theirs.owner("k")
            assert other is not None

            waiting = asyncio.create_task(theirs.acquire("k", wait_ms=FOREVER_MS))
            queue = queue_keys("aop:k")[0]
            async with asyncio.timeout(30):
                while await client.llen(queue) == 0:  # noqa: ASYNC110  # Redis's state
                    await asyncio.sleep(0.005)
            assert await theirs.force_unlock("k") is True
            woken = await asyncio.wait_for(waiting, 30)
            assert woken is not None and woken.fence > handle.fence + 1
            assert await handle.release() is False
            assert await woken.release() is True
            assert await theirs.force_unlock("k") is False

        async with distlock.asyncio.ReentrantLock(client, prefix="aopr") as rlocks, \
                rlocks.hold("k") as outer:
            seen = await rlocks.owner("k")
            assert seen is not None and seen.fence == outer.fence

        async with distlock.asyncio.Semaphore(client, limit=1, prefix="aops") as sem:
            permit = await sem.acquire("k")
            assert permit is not None and await sem.locked("k") is True
            assert not hasattr(sem, "owner")
            assert await sem.force_unlock("k") is True
            assert await sem.locked("k") is False
        await client.aclose()

    asyncio.run(main())


def test_both_drivers_offer_the_same_operator_methods() -> None:
    for name in ("locked", "owner", "force_unlock"):
        for cls in (Lock, ReentrantLock, Semaphore, distlock.asyncio.Lock,
                    distlock.asyncio.ReentrantLock, distlock.asyncio.Semaphore):
            if name == "owner" and cls.__name__ == "Semaphore":
                assert not hasattr(cls, name), cls  # no one owner: several holders
            else:
                assert callable(getattr(cls, name)), (cls, name)
