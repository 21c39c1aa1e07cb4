"""The asyncio driver only: what its ``run`` accepts as a body (anything that gives
something to await, in every form) and what it refuses before any command or after
releasing (the sync driver refuses asyncio bodies instead:
``tests/drivers/test_user_rules_threads.py``; what both drivers share is in
``tests/drivers/_async/test_user_rules.py``)."""

from __future__ import annotations

import asyncio
import functools
import types
from collections.abc import Awaitable, Callable, Generator, Iterator
from typing import Any, TypeAlias, TypeVar

import pytest
import redis
import redis.asyncio as aredis

import distlock.asyncio
from distlock import ValidationError
from tests.drivers.rules import BODY_KINDS, Recorder
from tests.waiting import arun

T = TypeVar("T")






AsyncPrimitive: TypeAlias = (
    distlock.asyncio.Lock | distlock.asyncio.ReentrantLock | distlock.asyncio.Semaphore
)


def _async_primitive(kind: str, client: Any, **options: Any) -> AsyncPrimitive:
    if kind == "semaphore":
        return distlock.asyncio.Semaphore(client, limit=1, **options)
    if kind == "reentrant":
        return distlock.asyncio.ReentrantLock(client, **options)
    return distlock.asyncio.Lock(client, **options)


async def _arun_body(locks: AsyncPrimitive, kind: str, fn: Any) -> Any:
    """``fn`` run under ``locks`` by ``run``, or by ``run_many`` for the kind "many"."""
    if kind == "many":
        assert isinstance(locks, distlock.asyncio.Lock)
        return await locks.run_many(["a", "b"], fn)
    return await locks.run("k", fn)


# -- 5. an asyncio run given a body that gives nothing to await ----------------------------


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_async_run_refuses_what_certainly_gives_nothing_to_await_before_any_command(
    url: str, kind: str
) -> None:
    trace = Recorder()

    def gen(handle: object) -> Iterator[object]:
        yield handle

    async def agen(handle: object) -> Any:
        yield handle

    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with _async_primitive(
                "lock" if kind == "many" else kind, client, prefix="rules-abody", trace=trace
            ) as locks:
                for fn in (gen, agen, functools.partial(agen), 42):
                    with pytest.raises(ValidationError):
                        await _arun_body(locks, kind, fn)
        finally:
            await client.aclose()

    arun(main)
    assert trace.actions == []


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_async_run_refuses_a_plain_result_after_releasing(
    url: str, r: redis.Redis, kind: str
) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with _async_primitive(
                "lock" if kind == "many" else kind, client, prefix="rules-abody"
            ) as locks:
                with pytest.raises(ValidationError, match="not an awaitable"):
                    await _arun_body(locks, kind, lambda h: 42)
                assert await client.keys("rules-abody:*") == []
        finally:
            await client.aclose()

    arun(main)


class _Service:
    async def work(self, handle: object, suffix: str = "") -> str:
        return f"method{suffix}"


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_async_run_still_takes_every_form_of_async_body(url: str, kind: str) -> None:
    async def body(handle: object, suffix: str = "") -> str:
        await asyncio.sleep(0)
        return f"body{suffix}"

    def plain_returning_a_coroutine(handle: object) -> Awaitable[str]:
        return body(handle, "+plain")

    def plain_returning_a_future(handle: object) -> Awaitable[str]:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.set_result("future")
        return future

    @types.coroutine
    def generator_based(handle: object) -> Generator[Any, None, str]:
        yield from ()  # a generator, made awaitable by types.coroutine
        return "legacy"

    service = _Service()
    bodies: list[tuple[Callable[[Any], Awaitable[str]], str]] = [
        (body, "body"),
        (functools.partial(body, suffix="+partial"), "body+partial"),
        (functools.partial(functools.partial(body), suffix="+2"), "body+2"),
        (lambda h: body(h, "+lambda"), "body+lambda"),
        (plain_returning_a_coroutine, "body+plain"),
        (plain_returning_a_future, "future"),
        (generator_based, "legacy"),
        (service.work, "method"),
        (functools.partial(service.work, suffix="+p"), "method+p"),
    ]

    async def main() -> list[str]:
        client = aredis.Redis.from_url(url)
        got = []
        try:
            async with _async_primitive(
                "lock" if kind == "many" else kind, client, prefix="rules-abody"
            ) as locks:
                for fn, _ in bodies:
                    got.append(await _arun_body(locks, kind, fn))
        finally:
            await client.aclose()
        return got

    assert arun(main) == [want for _, want in bodies]
