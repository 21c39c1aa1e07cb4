"""A script file on its own against a real Redis: each case assembles one file of
``distlock/lua`` (with the pieces it includes, nothing else of the package) and runs it
with ``EVAL``, then reads what it left in Redis.  A piece can be run the same way, inside a
script of the test's own that includes it."""

from __future__ import annotations

from typing import Any

import pytest
import redis

from distlock import _lua
from distlock._fence_floor import floor_at
from tests.redis_server import redis_ms

FILES = _lua.read_files()
A, B = "a" * 32, "b" * 32
TTL = 60_000
MEMORY = 30_000
#: A lock's queue and its wake lists' prefix: the release makes the second from the first.
QUEUE, WAKE = "distlock:queue:lua:k", "distlock:wake:lua:k:"


def run(r: redis.Redis, name: str, keys: list[str], args: list[str | int]) -> Any:
    """``name``'s file, assembled from the package's files, run once."""
    return r.eval(_lua.assemble(name, FILES), len(keys), *keys, *args)


def probe(r: redis.Redis, body: str, keys: list[str], args: list[str | int]) -> Any:
    """A script of the test's own, ``body``, which may include pieces."""
    return r.eval(_lua.assemble("probe", {**FILES, "probe": body}), len(keys), *keys, *args)



def test_acquire_then_release(r: redis.Redis) -> None:
    lock = ["lua:k", "lua:fence"]
    before = redis_ms(r)
    fence = run(r, "acquire", lock, [A, TTL])
    assert floor_at(before) <= fence < floor_at(redis_ms(r) + 1), "the clock's floor"
    assert r.get("lua:k") == A.encode()
    assert 0 < r.pttl("lua:k") <= TTL
    assert run(r, "acquire", lock, [B, TTL]) == 0, "another token holds the key"
    assert run(r, "acquire", lock, [A, TTL]) == fence, "a resend gets its own fence back"

    release = ["lua:k", f"lua:released:{A}", QUEUE, "lua:p", "lua:fence"]
    other = ["lua:k", f"lua:released:{B}", QUEUE, "lua:p", "lua:fence"]
    assert run(r, "release", other, [B, MEMORY]) == 0, "not B's"
    assert r.get("lua:k") == A.encode()
    assert run(r, "release", release, [A, MEMORY]) == 1
    assert r.exists("lua:k") == 0
    assert run(r, "release", release, [A, MEMORY]) == 1, "a resend is remembered"
    assert run(r, "acquire", lock, [B, TTL]) > fence, "the next owner's fence is larger"


def test_a_fence_is_the_counter_raised_to_the_clocks_floor(r: redis.Redis) -> None:
    body = "-- include: fence\nreturn next_fence(KEYS[1])\n"
    before = redis_ms(r)
    fence = probe(r, body, ["lua:fence"], [])
    assert floor_at(before) <= fence < floor_at(redis_ms(r) + 1), "no counter: the floor"
    assert r.get("lua:fence") == str(fence).encode(), "the counter set to it"
    ahead = fence + 10**9
    r.set("lua:fence", ahead)
    assert probe(r, body, ["lua:fence"], []) == ahead + 1, "a counter ahead counts on"
    assert r.get("lua:fence") == str(ahead + 1).encode()


def test_release_hands_the_key_to_a_waiter_that_asked(r: redis.Redis) -> None:
    lock = ["lua:k", "lua:fence"]
    queue = ["lua:k", "lua:fence", QUEUE, "lua:p"]
    first = run(r, "acquire", lock, [A, TTL])
    assert first > 0
    refused = run(r, "w_acquire", queue, [B, TTL, 5_000, 2_000, WAKE, 3_000])
    assert refused[0] == 0 and refused[1] > 0
    assert r.lrange(QUEUE, 0, -1) == [B.encode()]
    release = ["lua:k", f"lua:released:{A}", QUEUE, "lua:p", "lua:fence"]
    assert run(r, "release", release, [A, MEMORY]) == 1
    assert r.get("lua:k") == B.encode()
    assert 0 < r.pttl("lua:k") <= 3_000, "handed with the TTL B's place kept"
    wake = r.lrange(f"{WAKE}{B}", 0, -1)
    fence = r.get("lua:fence")
    assert isinstance(fence, bytes) and int(fence) > first
    assert wake == [b"=" + fence], "B's wake list carries its fence, in full digits"
    assert r.exists(QUEUE) == 0


