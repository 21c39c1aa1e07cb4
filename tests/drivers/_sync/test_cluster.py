# Generated from tests/drivers/_async/test_cluster.py by tools/unasync.py: do not edit.
"""The lock against a real Redis Cluster, on both drivers: its contract, groups across
slots, each primitive, the ways to hand it a cluster client, and grants acknowledged by
replicas.  (A slot moved and failovers while locks are held: ``tests/test_cluster.py``.)

Outcomes that depend on time use TTLs of seconds; every wait for the topology is a poll of
what the nodes report, with a generous deadline.  The cluster is the session's: each test
uses a prefix of its own and asks the cluster who serves a key *now*.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest
import redis

from distlock import (
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    NotReplicatedError,
    ValidationError,
)
from distlock._core.commands import Kind
from distlock._protocol import fence_key, leader_key, queue_keys, readers_key
from distlock._slots import key_slot
from distlock import (
    Election,
    Leadership,
    Lock,
    LockGroup,
    LockHandle,
    PermitHandle,
    ReadWriteLock,
    ReentrantLock,
    RoleHandle,
    Semaphore,
)
from distlock.events import Event, Renewed
from distlock.tools.servers.topologies import Cluster
from tests.test_cluster import ids_on_distinct_primaries

from . import concurrency
from .concurrency import UNCANCELLED, Redis, RedisCluster, cluster_client, signalled

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def prefix() -> str:
    return f"c{secrets.token_hex(4)}"



def renewal_seen() -> tuple[concurrency.Event, Any]:
    renewed = concurrency.Event()

    def seen(event: Event) -> None:
        if isinstance(event, Renewed):
            renewed.set()

    return renewed, seen


def fence_of(h: LockHandle) -> int:
    return h.fence


def nothing(g: object) -> None:
    return None


# -- the contract ----------------------------------------------------------------------------


def test_lock_contract_on_a_cluster(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    client = cluster_client(redis_cluster, socket_timeout=5)
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        first = locks.acquire("a")
        assert first is not None
        assert locks.acquire("a") is None  # held: refused, fails fast
        assert first.extend(20_000) is True
        assert first.release() is True
        second = locks.acquire("a")
        assert second is not None and second.fence > first.fence
        assert second.release() is True
        # A key renewed while the body runs: wait for a renewal, then exit cleanly.
        renewed, seen = renewal_seen()

        def body(h: LockHandle) -> bool:
            renewed.wait()
            return True

        with Lock(client, prefix=prefix, ttl_ms=2_000, observers=[seen]) as watched:
            assert watched.run("b", body) is True
        assert rc.exists(f"{prefix}:a", f"{prefix}:b") == 0
    client.close()


def test_a_key_deleted_behind_the_holders_back_fires_the_signal(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    def body(handle: LockHandle) -> None:
        rc.delete(handle.key)
        signalled(handle.signal)

    client = cluster_client(redis_cluster, socket_timeout=5)
    with Lock(client, prefix=prefix, ttl_ms=2_000) as locks:
        with pytest.raises(LockLeaseLostError) as lost:
            locks.run("x", body, **UNCANCELLED)
        assert lost.value.reason is LossReason.RENEW_REJECTED
    client.close()


def test_groups_spanning_slots_are_taken_in_one_global_order(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    ids = ids_on_distinct_primaries(redis_cluster, prefix, 3)
    keys = [f"{prefix}:{id}" for id in ids]
    assert len({key_slot(k) for k in keys}) == 3

    def keys_of(group: LockGroup) -> list[str]:
        return group.keys

    client = cluster_client(redis_cluster, socket_timeout=5)
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        with locks.hold_many(list(reversed(ids))) as group:
            assert group.keys == sorted(keys)  # sorted keys, whatever slots they are in
            assert rc.exists(*keys) == 3
            # Another caller naming them in another order is refused at the first key,
            # never holding one while waiting for another.
            with pytest.raises(LockNotAcquiredError) as refused:
                locks.run_many(ids, nothing)
            assert refused.value.key == sorted(keys)[0]
        assert rc.exists(*keys) == 0
        assert locks.run_many(ids, keys_of) == sorted(keys)
    client.close()


def test_reentrant_lock_on_a_cluster(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    client = cluster_client(redis_cluster, socket_timeout=5)
    with ReentrantLock(client, prefix=prefix, ttl_ms=10_000) as locks:
        with locks.hold("r") as outer:
            with locks.hold("r") as inner:
                assert (outer.depth, inner.depth) == (1, 2)
                assert rc.hget(outer.key, outer.token) == b"2"
            assert rc.hget(outer.key, outer.token) == b"1"
        assert rc.exists(f"{prefix}:r") == 0
    client.close()


def test_semaphore_on_a_cluster(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    client = cluster_client(redis_cluster, socket_timeout=5)
    with Semaphore(client, prefix=prefix, limit=2, ttl_ms=10_000) as sems:
        first, second = sems.acquire("s"), sems.acquire("s")
        assert first is not None and second is not None
        assert sems.acquire("s") is None  # both permits live: refused
        assert first.extend(20_000) is True
        assert first.release() is True
        with sems.hold("s") as third:
            assert rc.zscore(third.key, third.token) is not None
        assert second.release() is True
    assert rc.exists(f"{prefix}:s") == 0  # gone with its last permit

    def key_of(permit: PermitHandle) -> str:
        return permit.key

    with Semaphore(
        client, prefix=prefix, limit=1, replicas=1, replica_timeout_ms=2_000
    ) as sems:
        assert sems.run("w", key_of) == f"{prefix}:w"
    client.close()


def test_read_write_lock_on_a_cluster(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    key = f"{prefix}:d"
    queue, places, wake = queue_keys(key, Kind.WRITE)
    # Every key a script touches is in the key's slot: no CROSSSLOT, on any node.
    assert {key_slot(k) for k in (key, readers_key(key), fence_key(key), queue, places)} == {
        key_slot(key)
    }
    assert key_slot(wake + "t") == key_slot(key)
    client = cluster_client(redis_cluster, socket_timeout=5)
    # Four objects: each is a holder of its own, on one task or thread.
    mine, theirs, writers, late = (
        ReadWriteLock(client, prefix=prefix, ttl_ms=10_000) for _ in range(4)
    )
    with mine, theirs, writers, late:
        first, second = mine.read.acquire("d"), theirs.read.acquire("d")
        assert first is not None and second is not None
        assert first.fence == second.fence and rc.zcard(readers_key(key)) == 2
        assert first.extend(20_000) is True
        elsewhere = mine.write.acquire("e")  # another id: another key, not a reentry
        assert elsewhere is not None and elsewhere.release() is True
        assert writers.write.acquire("d") is None
        # A writer waits for both readers (it blocks on its wake list, on the key's node),
        # and a reader that comes after it waits for it.
        writer = concurrency.spawn(writers.write.acquire, "d", wait_ms=10_000)
        concurrency.until(lambda: rc.llen(queue) == 1, "the writer queued")
        assert late.read.acquire("d") is None
        reader = concurrency.spawn(late.read.acquire, "d", wait_ms=10_000)
        concurrency.until(lambda: rc.llen(queue) == 2, "the reader queued")
        assert first.release() is True and second.release() is True
        written = writer.result()
        assert isinstance(written, RoleHandle) and written.fence > first.fence
        assert rc.hget(key, "w") == written.token.encode()
        assert written.release() is True
        read = reader.result()
        assert isinstance(read, RoleHandle) and read.fence == written.fence
        assert read.release() is True
    assert rc.exists(key, readers_key(key), queue, places) == 0
    client.close()


def test_an_election_on_a_cluster(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    """A campaign, a handoff to a waiting candidate and leader() on a Cluster, and
    observe(), which has no keyspace notifications there and polls."""
    key = f"{prefix}:lead"
    queue, places, wake = queue_keys(key, Kind.CAMPAIGN)
    record = leader_key(key)
    # Every key a script touches is in the key's slot: no CROSSSLOT, on any node.
    assert {key_slot(k) for k in (key, record, fence_key(key), queue, places)} == {
        key_slot(key)
    }
    assert key_slot(wake + "t") == key_slot(key)
    client = cluster_client(redis_cluster, socket_timeout=5)
    a, b, watcher = (
        Election(client, "lead", identity=i, prefix=prefix, ttl_ms=10_000)
        for i in ("a", "b", "w")
    )
    seen: list[Any] = []
    news = concurrency.Event()

    def observe() -> None:
        for now in watcher.observe(poll_ms=20):
            seen.append(now)
            news.set()

    def yielded(count: int) -> Any:
        while len(seen) < count:
            news.wait()
            news.clear()
        return seen[count - 1]

    with a, b:
        observer = concurrency.spawn(observe)
        assert yielded(1) is None
        first = a.campaign(wait_ms=0)
        assert isinstance(first, Leadership) and first.key == key
        assert b.campaign(wait_ms=0) is None
        now = b.leader()
        assert now is not None and (now.identity, now.fence) == ("a", first.fence)
        seen_now = yielded(2)
        assert seen_now is not None and (seen_now.identity, seen_now.fence) == ("a", first.fence)
        waiting = concurrency.spawn(b.campaign, wait_ms=10_000)
        concurrency.until(lambda: rc.llen(queue) == 1, "b queued")
        assert first.resign() is True
        second = waiting.result()
        assert isinstance(second, Leadership) and second.fence > first.fence
        now = a.leader()
        assert now is not None and (now.identity, now.fence) == ("b", second.fence)
        assert second.resign() is True
        assert a.leader() is None
        while seen[-1] is not None:  # read within its 20 ms
            yielded(len(seen) + 1)
        watcher.close()
        observer.result()
    identities = [None if s is None else s.identity for s in seen]
    assert identities in ([None, "a", None], [None, "a", "b", None])
    assert rc.exists(key, queue, places) == 0
    client.close()


def test_urls_with_cluster_true_and_factories(redis_cluster: Cluster, prefix: str) -> None:
    with Lock(redis_cluster.url, cluster=True, prefix=prefix) as locks:
        assert isinstance(locks.client, RedisCluster)
        assert locks.run("u", fence_of) >= 1
    with Lock(
        redis_cluster.url, cluster=True, prefix=prefix, replicas=1, replica_timeout_ms=2_000
    ) as locks:
        assert locks.run("w", fence_of) >= 1

    def factory() -> RedisCluster:
        return cluster_client(redis_cluster)

    with Lock(factory, prefix=prefix) as locks:
        assert locks.run("u", fence_of) >= 1
    # The error names the driver's own cluster client class.
    wanted = r"cluster=True needs a redis\.(asyncio\.)?cluster\.RedisCluster"
    with pytest.raises(ValidationError, match=wanted):
        Lock(Redis(), cluster=True)


# -- replicas=N --------------------------------------------------------------------------------


def test_replicas_acknowledge_grants_and_renewals(
    redis_cluster: Cluster, prefix: str
) -> None:
    renewed, seen = renewal_seen()

    def body(h: LockHandle) -> bool:
        renewed.wait()
        return True

    client = cluster_client(redis_cluster, socket_timeout=5)
    with Lock(
        client, prefix=prefix, ttl_ms=4_000, replicas=1, replica_timeout_ms=1_000, observers=[seen]
    ) as locks:
        assert locks.run("k", body) is True
    with pytest.raises(ValidationError, match="replica_timeout_ms must be at most half"):
        Lock(client, replicas=1, replica_timeout_ms=600, ttl_ms=1_000)
    client.close()


def test_a_replicated_grant_is_the_first_command_of_a_new_client(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    """A cluster client that has sent nothing yet has no map of the slots: the grant that
    waits for its replicas, sent to the key's primary itself, must not need one made."""
    client = cluster_client(redis_cluster, socket_timeout=5)
    with Lock(client, prefix=prefix, replicas=1, replica_timeout_ms=2_000) as locks:
        handle = locks.acquire("first")
        assert handle is not None
        assert rc.get(handle.key) == handle.token.encode()
        assert handle.release() is True
    client.close()


def test_a_grant_no_replica_acknowledged_is_released_and_not_acquired(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    key = f"{prefix}:n"
    replica = redis_cluster.replica_of(redis_cluster.primary_for(key))
    client = cluster_client(redis_cluster, socket_timeout=5)
    replica.pause()
    try:
        with Lock(client, prefix=prefix, replicas=1, replica_timeout_ms=300) as locks:
            with pytest.raises(NotReplicatedError) as refused:
                locks.acquire("n")
            assert isinstance(refused.value, LockNotAcquiredError)
            assert (refused.value.wanted, refused.value.acknowledged) == (1, 0)
            assert rc.exists(key) == 0  # the grant was given back
    finally:
        replica.resume()
        client.close()
    redis_cluster.wait_healthy()
