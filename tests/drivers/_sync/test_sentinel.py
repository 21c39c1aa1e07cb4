# Generated from tests/drivers/_async/test_sentinel.py by tools/unasync.py: do not edit.
"""The lock through a Sentinel-managed client (``Sentinel(...).master_for(...)``), on both
drivers, against a real primary, replica and three sentinels.  (A primary killed while a
lock is held: ``tests/test_sentinel.py``.)"""

from __future__ import annotations

import secrets

import pytest
import redis

from distlock import Lock, LockHandle, ReentrantLock, Semaphore
from distlock.tools.servers.topologies import SentinelTopology

from .concurrency import sentinel_client

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def prefix() -> str:
    return f"s{secrets.token_hex(4)}"



def fence_of(handle: LockHandle) -> int:
    return handle.fence


def test_lock_contract_through_sentinel(
    sentinel_topology: SentinelTopology, primary: redis.Redis, prefix: str
) -> None:
    client = sentinel_client(sentinel_topology, socket_timeout=2)
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        first = locks.acquire("a")
        assert first is not None and locks.acquire("a") is None
        assert first.release() is True
        second = locks.acquire("a")
        assert second is not None and second.fence > first.fence
        assert second.release() is True
        with locks.hold_many(["b", "c"]) as group:
            assert group.keys == [f"{prefix}:b", f"{prefix}:c"]
    with ReentrantLock(client, prefix=prefix) as rlocks, rlocks.hold("r") as outer:
        with rlocks.hold("r") as inner:
            assert inner.depth == 2
        assert outer.held
    assert primary.exists(f"{prefix}:a", f"{prefix}:b", f"{prefix}:r") == 0
    client.close()


def test_replicated_grants_through_sentinel(
    sentinel_topology: SentinelTopology, primary: redis.Redis, prefix: str
) -> None:
    client = sentinel_client(sentinel_topology, socket_timeout=2)
    sems = Semaphore(client, prefix=prefix, limit=2, replicas=1, replica_timeout_ms=2_000)
    with sems, sems.hold("s") as one, sems.hold("s") as two:
        assert one.token != two.token and sems.acquire("s") is None
    assert primary.exists(f"{prefix}:s") == 0
    with Lock(client, prefix=prefix, replicas=1, replica_timeout_ms=2_000) as locks:
        assert locks.run("a", fence_of) >= 1
    client.close()
