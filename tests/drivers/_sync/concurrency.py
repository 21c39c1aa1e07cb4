"""What the driver tests do differently on asyncio and on threads (hand-written in both
``tests/drivers/_async`` and ``tests/drivers/_sync``, under the same names, as the drivers'
own ``backend.py``): clients, events, concurrent callers, polling, and the few facts about
background work that only a runtime can tell."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distlock.signal import LeaseSignal
from distlock.tools.servers.topologies import Cluster, SentinelTopology
from tests.client_matrix import ClientConfig, SyncMade
from tests.failing_clients import FailsOneRenewal as FailsOneRenewal  # re-exported
from tests.redis_server import RedisServer, free_port

T = TypeVar("T")
#: The driver under test, as the chaos tool names it.
DRIVER = "sync"
#: A generous bound on every wait for an event; never a timing assertion.
WAIT = 10.0
#: The options that let a body run on after its loss is known: asyncio cancels it by
#: default, a thread is never interrupted.
UNCANCELLED: dict[str, Any] = {}
#: The driver's redis-py client class (a test subclasses it to watch what is sent).
Redis = redis.Redis
#: The driver's redis-py pools (a test bounds one).
ConnectionPool = redis.ConnectionPool
BlockingConnectionPool = redis.BlockingConnectionPool
#: The driver's redis-py connection (a test subclasses it to count connects).
Connection = redis.Connection
RedisCluster = redis.RedisCluster


def client_for(server: RedisServer, **kwargs: Any) -> redis.Redis:
    return redis.Redis(port=server.port, **kwargs)


def cluster_client(cluster: Cluster, **kwargs: Any) -> redis.RedisCluster:
    return cluster.client(**kwargs)


def made_client(config: ClientConfig, url: str) -> SyncMade:
    """What the config gives a primitive (a client or a URL), and how to let go of it."""
    return config.sync(url)


def sentinel_client(topology: SentinelTopology, **kwargs: Any) -> Any:
    """The driver's client that asks the sentinels where the primary is (redis-py's own)."""
    return topology.master_for(**kwargs)


def no_retry() -> Retry:
    """A client's retry policy that sends each command once."""
    return Retry(NoBackoff(), 0)


def retrying(retries: int) -> Retry:
    """A client's retry policy that sends each command up to ``1 + retries`` times, at once."""
    return Retry(NoBackoff(), retries)


def closed_port_client() -> redis.Redis:
    """A client of a port nobody listens on: any command sent is a ConnectionError."""
    return redis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=no_retry())


def disconnected(client: Any) -> bool:
    """Whether every connection in ``client``'s pool is closed."""
    connections = client.connection_pool._available_connections
    return bool(connections) and all(c._sock is None for c in connections)


def connected(conn: Any) -> bool:
    """Whether a connection of the driver's is connected."""
    return conn._sock is not None


def unread(conn: Any) -> bool:
    """Whether a connection of the driver's has a reply (or part of one) left unread."""
    return bool(conn._sock is not None and conn.can_read())


def local_address(conn: Any) -> str:
    """``host:port`` of a connected connection's own end, as ``CLIENT LIST`` shows it."""
    host, port = conn._sock.getsockname()[:2]
    return f"{host}:{port}"


def timers_stopped(locks: Any) -> bool:
    """Whether a closed primitive's timers can fire no more."""
    return locks._timers.running is False


class Event:
    """An event one caller sets and another waits for (within :data:`WAIT`)."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self) -> None:
        assert self._event.wait(WAIT), "the event was never set"


def signalled(signal: LeaseSignal) -> None:
    """Until a handle's signal fires (within :data:`WAIT`)."""
    assert signal.wait(WAIT), "the signal never fired"


class Task(threading.Thread, Generic[T]):
    """A call running concurrently with the test: a thread of its own."""

    def __init__(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> None:
        super().__init__(daemon=True)
        self._fn, self._args, self._kwargs = fn, args, kwargs
        self._result: T | None = None
        self._error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._result = self._fn(*self._args, **self._kwargs)
        except BaseException as exc:
            self._error = exc

    def done(self) -> bool:
        return not self.is_alive()

    def result(self) -> T:
        """What the call returned; what it raised is raised here."""
        self.join(60)
        assert not self.is_alive(), "the call never returned"
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]


def spawn(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Task[T]:
    """Start ``fn(*args, **kwargs)`` concurrently with the caller (another thread)."""
    return Task(fn, *args, **kwargs)


def gather(*calls: Callable[[], T]) -> list[T | BaseException]:
    """Run the calls concurrently; each one's result, or what it raised."""
    tasks = [Task(fn) for fn in calls]
    results: list[T | BaseException] = []
    for task in tasks:
        try:
            results.append(task.result())
        except Exception as exc:
            results.append(exc)
    return results


def blocking(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, a blocking call (of a sync client, say): the other threads run
    meanwhile."""
    return fn(*args)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def until(condition: Callable[[], object], what: str, limit_s: float = 30.0) -> None:
    """Until ``condition()`` holds: a condition on Redis's state or the clock, which cannot
    call us back, so it is polled."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.005)


def exceptions_being_handled() -> list[BaseException]:
    """The exception being handled here, none while nothing is."""
    return [e for e in (sys.exc_info()[1],) if e is not None]


def running() -> set[object]:
    """The threads now running."""
    return {t.ident for t in threading.enumerate()}


@contextmanager
def background_work() -> Iterator[list[str]]:
    """The threads started meanwhile and still running, listed on exit."""
    before = running()
    started: list[str] = []
    try:
        yield started
    finally:
        started.extend(t.name for t in threading.enumerate() if t.ident not in before)


@contextmanager
def timers_held_up(locks: Any) -> Iterator[None]:
    """The primitive's timers cannot fire until the block ends (as on a loaded machine): its
    timer thread is kept busy."""
    release, busy = threading.Event(), threading.Event()

    def occupy(_: object) -> None:
        busy.set()
        release.wait(WAIT * 3)

    locks._timers.call_at(0.0, occupy)
    assert busy.wait(WAIT), "the timer thread never ran"
    try:
        yield
    finally:
        release.set()
