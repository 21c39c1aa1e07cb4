"""The chaos report: one row per scenario, printed as a table and written as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

Status = Literal["passed", "failed", "not run"]
#: A scenario behind the proxy, a failover on a real Cluster or Sentinel topology
#: (:mod:`distlock.tools.chaos.failover_rows`), or an arm of the fencing experiment
#: (:mod:`distlock.tools.chaos.fence_experiment`); the last two have tables of their own.
Kind = Literal["scenario", "failover", "fencing"]


@dataclass
class Row:
    scenario: str
    trials: int
    faults: int
    ok: int
    lost: int
    overlaps: int
    worst_detection_ms: float | None
    #: Keys of the traced trial that TLC accepted (None: the scenario's trace is excluded,
    #: or not checked: see ``trace_note``).
    traces_validated: int | None = None
    trace_seconds: float = 0.0
    trace_excluded: str | None = None
    trace_note: str | None = None
    #: Waits beside the fault (sections run with ``wait_ms``): granted, timed out, failed
    #: (an error, such as a connection refused), and the furthest any ended past its
    #: ``wait_ms``, ms.
    waits_granted: int = 0
    waits_timed_out: int = 0
    waits_failed: int = 0
    worst_wait_overrun_ms: float | None = None
    #: What a scenario measured beyond the columns, in words (an election's takeover time
    #: and the spec's bound on it), printed under the table.
    note: str | None = None
    #: How the scenario ended; ``reason`` says why when it did not pass.
    status: Status = "passed"
    reason: str | None = None
    kind: Kind = "scenario"
    #: Failover rows only: the trials in which the failover cost a held lock, and the
    #: quickest fault-to-signal delay of a lost one (``worst_detection_ms`` the slowest).
    held_lock_lost_trials: int | None = None
    best_detection_ms: float | None = None
    #: Fencing rows only: increments reported committed (after COMMIT returned), the
    #: final balance, the difference either way, the admissions the guard refused (None:
    #: the unfenced arm has no guard) and how many of them after Redis restarted empty, and
    #: the largest fence granted before that restart and the first granted after it.
    committed: int | None = None
    final_balance: int | None = None
    lost_updates: int | None = None
    double_applied: int | None = None
    stale_refused: int | None = None
    stale_after_restart: int | None = None
    fence_before_restart: int | None = None
    fence_after_restart: int | None = None


class ChaosReport:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def not_run(self, scenario: str, reason: str, kind: Kind = "scenario") -> None:
        """A scenario that could not run here: listed, and counted as neither outcome."""
        self.rows.append(
            Row(scenario, 0, 0, 0, 0, 0, None, status="not run", reason=reason, kind=kind)
        )

    def failed(self, scenario: str, reason: str, since: int) -> None:
        """Mark the scenario's row (added at index ``since`` or later) failed, adding one
        when it failed before it got as far as its report row."""
        mine = [r for r in self.rows[since:] if r.scenario == scenario]
        if not mine:
            mine = [Row(scenario, 0, 0, 0, 0, 0, None)]
            self.rows.append(mine[0])
        for row in mine:
            row.status, row.reason = "failed", reason

    @property
    def passed(self) -> bool:
        """No scenario failed (scenarios not run neither pass nor fail)."""
        return all(r.status != "failed" for r in self.rows)

    def write_json(self, path: Path) -> None:
        path.write_text(json.dumps([asdict(r) for r in self.rows], indent=2) + "\n")

    def table(self) -> list[str]:
        ran = [r for r in self.rows if r.status != "not run"]
        scenarios = [r for r in ran if r.kind == "scenario"]
        failovers = [r for r in ran if r.kind == "failover"]
        fencing = [r for r in ran if r.kind == "fencing"]
        lines: list[str] = []
        if scenarios or not (failovers or fencing):
            lines += _columns(
                (
                    "scenario",
                    "trials",
                    "faults injected",
                    "sections ok",
                    "losses surfaced",
                    "overlaps among successes",
                    "worst detection ms",
                    "waits granted/timed out/failed",
                    "worst wait overrun ms",
                    "traces validated",
                ),
                [
                    (
                        _name(r),
                        str(r.trials),
                        str(r.faults),
                        str(r.ok),
                        str(r.lost),
                        str(r.overlaps),
                        _ms(r.worst_detection_ms),
                        f"{r.waits_granted}/{r.waits_timed_out}/{r.waits_failed}",
                        _ms(r.worst_wait_overrun_ms),
                        _traces(r),
                    )
                    for r in scenarios
                ],
            )
            lines += [f"  {_name(r)}: {r.note}" for r in scenarios if r.note]
        if failovers:
            if lines:
                lines.append("")
            lines += _columns(
                (
                    "failover",
                    "trials",
                    "lost a held lock",
                    "detection delay",
                    "overlaps among successes",
                ),
                [
                    (
                        _name(r),
                        str(r.trials),
                        f"{r.held_lock_lost_trials or 0}/{r.trials} trials",
                        _delay(r),
                        str(r.overlaps),
                    )
                    for r in failovers
                ],
            )
        if fencing:
            if lines:
                lines.append("")
            lines += _columns(
                (
                    "fencing experiment",
                    "faults",
                    "increments committed",
                    "final balance",
                    "lost updates",
                    "double-applied",
                    "stale fences refused",
                    "fences across the restart",
                ),
                [
                    (
                        _name(r),
                        str(r.faults),
                        _int(r.committed),
                        _int(r.final_balance),
                        _int(r.lost_updates),
                        _int(r.double_applied),
                        _stale(r),
                        f"{_int(r.fence_before_restart)} -> {_int(r.fence_after_restart)}",
                    )
                    for r in fencing
                ],
            )
        excluded = [
            f"trace excluded: {r.scenario}: {r.trace_excluded}"
            for r in self.rows
            if r.trace_excluded
        ]
        failed = [
            f"FAILED: {r.scenario}: {(r.reason or '').splitlines()[0] if r.reason else '?'}"
            for r in ran
            if r.status == "failed"
        ]
        not_run = [f"not run: {r.scenario}: {r.reason}" for r in self.rows if r.status == "not run"]
        return [*lines, *excluded, *not_run, *failed]


def _columns(headers: tuple[str, ...], cells: list[tuple[str, ...]]) -> list[str]:
    """A header, a rule and the rows: the first column left-aligned, the others right."""
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]

    def line(values: tuple[str, ...]) -> str:
        first = values[0].ljust(widths[0])
        rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
        return "  ".join((first, *rest))

    return [line(headers), "  ".join("-" * w for w in widths), *(line(c) for c in cells)]


def _name(row: Row) -> str:
    return row.scenario + (" FAILED" if row.status == "failed" else "")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _int(value: int | None) -> str:
    return "-" if value is None else str(value)


def _stale(row: Row) -> str:
    if row.stale_refused is None or not row.stale_after_restart:
        return _int(row.stale_refused)
    return f"{row.stale_refused} ({row.stale_after_restart} after the restart)"


def _delay(row: Row) -> str:
    """Fault to signal over the lost locks of a failover row: a range, in ms."""
    if row.worst_detection_ms is None:
        return "-"
    best = row.best_detection_ms if row.best_detection_ms is not None else row.worst_detection_ms
    if round(best) == round(row.worst_detection_ms):
        return f"{row.worst_detection_ms:.0f} ms"
    return f"{best:.0f}-{row.worst_detection_ms:.0f} ms"


def _traces(row: Row) -> str:
    if row.trace_excluded:
        return "excluded"
    if row.traces_validated is None:
        return row.trace_note or "-"
    return str(row.traces_validated) + (f" ({row.trace_note})" if row.trace_note else "")
