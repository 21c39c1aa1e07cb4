# Generated from tests/drivers/_async/test_redis_down.py by tools/unasync.py: do not edit.
"""With Redis down, on both drivers: a failed acquire pays the client's retry policy once,
not twice (the cleanup release that follows it, in case the acquire did run, is one
attempt), and that one attempt really releases a key the acquire did take."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis

from distlock import Lock
from tests.redis_server import RedisServer, free_port

from .concurrency import Connection, ConnectionPool, Redis, retrying

RETRIES = 3


class CountingConnection(Connection):
    attempts = 0

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        CountingConnection.attempts += 1
        connect: Callable[..., None] = super().connect_check_health
        connect(*args, **kwargs)


def test_fail_fast_pays_the_retries_once() -> None:
    pool: Any = ConnectionPool(
        port=free_port(), connection_class=CountingConnection, retry=retrying(RETRIES)
    )
    client = Redis(connection_pool=pool)
    CountingConnection.attempts = 0
    at_cleanup: list[int] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Release":
            at_cleanup.append(CountingConnection.attempts)

    with Lock(client, prefix="down", trace=trace) as locks:
        with pytest.raises(redis.ConnectionError):
            locks.acquire("k")
    # The acquire: one try and RETRIES retries.  The cleanup release: one try.
    assert at_cleanup == [RETRIES + 1]
    assert CountingConnection.attempts == RETRIES + 1 + 1
    client.close()


class LostAcquireReply(Redis):
    """Runs the acquire script, then fails as if its reply had been lost."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        send: Callable[..., Any] = super().execute_command
        reply = send(*args, **options)
        if args[0] in ("EVALSHA", "EVAL"):
            return self._lose(reply, int(args[2]), args[3:])
        return reply

    @staticmethod
    def _lose(reply: Any, numkeys: int, args: tuple[Any, ...]) -> Any:
        if numkeys == 2 and str(args[1]).startswith("distlock:fence:"):
            raise redis.ConnectionError("reply lost")
        return reply


def test_the_one_attempt_cleanup_really_releases(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = LostAcquireReply(port=redis_server.port)
    r.script_flush()  # the release script is not cached yet: EVALSHA, then EVAL
    with Lock(client, prefix="lost", ttl_ms=60_000) as locks:
        with pytest.raises(redis.ConnectionError):
            locks.acquire("k")
        assert r.get("lost:k") is None  # released at once, not after the TTL
    client.close()
