"""Helpers of the tests that wait for a held lock, against a real redis-server: what Redis
shows of a waiter (its place in the key's queue, its connection blocked in ``CLIENT
LIST``), and a waiter started on a thread (sync) or a task (asyncio) that returns once it
is queued and blocked."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import redis
import redis.asyncio as aredis

from distlock._core.commands import Kind
from distlock._protocol import queue_keys

T = TypeVar("T")
#: Long enough never to run out in a test that expects a wake-up or a cancellation.
FOREVER_MS = 60_000


def until(condition: Callable[[], object], what: str, limit_s: float = 30.0) -> None:
    """Wait for a condition on Redis's state (polled: Redis cannot call us back)."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.005)


def queue(r: redis.Redis, key: str) -> list[Any]:
    """The waiters queued on ``key``, whatever their kind (each kind has its own queue, but
    a read-write lock's readers and writers share one)."""
    queues = dict.fromkeys(queue_keys(key, kind)[0] for kind in Kind)
    return [w for name in queues for w in r.lrange(name, 0, -1)]


def blocked_clients(r: redis.Redis) -> list[dict[str, Any]]:
    """Connections blocked in BLPOP now (flag ``b``); ``cmd`` alone is a connection's last
    command, which an idle pooled connection that once blocked still shows."""
    return [c for c in r.client_list() if c.get("cmd") == "blpop" and "b" in c.get("flags", "")]


def waiting_keys(r: redis.Redis) -> list[Any]:
    return sorted(
        r.keys("distlock:queue*") + r.keys("distlock:queued*") + r.keys("distlock:wake*")
    )


def calls(r: redis.Redis) -> dict[str, int]:
    stats: dict[str, Any] = r.info("commandstats")
    return {k.removeprefix("cmdstat_"): int(v["calls"]) for k, v in stats.items()}


class Waiter(threading.Thread):
    """Runs a call on a thread of its own and keeps what it returned or raised."""

    def __init__(self, call: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self._call = call
        self.result: object = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self._call()
        except BaseException as exc:
            self.error = exc

    def outcome(self) -> object:
        self.join(FOREVER_MS / 1000)
        assert not self.is_alive(), "the waiter never returned"
        if self.error is not None:
            raise self.error
        return self.result


def start_waiting(r: redis.Redis, key: str, call: Callable[[], object]) -> Waiter:
    """Start ``call`` and return once its place is in the queue and it is blocked."""
    before = len(queue(r, key))
    blocked = len(blocked_clients(r))
    waiter = Waiter(call)
    waiter.start()
    until(lambda: len(queue(r, key)) == before + 1, f"a waiter queued on {key}")
    until(lambda: len(blocked_clients(r)) == blocked + 1, "the waiter's BLPOP")
    return waiter


# -- asyncio ---------------------------------------------------------------------------


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(60):
            return await fn()

    return asyncio.run(main())


async def until_async(condition: Callable[[], Awaitable[object]], what: str) -> None:
    """Wait for a condition on Redis's state (polled: Redis cannot call us back, so no
    event can stand in for this)."""
    try:
        async with asyncio.timeout(30):
            while not await condition():  # noqa: ASYNC110
                await asyncio.sleep(0.005)
    except TimeoutError:
        raise AssertionError(f"never happened: {what}") from None


async def queue_async(admin: aredis.Redis, key: str) -> list[Any]:
    """The waiters queued on ``key``, whatever their kind (each kind has its own queue, but
    a read-write lock's readers and writers share one)."""
    queues = dict.fromkeys(queue_keys(key, kind)[0] for kind in Kind)
    return [w for name in queues for w in await admin.lrange(name, 0, -1)]


async def blocked(admin: aredis.Redis) -> int:
    """Connections blocked in BLPOP now (flag ``b``): ``cmd`` alone is a connection's last
    command, which an idle pooled connection whose BLPOP was answered with the key still
    shows."""
    return sum(
        1
        for c in await admin.client_list()
        if c.get("cmd") == "blpop" and "b" in c.get("flags", "")
    )


async def start_waiting_async(
    admin: aredis.Redis, key: str, call: Awaitable[T]
) -> asyncio.Task[T]:
    """Start ``call`` as a task and return once it is queued and blocked."""
    before = len(await queue_async(admin, key))
    was_blocked = await blocked(admin)

    async def wrapped() -> T:
        return await call

    task = asyncio.get_running_loop().create_task(wrapped())

    async def queued() -> bool:
        return len(await queue_async(admin, key)) == before + 1

    async def blocking() -> bool:
        return await blocked(admin) == was_blocked + 1

    await until_async(queued, f"a waiter queued on {key}")
    await until_async(blocking, "the waiter's BLPOP")
    return task
