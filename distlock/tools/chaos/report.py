"""The chaos report: one row per scenario, printed as a table and written as JSON."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class Row:
    scenario: str
    trials: int
    faults: int
    ok: int
    lost: int
    overlaps: int
    worst_detection_ms: float | None
    #: Keys of the traced trial that TLC accepted (None: the scenario's trace is excluded).
    traces_validated: int | None = None
    trace_seconds: float = 0.0
    trace_excluded: str | None = None
    trace_note: str | None = None


class ChaosReport:
    def __init__(self) -> None:
        self.rows: list[Row] = []

    def add(self, row: Row) -> None:
        self.rows.append(row)

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
            "traces validated",
        )
        cells = [
            (
                r.scenario,
                str(r.trials),
                str(r.faults),
                str(r.ok),
                str(r.lost),
                str(r.overlaps),
                "-" if r.worst_detection_ms is None else f"{r.worst_detection_ms:.1f}",
                "excluded"
                if r.traces_validated is None
                else str(r.traces_validated) + (f" ({r.trace_note})" if r.trace_note else ""),
            )
            for r in self.rows
        ]
        widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]

        def line(values: tuple[str, ...]) -> str:
            first = values[0].ljust(widths[0])
            rest = (v.rjust(w) for v, w in zip(values[1:], widths[1:], strict=True))
            return "  ".join((first, *rest))

        excluded = [
            f"trace excluded: {r.scenario}: {r.trace_excluded}"
            for r in self.rows
            if r.trace_excluded
        ]
        return [
            line(headers),
            "  ".join("-" * w for w in widths),
            *(line(c) for c in cells),
            *excluded,
        ]
