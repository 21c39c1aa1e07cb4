"""Waiting for a held lock, asyncio only: a waiter cancelled while blocked, or while an
attempt's reply is out, and a timeout around a hold (a thread cannot be cancelled; what
both drivers share is in ``tests/drivers/_async/test_wait.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from distlock._protocol import W_ACQUIRE, queue_keys
from distlock.asyncio import Lock
from tests.redis_server import RedisServer
from tests.waiting import FOREVER_MS, arun, blocked, waiting_keys
from tests.waiting import start_waiting_async as start_waiting
from tests.waiting import until_async as until


def client_for(server: RedisServer) -> aredis.Redis:
    return aredis.Redis(port=server.port)


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


def test_a_waiter_cancelled_while_blocked_withdraws(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """The transitions of a cancelled waiter: those of a sync waiter whose connection
    dropped while blocked (``test_a_connection_error_while_blocked_withdraws``)."""
    withdrawn = ["Acquire", "AcquireReply", "Block", "Withdraw", "WithdrawReply"]
    trace: list[dict[str, Any]] = []

    async def main() -> None:
        admin = client_for(redis_server)
        async with Lock(client_for(redis_server), prefix="tw", ttl_ms=FOREVER_MS) as hl, Lock(
            client_for(redis_server), prefix="tw", trace=trace.append
        ) as locks:
            holder = await hl.acquire("k")
            assert holder is not None
            task = await start_waiting(admin, "tw:k", locks.acquire("k", wait_ms=FOREVER_MS))
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert [t["action"] for t in trace] == withdrawn
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
