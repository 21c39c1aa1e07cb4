"""The woken waiter's attempt goes out on the connection it blocked on, against a real
redis-server, sync and asyncio.

A lock's release hands its key straight to the first waiter
(``tests/drivers/_async/test_wait.py``), but a semaphore's release only wakes it: between
that release and the woken waiter's attempt the permit sits idle, so that attempt leaves
the moment ``BLPOP`` answers, on the same connection, with no pool round trip.  What must
not change: an error or a cancellation there is thrown into the flow at the attempt, which
cleans up as for any attempt whose reply never came (no place left in the queue, no key
left held), and the connection goes back to the pool, disconnected if it failed.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

import pytest
import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distlock import Semaphore
from distlock._protocol import SW_ACQUIRE
from distlock.asyncio import Semaphore as AsyncSemaphore
from tests.redis_server import RedisServer
from tests.waiting import arun, blocked_clients, until, waiting_keys
from tests.waiting import start_waiting_async as start_waiting

HOLD_MS = 60_000
WAIT_MS = 30_000
ATTEMPT = SW_ACQUIRE.sha.encode()


def _words(args: tuple[Any, ...]) -> tuple[bytes, ...]:
    return tuple(a if isinstance(a, bytes) else str(a).encode() for a in args)


class Noting(redis.Connection):
    """Notes every command it sends as ``(connection, name, sha)``, in one shared list."""

    sent: ClassVar[list[tuple[int, bytes, bytes]]] = []

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        words = _words(args)
        self.sent.append((id(self), words[0].upper(), words[1] if len(words) > 1 else b""))
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)


class AsyncNoting(aredis.Connection):
    sent: ClassVar[list[tuple[int, bytes, bytes]]] = []

    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        words = _words(args)
        self.sent.append((id(self), words[0].upper(), words[1] if len(words) > 1 else b""))
        send: Callable[..., Awaitable[None]] = super().send_command
        await send(*args, **kwargs)


class NotingPool(redis.ConnectionPool):
    """Notes each connection it hands out or takes back in its connections' list."""

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        get: Callable[..., Any] = super().get_connection
        conn = get(*args, **kwargs)
        conn.sent.append((id(conn), b"<get>", b""))
        return conn

    def release(self, connection: Any) -> None:
        connection.sent.append((id(connection), b"<release>", b""))
        super().release(connection)


class AsyncNotingPool(aredis.ConnectionPool):
    async def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        get: Callable[..., Awaitable[Any]] = super().get_connection
        conn = await get(*args, **kwargs)
        conn.sent.append((id(conn), b"<get>", b""))
        return conn

    async def release(self, connection: Any) -> None:
        connection.sent.append((id(connection), b"<release>", b""))
        await super().release(connection)


def woken_attempts(sent: list[tuple[int, bytes, bytes]]) -> list[tuple[bytes, ...]]:
    """For each BLPOP, what its connection did next up to the first waiting attempt sent
    after it (on any connection): the attempt itself when it went out on that connection
    with nothing in between."""
    out = []
    for i, (conn, name, _sha) in enumerate(sent):
        if name != b"BLPOP":
            continue
        steps: list[bytes] = []
        for c, n, s in sent[i + 1 :]:
            if c == conn or (n == b"EVALSHA" and s == ATTEMPT):
                steps.append(n if c == conn else b"elsewhere")
            if n == b"EVALSHA" and s == ATTEMPT:
                break
        out.append(tuple(steps))
    return out


