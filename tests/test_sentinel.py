"""A primary killed while a lock is held through a Sentinel-managed client, against a real
primary, replica and three sentinels: no two successful sections overlap, and a lost key is
reported.  Through the sync driver only: what it checks is the scripts and redis-py's
Sentinel client across a failover, which costs the shared topology seconds; the lock
through Sentinel, on both drivers, is in ``tests/drivers/_async/test_sentinel.py``."""

from __future__ import annotations

import secrets
import threading

import pytest
import redis

from distlock import Lock, LockHandle, LockLeaseLostError
from distlock.events import Event, Renewed
from distlock.tools.servers.topologies import SentinelTopology

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def prefix() -> str:
    return f"s{secrets.token_hex(4)}"



def test_a_killed_primary_while_a_lock_is_held(
    sentinel_topology: SentinelTopology, primary: redis.Redis, prefix: str
) -> None:
    """The section either keeps its key across the failover (the replica had it: a
    renewal succeeds on the new primary) or is reported lost; a contender that got the key
    meanwhile is only possible in the second case."""
    promoted = threading.Event()
    renewed_after = threading.Event()
    contender: list[int] = []

    def seen(event: Event) -> None:
        if isinstance(event, Renewed) and promoted.is_set():
            renewed_after.set()

    def body(handle: LockHandle) -> None:
        sentinel_topology.kill_primary()
        promoted.set()
        got = other.acquire("k")
        if got is not None:
            contender.append(got.fence)
            got.release()
        # Either way the section learns which: a renewal on the new primary, or the loss.
        assert renewed_after.wait(60) or handle.signal.wait(60)

    with Lock(primary, prefix=prefix, ttl_ms=6_000, observers=[seen]) as locks, Lock(
        primary, prefix=prefix
    ) as other:
        try:
            locks.run("k", body)
            outcome = "ok"
        except LockLeaseLostError:
            outcome = "lost"
    if contender:
        assert outcome == "lost"
