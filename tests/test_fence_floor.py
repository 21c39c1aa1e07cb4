"""Fences keep increasing when Redis loses its fence counter, on a real redis-server.

Every grant takes ``max(INCR counter, floor)``, the floor read from Redis's clock
(:mod:`distlock._fence_floor`, ``lib/fence.lua``), so a restart without persistence, which
loses the counter, does not bring fences back to 1: the next one is larger than every fence
before, as long as Redis's clock after the restart reads a later ms than the last fence
stands for (``issued_ms``), which a restart on one machine's clock gives.
"""

from __future__ import annotations

import uuid

import pytest
import redis

from distlock import Lock, ReentrantLock
from distlock._fence_floor import (
    FENCE_EPOCH_MS,
    FENCES_PER_MS,
    FLOOR_EXACT_UNTIL_MS,
    floor_at,
    issued_ms,
)
from distlock._protocol import ACQUIRE, fence_key
from tests.redis_server import RedisServer, redis_ms

INT64_MAX = 2**63 - 1



def test_the_floor_arithmetic() -> None:
    assert floor_at(FENCE_EPOCH_MS) == 0
    assert floor_at(FENCE_EPOCH_MS + 1) == FENCES_PER_MS
    for fence in (floor_at(1_800_000_000_123), floor_at(1_800_000_000_123) + FENCES_PER_MS - 1):
        assert issued_ms(fence) == 1_800_000_000_123
    # exact in Lua (below 2**53) for well over a century, and far inside a signed int64
    assert FLOOR_EXACT_UNTIL_MS - FENCE_EPOCH_MS > 100 * 366 * 86_400_000
    assert floor_at(FLOOR_EXACT_UNTIL_MS) == 2**53 < INT64_MAX


def test_a_fence_is_at_least_the_floor_of_its_grant(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    with Lock(client, prefix=f"floor-{uuid.uuid4().hex[:8]}", ttl_ms=10_000) as locks:
        before = redis_ms(client)
        fences = [locks.run("a", lambda h: h.fence) for _ in range(3)]
        after = redis_ms(client)
    assert fences == sorted(set(fences))
    for fence in fences:
        assert isinstance(fence, int) and 0 < fence <= INT64_MAX
        assert floor_at(before) <= fence < floor_at(after + 1)
        assert before <= issued_ms(fence) <= after
    client.close()


def test_a_counter_ahead_of_the_floor_counts_on_by_one(redis_server: RedisServer) -> None:
    """The floor only raises a counter below it: a counter ahead (more grants than the
    floor's pace, or a clock that went back) keeps counting, so fences still increase."""
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"ahead-{uuid.uuid4().hex[:8]}"
    ahead = floor_at(redis_ms(client)) + 1_000 * FENCES_PER_MS * 60_000  # a minute ahead
    client.set(fence_key(f"{prefix}:a"), ahead)
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        assert locks.run("a", lambda h: h.fence) == ahead + 1
        assert locks.run("a", lambda h: h.fence) == ahead + 2
    client.close()


def test_a_grant_at_the_floor_moves_the_counter_there(redis_server: RedisServer) -> None:
    """The counter is set to the floor it was raised to: the next grant, in the same ms or
    not, counts on from there instead of handing the same floor out again."""
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"moved-{uuid.uuid4().hex[:8]}"
    counter = fence_key(f"{prefix}:a")
    client.set(counter, 5)
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        fence = locks.run("a", lambda h: h.fence)
        assert fence > 5
        assert int(client.get(counter) or 0) == fence
    client.close()


def test_fences_increase_across_a_restart(fresh_redis: RedisServer) -> None:
    client = redis.Redis.from_url(fresh_redis.url)
    with Lock(client, prefix="restart", ttl_ms=10_000) as locks:
        before = [locks.run(f"k{i}", lambda h: h.fence) for i in range(3)]
        last_ms = issued_ms(max(before))
        fresh_redis.restart()
        client.connection_pool.disconnect()
        assert client.dbsize() == 0  # the counter is gone with the rest
        assert redis_ms(client) > last_ms  # the assumption, on this machine's clock
        after = [locks.run(f"k{i}", lambda h: h.fence) for i in range(3)]
    assert min(after) > max(before)
    assert all(0 < fence <= INT64_MAX for fence in before + after)
    client.close()


def test_reentrant_fences_increase_across_a_restart(fresh_redis: RedisServer) -> None:
    client = redis.Redis.from_url(fresh_redis.url)
    with ReentrantLock(client, prefix="restart", ttl_ms=10_000) as locks:
        before = locks.run("a", lambda h: h.fence)
        fresh_redis.restart()
        client.connection_pool.disconnect()
        after = locks.run("a", lambda h: h.fence)
    assert after > before
    client.close()


def test_a_resend_after_the_counter_was_evicted_gets_a_larger_fence(
    redis_server: RedisServer,
) -> None:
    """An ``allkeys-*`` policy may evict the counter while the lock key stays: a resent
    acquire (held_as) then takes a new fence from the floor, not 1.  Larger than the
    holder's once Redis's clock has passed the ms its fence stands for (in the same ms,
    the floor is that fence's own ms: the assumption is a later ms)."""
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"evicted-{uuid.uuid4().hex[:8]}"
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        handle = locks.acquire("a")
        assert handle is not None
        # the clock assumption: Redis's clock reads a later ms than the fence stands for
        while redis_ms(client) <= issued_ms(handle.fence):
            pass
        client.delete(fence_key(f"{prefix}:a"))
        key, counter = f"{prefix}:a", fence_key(f"{prefix}:a")
        token = client.get(key)
        assert token is not None
        again = client.eval(ACQUIRE.source, 2, key, counter, token, 10_000)
        assert again > handle.fence
        assert handle.release()
    client.close()


@pytest.mark.parametrize("kind", ["lock", "reentrant"])
def test_force_unlock_after_a_restart_still_raises_the_fence(
    fresh_redis: RedisServer, kind: str
) -> None:
    client = redis.Redis.from_url(fresh_redis.url)
    made = Lock if kind == "lock" else ReentrantLock
    with made(client, prefix="evict", ttl_ms=10_000) as locks:
        before = locks.run("a", lambda h: h.fence)
        fresh_redis.restart()
        client.connection_pool.disconnect()
        assert locks.force_unlock("a") is False
        counter = int(client.get(fence_key("evict:a")) or 0)
        assert counter > before
        assert locks.run("a", lambda h: h.fence) > counter
    client.close()
