"""What a Lock accepts as its client, checked when it is made, not at first use."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import ValidationError
from tests.redis_server import RedisServer


@pytest.mark.parametrize(
    ("client", "message"),
    [
        (42, "client must be a redis.client.Redis or redis.cluster.RedisCluster"),
        (None, "client must be a redis"),
        (b"redis://localhost", "client must be a redis"),
        ("http://localhost:6379", "must start with redis://"),
        ("localhost:6379", "must start with redis://"),
        (redis.Redis, "client must be a redis"),  # the class, not an instance
    ],
)
def test_bad_clients_are_refused_when_the_lock_is_made(client: Any, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        distlock.Lock(client)
    with pytest.raises(ValidationError):
        distlock.asyncio.Lock(client)


def test_a_client_of_the_other_driver_is_refused_with_the_way_out() -> None:
    async_client = aredis.Redis()
    with pytest.raises(ValidationError, match=r"use it with distlock\.asyncio's Lock"):
        distlock.Lock(async_client)  # type: ignore[arg-type]
    sync_client = redis.Redis()
    with pytest.raises(ValidationError, match=r"use it with distlock's Lock"):
        distlock.asyncio.Lock(sync_client)  # type: ignore[arg-type]
    sync_client.close()
    asyncio.run(async_client.aclose())


def test_clients_urls_and_factories_are_accepted(redis_server: RedisServer) -> None:
    url = redis_server.url
    for client in (redis.Redis.from_url(url), url, lambda: redis.Redis.from_url(url)):
        with distlock.Lock(client, prefix="ok") as locks:
            assert locks.run("k", lambda h: h.fence) >= 1

    async def main() -> None:
        async def factory() -> aredis.Redis:
            return aredis.Redis.from_url(url)

        for client in (aredis.Redis.from_url(url), url, factory):
            async with distlock.asyncio.Lock(client, prefix="ok") as locks:

                async def body(h: distlock.asyncio.LockHandle) -> int:
                    return h.fence

                assert await locks.run("k", body) >= 1

    asyncio.run(main())


def test_an_async_body_given_to_the_sync_run_is_refused_before_any_command(
    redis_server: RedisServer,
) -> None:
    async def body(handle: distlock.LockHandle) -> None:
        pass

    r = redis.Redis.from_url(redis_server.url)
    with distlock.Lock(r, prefix="coro") as locks:
        with pytest.raises(ValidationError, match=r"distlock\.asyncio\.Lock"):
            locks.run("k", body)  # type: ignore[unused-coroutine]
        with pytest.raises(ValidationError, match=r"distlock\.asyncio\.Lock"):
            locks.run_many(["a", "b"], body)  # type: ignore[arg-type, unused-coroutine]
    assert r.keys("coro:*") == []
    r.close()
