# Generated from tests/drivers/_async/test_renew_pipeline.py by tools/unasync.py: do not edit.
"""Renewals due in one tick go out together, on both drivers: one round trip per connection
(per node on a Redis Cluster), whatever the number of held locks.

Many locks must come due at once, whatever the machine's load: the timers (the sync
driver's timer thread, asyncio's event loop) are held up until every lock's renewal is
due, then let go, so every renewal comes due in the same tick.  Renewals are counted
twice: each batch the driver sends (one pipeline: one round trip) by a spy on the batching
module, and the scripts Redis ran by its ``commandstats``.  TTLs are a minute: no lease can
run out.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import redis

from distlock import _renewals as renewals
from distlock._clock import now_ms
from distlock._protocol import EXTEND
from distlock import Lock
from distlock.tools.servers.topologies import Cluster
from tests.redis_server import RedisServer

from .concurrency import Event, Redis, client_for, cluster_client, no_retry, timers_held_up

LOCKS = 40
TTL_MS = 60_000
HEARTBEAT_MS = 1_000


class Batches:
    """A spy on the driver's batching: the keys of each pipeline it sends."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[list[str]] = []
        queue = renewals.queue

        def spy(pipe: Any, batch: list[renewals.Renewal], **options: Any) -> Any:
            self.sent.append([r.command.key for r in batch])
            return queue(pipe, batch, **options)

        monkeypatch.setattr(renewals, "queue", spy)


