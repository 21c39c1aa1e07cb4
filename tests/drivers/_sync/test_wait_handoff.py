# Generated from tests/drivers/_async/test_wait_handoff.py by tools/unasync.py: do not edit.
"""The woken waiter's attempt goes out on the connection it blocked on, on both drivers
against a real redis-server.

A lock's release hands its key straight to the first waiter
(``tests/drivers/_async/test_wait.py``), but a semaphore's release only wakes it: between
that release and the woken waiter's attempt the permit sits idle, so that attempt leaves
the moment ``BLPOP`` answers, on the same connection, with no pool round trip.  What must
not change: an error there is thrown into the flow at the attempt, which cleans up as for
any attempt whose reply never came (no place left in the queue, no key left held), and the
connection goes back to the pool, disconnected if it failed.  (A cancellation there:
``tests/drivers/test_wait_handoff_asyncio.py``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import pytest
import redis

from distlock._protocol import SW_ACQUIRE
from distlock import Semaphore
from tests.redis_server import RedisServer
from tests.waiting import blocked_clients, waiting_keys

from .concurrency import Connection, ConnectionPool, Redis, retrying, spawn, until

HOLD_MS = 60_000
WAIT_MS = 30_000
ATTEMPT = SW_ACQUIRE.sha.encode()


def words_of(args: tuple[Any, ...]) -> tuple[bytes, ...]:
    return tuple(a if isinstance(a, bytes) else str(a).encode() for a in args)


class Noting(Connection):
    """Notes every command it sends as ``(connection, name, sha)``, in one shared list."""

    sent: ClassVar[list[tuple[int, bytes, bytes]]] = []

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        words = words_of(args)
        self.sent.append((id(self), words[0].upper(), words[1] if len(words) > 1 else b""))
        send: Callable[..., None] = super().send_command
        send(*args, **kwargs)


class NotingPool(ConnectionPool):
    """Notes each connection it hands out or takes back in its connections' list."""

    def get_connection(self, *args: Any, **kwargs: Any) -> Any:
        get: Callable[..., Any] = super().get_connection
        conn = get(*args, **kwargs)
        conn.sent.append((id(conn), b"<get>", b""))
        return conn

    def release(self, connection: Any) -> None:
        connection.sent.append((id(connection), b"<release>", b""))
        release: Callable[..., None] = super().release
        release(connection)


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
    client = Redis(connection_pool=NotingPool(port=redis_server.port, connection_class=connection))
    with Semaphore(client, prefix="h", limit=1, ttl_ms=HOLD_MS) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        waiter = spawn(locks.acquire, "k", wait_ms=WAIT_MS)
        until(lambda: blocked_clients(r), "the waiter's BLPOP")
        assert holder.release() is True
        handle = waiter.result()
        assert handle is not None
        assert woken_attempts(connection.sent) == [(b"EVALSHA",)]
        # The connection is back in the pool, idle: nothing is in use.
        pool: Any = client.connection_pool
        assert not pool._in_use_connections
        assert r.zscore("h:k", handle.token) is not None
        assert handle.release() is True
    client.close()
    assert waiting_keys(r) == []


class FailsWokenAttempt(Connection):
    """Its first waiting attempt sent right after a BLPOP on it fails as a dropped
    connection would, before anything reaches Redis."""

    failed: ClassVar[list[bool]] = []

    def __init__(self, **kwargs: Any) -> None:
        init: Callable[..., None] = super().__init__
        init(**kwargs)
        self.last = b""

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        words = words_of(args)
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
    pool = ConnectionPool(
        port=redis_server.port, connection_class=connection, retry=retrying(retries)
    )
    client = Redis(connection_pool=pool)
    with Semaphore(client, prefix="hf", limit=1, ttl_ms=HOLD_MS) as locks:
        holder = locks.acquire("k")
        assert holder is not None

        def wait() -> object:
            try:
                return locks.acquire("k", wait_ms=WAIT_MS)
            except redis.ConnectionError as exc:
                return exc

        waiter = spawn(wait)
        until(lambda: blocked_clients(r), "the waiter's BLPOP")
        assert holder.release() is True
        got = waiter.result()
        assert connection.failed == [True]  # the fault was injected
        assert not pool._in_use_connections
        if retries:
            handle: Any = got
            assert r.zscore("hf:k", handle.token) is not None
            assert handle.release() is True
        else:
            assert isinstance(got, redis.ConnectionError)
            assert r.exists("hf:k") == 0
    client.close()
    assert waiting_keys(r) == []


def test_a_wrapped_execute_command_sees_every_attempt(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """A client that wraps ``execute_command`` (to record, or to inject faults) is sent the
    woken attempt through it, like every other script."""
    seen: list[bytes] = []

    class Wrapped(Redis):
        def execute_command(self, *args: Any, **options: Any) -> Any:
            words = words_of(args)
            if len(words) > 1:
                seen.append(words[1])
            send: Callable[..., Any] = super().execute_command
            return send(*args, **options)

    client = Wrapped(port=redis_server.port)
    with Semaphore(client, prefix="hw", limit=1, ttl_ms=HOLD_MS) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        waiter = spawn(locks.acquire, "k", wait_ms=WAIT_MS)
        until(lambda: blocked_clients(r), "the waiter's BLPOP")
        assert holder.release() is True
        got: Any = waiter.result()
        assert got is not None
        assert seen.count(ATTEMPT) == 2  # the first attempt and the woken one
        assert got.release() is True
    client.close()
    assert waiting_keys(r) == []
