"""A closed Lock refuses every call, before any Redis command and without running the body.

After ``close()`` / ``aclose()`` (or leaving ``with``) the Lock has no timer thread, no
renewal workers and perhaps no client: a body run then would run unrenewed, its lease
silently ending after one TTL.  Each entry point must raise ``LockClosedError`` instead,
a ``LockError`` (and a ``RuntimeError``, which is what a closed Lock raised before).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
from distlock import Lock, LockError
from distlock.asyncio import Lock as AsyncLock
from tests.redis_server import RedisServer


def closed_error_type() -> type[LockError]:
    """``distlock.LockClosedError``, imported per test: while it does not exist each test
    fails on its own, instead of one collection error stopping the whole session."""
    from distlock import LockClosedError  # type: ignore[attr-defined,unused-ignore]

    error: type[LockError] = LockClosedError
    return error

PREFIX = "closed"
KEYS = [f"{PREFIX}:a", f"{PREFIX}:b"]


class RecordingRedis(redis.Redis):
    """Records every command name it is asked to send."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[str] = []

    def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        send: Callable[..., Any] = super().execute_command
        return send(*args, **options)


class AsyncRecordingRedis(aredis.Redis):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sent: list[str] = []

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        self.sent.append(str(args[0]))
        send: Callable[..., Awaitable[Any]] = super().execute_command
        return await send(*args, **options)


def assert_helpful(err: BaseException, keys: list[str]) -> None:
    """The error is the documented type and tells the caller what went wrong: it says the
    Lock is closed and names the key (or one of the group's keys), or says what to do."""
    assert type(err) is closed_error_type()
    assert isinstance(err, LockError)
    assert isinstance(err, RuntimeError)
    text = str(err)
    assert "closed" in text.lower(), text
    names_key = getattr(err, "key", None) in keys or any(key in text for key in keys)
    says_what_to_do = any(hint in text for hint in ("new Lock", "create", "before close"))
    assert names_key or says_what_to_do, text


@pytest.fixture
def recording(redis_server: RedisServer, r: redis.Redis) -> Iterator[RecordingRedis]:
    client = RecordingRedis(port=redis_server.port)
    yield client
    client.close()


# -- sync --------------------------------------------------------------------------------------


def _sync_calls() -> dict[str, tuple[list[str], Callable[[Lock, Callable[[], None]], object]]]:
    def acquire(locks: Lock, body: Callable[[], None]) -> object:
        return locks.acquire("a")

    def run(locks: Lock, body: Callable[[], None]) -> object:
        return locks.run("a", lambda handle: body())

    def hold(locks: Lock, body: Callable[[], None]) -> object:
        with locks.hold("a"):
            body()
        return None

    def run_many(locks: Lock, body: Callable[[], None]) -> object:
        return locks.run_many(["a", "b"], lambda group: body())

    def hold_many(locks: Lock, body: Callable[[], None]) -> object:
        with locks.hold_many(["a", "b"]):
            body()
        return None

    return {
        "acquire": (KEYS[:1], acquire),
        "run": (KEYS[:1], run),
        "hold": (KEYS[:1], hold),
        "run_many": (KEYS, run_many),
        "hold_many": (KEYS, hold_many),
    }


SYNC_CALLS = _sync_calls()


def closed_lock(client: redis.Redis, how: str) -> Lock:
    if how == "close":
        locks = Lock(client, prefix=PREFIX)
        locks.run("warm", lambda h: None)  # a Lock that was used, then closed
        locks.close()
        return locks
    with Lock(client, prefix=PREFIX) as locks:
        locks.run("warm", lambda h: None)
    return locks


@pytest.mark.parametrize("how", ["close", "with"])
@pytest.mark.parametrize("call", list(SYNC_CALLS))
def test_closed_lock_refuses(
    call: str, how: str, recording: RecordingRedis, r: redis.Redis
) -> None:
    closed_error_type()
    locks = closed_lock(recording, how)
    recording.sent.clear()
    ran: list[int] = []
    keys, invoke = SYNC_CALLS[call]
    with pytest.raises(LockError) as info:
        invoke(locks, lambda: ran.append(1))
    assert ran == [], "the body ran on a closed Lock"
    assert recording.sent == [], f"commands sent by a closed Lock: {recording.sent}"
    assert [key for key in keys if r.exists(key)] == []
    assert_helpful(info.value, keys)


def test_closed_lock_error_is_exported() -> None:
    closed_error = closed_error_type()
    assert vars(distlock)["LockClosedError"] is closed_error
    assert "LockClosedError" in distlock.__all__
    assert issubclass(closed_error, LockError)
    assert issubclass(closed_error, RuntimeError)


# -- asyncio -----------------------------------------------------------------------------------


AsyncBody = Callable[[], Awaitable[None]]


AsyncCall = Callable[[AsyncLock, AsyncBody], Awaitable[object]]


def _async_calls() -> dict[str, tuple[list[str], AsyncCall]]:
    async def acquire(locks: AsyncLock, body: AsyncBody) -> object:
        return await locks.acquire("a")

    async def run(locks: AsyncLock, body: AsyncBody) -> object:
        return await locks.run("a", lambda handle: body())

    async def hold(locks: AsyncLock, body: AsyncBody) -> object:
        async with locks.hold("a"):
            await body()
        return None

    async def run_many(locks: AsyncLock, body: AsyncBody) -> object:
        return await locks.run_many(["a", "b"], lambda group: body())

    async def hold_many(locks: AsyncLock, body: AsyncBody) -> object:
        async with locks.hold_many(["a", "b"]):
            await body()
        return None

    return {
        "acquire": (KEYS[:1], acquire),
        "run": (KEYS[:1], run),
        "hold": (KEYS[:1], hold),
        "run_many": (KEYS, run_many),
        "hold_many": (KEYS, hold_many),
    }


ASYNC_CALLS = _async_calls()


async def aclosed_lock(client: aredis.Redis, how: str) -> AsyncLock:
    async def warm(handle: Any) -> None:
        pass

    if how == "aclose":
        locks = AsyncLock(client, prefix=PREFIX)
        await locks.run("warm", warm)
        await locks.aclose()
        return locks
    async with AsyncLock(client, prefix=PREFIX) as locks:
        await locks.run("warm", warm)
    return locks


@pytest.mark.parametrize("how", ["aclose", "async with"])
@pytest.mark.parametrize("call", list(ASYNC_CALLS))
def test_closed_async_lock_refuses(
    call: str, how: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    closed_error_type()
    keys, invoke = ASYNC_CALLS[call]
    ran: list[int] = []

    async def body() -> None:
        ran.append(1)

    async def main() -> tuple[BaseException, list[str]]:
        client = AsyncRecordingRedis(port=redis_server.port)
        try:
            locks = await aclosed_lock(client, how)
            client.sent.clear()
            with pytest.raises(LockError) as info:
                await invoke(locks, body)
            return info.value, client.sent
        finally:
            await client.aclose()

    err, sent = asyncio.run(main())
    assert ran == [], "the body ran on a closed Lock"
    assert sent == [], f"commands sent by a closed Lock: {sent}"
    assert [key for key in keys if r.exists(key)] == []
    assert_helpful(err, keys)
