"""What a held lock no longer carries must still behave as if it did, on both drivers: the
signal made on first read (after a loss, too), one per group, a token kept as a number, and
a hold that keeps only its handle.  (The timers themselves, the sync driver's scheduler and
asyncio's loop timers: ``tests/test_held_objects.py``.)"""

from __future__ import annotations

import re

import redis

from distlock import LockLeaseLostError, LossReason
from distlock._core.section import Section, SectionConfig
from distlock.asyncio import Lock
from tests.redis_server import RedisServer

from .concurrency import client_for


def held_locks(server: RedisServer) -> Lock:
    return Lock(client_for(server), prefix="ho", ttl_ms=60_000)


async def test_a_signal_first_read_after_the_loss_is_born_fired(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with held_locks(redis_server) as locks:
        handle = await locks.acquire("k")
        assert handle is not None
        r.set("ho:k", "someone else")
        assert await handle.extend() is False  # the loss, known before anyone asked
        signal = handle.signal
        assert signal.aborted
        assert isinstance(signal.reason, LockLeaseLostError)
        assert signal.reason.reason is LossReason.EXTEND_REJECTED
        assert await signal.wait() is True  # at once: it fired already
        assert handle.signal is signal


async def test_a_signal_read_before_the_loss_is_fired_by_it(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async with held_locks(redis_server) as locks:
        handle = await locks.acquire("k")
        assert handle is not None
        signal = handle.signal
        assert not signal.aborted
        r.delete("ho:k")
        assert await handle.extend() is False
        assert signal.aborted
        assert handle.signal is signal


async def test_the_handles_of_a_group_and_the_group_share_one_signal(
    redis_server: RedisServer,
) -> None:
    async with held_locks(redis_server) as locks:
        async with locks.hold_many(["a", "b"]) as group:
            assert group.signal is group["a"].signal is group["b"].signal
            assert not group.signal.aborted
        async with locks.hold("c") as one, locks.hold("d") as other:
            assert one.signal is one.signal
            assert one.signal is not other.signal


async def test_a_token_is_32_hex_digits_the_key_holds_whatever_its_leading_bits(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # A held lock keeps its 128 random bits as a number and writes them out on each use.
    async with held_locks(redis_server) as locks, locks.hold("t") as handle:
        token = handle.token
        assert re.fullmatch("[0-9a-f]{32}", token)
        assert r.get("ho:t") == token.encode()
        assert handle.token == token
    small = Section("k", 0xABC, SectionConfig(ttl_ms=1000))  # leading bits all zero
    assert small.token == "0" * 29 + "abc"


async def test_a_hold_keeps_only_its_handle(redis_server: RedisServer) -> None:
    # What a held lock costs: the hold() and its handle, no driver group (see held.py).
    async with held_locks(redis_server) as locks:
        held = locks.hold("one")
        async with held as handle:
            assert held._handle is handle
            assert handle._holding is held  # unasync: async only
            assert not hasattr(held, "_group")
            assert handle._armed_at is not None  # renewal armed, in a shared bucket
        assert handle._armed_at is None
