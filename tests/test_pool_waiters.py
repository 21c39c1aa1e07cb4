"""Waiters never starve a holder of connections.

A waiter blocks in ``BLPOP`` on a connection of its own, outside the client's pool: a
bounded pool filled with waiters would otherwise leave the holder's release (and its
renewals) no connection, so the key would stay held until its TTL and every waiter would
time out behind it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from tests.redis_server import RedisServer

#: As many waiters as the pool has connections: their attempts never lack one, and their
#: blocks would take every one.
WAITERS = 3


def until(condition: Callable[[], object], what: str) -> None:
    """Poll Redis's state (Redis cannot call us back, so no event can stand in)."""
    deadline = time.monotonic() + 30
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.005)


def pools(url: str) -> dict[str, Callable[[], redis.Redis]]:
    return {
        "bounded": lambda: redis.Redis(
            connection_pool=redis.ConnectionPool.from_url(url, max_connections=WAITERS)
        ),
        "blocking": lambda: redis.Redis(
            connection_pool=redis.BlockingConnectionPool.from_url(
                url, max_connections=WAITERS, timeout=2
            )
        ),
    }


@pytest.mark.parametrize("pool", ["bounded", "blocking"])
@pytest.mark.parametrize("kind", ["lock", "semaphore"])
def test_waiters_filling_a_bounded_pool_never_starve_the_holder_sync(
    redis_server: RedisServer, r: redis.Redis, pool: str, kind: str
) -> None:
    client = pools(redis_server.url)[pool]()
    extra: dict[str, Any] = {"limit": 1} if kind == "semaphore" else {}
    factory: Any = distlock.Semaphore if kind == "semaphore" else distlock.Lock
    locks = factory(client, prefix="pw", ttl_ms=30_000, **extra)
    holder = locks.acquire("k")
    assert holder is not None
    served: list[object] = []
    threads = [
        threading.Thread(
            target=lambda: served.append(locks.run("k", lambda h: True, wait_ms=20_000)),
            daemon=True,
        )
        for _ in range(WAITERS)
    ]
    for t in threads:
        t.start()
    queue = queue_keys("pw:k", Kind.SEMAPHORE if kind == "semaphore" else Kind.LOCK)[0]
    until(lambda: r.llen(queue) == WAITERS, "every waiter queued")
    # As many waiters blocked as the pool has connections: the release still goes out.
    assert holder.release() is True
    for t in threads:
        t.join(60)
    assert served == [True] * WAITERS
    locks.close()
    client.close()


@pytest.mark.parametrize("pool", ["bounded", "blocking"])
def test_waiters_filling_a_bounded_pool_never_starve_the_holder_asyncio(
    redis_server: RedisServer, r: redis.Redis, pool: str
) -> None:
    async def main() -> None:
        kind: Any = (
            aredis.ConnectionPool if pool == "bounded" else aredis.BlockingConnectionPool
        )
        extra = {} if pool == "bounded" else {"timeout": 2}
        client = aredis.Redis(
            connection_pool=kind.from_url(redis_server.url, max_connections=WAITERS, **extra)
        )
        async with distlock.asyncio.Lock(client, prefix="pw", ttl_ms=30_000) as locks:
            holder = await locks.acquire("k")
            assert holder is not None

            async def body(h: object) -> bool:
                return True

            tasks = [
                asyncio.ensure_future(locks.run("k", body, wait_ms=20_000))
                for _ in range(WAITERS)
            ]
            async with asyncio.timeout(30):
                while r.llen(queue_keys("pw:k")[0]) != WAITERS:  # noqa: ASYNC110
                    await asyncio.sleep(0.005)  # Redis cannot call us back
            assert await holder.release() is True
            async with asyncio.timeout(60):
                assert await asyncio.gather(*tasks) == [True] * WAITERS
        await client.aclose()

    asyncio.run(main())


def kill_waiter_connections(r: redis.Redis) -> None:
    """Close, from the server's side, the connections kept from a waiter's block (the last
    command of a waiter handed the key is its BLPOP)."""
    killed = [c for c in r.client_list() if c.get("cmd") == "blpop"]
    assert killed
    for c in killed:
        r.client_kill_filter(_id=c["id"])


def test_a_kept_waiter_connection_the_server_closed_is_reconnected_sync(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The connection a waiter blocked on is kept for the next block; one the server
    closed meanwhile (its idle ``timeout``, a restart) is reconnected, not failed on."""
    with distlock.Lock(redis.Redis.from_url(redis_server.url), prefix="pw") as locks:
        for _ in range(2):
            holder = locks.acquire("k")
            assert holder is not None
            waiter = threading.Thread(
                target=lambda: locks.run("k", lambda h: None, wait_ms=20_000), daemon=True
            )
            waiter.start()
            until(lambda: r.llen(queue_keys("pw:k")[0]) == 1, "the waiter queued")
            assert holder.release() is True
            waiter.join(30)
            assert not waiter.is_alive()
            kill_waiter_connections(r)


def test_a_kept_waiter_connection_the_server_closed_is_reconnected_asyncio(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        async with distlock.asyncio.Lock(client, prefix="pw") as locks:
            for _ in range(2):
                holder = await locks.acquire("k")
                assert holder is not None

                async def body(h: object) -> bool:
                    return True

                task = asyncio.ensure_future(locks.run("k", body, wait_ms=20_000))
                async with asyncio.timeout(30):
                    while r.llen(queue_keys("pw:k")[0]) != 1:  # noqa: ASYNC110
                        await asyncio.sleep(0.005)  # Redis cannot call us back
                assert await holder.release() is True
                async with asyncio.timeout(30):
                    assert await task is True
                kill_waiter_connections(r)
        await client.aclose()

    asyncio.run(main())
