"""Direct sends, the asyncio driver only: a caller cancelled while a script's reply is
out, and a connection that packs commands with its own ``pack_command`` (a thread cannot be
cancelled, and a sync connection packs through its command packer; what both drivers share
is in ``tests/drivers/_async/test_direct_send.py``)."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest
import redis
import redis.asyncio as aredis

from distlock.asyncio import Lock as AsyncLock
from tests.drivers.sent import scripts
from tests.redis_server import RedisServer
from tests.waiting import arun

TTL_MS = 30_000




async def _acycle(locks: AsyncLock) -> int:
    handle = await locks.acquire("k")
    assert handle is not None
    fence = handle.fence
    assert await handle.release() is True
    return fence


class _HeldReply(aredis.Connection):
    """The first script's reply is not read until ``late``: the command is out, its reply
    pending, when the caller is cancelled."""

    sent: ClassVar[asyncio.Event]
    late: ClassVar[asyncio.Event]
    held: ClassVar[list[Any]]
    last: object = None

    async def send_command(self, *args: Any, **kwargs: Any) -> None:
        self.last = args[0]
        await super().send_command(*args, **kwargs)

    async def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.last == "EVALSHA" and not self.held:
            self.held.append(self)
            self.sent.set()
            await self.late.wait()
        return await super().read_response(*args, **kwargs)


class _AsyncNotingRelease(aredis.ConnectionPool):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.returned: list[tuple[Any, bool]] = []

    async def release(self, connection: Any) -> None:
        self.returned.append((connection, connection.is_connected))
        await super().release(connection)


def test_asyncio_cancelled_mid_command_disconnects_the_connection(
    redis_server: RedisServer, r: redis.Redis, through_execute: list[str]
) -> None:
    async def main() -> None:
        connection: Any = type(
            "Held",
            (_HeldReply,),
            {"sent": asyncio.Event(), "late": asyncio.Event(), "held": []},
        )
        pool = _AsyncNotingRelease(port=redis_server.port, connection_class=connection)
        client = aredis.Redis(connection_pool=pool)
        async with AsyncLock(client, prefix="acancel", ttl_ms=TTL_MS) as locks:
            task = asyncio.create_task(locks.acquire("k"))
            await connection.sent.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            held = connection.held[0]
            assert (held, False) in pool.returned  # disconnected before it went back
            assert not pool._in_use_connections
            # The acquire ran in Redis; its reply never reached us: the cleanup gave the
            # key back, and the pool's connections still serve.
            assert r.exists("acancel:k") == 0
            await _acycle(locks)
        assert scripts(through_execute) == []
        await client.aclose()

    arun(main)


def test_a_connection_with_its_own_pack_command_sees_every_script(
    redis_server: RedisServer,
) -> None:
    sent: list[str] = []

    class Counting(aredis.Connection):
        async def send_command(self, *args: Any, **kwargs: Any) -> None:
            sent.append(str(args[0]))
            await super().send_command(*args, **kwargs)

    class Packing(aredis.Connection):
        def pack_command(self, *args: Any) -> list[bytes]:
            sent.append(str(args[0]))
            return super().pack_command(*args)

    async def main() -> None:
        for cls in (Counting, Packing):
            pool = aredis.ConnectionPool(connection_class=cls, port=redis_server.port)
            client = aredis.Redis(connection_pool=pool)
            async with AsyncLock(client, prefix=cls.__name__, ttl_ms=TTL_MS) as locks:
                await _acycle(locks)  # the scripts loaded: no NOSCRIPT fallback below
                sent.clear()
                first = await _acycle(locks)
                assert await _acycle(locks) > first
                assert scripts(sent) == ["EVALSHA"] * 4
            await client.aclose()

    arun(main)
