"""Waiting: the core takes a step where ``spec/Wait.tla``'s client does.

The plain lock's guard replay (``tests/test_guards.py``), on waiting: TLC dumps the
complete state graph of two small models of ``spec/Wait.tla`` (a waiter and a fail-fast
client on one key, handoff on; the second with two faults: cancellations, dropped messages) and
``tests/guard_replay.py`` replays each client on a :class:`~distlock._core.section.Section`
with ``wait_ms`` (attempt, refusal with its re-check time, block, wake by a handoff or at
the block's end, withdrawal, release), both ways.  One tick is 250 ms: the core's longest
block (half the 1 s TTL) is the model's ``LongestBlock`` of two ticks.  Wait.tla has no
lease clock, fence or loss signal: phase, outcome, the wait left and the block left are
compared.

Its client is coarser than the spec's in several places, listed in :data:`KNOWN`, each
with a test that fails once it is gone.
"""

from __future__ import annotations

import shutil

import pytest

from distlock.tools import specfiles
from tests import guard_replay, spec_graph
from tests.guard_replay import Known

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not (specfiles.spec_dir() / "Wait.tla").is_file(),
    reason="needs java and spec/Wait.tla",
)

_CLIENTS = (("a", "a"), ("b", "b"), ("Clients", "{a, b}"), ("Waiting", "{a}"),
            ("MaxWait", "3"), ("LongestBlock", "2"))

MODELS = {
    # A waiter and a fail-fast client, no fault: refusals, blocks, handoffs, wake-ups at
    # the block's end, the last attempt.
    "handoff": spec_graph.Model("handoff", module="Wait", lock_constants=False, ttl=4,
                                extra=_CLIENTS),
    # The same with two faults, cancellations or dropped messages: withdrawals, and
    # round trips that fail (a withdrawal's among them).
    "faults": spec_graph.Model("faults", module="Wait", lock_constants=False, ttl=4,
                               max_faults=2,
                               extra=(*_CLIENTS, ("FaultKinds", '{"cancel", "drop"}'))),
}

_WAITING = ("refused", "blocked", "woken")

#: Where the core and the spec are known to disagree.
KNOWN: dict[str, Known] = {
    "one-waiting-phase": Known(
        "Acquire", False, (), "the core has one phase, waiting, for the spec's refused, "
        "blocked and woken: its attempt, block and wake guards accept each other's place "
        "(the driver keeps the order: block after a refusal, wake after the block, the "
        "next attempt after the wake)",
        also=("Block", "Wake"), where_in=(("phase", _WAITING),),
    ),
    "withdraw-replies-unguarded": Known(
        "WithdrawReply", False, (), "withdraw_reply and withdraw_fail take no guard and "
        "change nothing: accepted in any phase",
        also=("WithdrawFail",), kinds=("core accepts to another state",),
    ),
    "release-while-held": Known(
        "Release", False, (("phase", "held"),), "a manual handle's release, and a run/hold "
        "body's own release, while held: Wait.tla releases after the body only",
    ),
    "no-lease-clock": Known(
        "ReleaseReply", False, (), "the core's lease runs out on the "
        "client clock (nothing renews it here: Wait.tla has no renewal): a release answered "
        "1 ends lost where Wait.tla, without a lease clock, says ok",
        also=("state", "Tick"), kinds=("state differs", "core accepts to another state"),
        where_in=(("phase", ("releasing", "done")), ("outcome", ("none", "ok"))),
    ),
    "failed-attempt-withdraws": Known(
        "AcquireFail", False, (), "a waiter's failed attempt: Wait.tla withdraws in the "
        "same step (the leave script gives back a key the attempt took); the core abandons "
        "(sends nothing) and its driver follows with the cleanup release and then the "
        "withdrawal, two round trips the spec makes one",
        also=("state", "Tick", "Release", "ReleaseReply", "ReleaseFail", "WithdrawReply",
              "WithdrawFail"),
        kinds=("sends otherwise", "state differs", "core accepts to another state",
               "core accepts what the spec refuses"),
        where_in=(("phase", ("acquiring", "withdrawing", "done")),
                  ("outcome", ("none", "failed"))),
    ),
    "withdraw-during-attempt": Known(
        "Withdraw", False, (), "Wait.tla withdraws an attempt in flight in one step (its "
        "reply is dropped; outcome not_acquired); the core's withdraw takes a waiter "
        "already queued only (the driver's acquire_fail first marks the attempt as "
        "possibly queued), keeps the attempt outstanding, and sets no outcome there",
        also=("state", "Tick", "WithdrawReply", "WithdrawFail", "AcquireReply", "AcquireFail"),
        kinds=("core refuses", "state differs", "core accepts to another state",
               "core accepts what the spec refuses"),
        where_in=(("phase", ("acquiring", "withdrawing", "done")),),
    ),
}

REPLAYS = guard_replay.Replays(MODELS, guard_replay.WaitAdapter, KNOWN)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_spec_step_is_taken_by_the_core(name: str) -> None:
    REPLAYS.check_forward(name, min_steps=300)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_core_step_is_a_spec_step(name: str) -> None:
    REPLAYS.check_backward(name, min_probes=300)


def test_the_known_disagreements_are_still_there() -> None:
    for key in KNOWN:
        REPLAYS.check_known(key)


def test_the_models_take_every_client_action_with_every_reply() -> None:
    wanted = {(a, arg) for a, arg, _ in guard_replay.WaitAdapter(MODELS["faults"]).candidates()
              if not a.startswith("AcquireReply") or arg in ("granted", "refused 0",
                                                             "refused 1")}
    REPLAYS.check_coverage(wanted)
