"""The read-write lock's core takes a step exactly when ``spec/ReadWrite.tla`` does.

The plain lock's guard replay (``tests/test_guards.py``), on the read-write lock: TLC dumps
the complete state graph of two small models of ``spec/ReadWrite.tla`` and
``tests/guard_replay.py`` replays each client on a
:class:`~distlock._core.readwrite.ReadSection` or
:class:`~distlock._core.readwrite.WriteSection` (its role's), both ways (every spec step is
taken by the core alike; every call the core accepts is a spec step).  A reader's grant is
the lock's with the fence counter as it stands, so the adapter compares granted or not,
as the semaphore's does.

Besides the lock's actions the spec has a waiter's ``Withdraw``, replayed on
``Section.withdraw``, and the reader's ``Upgrade``, which the drivers refuse before any
section exists (``reentry_refused``): it is replayed as a step that sends nothing and
leaves the section as it was.  ``UpgradeReply`` answers an upgrade that only the broken
``upgrade_allowed`` sends, so no model of the real spec takes it.

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

pytestmark = pytest.mark.skipif(
    shutil.which("java") is None or not (specfiles.spec_dir() / "ReadWrite.tla").is_file(),
    reason="needs java and spec/ReadWrite.tla",
)

_READWRITE = {
    "module": "ReadWrite",
    # A killed client takes no step: its actions are labelled one by one under that guard.
    "client_actions": (*CLIENT_ACTIONS, "Withdraw", "Upgrade", "UpgradeReply"),
    "client_guard": "c \\notin dead",
    # The ghosts of the properties (overlap, oks, own_ttl, issued, ...) are read by no
    # guard of the real spec: states that differ only there are one state here, which
    # halves the contended model.
    "view": "<<client_vars, env_vars>>",
}

#: Two models that together take every client action with every reply value.
MODELS = {
    # One reader, a manual handle or run/hold, every fault once, a clock lagging by one
    # tick; a lease of two ticks (margin ttl/2) so that a renewal is due before it ends.
    # The reader waits (nobody refuses it): a failed attempt may have queued it.
    "single": spec_graph.Model(
        "single", clients=1, ttl=4, heartbeat=1, margin=2, max_drift=1, max_faults=1,
        manual=True,
        extra=(("Writers", "{}"), ("Waiters", "{c1}"), ("Alike", "{}")),
        **_READWRITE,  # type: ignore[arg-type]
    ),
    # A waiting writer and a fail-fast reader with a retry, no faults: refusals both ways
    # (a live lease, a writer queued ahead), backoff, waiting and withdrawal; the reader
    # asks to upgrade.
    "contended": spec_graph.Model(
        "contended", clients=2, retries=1, ttl=2, heartbeat=1,
        extra=(("Writers", "{c1}"), ("Waiters", "{c1}"), ("Upgraders", "{c2}"),
               ("Alike", "{}")),
        **_READWRITE,  # type: ignore[arg-type]
    ),
}

#: Where the core and the spec are known to disagree.
KNOWN: dict[str, Known] = {
    "release-while-held": Known(
        "Release", False, (("phase", "held"), ("auto_renew", True), ("lost", False)),
        "a run/hold body's own release (the handle a hold gives has release()): "
        "ReadWrite.tla releases a run/hold section after its body only, where "
        "DistLock.tla and Semaphore.tla have EarlyRelease",
    ),
    "withdraw-during-attempt": Known(
        "Withdraw", False, (("phase", "acquiring"),),
        "the core's withdraw is guarded by the place Redis may hold, not by the phase: "
        "it accepts a waiter's withdrawal while a later attempt is in flight (and keeps "
        "the attempt outstanding), where the spec withdraws between attempts only; the "
        "drivers withdraw after acquire_fail or from a broken block, never there",
    ),
    "withdraw-after-failed-attempt": Known(
        "Withdraw", False, (),
        "a waiter's failed attempt may have queued it: the core keeps the place to "
        "withdraw, and its driver sends RW_LEAVE after the cleanup release, where the "
        "spec's release drops the place itself and sends nothing more (a redundant "
        "round trip, not a wrong one)",
        where_in=(("phase", ("abandoned", "releasing", "done")), ("outcome", ("none", "failed"))),
    ),
}

REPLAYS = guard_replay.Replays(MODELS, guard_replay.ReadWriteAdapter, KNOWN)


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
    REPLAYS.check_coverage(
        REPLAYS.every_step(CLIENT_ACTIONS) | {("Withdraw", None), ("Upgrade", None)})


def test_no_model_of_the_real_spec_answers_an_upgrade() -> None:
    # Nothing is sent on an upgrade: only the broken upgrade_allowed has a reply to take.
    assert ("UpgradeReply", None) not in REPLAYS.covered()