def test_release_takes_another_type_for_another_holder_never_an_error(r: redis.Redis) -> None:
    """The release reads the key with a pcall of its own: a hash or a sorted set under the
    key is someone else's (0, nothing written), a missing key too."""
    r.hset("lua:k", mapping={A: 1, "fence": 7})
    release = ["lua:k", f"lua:released:{A}", QUEUE, "lua:p", "lua:fence"]
    assert run(r, "release", release, [A, MEMORY]) == 0
    assert r.hget("lua:k", "fence") == b"7" and r.exists(f"lua:released:{A}") == 0
    r.delete("lua:k")
    r.zadd("lua:k", {A: 1})
    assert run(r, "release", release, [A, MEMORY]) == 0
    assert r.zscore("lua:k", A) == 1 and r.exists(f"lua:released:{A}") == 0
    r.delete("lua:k")
    assert run(r, "release", release, [A, MEMORY]) == 0


def test_read_takes_another_type_for_held_never_an_error(r: redis.Redis) -> None:
    r.hset("lua:h", mapping={A: 1, "fence": 7})
    r.zadd("lua:z", {A: 1})
    # The lock's scripts on a reentrant lock's hash, the reentrant's on a lock's string.
    assert run(r, "acquire", ["lua:h", "lua:fence"], [A, TTL]) == 0
    assert run(r, "extend", ["lua:h"], [A, TTL]) == 0
    r.set("lua:s", A)
    assert run(r, "r_enter", ["lua:s"], [A, TTL, 2]) == 0
    assert run(r, "r_acquire", ["lua:s", "lua:fence"], [A, TTL]) == [0, 0]
    assert run(r, "s_acquire", ["lua:s"], [A, TTL, 3]) == 0
    assert r.get("lua:s") == A.encode() and r.hget("lua:h", "fence") == b"7"

    body = "-- include: read\nlocal v, foreign = read(ARGV[1], KEYS[1])\nreturn {v, foreign}\n"
    assert probe(r, body, ["lua:h"], ["GET"]) == [None, 1]
    assert probe(r, body, ["lua:s"], ["GET"]) == [A.encode(), None]


def test_read_raises_any_other_error(r: redis.Redis) -> None:
    r.set("lua:s", "not a number")
    body = "-- include: read\nreturn read(ARGV[1], KEYS[1])\n"
    with pytest.raises(redis.ResponseError, match="not an integer"):
        probe(r, body, ["lua:s"], ["INCR"])


def test_a_semaphore_counts_live_permits_on_redis_clock(r: redis.Redis) -> None:
    assert run(r, "s_acquire", ["lua:sem"], [A, TTL, 1]) == 1
    assert run(r, "s_acquire", ["lua:sem"], [B, TTL, 1]) == 0, "the one permit is A's"
    assert run(r, "s_acquire", ["lua:sem"], [A, TTL, 1]) == 1, "a resend keeps A's permit"
    assert run(r, "s_renew", ["lua:sem"], [B, TTL]) == 0
    assert run(r, "s_renew", ["lua:sem"], [A, TTL]) == 1
    assert run(r, "owner", ["lua:sem"], [])[4] == 1
    # A permit whose instant has passed, by Redis's clock, is evicted by the next claim.
    r.zadd("lua:sem", {A: 1})
    assert run(r, "owner", ["lua:sem"], [])[4] == 0
    assert run(r, "s_acquire", ["lua:sem"], [B, TTL, 1]) == 1
    assert r.zrange("lua:sem", 0, -1) == [B.encode()]
