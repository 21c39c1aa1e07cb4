"""The fencing experiment (:mod:`distlock.tools.chaos.fence_experiment`), both arms, on the
session's PostgreSQL: four worker processes increment one balance row under a ``Lock`` of
300 ms while holders are stopped past their TTL and Redis is stopped and restarted empty.

The verdicts are the data's: with the guard the final balance equals the increments the
workers reported committed, and the holder stopped after its grant is refused as stale;
without it (the control arm, same workload, same faults) updates are lost, which shows
that the experiment can fail.  Every fault starts at a point a worker reports and ends on
an event (another worker's commit, or its wait behind the stopped one's row lock): no
timing is asserted.  The rows land in the session's chaos report through the code
``python -m distlock chaos --scenarios fencing`` uses.
"""

from __future__ import annotations

import pytest

from distlock.tools.chaos import fence_experiment
from distlock.tools.chaos.report import ChaosReport
from tests.postgres_server import PostgresServer

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(300)]


def test_fences_keep_every_increment_and_without_them_updates_are_lost(
    postgres_server: PostgresServer, chaos_report: ChaosReport
) -> None:
    results = fence_experiment.run_experiment(postgres_server.dsn)
    fence_experiment.record(chaos_report, results)
    print("\n" + "\n".join(r.line() for r in results))
    fenced, control = results
    assert (fenced.arm, control.arm) == ("fenced", "unfenced")
    for arm in results:
        # Every fault of the schedule was injected, and increments were committed.
        assert len(arm.faults) == 5, arm.faults
        assert arm.committed > 2 * fence_experiment.WARM_UP, arm.line()

    assert fenced.final_balance == fenced.committed, fenced.line()
    assert fenced.lost_updates == 0 and fenced.double_applied == 0, fenced.line()
    # The holder stopped after its grant came back to a newer fence, and was refused.
    assert fenced.stale_refused is not None and fenced.stale_refused >= 1, fenced.line()

    assert control.lost_updates > 0, control.line()
    assert control.stale_refused is None

    rows = {r.scenario: r for r in chaos_report.rows if r.kind == "fencing"}
    for arm in results:
        row = rows[fence_experiment.TITLES[arm.arm]]
        assert row.status == "passed", row.reason
        assert (row.committed, row.final_balance, row.lost_updates) == (
            arm.committed, arm.final_balance, arm.lost_updates
        )  # fmt: skip
