"""What a Lock accepts as its client, on both drivers against a real redis-server: a
client, a URL, or a factory of clients.  (What it refuses, when it is made:
``tests/test_clients.py``.)"""

from __future__ import annotations

from distlock.asyncio import Lock, LockHandle
from tests.redis_server import RedisServer

from .concurrency import Redis


async def fence_of(h: LockHandle) -> int:
    return h.fence


async def test_clients_urls_and_factories_are_accepted(redis_server: RedisServer) -> None:
    url = redis_server.url

    async def factory() -> Redis:
        return Redis.from_url(url)

    for client in (Redis.from_url(url), url, factory):
        async with Lock(client, prefix="ok") as locks:
            assert await locks.run("k", fence_of) >= 1
