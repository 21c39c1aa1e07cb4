from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """One redis-server for the session; tests isolate themselves with unique key prefixes."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def fresh_redis() -> Iterator[RedisServer]:
    """A redis-server of the test's own, for tests that pause, kill or restart it."""
    with RedisServer() as server:
        yield server


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis(host=redis_server.host, port=redis_server.port, decode_responses=False)
    client.flushall()
    yield client
    client.close()
