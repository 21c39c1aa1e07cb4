"""What the driver tests do differently on asyncio and on threads (hand-written in both
``tests/drivers/_async`` and ``tests/drivers/_sync``, under the same names, as the drivers'
own ``backend.py``): clients, events, concurrent callers, polling, and the few facts about
background work that only a runtime can tell."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Generic, TypeVar

import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

import distlock
from distlock.signal import AsyncLeaseSignal
from distlock.tools.servers.topologies import Cluster, SentinelTopology
from tests.client_matrix import AsyncMade, ClientConfig
from tests.failing_clients import AsyncFailsOneRenewal
from tests.redis_server import RedisServer, free_port

T = TypeVar("T")
#: The driver under test, as the chaos tool names it.
DRIVER = "asyncio"
#: A generous bound on every wait for an event; never a timing assertion.
WAIT = 10.0
#: The options that let a body run on after its loss is known: asyncio cancels it by
#: default, a thread is never interrupted.
UNCANCELLED: dict[str, Any] = {"cancel_on_loss": False}
#: The driver's redis-py client class (a test subclasses it to watch what is sent).
Redis = aredis.Redis
#: The driver's client whose first renewal round trip fails (``tests/failing_clients.py``).
FailsOneRenewal = AsyncFailsOneRenewal
#: The driver's redis-py pools (a test bounds one).
ConnectionPool = aredis.ConnectionPool
BlockingConnectionPool = aredis.BlockingConnectionPool
#: The driver's redis-py connection (a test subclasses it to count connects).
Connection = aredis.Connection
RedisCluster = aredis.RedisCluster


def client_for(server: RedisServer, **kwargs: Any) -> aredis.Redis:
    return aredis.Redis(port=server.port, **kwargs)


def cluster_client(cluster: Cluster, **kwargs: Any) -> aredis.RedisCluster:
    return aredis.RedisCluster(
        startup_nodes=[ClusterNode(h, p) for h, p in cluster.startup_nodes], **kwargs
    )


def made_client(config: ClientConfig, url: str) -> AsyncMade:
    """What the config gives a primitive (a client or a URL), and how to let go of it."""
    return config.asyncio(url)


def sentinel_client(topology: SentinelTopology, **kwargs: Any) -> Any:
    """The driver's client that asks the sentinels where the primary is (redis-py's own)."""
    return topology.async_master_for(**kwargs)


def no_retry() -> Retry:
    """A client's retry policy that sends each command once."""
    return Retry(NoBackoff(), 0)


def retrying(retries: int) -> Retry:
    """A client's retry policy that sends each command up to ``1 + retries`` times, at once."""
    return Retry(NoBackoff(), retries)


def closed_port_client() -> aredis.Redis:
    """A client of a port nobody listens on: any command sent is a ConnectionError."""
    return aredis.Redis(port=free_port(), socket_connect_timeout=0.5, retry=no_retry())


def disconnected(client: Any) -> bool:
    """Whether every connection in ``client``'s pool is closed."""
    connections = client.connection_pool._available_connections
    return bool(connections) and not any(c.is_connected for c in connections)


def connected(conn: Any) -> bool:
    """Whether a connection of the driver's is connected."""
    return bool(conn.is_connected)


async def unread(conn: Any) -> bool:
    """Whether a connection of the driver's has a reply (or part of one) left unread."""
    return bool(conn.is_connected and await conn.can_read())


def local_address(conn: Any) -> str:
    """``host:port`` of a connected connection's own end, as ``CLIENT LIST`` shows it."""
    host, port = conn._writer.get_extra_info("sockname")[:2]
    return f"{host}:{port}"


def timers_stopped(locks: Any) -> bool:
    """Whether a closed primitive's timers can fire no more."""
    return locks._timers._handle is None


class Event:
    """An event one caller sets and another waits for (within :data:`WAIT`)."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    async def wait(self) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), WAIT)
        except TimeoutError:
            raise AssertionError("the event was never set") from None


async def signalled(signal: AsyncLeaseSignal) -> None:
    """Until a handle's signal fires (within :data:`WAIT`)."""
    try:
        await asyncio.wait_for(signal.wait(), WAIT)
    except TimeoutError:
        raise AssertionError("the signal never fired") from None


class Task(Generic[T]):
    """A call running concurrently with the test: an asyncio task."""

    def __init__(
        self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any
    ) -> None:
        self.task = asyncio.get_running_loop().create_task(fn(*args, **kwargs))

    def done(self) -> bool:
        return self.task.done()

    async def result(self) -> T:
        """What the call returned; what it raised is raised here."""
        return await asyncio.wait_for(self.task, 60)


def spawn(fn: Callable[..., Coroutine[Any, Any, T]], *args: Any, **kwargs: Any) -> Task[T]:
    """Start ``fn(*args, **kwargs)`` concurrently with the caller (another task)."""
    return Task(fn, *args, **kwargs)


async def gather(*calls: Callable[[], Awaitable[T]]) -> list[T | BaseException]:
    """Run the calls concurrently; each one's result, or what it raised."""

    async def call(fn: Callable[[], Awaitable[T]]) -> T:
        return await fn()

    return await asyncio.gather(*(call(fn) for fn in calls), return_exceptions=True)


async def blocking(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)``, a blocking call (of a sync client, say), on a thread of its own: the
    other tasks run meanwhile."""
    return await asyncio.to_thread(fn, *args)


async def sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


async def until(condition: Callable[[], object], what: str, limit_s: float = 30.0) -> None:
    """Until ``condition()`` holds: a condition on Redis's state or the clock, which cannot
    call us back, so it is polled (letting the other tasks run meanwhile)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        await asyncio.sleep(0.005)


async def exceptions_being_handled() -> list[BaseException]:
    """The exceptions being handled here and in the loop's own frames (a callback runs
    there, outside every task), none while nothing is: a handled exception left behind
    in a coroutine's state may surface in either."""
    loop = asyncio.get_running_loop()
    outside: asyncio.Future[BaseException | None] = loop.create_future()
    loop.call_soon(lambda: outside.set_result(sys.exc_info()[1]))
    found = [sys.exc_info()[1], await outside]
    return [e for e in found if e is not None]


def running() -> set[object]:
    """The tasks now on the loop."""
    return set(asyncio.all_tasks())


@contextmanager
def background_work() -> Iterator[list[str]]:
    """The tasks the package starts meanwhile (redis-py may start its own), listed on exit."""
    package = str(Path(distlock.__file__).resolve().parent)
    loop = asyncio.get_running_loop()
    started: list[str] = []

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        code = getattr(coro, "cr_code", None)
        if code is not None and code.co_filename.startswith(package):
            started.append(coro.__qualname__)
        return asyncio.Task(coro, loop=loop, **kw)

    loop.set_task_factory(counting)
    try:
        yield started
    finally:
        loop.set_task_factory(None)


@contextmanager
def timers_held_up(locks: Any) -> Iterator[None]:
    """The primitive's timers cannot fire until the block ends (as on a loaded machine): on
    asyncio the block's own blocking calls hold up the event loop, which runs the timers."""
    yield
