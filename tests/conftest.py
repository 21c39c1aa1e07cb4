from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis

from distlock.tools.chaos.topologies import Cluster, SentinelTopology
from tests.redis_server import RedisServer

if TYPE_CHECKING:
    from tests.postgres_server import PostgresServer


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


@pytest.fixture(scope="session")
def redis_cluster() -> Iterator[Cluster]:
    """A real Redis Cluster on loopback (3 primaries, 3 replicas), started once per session.

    Tests that fail nodes over or move slots leave it healthy again (the topology waits for
    that), so the tests after them only ever ask it who serves a key now.
    """
    with Cluster() as cluster:
        yield cluster


@pytest.fixture(scope="session")
def sentinel_topology() -> Iterator[SentinelTopology]:
    """A primary, a replica and three sentinels on loopback, started once per session."""
    with SentinelTopology() as topology:
        yield topology


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (as an unprivileged user when we are root);
    tests isolate themselves with tables of their own.  Imported here, so that only the
    tests that use it need psycopg."""
    from tests.postgres_server import PostgresServer

    with PostgresServer() as server:
        yield server
