"""Several locks held together: one global order, all or nothing, one signal."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from distlock import (
    Lock,
    LockGroup,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ValidationError,
)
from distlock.asyncio import Lock as AsyncLock
from distlock.asyncio import LockGroup as AsyncLockGroup
from tests.redis_server import RedisServer

WAIT = 10.0


def test_taken_in_sorted_order_whatever_the_callers_order(r: redis.Redis) -> None:
    acquired: list[str] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            acquired.append(event["key"])

    with Lock(r, prefix="acct", trace=trace) as locks:
        keys = locks.run_many(["c", "a", "b"], lambda g: g.keys)
        assert keys == ["acct:a", "acct:b", "acct:c"]
        assert acquired == keys
        assert r.keys("acct:?") == []


def test_group_handles_by_id_and_fences(r: redis.Redis) -> None:
    with Lock(r, prefix="acct") as locks, locks.hold_many(["x", "y"]) as group:
        assert isinstance(group, LockGroup)
        assert group["x"].key == "acct:x"
        assert set(group.fences) == {"acct:x", "acct:y"}
        assert r.get("acct:y") == group["y"].token.encode()
        with pytest.raises(KeyError):
            group["z"]


def test_all_or_nothing_when_one_is_held(r: redis.Redis) -> None:
    with Lock(r, prefix="acct") as locks:
        holder = locks.acquire("b")
        assert holder is not None
        with pytest.raises(LockNotAcquiredError) as info:
            locks.run_many(["a", "b", "c"], lambda g: None)
        assert info.value.key == "acct:b"
        assert r.get("acct:a") is None  # taken first, given back
        assert r.get("acct:c") is None  # never reached
        assert holder.release()


def test_loss_of_one_is_the_groups_loss(r: redis.Redis) -> None:
    def body(group: LockGroup) -> str:
        r.delete("acct:b")
        assert group.signal.wait(WAIT)
        return "finished anyway"

    # A long lease and a short heartbeat: the next renewal finds the key gone long before
    # the deadline could pass, however loaded the machine.
    with Lock(r, prefix="acct", ttl_ms=10_000, heartbeat_ms=100) as locks:
        with pytest.raises(LockLeaseLostError) as info:
            locks.run_many(["a", "b"], body)
        assert info.value.key == "acct:b"
        assert info.value.reason is LossReason.RENEW_REJECTED
        assert r.keys("acct:?") == []  # the other one released too


def test_opposite_orders_never_deadlock(r: redis.Redis) -> None:
    # Each caller names the two locks in its own order; the group takes them sorted, so
    # neither can hold one while waiting for the other.
    inside: dict[str, int] = {"acct:a": 0, "acct:b": 0}
    guard = threading.Lock()
    overlaps = 0
    done = 0

    def body(group: LockGroup) -> None:
        nonlocal overlaps
        with guard:
            for key in group.keys:
                inside[key] += 1
                overlaps += inside[key] > 1
        with guard:
            for key in group.keys:
                inside[key] -= 1

    def caller(ids: list[str]) -> None:
        nonlocal done
        for _ in range(20):
            locks.run_many(ids, body, retries=10_000, retry_delay_ms=1)
        with guard:
            done += 20

    with Lock(r, prefix="acct", ttl_ms=5_000) as locks:
        threads = [
            threading.Thread(target=caller, args=(ids,))
            for ids in (["a", "b"], ["b", "a"], ["b", "a"])
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(WAIT * 6)
    assert done == 60
    assert overlaps == 0


@pytest.mark.parametrize("ids", [[], ["a", "a"], "ab", ["a", ""]])
def test_bad_groups_are_rejected_before_any_command(ids: Any) -> None:
    with Lock(redis.Redis(port=1)) as locks, pytest.raises(ValidationError):
        locks.hold_many(ids)


def test_async_group_loss_cancels_the_body_once(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        client = aredis.Redis(port=redis_server.port)
        async with AsyncLock(client, prefix="g", ttl_ms=10_000, heartbeat_ms=100) as locks:
            cancelled: list[int] = []

            async def body(group: AsyncLockGroup) -> None:
                assert isinstance(group, AsyncLockGroup)
                r.delete("g:a", "g:b")  # both lost: still one cancel, one error
                try:
                    await asyncio.sleep(WAIT)
                except asyncio.CancelledError:
                    cancelled.append(1)
                    raise

            with pytest.raises(LockLeaseLostError):
                await locks.run_many(["b", "a"], body)
            assert cancelled == [1]
            task = asyncio.current_task()
            assert task is not None
            assert task.cancelling() == 0
            assert r.keys("g:?") == []

            async def fine(group: AsyncLockGroup) -> list[str]:
                return group.keys

            assert await locks.run_many(["y", "x"], fine) == ["g:x", "g:y"]
            held = await locks.acquire("y")
            assert held is not None
            with pytest.raises(LockNotAcquiredError):
                await locks.run_many(["x", "y"], fine)
            assert r.get("g:x") is None
            assert await held.release()

    asyncio.run(main())
