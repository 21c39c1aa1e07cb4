"""spec/Wait.tla and the core speak one vocabulary for waiting, and take the same paths.

The names: the waiter actions of ``Wait.tla`` (the disjuncts of ``ClientStep``) are the
lock's actions and ``WAIT_ACTIONS``, each a method of ``Section``; the environment's
actions (``EnvStep``) are no method of it.  The paths: a few behaviours of the spec,
action by action, replayed on a ``Section``, which must accept each action where the
spec takes it, refuse the waiting ones where the spec cannot take them, and end in the
phase the spec ends in.  The queue's scripts themselves are checked against Redis by the
waiting tests; here only the client's side is compared.

In the spec a release hands K to the first waiter and pushes it the grant: ``Wake`` on
an element goes from ``blocked`` to ``held``.  The core's ``wake(now, woken, fence)``
says so with ``fence`` > 0 (K handed, the body runs); 0 is a plain end of the block.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from distlock._core.actions import CLIENT_ACTIONS, WAIT_ACTIONS, method_name
from distlock._core.commands import Op, Step
from distlock._core.lease import lease_until
from distlock._core.section import Outcome, Phase, Section, SectionConfig
from distlock._core.waiting import HANDED_TTL_MS, LONGEST_BLOCK_MS
from distlock.errors import ProtocolError

SPEC = Path(__file__).resolve().parent.parent / "spec" / "Wait.tla"

_COMMENT = re.compile(r"\(\*.*?\*\)", re.S)
_DEFINITION = re.compile(r"^(\w+)(?:\([^)]*\))?\s*==", re.M)

#: Actions of the broken variants only (a subscription in a separate step, a release in
#: two commands): the real protocol has none, so the core has no method for them.
MUTANT_ONLY = {"EnqueueReply", "RedisEnqueue", "RedisReleaseDel"}


def _text() -> str:
    text = _COMMENT.sub("", SPEC.read_text())
    return "\n".join(line.split("\\*")[0] for line in text.splitlines())


def _actions(name: str) -> list[str]:
    """The operators named by the disjuncts of definition ``name``, one per line."""
    text = _text()
    starts = [(m.group(1), m.end()) for m in _DEFINITION.finditer(text)]
    for i, (defined, end) in enumerate(starts):
        if defined == name:
            stop = starts[i + 1][1] if i + 1 < len(starts) else len(text)
            body = text[end:stop]
            return re.findall(r"^\s*\\/\s*([A-Z]\w*)", body, re.M)
    raise AssertionError(f"{name} is not defined in {SPEC.name}")


def test_spec_waiter_actions_are_the_lock_s_and_the_waiting_ones() -> None:
    spec = _actions("ClientStep")
    # the same list, per client, for the liveness runs' fairness
    assert _actions("ClientActs") == spec
    assert len(spec) == len(set(spec)), f"an action twice in ClientStep: {spec}"
    missing = set(WAIT_ACTIONS) - set(spec)
    assert not missing, f"waiting actions of the core that Wait.tla lacks: {sorted(missing)}"
    strangers = set(spec) - set(WAIT_ACTIONS) - set(CLIENT_ACTIONS) - MUTANT_ONLY
    assert not strangers, f"Wait.tla waiter actions the core does not know: {sorted(strangers)}"


def test_every_spec_action_is_defined() -> None:
    defined = {m.group(1) for m in _DEFINITION.finditer(_text())}
    named = set(_actions("ClientStep")) | set(_actions("EnvStep"))
    assert named and named <= defined, sorted(named - defined)


@pytest.mark.parametrize("action", sorted(set(_actions("ClientStep")) - MUTANT_ONLY))
def test_core_has_a_method_per_waiter_action(action: str) -> None:
    assert callable(getattr(Section, method_name(action), None)), (
        f"Section has no {method_name(action)}() for Wait.tla's {action}"
    )


def test_environment_actions_are_not_the_client_s() -> None:
    env = set(_actions("EnvStep"))
    assert {"Tick", "RedisAttempt", "RedisRelease", "RedisLeave"} <= env
    # Section.tick is the scheduler asking which timer is due, not an action (as for
    # DistLock.tla's Tick).
    clash = {a for a in env - {"Tick"} if hasattr(Section, method_name(a))}
    assert not clash, f"environment actions that are Section methods: {sorted(clash)}"
    assert not env & (set(WAIT_ACTIONS) | set(CLIENT_ACTIONS))


def test_mutant_only_actions_are_guarded_by_their_variant() -> None:
    """The broken variants' extra steps are unreachable in the real protocol: the phase
    they need (``enqueuing``) and the request they run (``release_del``) are made only
    under ``Mutant``."""
    text = _text()
    enters = re.findall(r'EXCEPT !\[c\] = "enqueuing"\]', text)
    assert len(enters) == 1, enters
    assert re.search(r'Mutant = "subscribe_after_attempt"\s*THEN[^\n]*"enqueuing"', text)
    sends = re.findall(r'Msg\("release_del"', text)
    assert len(sends) == 1, sends
    assert re.search(r'Mutant = "notify_before_delete"(?:.|\n){0,400}Msg\("release_del"', text)


# -- the same paths: spec behaviours replayed on the core ---------------------------------

TTL = 10_000
WAIT = 1_000


def _section(wait_ms: int = WAIT) -> Section:
    return Section("k", "tok", SectionConfig(ttl_ms=TTL, wait_ms=wait_ms))


def _phase(s: Section) -> Phase:
    """Read afresh: mypy would keep the phase narrowed from an earlier assert."""
    return s.phase


def _sent(step: Step) -> tuple[Op, int | None]:
    assert step.send is not None
    return step.send.op, step.send.queue_ms


def test_spec_wake_on_an_element_enters_the_body() -> None:
    """Wait.tla's Wake has two ends: an element (K handed: `held`, the body entered) and
    the block's time up (`woken`: the next attempt follows)."""
    text = _text()
    start = text.index("Wake(c) ==")
    body = text[start:text.index("==", start + len("Wake(c) =="))]
    assert re.search(r'"element"(?:.|\n)*"held"(?:.|\n)*EnterBody\(c\)', body), body
    assert '"woken"' in body


