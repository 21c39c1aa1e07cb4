"""An ``async def`` test here runs on an event loop of its own (``asyncio.run``), bounded
by a minute: the asyncio driver tests are coroutines, their sync twins plain functions."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from tests.drivers.sent import through_execute_command
from tests.redis_server import RedisServer


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    names = pyfuncitem._fixtureinfo.argnames
    kwargs: dict[str, Any] = {name: pyfuncitem.funcargs[name] for name in names}

    async def main() -> None:
        async with asyncio.timeout(60):
            await pyfuncitem.obj(**kwargs)

    asyncio.run(main())
    return True


@pytest.fixture
def url(redis_server: RedisServer, r: redis.Redis) -> str:
    """The server's URL, its data flushed (by ``r``)."""
    return redis_server.url


@pytest.fixture
def through_execute() -> Iterator[list[str]]:
    """The names of the commands sent through redis-py's ``execute_command`` during the
    test (:func:`tests.drivers.sent.through_execute_command`)."""
    with through_execute_command() as names:
        yield names
