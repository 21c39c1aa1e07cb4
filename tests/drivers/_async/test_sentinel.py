"""The lock through a Sentinel-managed client (``Sentinel(...).master_for(...)``), on both
drivers, against a real primary, replica and three sentinels.  (A primary killed while a
lock is held: ``tests/test_sentinel.py``.)"""

from __future__ import annotations

import secrets

import pytest
import redis

from distlock.asyncio import Lock, LockHandle, ReentrantLock, Semaphore
from distlock.tools.servers.topologies import SentinelTopology

from .concurrency import sentinel_client

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def prefix() -> str:
    return f"s{secrets.token_hex(4)}"



async def fence_of(handle: LockHandle) -> int:
    return handle.fence


async def test_lock_contract_through_sentinel(
    sentinel_topology: SentinelTopology, primary: redis.Redis, prefix: str
) -> None:
    client = sentinel_client(sentinel_topology, socket_timeout=2)
    async with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        first = await locks.acquire("a")
        assert first is not None and await locks.acquire("a") is None
        assert await first.release() is True
        second = await locks.acquire("a")
        assert second is not None and second.fence > first.fence
        assert await second.release() is True
        async with locks.hold_many(["b", "c"]) as group:
            assert group.keys == [f"{prefix}:b", f"{prefix}:c"]
    async with ReentrantLock(client, prefix=prefix) as rlocks, rlocks.hold("r") as outer:
        async with rlocks.hold("r") as inner:
            assert inner.depth == 2
        assert outer.held
    assert primary.exists(f"{prefix}:a", f"{prefix}:b", f"{prefix}:r") == 0
    await client.aclose()


async def test_replicated_grants_through_sentinel(
    sentinel_topology: SentinelTopology, primary: redis.Redis, prefix: str
) -> None:
    client = sentinel_client(sentinel_topology, socket_timeout=2)
    sems = Semaphore(client, prefix=prefix, limit=2, replicas=1, replica_timeout_ms=2_000)
    async with sems, sems.hold("s") as one, sems.hold("s") as two:
        assert one.token != two.token and await sems.acquire("s") is None
    assert primary.exists(f"{prefix}:s") == 0
    async with Lock(client, prefix=prefix, replicas=1, replica_timeout_ms=2_000) as locks:
        assert await locks.run("a", fence_of) >= 1
    await client.aclose()
