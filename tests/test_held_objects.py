"""What a held lock no longer carries must still behave as if it did: the signal made on
first read (after a loss, too), one per group, and a timer that is only a heap entry."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError, LossReason
from distlock._scheduler import Scheduler
from tests.redis_server import RedisServer


@pytest.fixture
def locks(redis_server: RedisServer) -> Iterator[distlock.Lock]:
    with distlock.Lock(redis.Redis.from_url(redis_server.url), prefix="ho", ttl_ms=60_000) as lk:
        yield lk


def test_a_signal_first_read_after_the_loss_is_born_fired(
    locks: distlock.Lock, r: redis.Redis
) -> None:
    handle = locks.acquire("k")
    assert handle is not None
    r.set("ho:k", "someone else")
    assert handle.extend() is False  # the loss, known before anyone asked for the signal
    signal = handle.signal
    assert signal.aborted
    assert isinstance(signal.reason, LockLeaseLostError)
    assert signal.reason.reason is LossReason.EXTEND_REJECTED
    assert signal.wait(timeout=0) is True


def test_a_signal_read_before_the_loss_is_fired_by_it(
    locks: distlock.Lock, r: redis.Redis
) -> None:
    handle = locks.acquire("k")
    assert handle is not None
    signal = handle.signal
    assert not signal.aborted
    r.delete("ho:k")
    assert handle.extend() is False
    assert signal.aborted
    assert handle.signal is signal


def test_the_handles_of_a_group_and_the_group_share_one_signal(locks: distlock.Lock) -> None:
    with locks.hold_many(["a", "b"]) as group:
        assert group.signal is group["a"].signal is group["b"].signal
    with locks.hold("c") as one, locks.hold("d") as other:
        assert one.signal is one.signal
        assert one.signal is not other.signal


def test_an_asyncio_signal_is_made_on_first_read_too(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        async with distlock.asyncio.Lock(client, prefix="ho", ttl_ms=60_000) as locks:
            handle = await locks.acquire("k")
            assert handle is not None
            r.set("ho:k", "someone else")
            assert await handle.extend() is False
            signal = handle.signal
            assert signal.aborted and await signal.wait()
            assert handle.signal is signal
            async with locks.hold_many(["a", "b"]) as group:
                assert group.signal is group["a"].signal is group["b"].signal
                assert not group.signal.aborted
        await client.aclose()

    asyncio.run(main())


class _Item:
    __slots__ = ("_timer", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._timer: int | None = None


def test_an_armed_item_runs_once_and_a_disarmed_or_rearmed_entry_never_runs() -> None:
    ran: list[str] = []
    done = threading.Event()

    def on_due(item: _Item) -> None:
        ran.append(item.name)
        if item.name == "last":
            done.set()

    scheduler = Scheduler("test-timer", on_due)
    try:
        dropped, moved, kept, last = _Item("dropped"), _Item("moved"), _Item("kept"), _Item("last")
        scheduler.arm(0.0, dropped)
        scheduler.disarm(dropped)
        scheduler.arm(0.0, moved)
        scheduler.arm(1.0, moved)  # a second arm: only this entry is live
        scheduler.arm(2.0, kept)
        scheduler.arm(3.0, last)  # all due at once: run in instant order
        assert done.wait(30)
        assert ran == ["moved", "kept", "last"]
        assert kept._timer is None  # spent: a late disarm counts nothing
    finally:
        scheduler.close()
