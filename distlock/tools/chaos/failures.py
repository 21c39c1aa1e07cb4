"""How a scenario ends other than passing: failed (:class:`ScenarioFailed`, with the
trial's timeline) or not run here (:class:`ScenarioNotRun`)."""

from __future__ import annotations

from distlock.tools.chaos.recorder import Recorder

#: Why a scenario that pauses or kills Redis does not run against a Redis it did not start.
NEEDS_OWN_REDIS = "needs a Redis this tool started"


class ScenarioFailed(Exception):
    """A scenario's check failed: the message says which, with the trial's timeline."""


class ScenarioNotRun(Exception):
    """A scenario cannot run here (the message says why); it neither passed nor failed."""


def require(condition: object, message: str) -> None:
    """Fail the scenario with ``message`` unless ``condition`` holds (an ``assert`` that
    survives ``python -O`` and carries a type of its own)."""
    if not condition:
        raise ScenarioFailed(message)


def timeline(recorder: Recorder) -> str:
    """Every section that entered its body, and every fault, in time from the origin: what a
    failure's message ends with."""
    lines = [s.describe(recorder.origin) for s in recorder.entered()]
    lines += [
        f"fault at {(t - recorder.origin) * 1000:.1f} ms: {what}"
        for t, what in recorder.fault_log
    ]
    return "\n".join(lines)
