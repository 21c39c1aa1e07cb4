"""The semaphore's pure machine: a permit is a lock's lease with its own encoding."""

from __future__ import annotations

import re

import pytest

from distlock._core.actions import CLIENT_ACTIONS, method_name
from distlock._core.commands import Kind, Op
from distlock._core.reentrant import ReentrantSection
from distlock._core.section import (
    LOCK_CLAIM,
    PERMIT_CLAIM,
    Outcome,
    Phase,
    Section,
    SectionConfig,
)
from distlock._core.semaphore import SemaphoreSection
from distlock._protocol import (
    S_ACQUIRE,
    S_RELEASE,
    S_RENEW,
    S_SCRIPTS,
    encode,
    permits_released_key,
    queue_keys,
    released_key,
)
from distlock._slots import key_slot
from distlock.errors import LossReason, ValidationError
from distlock.events import Acquired, Transition
from distlock.options import check_limit

TTL = 10_000
LIMIT = 3


def section(watch: bool = True, record: bool = True, retries: int = 0) -> SemaphoreSection:
    config = SectionConfig(
        ttl_ms=TTL, renew_every_ms=TTL // 4 if watch else None, watch=watch, retries=retries
    )
    return SemaphoreSection("sem:k", "tok", config, limit=LIMIT, record=record)


def held(watch: bool = True) -> SemaphoreSection:
    s = section(watch)
    command = s.acquire(0.0).send
    assert command is not None
    s.acquire_reply(1.0, 1)
    assert s.phase is Phase.HELD
    return s


def records(s: SemaphoreSection) -> list[Transition]:
    return [e for e in s.take_events() if isinstance(e, Transition)]


def test_a_permit_takes_exactly_the_lock_s_actions() -> None:
    for action in CLIENT_ACTIONS:
        assert getattr(SemaphoreSection, method_name(action)) is not None
    own = {
        name
        for name, value in vars(SemaphoreSection).items()
        if callable(value) and not name.startswith("_")
    }
    # Every action is the lock's: the permit's reading of a grant is its claim, below.
    assert own == set()


def test_each_primitive_supplies_its_claim_and_neither_patches_the_other_s_grant() -> None:
    assert LOCK_CLAIM.fence(7) == 7 and not LOCK_CLAIM.permit
    assert PERMIT_CLAIM.fence(1) is None and PERMIT_CLAIM.permit
    assert Section("lock:k", "tok", SectionConfig(ttl_ms=TTL)).claim is LOCK_CLAIM
    assert ReentrantSection("re:k", "tok", SectionConfig(ttl_ms=TTL)).claim is LOCK_CLAIM
    assert section().claim is PERMIT_CLAIM
    # The grant, its event, its errors and the abandoned-attempt rule are the lock's
    # section's alone, reading the claim; the semaphore overrides none of them.
    for name in ("acquire_reply", "_granted", "_emit", "_abandoned", "_loss_error",
                 "not_acquired_error", "_init_state"):
        assert name not in vars(SemaphoreSection), name


def grant_event(s: Section, reply: int) -> Acquired:
    s.acquire(0.0)
    s.acquire_reply(1.0, reply)
    assert s.phase is Phase.HELD and s.granted
    [event] = [e for e in s.take_events() if isinstance(e, Acquired)]
    return event


def test_a_grant_keeps_the_lock_s_fence_and_no_permit_s() -> None:
    observed = SectionConfig(ttl_ms=TTL, observed=True)
    lock = Section("lock:k", "tok", observed)
    event = grant_event(lock, 7)
    assert lock.fence == 7 and (event.fence, event.permit) == (7, False)
    permit = SemaphoreSection("sem:k", "tok", observed, limit=LIMIT)
    event = grant_event(permit, 1)
    # The event's fence is the script's 1, marked as a permit's, and the section keeps none.
    assert permit.fence is None and (event.fence, event.permit) == (1, True)


def test_every_command_carries_the_kind_and_the_limit_to_the_s_scripts() -> None:
    s = section(watch=False)
    acquire = s.acquire(0.0).send
    assert acquire is not None
    assert (acquire.kind, acquire.limit, acquire.reentrant) == (Kind.SEMAPHORE, LIMIT, False)
    assert encode(acquire) == (S_ACQUIRE, ["sem:k"], ["tok", TTL, LIMIT])
    s.acquire_reply(1.0, 1)
    extend = s.extend(2.0, 5_000).send
    assert extend is not None
    assert encode(extend) == (S_RENEW, ["sem:k"], ["tok", 5_000])
    s.extend_reply(3.0, True)
    release = s.release(4.0).send
    assert release is not None
    script, keys, args = encode(release)
    queue, places, wake = queue_keys("sem:k", Kind.SEMAPHORE)
    assert script is S_RELEASE
    # The release wakes the first waiter in the same script: the queue's keys ride along.
    assert keys == ["sem:k", permits_released_key("sem:k"), queue, places]
    assert args[0] == "tok" and args[2] == wake
    assert S_SCRIPTS == {
        Op.ACQUIRE: S_ACQUIRE,
        Op.RENEW: S_RENEW,
        Op.EXTEND: S_RENEW,
        Op.RELEASE: S_RELEASE,
    }


