"""Closing a primitive (``aclose()``, or leaving ``async with``), on both drivers against a
real redis-server.

A closed Lock refuses every call, before any Redis command and without running the body:
it has no timers, no renewals and perhaps no client, so a body run then would run
unrenewed, its lease silently ending after one TTL.  Each entry point raises
``LockClosedError`` instead, a ``LockError`` (and a ``RuntimeError``, which is what a closed
Lock raised before).

Closing with sections held or callers waiting fires the signal of every open section (as a
loss) and releases its key; callers waiting on the closed object raise ``LockClosedError``
at once, withdraw their place in the queue, and are never handed a key.  Before, renewal and
the deadline watch stopped silently: the body ran on unrenewed past its TTL, a waiter was
still handed the key, and the loss surfaced only at the end, if at all.  (Asyncio also
cancels the bodies, as a loss does: ``tests/drivers/test_close_asyncio.py``.)
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import redis

from distlock import LockClosedError, LockError, LockLeaseLostError
from distlock._core.commands import Kind
from distlock._protocol import ACQUIRE, W_ACQUIRE, queue_keys
from distlock.asyncio import Lock, ReentrantLock, Semaphore
from distlock.errors import LossReason
from tests.redis_server import RedisServer

from .concurrency import UNCANCELLED, Event, Redis, client_for, disconnected, spawn, until

PREFIX = "closed"
KEYS = [f"{PREFIX}:a", f"{PREFIX}:b"]

#: Each kind waits in a queue of its own.
KIND = {"lock": Kind.LOCK, "reentrant": Kind.REENTRANT, "semaphore": Kind.SEMAPHORE}
KINDS: dict[str, Callable[..., Any]] = {
    "lock": Lock,
    "reentrant": ReentrantLock,
    "semaphore": lambda client, **options: Semaphore(client, limit=1, **options),
}


class RecordingRedis(Redis):
    """Records every command name it is asked to send."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[str] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        send: Callable[..., Awaitable[Any]] = super().execute_command
        return await send(*args, **options)


def assert_helpful(err: BaseException, keys: list[str]) -> None:
    """The error is the documented type and tells the caller what went wrong: it says the
    Lock is closed and names the key (or one of the group's keys), or says what to do."""
    assert type(err) is LockClosedError
    assert isinstance(err, LockError)
    assert isinstance(err, RuntimeError)
    text = str(err)
    assert "this Lock is closed" in text and err.primitive == "Lock", text
    names_key = getattr(err, "key", None) in keys or any(key in text for key in keys)
    says_what_to_do = any(hint in text for hint in ("new Lock", "create", "before close"))
    assert names_key or says_what_to_do, text


Body = Callable[[], Awaitable[None]]


async def call_acquire(locks: Lock, body: Body) -> object:
    return await locks.acquire("a")


async def call_run(locks: Lock, body: Body) -> object:
    return await locks.run("a", lambda handle: body())


async def call_hold(locks: Lock, body: Body) -> object:
    async with locks.hold("a"):
        await body()
    return None


async def call_run_many(locks: Lock, body: Body) -> object:
    return await locks.run_many(["a", "b"], lambda group: body())


async def call_hold_many(locks: Lock, body: Body) -> object:
    async with locks.hold_many(["a", "b"]):
        await body()
    return None


CALLS: dict[str, tuple[list[str], Callable[[Lock, Body], Awaitable[object]]]] = {
    "acquire": (KEYS[:1], call_acquire),
    "run": (KEYS[:1], call_run),
    "hold": (KEYS[:1], call_hold),
    "run_many": (KEYS, call_run_many),
    "hold_many": (KEYS, call_hold_many),
}


async def warm(handle: object) -> None:
    return None


async def closed_lock(client: RecordingRedis, how: str) -> Lock:
    """A Lock that was used, then closed ``how``."""
    if how == "aclose":
        locks = Lock(client, prefix=PREFIX)
        await locks.run("warm", warm)
        await locks.aclose()
        return locks
    async with Lock(client, prefix=PREFIX) as locks:
        await locks.run("warm", warm)
    return locks


