# Generated from tests/drivers/_async/test_pool_waiters.py by tools/unasync.py: do not edit.
"""Waiters never starve a holder of connections, on both drivers against a real
redis-server.

A waiter blocks in ``BLPOP`` on a connection of its own, outside the client's pool: a
bounded pool filled with waiters would otherwise leave the holder's release (and its
renewals) no connection, so the key would stay held until its TTL and every waiter would
time out behind it.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from distlock import Lock, Semaphore
from tests.redis_server import RedisServer

from .concurrency import BlockingConnectionPool, ConnectionPool, Redis, client_for, spawn, until

#: As many waiters as the pool has connections: their attempts never lack one, and their
#: blocks would take every one.
WAITERS = 3


def bounded_client(url: str, pool: str) -> Redis:
    if pool == "bounded":
        return Redis(connection_pool=ConnectionPool.from_url(url, max_connections=WAITERS))
    return Redis(
        connection_pool=BlockingConnectionPool.from_url(url, max_connections=WAITERS, timeout=2)
    )


def served(h: object) -> bool:
    return True


@pytest.mark.parametrize("pool", ["bounded", "blocking"])
@pytest.mark.parametrize("kind", ["lock", "semaphore"])
def test_waiters_filling_a_bounded_pool_never_starve_the_holder(
    redis_server: RedisServer, r: redis.Redis, pool: str, kind: str
) -> None:
    client = bounded_client(redis_server.url, pool)
    extra: dict[str, Any] = {"limit": 1} if kind == "semaphore" else {}
    factory: Any = Semaphore if kind == "semaphore" else Lock
    with factory(client, prefix="pw", ttl_ms=30_000, **extra) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        waiters = [spawn(locks.run, "k", served, wait_ms=20_000) for _ in range(WAITERS)]
        queue = queue_keys("pw:k", Kind.SEMAPHORE if kind == "semaphore" else Kind.LOCK)[0]
        until(lambda: r.llen(queue) == WAITERS, "every waiter queued")
        # As many waiters blocked as the pool has connections: the release still goes out.
        assert holder.release() is True
        assert [waiter.result() for waiter in waiters] == [True] * WAITERS
    client.close()


def kill_waiter_connections(r: redis.Redis) -> None:
    """Close, from the server's side, the connections kept from a waiter's block (the last
    command of a waiter handed the key is its BLPOP)."""
    killed = [c for c in r.client_list() if c.get("cmd") == "blpop"]
    assert killed
    for c in killed:
        r.client_kill_filter(_id=c["id"])


def test_a_kept_waiter_connection_the_server_closed_is_reconnected(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The connection a waiter blocked on is kept for the next block; one the server
    closed meanwhile (its idle ``timeout``, a restart) is reconnected, not failed on."""
    client = client_for(redis_server)
    with Lock(client, prefix="pw") as locks:
        for _ in range(2):
            holder = locks.acquire("k")
            assert holder is not None
            waiter = spawn(locks.run, "k", served, wait_ms=20_000)
            until(lambda: r.llen(queue_keys("pw:k")[0]) == 1, "the waiter queued")
            assert holder.release() is True
            assert waiter.result() is True
            kill_waiter_connections(r)
    client.close()
