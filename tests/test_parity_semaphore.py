"""``spec/Semaphore.tla`` and the semaphore's core speak the lock's vocabulary.

A permit is a lease with exactly the lock's client actions and guards: the spec's
``ClientStep`` must be the lock's action list one for one, and the semaphore's core class
(``SemaphoreSection`` in ``distlock._core.semaphore``) must take them as ``Section``'s
methods, adding no action of its own.  Only the environment has one action more: a client
process killed while it holds a permit (``Die``), which no core method stands for.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

from distlock._core import section as core
from distlock._core.actions import CLIENT_ACTIONS, ENVIRONMENT_ACTIONS, method_name
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

_COMMENT = re.compile(r"\(\*.*?\*\)", re.S)
_DEFINITION = re.compile(r"^(\w+)(?:\([^)]*\))?\s*==", re.M)
_DISJUNCT = re.compile(r"\s*\\/\s*(?:\\E\s+\w+\s+\\in\s+\w+\s*:\s*)?([A-Z]\w*)")


def _text() -> str:
    text = _COMMENT.sub("", SPEC.read_text())
    return "\n".join(line.split("\\*")[0] for line in text.splitlines())


def _disjuncts(name: str) -> list[str]:
    """The operators named by the disjuncts of definition ``name``."""
    text = _text()
    starts = [(m.group(1), m.start(), m.end()) for m in _DEFINITION.finditer(text)]
    for i, (defined, _, end) in enumerate(starts):
        if defined == name:
            stop = starts[i + 1][1] if i + 1 < len(starts) else len(text)
            return [
                found.group(1)
                for line in text[end:stop].splitlines()
                if (found := _DISJUNCT.match(line))
            ]
    raise AssertionError(f"{name} is not defined in {SPEC.name}")


def test_client_actions_are_the_lock_s_one_for_one() -> None:
    spec = _disjuncts("ClientStep")
    assert len(spec) == len(set(spec)), f"an action twice in ClientStep: {spec}"
    assert spec == list(CLIENT_ACTIONS), (
        f"in Semaphore.tla only: {sorted(set(spec) - set(CLIENT_ACTIONS))}; "
        f"in the lock's only: {sorted(set(CLIENT_ACTIONS) - set(spec))}"
    )


def test_environment_actions_are_the_lock_s_and_the_death_of_a_client() -> None:
    spec = _disjuncts("EnvStep")
    assert len(spec) == len(set(spec)), f"an action twice in EnvStep: {spec}"
    expected = (set(ENVIRONMENT_ACTIONS) - set(NOT_IN_SEMAPHORE)) | set(SEMAPHORE_ENVIRONMENT)
    assert set(spec) == expected, (
        f"in Semaphore.tla only: {sorted(set(spec) - expected)}; "
        f"missing there: {sorted(expected - set(spec))}"
    )


def test_next_is_client_and_environment_steps() -> None:
    body = _text().split("\nNext ==", 1)[1].split("\n\n", 1)[0]
    assert "ClientStep" in body
    assert "EnvStep" in body


def test_every_action_named_is_defined() -> None:
    defined = {m.group(1) for m in _DEFINITION.finditer(_text())}
    named = set(_disjuncts("ClientStep")) | set(_disjuncts("EnvStep"))
    assert not named - defined, f"named but not defined: {sorted(named - defined)}"


@pytest.mark.parametrize("action", list(CLIENT_ACTIONS))
def test_the_lock_s_section_has_a_method_per_permit_action(action: str) -> None:
    # The semaphore's core class subclasses Section: every action it takes is one of these.
    assert callable(getattr(core.Section, method_name(action), None)), action


def _semaphore_core() -> ModuleType:
    """The semaphore's pure core; skips the test until it is part of the checkout."""
    try:
        return importlib.import_module("distlock._core.semaphore")
    except ModuleNotFoundError:
        pytest.skip("distlock._core.semaphore is not in this checkout yet")


@pytest.mark.parametrize("action", list(CLIENT_ACTIONS))
def test_semaphore_section_has_a_method_per_action(action: str) -> None:
    section = _semaphore_core().SemaphoreSection
    assert callable(getattr(section, method_name(action), None)), action


def test_semaphore_section_adds_no_action() -> None:
    section = _semaphore_core().SemaphoreSection
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
