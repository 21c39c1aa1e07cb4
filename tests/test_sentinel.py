"""The lock through a Sentinel-managed client (``Sentinel(...).master_for(...)``, sync and
asyncio) against a real primary, replica and three sentinels, and a primary killed while a
lock is held: no two successful sections overlap, and a lost key is reported."""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Iterator

import pytest
import redis

import distlock.asyncio
from distlock import Lock, LockHandle, LockLeaseLostError, ReentrantLock, Semaphore
from distlock.events import Event, Renewed
from distlock.tools.servers.topologies import SentinelTopology

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def prefix() -> str:
    return f"s{secrets.token_hex(4)}"


@pytest.fixture
def primary(sentinel_topology: SentinelTopology) -> Iterator[redis.Redis]:
    client = sentinel_topology.master_for(socket_timeout=2)
    yield client
    client.close()


def test_lock_contract_through_sentinel(primary: redis.Redis, prefix: str) -> None:
    with Lock(primary, prefix=prefix, ttl_ms=10_000) as locks:
        first = locks.acquire("a")
        assert first is not None and locks.acquire("a") is None
        assert first.release() is True
        second = locks.acquire("a")
        assert second is not None and second.fence > first.fence
        assert second.release() is True
        with locks.hold_many(["b", "c"]) as group:
            assert group.keys == [f"{prefix}:b", f"{prefix}:c"]
    with ReentrantLock(primary, prefix=prefix) as rlocks, rlocks.hold("r") as outer:
        with rlocks.hold("r") as inner:
            assert inner.depth == 2
        assert outer.held
    assert primary.exists(f"{prefix}:a", f"{prefix}:b", f"{prefix}:r") == 0


def test_semaphore_through_sentinel(primary: redis.Redis, prefix: str) -> None:
    sems = Semaphore(primary, prefix=prefix, limit=2, replicas=1, replica_timeout_ms=2_000)
    with sems, sems.hold("s") as one, sems.hold("s") as two:
        assert one.token != two.token and sems.acquire("s") is None
    assert primary.exists(f"{prefix}:s") == 0


def test_asyncio_lock_through_sentinel(
    sentinel_topology: SentinelTopology, prefix: str
) -> None:
    async def main() -> None:
        client = sentinel_topology.async_master_for()
        async with distlock.asyncio.Lock(
            client, prefix=prefix, replicas=1, replica_timeout_ms=2_000
        ) as locks:

            async def body(handle: distlock.asyncio.LockHandle) -> int:
                return handle.fence

            assert await locks.run("a", body) >= 1
        await client.aclose()

    asyncio.run(main())


def test_a_killed_primary_while_a_lock_is_held(
    sentinel_topology: SentinelTopology, primary: redis.Redis, prefix: str
) -> None:
    """The section either keeps its key across the failover (the replica had it: a
    renewal succeeds on the new primary) or is reported lost; a contender that got the key
    meanwhile is only possible in the second case."""
    promoted = threading.Event()
    renewed_after = threading.Event()
    contender: list[int] = []

    def seen(event: Event) -> None:
        if isinstance(event, Renewed) and promoted.is_set():
            renewed_after.set()

    def body(handle: LockHandle) -> None:
        sentinel_topology.kill_primary()
        promoted.set()
        got = other.acquire("k")
        if got is not None:
            contender.append(got.fence)
            got.release()
        # Either way the section learns which: a renewal on the new primary, or the loss.
        assert renewed_after.wait(60) or handle.signal.wait(60)

    with Lock(primary, prefix=prefix, ttl_ms=6_000, observers=[seen]) as locks, Lock(
        primary, prefix=prefix
    ) as other:
        try:
            locks.run("k", body)
            outcome = "ok"
        except LockLeaseLostError:
            outcome = "lost"
    if contender:
        assert outcome == "lost"