def test_the_release_memory_is_in_the_key_s_slot_and_not_the_lock_s_record() -> None:
    memory = permits_released_key("sem:k")
    assert key_slot(memory) == key_slot("sem:k")
    # A lock's release of the same name reads its record as a string: a sorted set there
    # would be a WRONGTYPE error in the lock's script.
    assert not memory.startswith("distlock:released:")
    assert released_key("sem:k", "t").startswith("distlock:released:")


def test_the_background_renewal_uses_the_membership_checked_script() -> None:
    s = held()
    step = s.tick(TTL // 4)
    assert step.send is not None and step.send.op is Op.RENEW
    assert encode(step.send)[0] is S_RENEW


def test_a_grant_is_a_permit_without_a_fence() -> None:
    s = held()
    assert s.granted and s.fence is None and s.holding
    assert s.deadline == pytest.approx(TTL * 0.99)  # from the send time, less drift


def test_no_free_permit_is_not_acquired_or_backs_off() -> None:
    s = section()
    s.acquire(0.0)
    s.acquire_reply(1.0, 0)
    assert (s.phase, s.outcome) == (Phase.DONE, Outcome.NOT_ACQUIRED)
    assert not s.granted
    retrying = section(retries=1)
    retrying.acquire(0.0)
    retrying.acquire_reply(1.0, 0)
    assert retrying.phase is Phase.BACKOFF


def test_the_acquire_record_carries_the_kind_and_the_limit_and_no_fence() -> None:
    s = held()
    acquire, reply = records(s)
    assert acquire.action == "Acquire"
    assert acquire.fields["kind"] == "semaphore" and acquire.fields["limit"] == LIMIT
    assert acquire.fields["key"] == "sem:k" and acquire.fields["ttl_ms"] == TTL
    assert reply.action == "AcquireReply" and reply.fields["granted"] is True
    assert reply.fields["fence"] is None
    s.tick(TTL // 4)
    assert [r.fields["fence"] for r in records(s)] == [None]


def test_a_renewal_answered_0_is_the_loss() -> None:
    s = held()
    s.tick(TTL // 4)
    step = s.renew_reply(TTL // 4 + 1, False)
    assert step.loss is not None and step.loss.reason is LossReason.RENEW_REJECTED
    assert not s.holding


def test_silence_past_the_deadline_is_the_loss() -> None:
    s = held()
    s.tick(TTL // 4)  # a renewal that never answers
    step = s.tick(TTL)
    assert step.loss is not None and step.loss.reason is LossReason.DEADLINE_PASSED


def test_the_completion_check_and_the_release_verdicts() -> None:
    late = held()
    step = late.body_done(TTL)
    assert step.loss is not None and step.loss.reason is LossReason.DEADLINE_AT_COMPLETION

    ok = held()
    ok.body_done(10.0)
    assert ok.release(11.0).send is not None
    ok.release_reply(12.0, True)
    assert ok.outcome is Outcome.OK and ok.release_confirmed is True

    taken = held()
    taken.body_done(10.0)
    taken.release(11.0)
    step = taken.release_reply(12.0, False)
    assert taken.outcome is Outcome.LOST
    assert step.loss is not None and step.loss.reason is LossReason.RELEASE_REJECTED


def test_an_acquire_without_a_reply_is_released_and_fails() -> None:
    s = section()
    s.acquire(0.0)
    s.acquire_fail(1.0)
    release = s.release(2.0).send
    assert release is not None and release.best_effort and release.kind is Kind.SEMAPHORE
    s.release_reply(3.0, False)
    assert s.outcome is Outcome.FAILED


def test_a_lock_section_still_speaks_the_lock_s_scripts() -> None:
    lock = Section("lock:k", "tok", SectionConfig(ttl_ms=TTL))
    command = lock.acquire(0.0).send
    assert command is not None and command.kind is Kind.LOCK and command.limit == 0
    assert encode(command)[0] is not S_ACQUIRE


@pytest.mark.parametrize("bad", [0, -1, 1.0, 2.5, "2", True, False, None, 2**31])
def test_a_limit_is_a_positive_int(bad: object) -> None:
    with pytest.raises(ValidationError, match="limit"):
        check_limit(bad)


def test_good_limits() -> None:
    assert [check_limit(n) for n in (1, 5, 2**31 - 1)] == [1, 5, 2**31 - 1]


def test_expiry_is_judged_by_redis_s_clock_and_without_a_scan() -> None:
    for script in (S_ACQUIRE, S_RENEW, S_RELEASE):
        assert "redis.call('TIME')" in script.source
        assert not re.search(r"\b(SCAN|ZSCAN|KEYS')", script.source)
    # Eviction is a range removal by score: O(log N + evicted).
    assert "ZREMRANGEBYSCORE" in S_ACQUIRE.source
    # No client instant reaches a script: ARGV carries a TTL, never a time.
    s = section(watch=False)
    acquire = s.acquire(123_456.0).send
    assert acquire is not None
    assert 123_456 not in encode(acquire)[2]


def test_a_permit_s_errors_say_it_is_a_permit() -> None:
    s = held()
    s.tick(TTL // 4)
    loss = s.renew_reply(TTL // 4 + 1, False).loss
    assert loss is not None and "permit of semaphore 'sem:k'" in str(loss)
    assert "limit" in str(loss) and loss.key == "sem:k"
    refused = section()
    refused.acquire(0.0)
    refused.acquire_reply(1.0, 0)
    error = refused.not_acquired_error()
    assert "no permit of semaphore 'sem:k' is free" in str(error) and error.attempts == 1
