"""The lock against a real Redis Cluster: its contract, groups across slots, a slot moved
while a key in it is held (MIGRATING/IMPORTING, ASK and MOVED), and failovers (a
coordinated ``CLUSTER FAILOVER`` and a killed primary) while locks are held.

Outcomes that depend on time use TTLs of seconds; every wait for the topology is a poll of
what the nodes report, with a generous deadline.  The cluster is the session's: each test
uses a prefix of its own and asks the cluster who serves a key *now*.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aredis
from redis.asyncio.cluster import ClusterNode as AsyncClusterNode

import distlock.asyncio
from distlock import (
    Lock,
    LockHandle,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    NotReplicatedError,
    ReentrantLock,
    Semaphore,
    ValidationError,
)
from distlock._slots import key_slot
from distlock.events import Event, Renewed
from distlock.tools.servers.redis_server import RedisServer
from distlock.tools.servers.topologies import Cluster

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def prefix() -> str:
    return f"c{secrets.token_hex(4)}"


@pytest.fixture
def rc(redis_cluster: Cluster) -> Iterator[redis.RedisCluster]:
    client = redis_cluster.client(socket_timeout=5)
    yield client
    client.close()


def _node(server: RedisServer) -> redis.Redis:
    return redis.Redis(server.host, server.port, socket_timeout=5)


def ids_on_distinct_primaries(cluster: Cluster, prefix: str, count: int) -> list[str]:
    """``count`` ids whose keys are served by ``count`` different primaries."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < count:
        id = f"g{n}"
        found.setdefault(cluster.primary_for(f"{prefix}:{id}").port, id)
        n += 1
    return list(found.values())


# -- the contract ----------------------------------------------------------------------------


def test_lock_contract_on_a_cluster_sync(rc: redis.RedisCluster, prefix: str) -> None:
    with Lock(rc, prefix=prefix, ttl_ms=10_000) as locks:
        first = locks.acquire("a")
        assert first is not None
        assert locks.acquire("a") is None  # held: refused, fails fast
        assert first.extend(20_000) is True
        assert first.release() is True
        second = locks.acquire("a")
        assert second is not None and second.fence > first.fence
        assert second.release() is True
        # A key renewed while the body runs: wait for a renewal, then exit cleanly.
        renewed = threading.Event()

        def seen(event: Event) -> None:
            if isinstance(event, Renewed):
                renewed.set()

        with Lock(rc, prefix=prefix, ttl_ms=2_000, observers=[seen]) as watched:
            assert watched.run("b", lambda h: renewed.wait(30)) is True
        assert rc.exists(f"{prefix}:a", f"{prefix}:b") == 0


def test_a_key_deleted_behind_the_holders_back_fires_the_signal(
    rc: redis.RedisCluster, prefix: str
) -> None:
    def body(handle: LockHandle) -> None:
        rc.delete(handle.key)
        assert handle.signal.wait(timeout=30)

    with Lock(rc, prefix=prefix, ttl_ms=2_000) as locks:
        with pytest.raises(LockLeaseLostError) as lost:
            locks.run("x", body)
        assert lost.value.reason is LossReason.RENEW_REJECTED