def test_the_woken_attempt_goes_out_on_the_blocked_connection(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    connection: Any = type("Noting", (Noting,), {"sent": []})
    client = redis.Redis(
        connection_pool=NotingPool(port=redis_server.port, connection_class=connection)
    )
    with Semaphore(client, prefix="h", limit=1, ttl_ms=HOLD_MS) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        got: list[object] = []
        waiter = threading.Thread(target=lambda: got.append(locks.acquire("k", wait_ms=WAIT_MS)))
        waiter.start()
        until(lambda: blocked_clients(r), "the waiter's BLPOP")
        assert holder.release() is True
        waiter.join()
        handle = got[0]
        assert handle is not None
        assert woken_attempts(connection.sent) == [(b"EVALSHA",)]
        # The connection is back in the pool, idle: nothing is in use.
        pool: Any = client.connection_pool
        assert not pool._in_use_connections
        assert r.zscore("h:k", handle.token) is not None  # type: ignore[attr-defined]
        assert handle.release() is True  # type: ignore[attr-defined]
    assert waiting_keys(r) == []


def test_the_woken_attempt_goes_out_on_the_blocked_connection_asyncio(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    connection: Any = type("AsyncNoting", (AsyncNoting,), {"sent": []})

    async def main() -> None:
        client = aredis.Redis(
            connection_pool=AsyncNotingPool(port=redis_server.port, connection_class=connection)
        )
        admin = aredis.Redis(port=redis_server.port)
        async with AsyncSemaphore(client, prefix="ha", limit=1, ttl_ms=HOLD_MS) as locks:
            holder = await locks.acquire("k")
            assert holder is not None
            task = await start_waiting(admin, "ha:k", locks.acquire("k", wait_ms=WAIT_MS))
            assert await holder.release() is True
            handle = await task
            assert handle is not None
            assert woken_attempts(connection.sent) == [(b"EVALSHA",)]
            pool: Any = client.connection_pool
            assert not pool._in_use_connections
            assert await handle.release() is True
        await admin.aclose()
        await client.aclose()

    arun(main)
    assert waiting_keys(r) == []


class FailsWokenAttempt(redis.Connection):
    """Its first waiting attempt sent right after a BLPOP on it fails as a dropped
    connection would, before anything reaches Redis."""

    failed: ClassVar[list[bool]] = []

    def __init__(self, **kwargs: Any) -> None:
        init: Callable[..., None] = super().__init__
        init(**kwargs)
        self.last = b""

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        words = _words(args)
        after_block, self.last = self.last == b"BLPOP", words[0].upper()
        if after_block and len(words) > 1 and words[1] == ATTEMPT and not self.failed:
            self.failed.append(True)
            raise redis.ConnectionError("dropped before the woken attempt went out")
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)


@pytest.mark.parametrize("retries", [0, 1])
def test_a_failed_woken_attempt_is_retried_as_the_client_retries_or_cleaned_up(
    redis_server: RedisServer, r: redis.Redis, retries: int
) -> None:
    """With the client's retries the attempt goes again (same token) and is granted;
    without, the error reaches the caller and nothing is left behind."""
    connection: Any = type("Fails", (FailsWokenAttempt,), {"failed": []})
    pool = redis.ConnectionPool(
        port=redis_server.port, connection_class=connection, retry=Retry(NoBackoff(), retries)
    )
    client = redis.Redis(connection_pool=pool)
    with Semaphore(client, prefix="hf", limit=1, ttl_ms=HOLD_MS) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        got: list[object] = []

        def wait() -> None:
            try:
                got.append(locks.acquire("k", wait_ms=WAIT_MS))
            except redis.ConnectionError as exc:
                got.append(exc)

        waiter = threading.Thread(target=wait)
        waiter.start()
        until(lambda: blocked_clients(r), "the waiter's BLPOP")
        assert holder.release() is True
        waiter.join()
        assert connection.failed == [True]  # the fault was injected
        assert not pool._in_use_connections
        if retries:
            handle: Any = got[0]
            assert r.zscore("hf:k", handle.token) is not None
            assert handle.release() is True
        else:
            assert isinstance(got[0], redis.ConnectionError)
            assert r.exists("hf:k") == 0
    assert waiting_keys(r) == []


class HoldsWokenAttempt(aredis.Connection):
    """Sends its first waiting attempt that follows a BLPOP on it, then holds back the
    reply until ``late`` is set: a caller cancelled meanwhile cannot know that it was
    granted the key."""

    sent: ClassVar[asyncio.Event]
    late: ClassVar[asyncio.Event]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.last = b""
        self.holding = False

    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        words = _words(args)
        after_block, self.last = self.last == b"BLPOP", words[0].upper()
        await super().send_command(*args, **kwargs)
        if after_block and len(words) > 1 and words[1] == ATTEMPT and not self.sent.is_set():
            self.holding = True

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        reply = await super().read_response(*args, **kwargs)
        if self.holding:
            self.holding = False
            self.sent.set()
            await self.late.wait()
        return reply


def test_cancelled_while_the_woken_attempt_s_reply_is_out_leaves_nothing_behind(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The woken attempt ran and granted the key; its reply never reached the cancelled
    caller: the cleanup release takes the key back, and the connection is not reused."""

    async def main() -> None:
        connection: Any = type(
            "Holds", (HoldsWokenAttempt,), {"sent": asyncio.Event(), "late": asyncio.Event()}
        )
        client = aredis.Redis(
            connection_pool=aredis.ConnectionPool(
                port=redis_server.port, connection_class=connection
            )
        )
        admin = aredis.Redis(port=redis_server.port)
        async with AsyncSemaphore(client, prefix="hc", limit=1, ttl_ms=HOLD_MS) as locks:
            holder = await locks.acquire("k")
            assert holder is not None
            task = await start_waiting(admin, "hc:k", locks.acquire("k", wait_ms=WAIT_MS))
            assert await holder.release() is True
            await connection.sent.wait()
            assert await admin.exists("hc:k") == 1  # granted in Redis, not yet known
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            connection.late.set()
            assert await admin.exists("hc:k") == 0
            pool: Any = client.connection_pool
            assert not pool._in_use_connections
        await admin.aclose()
        await client.aclose()

    arun(main)
    assert waiting_keys(r) == []


def test_a_wrapped_execute_command_sees_every_attempt(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """A client that wraps ``execute_command`` (to record, or to inject faults) is sent the
    woken attempt through it, like every other script."""
    seen: list[bytes] = []

    class Wrapped(redis.Redis):
        def execute_command(self, *args: Any, **options: Any) -> Any:
            words = _words(args)
            if len(words) > 1:
                seen.append(words[1])
            return super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

    with Semaphore(Wrapped(port=redis_server.port), prefix="hw", limit=1, ttl_ms=HOLD_MS) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        got: list[Any] = []
        waiter = threading.Thread(target=lambda: got.append(locks.acquire("k", wait_ms=WAIT_MS)))
        waiter.start()
        until(lambda: blocked_clients(r), "the waiter's BLPOP")
        assert holder.release() is True
        waiter.join()
        assert got[0] is not None
        assert seen.count(ATTEMPT) == 2  # the first attempt and the woken one
        assert got[0].release() is True
    assert waiting_keys(r) == []
