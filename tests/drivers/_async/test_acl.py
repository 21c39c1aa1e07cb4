"""The least a restricted Redis user needs, on both drivers: the ACL docs/acl.md documents,
on a real server."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock._protocol import queue_keys
from distlock.asyncio import Lock, LockHandle
from tests.docs_acl import documented_acl
from tests.redis_server import RedisServer

from .concurrency import Event, client_for, spawn, until

#: The documented ACL (docs/acl.md), for locks under the prefix "orders".
ACL = documented_acl("locker")


@pytest.fixture
def restricted(fresh_redis: RedisServer) -> RedisServer:
    """A server of the test's own with the documented restricted user on it."""
    admin = redis.Redis(port=fresh_redis.port)
    admin.acl_setuser("locker", reset=True)
    admin.execute_command("ACL", "SETUSER", "locker", *ACL)  # type: ignore[no-untyped-call]
    admin.close()
    return fresh_redis


def as_locker(server: RedisServer) -> Any:
    """A client of the driver's, connected as the restricted user."""
    return client_for(server, username="locker", password="s3cret")


async def fence_of(h: LockHandle) -> int:
    return h.fence


async def test_the_documented_acl_is_enough(restricted: RedisServer) -> None:
    admin = redis.Redis(port=restricted.port)
    client = as_locker(restricted)
    async with Lock(client, prefix="orders", ttl_ms=10_000) as locks:
        assert await locks.run("1", fence_of) >= 1
        handle = await locks.acquire("2")
        assert handle is not None
        assert await handle.extend(20_000) is True
        # Scripts flushed (a restart, a SCRIPT FLUSH): EVALSHA fails, EVAL takes over.
        admin.script_flush()
        assert await handle.release() is True
        assert await locks.run("3", fence_of) >= 1
        admin.script_flush()
        async with locks.hold("4") as h:
            assert h.fence >= 1
        # Waiting: a refused attempt queues, the block times out, the last attempt leaves.
        held = await locks.acquire("5")
        assert held is not None
        assert await locks.acquire("5", wait_ms=50) is None
        # A release wakes the waiter: the queue's commands run under the restricted user.
        waiter = spawn(locks.acquire, "5", wait_ms=60_000)
        await until(lambda: admin.exists(queue_keys("orders:5")[0]), "the waiter queued")
        assert await held.release() is True
        got = await waiter.result()
        assert isinstance(got, LockHandle) and await got.release()
    await client.aclose()
    assert admin.keys("orders:*") == []
    admin.close()


async def test_the_documented_acl_is_restrictive(restricted: RedisServer) -> None:
    # Not vacuous: the user can touch nothing but its locks and the fence counters.
    plain = redis.Redis(port=restricted.port, username="locker", password="s3cret")
    with pytest.raises(redis.exceptions.NoPermissionError):
        plain.get("elsewhere:1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        plain.keys("*")
    plain.close()
    client = as_locker(restricted)
    async with Lock(client, prefix="elsewhere") as locks:
        with pytest.raises(redis.exceptions.NoPermissionError):
            await locks.acquire("1")
    await client.aclose()


async def test_background_renewals_need_no_more_than_the_documented_acl(
    restricted: RedisServer,
) -> None:
    """A pipelined renewal that meets a Redis without its script goes again by EVAL: no
    SCRIPT LOAD, which the ACL does not grant."""
    admin = redis.Redis(port=restricted.port)
    admin.script_flush()  # the renewal script is not loaded until a renewal sends it
    renewed = Event()

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            renewed.set()

    client = as_locker(restricted)
    locks = Lock(client, prefix="orders", ttl_ms=10_000, heartbeat_ms=100, trace=trace)
    async with locks, locks.hold("5") as handle:
        await renewed.wait()  # "no renewal was answered under the restricted user" otherwise
        assert handle.held
    await client.aclose()
    admin.close()
