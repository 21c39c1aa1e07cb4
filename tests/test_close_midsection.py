"""close() / aclose() with sections held or callers waiting.

The rule: close() fires the signal of every open section (as a loss), cancels asyncio
bodies as a loss does, and releases their keys; callers waiting on the closed Lock object
raise LockClosedError at once, withdraw their place in the queue, and are never handed
a key; after close() every call raises LockClosedError.  Before, renewal and the deadline
watch stopped silently: the body ran on unrenewed past its TTL, a waiter was still handed
the key, and the loss surfaced only at the end, if at all.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio as adl
from distlock import LockClosedError, LockLeaseLostError
from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from distlock.errors import LossReason
from tests.redis_server import RedisServer

#: Each kind waits in a queue of its own.
KIND = {"lock": Kind.LOCK, "reentrant": Kind.REENTRANT, "semaphore": Kind.SEMAPHORE}

#: A failure guard only: every wait below ends as soon as what it waits for happens.
WAIT = 30.0
PREFIX = "midclose"

SYNC_KINDS: dict[str, Callable[..., Any]] = {
    "lock": distlock.Lock,
    "reentrant": distlock.ReentrantLock,
    "semaphore": lambda client, **options: distlock.Semaphore(client, limit=1, **options),
}
ASYNC_KINDS: dict[str, Callable[..., Any]] = {
    "lock": adl.Lock,
    "reentrant": adl.ReentrantLock,
    "semaphore": lambda client, **options: adl.Semaphore(client, limit=1, **options),
}


def wait_for_blocked_waiter(r: redis.Redis) -> None:
    """Until some client is blocked in BLPOP (the waiter is in the queue, blocked)."""
    polled = threading.Event()
    for _ in range(int(WAIT / 0.01)):
        if any(c.get("cmd") == "blpop" for c in r.client_list()):
            return
        polled.wait(0.01)
    raise AssertionError("the waiter never blocked")


# -- sync --------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(SYNC_KINDS))
def test_close_with_a_held_section_fires_its_signal_and_releases_its_key(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    locks = SYNC_KINDS[kind](client, prefix=PREFIX, ttl_ms=3_000)
    entered, closed = threading.Event(), threading.Event()
    seen: dict[str, Any] = {}

    def body(handle: Any) -> None:
        seen["handle"] = handle
        entered.set()
        assert closed.wait(WAIT)
        seen["aborted"] = handle.signal.aborted

    def holder() -> None:
        try:
            with locks.hold("k") as handle:
                body(handle)
        except BaseException as exc:
            seen["error"] = exc

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert entered.wait(WAIT)
        key = seen["handle"].key
        assert r.exists(key) == 1
        locks.close()
        # Released by close() itself, while the body still runs.
        assert r.exists(key) == 0
        assert seen["handle"].signal.aborted
    finally:
        closed.set()
        thread.join(WAIT)
        client.close()
    assert not thread.is_alive()
    assert seen["aborted"] is True
    error = seen["error"]
    assert isinstance(error, LockLeaseLostError), repr(error)
    assert error.reason is LossReason.LOCK_CLOSED
    assert "closed" in str(error)
    assert seen["handle"].signal.reason is error
    with pytest.raises(LockClosedError):
        locks.run("k", lambda handle: None)


@pytest.mark.parametrize("kind", list(SYNC_KINDS))
def test_close_wakes_a_waiter_which_withdraws_and_is_never_handed_the_key(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    key = f"{PREFIX}:w"
    other_client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    client = redis.Redis.from_url(redis_server.url)
    other = SYNC_KINDS[kind](other_client, prefix=PREFIX)
    locks = SYNC_KINDS[kind](client, prefix=PREFIX)
    held = other.acquire("w")
    assert held is not None
    seen: dict[str, Any] = {}

    def waiter() -> None:
        try:
            seen["result"] = locks.acquire("w", wait_ms=30_000)
        except BaseException as exc:
            seen["error"] = exc

    thread = threading.Thread(target=waiter)
    thread.start()
    try:
        wait_for_blocked_waiter(r)
        assert len(r.lrange(queue_keys(key, KIND[kind])[0], 0, -1)) == 1
        locks.close()
        thread.join(WAIT)
        assert not thread.is_alive(), "close() did not wake the waiter"
        assert isinstance(seen.get("error"), LockClosedError), seen
        assert r.lrange(queue_keys(key, KIND[kind])[0], 0, -1) == []  # its place is gone
        assert held.release() is True
        assert r.exists(key) == 0  # the release handed the key to nobody
    finally:
        thread.join(WAIT)
        other.close()
        client.close()
        other_client.close()


# -- asyncio -----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(ASYNC_KINDS))
def test_aclose_with_a_held_section_cancels_its_body_and_releases_its_key(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        locks = ASYNC_KINDS[kind](client, prefix=PREFIX, ttl_ms=3_000)
        entered = asyncio.Event()
        seen: dict[str, Any] = {}

        async def body(handle: Any) -> None:
            seen["handle"] = handle
            entered.set()
            try:
                await asyncio.sleep(WAIT)
            except asyncio.CancelledError:
                seen["cancelled"] = True
                raise

        async def holder() -> None:
            async with locks.hold("k") as handle:
                await body(handle)

        task = asyncio.create_task(holder())
        try:
            await asyncio.wait_for(entered.wait(), WAIT)
            key = seen["handle"].key
            assert r.exists(key) == 1
            await locks.aclose()
            assert r.exists(key) == 0
            assert seen["handle"].signal.aborted
            with pytest.raises(LockLeaseLostError) as info:
                await asyncio.wait_for(task, WAIT)
            assert info.value.reason is LossReason.LOCK_CLOSED
            assert seen.get("cancelled") is True
            assert seen["handle"].signal.reason is info.value
            with pytest.raises(LockClosedError):
                await locks.acquire("k")
        finally:
            task.cancel()
            await client.aclose()

    asyncio.run(main())


@pytest.mark.parametrize("kind", list(ASYNC_KINDS))
def test_aclose_wakes_a_waiter_which_withdraws_and_is_never_handed_the_key(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    key = f"{PREFIX}:w"

    async def main() -> None:
        other_client = aredis.Redis.from_url(redis_server.url, decode_responses=True)
        client = aredis.Redis.from_url(redis_server.url)
        other = ASYNC_KINDS[kind](other_client, prefix=PREFIX)
        locks = ASYNC_KINDS[kind](client, prefix=PREFIX)
        held = await other.acquire("w")
        assert held is not None
        task = asyncio.create_task(locks.acquire("w", wait_ms=30_000))
        try:
            await asyncio.to_thread(wait_for_blocked_waiter, r)
            assert len(r.lrange(queue_keys(key, KIND[kind])[0], 0, -1)) == 1
            await locks.aclose()
            with pytest.raises(LockClosedError):
                await asyncio.wait_for(task, WAIT)
            assert r.lrange(queue_keys(key, KIND[kind])[0], 0, -1) == []
            assert await held.release() is True
            assert r.exists(key) == 0
        finally:
            task.cancel()
            await other.aclose()
            await client.aclose()
            await other_client.aclose()

    asyncio.run(main())


def test_close_inside_nested_reentrant_levels_fails_each_exit_with_the_loss(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = redis.Redis.from_url(redis_server.url, decode_responses=True)
    locks = distlock.ReentrantLock(client, prefix=PREFIX)
    errors: list[LockLeaseLostError] = []

    def nested() -> None:
        with locks.hold("n") as outer:
            try:
                with locks.hold("n") as inner:
                    assert inner.depth == 2
                    locks.close()  # from inside the body: it is the body's own thread
                    assert r.exists(outer.key) == 0
                    assert inner.signal.aborted
            except LockLeaseLostError as exc:
                errors.append(exc)

    try:
        with pytest.raises(LockLeaseLostError) as outer_exc:
            nested()
        assert outer_exc.value.reason is LossReason.LOCK_CLOSED
        assert [e.reason for e in errors] == [LossReason.LOCK_CLOSED]
    finally:
        client.close()


def test_aclose_from_inside_a_body_cancels_that_body_and_still_closes(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        locks = adl.Lock(redis_server.url, prefix=PREFIX)  # owns its client
        seen: dict[str, Any] = {}

        async def body(handle: Any) -> None:
            seen["key"] = handle.key
            await locks.aclose()
            seen["went on"] = True  # not reached: the loss cancelled the body

        with pytest.raises(LockLeaseLostError) as info:
            await locks.run("self", body)
        assert info.value.reason is LossReason.LOCK_CLOSED
        assert "went on" not in seen
        assert r.exists(seen["key"]) == 0
        client: Any = await locks.client()
        pool: Any = client.connection_pool
        conns = [*pool._available_connections, *pool._in_use_connections]
        assert conns and not any(c.is_connected for c in conns)  # the client was closed

    asyncio.run(main())
