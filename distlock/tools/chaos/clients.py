"""A scenario's Redis clients and locks: recorded, named after the scenario, through the
proxy or straight to Redis, and closed together at the end of each trial."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeAlias

import redis
import redis.asyncio
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import ExponentialBackoff
from redis.connection import parse_url
from redis.retry import Retry

from distlock import (
    Lock,
    LockHandle,
    PermitHandle,
    ReadLock,
    ReadWriteLock,
    ReentrantLock,
    Semaphore,
    WriteLock,
)
from distlock.asyncio import Lock as AsyncLock
from distlock.asyncio import LockHandle as AsyncLockHandle
from distlock.asyncio import PermitHandle as AsyncPermitHandle
from distlock.asyncio import ReadLock as AsyncReadLock
from distlock.asyncio import ReentrantLock as AsyncReentrantLock
from distlock.asyncio import Semaphore as AsyncSemaphore
from distlock.asyncio import WriteLock as AsyncWriteLock
from distlock.tools.chaos.params import SOCKET_TIMEOUT, Params
from distlock.tools.chaos.recorder import Recorder, RecordingAsyncRedis, RecordingRedis
from distlock.tools.chaos.targets import RedisTarget
from distlock.tools.chaos.tracing import TrialTrace
from distlock.tools.servers.toxiproxy import Proxy

#: A scenario's primitive (a lock, a reentrant lock, a semaphore of ``limit`` permits, or
#: one side of a read-write lock), and the handle its ``run`` gives (a reentrant level's,
#: and a read-write lock's, are ``LockHandle``s).
AnyLock: TypeAlias = Lock | ReentrantLock | Semaphore | ReadLock | WriteLock
AnyAsyncLock: TypeAlias = (
    AsyncLock | AsyncReentrantLock | AsyncSemaphore | AsyncReadLock | AsyncWriteLock
)
AnyHandle: TypeAlias = LockHandle | PermitHandle
AnyAsyncHandle: TypeAlias = AsyncLockHandle | AsyncPermitHandle


class Clients:
    """Makes the scenario's clients and its kind of lock; every lock records into the
    traced trial's trace while there is one."""

    def __init__(
        self,
        params: Params,
        target: RedisTarget,
        proxy: Proxy | None,
        recorder: Recorder,
        trace: TrialTrace,
    ) -> None:
        self.params = params
        self.target = target
        self.proxy = proxy
        self.recorder = recorder
        self.trace = trace
        self._sync_clients: list[redis.Redis] = []
        self._locks: list[AnyLock | ReadWriteLock] = []

    def connection_kwargs(self, via_proxy: bool) -> dict[str, Any]:
        """Host, port, db and credentials of the target, or of the proxy in front of it."""
        parse: Callable[[str], dict[str, Any]] = parse_url
        parsed = parse(self.target.url)
        kwargs: dict[str, Any] = {
            k: parsed[k] for k in ("host", "port", "db", "username", "password") if k in parsed
        }
        if via_proxy:
            assert self.proxy is not None, "this scenario has no proxy"
            kwargs["host"], kwargs["port"] = self.proxy.host, self.proxy.port
        return kwargs

    def sync_client(self, role: str, *, via_proxy: bool, **kwargs: Any) -> RecordingRedis:
        client = RecordingRedis(
            **self.connection_kwargs(via_proxy),
            recorder=self.recorder,
            client_name=f"{self.params.tag}-{role}",
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=SOCKET_TIMEOUT,
            retry=Retry(ExponentialBackoff(cap=0.02, base=0.005), 1),
            **kwargs,
        )
        self._sync_clients.append(client)
        return client

    def async_client(self, role: str, *, via_proxy: bool) -> RecordingAsyncRedis:
        return RecordingAsyncRedis(
            **self.connection_kwargs(via_proxy),
            recorder=self.recorder,
            client_name=f"{self.params.tag}-{role}",
            socket_timeout=SOCKET_TIMEOUT,
            socket_connect_timeout=SOCKET_TIMEOUT,
            retry=AsyncRetry(ExponentialBackoff(cap=0.02, base=0.005), 1),
        )

    def sync_lock(self, client: redis.Redis, **options: Any) -> AnyLock:
        """The scenario's kind of lock (a Semaphore of ``limit`` permits, when it has one)
        on ``client``; ``options`` override the scenario's (``ttl_ms`` among them)."""
        params = self.params
        options = {"prefix": params.prefix, "ttl_ms": params.ttl_ms, **options}
        trace = self.trace.sink
        lock: AnyLock
        if params.limit is not None:
            lock = Semaphore(client, limit=params.limit, trace=trace, **options)
        else:
            kind = ReentrantLock if params.reentrant else Lock
            lock = kind(client, trace=trace, **options)
        self._locks.append(lock)
        return lock

    def sync_readwrite(self, client: redis.Redis, **options: Any) -> ReadWriteLock:
        """A read-write lock on ``client`` under the scenario's prefix and TTL (``options``
        override them): its ``.read`` and ``.write`` are what the sections run."""
        params = self.params
        options = {"prefix": params.prefix, "ttl_ms": params.ttl_ms, **options}
        rw = ReadWriteLock(client, trace=self.trace.sink, **options)
        self._locks.append(rw)
        return rw

    def async_lock(self, client: redis.asyncio.Redis) -> AnyAsyncLock:
        params, trace = self.params, self.trace.sink
        if params.limit is not None:
            return AsyncSemaphore(
                client, prefix=params.prefix, limit=params.limit, ttl_ms=params.ttl_ms,
                trace=trace,
            )
        kind = AsyncReentrantLock if params.reentrant else AsyncLock
        return kind(client, prefix=params.prefix, ttl_ms=params.ttl_ms, trace=trace)

    def close_sync(self) -> None:
        """Close every sync lock and client made so far (the asyncio ones are closed by
        the event loop that made them)."""
        locks, self._locks = self._locks, []
        for lock in locks:
            lock.close()
        clients, self._sync_clients = self._sync_clients, []
        for client in clients:
            client.close()