def test_groups_spanning_slots_are_taken_in_one_global_order(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    ids = ids_on_distinct_primaries(redis_cluster, prefix, 3)
    keys = [f"{prefix}:{id}" for id in ids]
    assert len({key_slot(k) for k in keys}) == 3
    with Lock(rc, prefix=prefix, ttl_ms=10_000) as locks:
        with locks.hold_many(list(reversed(ids))) as group:
            assert group.keys == sorted(keys)  # sorted keys, whatever slots they are in
            assert rc.exists(*keys) == 3
            # Another caller naming them in another order is refused at the first key,
            # never holding one while waiting for another.
            with pytest.raises(LockNotAcquiredError) as refused:
                locks.run_many(ids, lambda g: None)
            assert refused.value.key == sorted(keys)[0]
        assert rc.exists(*keys) == 0


def test_reentrant_lock_on_a_cluster(rc: redis.RedisCluster, prefix: str) -> None:
    with ReentrantLock(rc, prefix=prefix, ttl_ms=10_000) as locks:
        with locks.hold("r") as outer:
            with locks.hold("r") as inner:
                assert (outer.depth, inner.depth) == (1, 2)
                assert rc.hget(outer.key, outer.token) == b"2"
            assert rc.hget(outer.key, outer.token) == b"1"
        assert rc.exists(f"{prefix}:r") == 0


def test_semaphore_on_a_cluster(rc: redis.RedisCluster, prefix: str) -> None:
    with Semaphore(rc, prefix=prefix, limit=2, ttl_ms=10_000) as sems:
        first, second = sems.acquire("s"), sems.acquire("s")
        assert first is not None and second is not None
        assert sems.acquire("s") is None  # both permits live: refused
        assert first.extend(20_000) is True
        assert first.release() is True
        with sems.hold("s") as third:
            assert rc.zscore(third.key, third.token) is not None
        assert second.release() is True
    assert rc.exists(f"{prefix}:s") == 0  # gone with its last permit
    with Semaphore(rc, prefix=prefix, limit=1, replicas=1, replica_timeout_ms=2_000) as sems:
        assert sems.run("w", lambda permit: permit.key) == f"{prefix}:w"


def test_urls_with_cluster_true_and_factories(redis_cluster: Cluster, prefix: str) -> None:
    with Lock(redis_cluster.url, cluster=True, prefix=prefix) as locks:
        assert isinstance(locks.client, redis.RedisCluster)
        assert locks.run("u", lambda h: h.fence) >= 1
    with Lock(lambda: redis_cluster.client(), prefix=prefix) as locks:
        assert locks.run("u", lambda h: h.fence) >= 1
    with pytest.raises(ValidationError, match=r"cluster=True needs a redis\.cluster\.RedisCluster"):
        Lock(redis.Redis(), cluster=True)


def test_asyncio_lock_on_a_cluster(redis_cluster: Cluster, prefix: str) -> None:
    ids = ids_on_distinct_primaries(redis_cluster, prefix, 2)

    async def main() -> None:
        client = aredis.RedisCluster(
            startup_nodes=[AsyncClusterNode(h, p) for h, p in redis_cluster.startup_nodes]
        )
        async with distlock.asyncio.Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
            handle = await locks.acquire("a")
            assert handle is not None and await locks.acquire("a") is None
            assert await handle.release() is True

            async def body(group: distlock.asyncio.LockGroup) -> list[str]:
                return group.keys

            assert await locks.run_many(ids, body) == sorted(f"{prefix}:{i}" for i in ids)
        await client.aclose()
        async with distlock.asyncio.Lock(
            redis_cluster.url, cluster=True, prefix=prefix, replicas=1, replica_timeout_ms=2_000
        ) as locks:

            async def fence(h: distlock.asyncio.LockHandle) -> int:
                return h.fence

            assert await locks.run("w", fence) >= 1

    asyncio.run(main())


# -- replicas=N --------------------------------------------------------------------------------


def test_replicas_acknowledge_grants_and_renewals(rc: redis.RedisCluster, prefix: str) -> None:
    renewed = threading.Event()

    def seen(event: Event) -> None:
        if isinstance(event, Renewed):
            renewed.set()

    with Lock(
        rc, prefix=prefix, ttl_ms=4_000, replicas=1, replica_timeout_ms=1_000, observers=[seen]
    ) as locks:
        assert locks.run("k", lambda h: renewed.wait(30)) is True
    with pytest.raises(ValidationError, match="replica_timeout_ms must be at most half"):
        Lock(rc, replicas=1, replica_timeout_ms=600, ttl_ms=1_000)


def test_a_grant_no_replica_acknowledged_is_released_and_not_acquired(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    key = f"{prefix}:n"
    replica = redis_cluster.replica_of(redis_cluster.primary_for(key))
    replica.pause()
    try:
        with Lock(rc, prefix=prefix, replicas=1, replica_timeout_ms=300) as locks:
            with pytest.raises(NotReplicatedError) as refused:
                locks.acquire("n")
            assert isinstance(refused.value, LockNotAcquiredError)
            assert (refused.value.wanted, refused.value.acknowledged) == (1, 0)
            assert rc.exists(key) == 0  # the grant was given back
    finally:
        replica.resume()
    redis_cluster.wait_healthy()


# -- a slot moved while a key in it is held ------------------------------------------------------


def test_a_slot_moved_under_a_held_lock(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    manual_id, held_id = "{m}manual", "{m}held"
    key = f"{prefix}:{manual_id}"
    slot = key_slot(key)
    assert key_slot(f"{prefix}:{held_id}") == slot
    source = redis_cluster.primary_of_slot(slot)
    target = next(p for p in redis_cluster.primaries() if p is not source)
    seen: dict[str, bool] = {}

    with Lock(rc, prefix=prefix, ttl_ms=20_000) as locks, Lock(
        rc, prefix=prefix, ttl_ms=20_000, replicas=1, replica_timeout_ms=5_000
    ) as acked, locks.hold(held_id, heartbeat_ms=500) as held:
        handle = acked.acquire(manual_id)
        assert handle is not None

        def during(phase: str) -> None:
            with _node(source) as src:
                seen[f"{phase}:on_source"] = bool(src.cluster("COUNTKEYSINSLOT", slot))
            # MIGRATING: the source still serves the key.  Moved: the source answers ASK,
            # and the extend (script, then WAIT, on one connection) follows it.
            seen[f"{phase}:extend"] = handle.extend(20_000)

        redis_cluster.move_slot(slot, target, between=during)
        assert seen == {
            "migrating:on_source": True,
            "migrating:extend": True,
            "moved:on_source": False,
            "moved:extend": True,
        }
        # The slot is the target's now: the client's table is stale until MOVED fixes it.
        assert handle.extend(20_000) is True
        assert redis_cluster.primary_for(key) is target
        with _node(target) as tgt:
            assert tgt.get(key) == handle.token.encode()
        assert handle.release() is True
        after = locks.acquire(manual_id)
        assert after is not None and after.fence > handle.fence  # the counter moved too
        assert after.release() is True
        assert held.held
    assert rc.exists(f"{prefix}:{held_id}") == 0


# -- failovers while locks are held -------------------------------------------------------------


def test_a_coordinated_failover_keeps_a_held_lock(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    key = f"{prefix}:f"
    primary = redis_cluster.primary_for(key)
    with Lock(rc, prefix=prefix, ttl_ms=6_000) as locks:
        renewed_after = threading.Event()
        promoted = threading.Event()

        def seen(event: Event) -> None:
            if isinstance(event, Renewed) and promoted.is_set():
                renewed_after.set()

        def body(handle: object) -> bool:
            redis_cluster.failover(primary)
            promoted.set()
            return renewed_after.wait(60)

        with Lock(rc, prefix=prefix, ttl_ms=6_000, observers=[seen]) as watched:
            # CLUSTER FAILOVER lets the replica catch up first: the key survives, the
            # renewals follow MOVED to the new primary, and the section succeeds.
            assert watched.run("f", body) is True
        assert redis_cluster.primary_for(key) is not primary
        nxt = locks.acquire("f")
        assert nxt is not None and nxt.release() is True


def test_a_killed_primary_whose_replica_missed_the_grant(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    """The replica is stopped and its link cut, the grant lands on the primary alone, the
    primary dies and the replica takes over without the key: the holder must hear of it,
    and a new owner may get the key meanwhile.  The counter's last grant was lost too, but
    the new owner's fence is still larger: the new primary's clock reads a later ms than the
    holder's fence stands for (the floor under every fence, lib/fence.lua)."""
    key = f"{prefix}:k"
    primary = redis_cluster.primary_for(key)
    replica = redis_cluster.replica_of(primary)
    contender_fence: list[int] = []
    holder_fence: list[int] = []

    def body(handle: LockHandle) -> None:
        holder_fence.append(handle.fence)
        redis_cluster.kill_primary(
            primary, replica=replica, then=replica.resume, restart=False
        )
        assert handle.signal.wait(timeout=60)  # a renewal finds the key gone
        other = locks.acquire("k", retries=200, retry_delay_ms=50)
        assert other is not None
        contender_fence.append(other.fence)
        assert other.release() is True

    replica.pause()
    # Cut the link while the replica cannot read it: nothing sent later can reach it.
    with _node(primary) as p:
        p.client_kill_filter(_type="replica")
    try:
        with Lock(rc, prefix=prefix, ttl_ms=8_000) as locks, pytest.raises(
            LockLeaseLostError
        ) as lost:
            locks.run("k", body)
    finally:
        replica.resume()
        if primary.proc is None:
            redis_cluster.restart(primary)
    assert lost.value.reason in (
        LossReason.RENEW_REJECTED,
        LossReason.DEADLINE_PASSED,
        LossReason.RELEASE_REJECTED,
    )
    assert contender_fence[0] > holder_fence[0]  # the counter was rewound, not the fences


def test_a_killed_primary_never_yields_two_successful_sections(
    redis_cluster: Cluster, rc: redis.RedisCluster, prefix: str
) -> None:
    """Holders on every primary's slots; one primary is killed mid-section while a
    contender keeps trying.  Whatever survived, no two successful sections overlap and
    every section that did not keep its key raised."""
    ids = ids_on_distinct_primaries(redis_cluster, prefix, 3)
    victim = redis_cluster.primary_for(f"{prefix}:{ids[0]}")
    outcomes: dict[str, str] = {}
    started = threading.Barrier(len(ids) + 1)
    done = threading.Event()
    contender_got: list[str] = []

    def holder(id: str) -> None:
        with Lock(redis_cluster.client(socket_timeout=2), prefix=prefix, ttl_ms=5_000) as mine:
            try:
                with mine.hold(id):
                    started.wait(60)
                    done.wait(120)
                outcomes[id] = "ok"
            except LockLeaseLostError:
                outcomes[id] = "lost"
            mine.client.close()

    threads = [threading.Thread(target=holder, args=(id,)) for id in ids]
    for t in threads:
        t.start()
    started.wait(60)
    with Lock(rc, prefix=prefix, ttl_ms=5_000) as contender:

        def contend() -> None:
            for id in ids:
                try:
                    got = contender.acquire(id)
                except redis.RedisError:
                    continue  # the cluster is failing over: an error is not a grant
                if got is not None:
                    contender_got.append(id)
                    got.release()

        try:
            redis_cluster.kill_primary(victim, then=contend, restart=False)
            contend()
        finally:
            done.set()
            for t in threads:
                t.join(120)
            if victim.proc is None:
                redis_cluster.restart(victim)
        assert not any(t.is_alive() for t in threads)
    for id in contender_got:
        assert outcomes[id] == "lost"  # the contender held it inside the section
    assert set(outcomes) == set(ids)


# -- the topology's own promise: healthy means every node names the same primaries ----------


def test_after_a_failover_every_node_names_the_new_primary(
    redis_cluster: Cluster, prefix: str
) -> None:
    # A trial picks its victim from one node's slot map: a node still naming the demoted
    # primary would aim the trial at a replica.  failover() returns only once none does.
    slot = key_slot(f"{prefix}:x")
    old = redis_cluster.primary_of_slot(slot)
    new = redis_cluster.failover(old)
    for node in redis_cluster.running:
        assert redis_cluster._owner_seen_by(node, slot) == new.port
    assert redis_cluster.replica_of(new) is old
