"""RedisFence and AsyncRedisFence on a real redis-server: the fence check and the writes in
one script."""

from __future__ import annotations

import asyncio
import random
import threading
import uuid
from collections.abc import Callable

import pytest
import redis
import redis.asyncio as aredis

from distlock import Lock, StaleFenceError, ValidationError
from distlock.fencing import AsyncFenceGuard, AsyncRedisFence, FenceGuard, RedisFence, RedisWrites
from distlock.tools.servers.redis_server import free_port
from distlock.tools.servers.topologies import Cluster
from tests.redis_server import RedisServer


def test_the_guards_implement_the_protocols(r: redis.Redis) -> None:
    sync: FenceGuard[RedisWrites] = RedisFence(r)
    asynchronous: AsyncFenceGuard[RedisWrites] = AsyncRedisFence(aredis.Redis())
    assert isinstance(sync, RedisFence) and isinstance(asynchronous, AsyncRedisFence)


def test_admitted_writes_apply_and_a_stale_fence_applies_none(r: redis.Redis) -> None:
    guard = RedisFence(r)
    guard.admit_and_set("order:1", 3, "order:1:status", "paid")
    guard.admit_and_set("order:1", 3, "order:1:status", "shipped")  # the same section again
    assert r.get("order:1:status") == b"shipped"
    assert r.get("distlock:fenced:order:1") == b"3"
    with pytest.raises(StaleFenceError) as caught:
        guard.admit(
            RedisWrites().set("order:1:status", "refunded").incrby("order:1:version", 1),
            "order:1", 2,
        )
    assert (caught.value.resource, caught.value.fence, caught.value.newest) == ("order:1", 2, 3)
    assert r.get("order:1:status") == b"shipped"
    assert r.exists("order:1:version") == 0
    assert guard.newest("order:1") == 3
    assert sorted(r.keys()) == [b"distlock:fenced:order:1", b"order:1:status"]


def test_every_write_kind_applies_in_order(r: redis.Redis) -> None:
    guard = RedisFence(r, prefix="fences:")
    r.set("old", "x")
    guard.admit(
        RedisWrites()
        .set("s", "v", px=60_000)
        .hset("h", {"a": 1, "b": "two"})
        .hdel("h", "a")
        .incrby("n", 5)
        .incrby("n", -2)
        .rpush("l", "x", b"y", 3)
        .delete("old")
        .pexpire("h", 60_000),
        "batch", 10,
    )
    assert r.get("s") == b"v" and 0 < r.pttl("s") <= 60_000
    assert r.hgetall("h") == {b"b": b"two"} and 0 < r.pttl("h") <= 60_000
    assert r.get("n") == b"3"
    assert r.lrange("l", 0, -1) == [b"x", b"y", b"3"]
    assert r.exists("old") == 0
    assert r.get("fences:batch") == b"10" and r.pttl("fences:batch") == -1


def test_fences_past_a_lua_numbers_precision_compare_exactly(r: redis.Redis) -> None:
    guard = RedisFence(r)
    top = 2**63 - 1
    guard.admit_and_set("big", top, "k", "top")
    with pytest.raises(StaleFenceError) as caught:
        guard.admit_and_set("big", top - 1, "k", "stale")  # equal to top as a double
    assert caught.value.newest == top
    guard.admit_and_set("big", top, "k", "again")
    assert r.get("k") == b"again"
    guard.admit_and_set("small", 9, "k", "9")
    guard.admit_and_set("small", 10, "k", "10")  # "10" < "9" as strings: compared by length
    with pytest.raises(StaleFenceError):
        guard.admit_and_set("small", 9, "k", "late")


