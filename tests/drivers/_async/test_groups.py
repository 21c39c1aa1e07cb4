"""Several locks held together, on both drivers against a real redis-server: one global
order, all or nothing, one signal.  (Asyncio cancels a group's body once however many of
its keys are lost: ``tests/drivers/test_groups_asyncio.py``.)"""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis

from distlock import LockLeaseLostError, LockNotAcquiredError, LossReason, ValidationError
from distlock.asyncio import Lock, LockGroup
from tests.redis_server import RedisServer

from .concurrency import UNCANCELLED, client_for, closed_port_client, gather, signalled


async def keys_of(group: LockGroup) -> list[str]:
    return group.keys


async def nothing(group: LockGroup) -> None:
    return None


async def test_taken_in_sorted_order_whatever_the_callers_order(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    acquired: list[str] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            acquired.append(event["key"])

    async with Lock(client_for(redis_server), prefix="acct", trace=trace) as locks:
        keys = await locks.run_many(["c", "a", "b"], keys_of)
        assert keys == ["acct:a", "acct:b", "acct:c"]
        assert acquired == keys
        assert r.keys("acct:?") == []


async def test_group_handles_by_id_and_fences(redis_server: RedisServer, r: redis.Redis) -> None:
    locks = Lock(client_for(redis_server), prefix="acct")
    async with locks, locks.hold_many(["x", "y"]) as group:
        assert isinstance(group, LockGroup)
        assert group["x"].key == "acct:x"
        assert set(group.fences) == {"acct:x", "acct:y"}
        assert r.get("acct:y") == group["y"].token.encode()
        with pytest.raises(KeyError):
            group["z"]


async def test_all_or_nothing_when_one_is_held(redis_server: RedisServer, r: redis.Redis) -> None:
    async with Lock(client_for(redis_server), prefix="acct") as locks:
        holder = await locks.acquire("b")
        assert holder is not None
        with pytest.raises(LockNotAcquiredError) as info:
            await locks.run_many(["a", "b", "c"], nothing)
        assert info.value.key == "acct:b"
        assert r.get("acct:a") is None  # taken first, given back
        assert r.get("acct:c") is None  # never reached
        assert await holder.release()


async def test_loss_of_one_is_the_groups_loss(redis_server: RedisServer, r: redis.Redis) -> None:
    async def body(group: LockGroup) -> str:
        r.delete("acct:b")
        await signalled(group.signal)
        return "finished anyway"

    # A long lease and a short heartbeat: the next renewal finds the key gone long before
    # the deadline could pass, however loaded the machine.
    client = client_for(redis_server)
    async with Lock(client, prefix="acct", ttl_ms=10_000, heartbeat_ms=100) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            await locks.run_many(["a", "b"], body, **UNCANCELLED)
        assert info.value.key == "acct:b"
        assert info.value.reason is LossReason.RENEW_REJECTED
        assert r.keys("acct:?") == []  # the other one released too


async def test_opposite_orders_never_deadlock(redis_server: RedisServer) -> None:
    # Each caller names the two locks in its own order; the group takes them sorted, so
    # neither can hold one while waiting for the other.
    inside: dict[str, int] = {"acct:a": 0, "acct:b": 0}
    guard = threading.Lock()  # the callers may be threads
    overlaps = 0
    done = 0

    async def body(group: LockGroup) -> None:
        nonlocal overlaps
        with guard:
            for key in group.keys:
                inside[key] += 1
                overlaps += inside[key] > 1
        with guard:
            for key in group.keys:
                inside[key] -= 1

    async with Lock(client_for(redis_server), prefix="acct", ttl_ms=5_000) as locks:

        async def caller(ids: list[str]) -> None:
            nonlocal done
            for _ in range(20):
                await locks.run_many(ids, body, retries=10_000, retry_delay_ms=1)
            with guard:
                done += 20

        results = await gather(
            *(lambda ids=ids: caller(ids) for ids in (["a", "b"], ["b", "a"], ["b", "a"]))
        )
    assert results == [None] * 3
    assert done == 60
    assert overlaps == 0


@pytest.mark.parametrize("ids", [[], ["a", "a"], "ab", ["a", ""]])
async def test_bad_groups_are_rejected_before_any_command(ids: Any) -> None:
    async with Lock(closed_port_client()) as locks:
        with pytest.raises(ValidationError):
            locks.hold_many(ids)
