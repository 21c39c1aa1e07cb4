"""The pure core, driven by hand: every decision is visible without a network or a clock."""

from __future__ import annotations

import asyncio

import pytest

from distlock._core.actions import CLIENT_ACTIONS, method_name
from distlock._core.group import Group
from distlock._core.lease import LeaseClock
from distlock._core.section import NOTHING, Op, Outcome, Phase, SectionConfig
from distlock.errors import LockLeaseLostError, LossReason, ProtocolError, UsageError
from tests.core_helpers import TracedSection as Section
from tests.core_helpers import op_of

TTL = 1000


def section(**config: object) -> Section:
    cfg: dict[str, object] = {"ttl_ms": TTL, "renew_every_ms": 250, "watch": True}
    cfg.update(config)
    return Section("lock:k", "t" * 32, SectionConfig(**cfg))  # type: ignore[arg-type]


def held(now: float = 0.0, **config: object) -> Section:
    s = section(**config)
    assert op_of(s.acquire(now)) is Op.ACQUIRE
    s.acquire_reply(now + 5, 7)
    assert s.phase is Phase.HELD
    return s


@pytest.mark.parametrize(
    "bits", [0, 1, 0xABC, 2**127 + 5, 2**128 - 1, 0x0F1E2D3C4B5A69788796A5B4C3D2E1F0]
)
def test_a_token_goes_on_the_wire_as_32_lowercase_hex_digits(bits: int) -> None:
    # Kept as an int; every command, trace and wake-list name carries these digits.
    s = Section("lock:k", bits, SectionConfig(ttl_ms=TTL))  # type: ignore[arg-type]
    assert s.token == format(bits, "032x")
    assert len(s.token) == 32 and s.token == s.token.lower()
    command = s.acquire(0.0).send
    assert command is not None and command.token == s.token  # what the acquire sends


def test_every_client_action_is_a_method() -> None:
    for action in CLIENT_ACTIONS:
        assert callable(getattr(Section, method_name(action))), action


def test_lease_runs_from_the_send_time_not_the_reply() -> None:
    s = section(drift_factor=0.0)
    s.acquire(100.0)
    s.acquire_reply(400.0, 1)  # a slow reply must not buy extra lease
    assert s.deadline == 100.0 + TTL


def test_drift_allowance_shortens_the_trusted_lease() -> None:
    s = section(drift_factor=0.01)
    s.acquire(0.0)
    s.acquire_reply(1.0, 1)
    assert s.deadline == pytest.approx(TTL * 0.99)


def test_tick_renews_when_due_then_waits_for_the_reply() -> None:
    s = held()
    assert s.wake_at == 250.0
    assert s.tick(100.0) is NOTHING
    assert op_of(s.tick(250.0)) is Op.RENEW
    assert s.renew_in_flight
    # One renewal in flight at a time: the next due tick does not send another.
    assert s.tick(600.0) is NOTHING
    assert s.wake_at == s.deadline


def test_renewals_due_close_together_wake_in_the_same_tick() -> None:
    """Renewal wake-ups are rounded up to a step of the heartbeat (250 / 64 here), so
    sections held a few milliseconds apart renew in one tick, and a driver can send their
    renewals in one round trip; the deadline is never rounded."""
    early, late = held(1.0), held(3.0)
    assert early.wake_at == late.wake_at == 253.90625
    assert late.tick(253.90625).send is not None  # due by then: the core decides
    assert held(0.0).wake_at == 250.0  # already on the grid: not moved
    s = held(0.0, drift_factor=0.0)
    s.tick(250.0)
    assert s.wake_at == s.deadline == 1000.0  # the deadline watch is exact


def test_successful_renewal_moves_deadline_from_its_send_time() -> None:
    s = held(drift_factor=0.0)
    s.tick(250.0)
    s.renew_reply(900.0, True)
    assert s.deadline == 250.0 + TTL


def test_rejected_renewal_is_an_immediate_loss() -> None:
    s = held()
    s.tick(250.0)
    step = s.renew_reply(260.0, False)
    assert isinstance(step.loss, LockLeaseLostError)
    assert step.loss.reason is LossReason.RENEW_REJECTED
    assert s.lost is step.loss
    assert s.wake_at is None


def test_failed_round_trips_are_not_a_loss_until_the_deadline() -> None:
    s = held(drift_factor=0.0)
    for t in (250.0, 500.0, 750.0):
        assert op_of(s.tick(t)) is Op.RENEW
        assert s.renew_fail(t + 1) is NOTHING
    assert s.lost is None and s.renew_failures == 3
    step = s.tick(1000.0)
    assert step.loss is not None and step.loss.reason is LossReason.DEADLINE_PASSED


