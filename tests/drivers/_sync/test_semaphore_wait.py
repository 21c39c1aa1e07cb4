# Generated from tests/drivers/_async/test_semaphore_wait.py by tools/unasync.py: do not edit.
"""Waiting for a semaphore's permit, on both drivers against a real redis-server.

A semaphore joins the lock's queue protocol: a release wakes the first waiter in the same
script, a grant that leaves permits free wakes the next one at once, and a waiter that
gives up passes a free permit's wake-up on.  Outcomes are decided by Redis state and the
order of events, never by how long something took.  (Asyncio's cancelled waiter:
``tests/drivers/test_semaphore_asyncio.py``.)
"""

from __future__ import annotations

import pytest
import redis

from distlock import LockNotAcquiredError, ValidationError
from distlock._core.commands import Command, Kind, Op
from distlock._protocol import encode
from distlock import PermitHandle, Semaphore
from tests.redis_server import RedisServer
from tests.waiting import FOREVER_MS, queue, waiting_keys

from .concurrency import client_for, until
from .test_wait import start_waiting


def wait_sems(server: RedisServer) -> Semaphore:
    return Semaphore(client_for(server), prefix="sw", limit=1, ttl_ms=30_000)


def test_a_release_wakes_the_waiter_and_hands_it_the_permit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_sems(redis_server) as sems:
        holder = sems.acquire("k")
        assert holder is not None
        waiter = start_waiting(r, "sw:k", sems.acquire, "k", wait_ms=FOREVER_MS)
        assert holder.release() is True
        permit = waiter.result()
        assert isinstance(permit, PermitHandle) and permit.held
        assert r.zscore("sw:k", permit.token) is not None
        assert permit.release() is True
    assert waiting_keys(r) == [] and r.exists("sw:k") == 0


def test_free_permits_reach_the_first_waiters_in_order(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # The holders' TTL outlasts the waiters' wait, and the client has no socket timeout
    # (which would cut each block short, to look again): only a wake-up hands them a permit.
    client = client_for(redis_server, socket_timeout=None)
    with Semaphore(client, prefix="sw", limit=2, ttl_ms=FOREVER_MS) as sems:
        holders = [sems.acquire("n"), sems.acquire("n")]
        assert all(h is not None for h in holders)
        waiters = [
            start_waiting(r, "sw:n", sems.acquire, "n", wait_ms=FOREVER_MS // 4)
            for _ in range(3)
        ]
        # Both permits free up in one transaction: the first release wakes the first
        # waiter, the second finds it already woken.  Only the first waiter's grant, which
        # leaves a permit free, can wake the second; the third stays queued.
        pipe = r.pipeline(transaction=True)
        for h in holders:
            assert h is not None
            script, keys, args = encode(
                Command(Op.RELEASE, h.key, h.token, 0, kind=Kind.SEMAPHORE, limit=2)
            )
            pipe.eval(script.source, len(keys), *keys, *args)
        assert pipe.execute() == [1, 1]
        for h in holders:
            assert h is not None and h.release() is True  # a resend: remembered
        first, second = waiters[0].result(), waiters[1].result()
        assert isinstance(first, PermitHandle) and isinstance(second, PermitHandle)
        until(lambda: len(queue(r, "sw:n")) == 1, "the third waiter alone in the queue")
        assert not waiters[2].done()
        assert first.release() is True
        third = waiters[2].result()
        assert isinstance(third, PermitHandle)
        for p in (second, third):
            assert p.release() is True
    client.close()
    assert waiting_keys(r) == []


def test_no_permit_within_wait_ms_is_none_and_leaves_no_place(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with wait_sems(redis_server) as sems:
        holder = sems.acquire("t")
        assert holder is not None
        assert sems.acquire("t", wait_ms=200) is None
        with pytest.raises(LockNotAcquiredError) as refused:
            with sems.hold("t", wait_ms=200):
                pass
        assert refused.value.key == "sw:t"
        assert waiting_keys(r) == []
        assert holder.release() is True


def test_a_dead_holders_permit_is_taken_when_it_expires(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    """Nobody releases: the waiter's block ends when the earliest permit can expire."""
    with Semaphore(client_for(redis_server), prefix="sw", limit=1, ttl_ms=1_000) as sems:
        dead = sems.acquire("d")
        assert dead is not None  # never released nor renewed: its holder "died"
        permit = sems.acquire("d", wait_ms=FOREVER_MS)
        assert permit is not None and permit.token != dead.token
        assert r.zscore("sw:d", dead.token) is None
        assert permit.release() is True


def test_retries_and_wait_ms_together_are_refused(redis_server: RedisServer) -> None:
    with wait_sems(redis_server) as sems:
        with pytest.raises(ValidationError, match="wait_ms"):
            sems.acquire("v", wait_ms=100, retries=2)