def test_handed_waiter_holds_the_key() -> None:
    """Acquire, AcquireReply (refused: block next), Block, Wake (an element: K was handed
    to us, fence 7): the spec's path from `idle` to `held` through a handoff, with no
    attempt after the wake-up.  The lease is anchored at the send of the last attempt,
    which came before the handoff."""
    s = _section()
    assert _sent(s.acquire(0.0)) == (Op.ACQUIRE, WAIT)  # the wait left, the place's life
    s.acquire_reply(0.0, -5_000)  # refused: may block up to 5 s (K's PTTL)
    assert _phase(s) is Phase.WAITING
    assert s.block_until == WAIT  # never past the deadline (BlockFor)
    s.block(0.0)
    step = s.wake(300.0, True, 7)
    assert step.send is None  # no further attempt
    assert _phase(s) is Phase.HELD and s.fence == 7
    assert not s.queued  # the release took us out of the queue
    # From the attempt sent at 0, not the wake at 300, for the short TTL a key is handed
    # with (renewed at once by a section that renews).
    assert s.deadline == lease_until(0.0, min(TTL, HANDED_TTL_MS), s.config.drift_factor)


def test_a_waiter_whose_block_ended_before_the_grant_gets_it_by_its_next_attempt() -> None:
    """Wake (time up: the grant is still in the wake list, or lost with the connection),
    Acquire, AcquireReply (granted): the attempt finds K holding our token."""
    s = _section()
    s.acquire(0.0)
    s.acquire_reply(0.0, -300)
    s.block(0.0)
    s.wake(300.0, False, 0)
    assert _phase(s) is Phase.WAITING
    op, queue_ms = _sent(s.acquire(300.0))
    assert (op, queue_ms) == (Op.ACQUIRE, WAIT - 300)  # the next attempt: the wait left
    s.acquire_reply(310.0, 7)
    assert _phase(s) is Phase.HELD and s.fence == 7
    # Anchored at this attempt's send.
    assert s.deadline == lease_until(300.0, TTL, s.config.drift_factor)


