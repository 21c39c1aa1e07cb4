"""The reentrant lock's core takes a step exactly when ``spec/Reentrant.tla`` does.

The plain lock's guard replay (``tests/test_guards.py``), on the reentrant lock: TLC dumps
the complete state graph of two small models of ``spec/Reentrant.tla`` and
``tests/guard_replay.py`` replays it on one
:class:`~distlock._core.reentrant.ReentrantSection` per holder, both ways: every holder
step of the spec (the outermost level's lock actions and the depth writes inside it) is
taken by the core alike, and every call the core accepts is a spec step.  The spec's
bounds (``MaxDepth``, ``Deep``) are not guards: a re-entry past them is not probed.
"""

from __future__ import annotations

import shutil

import pytest

from distlock._core.actions import CLIENT_ACTIONS, REENTRANT_ACTIONS
from distlock.tools import specfiles
from tests import guard_replay, spec_graph
from tests.guard_replay import Known

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not (specfiles.spec_dir() / "Reentrant.tla").is_file(),
    reason="needs java and spec/Reentrant.tla",
)

_HOLDERS = (("Parent", "Parent"), ("Child", "Child"), ("Other", "Other"))


def _model(name: str, holders: str, *, ttl: int, heartbeat: int,
           max_faults: int = 0) -> spec_graph.Model:
    extra = (*_HOLDERS, ("Holders", holders), ("Deep", "{Parent}"), ("MaxDepth", "2"))
    return spec_graph.Model(name, module="Reentrant", lock_constants=False, margin=1,
                            ttl=ttl, heartbeat=heartbeat, max_faults=max_faults,
                            extra=extra)


#: Two models that together take every holder action with every reply value.
MODELS = {
    # One holder that re-enters once, every fault once; a heartbeat of ttl/2.
    "deep": _model("deep", "{Parent}", ttl=4, heartbeat=2, max_faults=1),
    # Two clients' holders on one key, no fault: refusals, expiry, the key changing hands.
    "holders": _model("holders", "{Parent, Other}", ttl=2, heartbeat=1),
}

#: The spec's holder actions: the lock's but the manual extend, and the levels inside.
ACTIONS = {
    **{a: d for a, d in CLIENT_ACTIONS.items() if not a.startswith("Extend")},
    **REENTRANT_ACTIONS,
}

#: Where the core and the spec are known to disagree.  A finding that matches an entry is
#: reported by its own test instead of failing the replay.
KNOWN: dict[str, Known] = {
    "release-while-held": Known(
        "Release", False, (("phase", "held"), ("lost", False), ("op", "none")),
        "a reentrant handle's manual release() (and a run/hold body's own release) of the "
        "outermost level while it is held: both drivers have it, Reentrant.tla models "
        "run/hold sections only (no Manual, no EarlyRelease; DistLock.tla checks them for "
        "the lock)",
    ),
    "outermost-exit-during-depth-write": Known(
        "BodyDone", False, (("phase", "held"), ("depth", 1)),
        "the outermost level's exit (body end or release) while the holder's own R_ENTER "
        "or R_LEAVE is unanswered: the core's check_outermost_exit reads the depth, not "
        "the write in flight; the spec waits for the reply (op = \"none\").  The drivers "
        "answer or fail a depth write before the holder goes on",
        also=("Release",), where_not=(("op", "none"),),
    ),
}

REPLAYS = guard_replay.Replays(MODELS, guard_replay.ReentrantAdapter, KNOWN)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_spec_step_is_taken_by_the_core(name: str) -> None:
    REPLAYS.check_forward(name)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_core_step_is_a_spec_step(name: str) -> None:
    REPLAYS.check_backward(name)


def test_the_known_disagreements_are_still_there() -> None:
    for key in KNOWN:
        REPLAYS.check_known(key)


def test_the_models_take_every_holder_action_with_every_reply() -> None:
    REPLAYS.check_coverage(REPLAYS.every_step(ACTIONS))
