from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
import redis

from distlock.tools.servers.topologies import Cluster, SentinelTopology
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


@pytest.fixture
def rc(redis_cluster: Cluster) -> Iterator[redis.RedisCluster]:
    """A sync client of the session's cluster, to look at its keys."""
    client = redis_cluster.client(socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
def primary(sentinel_topology: SentinelTopology) -> Iterator[redis.Redis]:
    """A sync client of the Sentinel topology's primary, to look at its keys."""
    client = sentinel_topology.master_for(socket_timeout=2)
    yield client
    client.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the session (as an unprivileged user when we are root);
    tests isolate themselves with tables of their own.  Imported here, so that only the
    tests that use it need psycopg."""
    from tests.postgres_server import PostgresServer

    with PostgresServer() as server:
        yield server



#: Fixtures that start a real server: a test using any of them is marked ``redis``.
SERVER_FIXTURES = frozenset(
    {"redis_server", "fresh_redis", "r", "redis_cluster", "sentinel_topology", "postgres_server"}
)
#: What a test module names when it starts servers of its own (``RedisServer()``, the
#: topologies, Toxiproxy, the chaos tool's targets): all its tests are marked ``redis``.
SERVER_MODULES = (
    "tests.redis_server",
    "tests.postgres_server",
    "tests.failing_clients",
    "tests.client_matrix",
    "distlock.tools.chaos",
    "distlock.tools.servers",
)
#: What a test module names when it runs TLC (state graphs, trace checks, verify runs):
#: all its tests are marked ``tlc``.
TLC_MODULES = (
    "tests.spec_graph",
    "tests.guard_replay",
    "distlock.tools.tracecheck",
    "distlock.tools.tlcjvm",
    "distlock.tools.verify",
    "tracecheck",
)


def _names_any(module: object, names: tuple[str, ...]) -> bool:
    source = getattr(module, "__file__", None)
    if not source:
        return False
    with open(source, encoding="utf-8") as f:
        text = f.read()
    return any(name in text for name in names)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark what each test needs, so the rest runs alone in seconds with nothing installed
    but Python (``make quick``: ``pytest -m "not redis and not tlc and not properties"``):
    ``redis`` for a real server of any kind, ``tlc`` for TLC (Java), ``properties`` for the
    long Hypothesis machines of tests/properties."""
    seen: dict[str, tuple[bool, bool]] = {}
    for item in items:
        module = getattr(item, "module", None)
        name = getattr(module, "__name__", "")
        if name not in seen:
            seen[name] = (_names_any(module, SERVER_MODULES), _names_any(module, TLC_MODULES))
        servers, tlc = seen[name]
        if servers or set(getattr(item, "fixturenames", ())) & SERVER_FIXTURES:
            item.add_marker(pytest.mark.redis)
        if tlc:
            item.add_marker(pytest.mark.tlc)
        if name.startswith("tests.properties."):
            item.add_marker(pytest.mark.properties)
