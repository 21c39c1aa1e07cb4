"""The lock against a real Redis Cluster while its topology changes: a slot moved while a
key in it is held (MIGRATING/IMPORTING, ASK and MOVED), and failovers (a coordinated
``CLUSTER FAILOVER`` and a killed primary) while locks are held.  Through the sync driver
only: what they check is the scripts and redis-py's cluster routing across a changing
topology, each case costs the shared cluster seconds of failover, and the contract on a
cluster, on both drivers, is in ``tests/drivers/_async/test_cluster.py``.

Outcomes that depend on time use TTLs of seconds; every wait for the topology is a poll of
what the nodes report, with a generous deadline.  The cluster is the session's: each test
uses a prefix of its own and asks the cluster who serves a key *now*.
"""

from __future__ import annotations

import secrets
import threading

import pytest
import redis

from distlock import (
    Lock,
    LockHandle,
    LockLeaseLostError,
    LossReason,
)
from distlock._slots import key_slot
from distlock.events import Event, Renewed
from distlock.tools.servers.redis_server import RedisServer
from distlock.tools.servers.topologies import Cluster

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def prefix() -> str:
    return f"c{secrets.token_hex(4)}"



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
