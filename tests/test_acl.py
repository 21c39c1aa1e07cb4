"""The least a restricted Redis user needs: the ACL docs/acl.md documents, on a real server."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock._protocol import queue_keys
from tests.docs_acl import documented_acl
from tests.redis_server import RedisServer

#: The documented ACL (docs/acl.md), for locks under the prefix "orders".
ACL = documented_acl("locker")


@pytest.fixture
def restricted(fresh_redis: RedisServer) -> redis.Redis:
    admin = redis.Redis(port=fresh_redis.port)
    admin.acl_setuser("locker", reset=True)
    admin.execute_command("ACL", "SETUSER", "locker", *ACL)  # type: ignore[no-untyped-call]
    admin.close()
    return redis.Redis(port=fresh_redis.port, username="locker", password="s3cret")


def test_the_documented_acl_is_enough(fresh_redis: RedisServer, restricted: redis.Redis) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    with distlock.Lock(restricted, prefix="orders", ttl_ms=10_000) as locks:
        assert locks.run("1", lambda h: h.fence) >= 1
        handle = locks.acquire("2")
        assert handle is not None
        assert handle.extend(20_000) is True
        # Scripts flushed (a restart, a SCRIPT FLUSH): EVALSHA fails, EVAL takes over.
        admin.script_flush()
        assert handle.release() is True
        assert locks.run("3", lambda h: h.fence) >= 1
        # Waiting: a refused attempt queues, the block times out, the last attempt leaves.
        held = locks.acquire("5")
        assert held is not None
        assert locks.acquire("5", wait_ms=50) is None
        # A release wakes the waiter: the queue's commands run under the restricted user.
        waiter = threading.Thread(target=lambda: got.append(locks.acquire("5", wait_ms=60_000)))
        got: list[object] = []
        waiter.start()
        while not admin.exists(queue_keys("orders:5")[0]):
            waiter.join(0.01)
        assert held.release() is True
        waiter.join()
        assert got and isinstance(got[0], distlock.LockHandle) and got[0].release()

    async def main() -> None:
        client = aredis.Redis(port=fresh_redis.port, username="locker", password="s3cret")
        async with distlock.asyncio.Lock(client, prefix="orders") as locks:
            admin.script_flush()
            async with locks.hold("4") as h:
                assert h.fence >= 1
        await client.aclose()

    asyncio.run(main())
    assert admin.keys("orders:*") == []
    admin.close()


def test_the_documented_acl_is_restrictive(restricted: redis.Redis) -> None:
    # Not vacuous: the user can touch nothing but its locks and the fence counters.
    with pytest.raises(redis.exceptions.NoPermissionError):
        restricted.get("elsewhere:1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        restricted.keys("*")
    with distlock.Lock(restricted, prefix="elsewhere") as locks, pytest.raises(
        redis.exceptions.NoPermissionError
    ):
        locks.acquire("1")


def test_background_renewals_need_no_more_than_the_documented_acl(
    fresh_redis: RedisServer, restricted: redis.Redis
) -> None:
    """A pipelined renewal that meets a Redis without its script goes again by EVAL: no
    SCRIPT LOAD, which the ACL does not grant."""
    admin = redis.Redis(port=fresh_redis.port)
    admin.script_flush()  # the renewal script is not loaded until a renewal sends it
    renewed = threading.Event()

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "RenewReply" and event["ok"]:
            renewed.set()

    with distlock.Lock(
        restricted, prefix="orders", ttl_ms=10_000, heartbeat_ms=100, trace=trace
    ) as locks, locks.hold("5") as handle:
        assert renewed.wait(30), "no renewal was answered under the restricted user"
        assert handle.held
    admin.close()
