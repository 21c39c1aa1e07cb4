"""A release sent twice (a client library retrying a release whose reply was lost) is
answered as released both times; only a key another owner touched is reported as taken."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError, LossReason
from distlock._core.commands import Command, Op
from distlock._protocol import RELEASE_MEMORY_MS, encode
from tests.redis_server import RedisServer


class ResendingRelease(redis.Redis):
    """Runs each release script twice, answering with the second reply: what a client
    retry does when the first attempt ran but its reply was lost."""

    def evalsha(self, sha: str, numkeys: int, *args: Any) -> Any:
        reply = super().evalsha(sha, numkeys, *args)
        if sha == encode(Command(Op.RELEASE, "k", "", 1))[0].sha:
            reply = super().evalsha(sha, numkeys, *args)
        return reply


class AsyncResendingRelease(aredis.Redis):
    async def evalsha(self, sha: str, numkeys: int, *args: Any) -> Any:
        reply = await super().evalsha(sha, numkeys, *args)
        if sha == encode(Command(Op.RELEASE, "k", "", 1))[0].sha:
            reply = await super().evalsha(sha, numkeys, *args)
        return reply


def test_a_resent_release_is_our_own(redis_server: RedisServer, r: redis.Redis) -> None:
    client = ResendingRelease(port=redis_server.port)
    with distlock.Lock(client, prefix="rs", ttl_ms=60_000) as locks:
        assert locks.run("k", lambda h: h.fence) >= 1  # not RELEASE_REJECTED
        handle = locks.acquire("m")
        assert handle is not None and handle.release() is True
    assert r.keys("rs:*") == []

    async def main() -> None:
        aclient = AsyncResendingRelease(port=redis_server.port)
        locks = distlock.asyncio.Lock(aclient, prefix="rs", ttl_ms=60_000)
        async with locks, locks.hold("k") as h:
            assert h.held

    asyncio.run(main())


def test_a_key_another_owner_took_is_still_reported(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = ResendingRelease(port=redis_server.port)
    with distlock.Lock(client, prefix="rs", ttl_ms=60_000) as locks:

        def body(h: distlock.LockHandle) -> None:
            r.set(h.key, "someone else")

        with pytest.raises(LockLeaseLostError) as lost:
            locks.run("k", body)
        assert lost.value.reason is LossReason.RELEASE_REJECTED
    assert r.get("rs:k") == b"someone else"


def test_the_release_record_is_short_lived_and_the_key_is_gone(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with distlock.Lock(redis.Redis(port=redis_server.port), prefix="rs") as locks:
        locks.run("k", lambda h: None)
    assert r.get("rs:k") is None
    (record,) = r.keys("distlock:released:*")
    assert 0 < r.pttl(record) <= RELEASE_MEMORY_MS
