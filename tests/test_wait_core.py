"""Waiting without Redis: the options, the core's decisions and the flow's choreography.

The core decides when a waiting caller blocks, until when, and when it gives up; the
flow turns that into attempts, blocks and withdrawals.  A fake plays the queue scripts'
semantics (one key, one queue) so that every exception at every suspension point can be
thrown into a waiting acquisition and checked to leave no place and no key behind.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis

import distlock
import distlock.asyncio
from distlock import _flows as flows
from distlock._base import HandleBase, block_seconds
from distlock._clock import now_ms
from distlock._core.commands import Command, Op, Step
from distlock._core.group import Group
from distlock._core.section import Outcome, Phase, Section, SectionConfig
from distlock._core.waiting import HANDED_TTL_MS, LONGEST_BLOCK_MS
from distlock._flows import Block, Flow, Sleep
from distlock._protocol import W_ACQUIRE, decode, encode, queue_keys, wake_key
from distlock.errors import LockNotAcquiredError, ValidationError
from distlock.events import Event, Transition
from distlock.options import MAX_MS

# -- options ---------------------------------------------------------------------------


def _no_client() -> redis.Redis:
    raise AssertionError("a bad option must be refused before any client is made")


@pytest.mark.parametrize("bad", [True, False, 1.5, "100", -1, MAX_MS + 1, None, 10.0])
def test_wait_ms_must_be_an_int_of_milliseconds(bad: object) -> None:
    with pytest.raises(ValidationError, match="wait_ms"):
        distlock.Lock(_no_client, wait_ms=bad)  # type: ignore[arg-type]
    locks = distlock.Lock(_no_client)
    for call in (
        lambda: locks.acquire("k", wait_ms=bad),  # type: ignore[arg-type]
        lambda: locks.hold("k", wait_ms=bad),  # type: ignore[arg-type]
        lambda: locks.run("k", lambda h: None, wait_ms=bad),  # type: ignore[arg-type]
        lambda: locks.hold_many(["a", "b"], wait_ms=bad),  # type: ignore[arg-type]
        lambda: locks.run_many(["a", "b"], lambda g: None, wait_ms=bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(ValidationError, match="wait_ms"):
            call()
    with pytest.raises(ValidationError, match="wait_ms"):
        distlock.ReentrantLock(_no_client).acquire("k", wait_ms=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [True, 1.5, "100", -1, MAX_MS + 1])
def test_asyncio_calls_refuse_a_bad_wait_before_any_command(bad: object) -> None:
    async def main() -> None:
        locks = distlock.asyncio.Lock(_no_client)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="wait_ms"):
            await locks.acquire("k", wait_ms=bad)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="wait_ms"):
            locks.hold("k", wait_ms=bad)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="wait_ms"):
            locks.hold_many(["a", "b"], wait_ms=bad)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="wait_ms and retries"):
            await locks.acquire("k", wait_ms=10, retries=1)
        reentrant = distlock.asyncio.ReentrantLock(_no_client)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="wait_ms"):
            await reentrant.acquire("k", wait_ms=bad)  # type: ignore[arg-type]

    asyncio.run(main())


def test_wait_ms_bounds_are_accepted() -> None:
    assert distlock.Lock(_no_client, wait_ms=0).defaults.wait_ms == 0
    assert distlock.Lock(_no_client, wait_ms=MAX_MS).defaults.wait_ms == MAX_MS
    assert distlock.asyncio.Lock(_no_client, wait_ms=5).defaults.wait_ms == 5  # type: ignore[arg-type]


def test_wait_and_retries_at_one_level_are_refused() -> None:
    with pytest.raises(ValidationError, match="wait_ms and retries"):
        distlock.Lock(_no_client, wait_ms=100, retries=2)
    with pytest.raises(ValidationError, match="wait_ms and retries"):
        distlock.asyncio.Lock(_no_client, wait_ms=100, retries=2)  # type: ignore[arg-type]
    locks = distlock.Lock(_no_client)
    with pytest.raises(ValidationError, match="wait_ms and retries"):
        locks.acquire("k", wait_ms=100, retries=2)
    with pytest.raises(ValidationError, match="wait_ms and retries"):
        locks.hold("k", wait_ms=100, retries=2)
    with pytest.raises(ValidationError, match="wait_ms and retries"):
        locks.hold_many(["a", "b"], wait_ms=100, retries=2)
    # Zero is "not asked for": either may be 0 next to the other.
    assert distlock.Lock(_no_client, wait_ms=0, retries=2).defaults.retries == 2
    assert distlock.Lock(_no_client, wait_ms=10, retries=0).defaults.wait_ms == 10


def test_a_call_overrides_the_lock_and_turns_the_other_way_off() -> None:
    from distlock.options import ACQUIRE_KEYS

    retrying = distlock.Lock(_no_client, retries=3)
    opts = retrying.defaults.override(ACQUIRE_KEYS, {"wait_ms": 500})
    assert (opts.wait_ms, opts.retries) == (500, 0)
    waiting = distlock.Lock(_no_client, wait_ms=500)
    opts = waiting.defaults.override(ACQUIRE_KEYS, {"retries": 2})
    assert (opts.wait_ms, opts.retries) == (0, 2)
    opts = waiting.defaults.override(ACQUIRE_KEYS, {"wait_ms": 0})
    assert (opts.wait_ms, opts.retries) == (0, 0)
    opts = waiting.defaults.override(ACQUIRE_KEYS, {"ttl_ms": 1000})
    assert opts.wait_ms == 500


# -- the core's decisions ----------------------------------------------------------------


def section(wait_ms: int = 1_000, key: str = "k", token: str = "tok") -> Section:
    return Section(key, token, SectionConfig(ttl_ms=10_000, wait_ms=wait_ms))


def phase(s: Section) -> Phase:
    """Read afresh: mypy would keep the phase narrowed from an earlier assert."""
    return s.phase


def sent(step: Step) -> Command:
    assert step.send is not None
    return step.send


def test_fail_fast_sends_the_plain_acquire() -> None:
    s = section(wait_ms=0)
    command = sent(s.acquire(0.0))
    assert command.queue_ms is None and s.waiting is None
    script, keys, _ = encode(command)
    assert script is encode(Command(Op.ACQUIRE, "k", "t", 1))[0] and len(keys) == 2
    s.acquire_reply(1.0, 0)
    assert s.outcome is Outcome.NOT_ACQUIRED


def test_a_refusal_blocks_until_the_holder_could_be_gone() -> None:
    s = section(wait_ms=1_000)
    assert sent(s.acquire(100.0)).queue_ms == 1_000
    s.acquire_reply(110.0, -300)  # the holder's TTL: 300 ms more at most
    assert s.phase is Phase.WAITING and s.queued
    assert s.block_until == 410.0
    s.block(110.0)
    s.wake(200.0, True)
    assert sent(s.acquire(200.0)).queue_ms == 900  # the deadline does not move
    s.acquire_reply(210.0, 7)
    assert phase(s) is Phase.HELD and s.fence == 7 and not s.queued


def test_a_key_handed_over_is_held_with_the_lease_counted_from_the_last_attempt() -> None:
    s = section(wait_ms=60_000)
    sent(s.acquire(100.0))
    s.acquire_reply(110.0, -3_000)
    s.block(110.0)
    assert s.wake(2_000.0, True, 9).loss is None
    assert phase(s) is Phase.HELD and s.fence == 9 and not s.queued
    # Redis set the TTL at the release, after the attempt went out at 100: the lease on
    # our clock counts from there, as for a grant whose reply came late.
    assert s.confirmed_at == 100.0 and s.deadline <= 100.0 + 10_000


def test_a_block_lasts_half_a_ttl_at_most_so_a_key_handed_over_has_half_its_lease() -> None:
    s = Section("k", "tok", SectionConfig(ttl_ms=1_000, wait_ms=60_000))
    sent(s.acquire(100.0))
    s.acquire_reply(110.0, -60_000)  # the holder's TTL: a minute
    assert s.block_until == 110.0 + 500


def test_a_block_lasts_a_second_at_most_whatever_the_ttl() -> None:
    # A waiter looks again (and renews its place) at least once a second, so that a
    # waiter that died leaves a place that ends soon, and no block nears a socket timeout.
    s = section(wait_ms=60_000)  # a TTL of 10 s
    sent(s.acquire(100.0))
    s.acquire_reply(110.0, -60_000)
    assert s.block_until == 110.0 + LONGEST_BLOCK_MS


def renewed_section(ttl_ms: int = 30_000) -> Section:
    config = SectionConfig(ttl_ms=ttl_ms, wait_ms=60_000, renew_every_ms=ttl_ms // 3, watch=True)
    return Section("k", "tok", config)


def test_only_a_renewed_waiter_asks_for_a_handed_key_and_for_a_short_ttl() -> None:
    assert sent(section().acquire(0.0)).hand_ms == 0  # not renewed: woken instead
    assert sent(renewed_section().acquire(0.0)).hand_ms == HANDED_TTL_MS
    assert sent(renewed_section(ttl_ms=1_000).acquire(0.0)).hand_ms == 1_000


def test_a_key_handed_over_is_leased_for_the_short_ttl_and_renewed_at_once() -> None:
    s = renewed_section()
    sent(s.acquire(100.0))
    s.acquire_reply(110.0, -30_000)
    s.block(110.0)
    assert s.wake(600.0, True, 9).loss is None
    assert phase(s) is Phase.HELD and s.fence == 9
    # Redis gave the key HANDED_TTL_MS at the release, after the attempt sent at 100.
    assert 100.0 < s.deadline <= 100.0 + HANDED_TTL_MS
    assert s.renew_due(600.0)
    renewal = sent(s.tick(600.0))
    assert renewal.op is Op.RENEW and renewal.ttl_ms == 30_000


def test_a_key_granted_by_an_attempt_keeps_the_whole_ttl_and_the_usual_schedule() -> None:
    s = renewed_section()
    sent(s.acquire(100.0))
    s.acquire_reply(110.0, 9)
    assert s.deadline > 100.0 + HANDED_TTL_MS and not s.renew_due(110.0)


def test_a_key_handed_over_after_its_lease_ran_out_is_lost_and_no_body_starts() -> None:
    s = section(wait_ms=60_000)
    sent(s.acquire(100.0))
    s.acquire_reply(110.0, -3_000)
    s.block(110.0)
    step = s.wake(100.0 + 10_000, True, 9)  # the BLPOP reply took the whole lease
    assert step.loss is not None and not step.cancel_body


def test_a_block_never_outlasts_the_deadline_and_the_last_attempt_leaves() -> None:
    s = section(wait_ms=500)
    s.acquire(0.0)
    s.acquire_reply(5.0, -30_000)
    assert s.block_until == 500.0
    s.block(5.0)
    s.wake(500.0, False)
    last = sent(s.acquire(500.0))
    assert last.queue_ms == 0  # the script leaves the queue if this one is refused too
    s.acquire_reply(505.0, 0)
    assert s.phase is Phase.DONE and s.outcome is Outcome.NOT_ACQUIRED and not s.queued
    assert s.withdraw(506.0) is not None and s.withdraw(506.0).send is None


def test_a_late_reply_past_the_deadline_goes_straight_to_the_last_attempt() -> None:
    s = section(wait_ms=100)
    s.acquire(0.0)
    s.acquire_reply(250.0, -5_000)  # the reply took longer than the whole wait
    assert s.phase is Phase.WAITING and s.block_until == 100.0
    assert sent(s.acquire(250.0)).queue_ms == 0


def test_a_failed_attempt_may_have_queued_us_so_it_withdraws() -> None:
    s = section()
    s.acquire(0.0)
    s.acquire_fail(1.0)
    assert s.queued
    command = sent(s.withdraw(2.0))
    assert command.op is Op.WITHDRAW and command.best_effort
    assert not s.queued and s.withdraw(3.0).send is None


def test_withdrawing_while_blocked_ends_the_acquisition() -> None:
    s = section()
    s.acquire(0.0)
    s.acquire_reply(1.0, -50)
    assert sent(s.withdraw(2.0)).op is Op.WITHDRAW
    assert s.phase is Phase.DONE and s.outcome is Outcome.NOT_ACQUIRED


def test_a_group_shares_one_deadline() -> None:
    config = SectionConfig(ttl_ms=10_000, wait_ms=1_000)
    a, b = Section("a", "ta", config), Section("b", "tb", config)
    Group([a, b]).start(100.0)
    a.acquire(600.0)  # the first key took 500 ms
    assert a.waiting is not None and a.waiting.until == 1_100.0
    assert sent(b.acquire(900.0)).queue_ms == 200


def test_the_wire_form_of_waiting() -> None:
    s = section(wait_ms=1_000, key="lock:k")
    command = sent(s.acquire(0.0))
    script, keys, args = encode(command)
    assert script is W_ACQUIRE
    queue, places, wake = queue_keys("lock:k")
    assert keys[2:] == [queue, places] and args[0] == "tok" and args[2] == 1_000
    assert args[4] == wake and wake_key("lock:k", "tok") == wake + "tok"
    # Every key of the protocol shares the lock key's Cluster slot tag.
    tag = queue[queue.index("{") : queue.index("}") + 1]
    assert tag in keys[1] and tag in places and tag in wake
    assert decode(command, [5, 0]) == 5
    assert decode(command, [0, 250]) == -250
    assert decode(command, [0, 0]) == 0


@pytest.mark.parametrize(
    ("ahead_ms", "socket_timeout", "expected"),
    [(2_000.0, None, 2.0), (-5.0, None, 0.001), (0.0, None, 0.001), (10_000.0, 1.0, 0.5)],
)
def test_a_block_is_never_zero_and_fits_the_socket_timeout(
    ahead_ms: float, socket_timeout: float | None, expected: float
) -> None:
    # BLPOP's 0 means "for ever"; a block longer than the socket timeout would fail.
    seconds = block_seconds(now_ms() + ahead_ms, socket_timeout)
    assert seconds == pytest.approx(expected, abs=0.01) and seconds > 0


# -- the flow, against a fake queue ------------------------------------------------------


@dataclass
class FakeQueue:
    """The waiting scripts' semantics for one key: who holds it, who waits, who was
    handed the key (with its fence) and not yet told."""

    holder: str | None = None
    queue: list[str] = field(default_factory=list)
    woken: dict[str, int] = field(default_factory=dict)
    fence: int = 0
    hold_ms: int = 1_000

    def run(self, command: Command) -> int:
        token = command.token
        if command.op is Op.ACQUIRE:
            free = self.holder in (None, token)
            first = not self.queue or self.queue[0] == token
            if free and (first or command.queue_ms is None):
                if self.holder != token:
                    self.fence += 1
                self.holder = token
                self._leave(token)
                return self.fence
            if command.queue_ms is None:
                return 0
            if command.queue_ms == 0:
                self._leave(token)
                return 0
            if token not in self.queue:
                self.queue.append(token)
            return -self.hold_ms
        if command.op is Op.WITHDRAW:
            head = self.queue[0] if self.queue else None
            self._leave(token)
            mine = self.holder == token
            if mine:
                self.holder = None  # handed to us: given back
            if (head == token or mine) and self.holder is None:
                self._hand()
            return 1
        if command.op is Op.RELEASE:
            if self.holder != token:
                return 0
            self.holder = None
            self._hand()
            return 1
        return 1 if self.holder == token else 0

    def _hand(self) -> None:
        if self.queue:
            head = self.queue[0]
            self.fence += 1
            self.holder = head
            self._leave(head)
            self.woken[head] = self.fence

    def _leave(self, token: str) -> None:
        if token in self.queue:
            self.queue.remove(token)
        self.woken.pop(token, None)


class FakeEffects:
    def __init__(self) -> None:
        self.clock = 0.0
        self._core_guard: flows.Guard | None = threading.RLock()

    def _now(self) -> float:
        return self.clock

    def _arm(self, handle: HandleBase) -> None:
        handle._armed_at = handle._section.wake_at

    def _record(self, events: list[Transition | Event]) -> None:
        pass

    def _notify(self, handle: HandleBase, events: list[Transition | Event]) -> None:
        pass

    def _apply(self, handle: HandleBase, step: Step) -> None:
        pass


def waiting_handles(keys: list[str], wait_ms: int = 1_000) -> list[HandleBase]:
    config = SectionConfig(ttl_ms=10_000, wait_ms=wait_ms)
    sections = [Section(k, f"tok-{k}", config) for k in keys]
    group = Group(sections)
    return [HandleBase(s, group) for s in sections]


def drive(
    fx: FakeEffects,
    db: FakeQueue,
    flow: Flow[Any],
    *,
    at: int | None = None,
    exc: BaseException | None = None,
    release_at_block: bool = False,
) -> tuple[list[object], BaseException | None]:
    """Run ``flow``, recording its requests; at request number ``at`` throw ``exc``.  A
    Block ends woken if a wake-up is pending (or, with ``release_at_block``, after the
    holder releases), else at its end."""
    requests: list[object] = []
    try:
        request = next(flow)
        for n in itertools.count():
            assert n < 50, "a flow that never ends"
            requests.append(request)
            fx.clock += 1.0
            if n == at:
                assert exc is not None
                request = flow.throw(exc)
                continue
            if isinstance(request, Block):
                if release_at_block and db.holder == "holder":
                    db.run(Command(Op.RELEASE, "k", "holder", 1))
                fence = db.woken.pop(request.token, 0)
                if not fence:
                    fx.clock = max(fx.clock, request.until_ms)
                request = flow.send(fence)
            elif isinstance(request, Sleep):
                raise AssertionError("a waiting acquisition never backs off")
            else:
                request = flow.send(db.run(request))
    except StopIteration:
        return requests, None
    except BaseException as error:
        return requests, error
    raise AssertionError("unreachable")


def test_the_flow_blocks_and_is_handed_the_key_by_the_release() -> None:
    fx, db = FakeEffects(), FakeQueue(holder="holder")
    (h,) = waiting_handles(["k"])
    requests, error = drive(fx, db, flows.acquire(fx, h), release_at_block=True)
    assert error is None and h._section.phase is Phase.HELD
    kinds = [type(r).__name__ if not isinstance(r, Command) else r.op.name for r in requests]
    # two round trips when contended: the release hands the key to the blocked waiter
    assert kinds == ["ACQUIRE", "Block"]
    assert db.queue == [] and db.woken == {} and db.holder == h._section.token
    assert h._section.fence == db.fence


def test_the_flow_gives_up_at_the_deadline_with_one_last_attempt() -> None:
    fx, db = FakeEffects(), FakeQueue(holder="holder", hold_ms=10_000)
    (h,) = waiting_handles(["k"], wait_ms=300)
    requests, error = drive(fx, db, flows.acquire(fx, h))
    assert error is None and h._section.outcome is Outcome.NOT_ACQUIRED
    # The wait ran out during the block; the last attempt, refused, left the queue.
    assert [r.queue_ms for r in requests if isinstance(r, Command)] == [300, 0]
    assert db.queue == [] and fx.clock >= 300.0


def test_a_free_key_with_a_queue_goes_to_the_first_waiter_not_to_a_newcomer() -> None:
    fx, db = FakeEffects(), FakeQueue(queue=["first"])
    (h,) = waiting_handles(["k"])
    requests, error = drive(fx, db, flows.acquire(fx, h), at=1, exc=KeyboardInterrupt())
    assert isinstance(error, KeyboardInterrupt)
    assert isinstance(requests[1], Block)  # refused although free: "first" waits before us
    assert db.queue == ["first"] and db.holder is None


def test_a_fail_fast_caller_takes_a_free_key_while_others_wait() -> None:
    fx, db = FakeEffects(), FakeQueue(queue=["first"])
    (h,) = waiting_handles(["k"], wait_ms=0)
    _, error = drive(fx, db, flows.acquire(fx, h))
    assert error is None and h._section.phase is Phase.HELD and db.queue == ["first"]


EXCEPTIONS = [
    lambda: redis.ConnectionError("reset"),
    lambda: asyncio.CancelledError(),
    KeyboardInterrupt,
]


@pytest.mark.parametrize("make", EXCEPTIONS)
@pytest.mark.parametrize("at", range(3))
def test_an_exception_anywhere_leaves_no_place_and_no_key(make: Any, at: int) -> None:
    fx, db = FakeEffects(), FakeQueue(holder="holder", queue=["other"])
    (h,) = waiting_handles(["k"])
    exc = make()
    requests, error = drive(fx, db, flows.acquire(fx, h), at=at, exc=exc)
    assert error is exc
    assert h.token not in db.queue and db.queue == ["other"]
    assert db.holder == "holder"
    if at >= 1:  # blocked, or in the attempt after: the place was withdrawn in a round trip
        assert any(isinstance(r, Command) and r.op is Op.WITHDRAW for r in requests)


def test_a_withdrawing_waiter_hands_a_key_handed_to_it_on() -> None:
    db = FakeQueue(holder="holder", queue=["head", "next"])
    db.run(Command(Op.RELEASE, "k", "holder", 1))  # handed to the head, not yet told
    assert db.holder == "head" and db.woken == {"head": 1}
    db.run(Command(Op.WITHDRAW, "k", "head", 1))  # which then stops waiting
    assert db.holder == "next" and db.queue == [] and db.woken == {"next": 2}


def test_a_group_timeout_releases_what_it_took_and_names_the_missing_key() -> None:
    fx = FakeEffects()
    dbs = {"a": FakeQueue(), "b": FakeQueue(holder="holder", hold_ms=60_000)}

    class Keyed:
        def run(self, command: Command) -> int:
            return dbs[command.key].run(command)

        @property
        def woken(self) -> dict[str, int]:
            return {}

        holder = None

    hs = waiting_handles(["a", "b"], wait_ms=400)
    _, error = drive(fx, Keyed(), flows.acquire_all(fx, hs))  # type: ignore[arg-type]
    assert isinstance(error, LockNotAcquiredError) and error.key == "b"
    assert dbs["a"].holder is None and dbs["b"].queue == []
    assert fx.clock >= 400.0


def test_the_reentrant_lock_waits_on_its_own_scripts() -> None:
    from distlock._core.reentrant import ReentrantSection
    from distlock._protocol import R_WITHDRAW, RW_ACQUIRE, WITHDRAW

    s = ReentrantSection("k", "tok", SectionConfig(ttl_ms=10_000, wait_ms=1_000))
    attempt = sent(s.acquire(0.0))
    assert encode(attempt)[0] is RW_ACQUIRE
    s.acquire_fail(1.0)
    withdrawal = sent(s.withdraw(2.0))
    assert encode(withdrawal)[0] is R_WITHDRAW is not WITHDRAW
    # The waiting attempt and the withdrawal share one layout of KEYS and ARGV, so a
    # primitive joins the queue with its claim() and busy() alone.
    assert encode(attempt)[1] == encode(withdrawal)[1]
    assert decode(attempt, [9, 0]) == 9  # a granted reentrant claim's fence
