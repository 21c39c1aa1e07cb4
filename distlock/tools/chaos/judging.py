"""How a scenario is judged at its end: its report row, and the problems that fail it
beyond the invariants (:mod:`~distlock.tools.chaos.invariants`): the losses the faults
were meant to cause, the re-entries a reentrant victim must make, a fault that proved
nothing."""

from __future__ import annotations

from collections.abc import Sequence

from distlock.tools.chaos.invariants import Verdict
from distlock.tools.chaos.params import Params
from distlock.tools.chaos.recorder import Recorder, Section
from distlock.tools.chaos.report import Row
from distlock.tools.chaos.sections import INNER_DEPTH
from distlock.tools.chaos.tracing import TrialTrace


def _rounded(ms: float | None) -> float | None:
    return None if ms is None else round(ms, 1)


def row(params: Params, recorder: Recorder, verdict: Verdict, trace: TrialTrace) -> Row:
    """The scenario's row of the report."""
    made = Row(
        scenario=params.name,
        trials=recorder.trials,
        faults=recorder.faults,
        ok=verdict.ok,
        lost=verdict.surfaced,
        overlaps=verdict.overlaps,
        worst_detection_ms=_rounded(verdict.worst_detection_ms),
        waits_granted=verdict.waits_granted,
        waits_timed_out=verdict.waits_timed_out,
        waits_failed=verdict.waits_failed,
        worst_wait_overrun_ms=_rounded(verdict.worst_wait_overrun_ms),
    )
    trace_columns(made, params, trace)
    return made


def trace_columns(made: Row, params: Params, trace: TrialTrace) -> None:
    """The row's columns of the traced trial's check, as far as it has got (again once
    TLC is done, when the verdict was left for later)."""
    made.traces_validated = (
        None if trace.excluded or not params.settings.validate_traces else trace.validated
    )
    made.trace_seconds = round(trace.seconds, 1)
    made.trace_excluded = trace.excluded
    made.trace_note = trace.note


def problems(
    params: Params,
    recorder: Recorder,
    verdict: Verdict,
    targets: Sequence[Section],
    *,
    expect: str,
    min_overlaps: int,
) -> list[str]:
    """What fails the scenario beyond the invariants, for ``expect`` (see
    ``Scenario.finish``) and ``min_overlaps``."""
    rec = recorder
    found: list[str] = []
    if not verdict.waits:
        found.append("no client waited with wait_ms during the scenario")
    if rec.faults < rec.trials:
        found.append(f"only {rec.faults} faults injected in {rec.trials} trials")
    if params.reentrant:
        found += _reentered(rec)
    if expect == "lapse":
        for s in targets:
            if not s.surfaced:
                found.append(f"lapsed lease not surfaced: {s.describe(rec.origin)}")
            if params.reentrant and s.client.startswith("victim"):
                found += _levels_surfaced(rec, s)
        if verdict.surfaced < rec.trials:
            found.append(f"{verdict.surfaced} losses surfaced in {rec.trials} lapsing trials")
    elif expect == "none":
        spurious = [s for s in rec.entered() if s.surfaced]
        found += [f"spurious loss: {s.describe(rec.origin)}" for s in spurious]
    if verdict.crowded < min_overlaps:
        found.append(
            f"only {verdict.crowded} times more than {params.capacity} bodies at once "
            f"(want >= {min_overlaps}): the fault never let another client take the "
            "key, so the check proved nothing"
        )
    return found


def _reentered(rec: Recorder) -> list[str]:
    """Every victim body opened depth 2 (or was refused it with the loss), and each
    re-entry's R_ENTER is on the wire, matched to its section by the token."""
    found: list[str] = []
    for s in rec.entered():
        if not s.client.startswith("victim"):
            continue
        inner = s.inner
        if inner is None or (not inner.entered and inner.outcome != "lost"):
            found.append(f"the body never reached depth {INNER_DEPTH}: {s.describe(rec.origin)}")
        elif inner.start is not None and not any(
            c.depth_write == "enter" and c.ok and inner.asked <= c.sent <= inner.start
            for c in rec.commands_of(s)
        ):
            found.append(
                f"no re-entry on the wire for depth {INNER_DEPTH}: {s.describe(rec.origin)}"
            )
    return found


def _levels_surfaced(rec: Recorder, s: Section) -> list[str]:
    """A targeted reentrant victim: the fault landed at depth 2, and both levels
    raised ``LockLeaseLostError``."""
    inner = s.inner
    if inner is None or not inner.entered:
        return [f"the fault did not land at depth {INNER_DEPTH}: " + s.describe(rec.origin)]
    if inner.outcome != "lost" or s.outcome != "lost":
        return ["a level did not raise LockLeaseLostError on its exit: " + s.describe(rec.origin)]
    return []