def test_the_last_attempt_is_granted_a_key_handed_to_us() -> None:
    """Past the deadline the last attempt (life 0) is granted if K holds our token: the
    spec grants it before every other case."""
    s = _section()
    s.acquire(0.0)
    s.acquire_reply(0.0, -5_000)
    s.block(0.0)
    s.wake(float(WAIT), False, 0)
    assert _sent(s.acquire(float(WAIT))) == (Op.ACQUIRE, 0)
    s.acquire_reply(float(WAIT), 7)
    assert _phase(s) is Phase.HELD and s.fence == 7


def test_the_attempt_after_the_deadline_is_the_last() -> None:
    """Past the deadline the next attempt carries no wait (life 0): refused, the section
    is done, not acquired, with nothing to withdraw (the script left the queue)."""
    s = _section()
    s.acquire(0.0)
    s.acquire_reply(0.0, -5_000)
    s.block(0.0)
    s.wake(float(WAIT), False, 0)
    assert _sent(s.acquire(float(WAIT))) == (Op.ACQUIRE, 0)
    s.acquire_reply(float(WAIT), 0)
    assert _phase(s) is Phase.DONE and s.outcome is Outcome.NOT_ACQUIRED
    assert not s.queued
    assert s.withdraw(float(WAIT)).send is None


def test_a_refused_waiter_blocks_no_longer_than_the_re_check() -> None:
    s = _section(wait_ms=60_000)
    s.acquire(0.0)
    s.acquire_reply(0.0, -700)
    assert s.block_until == 700
    s.acquire(700.0)
    s.acquire_reply(700.0, -2_500)  # a re-check past the longest block is cut to it
    assert s.block_until == 700 + LONGEST_BLOCK_MS


def test_withdraw_from_a_block_sends_the_leave_and_ends_the_wait() -> None:
    s = _section()
    s.acquire(0.0)
    s.acquire_reply(0.0, -5_000)
    s.block(0.0)
    op, _ = _sent(s.withdraw(10.0))
    assert op is Op.WITHDRAW
    assert _phase(s) is Phase.DONE and s.outcome is Outcome.NOT_ACQUIRED
    s.withdraw_reply(20.0)
    assert _phase(s) is Phase.DONE


def test_a_failed_attempt_withdraws_since_it_may_have_queued_us() -> None:
    """AcquireFail then Withdraw: the spec's waiter sends the leave after an error."""
    s = _section()
    s.acquire(0.0)
    s.acquire_fail(5.0)
    assert s.queued
    op, _ = _sent(s.withdraw(5.0))
    assert op is Op.WITHDRAW
    s.withdraw_fail(6.0)
    assert not s.queued


def test_a_fail_fast_caller_never_blocks() -> None:
    s = _section(wait_ms=0)
    assert _sent(s.acquire(0.0)) == (Op.ACQUIRE, None)
    s.acquire_reply(0.0, 0)
    assert _phase(s) is Phase.DONE and s.outcome is Outcome.NOT_ACQUIRED
    with pytest.raises(ProtocolError):
        s.block(0.0)


@pytest.mark.parametrize("action", ["block", "wake"])
def test_block_and_wake_only_after_a_refusal(action: str) -> None:
    """Wait.tla takes Block only in `refused` and Wake only in `blocked`, both the
    core's WAITING; the core refuses them elsewhere (idle, acquiring, held)."""
    s = _section()
    calls = {"block": lambda: s.block(0.0), "wake": lambda: s.wake(0.0, True, 7)}
    with pytest.raises(ProtocolError):
        calls[action]()
    s.acquire(0.0)
    with pytest.raises(ProtocolError):
        calls[action]()
    s.acquire_reply(0.0, 3)
    with pytest.raises(ProtocolError):
        calls[action]()
