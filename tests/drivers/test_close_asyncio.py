"""Closing an asyncio primitive cancels its bodies, as a loss does (a thread cannot be
cancelled, so the sync driver has no such test; what both drivers share is in
``tests/drivers/_async/test_close.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from distlock import LockClosedError, LockLeaseLostError
from distlock.asyncio import Lock, ReentrantLock, Semaphore
from distlock.errors import LossReason
from tests.redis_server import RedisServer

#: A failure guard only: every wait below ends as soon as what it waits for happens.
WAIT = 30.0
PREFIX = "midclose"
KINDS: dict[str, Callable[..., Any]] = {
    "lock": Lock,
    "reentrant": ReentrantLock,
    "semaphore": lambda client, **options: Semaphore(client, limit=1, **options),
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_aclose_with_a_held_section_cancels_its_body_and_releases_its_key(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    client = aredis.Redis.from_url(redis_server.url)
    locks = KINDS[kind](client, prefix=PREFIX, ttl_ms=3_000)
    entered = asyncio.Event()
    seen: dict[str, Any] = {}

    async def body(handle: Any) -> None:
        seen["handle"] = handle
        entered.set()
        try:
            await asyncio.sleep(WAIT)
        except asyncio.CancelledError:
            seen["cancelled"] = True
            raise

    async def holder() -> None:
        async with locks.hold("k") as handle:
            await body(handle)

    task = asyncio.create_task(holder())
    try:
        await asyncio.wait_for(entered.wait(), WAIT)
        key = seen["handle"].key
        assert r.exists(key) == 1
        await locks.aclose()
        assert r.exists(key) == 0
        assert seen["handle"].signal.aborted
        with pytest.raises(LockLeaseLostError) as info:
            await asyncio.wait_for(task, WAIT)
        assert info.value.reason is LossReason.LOCK_CLOSED
        assert seen.get("cancelled") is True
        assert seen["handle"].signal.reason is info.value
        with pytest.raises(LockClosedError):
            await locks.acquire("k")
    finally:
        task.cancel()
        await client.aclose()


async def test_aclose_from_inside_a_body_cancels_that_body_and_still_closes(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    locks = Lock(redis_server.url, prefix=PREFIX)  # owns its client
    seen: dict[str, Any] = {}

    async def body(handle: Any) -> None:
        seen["key"] = handle.key
        await locks.aclose()
        seen["went on"] = True  # not reached: the loss cancelled the body

    with pytest.raises(LockLeaseLostError) as info:
        await locks.run("self", body)
    assert info.value.reason is LossReason.LOCK_CLOSED
    assert "went on" not in seen
    assert r.exists(seen["key"]) == 0
    client: Any = await locks.client()
    pool: Any = client.connection_pool
    conns = [*pool._available_connections, *pool._in_use_connections]
    assert conns and not any(c.is_connected for c in conns)  # the client was closed
