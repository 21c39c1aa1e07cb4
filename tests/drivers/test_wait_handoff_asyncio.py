"""A semaphore's woken waiter, asyncio only: cancelled while its woken attempt's reply is
out, it leaves nothing behind (a thread cannot be cancelled; what both drivers share is in
``tests/drivers/_async/test_wait_handoff.py``)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
import redis
import redis.asyncio as aredis

from distlock.asyncio import Semaphore
from tests.drivers._async.test_wait_handoff import ATTEMPT, HOLD_MS, WAIT_MS, words_of
from tests.redis_server import RedisServer
from tests.waiting import arun, waiting_keys
from tests.waiting import start_waiting_async as start_waiting


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
        words = words_of(args)
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
        async with Semaphore(client, prefix="hc", limit=1, ttl_ms=HOLD_MS) as locks:
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
