"""``spec/Semaphore.tla`` and the semaphore's core speak the lock's vocabulary.

A permit is a lease with exactly the lock's client actions and guards: the spec's
``ClientStep`` must be the lock's action list one for one, and the semaphore's core class
(``SemaphoreSection`` in ``distlock._core.semaphore``) must take them as ``Section``'s
methods, adding no action of its own.  Only the environment has one action more: a client
process killed while it holds a permit (``Die``), which no core method stands for.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from distlock._core import section as core
from distlock._core.actions import CLIENT_ACTIONS, ENVIRONMENT_ACTIONS, method_name
from distlock._core.semaphore import SemaphoreSection
from tests.spec_text import defined, disjuncts, text
from tests.test_parity import NOT_ACTIONS

SPEC = Path(__file__).resolve().parent.parent / "spec" / "Semaphore.tla"

#: Environment actions of the semaphore's spec that the lock's has not, and why.
SEMAPHORE_ENVIRONMENT = {
    "Die": "a client process killed (SIGKILL) mid-section: its permit must expire on its own",
}
#: Environment actions of the lock's spec that the semaphore's has not, and why.
NOT_IN_SEMAPHORE = {
    "SharedIncr": "moves the fence counter of the key's slot; a permit has no fence",
}




def test_client_actions_are_the_lock_s_one_for_one() -> None:
    spec = disjuncts(SPEC, "ClientStep")
    assert len(spec) == len(set(spec)), f"an action twice in ClientStep: {spec}"
    assert spec == list(CLIENT_ACTIONS), (
        f"in Semaphore.tla only: {sorted(set(spec) - set(CLIENT_ACTIONS))}; "
        f"in the lock's only: {sorted(set(CLIENT_ACTIONS) - set(spec))}"
    )


def test_environment_actions_are_the_lock_s_and_the_death_of_a_client() -> None:
    spec = disjuncts(SPEC, "EnvStep")
    assert len(spec) == len(set(spec)), f"an action twice in EnvStep: {spec}"
    expected = (set(ENVIRONMENT_ACTIONS) - set(NOT_IN_SEMAPHORE)) | set(SEMAPHORE_ENVIRONMENT)
    assert set(spec) == expected, (
        f"in Semaphore.tla only: {sorted(set(spec) - expected)}; "
        f"missing there: {sorted(expected - set(spec))}"
    )


def test_next_is_client_and_environment_steps() -> None:
    body = text(SPEC).split("\nNext ==", 1)[1].split("\n\n", 1)[0]
    assert "ClientStep" in body
    assert "EnvStep" in body


def test_every_action_named_is_defined() -> None:
    names = defined(SPEC)
    named = set(disjuncts(SPEC, "ClientStep")) | set(disjuncts(SPEC, "EnvStep"))
    assert not named - names, f"named but not defined: {sorted(named - names)}"


@pytest.mark.parametrize("action", list(CLIENT_ACTIONS))
def test_the_lock_s_section_has_a_method_per_permit_action(action: str) -> None:
    # The semaphore's core class subclasses Section: every action it takes is one of these.
    assert callable(getattr(core.Section, method_name(action), None)), action


@pytest.mark.parametrize("action", list(CLIENT_ACTIONS))
def test_semaphore_section_has_a_method_per_action(action: str) -> None:
    section = SemaphoreSection
    assert callable(getattr(section, method_name(action), None)), action


def test_semaphore_section_adds_no_action() -> None:
    section = SemaphoreSection
    assert issubclass(section, core.Section), "a permit must take the lock's actions"
    own = {
        name
        for name, member in vars(section).items()
        if not name.startswith("_") and inspect.isroutine(member)
    }
    # Overriding a method of Section that is no action (the not-acquired error names a
    # permit) is fine.
    extra = own - {method_name(a) for a in CLIENT_ACTIONS} - set(NOT_ACTIONS)
    assert not extra, f"SemaphoreSection methods with no spec action: {sorted(extra)}"
