"""The core takes a step exactly when the spec does: guards compared, not only names.

TLC dumps the complete state graph of two small models of ``spec/DistLock.tla``
(every behaviour at once, see ``tests/spec_graph.py``), and ``tests/guard_replay.py``
replays it on the pure core, both ways (the same machinery replays the reentrant lock,
the semaphore and waiting: ``tests/test_guards_*.py``):

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

import pytest

from distlock._core.actions import CLIENT_ACTIONS
from distlock.tools import specfiles
from tests import guard_replay, spec_graph
from tests.guard_replay import Known

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


#: Where the core and the spec are known to disagree (none today). A finding that
#: matches an entry is reported by its own test instead of failing the replay.
KNOWN: dict[str, Known] = {}

REPLAYS = guard_replay.Replays(MODELS, guard_replay.Adapter, KNOWN)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_spec_step_is_taken_by_the_core(name: str) -> None:
    REPLAYS.check_forward(name)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_core_step_is_a_spec_step(name: str) -> None:
    REPLAYS.check_backward(name)


def test_the_known_disagreements_are_still_there() -> None:
    for key in KNOWN:
        REPLAYS.check_known(key)


def test_the_models_take_every_client_action_with_every_reply() -> None:
    REPLAYS.check_coverage(REPLAYS.every_step(CLIENT_ACTIONS))
