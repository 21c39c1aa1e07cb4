"""A candidate's campaign takes a step exactly when ``spec/Election.tla``'s candidate does.

The plain lock's guard replay (``tests/test_guards.py``), on the election: TLC dumps the
complete state graph of a small model of ``spec/Election.tla`` and ``tests/guard_replay.py``
replays each candidate on a :class:`~distlock._core.election.CampaignSection`, both ways
(every spec step is taken by the core alike; every call the core accepts is a spec step).
A candidate's steps are the lock's with the handoff (``CandidateStep``: the lock's
``ClientStep`` and ``WaitStep``), each labelled on its own in the model's ``Next``; the
rest of the spec's ``ENext`` (Redis's scripts writing the leader record, time, the
network, the observer's read, and ``Die``, a leader killed) is the environment's.  In
every state the replay also compares :func:`~distlock._core.election.leading` with the
spec's ``Leading`` (``Acting``).

The core and the spec disagree in the places listed in :data:`KNOWN`; each has a test that
fails once the disagreement is gone.
"""

from __future__ import annotations

import shutil

import pytest

from distlock._core.actions import CLIENT_ACTIONS
from distlock.tools import specfiles
from tests import guard_replay, spec_graph
from tests.guard_replay import Known
from tests.test_guards_readwrite import KNOWN as READWRITE_KNOWN

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not (specfiles.spec_dir() / "Election.tla").is_file(),
    reason="needs java and spec/Election.tla",
)

_ELECTION = {
    "module": "Election",
    "init": "EInit",
    "client_actions": (*CLIENT_ACTIONS, "Wake", "Withdraw"),
    # Each of a candidate's actions with what CandidateStep adds (the record unchanged,
    # the ghosts kept).
    "client_guard": "CandidateStep(c)",
    "env": ("\\E m \\in net : RedisRun(m)", "ETick", "EKeyLost", "EnvOther",
            "\\E c \\in Clients : Die(c)", "ObserverStep"),
    "aliases": (("Tick", "ETick"),),
    # The record, the observer's read and the ghosts are read by no guard of a candidate.
    "view": "<<client_vars, env_vars, dead>>",
}

#: Two models that together take every action of a candidate with every reply value.
MODELS = {
    # Two candidates, every lease renewed each tick (TTL 2, heartbeat 1, no margin), each
    # reply before time moves on: grants, refusals, handoffs by a resignation (or a
    # withdrawal), renewals refused once the key is gone; a leader may be killed (the one
    # fault).  Replies a tick late make the graph ten times larger.
    "kills": spec_graph.Model(
        "kills", clients=2, ttl=2, heartbeat=1, margin=0, max_faults=1,
        extra=(("Timely", "TRUE"), ("MaxDelay", "0"), ("HandedTTL", "2"),
               ("FaultKinds", "{}"), ("Kills", "TRUE"), ("LongestBlock", "0")),
        **_ELECTION,  # type: ignore[arg-type]
    ),
    # One candidate in the world of faults: one drop, hang or starved loop (or a kill),
    # unbounded delays: failed round trips, a lease timed out, and leading() on a starved
    # loop whose deadline passed with no tick run.
    "faults": spec_graph.Model(
        "faults", clients=1, ttl=2, heartbeat=1, margin=0, max_faults=1,
        extra=(("HandedTTL", "2"), ("FaultKinds", '{"drop", "hang", "starve"}'),
               ("Kills", "TRUE"), ("LongestBlock", "0")),
        **_ELECTION,  # type: ignore[arg-type]
    ),
}

#: Where the core and the spec are known to disagree: the read-write lock's, whose
#: waiters withdraw as a campaign does (the same Section.withdraw, the same drivers).
KNOWN: dict[str, Known] = {
    key: READWRITE_KNOWN[key]
    for key in ("withdraw-during-attempt", "withdraw-after-failed-attempt")
}

REPLAYS = guard_replay.Replays(MODELS, guard_replay.ElectionAdapter, KNOWN)

#: A candidate's actions: the lock's but a manual handle's (Election.tla has none: a
#: leadership is renewed), and the handoff's.
CANDIDATE_ACTIONS = {a: d for a, d in guard_replay.ElectionAdapter.actions.items()
                     if not a.startswith("Extend")}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_spec_step_is_taken_by_the_core(name: str) -> None:
    REPLAYS.check_forward(name, min_steps=500)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_core_step_is_a_spec_step(name: str) -> None:
    REPLAYS.check_backward(name, min_probes=1000)


def test_the_known_disagreements_are_still_there() -> None:
    for key in KNOWN:
        REPLAYS.check_known(key)


def test_the_models_take_every_action_of_a_candidate_with_every_reply() -> None:
    REPLAYS.check_coverage(REPLAYS.every_step(CANDIDATE_ACTIONS))


def test_a_candidate_has_no_action_of_a_manual_handle() -> None:
    assert not {a for a, _ in REPLAYS.covered()} - set(CANDIDATE_ACTIONS)
