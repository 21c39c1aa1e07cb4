"""The sync driver only: a sync ReentrantLock refused in an event loop's thread (its
holder is the thread, which every task of the loop shares), and a sync ``run`` refusing
an asyncio body, whatever form it takes (asyncio has neither question; what both drivers
share is in ``tests/drivers/_async/test_user_rules.py``)."""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Coroutine
from typing import Any, TypeAlias, TypeVar

import pytest
import redis

import distlock
from distlock import UsageError, ValidationError
from tests.drivers.rules import BODY_KINDS, Recorder
from tests.redis_server import RedisServer
from tests.waiting import arun

T = TypeVar("T")






#: Any primitive: a Semaphore or a ReentrantLock is no Lock.
SyncPrimitive: TypeAlias = distlock.Lock | distlock.ReentrantLock | distlock.Semaphore


def _sync_primitive(kind: str, client: Any, **options: Any) -> SyncPrimitive:
    if kind == "semaphore":
        return distlock.Semaphore(client, limit=1, **options)
    if kind == "reentrant":
        return distlock.ReentrantLock(client, **options)
    return distlock.Lock(client, **options)


def _enter(locks: SyncPrimitive, id: str) -> None:
    """Enter and leave ``locks.hold(id)``."""
    with locks.hold(id):
        pass


def _run_body(locks: SyncPrimitive, kind: str, fn: Any) -> Any:
    """``fn`` run under ``locks`` by ``run``, or by ``run_many`` for the kind "many"."""
    if kind == "many":
        assert isinstance(locks, distlock.Lock)
        return locks.run_many(["a", "b"], fn)
    return locks.run("k", fn)


# -- 3. a sync ReentrantLock in an event loop's thread -------------------------------------


def test_sync_reentrant_lock_is_refused_in_an_event_loops_thread(
    url: str, r: redis.Redis
) -> None:
    client = redis.Redis.from_url(url)
    trace = Recorder()
    with distlock.ReentrantLock(client, prefix="rules-loop", trace=trace) as locks:

        async def main() -> None:
            with pytest.raises(UsageError, match=r"distlock\.asyncio\.ReentrantLock"):
                locks.acquire("k")
            with pytest.raises(UsageError, match=r"distlock\.asyncio\.ReentrantLock"):
                _enter(locks, "k")
            with pytest.raises(UsageError, match=r"distlock\.asyncio\.ReentrantLock"):
                locks.run("k", lambda h: None)
            # Off the loop's thread, the holder is that thread, as anywhere else.
            assert await asyncio.to_thread(locks.run, "k", lambda h: h.depth) == 1

        arun(main)
        assert trace.actions.count("Acquire") == 1  # the one from the worker thread
        assert r.exists("rules-loop:k") == 0
        # Outside a loop, as before.
        assert locks.run("k", lambda h: h.depth) == 1
    client.close()


def test_two_tasks_cannot_share_a_sync_reentrant_lock_through_their_thread(url: str) -> None:
    """What the refusal prevents: a second task, while the first holds the key, taken
    for a re-entry of the first and let in beside it."""
    client = redis.Redis.from_url(url)
    with distlock.ReentrantLock(client, prefix="rules-loop") as locks:
        inside = asyncio.Event()
        done = asyncio.Event()
        entered: list[tuple[str, int]] = []

        async def first() -> None:
            try:
                with locks.hold("k") as handle:
                    entered.append(("first", handle.depth))
                    inside.set()
                    await done.wait()  # holding the key while the second task tries
            finally:
                inside.set()

        async def second() -> None:
            await inside.wait()
            try:
                with locks.hold("k") as handle:
                    entered.append(("second", handle.depth))
            finally:
                done.set()

        async def main() -> list[BaseException | None]:
            results = await asyncio.gather(first(), second(), return_exceptions=True)
            return list(results)

        results = arun(main)
        assert entered == []
        assert all(isinstance(result, UsageError) for result in results)
    client.close()


def test_a_sync_lock_in_an_event_loops_thread_is_left_alone(url: str) -> None:
    client = redis.Redis.from_url(url)
    with distlock.Lock(client, prefix="rules-loop") as locks:

        async def main() -> int:
            return locks.run("k", lambda h: 7)

        assert arun(main) == 7
    client.close()


# -- 4. a sync run whose body returns a coroutine ------------------------------------------


async def _work(handle: object) -> str:
    return "never awaited"


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_sync_run_refuses_a_body_returning_a_coroutine(
    url: str, r: redis.Redis, kind: str
) -> None:
    client = redis.Redis.from_url(url)
    made: list[Coroutine[Any, Any, str]] = []

    def body(handle: object) -> Coroutine[Any, Any, str]:
        made.append(_work(handle))
        return made[-1]

    with _sync_primitive(
        "lock" if kind == "many" else kind, client, prefix="rules-body"
    ) as locks:
        with pytest.raises(ValidationError, match="returned a coroutine"):
            _run_body(locks, kind, body)
        # Released, and the coroutine closed without running (no "never awaited").
        assert r.keys("rules-body:*") == []
        assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
        # The lock is free for the next caller.
        assert locks.run("k", lambda h: "ok") == "ok"
    client.close()


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_sync_run_refuses_an_async_def_body_before_any_command(
    url: str, kind: str
) -> None:
    client = redis.Redis.from_url(url)
    trace = Recorder()

    async def body(handle: object) -> None:
        return None

    async def agen(handle: object) -> Any:
        yield handle

    with _sync_primitive(
        "lock" if kind == "many" else kind, client, prefix="rules-body", trace=trace
    ) as locks:
        for fn in (body, functools.partial(body), agen, 42):
            with pytest.raises(ValidationError):
                _run_body(locks, kind, fn)
    assert trace.actions == []
    client.close()


def test_an_async_body_given_to_the_sync_run_is_refused_before_any_command(
    redis_server: RedisServer,
) -> None:
    async def body(handle: distlock.LockHandle) -> None:
        pass

    r = redis.Redis.from_url(redis_server.url)
    with distlock.Lock(r, prefix="coro") as locks:
        with pytest.raises(ValidationError, match=r"distlock\.asyncio\.Lock"):
            locks.run("k", body)  # type: ignore[unused-coroutine]
        with pytest.raises(ValidationError, match=r"distlock\.asyncio\.Lock"):
            locks.run_many(["a", "b"], body)  # type: ignore[arg-type, unused-coroutine]
    assert r.keys("coro:*") == []
    r.close()
