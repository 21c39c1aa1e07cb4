"""The chaos report: one row per scenario, printed as a table and written as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

Status = Literal["passed", "failed", "not run"]


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
    #: How the scenario ended; ``reason`` says why when it did not pass.
    status: Status = "passed"
    reason: str | None = None


class ChaosReport:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)

    def not_run(self, scenario: str, reason: str) -> None:
        """A scenario that could not run here: listed, and counted as neither outcome."""
        self.rows.append(Row(scenario, 0, 0, 0, 0, 0, None, status="not run", reason=reason))

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
        headers = (
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
        )
        ran = [r for r in self.rows if r.status != "not run"]
        cells = [
            (
                r.scenario + (" FAILED" if r.status == "failed" else ""),
                str(r.trials),
                str(r.faults),
                str(r.ok),
                str(r.lost),
                str(r.overlaps),
                "-" if r.worst_detection_ms is None else f"{r.worst_detection_ms:.1f}",
                f"{r.waits_granted}/{r.waits_timed_out}/{r.waits_failed}",
                "-" if r.worst_wait_overrun_ms is None else f"{r.worst_wait_overrun_ms:.1f}",
                _traces(r),
            )
            for r in ran
        ]
        widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(headers)]

        def line(values: tuple[str, ...]) -> str:
            first = values[0].ljust(widths[0])
            rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
            return "  ".join((first, *rest))

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
        return [
            line(headers),
            "  ".join("-" * w for w in widths),
            *(line(c) for c in cells),
            *excluded,
            *not_run,
            *failed,
        ]


def _traces(row: Row) -> str:
    if row.trace_excluded:
        return "excluded"
    if row.traces_validated is None:
        return row.trace_note or "-"
    return str(row.traces_validated) + (f" ({row.trace_note})" if row.trace_note else "")
