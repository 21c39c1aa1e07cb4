"""Per-call options (``ttl_ms=``, ``heartbeat_ms=`` ... on ``acquire``/``hold``/``run``),
on both drivers against a real redis-server: validated once per distinct set and kept with
the configs made from them.  Keeping them must never let a value through that a fresh
validation would refuse, nor give a call another call's options."""

from __future__ import annotations

from typing import Any

import pytest

from distlock import ValidationError
from distlock._base import KEPT_OPTIONS
from distlock.asyncio import Lock
from tests.redis_server import RedisServer

from .concurrency import client_for


def call_locks(server: RedisServer) -> Lock:
    return Lock(client_for(server), prefix="call-options", ttl_ms=10_000)


async def ran(h: object) -> str:
    return "ran"


async def test_the_same_options_twice_share_one_validated_config(
    redis_server: RedisServer,
) -> None:
    async with call_locks(redis_server) as locks:
        first = await locks.acquire("a", ttl_ms=5_000, retries=0)
        second = await locks.acquire("b", ttl_ms=5_000, retries=0)
        other = await locks.acquire("c", ttl_ms=6_000, retries=0)
        assert first is not None and second is not None and other is not None
        assert first._section.config is second._section.config
        assert other._section.config is not first._section.config
        assert (first._section.config.ttl_ms, other._section.config.ttl_ms) == (5_000, 6_000)
        for handle in (first, second, other):
            assert await handle.release()


@pytest.mark.parametrize(
    ("accepted", "refused"),
    [
        ({"heartbeat_ms": False}, {"heartbeat_ms": 0}),  # False == 0, and hashes alike
        ({"retries": 1}, {"retries": True}),
        ({"ttl_ms": 1_000}, {"ttl_ms": 1_000.0}),
        ({"retries": 0}, {"retries": 0.0}),
    ],
)
async def test_a_value_equal_to_a_kept_one_but_of_another_type_is_still_refused(
    redis_server: RedisServer, accepted: dict[str, Any], refused: dict[str, Any]
) -> None:
    async with call_locks(redis_server) as locks:
        assert await locks.run("typed", ran, **accepted) == "ran"
        with pytest.raises(ValidationError):
            await locks.run("typed", ran, **refused)


async def test_refused_options_are_refused_every_time_and_never_kept(
    redis_server: RedisServer,
) -> None:
    async with call_locks(redis_server) as locks:
        for _ in range(3):
            with pytest.raises(ValidationError):
                await locks.acquire("bad", ttl_ms=-5)
        assert locks._kept == {}


async def test_past_the_limit_each_call_still_gets_its_own_options(
    redis_server: RedisServer,
) -> None:
    async with call_locks(redis_server) as locks:
        for ttl in range(5_000, 5_000 + 2 * KEPT_OPTIONS + 3):
            handle = await locks.acquire("many", ttl_ms=ttl)
            assert handle is not None
            assert handle._section.config.ttl_ms == ttl
            assert await handle.release()
            assert len(locks._kept) <= KEPT_OPTIONS


async def test_each_hook_is_its_own_and_is_not_kept(redis_server: RedisServer) -> None:
    seen: list[str] = []

    def hook_a(exc: BaseException) -> None:
        seen.append("a")

    def hook_b(exc: BaseException) -> None:
        seen.append("b")

    async with call_locks(redis_server) as locks:
        async with locks.hold("hooked", on_renew_error=hook_a) as a:
            observers = a._section.config.observers
        async with locks.hold("hooked", on_renew_error=hook_b) as b:
            assert b._section.config.observers != observers
            [observer] = b._section.config.observers
            assert observer.hook is hook_b  # type: ignore[attr-defined]
        assert locks._kept == {}
