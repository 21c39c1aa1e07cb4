"""``spec/Election.tla`` and the campaign's core speak the lock's vocabulary.

A candidate's step (``CandidateStep``) is the lock's ``ClientStep`` or its handoff's
``WaitStep``, nothing more: the campaign's section
(:class:`~distlock._core.election.CampaignSection`) takes them as :class:`Section`'s
methods and adds none.  The rest of ``ENext`` (Redis's scripts writing the leader record,
time, the network, the observer's read, ``Die``) is the environment's: no method.

The handle's check before its leader acts, :func:`~distlock._core.election.leading`, is
the spec's ``Leading`` (``Acting`` without the broken ``act_past_deadline``): held, no loss
known, the deadline not passed on the client's clock.  Its definition is read off the
spec and evaluated on the core's state beside ``leading()``, in a table of sections that
includes a starved loop's (the deadline passed and no tick run: still ``holding``).
``tests/test_guards_election.py`` compares the two in every state of a model as well.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from distlock._core import section as core
from distlock._core.actions import CLIENT_ACTIONS, WAIT_ACTIONS, method_name
from distlock._core.commands import Command, Kind, Op, Step
from distlock._core.config import SectionConfig
from distlock._core.election import CampaignSection, leading
from distlock._core.lease import LeaseClock
from distlock._core.section import Phase
from distlock.events import Transition
from tests.spec_text import DEFINITION, disjuncts, text
from tests.test_parity import NOT_ACTIONS

SPEC = Path(__file__).resolve().parent.parent / "spec" / "Election.tla"
LOCK = SPEC.with_name("DistLock.tla")

#: The handoff's actions a candidate takes (DistLock.tla's WaitStep).
HANDOFF = ("Wake", "Withdraw")
#: Wait.tla's actions that move nothing of the lease, which DistLock.tla leaves out (a
#: block, and the withdrawal's replies nobody waits for): methods of every section.
NOT_IN_LOCK = {"Block", "WithdrawReply", "WithdrawFail"}
#: The disjuncts of ENext that are not a candidate's, and what they are.
ENVIRONMENT = {
    "RedisRun": "the lock's scripts, their grants writing the leader record",
    "ETick": "time",
    "EKeyLost": "Redis losing the key (and the record)",
    "EnvOther": "the lock's other environment steps",
    "Die": "a leader's process killed",
    "ObserverStep": "leader()'s read (two steps in a broken variant only)",
}


def _body(spec: Path, name: str) -> str:
    source = text(spec)
    starts = [(m.group(1), m.start(), m.end()) for m in DEFINITION.finditer(source)]
    for i, (found, _, end) in enumerate(starts):
        if found == name:
            stop = starts[i + 1][1] if i + 1 < len(starts) else len(source)
            return source[end:stop]
    raise AssertionError(f"{name} is not defined in {spec.name}")


def _candidate_actions() -> list[str]:
    body = _body(SPEC, "CandidateStep")
    assert re.search(r"ClientStep\(c\)\s*\\/\s*WaitStep\(c\)", body), body
    return [*disjuncts(LOCK, "ClientStep"), *disjuncts(LOCK, "WaitStep")]


def test_a_candidate_s_actions_are_the_lock_s_with_the_handoff() -> None:
    spec = _candidate_actions()
    assert len(spec) == len(set(spec)), spec
    assert spec == [*CLIENT_ACTIONS, *HANDOFF]
    assert set(HANDOFF) <= set(WAIT_ACTIONS)


def test_enext_is_the_candidates_and_the_environment() -> None:
    steps = disjuncts(SPEC, "ENext")
    assert steps == ["CandidateStep", *ENVIRONMENT], steps


@pytest.mark.parametrize("action", [*CLIENT_ACTIONS, *HANDOFF])
def test_the_campaign_has_a_method_per_action(action: str) -> None:
    assert callable(getattr(CampaignSection, method_name(action), None)), action


@pytest.mark.parametrize("step", sorted(ENVIRONMENT))
def test_no_environment_step_is_a_method(step: str) -> None:
    assert not hasattr(CampaignSection, method_name(step)), step


def _public(cls: type) -> set[str]:
    lease = {name for name, _ in inspect.getmembers(LeaseClock)}
    return {
        name
        for name, member in inspect.getmembers(cls)
        if not name.startswith("_") and inspect.isroutine(member) and name not in lease
    }


def test_the_campaign_adds_no_action() -> None:
    assert issubclass(CampaignSection, core.Section)
    own = {
        name
        for name, member in vars(CampaignSection).items()
        if not name.startswith("_") and inspect.isroutine(member)
    }
    assert not own, f"CampaignSection methods of its own: {sorted(own)}"
    assert _public(CampaignSection) == _public(core.Section)
    # What a section has beyond a candidate's actions: the helpers, and Wait.tla's steps
    # that move nothing of the lease.
    actions = {method_name(a) for a in (*CLIENT_ACTIONS, *HANDOFF)}
    rest = _public(CampaignSection) - actions - set(NOT_ACTIONS)
    assert rest == {method_name(a) for a in NOT_IN_LOCK}, sorted(rest)


# -- the commands ------------------------------------------------------------------------

TTL = 4_000
EVERY = 1_000


def _campaign(identity: str = "host:42") -> CampaignSection:
    config = SectionConfig(ttl_ms=TTL, retries=0, retry_delay_ms=0.0, renew_every_ms=EVERY,
                           watch=True, cancel_on_loss=False, wait_ms=10**9)
    section = CampaignSection("election:e", "tok", config, client="c", record=True)
    section.identity = identity
    return section


def _sent(step: Step) -> Command:
    assert step.send is not None
    return step.send


def test_every_command_carries_the_campaign_and_the_identity() -> None:
    s = _campaign()
    sent = [_sent(s.acquire(0.0))]
    s.acquire_reply(10.0, -500)  # refused: waits in the queue
    sent.append(_sent(s.acquire(500.0)))
    s.acquire_reply(510.0, 3)
    sent.append(_sent(s.renew_send(float(EVERY) + 500)))
    s.renew_reply(float(EVERY) + 510, True)
    s.body_done(2_000.0)
    sent.append(_sent(s.release(2_000.0)))
    waiter = _campaign("other")
    waiter.acquire(0.0)
    waiter.acquire_reply(1.0, -500)
    sent.append(_sent(waiter.withdraw(2.0)))
    assert [c.op for c in sent] == [Op.ACQUIRE, Op.ACQUIRE, Op.RENEW, Op.RELEASE, Op.WITHDRAW]
    assert all(c.kind is Kind.CAMPAIGN for c in sent), [c.kind for c in sent]
    assert [c.identity for c in sent] == ["host:42"] * 4 + ["other"]


def test_the_acquire_trace_event_names_the_identity() -> None:
    s = _campaign()
    s.acquire(0.0)
    acquires = [e for e in s.take_events() if isinstance(e, Transition) and e.action == "Acquire"]
    assert [e.fields["identity"] for e in acquires] == ["host:42"]


# -- leading(): the spec's Leading --------------------------------------------------------

#: Each conjunct of Leading(c), as the core's state reads it: the section, and deadline_in
#: (``deadline - now`` on the client's clock, floored at 0, as the spec keeps it).
CONJUNCTS: dict[str, Callable[[core.Section, float], bool]] = {
    'phase[c] = "held"': lambda s, d: s.phase is Phase.HELD,
    "~lost[c]": lambda s, d: s.lost is None,
    "deadline_in[c] > 0": lambda s, d: d > 0,
}


def _conjuncts(name: str) -> list[str]:
    body = _body(SPEC, name).strip()
    return [part.strip() for part in body.split("/\\")]


def test_leading_and_acting_are_defined_as_read_here() -> None:
    assert _conjuncts("Leading") == list(CONJUNCTS)
    acting = " ".join(_body(SPEC, "Acting").split())
    assert acting.endswith("ELSE Leading(c)"), acting
    assert 'IF ElectionMutant = "act_past_deadline"' in acting, acting


def spec_leading(s: core.Section, now: float) -> bool:
    deadline_in = max(s.deadline - now, 0.0) if s.phase is Phase.HELD else 0.0
    return all(CONJUNCTS[c](s, deadline_in) for c in _conjuncts("Leading"))


def _held(at: float = 0.0) -> CampaignSection:
    s = _campaign()
    s.acquire(at)
    s.acquire_reply(at + 10.0, 5)
    return s


def _table() -> list[tuple[str, core.Section, float, bool]]:
    rows: list[tuple[str, core.Section, float, bool]] = []
    rows.append(("idle", _campaign(), 0.0, False))
    s = _campaign()
    s.acquire(0.0)
    rows.append(("acquiring", s, 5.0, False))
    s = _campaign()
    s.acquire(0.0)
    s.acquire_reply(5.0, -300)
    rows.append(("waiting", s, 100.0, False))
    s = _held()
    deadline = s.deadline
    rows.append(("held, just granted", s, 10.0, True))
    rows.append(("held, a ms before the deadline", s, deadline - 1, True))
    # A starved loop: no tick has run, so no LeaseTimeout; the clock is read all the same.
    rows.append(("held, at the deadline, no tick run", s, deadline, False))
    rows.append(("held, past the deadline, no tick run", s, deadline + 5_000, False))
    s = _held()
    s.renew_send(float(EVERY))
    s.renew_reply(float(EVERY) + 10, True)
    rows.append(("renewed, past the first deadline", s, deadline + 1, True))
    s = _held()
    s.lease_timeout(s.deadline)
    rows.append(("timed out", s, s.deadline, False))
    s = _held()
    s.renew_send(float(EVERY))
    s.renew_reply(float(EVERY) + 10, False)
    rows.append(("renewal refused", s, float(EVERY) + 10, False))
    s = _held()
    s.body_done(100.0)
    rows.append(("resigning: body done", s, 100.0, False))
    s.release(100.0)
    rows.append(("resigning: release sent", s, 100.0, False))
    s.release_reply(110.0, True)
    rows.append(("resigned", s, 110.0, False))
    s = _campaign()
    s.acquire(0.0)
    s.acquire_reply(5.0, -300)
    s.wake(200.0, True, 6)
    rows.append(("handed the lease", s, 200.0, True))
    return rows


@pytest.mark.parametrize(("what", "section", "now", "expected"), _table(),
                         ids=[row[0] for row in _table()])
def test_leading_is_the_spec_s_leading(what: str, section: core.Section, now: float,
                                       expected: bool) -> None:
    assert spec_leading(section, now) is expected, what
    assert leading(section, now) is expected, what


def test_a_starved_loop_holds_but_does_not_lead() -> None:
    s = _held()
    at = s.deadline + 1
    assert s.holding  # no tick ran: the loss is not known
    assert not leading(s, at)
    assert not spec_leading(s, at)
    assert s.phase is Phase.HELD and s.lost is None
