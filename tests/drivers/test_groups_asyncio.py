"""An asyncio group's body is cancelled once however many of its keys are lost, and the
caller's task is left uncancelled (a thread cannot be cancelled, so the sync driver has no
such test; what both drivers share is in ``tests/drivers/_async/test_groups.py``)."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio as aredis

from distlock import LockLeaseLostError, LockNotAcquiredError
from distlock.asyncio import Lock, LockGroup
from tests.redis_server import RedisServer

WAIT = 10.0


async def test_async_group_loss_cancels_the_body_once(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = aredis.Redis(port=redis_server.port)
    async with Lock(client, prefix="g", ttl_ms=10_000, heartbeat_ms=100) as locks:
        cancelled: list[int] = []

        async def body(group: LockGroup) -> None:
            assert isinstance(group, LockGroup)
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

        async def fine(group: LockGroup) -> list[str]:
            return group.keys

        assert await locks.run_many(["y", "x"], fine) == ["g:x", "g:y"]
        held = await locks.acquire("y")
        assert held is not None
        with pytest.raises(LockNotAcquiredError):
            await locks.run_many(["x", "y"], fine)
        assert r.get("g:x") is None
        assert await held.release()
    await client.aclose()
