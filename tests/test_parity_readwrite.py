"""``spec/ReadWrite.tla`` speaks the lock's vocabulary, before the read-write lock's code exists.

A read or write section is a lease with exactly the lock's client actions and guards, and
two more: a waiter's withdrawal (``Wait.tla``'s ``Withdraw``) and a reader's upgrade, which
the core refuses (``UpgradeReply`` is the broken upgrade's only).  The core class to come
must take them one for one; these tests hold the spec's lists to the lock's, so that it
cannot drift from them unnoticed.
"""

from __future__ import annotations

from pathlib import Path

from distlock._core.actions import CLIENT_ACTIONS, ENVIRONMENT_ACTIONS
from tests.spec_text import defined, disjuncts

SPEC = Path(__file__).resolve().parent.parent / "spec" / "ReadWrite.tla"

#: Client actions of the read-write lock's spec that the lock's has not, and why.
READWRITE_CLIENT = {
    "Withdraw": "a waiter gives up between attempts (Wait.tla's withdraw)",
    "Upgrade": "a reader asks for the write lock on the key it reads: refused by the core",
    "UpgradeReply": "the broken upgrade_allowed only: the upgrade's reply",
}
#: Environment actions of the read-write lock's spec that the lock's has not, and why.
READWRITE_ENVIRONMENT = {
    "Die": "a client process killed mid-section: its lease must end at its own TTL",
}
#: Environment actions of the lock's spec that the read-write lock's has not, and why.
NOT_IN_READWRITE = {
    "SharedIncr": "the fences' order is checked without other keys of the slot",
    "KeyLost": "Redis losing the keys is left out of this spec (see spec/README.md)",
    "ResendRelease": "no release memory is modelled: a resent release is reported lost",
}



def test_client_actions_are_the_lock_s_then_withdraw_and_upgrade() -> None:
    spec = disjuncts(SPEC, "ClientStep")
    assert len(spec) == len(set(spec)), f"an action twice in ClientStep: {spec}"
    assert spec == [*CLIENT_ACTIONS, *READWRITE_CLIENT]


def test_environment_actions_are_the_lock_s_and_the_death_of_a_client() -> None:
    spec = disjuncts(SPEC, "EnvStep")
    assert len(spec) == len(set(spec)), f"an action twice in EnvStep: {spec}"
    expected = (set(ENVIRONMENT_ACTIONS) - set(NOT_IN_READWRITE)) | set(READWRITE_ENVIRONMENT)
    assert set(spec) == expected, (
        f"in ReadWrite.tla only: {sorted(set(spec) - expected)}; "
        f"missing there: {sorted(expected - set(spec))}"
    )


def test_every_action_named_is_defined() -> None:
    names = defined(SPEC)
    named = set(disjuncts(SPEC, "ClientStep")) | set(disjuncts(SPEC, "EnvStep"))
    assert not named - names, f"named but not defined: {sorted(named - names)}"