def test_hung_renewal_is_caught_by_the_deadline() -> None:
    s = held(drift_factor=0.0)
    s.tick(250.0)  # sent, never answered
    assert s.wake_at == 1000.0
    step = s.tick(1000.0)
    assert step.loss is not None
    # The late reply, if it ever comes, cannot resurrect the lease.
    s.renew_reply(1500.0, True)
    assert s.lost is step.loss


def test_completion_check_catches_a_starved_timer() -> None:
    s = held(drift_factor=0.0)
    # No tick ever ran (the body held the event loop); it finishes past the deadline.
    step = s.body_done(1200.0)
    assert step.loss is not None and step.loss.reason is LossReason.DEADLINE_AT_COMPLETION
    assert not step.cancel_body
    assert op_of(s.release(1201.0)) is Op.RELEASE
    s.release_reply(1202.0, True)  # the key was still there: still not a success
    assert s.outcome is Outcome.LOST
    assert Group([s]).verdict(None) is s.lost


def test_only_a_confirmed_release_is_success() -> None:
    s = held()
    s.body_done(100.0)
    s.release(100.0)
    s.release_reply(101.0, True)
    assert s.outcome is Outcome.OK
    assert Group([s]).verdict(None) is None

    s = held()
    s.body_done(100.0)
    s.release(100.0)
    step = s.release_reply(101.0, False)
    assert s.outcome is Outcome.LOST
    assert step.loss is not None and step.loss.reason is LossReason.RELEASE_REJECTED

    s = held()
    s.body_done(100.0)
    s.release(100.0)
    s.release_fail(101.0)
    assert s.outcome is Outcome.LOST
    assert s.lost is not None and s.lost.reason is LossReason.RELEASE_UNANSWERED


def test_renewal_reply_after_body_done_is_ignored() -> None:
    s = held()
    s.tick(250.0)
    s.body_done(260.0)
    assert s.renew_reply(270.0, False) is NOTHING
    s.release(271.0)
    s.release_reply(272.0, True)
    assert s.outcome is Outcome.OK


def test_retries_then_not_acquired() -> None:
    s = section(retries=2, retry_delay_ms=50.0)
    for attempt in range(3):
        s.acquire(attempt * 100.0)
        s.acquire_reply(attempt * 100.0 + 1, 0)
    assert s.phase is Phase.DONE and s.outcome is Outcome.NOT_ACQUIRED
    assert s.attempts == 3
    with pytest.raises(ProtocolError):
        s.acquire(1000.0)


def test_backoff_waits_for_the_retry_delay() -> None:
    s = section(retries=1, retry_delay_ms=50.0)
    s.acquire(0.0)
    s.acquire_reply(1.0, 0)
    assert s.phase is Phase.BACKOFF and s.retry_at == 51.0
    assert s.wake_at is None  # the flow sleeps; no timer is armed for a backoff
    with pytest.raises(ProtocolError):
        s.acquire(20.0)
    s.acquire(51.0)


def test_failed_acquire_releases_with_our_token_and_fails() -> None:
    s = section()
    s.acquire(0.0)
    s.acquire_fail(3.0)
    assert s.phase is Phase.ABANDONED
    assert op_of(s.release(4.0)) is Op.RELEASE
    s.release_reply(5.0, True)
    assert s.outcome is Outcome.FAILED


def test_manual_handle_has_no_timer_and_signals_only_from_extend() -> None:
    s = held(watch=False, renew_every_ms=None)
    assert s.wake_at is None
    assert s.tick(5000.0) is NOTHING
    assert op_of(s.extend(10.0, 2000)) is Op.EXTEND
    step = s.extend_reply(11.0, False)
    assert step.loss is not None and step.loss.reason is LossReason.EXTEND_REJECTED
    s2 = held(watch=False, renew_every_ms=None)
    s2.release(1.0)
    assert s2.release_reply(2.0, False) is NOTHING  # release answers with a bool instead


def test_manual_extend_uses_its_own_ttl() -> None:
    s = held(watch=False, renew_every_ms=None, drift_factor=0.0)
    s.extend(100.0, 5000)
    s.extend_reply(150.0, True)
    assert s.deadline == 5100.0
    assert op_of(s.extend(200.0, 10)) is Op.EXTEND
    assert s.extend(200.0, 10) is NOTHING  # one extend in flight per handle


def test_extend_after_release_sends_nothing() -> None:
    s = held(watch=False, renew_every_ms=None)
    s.release(1.0)
    s.release_reply(2.0, True)
    assert s.extend(3.0, TTL) is NOTHING
    assert s.release(3.0) is NOTHING


def test_extend_under_run_or_hold_is_a_usage_error() -> None:
    # The heartbeat owns the TTL there; the spec has no Extend in that mode either.
    s = held()
    with pytest.raises(UsageError, match="renewed for you"):
        s.extend(3.0, TTL)
    assert not s.extend_in_flight and s.holding


