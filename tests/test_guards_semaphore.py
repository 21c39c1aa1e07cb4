"""The semaphore's core takes a step exactly when ``spec/Semaphore.tla`` does.

The plain lock's guard replay (``tests/test_guards.py``), on the semaphore: TLC dumps the
complete state graph of two small models of ``spec/Semaphore.tla`` and
``tests/guard_replay.py`` replays it on :class:`~distlock._core.semaphore.SemaphoreSection`
both ways (every spec step is taken by the core alike; every call the core accepts is a
spec step).  A permit is the lock's lease without the fence, so the lock's adapter serves
with the fence read as ``granted``.
"""

from __future__ import annotations

import shutil

import pytest

from distlock._core.actions import CLIENT_ACTIONS
from distlock.tools import specfiles
from tests import guard_replay, spec_graph
from tests.guard_replay import Known

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not (specfiles.spec_dir() / "Semaphore.tla").is_file(),
    reason="needs java and spec/Semaphore.tla",
)

_SEMAPHORE = {
    "module": "Semaphore",
    # A killed client takes no step: its actions are labelled one by one under that guard.
    "client_actions": tuple(CLIENT_ACTIONS),
    "client_guard": "c \\notin dead",
    "extra": (("Limit", "1"),),
}

#: Two models that together take every client action with every reply value.
MODELS = {
    # One manual handle or run/hold permit, every fault once, a clock lagging by the
    # margin; a heartbeat of ttl/2 so a renewal is not due on every tick.
    "single": spec_graph.Model(
        "single", clients=1, ttl=4, heartbeat=2, max_drift=1, max_faults=1, manual=True,
        **_SEMAPHORE,  # type: ignore[arg-type]
    ),
    # Two clients for one permit, no faults: refusals, expiry on the permit's own score.
    "contended": spec_graph.Model(
        "contended", clients=2, ttl=2, heartbeat=1, **_SEMAPHORE,  # type: ignore[arg-type]
    ),
}

#: Where the core and the spec are known to disagree (none today).
KNOWN: dict[str, Known] = {}

REPLAYS = guard_replay.Replays(MODELS, guard_replay.SemaphoreAdapter, KNOWN)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_spec_step_is_taken_by_the_core(name: str) -> None:
    REPLAYS.check_forward(name)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_core_step_is_a_spec_step(name: str) -> None:
    REPLAYS.check_backward(name, min_probes=800)


def test_the_known_disagreements_are_still_there() -> None:
    for key in KNOWN:
        REPLAYS.check_known(key)


def test_the_models_take_every_client_action_with_every_reply() -> None:
    REPLAYS.check_coverage(REPLAYS.every_step(CLIENT_ACTIONS))
