"""The asyncio ReentrantLock against a real redis-server: the holder is the current task.

Losses are forced deterministically (the key is deleted behind the holder's back; the next
renewal, every 100 ms with a 30 s TTL, or a manual extend finds it gone).
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio as aredis

from distlock import (
    LockClosedError,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    UsageError,
)
from distlock._protocol import R_ENTER, R_LEAVE
from distlock.asyncio import Lock, LockHandle, ReentrantHandle, ReentrantLock
from tests.redis_server import RedisServer

T = TypeVar("T")
WAIT = 10.0
TTL = 30_000
QUICK = 100


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(60):
            return await fn()

    return asyncio.run(main())


def client_for(server: RedisServer) -> aredis.Redis:
    return aredis.Redis(port=server.port)


def depth_in_redis(r: redis.Redis, handle: ReentrantHandle) -> int | None:
    raw = r.hget(handle.key, handle.token)
    return None if raw is None else int(raw)


def test_nested_hold_run_acquire(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with ReentrantLock(client_for(redis_server), prefix="ra", ttl_ms=TTL) as locks:
            async with locks.hold("a") as outer:
                assert outer.depth == 1 and depth_in_redis(r, outer) == 1

                async def body(inner: ReentrantHandle) -> int:
                    assert (inner.token, inner.fence) == (outer.token, outer.fence)
                    assert inner.signal is outer.signal
                    third = await locks.acquire("a")
                    assert third is not None and third.depth == 3
                    assert depth_in_redis(r, outer) == 3
                    assert await third.release() is True
                    assert await third.release() is False
                    assert depth_in_redis(r, outer) == 2
                    return inner.depth

                assert await locks.run("a", body) == 2
                assert depth_in_redis(r, outer) == 1 and r.pttl("ra:a") > 0
            assert r.exists("ra:a") == 0
            assert len(locks._holders) == 0

    arun(main)


def test_child_task_and_second_object_are_other_holders(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        client = client_for(redis_server)
        refused = asyncio.Event()

        def watch(event: dict[str, Any]) -> None:
            if event["action"] == "AcquireReply" and not event["granted"]:
                refused.set()

        async with ReentrantLock(client, prefix="rb", ttl_ms=TTL) as locks:
            other = ReentrantLock(client, prefix="rb", ttl_ms=TTL)
            async with locks.hold("a") as outer:
                # A child task does not inherit its parent's identity: refused, fast.
                assert await asyncio.create_task(locks.acquire("a")) is None
                with pytest.raises(LockNotAcquiredError):
                    await asyncio.create_task(locks.run("a", _noop))
                assert await other.acquire("a") is None
                # With retries, the child waits and gets it once the parent has left.
                waiter = ReentrantLock(client, prefix="rb", ttl_ms=TTL, trace=watch)
                child = asyncio.create_task(
                    waiter.run("a", _fence, retries=10_000, retry_delay_ms=5)
                )
                await refused.wait()
                assert outer.depth == 1
            assert await child > outer.fence
            await waiter.aclose()
            await other.aclose()
        await client.aclose()

    arun(main)


async def _noop(handle: ReentrantHandle) -> None:
    return None


async def _fence(handle: ReentrantHandle) -> int:
    return handle.fence


async def _plain_fence(handle: LockHandle) -> int:
    return handle.fence


def test_loss_at_depth_two_cancels_and_surfaces_at_every_level(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        trace: list[str] = []
        async with ReentrantLock(
            client_for(redis_server),
            prefix="rc",
            ttl_ms=TTL,
            heartbeat_ms=QUICK,
            trace=lambda e: trace.append(e["action"]),
        ) as locks:
            seen: list[str] = []
            with pytest.raises(LockLeaseLostError) as outer_exc:  # noqa: PT012
                async with locks.hold("a"):
                    try:
                        async with locks.hold("a") as inner:
                            r.delete(inner.key)
                            await asyncio.sleep(WAIT * 6)  # the loss cancels this
                    except BaseException as exc:
                        seen.append(type(exc).__name__)
                        raise
            assert seen == ["LockLeaseLostError"]
            assert outer_exc.value.reason is LossReason.RENEW_REJECTED
            assert "Leave" in trace and "LeaveReply" in trace  # a lost section still leaves
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0
            assert len(locks._holders) == 0

    arun(main)


def test_reentry_after_known_loss_raises_at_once(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        trace: list[str] = []
        async with ReentrantLock(
            client_for(redis_server),
            prefix="rd",
            ttl_ms=TTL,
            heartbeat_ms=QUICK,
            cancel_on_loss=False,
            trace=lambda e: trace.append(e["action"]),
        ) as locks:
            with pytest.raises(LockLeaseLostError):  # noqa: PT012
                async with locks.hold("a") as outer:
                    async with locks.hold("a") as inner:
                        r.delete(inner.key)
                        await outer.signal.wait()
                        before = len(trace)
                        for _ in range(2):
                            with pytest.raises(LockLeaseLostError):
                                await locks.acquire("a")
                            with pytest.raises(LockLeaseLostError):
                                async with locks.hold("a"):
                                    pass
                        assert not any(a.startswith("Reenter") for a in trace[before:])
                    raise AssertionError("the inner exit raises the loss")

    arun(main)


def test_manual_handles_and_rejections(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with ReentrantLock(client_for(redis_server), prefix="re", ttl_ms=TTL) as locks:
            outer = await locks.acquire("a")
            assert outer is not None
            inner = await locks.acquire("a")
            assert inner is not None and inner.depth == 2
            with pytest.raises(UsageError):
                await outer.release()
            r.delete(outer.key)
            assert await inner.release() is False  # LeaveReply 0: the loss
            assert outer.signal.reason is not None
            assert outer.signal.reason.reason is LossReason.LEAVE_REJECTED
            with pytest.raises(LockLeaseLostError) as exc:
                await locks.acquire("a")
            assert exc.value is outer.signal.reason
            assert await outer.release() is False
            assert len(locks._holders) == 0

            fresh = await locks.acquire("b")
            assert fresh is not None
            r.delete(fresh.key)
            with pytest.raises(LockLeaseLostError) as exc:
                await locks.acquire("b")
            assert exc.value.reason is LossReason.REENTER_REJECTED
            assert await fresh.release() is False

    arun(main)


def test_a_reentrant_lock_is_no_lock_with_groups(redis_server: RedisServer) -> None:
    """As the sync one: no ``hold_many``/``run_many`` attributes, so no ``Lock``; its
    handles are lock handles, fence and all."""

    async def main() -> None:
        async with ReentrantLock(client_for(redis_server), prefix="rg", ttl_ms=TTL) as locks:
            assert not isinstance(locks, Lock)
            for name in ("hold_many", "run_many"):
                assert not hasattr(ReentrantLock, name) and not hasattr(locks, name)
                with pytest.raises(AttributeError):
                    getattr(locks, name)
            async with locks.hold("a") as handle:
                assert isinstance(handle, LockHandle) and handle.fence > 0
                seen = await locks.owner("a")
                assert seen is not None and seen.fence == handle.fence
                assert await locks.locked("a") is True
            assert await locks.force_unlock("a") is False

    arun(main)


def test_cross_kind_refusal_and_fences(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        client = client_for(redis_server)
        plain = Lock(client, prefix="rf", ttl_ms=TTL)
        reentrant = ReentrantLock(client, prefix="rf", ttl_ms=TTL)
        first = await plain.run("k", _plain_fence)
        held = await plain.acquire("k")
        assert held is not None
        assert await reentrant.acquire("k") is None
        assert await held.release() is True
        rheld = await reentrant.acquire("k")
        assert rheld is not None and rheld.fence > first
        assert await plain.acquire("k") is None
        r.delete("rf:k")
        again = await plain.acquire("k")
        assert again is not None and again.fence > rheld.fence
        assert await rheld.extend() is False
        assert await rheld.release() is False
        assert await again.release() is True
        await plain.aclose()
        await reentrant.aclose()
        await client.aclose()

    arun(main)


def test_closed_lock_refuses_every_entry_point(redis_server: RedisServer) -> None:
    async def main() -> None:
        locks = ReentrantLock(client_for(redis_server), prefix="rg", ttl_ms=TTL)
        outer = await locks.acquire("k")
        assert outer is not None
        await locks.aclose()
        entries: list[Callable[[], Awaitable[object]]] = [
            lambda: locks.acquire("k"),
            lambda: locks.acquire("x"),
            lambda: locks.run("k", _noop),
            lambda: locks.hold("k").__aenter__(),
            lambda: locks.hold("x").__aenter__(),
        ]
        for enter in entries:
            with pytest.raises(LockClosedError):
                await enter()
        assert await outer.release() is True

    arun(main)


@pytest.mark.parametrize("script", [R_ENTER, R_LEAVE], ids=["reenter", "leave"])
def test_cancel_during_a_depth_write_leaves_no_key(
    script: Any, redis_server: RedisServer, r: redis.Redis
) -> None:
    """A task cancelled while its re-entry or inner exit waits for Redis leaves no key."""

    async def main() -> None:
        sent = asyncio.Event()
        never = asyncio.Event()

        class Stalling(aredis.Redis):
            async def execute_command(self, *args: Any, **options: Any) -> Any:
                if args[:2] == ("EVALSHA", script.sha):
                    sent.set()
                    await never.wait()  # the reply never comes
                return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]

        client = Stalling(port=redis_server.port)
        async with ReentrantLock(client, prefix="rh", ttl_ms=TTL) as locks:

            async def holder() -> None:
                async with locks.hold("k"), locks.hold("k"):
                    pass

            task = asyncio.create_task(holder())
            await sent.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert r.exists("rh:k") == 0
        await client.aclose()

    arun(main)


def test_cancel_in_the_body_leaves_no_key(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        inside = asyncio.Event()
        async with ReentrantLock(client_for(redis_server), prefix="ri", ttl_ms=TTL) as locks:

            async def holder() -> None:
                async with locks.hold("k"), locks.hold("k"):
                    inside.set()
                    await asyncio.Event().wait()

            task = asyncio.create_task(holder())
            await inside.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert r.exists("ri:k") == 0
            del task
            await asyncio.sleep(0)
            gc.collect()
            assert len(locks._holders) == 0

    arun(main)


def test_finished_tasks_are_not_kept(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with ReentrantLock(client_for(redis_server), prefix="rj", ttl_ms=TTL) as locks:
            task = asyncio.create_task(locks.acquire("k"))
            handle = await task
            assert handle is not None and len(locks._holders) == 1
            del task
            await asyncio.sleep(0)  # the loop lets go of the task it last woke us with
            gc.collect()
            assert len(locks._holders) == 0
            assert await handle.release() is True

    arun(main)
