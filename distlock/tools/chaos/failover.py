"""Failovers under held locks, on real topologies: a Redis Cluster (a coordinated
``CLUSTER FAILOVER``, a killed primary) and Sentinel (a killed primary).

Each trial holds locks on keys the failing primary serves, fails it over, and meanwhile
lets an intruder try the same keys.  Every section is recorded (who, start, end, outcome)
and checked the way the single-Redis scenarios are: no two successful sections overlap, and
a section that did not keep its key raised.  The row also says how often the failover cost
a held lock, and how long after the fault the holder knew (its signal fired).

Trial counts are small: a Sentinel failover alone takes seconds on an idle machine.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from distlock import Lock, LockHandle, LockLeaseLostError
from distlock.events import Event, Lost
from distlock.tools.servers.redis_server import RedisServer
from distlock.tools.servers.topologies import Cluster, SentinelTopology

#: The faults of :func:`run_cluster`, one row each, in the order they run.
CLUSTER_FAULTS = ("CLUSTER FAILOVER", "primary killed", "primary killed, replica behind")
#: The fault of :func:`run_sentinel`.
SENTINEL_FAULT = "primary killed"

#: Long enough that no loss comes from a slow machine rather than the failover.
TTL_MS = 4_000
HOLDERS = 2


@dataclass
class Record:
    client: str
    key: str
    start: float
    end: float
    outcome: str  # "ok" | "lost"


@dataclass
class TopologyRow:
    """One line of the table: a fault on one topology, over its trials."""

    topology: str
    fault: str
    trials: int = 0
    sections: int = 0
    lost: int = 0
    intruder_grants: int = 0
    #: Trials in which the failover cost at least one held lock.
    costly_trials: int = 0
    #: Fault to signal, in ms, for each section that was lost.
    detection_ms: list[float] = field(default_factory=list)
    overlaps: int = 0
    unsurfaced: int = 0

    @property
    def passed(self) -> bool:
        return self.overlaps == 0 and self.unsurfaced == 0

    def line(self) -> str:
        delay = (
            f"{min(self.detection_ms):.0f}-{max(self.detection_ms):.0f} ms"
            if self.detection_ms
            else "-"
        )
        return (
            f"{self.topology:<8} {self.fault:<30} trials={self.trials} sections="
            f"{self.sections} lost={self.lost} failover cost a lock in "
            f"{self.costly_trials}/{self.trials} trials; detection {delay}; "
            f"overlaps among successes={self.overlaps} unsurfaced={self.unsurfaced} "
            f"{'PASS' if self.passed else 'FAIL'}"
        )


def check(records: list[Record], row: TopologyRow) -> None:
    """NoOverlappingSuccess, and every section overlapped by another was reported lost."""
    for i, a in enumerate(records):
        for b in records[i + 1 :]:
            if a.key != b.key or a.client == b.client:
                continue
            if a.start < b.end and b.start < a.end:
                if a.outcome == "ok" and b.outcome == "ok":
                    row.overlaps += 1
                # An overlap with neither side lost would be a loss nobody surfaced.
                if "lost" not in (a.outcome, b.outcome):
                    row.unsurfaced += 1


def trial(
    make_client: Callable[[], redis.Redis | redis.RedisCluster],
    keys_for: Callable[[str], list[str]],
    fail_over: Callable[[Callable[[], None]], None],
    row: TopologyRow,
    prefix: str,
    before: Callable[[], None] | None = None,
) -> None:
    """Hold ``HOLDERS`` locks, run ``fail_over(intrude)``, then end the sections.
    ``before`` runs before the holders acquire (to make a replica miss their grants)."""
    records: list[Record] = []
    mutex = threading.Lock()
    fault_at: list[float] = []
    ready = threading.Barrier(HOLDERS + 1)
    finish = threading.Event()
    ids = keys_for(prefix)[:HOLDERS]

    def holder(n: int, id: str) -> None:
        lost_at: list[float] = []

        def seen(event: Event) -> None:
            if isinstance(event, Lost):
                lost_at.append(time.monotonic())

        client = make_client()
        with Lock(client, prefix=prefix, ttl_ms=TTL_MS, observers=[seen]) as locks:
            start = time.monotonic()
            try:
                with locks.hold(id) as handle:
                    start = time.monotonic()
                    ready.wait(60)
                    _until(finish, handle)
                outcome = "ok"
            except LockLeaseLostError:
                outcome = "lost"
            end = time.monotonic()
        client.close()
        with mutex:
            records.append(Record(f"holder{n}", id, start, end, outcome))
            if outcome == "lost" and lost_at and fault_at:
                row.detection_ms.append((lost_at[0] - fault_at[0]) * 1000)

    intruder_client = make_client()
    intruder = Lock(intruder_client, prefix=prefix, ttl_ms=TTL_MS)

    def intrude() -> None:
        for id in ids:
            try:
                start = time.monotonic()
                got = intruder.acquire(id)
            except redis.RedisError:
                continue  # failing over: an error is not a grant
            if got is not None:
                row.intruder_grants += 1
                try:
                    ok = got.release()
                except redis.RedisError:
                    ok = False
                with mutex:
                    records.append(
                        Record("intruder", id, start, time.monotonic(), "ok" if ok else "lost")
                    )

    threads = [threading.Thread(target=holder, args=(n, id)) for n, id in enumerate(ids)]
    if before is not None:
        before()
    for t in threads:
        t.start()
    try:
        ready.wait(60)
        fault_at.append(time.monotonic())
        fail_over(intrude)
        intrude()
    finally:
        finish.set()
        for t in threads:
            t.join(120)
        intruder.close()
        intruder_client.close()
    if any(t.is_alive() for t in threads):
        raise RuntimeError("a holder hung through the failover")
    row.trials += 1
    held = [r for r in records if r.client != "intruder"]
    row.sections += len(held)
    lost = sum(r.outcome == "lost" for r in held)
    row.lost += lost
    row.costly_trials += lost > 0
    check(records, row)


def _until(finish: threading.Event, handle: LockHandle) -> None:
    """Hold until the trial ends or the loss is known, whichever comes first."""
    while not finish.wait(0.05):
        if handle.signal.aborted:
            return


def run_cluster(trials: int, cluster: Cluster | None = None) -> list[TopologyRow]:
    """A coordinated failover, a killed primary, and a killed primary whose replica missed
    the grants (its link cut before the holders acquire), ``trials`` times each.  The last
    one always costs the held locks: it is the row that measures detection after a
    failover."""
    own = cluster is None
    topology = cluster or Cluster().start()
    rows = [TopologyRow("cluster", fault) for fault in CLUSTER_FAULTS]
    try:
        for n in range(trials):
            for k, row in enumerate(rows):
                prefix = f"chaos-cl{n}{k}-{time.monotonic_ns() % 10**6}"
                victim = topology.primary_for(f"{prefix}:k0")
                replica = topology.replica_of(victim)

                def keys(p: str, victim: RedisServer = victim) -> list[str]:
                    return [
                        f"k{i}" for i in range(200) if topology.primary_for(f"{p}:k{i}") is victim
                    ]

                def cut(victim: RedisServer = victim, replica: RedisServer = replica) -> None:
                    # Cut the link while the replica cannot read it: nothing written from now
                    # on reaches it, so the promoted replica has no grant and no INCR.
                    replica.pause()
                    with redis.Redis(victim.host, victim.port, socket_timeout=5) as node:
                        node.client_kill_filter(_type="replica")

                def fail(
                    intrude: Callable[[], None],
                    victim: RedisServer = victim,
                    replica: RedisServer = replica,
                    k: int = k,
                ) -> None:
                    if k == 0:
                        topology.failover(victim)
                    elif k == 1:
                        topology.kill_primary(victim, then=intrude)
                    else:

                        def resume_then_intrude() -> None:
                            replica.resume()
                            intrude()

                        topology.kill_primary(victim, replica=replica, then=resume_then_intrude)

                trial(
                    lambda: topology.client(socket_timeout=2),
                    keys,
                    fail,
                    row,
                    prefix,
                    before=cut if k == 2 else None,
                )
    finally:
        if own:
            topology.stop()
    return rows


def run_sentinel(trials: int, topology: SentinelTopology | None = None) -> list[TopologyRow]:
    own = topology is None
    top = topology or SentinelTopology().start()
    row = TopologyRow("sentinel", SENTINEL_FAULT)
    try:
        for n in range(trials):
            prefix = f"chaos-se{n}-{time.monotonic_ns() % 10**6}"

            def make() -> redis.Redis:
                return top.master_for(socket_timeout=2)

            trial(
                make,
                lambda p: [f"k{i}" for i in range(HOLDERS)],
                lambda intrude: top.kill_primary(then=intrude),
                row,
                prefix,
            )
    finally:
        if own:
            top.stop()
    return [row]


def main(trials: int = 1) -> int:
    """``python -m distlock.tools.chaos.failover [TRIALS]``: print the rows; 1 on a failure."""
    rows = run_cluster(trials) + run_sentinel(trials)
    for row in rows:
        print(row.line())
    return 0 if all(r.passed for r in rows) else 1


if __name__ == "__main__":
    import sys

    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 1))
