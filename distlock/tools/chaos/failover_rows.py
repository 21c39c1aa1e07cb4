"""The failovers of :mod:`distlock.tools.chaos.failover` as rows of the chaos report.

``python -m distlock chaos`` runs them (starting its own Cluster and Sentinel set-up on
loopback) and the pytest suite's ``tests/chaos/test_failover.py`` runs them on the
session's topologies; both turn the result into report rows here, so the printed table
and ``chaos-report.json`` carry them beside the scenarios' and each failover runs once
per caller.  Where the tool cannot start the topology (a binary missing or too old, or a
Redis given with ``--redis``, which is one server and not the tool's), the rows are
listed as not run with the reason, neither passed nor failed.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from distlock.tools.chaos import failover
from distlock.tools.chaos.report import ChaosReport, Row, Status
from distlock.tools.servers import topologies
from distlock.tools.servers.redis_server import ServerNotFound

#: ``--scenarios failover`` picks every failover.
GROUP = "failover"
#: Why the failovers do not run against ``--redis URL``.
NEEDS_OWN_TOPOLOGY = (
    "needs a Redis Cluster and a Sentinel set-up this tool started (not a --redis URL)"
)


@dataclass(frozen=True)
class FailoverRun:
    #: What ``--scenarios`` calls it.
    name: str
    #: The report row's name of each fault, in the order :attr:`run` returns them.
    titles: tuple[str, ...]
    summary: str
    #: Why the topology cannot start here (None: it can).
    unavailable: Callable[[], str | None]
    #: ``run(trials)``: start the topology, fail it over ``trials`` times per fault, stop it.
    run: Callable[[int], list[failover.TopologyRow]]


def title(topology: str, fault: str) -> str:
    """The row's name, e.g. ``Cluster failover: primary killed``."""
    return f"{topology.capitalize()} failover: {fault}"


RUNS: dict[str, FailoverRun] = {
    run.name: run
    for run in (
        FailoverRun(
            "cluster-failover",
            tuple(title("cluster", fault) for fault in failover.CLUSTER_FAULTS),
            "a Redis Cluster (3 primaries, 3 replicas) failed over under two held locks "
            "and an intruder: CLUSTER FAILOVER, a killed primary, a killed primary whose "
            "replica missed the grants; no overlap among successes, every loss surfaced",
            topologies.cluster_unavailable,
            lambda trials: failover.run_cluster(trials),
        ),
        FailoverRun(
            "sentinel-failover",
            (title("sentinel", failover.SENTINEL_FAULT),),
            "a Sentinel-managed primary (one replica, three sentinels) killed under two "
            "held locks and an intruder: no overlap among successes, every loss surfaced",
            topologies.sentinel_unavailable,
            lambda trials: failover.run_sentinel(trials),
        ),
    )
}


def select(names: Iterable[str] | None) -> tuple[list[FailoverRun], list[str] | None]:
    """The failovers among ``names`` (every one for None), and the other names, for the
    scenario registry (None when ``names`` is)."""
    if names is None:
        return list(RUNS.values()), None
    wanted = list(names)
    picked = [run for run in RUNS.values() if run.name in wanted or GROUP in wanted]
    return picked, [n for n in wanted if n not in RUNS and n != GROUP]


def record(report: ChaosReport, rows: Iterable[failover.TopologyRow]) -> None:
    """Add ``rows`` to the report: passed, or failed with the row's line as the reason."""
    for r in rows:
        report.add(
            Row(
                title(r.topology, r.fault),
                trials=r.trials,
                faults=r.trials,
                ok=r.sections - r.lost,
                lost=r.lost,
                overlaps=r.overlaps,
                worst_detection_ms=max(r.detection_ms) if r.detection_ms else None,
                best_detection_ms=min(r.detection_ms) if r.detection_ms else None,
                held_lock_lost_trials=r.costly_trials,
                kind="failover",
                status="passed" if r.passed else "failed",
                reason=None if r.passed else r.line(),
            )
        )


def run(report: ChaosReport, which: FailoverRun, trials: int, *, external: bool) -> Status:
    """Run one failover into ``report``, or list its rows as not run, saying why."""
    reason = NEEDS_OWN_TOPOLOGY if external else which.unavailable()
    if reason is None:
        try:
            rows = which.run(trials)
        except ServerNotFound as exc:
            reason = str(exc)
        except Exception as exc:
            # The first line is what the table prints under FAILED.
            message = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
            for name in which.titles:
                report.add(_empty(name, "failed", message))
            return "failed"
        else:
            record(report, rows)
            return "passed" if all(r.passed for r in rows) else "failed"
    for name in which.titles:
        report.not_run(name, reason, kind="failover")
    return "not run"


def _empty(name: str, status: Status, reason: str) -> Row:
    return Row(name, 0, 0, 0, 0, 0, None, status=status, reason=reason, kind="failover")
