"""A release sent twice (a client library retrying a release whose reply was lost) is
answered as released both times; only a key another owner touched is reported as taken."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError, LossReason
from distlock._core.commands import Command, Op
from distlock._protocol import RELEASE_MEMORY_MS, encode
from tests.redis_server import RedisServer


class ResendingRelease(redis.Redis):
    """Runs each release script twice, answering with the second reply: what a client
    retry does when the first attempt ran but its reply was lost."""

    # execute_command: the lock sends its scripts through it (and evalsha() does too).
    def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if args[:2] == ("EVALSHA", encode(Command(Op.RELEASE, "k", "", 1))[0].sha):
            reply = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return reply


class AsyncResendingRelease(aredis.Redis):
    async def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if args[:2] == ("EVALSHA", encode(Command(Op.RELEASE, "k", "", 1))[0].sha):
            reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
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


def test_a_manual_release_that_got_no_answer_can_be_called_again(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # No client retry and a short timeout: the first release times out on a paused Redis.
    client = redis.Redis(port=redis_server.port, socket_timeout=0.3, retry=Retry(NoBackoff(), 0))
    with distlock.Lock(client, prefix="again", ttl_ms=60_000) as locks:
        handle = locks.acquire("k")
        assert handle is not None
        r.client_pause(60_000, all=False)
        try:
            with pytest.raises(redis.RedisError):
                handle.release()
        finally:
            r.client_unpause()
        assert handle.release() is True  # sent again, and answered
        assert r.get("again:k") is None
        assert handle.release() is False  # answered once: nothing more to send


def test_an_asyncio_manual_release_can_be_called_again(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        no_retry = AsyncRetry(NoBackoff(), 0)
        client = aredis.Redis(port=redis_server.port, socket_timeout=0.3, retry=no_retry)
        async with distlock.asyncio.Lock(client, prefix="again", ttl_ms=60_000) as locks:
            handle = await locks.acquire("a")
            assert handle is not None
            r.client_pause(60_000, all=False)
            try:
                with pytest.raises(redis.RedisError):
                    await handle.release()
            finally:
                r.client_unpause()
            assert await handle.release() is True
            assert r.get("again:a") is None

    asyncio.run(main())