@pytest.mark.parametrize("how", ["aclose", "async with"])
@pytest.mark.parametrize("call", list(CALLS))
async def test_closed_lock_refuses(
    call: str, how: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    keys, invoke = CALLS[call]
    ran: list[int] = []

    async def body() -> None:
        ran.append(1)

    client = RecordingRedis(port=redis_server.port)
    try:
        locks = await closed_lock(client, how)
        client.sent.clear()
        with pytest.raises(LockError) as info:
            await invoke(locks, body)
        sent = client.sent
    finally:
        await client.aclose()
    assert ran == [], "the body ran on a closed Lock"
    assert sent == [], f"commands sent by a closed Lock: {sent}"
    assert [key for key in keys if r.exists(key)] == []
    assert_helpful(info.value, keys)


class ClosedMidAttempt(RecordingRedis):
    """Its Lock is closed while an attempt is out, and the attempt fails as the close cut
    its connection (a Lock made from a URL closes its client)."""

    locks: Lock | None = None

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        locks, self.locks = self.locks, None
        if locks is not None and args[1] in (ACQUIRE.sha, W_ACQUIRE.sha):
            await locks.aclose()
            raise redis.ConnectionError("the close cut the connection")
        send: Callable[..., Awaitable[Any]] = super().execute_command
        return await send(*args, **options)


@pytest.mark.parametrize("options", [{}, {"wait_ms": 60_000}], ids=["fail-fast", "waiting"])
async def test_an_attempt_out_when_the_lock_is_closed_raises_lock_closed(
    redis_server: RedisServer, r: redis.Redis, options: dict[str, Any]
) -> None:
    """Not the connection error the close caused: the caller sees the Lock closed, as a
    waiter blocked at that moment does."""
    client = ClosedMidAttempt(port=redis_server.port)
    try:
        locks = Lock(client, prefix=PREFIX)
        client.locks = locks
        with pytest.raises(LockClosedError) as info:
            await locks.acquire("a", **options)
    finally:
        await client.aclose()
    assert isinstance(info.value.__cause__, redis.ConnectionError)
    assert_helpful(info.value, KEYS)
    assert [key for key in KEYS if r.exists(key)] == []


@pytest.mark.parametrize("kind", list(KINDS))
async def test_close_with_a_held_section_fires_its_signal_and_releases_its_key(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    client = client_for(redis_server)
    locks = KINDS[kind](client, prefix=PREFIX, ttl_ms=3_000)
    entered, closed = Event(), Event()
    seen: dict[str, Any] = {}

    async def holder() -> None:
        async with locks.hold("k", **UNCANCELLED) as handle:
            seen["handle"] = handle
            entered.set()
            await closed.wait()
            seen["aborted"] = handle.signal.aborted

    task = spawn(holder)
    try:
        await entered.wait()
        key = seen["handle"].key
        assert r.exists(key) == 1
        await locks.aclose()
        # Released by close itself, while the body still runs.
        assert r.exists(key) == 0
        assert seen["handle"].signal.aborted
    finally:
        closed.set()
        with pytest.raises(LockLeaseLostError) as info:
            await task.result()
        await client.aclose()
    assert seen["aborted"] is True
    assert info.value.reason is LossReason.LOCK_CLOSED
    assert "closed" in str(info.value)
    assert seen["handle"].signal.reason is info.value
    with pytest.raises(LockClosedError):
        await locks.run("k", warm)
    with pytest.raises(LockClosedError):
        await locks.acquire("k")


@pytest.mark.parametrize("kind", list(KINDS))
async def test_close_wakes_a_waiter_which_withdraws_and_is_never_handed_the_key(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    key = f"{PREFIX}:w"
    queue = queue_keys(key, KIND[kind])[0]
    other_client = client_for(redis_server, decode_responses=True)
    client = client_for(redis_server)
    other = KINDS[kind](other_client, prefix=PREFIX)
    locks = KINDS[kind](client, prefix=PREFIX)
    held = await other.acquire("w")
    assert held is not None
    waiter = spawn(locks.acquire, "w", wait_ms=30_000)
    try:
        await until(
            lambda: any(c.get("cmd") == "blpop" for c in r.client_list()),
            "the waiter blocked in its queue",
        )
        assert len(r.lrange(queue, 0, -1)) == 1
        await locks.aclose()
        with pytest.raises(LockClosedError):  # close woke the waiter
            await waiter.result()
        assert r.lrange(queue, 0, -1) == []  # its place is gone
        assert await held.release() is True
        assert r.exists(key) == 0  # the release handed the key to nobody
    finally:
        await other.aclose()
        await client.aclose()
        await other_client.aclose()


async def test_close_inside_nested_reentrant_levels_fails_each_exit_with_the_loss(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = client_for(redis_server, decode_responses=True)
    locks = ReentrantLock(client, prefix=PREFIX)
    errors: list[LockLeaseLostError] = []

    async def nested() -> None:
        async with locks.hold("n", **UNCANCELLED) as outer:
            try:
                async with locks.hold("n", **UNCANCELLED) as inner:
                    assert inner.depth == 2
                    await locks.aclose()  # from inside the body: the holder's own caller
                    assert r.exists(outer.key) == 0
                    assert inner.signal.aborted
            except LockLeaseLostError as exc:
                errors.append(exc)

    try:
        with pytest.raises(LockLeaseLostError) as outer_exc:
            await nested()
        assert outer_exc.value.reason is LossReason.LOCK_CLOSED
        assert [e.reason for e in errors] == [LossReason.LOCK_CLOSED]
    finally:
        await client.aclose()


async def test_close_from_inside_a_body_still_closes_and_closes_its_own_client(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    locks = Lock(redis_server.url, prefix=PREFIX)  # owns its client
    seen: dict[str, Any] = {}

    async def body(handle: Any) -> None:
        seen["key"] = handle.key
        await locks.aclose()

    with pytest.raises(LockLeaseLostError) as info:
        await locks.run("self", body, **UNCANCELLED)
    assert info.value.reason is LossReason.LOCK_CLOSED
    assert r.exists(seen["key"]) == 0
    assert disconnected(await locks.client())  # the client was closed
