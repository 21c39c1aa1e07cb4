"""The spec and the core speak one vocabulary.

Reads the action names of ``spec/DistLock.tla`` (the disjuncts of ``ClientStep``
and ``EnvStep``, which ``Next`` is made of) and compares them with
``distlock._core.actions`` and with the methods of ``distlock._core.section.Section``.
Names only: that each method has the guard and the effect of its action is checked by
``tests/test_guards.py`` (the spec's state graph replayed on the core, both ways) and
``tests/test_guard_traces.py`` (core runs at the guards' edges, validated by TLC).
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from distlock._core import section as core
from distlock._core.actions import (
    CLIENT_ACTIONS,
    ENVIRONMENT_ACTIONS,
    WAIT_ACTIONS,
    method_name,
)
from distlock._core.lease import LeaseClock

SPEC = Path(__file__).resolve().parent.parent / "spec" / "DistLock.tla"

_COMMENT = re.compile(r"\(\*.*?\*\)", re.S)
_DEFINITION = re.compile(r"^(\w+)(?:\([^)]*\))?\s*==", re.M)


def _spec_text() -> str:
    text = _COMMENT.sub("", SPEC.read_text())
    return "\n".join(line.split("\\*")[0] for line in text.splitlines())


def _body(text: str, name: str) -> str:
    """The text of the definition of ``name`` (up to the next top-level definition)."""
    starts = [(m.group(1), m.start(), m.end()) for m in _DEFINITION.finditer(text)]
    for i, (defined, _, end) in enumerate(starts):
        if defined == name:
            stop = starts[i + 1][1] if i + 1 < len(starts) else len(text)
            return text[end:stop]
    raise AssertionError(f"{name} is not defined in {SPEC.name}")


def _actions(body: str) -> list[str]:
    """Operators named by the disjuncts of a definition: ``\\/ [\\E x \\in S :] Name(...)``."""
    names: list[str] = []
    for line in body.splitlines():
        found = re.match(r"\s*\\/\s*(?:\\E\s+\w+\s+\\in\s+\w+\s*:\s*)?([A-Z]\w*)", line)
        if found:
            names.append(found.group(1))
    return names


def test_next_is_client_and_environment_steps() -> None:
    next_body = _body(_spec_text(), "Next")
    assert "ClientStep" in next_body
    assert "EnvStep" in next_body


def test_spec_client_actions_are_the_vocabulary() -> None:
    spec = _actions(_body(_spec_text(), "ClientStep"))
    assert len(spec) == len(set(spec)), f"an action twice in ClientStep: {spec}"
    assert set(spec) == set(CLIENT_ACTIONS), (
        f"in the spec only: {sorted(set(spec) - set(CLIENT_ACTIONS))}; "
        f"in distlock._core.actions only: {sorted(set(CLIENT_ACTIONS) - set(spec))}"
    )


def test_spec_environment_actions_are_the_vocabulary() -> None:
    spec = _actions(_body(_spec_text(), "EnvStep"))
    assert len(spec) == len(set(spec)), f"an action twice in EnvStep: {spec}"
    assert set(spec) == set(ENVIRONMENT_ACTIONS), (
        f"in the spec only: {sorted(set(spec) - set(ENVIRONMENT_ACTIONS))}; "
        f"in distlock._core.actions only: {sorted(set(ENVIRONMENT_ACTIONS) - set(spec))}"
    )


def test_every_spec_action_is_defined() -> None:
    text = _spec_text()
    defined = {m.group(1) for m in _DEFINITION.finditer(text)}
    missing = (set(CLIENT_ACTIONS) | set(ENVIRONMENT_ACTIONS)) - defined
    assert not missing, f"named in Next but not defined: {sorted(missing)}"


def test_client_and_environment_actions_are_disjoint() -> None:
    assert not set(CLIENT_ACTIONS) & set(ENVIRONMENT_ACTIONS)


@pytest.mark.parametrize("action", sorted({*CLIENT_ACTIONS, *WAIT_ACTIONS}))
def test_core_has_a_method_per_client_action(action: str) -> None:
    method = getattr(core.Section, method_name(action), None)
    assert callable(method), f"Section has no {method_name(action)}() for {action}"


def _public_methods() -> set[str]:
    # The lease clock's rules (LeaseClock, the base class a section's lease state lives
    # in) are the arithmetic the actions use, not actions: they are not the section's.
    lease = {name for name, _ in inspect.getmembers(LeaseClock)}
    return {
        name
        for name, member in inspect.getmembers(core.Section)
        if not name.startswith("_") and inspect.isroutine(member) and name not in lease
    }


#: Public methods of Section that are not spec actions, and why.
NOT_ACTIONS = {
    "tick": "the scheduler asking which timer action (RenewSend, LeaseTimeout) is enabled",
    "not_acquired_error": "builds the exception a driver raises",
    "reply": "routes a reply to the action it completes (AcquireReply, RenewReply, ...)",
    "failed": "routes a failed round trip to its action (AcquireFail, RenewFail, ...)",
    "take_events": "drains the outbox of transitions and lifecycle events",
}


def test_core_has_no_action_the_spec_lacks() -> None:
    # The waiting actions are spec/Wait.tla's, not DistLock.tla's.
    actions = {method_name(a) for a in (*CLIENT_ACTIONS, *WAIT_ACTIONS)}
    extra = _public_methods() - actions - set(NOT_ACTIONS)
    assert not extra, (
        f"Section methods with no spec action: {sorted(extra)} "
        "(add the action to the spec and distlock._core.actions, or list the helper in NOT_ACTIONS)"
    )


def test_helpers_listed_as_not_actions_exist() -> None:
    stale = set(NOT_ACTIONS) - _public_methods()
    assert not stale, f"NOT_ACTIONS lists methods Section no longer has: {sorted(stale)}"


# -- the reentrant lock: spec/Reentrant.tla against ReentrantSection ----------------------

REENTRANT_SPEC = SPEC.with_name("Reentrant.tla")


def _reentrant_text() -> str:
    text = _COMMENT.sub("", REENTRANT_SPEC.read_text())
    return "\n".join(line.split("\\*")[0] for line in text.splitlines())


def _reentrant_actions(name: str) -> list[str]:
    text = _reentrant_text()
    starts = [(m.group(1), m.end()) for m in _DEFINITION.finditer(text)]
    for i, (defined, end) in enumerate(starts):
        if defined == name:
            stop = starts[i + 1][1] if i + 1 < len(starts) else len(text)
            return _actions(text[end:stop])
    raise AssertionError(f"{name} is not defined in {REENTRANT_SPEC.name}")


def test_reentrant_spec_holder_actions_are_the_lock_s_and_the_reentrant_ones() -> None:
    from distlock._core.actions import REENTRANT_ACTIONS

    spec = _reentrant_actions("HolderStep")
    assert len(spec) == len(set(spec)), f"an action twice in HolderStep: {spec}"
    ours = set(REENTRANT_ACTIONS)
    assert ours <= set(spec), f"not in Reentrant.tla's HolderStep: {sorted(ours - set(spec))}"
    # Every other holder action is one of the lock's, with the lock's name and method.
    others = set(spec) - ours
    strangers = sorted(others - set(CLIENT_ACTIONS))
    assert not strangers, f"holder actions neither the lock's nor reentrant: {strangers}"


def test_reentrant_spec_environment_actions_are_the_lock_s() -> None:
    spec = set(_reentrant_actions("EnvStep"))
    assert spec <= set(ENVIRONMENT_ACTIONS), sorted(spec - set(ENVIRONMENT_ACTIONS))


def test_reentrant_section_has_a_method_per_reentrant_action_and_no_other() -> None:
    from distlock._core.actions import REENTRANT_ACTIONS
    from distlock._core.reentrant import ReentrantSection

    for action in REENTRANT_ACTIONS:
        assert callable(getattr(ReentrantSection, method_name(action), None)), action
    own = {
        name
        for name, member in vars(ReentrantSection).items()
        if not name.startswith("_") and inspect.isroutine(member)
    }
    # An override, and the exit rules the drivers ask before acting: not actions.
    helpers = {"acquire_reply", "check_outermost_exit", "check_inner_exit"}
    extra = own - {method_name(a) for a in REENTRANT_ACTIONS} - helpers
    assert not extra, f"ReentrantSection methods with no spec action: {sorted(extra)}"
