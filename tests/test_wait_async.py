"""Waiting for a held lock (asyncio), against a real redis-server.

As in ``test_wait_sync``: a waiter is known to be waiting when its place is in the key's
queue and its connection is blocked (``CLIENT LIST``); outcomes are decided by Redis state
and the order of events, never by how long something took.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio as aredis

import distlock
from distlock import LockNotAcquiredError
from distlock._core.commands import Kind
from distlock._protocol import W_ACQUIRE, queue_keys
from distlock.asyncio import Lock, LockGroup, LockHandle, ReentrantHandle, ReentrantLock
from tests.garbage import collector_saves_all
from tests.redis_server import RedisServer

T = TypeVar("T")
FOREVER_MS = 60_000


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(60):
            return await fn()

    return asyncio.run(main())


def client_for(server: RedisServer) -> aredis.Redis:
    return aredis.Redis(port=server.port)


async def until(condition: Callable[[], Awaitable[object]], what: str) -> None:
    """Wait for a condition on Redis's state (polled: Redis cannot call us back, so no
    event can stand in for this)."""
    try:
        async with asyncio.timeout(30):
            while not await condition():  # noqa: ASYNC110
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None


async def queue(admin: aredis.Redis, key: str) -> list[Any]:
    """The waiters queued on ``key``, whatever their kind (each kind has its own queue)."""
    return [w for kind in Kind for w in await admin.lrange(queue_keys(key, kind)[0], 0, -1)]


async def blocked(admin: aredis.Redis) -> int:
    """Connections blocked in BLPOP now (flag ``b``): ``cmd`` alone is a connection's last
    command, which an idle pooled connection whose BLPOP was answered with the key still
    shows."""
    return sum(
        1
        for c in await admin.client_list()
        if c.get("cmd") == "blpop" and "b" in c.get("flags", "")
    )


def waiting_keys(r: redis.Redis) -> list[Any]:
    return sorted(
        r.keys("distlock:queue*") + r.keys("distlock:queued*") + r.keys("distlock:wake*")
    )


def calls(r: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


async def start_waiting(
    admin: aredis.Redis, key: str, call: Awaitable[T]
) -> asyncio.Task[T]:
    """Start ``call`` as a task and return once it is queued and blocked."""
    before = len(await queue(admin, key))
    was_blocked = await blocked(admin)

    async def wrapped() -> T:
        return await call

    task = asyncio.get_running_loop().create_task(wrapped())

    async def queued() -> bool:
        return len(await queue(admin, key)) == before + 1

    async def blocking() -> bool:
        return await blocked(admin) == was_blocked + 1

    await until(queued, f"a waiter queued on {key}")
    await until(blocking, "the waiter's BLPOP")
    return task


# -- the deadline ----------------------------------------------------------------------


def test_acquire_returns_none_after_wait_ms(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="w") as locks:
            holder = await locks.acquire("k")
            assert holder is not None
            r.config_resetstat()
            assert await locks.acquire("k", wait_ms=300) is None
            stats = calls(r)
            assert stats["evalsha"] == 2 and stats["blpop"] == 1
            with pytest.raises(LockNotAcquiredError) as caught:
                async with locks.hold("k", wait_ms=200):
                    pytest.fail("no lock, no body")
            assert caught.value.key == "w:k"
            with pytest.raises(LockNotAcquiredError):
                await locks.run("k", lambda h: asyncio.sleep(0), wait_ms=200)

    arun(main)
    assert waiting_keys(r) == []


# -- wake-up -----------------------------------------------------------------------------


def test_a_release_hands_the_key_to_the_waiter(redis_server: RedisServer, r: redis.Redis) -> None:
    trace: list[dict[str, Any]] = []

    async def main() -> None:
        admin = client_for(redis_server)
        inside, leave = asyncio.Event(), asyncio.Event()
        handles: list[LockHandle] = []
        async with Lock(
            client_for(redis_server), prefix="w", ttl_ms=FOREVER_MS, trace=trace.append
        ) as locks:
            holder = await locks.acquire("k")
            assert holder is not None

            async def section() -> None:
                async with locks.hold("k", wait_ms=FOREVER_MS, ttl_ms=45_000) as handle:
                    handles.append(handle)
                    inside.set()
                    await leave.wait()

            task = await start_waiting(admin, "w:k", section())
            r.config_resetstat()
            assert await holder.release() is True
            await inside.wait()
            got = handles[0]
            wakes = [(t["woken"], t["fence"]) for t in trace if t["action"] == "Wake"]
            assert wakes == [(True, got.fence)] and got.fence > holder.fence
            assert r.get("w:k") == got.token.encode()
            # Handed with the short TTL; the first renewal, sent at once, gives it its own.
            await until(
                lambda: _true(any(t["action"] == "RenewReply" for t in trace)),
                "the first renewal",
            )
            assert 40_000 < r.pttl("w:k") <= 45_000
            assert calls(r)["evalsha"] == 2  # the release, which handed the key over; a renewal
            leave.set()
            await task
        await admin.aclose()

    arun(main)
    assert waiting_keys(r) == []


async def _true(value: bool) -> bool:
    return value


def test_a_wait_leaves_no_reference_cycle(redis_server: RedisServer, r: redis.Redis) -> None:
    """A wait's objects are freed when it ends, by reference counting (as a hold's are:
    see ``test_lock_async``): woken by a hand-off, and timed out."""

    async def main() -> None:
        admin = client_for(redis_server)
        async with Lock(client_for(redis_server), prefix="w", ttl_ms=FOREVER_MS) as locks:

            async def waits() -> None:
                holder = await locks.acquire("k")
                assert holder is not None
                task = await start_waiting(admin, "w:k", locks.acquire("k", wait_ms=FOREVER_MS))
                assert await holder.release() is True
                got = await task
                assert got is not None
                assert await locks.acquire("k", wait_ms=1) is None
                assert await got.release() is True

            await waits()  # connections, scripts
            with collector_saves_all() as garbage:
                for _ in range(3):
                    await waits()
            assert garbage == []
        await admin.aclose()

    arun(main)
    assert waiting_keys(r) == []


def test_a_holder_that_died_is_waited_out_at_its_expiry(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    trace: list[dict[str, Any]] = []

    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="w", trace=trace.append) as locks:
            dead = await locks.acquire("k", ttl_ms=1_000)
            assert dead is not None
            got = await locks.acquire("k", wait_ms=FOREVER_MS)
            assert got is not None and got.fence > dead.fence
            assert [t["woken"] for t in trace if t["action"] == "Wake"] == [False]
            await got.release()

    arun(main)
    assert waiting_keys(r) == []


def test_waiting_costs_nothing_when_the_lock_is_free(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="w") as locks:
            await locks.run("warm", lambda h: asyncio.sleep(0), wait_ms=1_000)
            r.config_resetstat()
            for _ in range(10):
                await locks.run("cheap", lambda h: asyncio.sleep(0), wait_ms=1_000)
            stats = calls(r)
            assert stats["evalsha"] == 20 and "blpop" not in stats

    arun(main)


# -- order -------------------------------------------------------------------------------


def test_waiters_get_the_lock_in_the_order_they_began_waiting(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> list[int]:
        admin = client_for(redis_server)
        order: list[int] = []
        async with Lock(client_for(redis_server), prefix="w") as locks:
            holder = await locks.acquire("k")
            assert holder is not None

            def body(n: int) -> Callable[[LockHandle], Awaitable[None]]:
                async def record(h: LockHandle) -> None:
                    order.append(n)

                return record

            tasks = []
            for n in range(5):
                call = locks.run("k", body(n), wait_ms=FOREVER_MS)
                tasks.append(await start_waiting(admin, "w:k", call))
            await holder.release()
            await asyncio.gather(*tasks)
        await admin.aclose()
        return order

    assert arun(main) == [0, 1, 2, 3, 4]
    assert waiting_keys(r) == []


def test_no_waiter_starves_while_others_keep_succeeding(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> dict[int, int]:
        turns = {n: 0 for n in range(4)}
        async with Lock(client_for(redis_server), prefix="w") as locks:

            async def worker(n: int) -> None:
                async def body(h: LockHandle) -> None:
                    turns[n] += 1
                    await asyncio.sleep(0)

                for _ in range(10):
                    await locks.run("k", body, wait_ms=FOREVER_MS)

            await asyncio.gather(*(worker(n) for n in range(4)))
        return turns

    assert arun(main) == {0: 10, 1: 10, 2: 10, 3: 10}
    assert waiting_keys(r) == []


def test_a_fail_fast_caller_takes_a_free_key_while_others_wait(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    queue_key, places, _ = queue_keys("w:k")
    r.rpush(queue_key, "someone")
    r.hset(places, "someone", int(r.time()[0]) * 1000 + FOREVER_MS)

    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="w") as locks:
            assert await locks.acquire("k", wait_ms=200) is None
            taken = await locks.acquire("k")
            assert taken is not None
            assert r.lrange(queue_key, 0, -1) == [b"someone"]
            await taken.release()

    arun(main)


# -- cancellation --------------------------------------------------------------------------


def test_cancelling_a_waiter_leaves_nothing_behind(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        admin = client_for(redis_server)
        async with Lock(client_for(redis_server), prefix="w") as locks:
            holder = await locks.acquire("k")
            assert holder is not None
            task = await start_waiting(admin, "w:k", locks.acquire("k", wait_ms=FOREVER_MS))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await locks.aclose()  # lets a withdrawal cut short by the cancel finish
            assert waiting_keys(r) == []
            assert r.get("w:k") == holder.token.encode()

            async def unblocked() -> bool:
                return await blocked(admin) == 0

            await until(unblocked, "the blocked connection closed")
        await admin.aclose()

    arun(main)


def test_a_timeout_around_hold_leaves_nothing_behind(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        admin = client_for(redis_server)
        client = client_for(redis_server)
        async with Lock(client, prefix="w") as locks:
            holder = await locks.acquire("k")
            assert holder is not None
            entered = False

            async def hold_with_a_timeout() -> None:
                nonlocal entered
                async with asyncio.timeout(None) as scope:

                    async def expire_once_blocked() -> None:
                        async def is_blocked() -> bool:
                            return await blocked(admin) == 1

                        await until(is_blocked, "the waiter's BLPOP")
                        scope.reschedule(asyncio.get_running_loop().time())

                    watcher = asyncio.get_running_loop().create_task(expire_once_blocked())
                    async with locks.hold("k", wait_ms=FOREVER_MS):
                        entered = True
                    await watcher

            with pytest.raises(TimeoutError):
                await hold_with_a_timeout()
            assert not entered

            async def unblocked() -> bool:
                return await blocked(admin) == 0

            await until(unblocked, "the blocked connection closed")
            # The pool's connections all work: none was handed back mid-BLPOP.
            assert await holder.release() is True
            assert await locks.run("k", lambda h: asyncio.sleep(0, h.fence), wait_ms=1_000)
        await admin.aclose()

    arun(main)
    assert waiting_keys(r) == []


# -- groups --------------------------------------------------------------------------------


def test_a_group_times_out_and_names_the_missing_key(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="w") as locks:
            assert await locks.acquire("b") is not None
            with pytest.raises(LockNotAcquiredError) as caught:
                async with locks.hold_many(["c", "b", "a"], wait_ms=300):
                    pytest.fail("no body without every lock")
            assert caught.value.key == "w:b"

    arun(main)
    assert r.get("w:a") is None and r.get("w:c") is None
    assert waiting_keys(r) == []


def test_a_group_waits_for_its_missing_key(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> list[str]:
        admin = client_for(redis_server)
        async with Lock(client_for(redis_server), prefix="w") as locks:
            holder = await locks.acquire("b")
            assert holder is not None

            async def body(group: LockGroup) -> list[str]:
                return group.keys

            task = await start_waiting(
                admin, "w:b", locks.run_many(["a", "b"], body, wait_ms=FOREVER_MS)
            )
            await holder.release()
            keys = await task
        await admin.aclose()
        return keys

    assert arun(main) == ["w:a", "w:b"]


# -- the reentrant lock --------------------------------------------------------------------


def test_a_reentrant_waiter_is_woken_and_a_reentry_never_waits(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        admin = client_for(redis_server)
        async with ReentrantLock(client_for(redis_server), prefix="rw") as locks:
            outer = await locks.acquire("k")
            assert outer is not None
            r.config_resetstat()
            inner = await locks.acquire("k", wait_ms=FOREVER_MS)  # same task: a re-entry
            assert isinstance(inner, ReentrantHandle) and inner.depth == 2
            assert "blpop" not in calls(r)

            async def other_task() -> int:
                async with locks.hold("k", wait_ms=FOREVER_MS) as h:
                    return h.depth

            task = await start_waiting(admin, "rw:k", other_task())
            assert await inner.release() is True
            assert await outer.release() is True
            assert await task == 1
        await admin.aclose()

    arun(main)
    assert waiting_keys(r) == []


# -- the twins -------------------------------------------------------------------------------


def _actions(trace: list[dict[str, Any]]) -> list[str]:
    return [t["action"] for t in trace]


def test_sync_and_asyncio_wait_with_the_same_transitions(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """One scenario per driver: woken by a release, then timed out (and, for
    asyncio, cancelled while blocked)."""
    # A manual handle is woken by the release, not handed the key: it attempts again.
    woken = ["Acquire", "AcquireReply", "Block", "Wake", "Acquire", "AcquireReply"]
    timed_out = ["Acquire", "AcquireReply", "Block", "Wake", "Acquire", "AcquireReply"]
    withdrawn = ["Acquire", "AcquireReply", "Block", "Withdraw", "WithdrawReply"]

    sync_trace: list[dict[str, Any]] = []
    with distlock.Lock(r, prefix="tw", ttl_ms=FOREVER_MS) as holder_locks, distlock.Lock(
        r, prefix="tw", trace=sync_trace.append
    ) as locks:
        holder = holder_locks.acquire("k")
        assert holder is not None
        got: list[object] = []
        thread = threading.Thread(target=lambda: got.append(locks.acquire("k", wait_ms=FOREVER_MS)))
        thread.start()
        while not r.exists(queue_keys("tw:k")[0]) or not [
            c for c in r.client_list() if c.get("cmd") == "blpop" and "b" in c.get("flags", "")
        ]:
            thread.join(0.005)
        holder.release()
        thread.join()
        handle = got[0]
        assert isinstance(handle, distlock.LockHandle)
        assert _actions(sync_trace) == woken
        assert handle.release()
        sync_trace.clear()
        holder = holder_locks.acquire("k")
        assert holder is not None
        assert locks.acquire("k", wait_ms=100) is None
        assert _actions(sync_trace) == timed_out
        assert holder.release()

    async_trace: list[dict[str, Any]] = []

    async def main() -> None:
        admin = client_for(redis_server)
        async with Lock(client_for(redis_server), prefix="tw", ttl_ms=FOREVER_MS) as hl, Lock(
            client_for(redis_server), prefix="tw", trace=async_trace.append
        ) as locks:
            holder = await hl.acquire("k")
            assert holder is not None
            task = await start_waiting(admin, "tw:k", locks.acquire("k", wait_ms=FOREVER_MS))
            await holder.release()
            handle = await task
            assert handle is not None
            assert _actions(async_trace) == woken
            await handle.release()
            async_trace.clear()
            holder = await hl.acquire("k")
            assert holder is not None
            assert await locks.acquire("k", wait_ms=100) is None
            assert _actions(async_trace) == timed_out
            async_trace.clear()
            task = await start_waiting(admin, "tw:k", locks.acquire("k", wait_ms=FOREVER_MS))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert _actions(async_trace) == withdrawn
            await holder.release()
        await admin.aclose()

    arun(main)
    assert waiting_keys(r) == []


class LateAttempts(aredis.Redis):
    """Runs each waiting attempt in Redis, then holds its reply until ``late`` is set:
    a caller cancelled meanwhile cannot know what the attempt did."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.held = asyncio.Event()
        self.late = asyncio.Event()

    # execute_command: the lock sends its scripts through it (and evalsha() does too).
    async def execute_command(self, *args: Any, **options: Any) -> Any:
        reply = await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        if args[:2] == ("EVALSHA", W_ACQUIRE.sha):
            self.held.set()
            await self.late.wait()
        return reply


@pytest.mark.parametrize("held_by_another", [True, False])
def test_cancelled_while_an_attempt_s_reply_is_out_leaves_nothing_behind(
    redis_server: RedisServer, r: redis.Redis, held_by_another: bool
) -> None:
    """The attempt ran (it queued us, or granted us the key), its reply never came: the
    cleanup release and the withdrawal take back whichever it was."""

    async def main() -> None:
        client = LateAttempts(port=redis_server.port)
        async with Lock(client_for(redis_server), prefix="w") as holders, Lock(
            client, prefix="w"
        ) as locks:
            holder = await holders.acquire("k") if held_by_another else None
            task = asyncio.get_running_loop().create_task(
                locks.acquire("k", wait_ms=FOREVER_MS)
            )
            await client.held.wait()
            # What the attempt did, before the cancellation undoes it:
            assert bool(r.exists(queue_keys("w:k")[0])) is held_by_another
            assert bool(r.exists("w:k"))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await locks.aclose()
            assert waiting_keys(r) == []
            if holder is None:
                assert r.exists("w:k") == 0  # granted to us, released by the cleanup
            else:
                assert r.get("w:k") == holder.token.encode()

    arun(main)
