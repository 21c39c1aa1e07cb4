"""With Redis down, a failed acquire pays the client's retry policy once, not twice: the
cleanup release that follows it (in case the acquire did run) is one attempt."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.retry import Retry

import distlock
import distlock.asyncio
from tests.redis_server import free_port

RETRIES = 3


class CountingConnection(redis.Connection):
    attempts = 0

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        CountingConnection.attempts += 1
        super().connect_check_health(*args, **kwargs)


class AsyncCountingConnection(aredis.Connection):
    attempts = 0

    async def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        AsyncCountingConnection.attempts += 1
        await super().connect_check_health(*args, **kwargs)


def test_sync_fail_fast_pays_the_retries_once() -> None:
    pool = redis.ConnectionPool(
        port=free_port(), connection_class=CountingConnection, retry=Retry(NoBackoff(), RETRIES)
    )
    client = redis.Redis(connection_pool=pool)
    CountingConnection.attempts = 0
    at_cleanup: list[int] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Release":
            at_cleanup.append(CountingConnection.attempts)

    locks = distlock.Lock(client, prefix="down", trace=trace)
    with locks, pytest.raises(redis.ConnectionError):
        locks.acquire("k")
    # The acquire: one try and RETRIES retries.  The cleanup release: one try.
    assert at_cleanup == [RETRIES + 1]
    assert CountingConnection.attempts == RETRIES + 1 + 1
    client.close()


def test_asyncio_fail_fast_pays_the_retries_once() -> None:
    async def main() -> None:
        pool: Any = aredis.ConnectionPool(
            port=free_port(),
            connection_class=AsyncCountingConnection,
            retry=Retry(NoBackoff(), RETRIES),
        )
        client = aredis.Redis(connection_pool=pool)
        AsyncCountingConnection.attempts = 0
        at_cleanup: list[int] = []

        def trace(event: dict[str, Any]) -> None:
            if event["action"] == "Release":
                at_cleanup.append(AsyncCountingConnection.attempts)

        async with distlock.asyncio.Lock(client, prefix="down", trace=trace) as locks:
            with pytest.raises(redis.ConnectionError):
                await locks.acquire("k")
        # However often the client's policy tried the acquire, the cleanup tried once.
        assert len(at_cleanup) == 1 and at_cleanup[0] >= 1
        assert AsyncCountingConnection.attempts == at_cleanup[0] + 1
        await client.aclose()

    asyncio.run(main())


class LostAcquireReply(redis.Redis):
    """Runs the acquire script, then fails as if its reply had been lost."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if args[0] in ("EVALSHA", "EVAL"):
            return self._lose(reply, int(args[2]), args[3:])
        return reply

    @staticmethod
    def _lose(reply: Any, numkeys: int, args: tuple[Any, ...]) -> Any:
        if numkeys == 2 and str(args[1]).startswith("distlock:fence:"):
            raise redis.ConnectionError("reply lost")
        return reply


def test_the_one_attempt_cleanup_really_releases(redis_server: Any, r: redis.Redis) -> None:
    client = LostAcquireReply(port=redis_server.port)
    r.script_flush()  # the release script is not cached yet: EVALSHA, then EVAL
    with distlock.Lock(client, prefix="lost", ttl_ms=60_000) as locks:
        with pytest.raises(redis.ConnectionError):
            locks.acquire("k")
        assert r.get("lost:k") is None  # released at once, not after the TTL
    client.close()