def test_a_write_that_fails_part_way_still_records_the_fence(r: redis.Redis) -> None:
    """Redis does not roll a script back: the writes before the failing one stay, and the
    fence is recorded first, so no older holder can write after them."""
    guard = RedisFence(r)
    r.set("a-string", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        guard.admit(RedisWrites().set("k", "first").hset("a-string", {"f": 1}), "res", 5)
    assert r.get("k") == b"first"
    assert guard.newest("res") == 5
    with pytest.raises(StaleFenceError):
        guard.admit_and_set("res", 4, "k", "older")


def test_the_check_and_the_write_are_never_separated(redis_server: RedisServer) -> None:
    """Threads race admissions with random fences; each appends its fence to a log in the
    same script.  Were the check separable from the write, a smaller fence could land
    after a larger one: the log is never out of order, and the value is the largest's."""
    resource = f"race-{uuid.uuid4().hex[:8]}"
    log, value = f"{{{resource}}}:log", f"{{{resource}}}:value"
    start = threading.Barrier(4)
    refusals: list[tuple[int, int]] = []

    def worker(seed: int) -> None:
        client = redis.Redis.from_url(redis_server.url)
        guard = RedisFence(client)
        rng = random.Random(seed)
        start.wait()
        for _ in range(150):
            fence = rng.randrange(1_000)
            try:
                guard.admit(RedisWrites().rpush(log, fence).set(value, fence), resource, fence)
            except StaleFenceError as exc:
                refusals.append((fence, exc.newest))
        client.close()

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check = redis.Redis.from_url(redis_server.url)
    admitted = [int(x) for x in check.lrange(log, 0, -1)]
    assert admitted == sorted(admitted) and len(admitted) > 1
    assert refusals and all(fence < newest for fence, newest in refusals)
    assert int(check.get(value) or -1) == admitted[-1] == RedisFence(check).newest(resource)
    check.close()


def test_a_handle_is_taken_for_its_fence(r: redis.Redis) -> None:
    guard = RedisFence(r)
    with Lock(r, prefix="fenced", ttl_ms=10_000) as locks:
        late = locks.acquire("order:1")
        assert late is not None and late.release()
        with locks.hold("order:1") as handle:
            guard.admit_and_set("order:1", handle, "order:1:owner", "new")
        with pytest.raises(StaleFenceError):
            guard.admit_and_set("order:1", late, "order:1:owner", "late")
    assert r.get("order:1:owner") == b"new"


BAD_CALLS: list[tuple[object, object, object]] = [
    (RedisWrites().set("k", "v"), "res", -1),
    (RedisWrites().set("k", "v"), "res", True),
    (RedisWrites().set("k", "v"), "res", 2**63),
    (RedisWrites().set("k", "v"), "res", "1"),
    (RedisWrites().set("k", "v"), "", 1),
    (RedisWrites().set("k", "v"), None, 1),
    (RedisWrites(), "res", 1),
    ([("SET", "k", "v")], "res", 1),
]


@pytest.mark.parametrize(("writes", "resource", "fence"), BAD_CALLS)
def test_bad_input_is_refused_before_anything_is_sent(
    writes: object, resource: object, fence: object
) -> None:
    # Nothing listens on this port: a command sent would raise ConnectionError.
    guard = RedisFence(redis.Redis(port=free_port()))
    with pytest.raises(ValidationError):
        guard.admit(writes, resource, fence)  # type: ignore[arg-type]


def test_bad_writes_are_refused_when_built() -> None:
    w = RedisWrites()
    bads: list[Callable[[], object]] = [
        lambda: w.set("", "v"),
        lambda: w.set("k", True),
        lambda: w.set("k", None),  # type: ignore[arg-type]
        lambda: w.set("k", "v", px=0),
        lambda: w.hset("h", {}),
        lambda: w.hdel("h"),
        lambda: w.incrby("n", 1.5),  # type: ignore[arg-type]
        lambda: w.rpush("l"),
        lambda: w.pexpire("k", -1),
        lambda: w.rpush("l", *range(1001)),
    ]
    for bad in bads:
        with pytest.raises(ValidationError):
            bad()
    assert w.commands == []


def test_the_async_guard(redis_server: RedisServer) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(redis_server.url)
        guard = AsyncRedisFence(client, prefix=f"async-{uuid.uuid4().hex[:8]}:")
        await guard.admit_and_set("order:1", 5, "async:k", "five")
        await guard.admit(RedisWrites().set("async:k", "again"), "order:1", 5)
        with pytest.raises(StaleFenceError) as caught:
            await guard.admit_and_set("order:1", 4, "async:k", "four")
        assert caught.value.newest == 5
        assert await client.get("async:k") == b"again"
        assert await guard.newest("order:1") == 5
        with pytest.raises(ValidationError):
            await guard.admit_and_set("order:1", -1, "async:k", "x")
        await client.aclose()

    asyncio.run(main())


def test_on_a_cluster_the_record_and_the_writes_share_a_hash_tag(redis_cluster: Cluster) -> None:
    client = redis_cluster.client(socket_timeout=5)
    guard = RedisFence(client)
    tag = f"{{order:{uuid.uuid4().hex[:8]}}}"
    guard.admit(RedisWrites().set(f"{tag}:status", "paid").incrby(f"{tag}:v", 1), tag, 2)
    with pytest.raises(StaleFenceError):
        guard.admit_and_set(tag, 1, f"{tag}:status", "late")
    assert client.get(f"{tag}:status") == b"paid" and guard.newest(tag) == 2
    with pytest.raises(redis.exceptions.RedisClusterException, match="same key slot"):
        guard.admit_and_set("untagged", 3, "elsewhere", "x")
    client.close()
