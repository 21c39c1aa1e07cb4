"""The core takes a step exactly when the spec does: guards compared, not only names.

TLC dumps the complete state graph of two small models of ``spec/DistLock.tla``
(every behaviour at once, see ``tests/spec_graph.py``), and ``tests/guard_replay.py``
replays it on the pure core, both ways:

* every client step of the spec is accepted by the core method of the same name, sends
  the same request, fires the loss signal when the spec's ``lost`` turns TRUE, and ends
  in the same observable state;
* every call the core accepts in a state the replay reached (each action with each reply
  value, and ``tick``) is a step the spec takes from a state with the same client
  variables, to the same observable state.

The core and the spec disagree in the places listed in :data:`KNOWN`; each has a test
that fails once the disagreement is gone, so the list cannot go stale.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from typing import Any

import pytest

from distlock._core.actions import CLIENT_ACTIONS
from distlock.tools import specfiles
from tests import guard_replay, spec_graph
from tests.guard_replay import Finding, Report

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not (specfiles.spec_dir() / "DistLock.tla").is_file(),
    reason="needs java and spec/DistLock.tla",
)

#: Two models that together take every client action with every reply value.
MODELS = {
    # Manual handles and run/hold sections, every fault once, a clock lagging by the
    # margin; a heartbeat of ttl/2 so a renewal is not due on every tick.
    "single": spec_graph.Model(
        "single", clients=1, retries=0, ttl=4, heartbeat=2, max_drift=1, max_faults=1,
        manual=True,
    ),
    # Two sections in a row with a retry: a stale grant of the first (its acquire hung)
    # denies the second, which backs off and retries.
    "rounds": spec_graph.Model(
        "rounds", clients=1, rounds=2, retries=1, ttl=4, heartbeat=2, max_faults=1,
    ),
}


@dataclass(frozen=True)
class Known:
    """A disagreement between the core and the spec, found by these tests."""

    action: str
    via_tick: bool
    where: tuple[tuple[str, Any], ...]
    why: str
    #: Countdowns that are above 0 where it happens.
    positive: tuple[str, ...] = ()

    def matches(self, finding: Finding) -> bool:
        return (
            finding.kind == "core accepts what the spec refuses"
            and finding.action == self.action
            and finding.via_tick == self.via_tick
            and all(finding.state.get(k) == v for k, v in self.where)
            and all((finding.state.get(k) or 0) > 0 for k in self.positive)
        )


#: Where the core and the spec are known to disagree (none today). A finding that
#: matches an entry is reported by its own test instead of failing the replay.
KNOWN: dict[str, Known] = {}

_REPORTS: dict[str, Report] = {}


def report(name: str) -> Report:
    """The replay of one model, made once per test session (TLC runs for seconds)."""
    if name not in _REPORTS:
        graph = spec_graph.build(MODELS[name])
        _REPORTS[name] = guard_replay.replay(graph)
    return _REPORTS[name]


def _listing(findings: list[Finding]) -> str:
    distinct: dict[tuple[str, str, str, bool, bool], Finding] = {}
    for f in findings:
        distinct.setdefault(f.key(), f)
    return "\n".join(f.describe() for f in distinct.values())


FORWARD = {"core refuses", "sends otherwise", "signal differs", "state differs"}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_spec_step_is_taken_by_the_core(name: str) -> None:
    rep = report(name)
    found = [f for f in rep.findings if f.kind in FORWARD]
    assert rep.client_steps > 1000
    assert not found, f"{len(found)} spec steps the core does not follow:\n{_listing(found)}"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_core_step_is_a_spec_step(name: str) -> None:
    rep = report(name)
    found = [
        f for f in rep.findings
        if f.kind not in FORWARD and not any(k.matches(f) for k in KNOWN.values())
    ]
    assert rep.probes > 1000
    assert not found, f"{len(found)} calls the core accepts and the spec does not take:\n" + (
        _listing(found)
    )


def test_the_models_take_every_client_action_with_every_reply() -> None:
    covered: set[tuple[str, guard_replay.Arg]] = set()
    for name in MODELS:
        rep = report(name)
        covered |= {k for k, n in rep.covered.items() if n}
    wanted: set[tuple[str, guard_replay.Arg]] = {
        (a, None) for a in CLIENT_ACTIONS if a not in guard_replay.REPLY_KIND
    }
    wanted |= {("AcquireReply", "granted"), ("AcquireReply", "denied")}
    wanted |= {(a, v) for a in ("RenewReply", "ExtendReply", "ReleaseReply") for v in (True, False)}
    assert wanted <= covered, f"never replayed: {sorted(map(str, wanted - covered))}"