class Outcomes:
    """A ``trace=`` callable counting RenewReply and RenewFail, with an event for a count
    reached."""

    def __init__(self) -> None:
        self._guard = threading.Lock()  # the sync driver traces from its workers
        self.replies = 0
        self.failures = 0
        self._watches: list[tuple[int, int, Event]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        with self._guard:
            if event["action"] == "RenewReply" and event["ok"]:
                self.replies += 1
            elif event["action"] == "RenewFail":
                self.failures += 1
            for replies, failures, reached in self._watches:
                if self.replies >= replies and self.failures >= failures:
                    reached.set()

    def reached(self, replies: int = 0, failures: int = 0) -> Event:
        """An event set once there were ``replies`` good renewals and ``failures`` failed."""
        reached = Event()
        with self._guard:
            self._watches.append((replies, failures, reached))
            if self.replies >= replies and self.failures >= failures:
                reached.set()
        return reached


@pytest.fixture
def batches(monkeypatch: pytest.MonkeyPatch) -> Batches:
    return Batches(monkeypatch)


@pytest.fixture
def renew_script_loaded(r: redis.Redis) -> None:
    """So that the first renewal finds its script (a missing one costs a second round trip,
    tested on its own below)."""
    r.script_load(EXTEND.source)


def evalsha_calls(r: redis.Redis) -> int:
    stats: dict[str, Any] = r.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def sleep_until_due(handles: Any) -> None:
    """Wait on the clock (nothing to wait for but time) until every renewal is due; a
    blocking wait, which on asyncio holds up the event loop meanwhile."""
    due = max(h._section.wake_at for h in handles)
    time.sleep(max(0.0, due - now_ms()) / 1000.0 + 0.01)


@pytest.mark.usefixtures("renew_script_loaded")
def test_many_locks_due_in_one_tick_renew_in_one_round_trip(
    r: redis.Redis, redis_server: RedisServer, batches: Batches
) -> None:
    outcomes = Outcomes()
    all_renewed = outcomes.reached(replies=LOCKS)
    ids = [f"k{i}" for i in range(LOCKS)]
    client = client_for(redis_server)
    locks = Lock(
        client, prefix="pipe", ttl_ms=TTL_MS, heartbeat_ms=HEARTBEAT_MS, trace=outcomes
    )
    with locks, locks.hold_many(ids) as group:
        before = evalsha_calls(r)
        with timers_held_up(locks):
            sleep_until_due(group.handles)
        all_renewed.wait()
        assert [sorted(b) for b in batches.sent] == [sorted(h.key for h in group.handles)]
        assert evalsha_calls(r) - before == LOCKS
        assert group.held
        assert all(r.pttl(h.key) > TTL_MS - 10_000 for h in group.handles)
    client.close()


@pytest.mark.usefixtures("renew_script_loaded")
def test_a_flushed_script_costs_the_batch_one_more_round_trip(
    r: redis.Redis, redis_server: RedisServer, batches: Batches
) -> None:
    """Redis lost its scripts (a restart, SCRIPT FLUSH): the members answered NOSCRIPT go
    again together, by EVAL (which loads the script and needs no other permission)."""
    outcomes = Outcomes()
    all_renewed = outcomes.reached(replies=10)
    client = client_for(redis_server)
    locks = Lock(
        client, prefix="noscript", ttl_ms=TTL_MS, heartbeat_ms=HEARTBEAT_MS, trace=outcomes
    )
    with locks, locks.hold_many([f"s{i}" for i in range(10)]) as group:
        r.script_flush()
        with timers_held_up(locks):
            sleep_until_due(group.handles)
        all_renewed.wait()
        assert [len(b) for b in batches.sent] == [10, 10]
        assert outcomes.failures == 0 and group.held
    client.close()


def test_a_failed_pipeline_is_a_failed_renewal_for_each_member(batches: Batches) -> None:
    """A Redis that answers nothing: the one pipeline times out, and every lock in it
    counts a failed renewal (not a loss: the deadline decides that, a minute away)."""
    outcomes = Outcomes()
    all_failed = outcomes.reached(failures=10)
    with RedisServer() as server:
        client = client_for(server, socket_timeout=0.5, retry=no_retry())
        locks = Lock(
            client, prefix="fail", ttl_ms=TTL_MS, heartbeat_ms=HEARTBEAT_MS, trace=outcomes
        )
        with locks, locks.hold_many([f"f{i}" for i in range(10)]) as group:
            server.pause()
            try:
                with timers_held_up(locks):
                    sleep_until_due(group.handles)
                all_failed.wait()
                assert len(batches.sent) == 1 and len(batches.sent[0]) == 10
                assert outcomes.replies == 0
                assert group.held  # a failed round trip is not a loss
            finally:
                server.resume()
        client.close()


def test_on_a_cluster_one_round_trip_per_node(
    redis_cluster: Cluster, batches: Batches
) -> None:
    outcomes = Outcomes()
    all_renewed = outcomes.reached(replies=LOCKS)
    ids = [f"n{i}" for i in range(LOCKS)]
    for primary in redis_cluster.primaries():
        with redis.Redis(port=primary.port) as node:
            node.script_load(EXTEND.source)
    client = cluster_client(redis_cluster, socket_timeout=5)
    try:
        locks = Lock(
            client, prefix="cpipe", ttl_ms=TTL_MS, heartbeat_ms=HEARTBEAT_MS, trace=outcomes
        )
        with locks, locks.hold_many(ids) as group:
            with timers_held_up(locks):
                sleep_until_due(group.handles)
            all_renewed.wait()
            by_node: dict[int, set[str]] = {}
            for h in group.handles:
                by_node.setdefault(redis_cluster.primary_for(h.key).port, set()).add(h.key)
            assert len(by_node) > 1  # the keys span nodes
            assert sorted(map(sorted, batches.sent)) == sorted(map(sorted, by_node.values()))
            assert group.held
    finally:
        client.close()


@pytest.mark.usefixtures("renew_script_loaded")
def test_a_single_connection_client_renews_on_its_one_connection(
    r: redis.Redis, redis_server: RedisServer, batches: Batches
) -> None:
    """A pipeline would take a second connection from the pool: the user asked for one, so
    that a renewal queues behind the user's own commands (and shares their fate)."""
    outcomes = Outcomes()
    both_renewed = outcomes.reached(replies=2)
    client: Redis = client_for(redis_server, single_connection_client=True)
    locks = Lock(client, prefix="one", ttl_ms=TTL_MS, heartbeat_ms=HEARTBEAT_MS, trace=outcomes)
    with locks, locks.hold_many(["k0", "k1"]) as group:
        with timers_held_up(locks):
            sleep_until_due(group.handles)
        both_renewed.wait()
        assert batches.sent == []
        pool: Any = client.connection_pool
        assert len(pool._in_use_connections) + len(pool._available_connections) == 1
        assert getattr(pool, "_created_connections", 1) == 1
        assert group.held
    client.close()
