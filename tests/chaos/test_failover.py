"""Failovers under held locks on a real Redis Cluster and a real Sentinel topology (the
session's): one trial of each fault here, so CI stays within its time limit.  Each row is
checked as every chaos row is: no overlap among successful sections, every loss surfaced,
nothing hung (a hang fails the trial).  The rows land in the session's chaos report
through the code ``python -m distlock chaos`` uses for its own failover runs
(:func:`distlock.tools.chaos.failover_rows.record`), so CI runs each failover once."""

from __future__ import annotations

import pytest

from distlock.tools.chaos import failover_rows
from distlock.tools.chaos.failover import run_cluster, run_sentinel
from distlock.tools.chaos.report import ChaosReport
from distlock.tools.servers.topologies import Cluster, SentinelTopology

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]

TRIALS = 1


def _reported(report: ChaosReport, name: str) -> list[str]:
    """The report's rows of the failover ``name``, as ``title: status``."""
    titles = failover_rows.RUNS[name].titles
    return [f"{r.scenario}: {r.status}" for r in report.rows if r.scenario in titles]


def test_cluster_failovers_under_held_locks(
    redis_cluster: Cluster, chaos_report: ChaosReport
) -> None:
    rows = run_cluster(TRIALS, redis_cluster)
    failover_rows.record(chaos_report, rows)
    print("\n" + "\n".join(row.line() for row in rows))
    for row in rows:
        assert row.trials == TRIALS and row.sections > 0
        assert row.passed, row.line()
    behind = rows[-1]
    # The promoted replica never saw the grants: every held lock is lost, and known lost.
    assert behind.costly_trials == TRIALS and behind.lost == behind.sections, behind.line()
    assert len(behind.detection_ms) == behind.lost, behind.line()
    assert _reported(chaos_report, "cluster-failover") == [
        f"{title}: passed" for title in failover_rows.RUNS["cluster-failover"].titles
    ]


def test_sentinel_failover_under_held_locks(
    sentinel_topology: SentinelTopology, chaos_report: ChaosReport
) -> None:
    rows = run_sentinel(TRIALS, sentinel_topology)
    failover_rows.record(chaos_report, rows)
    print("\n" + "\n".join(row.line() for row in rows))
    for row in rows:
        assert row.trials == TRIALS and row.sections > 0
        assert row.passed, row.line()
    assert _reported(chaos_report, "sentinel-failover") == [
        "Sentinel failover: primary killed: passed"
    ]