def test_loss_cancels_a_running_body_only_when_asked() -> None:
    s = held(cancel_on_loss=True)
    s.tick(250.0)
    assert s.renew_reply(251.0, False).cancel_body
    s = held(cancel_on_loss=False)
    s.tick(250.0)
    assert not s.renew_reply(251.0, False).cancel_body


def test_verdicts() -> None:
    s = held(cancel_on_loss=True)
    s.tick(250.0)
    s.renew_reply(251.0, False)
    s.body_done(300.0)
    s.release(300.0)
    s.release_reply(301.0, False)
    body = ValueError("boom")
    assert Group([s]).verdict(body) is s.lost  # the loss is never hidden behind another error
    assert Group([s]).verdict(s.lost) is s.lost  # the body re-raised the abort reason: unchanged
    assert Group([s]).verdict(asyncio.CancelledError(), cancelled=True) is s.lost  # our cancel

    s = held(cancel_on_loss=False)  # lost, but the body was never cancelled for it
    s.tick(250.0)
    s.renew_reply(251.0, False)
    s.body_done(300.0)
    s.release(300.0)
    s.release_reply(301.0, False)
    outside = asyncio.CancelledError()
    assert Group([s]).verdict(outside, cancelled=True) is outside  # the caller's own cancel
    assert Group([s]).verdict(outside) is s.lost  # not said to be a cancellation: a body error

    s = held()
    s.body_done(1.0)
    s.release(1.0)
    s.release_reply(2.0, True)
    assert Group([s]).verdict(body) is body


def test_trace_records_actions_in_order() -> None:
    events: list[dict[str, object]] = []
    s = Section("lock:k", "t", SectionConfig(ttl_ms=TTL, renew_every_ms=250, watch=True),
                trace=events.append)
    s.acquire(0.0)
    s.acquire_reply(1.0, 3)
    s.tick(250.0)
    s.renew_reply(260.0, True)
    s.body_done(300.0)
    s.release(300.0)
    s.release_reply(301.0, True)
    assert [e["action"] for e in events] == [
        "Acquire", "AcquireReply", "RenewSend", "RenewReply", "BodyDone", "Release",
        "ReleaseReply",
    ]


def test_a_grant_that_arrives_after_its_lease_is_a_loss_at_once() -> None:
    s = section(drift_factor=0.0)
    s.acquire(0.0)
    step = s.acquire_reply(float(TTL), 5)  # the reply took the whole lease
    assert step.loss is not None
    assert step.loss.reason is LossReason.GRANTED_TOO_LATE
    assert not s.holding
    assert op_of(s.release(TTL + 1.0)) is Op.RELEASE  # the key is cleaned up, no body runs
    s.release_reply(TTL + 2.0, True)
    assert s.outcome is Outcome.LOST


def test_a_shorter_extend_shortens_the_trusted_lease() -> None:
    # PEXPIRE replaces the TTL: the key may now die at 10 + 20, long before 1000.
    s = held(watch=False, renew_every_ms=None, drift_factor=0.0)
    s.extend(10.0, 20)
    assert s.deadline == 30.0
    s.extend_reply(11.0, True)
    assert s.deadline == 30.0


def test_a_later_write_with_a_shorter_ttl_replaces_a_longer_one() -> None:
    lease = LeaseClock(SectionConfig(TTL, renew_every_ms=250, watch=True, drift_factor=0.0))
    lease.lease_confirm(lease.lease_send(10.0, 5000))
    assert lease.deadline == 5010.0
    renewal = lease.lease_send(250.0, TTL)  # PEXPIRE replaces the longer TTL as it runs
    assert lease.deadline == 250.0 + TTL
    lease.lease_confirm(renewal)
    assert lease.deadline == 250.0 + TTL


def test_concurrent_writes_count_the_shorter_ttl() -> None:
    lease = LeaseClock(SectionConfig(TTL, renew_every_ms=250, watch=True, drift_factor=0.0))
    lease.lease_grant(0.0, TTL)
    short = lease.lease_send(250.0, TTL)
    long = lease.lease_send(300.0, 2000)  # may run before or after the other
    lease.lease_confirm(long)
    assert lease.deadline == 300.0 + TTL  # the shorter one may run last
    lease.lease_confirm(short)
    assert lease.deadline == 300.0 + TTL


def test_a_failed_shorter_extend_bounds_later_confirmations() -> None:
    s = held(watch=False, renew_every_ms=None, drift_factor=0.0)
    s.extend(10.0, 50)
    s.extend_fail(11.0)  # may still run, at any later time
    s.extend(100.0, TTL)
    s.extend_reply(101.0, True)
    # If the failed one runs last, it runs after 100 with TTL 50: the key lives to 150.
    assert s.deadline == 150.0
