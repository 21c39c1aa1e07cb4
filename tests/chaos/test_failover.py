"""Failovers under held locks on a real Redis Cluster and a real Sentinel topology (the
session's): one trial of each fault here, so CI stays within its time limit.  Each row is
checked as every chaos row is: no overlap among successful sections, every loss surfaced,
nothing hung (a hang fails the trial)."""

from __future__ import annotations

import pytest

from distlock.tools.chaos.failover import run_cluster, run_sentinel
from distlock.tools.chaos.topologies import Cluster, SentinelTopology

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

TRIALS = 1


def test_cluster_failovers_under_held_locks(redis_cluster: Cluster) -> None:
    rows = run_cluster(TRIALS, redis_cluster)
    print("\n" + "\n".join(row.line() for row in rows))
    for row in rows:
        assert row.trials == TRIALS and row.sections > 0
        assert row.passed, row.line()
    behind = rows[-1]
    # The promoted replica never saw the grants: every held lock is lost, and known lost.
    assert behind.costly_trials == TRIALS and behind.lost == behind.sections, behind.line()
    assert len(behind.detection_ms) == behind.lost, behind.line()


def test_sentinel_failover_under_held_locks(sentinel_topology: SentinelTopology) -> None:
    rows = run_sentinel(TRIALS, sentinel_topology)
    print("\n" + "\n".join(row.line() for row in rows))
    for row in rows:
        assert row.trials == TRIALS and row.sections > 0
        assert row.passed, row.line()
