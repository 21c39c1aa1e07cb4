"""A cancellation that redis-py swallows still cancels the call, and leaves nothing behind.

On Python 3.11, ``asyncio.wait_for`` returns the result of a send that finished just before
the task's cancellation reached it, and the cancellation is gone; redis-py wraps its sends in
``wait_for`` whenever the client has a socket timeout.  On a loaded machine that happened to a
waiter cancelled right after its command went out: it went on waiting as if nothing had
happened.  The connection below makes that moment certain: right after a chosen command is
sent, it cancels its own task and swallows the cancellation, as ``wait_for`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, ClassVar

import pytest
import redis
import redis.asyncio as aredis

from distlock._protocol import W_ACQUIRE
from distlock.asyncio import Lock, Semaphore
from tests.redis_server import RedisServer
from tests.waiting import arun, waiting_keys

HOLD_MS = 60_000
#: Long enough that a waiter that missed its cancellation is still waiting when it is
#: awaited (the test then fails on "did not raise"), short enough that it fails quickly.
WAIT_MS = 3_000


class SwallowsOneCancel(aredis.Connection):
    """Cancels its task once, right after sending ``trigger``, and swallows it."""

    trigger: ClassVar[tuple[bytes, ...]] = ()
    fired: ClassVar[list[bytes]] = []

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        await super().send_packed_command(command, check_health)
        packed = b"".join(command) if isinstance(command, list) else bytes(command)
        if not self.fired and any(word in packed for word in self.trigger):
            self.fired.append(packed)
            task = asyncio.current_task()
            assert task is not None
            task.cancel()
            # What Python 3.11's wait_for does when the send had finished:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.sleep(0)


def swallowing_client(
    server: RedisServer, trigger: bytes
) -> tuple[aredis.Redis, type[SwallowsOneCancel]]:
    connection = type("Swallows", (SwallowsOneCancel,), {"trigger": (trigger,), "fired": []})
    pool = aredis.ConnectionPool(port=server.port, connection_class=connection)
    return aredis.Redis(connection_pool=pool), connection


@pytest.mark.parametrize(
    "trigger",
    [
        pytest.param(b"BLPOP", id="while-blocked"),
        pytest.param(W_ACQUIRE.sha.encode(), id="queuing"),
    ],
)
def test_a_waiter_whose_cancellation_was_swallowed_is_cancelled(
    redis_server: RedisServer, r: redis.Redis, trigger: bytes
) -> None:
    async def main() -> None:
        client, connection = swallowing_client(redis_server, trigger)
        async with Lock(client, prefix="cs", ttl_ms=HOLD_MS) as locks:
            holder = await locks.acquire("k")
            assert holder is not None
            waiter = asyncio.ensure_future(locks.acquire("k", wait_ms=WAIT_MS))
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert len(connection.fired) == 1  # the race was made
            assert r.exists("cs:k") == 1  # still the holder's
            assert waiting_keys(r) == []  # its place is withdrawn
            assert await holder.release() is True

    arun(main)
    assert r.exists("cs:k") == 0


def test_a_permit_waiter_whose_cancellation_was_swallowed_is_cancelled(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        client, connection = swallowing_client(redis_server, b"BLPOP")
        async with Semaphore(client, prefix="css", limit=1, ttl_ms=HOLD_MS) as sems:
            holder = await sems.acquire("k")
            assert holder is not None
            waiter = asyncio.ensure_future(sems.acquire("k", wait_ms=WAIT_MS))
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert len(connection.fired) == 1
            assert waiting_keys(r) == []
            assert r.zcard("css:k") == 1
            assert await holder.release() is True

    arun(main)
    assert r.exists("css:k") == 0
