"""The asyncio ReentrantLock only: a loss, or a cancel, interrupts the holding task (a
thread cannot be cancelled, so the sync driver has none of these; what both drivers share
is in ``tests/drivers/_async/test_reentrant.py``)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio as aredis

from distlock import LockLeaseLostError, LossReason
from distlock._protocol import R_ENTER, R_LEAVE
from distlock.asyncio import ReentrantLock
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
