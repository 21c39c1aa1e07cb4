"""``spec/ReadWrite.tla`` and the read-write lock's core speak the lock's vocabulary.

A read or write section is a lease with exactly the lock's client actions and guards, and
two more: a waiter's withdrawal (``Wait.tla``'s ``Withdraw``) and a reader's upgrade, which
the core refuses (``UpgradeReply`` is the broken upgrade's only).  The core's classes
(``ReadSection`` and ``WriteSection`` in ``distlock._core.readwrite``) take them as
``Section``'s methods, adding no action of their own; the upgrade is refused before any
section is made (``reentry_refused``), so it is no section's method.  These tests hold the
spec's lists to the lock's and the core's, so that neither can drift unnoticed.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from distlock._core import section as core
from distlock._core.actions import CLIENT_ACTIONS, ENVIRONMENT_ACTIONS, method_name
from distlock._core.commands import Kind
from distlock._core.readwrite import ReadSection, WriteSection, reentry_refused
from distlock.errors import ReentryError, UpgradeError
from tests.spec_text import defined, disjuncts
from tests.test_parity import NOT_ACTIONS

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


ROLE_SECTIONS = [ReadSection, WriteSection]


@pytest.mark.parametrize("section", ROLE_SECTIONS)
@pytest.mark.parametrize("action", [*CLIENT_ACTIONS, "Withdraw"])
def test_each_role_s_section_has_a_method_per_action(section: type, action: str) -> None:
    assert callable(getattr(section, method_name(action), None)), action


@pytest.mark.parametrize("section", ROLE_SECTIONS)
def test_a_role_s_section_adds_no_action(section: type) -> None:
    assert issubclass(section, core.Section), "a role's section must take the lock's actions"
    own: set[str] = set()
    for klass in section.__mro__:
        if klass is core.Section:
            break
        own |= {
            name
            for name, member in vars(klass).items()
            if not name.startswith("_") and inspect.isroutine(member)
        }
    extra = own - {method_name(a) for a in CLIENT_ACTIONS} - set(NOT_ACTIONS)
    assert not extra, f"{section.__name__} methods with no spec action: {sorted(extra)}"


def test_each_role_s_commands_carry_its_kind() -> None:
    # The role decides which scripts' rules apply (the spec's m.role), on every request.
    from distlock._core.config import SectionConfig

    config = SectionConfig(ttl_ms=1000, retries=0, retry_delay_ms=0, renew_every_ms=None,
                           watch=False, cancel_on_loss=False)
    for section_type, kind in ((ReadSection, Kind.READ), (WriteSection, Kind.WRITE)):
        section = section_type("rw:k", 1, config)
        command = section.acquire(0.0).send
        assert command is not None and command.kind is kind, (section_type, command)


def test_the_upgrade_is_refused_before_any_section_and_the_other_reentries_too() -> None:
    # Upgrade: nothing is sent (the spec's net is unchanged); the broken upgrade_allowed
    # is the only variant with an UpgradeReply.
    assert isinstance(reentry_refused("rw:k", Kind.READ, Kind.WRITE), UpgradeError)
    for holds, wants in ((Kind.WRITE, Kind.READ), (Kind.WRITE, Kind.WRITE), (Kind.READ, Kind.READ)):
        error = reentry_refused("rw:k", holds, wants)
        assert isinstance(error, ReentryError) and not isinstance(error, UpgradeError)
