"""The pure core against a model of its world: one Redis key, a fake clock, messages in flight.

Several :class:`~distlock._core.section.Section` objects contend for one modelled key.  Every event
the core accepts is a rule: acquire and its replies and failures, timer ticks (which renew
or retire the lease), renewal replies 1 and 0, renewal failures, hung requests that are
never answered (or, but for a renewal, time out), slow and late replies, manual extends,
starvation (time jumps with no tick, or a body that hogs the loop before it returns),
body completion and release.  The environment's own steps are rules too: Redis executes a
request in flight (atomically, at its own clock, which may run slightly fast), expires the
key, loses it (failover), restarts empty, or is told ``PEXPIRE key 1`` from outside.

The invariants are the Python statements of the spec's: an OK outcome needs a confirmed
release, no loss and a body that finished before its deadline; a fired signal never
un-fires; at most one renewal in flight; SignalSound (while held, not known lost and
before the client's deadline, Redis holds our token, and will until that deadline, unless
Redis lost the key while it held our token); NoSpuriousLoss (with every reply in time and
no fault, no loss); NoOverlappingSuccess between the sections on the key; FencesIncrease.
Some are also checked in the step-by-step form the spec's actions imply, so that a wrong
step fails where it happens rather than when its damage surfaces: a body that overran
its deadline is known lost (BodyDone), no grant is kept past its own lease
(AcquireReply), a refused renewal or extend is a known loss (RenewReply, ExtendReply),
and a timer that fired is not due again at once (Tick lets time pass only when no timer
is due).  ``test_core_mutants.py`` runs this machine against broken cores to show each
of these checks catches what it is for.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from distlock._core.lease import RENEW_STEPS, trusted_ms
from distlock._core.section import NOTHING, Op, Outcome, Phase, SectionConfig, Step
from distlock.errors import LockLeaseLostError, UsageError
from tests.core_helpers import Trace, op_of
from tests.core_helpers import TracedSection as Section
from tests.properties import profiles

CLIENTS: Final = 3  # at most
KEY: Final = "lock:model"
PICK: Final = st.integers(min_value=0, max_value=1 << 16)

#: Weighted: the common case often, each fault now and then.  Hypothesis draws the first
#: entry more often than its weight: a reply that takes time comes first, since only then
#: does the send time of a request differ from its reply's arrival.
NETWORK: Final = st.sampled_from(
    ["slow"] * 4
    + ["round_trip"] * 4
    + ["execute", "execute", "deliver", "deliver", "fail", "drop", "hang"]
)
#: Long bodies first (drawn most often, as above): renewals, their replies and their
#: failures happen only while a body runs.
BODY_MS: Final = st.sampled_from([0, 200, 80, 30, 10])
CLOCK: Final = st.sampled_from(["tick"] * 6 + ["wait", "wait", "starve", "early"])

_RELEASABLE: Final = frozenset(
    {Phase.HELD, Phase.BODY_DONE, Phase.ABANDONED, Phase.RELEASE_UNKNOWN}
)


@dataclass
class Request:
    """One script call on the wire: sent by a section, executed by Redis, answered or not."""

    rid: int
    run: SectionRun
    kind: str  # "acquire" | "renew" | "extend" | "release"
    ttl_ms: int
    sent_at: float
    executed: bool = False
    reply: int | None = None
    #: The driver saw the outcome (a reply or a failure): the core is no longer waiting.
    answered: bool = False
    #: Never answered: a hung connection.  Redis may still execute it.
    hung: bool = False
    #: Lost before Redis saw it.
    dropped: bool = False

    @property
    def op(self) -> Op:
        return {
            "acquire": Op.ACQUIRE,
            "renew": Op.EXTEND,
            "extend": Op.EXTEND,
            "release": Op.RELEASE,
        }[self.kind]


@dataclass
class SectionRun:
    """A section and what the model knows about it that the section itself does not."""

    section: Section
    events: list[dict[str, Any]]
    #: The request-to-reply bound under which NoSpuriousLoss promises no loss.
    in_time_ms: float | None
    #: How long the body runs once the lock is granted (unless cancelled on loss).
    body_ms: int = 0
    granted_at: float | None = None
    #: The deadline the grant left, as the body (or the handle's caller) starts.
    deadline_at_grant: float | None = None
    body_done_at: float | None = None
    deadline_at_body_done: float | None = None
    end_at: float | None = None
    #: Something outside the lock took the key or starved the timers: no promise of no loss.
    faulted: list[str] = field(default_factory=list)
    #: Redis lost or was told to drop the key while it held this section's token.
    disturbed: bool = False
    first_loss: LockLeaseLostError | None = None
    #: When a renewal or extend of the held section was answered 0: the key is not ours.
    rejected_at: float | None = None
    final_outcome: Outcome = Outcome.NONE

    @property
    def key_disturbed(self) -> bool:
        return self.disturbed

    def fault(self, why: str) -> None:
        if why not in self.faulted:
            self.faulted.append(why)


@dataclass
class FakeRedis:
    """The lock key and its fence counter, with Redis's script semantics and lazy expiry.

    Redis's clock runs ``1 + rate`` times as fast as the clients' (``rate`` below the drift
    the clients allow for), so a lease is never trusted longer than Redis keeps the key.
    """

    rate: float
    value: str | None = None
    expires_at: float = 0.0
    fence: int = 0
    restarts: int = 0

    def clock(self, now: float) -> float:
        return now * (1.0 + self.rate)

    def get(self, now: float) -> str | None:
        if self.value is not None and self.clock(now) >= self.expires_at:
            self.value = None
        return self.value

    def pexpire(self, now: float, ttl_ms: float) -> None:
        self.expires_at = self.clock(now) + ttl_ms

    def execute(self, now: float, op: Op, token: str, ttl_ms: int) -> int:
        cur = self.get(now)
        if op is Op.ACQUIRE:
            if cur == token:
                self.pexpire(now, ttl_ms)
                return self.fence or 1
            if cur is not None:
                return 0
            self.value = token
            self.pexpire(now, ttl_ms)
            self.fence += 1
            return self.fence
        if op is Op.EXTEND:
            if cur == token:
                self.pexpire(now, ttl_ms)
                return 1
            return 0
        if cur == token:
            self.value = None
            return 1
        return 0


#: run/hold with heartbeat renewal
renewing_configs = st.builds(
    lambda ttl, quarter, retries, delay, cancel: SectionConfig(
        ttl_ms=ttl,
        retries=retries,
        retry_delay_ms=delay,
        renew_every_ms=ttl // 4 if quarter else ttl // 2,
        watch=True,
        cancel_on_loss=cancel,
    ),
    st.sampled_from([20, 50, 100]),
    st.booleans(),
    st.integers(0, 2),
    st.sampled_from([0.0, 7.0, 30.0]),
    st.booleans(),
)

run_configs = st.one_of(
    renewing_configs,
    renewing_configs,
    # run/hold with heartbeat_ms=False: watched, never renewed
    st.builds(
        lambda ttl, retries, cancel: SectionConfig(
            ttl_ms=ttl, retries=retries, retry_delay_ms=10.0, watch=True, cancel_on_loss=cancel
        ),
        st.sampled_from([20, 50, 100]),
        st.integers(0, 1),
        st.booleans(),
    ),
    # a manual handle (acquire/extend/release)
    st.builds(
        lambda ttl, retries: SectionConfig(ttl_ms=ttl, retries=retries, retry_delay_ms=5.0),
        st.sampled_from([20, 50, 100]),
        st.integers(0, 1),
    ),
)


class CoreMachine(RuleBasedStateMachine):
    """Sections on one modelled key, driven event by event on a fake clock."""

    #: The core under test; test_core_mutants.py plugs in broken variants of it.
    section_type: ClassVar[type[Section]] = Section

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.redis = FakeRedis(rate=0.0)
        self.clients: list[SectionRun | None] = [None] * CLIENTS
        self.done: list[SectionRun] = []
        self.requests: list[Request] = []
        self.rids = itertools.count(1)
        self.tokens = itertools.count(1)
        self.granted_fences: list[tuple[int, int]] = []  # (restarts, fence)
        #: Every event of every section, in the order the core took them.
        self.trace: list[dict[str, Any]] = []

    @initialize(
        rate=st.sampled_from([0.0, 0.0, 0.005]),
        clients=st.sampled_from([1, 2, 2, 3]),
        config=run_configs,
        body_ms=BODY_MS,
    )
    def init_world(self, rate: float, clients: int, config: SectionConfig, body_ms: int) -> None:
        # A Redis clock up to 0.5% fast: within the 1% drift the clients allow for.
        self.redis.rate = rate
        self.clients = [None] * clients
        # The first section starts with the world: Hypothesis switches rules off at random
        # per example, and one with start_section off would otherwise test nothing.
        self._start(0, config, body_ms)

    # -- helpers ---------------------------------------------------------------------------

    def runs(self) -> list[SectionRun]:
        return [r for r in self.clients if r is not None]

    def live(self) -> list[SectionRun]:
        return [r for r in self.runs() if r.section.phase is not Phase.DONE]

    def _record(self, events: list[dict[str, Any]]) -> Trace:
        def record(event: dict[str, Any]) -> None:
            events.append(event)
            self.trace.append(event)

        return record

    def _send(self, run: SectionRun, kind: str, ttl_ms: int) -> None:
        self.requests.append(Request(next(self.rids), run, kind, ttl_ms, self.now))

    def _apply(self, run: SectionRun, step: Step, kind: str = "renew") -> None:
        """What a driver does with a step: put the request on the wire, fire the signal."""
        if step.loss is not None:
            assert run.section.lost is step.loss, "the step's loss is the section's signal"
        if op_of(step) is Op.RENEW:
            self._send(run, kind, run.section.config.ttl_ms)
        elif op_of(step) is not None:
            raise AssertionError(f"unexpected send {step.send} for {kind}")

    def _pending(self, run: SectionRun, kind: str) -> list[Request]:
        return [q for q in self.requests if q.run is run and q.kind == kind and not q.answered]

    def _waiting(self, q: Request, *, timeout: bool = False) -> bool:
        """Is the core still waiting for the outcome of ``q``?

        ``timeout``: count a hung acquire, extend or release too, for the driver's timeout
        (AcquireFail, ExtendFail and ReleaseFail need only NoAnswer).  A hung renewal is
        never failed: LeaseTimeout ends it.
        """
        s = q.run.section
        if q.answered or (q.hung and not (timeout and q.kind != "renew")):
            return False
        if q.kind == "acquire":
            return s.phase is Phase.ACQUIRING
        if q.kind == "renew":
            return s.renew_in_flight
        if q.kind == "extend":
            return s.extend_in_flight
        return s.phase is Phase.RELEASING

    def _wake_ats(self) -> list[tuple[float, SectionRun]]:
        out = []
        for run in self.live():
            s = run.section
            if s.phase is Phase.HELD and s.config.watch:
                wake = s.wake_at
                if wake is not None:
                    out.append((wake, run))
        return out

    def _advance(self, to: float) -> None:
        """Time passes.  Timers that should have fired and did not are starvation."""
        if to <= self.now:
            return
        for wake, run in self._wake_ats():
            if wake < to:
                run.fault("starved")
        for run in self.live():
            if run.section.phase is Phase.BODY_DONE:
                # The drivers release in the same turn as BodyDone; a model that lets time
                # pass in between may see the key expire first.
                run.fault("release delayed")
        self.now = to
        for q in self.requests:
            bound = q.run.in_time_ms
            # The bound is a supremum: a reply exactly at it is already too late.
            if not q.answered and bound is not None and self.now - q.sent_at >= bound - 1e-6:
                q.run.fault(f"{q.kind} not answered within {bound} ms")

    def _disturb(self, why: str, holder: str | None) -> None:
        for run in self.live():
            # SignalSound excuses only the section whose token Redis lost (the spec's
            # wiped); every live section loses its promise of no loss.
            if run.section.token == holder:
                run.disturbed = True
            run.fault(why)

    # -- sections start and acquire ---------------------------------------------------------

    @precondition(
        lambda self: any(r is None or r.section.phase is Phase.DONE for r in self.clients)
    )
    @rule(pick=PICK, config=run_configs, body_ms=BODY_MS)
    def start_section(self, pick: int, config: SectionConfig, body_ms: int) -> None:
        idle = [i for i, r in enumerate(self.clients) if r is None or r.section.phase is Phase.DONE]
        self._start(idle[pick % len(idle)], config, body_ms)

    def _start(self, i: int, config: SectionConfig, body_ms: int) -> None:
        old = self.clients[i]
        if old is not None:
            self.done.append(old)
        in_time = None
        if config.watch and config.renew_every_ms is not None:
            every = config.renew_every_ms
            # A renewal may leave up to one grid step after it is due (renewals of many
            # locks are woken together: LeaseClock.lease_wake_at); its reply must still confirm
            # the lease before the deadline.
            late = every / RENEW_STEPS
            in_time = min(every, trusted_ms(config.ttl_ms, config.drift_factor) - every - late)
        events: list[dict[str, Any]] = []
        section = self.section_type(
            KEY, f"tok{next(self.tokens)}", config, client=f"c{i}", trace=self._record(events)
        )
        run = SectionRun(section=section, events=events, in_time_ms=in_time, body_ms=body_ms)
        self.clients[i] = run
        step = run.section.acquire(self.now)
        assert op_of(step) is Op.ACQUIRE
        self._send(run, "acquire", config.ttl_ms)

    @precondition(
        lambda self: any(
            r.section.phase is Phase.BACKOFF and self.now >= r.section.retry_at for r in self.live()
        )
    )
    @rule(pick=PICK)
    def retry_acquire(self, pick: int) -> None:
        due = [
            r
            for r in self.live()
            if r.section.phase is Phase.BACKOFF and self.now >= r.section.retry_at
        ]
        run = due[pick % len(due)]
        step = run.section.acquire(self.now)
        assert op_of(step) is Op.ACQUIRE
        self._send(run, "acquire", run.section.config.ttl_ms)

    # -- Redis ------------------------------------------------------------------------------

    @precondition(lambda self: self.redis.value is not None)
    @rule(kind=st.sampled_from(["lost", "restart", "pexpire"]))
    def redis_fault(self, kind: str) -> None:
        """KeyLost (failover to a replica that never saw the key), a restart without
        persistence (the fence counter goes too), or ``PEXPIRE key 1`` from outside."""
        holder = self.redis.get(self.now)
        if kind == "pexpire":
            if holder is None:
                return
            self.redis.pexpire(self.now, 1)
        else:
            self.redis.value = None
        if kind == "restart":
            self.redis.fence = 0
            self.redis.restarts += 1
        self._disturb(kind, holder)

    # -- replies ------------------------------------------------------------------------------

    def _deliver(self, q: Request) -> None:
        q.answered = True
        run, s = q.run, q.run.section
        assert q.reply is not None
        if q.kind == "acquire":
            step = s.acquire_reply(self.now, q.reply)
            self._apply(run, step)
            if s.phase is Phase.HELD:
                assert s.fence == q.reply
                if step.loss is None:
                    run.granted_at = self.now
                    run.deadline_at_grant = s.deadline
                else:
                    # Granted after its own lease ran out: the driver starts no body and
                    # releases at once.
                    assert op_of(step) is None and not step.cancel_body
                    assert op_of(s.release(self.now)) is Op.RELEASE
                    run.end_at = self.now
                    self._send(run, "release", s.config.ttl_ms)
            else:
                assert step is NOTHING
        elif q.kind in ("renew", "extend"):
            held = s.phase is Phase.HELD
            if q.kind == "renew":
                self._apply(run, s.renew_reply(self.now, q.reply == 1))
            else:
                self._apply(run, s.extend_reply(self.now, q.reply == 1))
            if held and q.reply == 0 and run.rejected_at is None:
                run.rejected_at = self.now
        else:
            self._apply(run, s.release_reply(self.now, q.reply == 1))

    def _fail(self, q: Request) -> None:
        q.answered = True
        run, s = q.run, q.run.section
        if q.kind == "acquire":
            assert s.acquire_fail(self.now) is NOTHING
            assert s.phase is Phase.ABANDONED
        elif q.kind == "renew":
            self._apply(run, s.renew_fail(self.now))
        elif q.kind == "extend":
            self._apply(run, s.extend_fail(self.now))
        else:
            self._apply(run, s.release_fail(self.now))

    @precondition(
        lambda self: any(
            self._waiting(q, timeout=True) or not (q.executed or q.dropped) for q in self.requests
        )
    )
    @rule(pick=PICK, kind=NETWORK, dt=st.integers(1, 15))
    def network(self, pick: int, kind: str, dt: int) -> None:
        """One step of the wire between the clients and Redis.

        ``round_trip``: Redis runs a request now (unless it already has) and the reply
        reaches the driver.  ``slow``: the same, but the reply takes ``dt`` ms to come back
        (less if a timer is due first: timers fire on time meanwhile).  ``execute``: Redis
        runs one request in flight, atomically, in any order (several connections); its
        reply comes later, perhaps late.  ``deliver``: the reply of a request Redis already
        ran reaches the driver.  ``fail``: the round trip errors (reset, timeout) whether or
        not Redis ran it, and if it has not, it still may; a hung acquire, extend or release
        times out this way too.  ``drop``: the request is lost on the way; Redis never runs
        it.  ``hang``: no reply and no error, ever (a hung connection); Redis may still run
        it.
        """
        if kind == "execute":
            ready = [q for q in self.requests if not (q.executed or q.dropped)]
        elif kind == "deliver":
            ready = [q for q in self.requests if q.executed and self._waiting(q)]
        elif kind in ("round_trip", "slow"):
            ready = [q for q in self.requests if self._waiting(q) and not q.dropped]
        elif kind == "fail":
            ready = [q for q in self.requests if self._waiting(q, timeout=True)]
        else:
            ready = [q for q in self.requests if self._waiting(q)]
        if not ready:
            return
        q = ready[pick % len(ready)]
        if kind in ("execute", "round_trip", "slow") and not q.executed:
            q.executed = True
            before = self.redis.fence
            q.reply = self.redis.execute(self.now, q.op, q.run.section.token, q.ttl_ms)
            if q.kind == "acquire" and self.redis.fence != before:
                self.granted_fences.append((self.redis.restarts, q.reply))
        if kind == "slow":
            # Redis ran the request at once and only its reply is late: the delay no other
            # single step makes.  Timers keep firing while the reply is on its way.
            self._pass(self.now + dt)
            if not self._waiting(q):
                return
        if kind in ("deliver", "round_trip", "slow"):
            self._deliver(q)
            return
        if kind == "execute":
            return
        q.run.fault(f"{q.kind} {kind}")
        if kind == "drop":
            q.dropped = q.dropped or not q.executed
        elif kind == "hang":
            q.hung = True
        else:
            self._fail(q)

    # -- time and timers ----------------------------------------------------------------------

    @rule(kind=CLOCK, dt=st.integers(1, 60), pick=PICK)
    def clock(self, kind: str, dt: int, pick: int) -> None:
        """``tick``: the earliest timer fires on time (every section due then is ticked);
        with none set, ``dt`` ms pass.  ``wait``: ``dt`` ms pass with every timer firing on
        time.  ``starve``: the body holds the event loop or the GIL: ``dt`` ms pass and no
        timer runs.  ``early``: a timer fires before anything is due, or on a section that
        has none: no effect."""
        wakes = self._wake_ats()
        if kind == "tick" and wakes:
            self._advance(min(w for w, _ in wakes))
            self._tick_due()
        elif kind in ("wait", "tick"):
            # With no timer set, waiting for the next one is waiting ``dt``.
            self._advance(min([self.now + dt, *(w for w, _ in wakes)]))
        elif kind == "starve":
            self._advance(self.now + dt)
        elif kind == "early" and self.live():
            runs = self.live()
            run = runs[pick % len(runs)]
            self._tick(run)

    def _tick_due(self) -> None:
        for wake, run in self._wake_ats():
            if wake <= self.now:
                self._tick(run)

    def _pass(self, to: float) -> None:
        """Time passes until ``to`` with every timer firing on time."""
        while True:
            wakes = [w for w, _ in self._wake_ats() if w <= to]
            if not wakes:
                self._advance(to)
                return
            self._advance(min(wakes))
            self._tick_due()

    def _tick(self, run: SectionRun) -> None:
        """The timer fires.  The spec lets time pass only once no timer is due (``Tick``
        needs ``~TimerDue``): a timer that leaves itself due at once would stop the clock,
        as a hung renewal that holds off LeaseTimeout does."""
        s = run.section
        self._apply(run, s.tick(self.now))
        wake = s.wake_at
        assert wake is None or wake > self.now, (
            f"{s.client}'s timer fired at {self.now} and is due again at once ({wake}): "
            f"the deadline {s.deadline} passed but LeaseTimeout did not fire"
        )

    # -- the body and the caller ------------------------------------------------------------

    def _body_may_end(self, run: SectionRun) -> bool:
        s = run.section
        if s.phase is not Phase.HELD or not s.config.watch or run.granted_at is None:
            return False
        return s.cancel_requested or self.now - run.granted_at >= run.body_ms

    @precondition(lambda self: any(self._body_may_end(r) for r in self.runs()))
    @rule(pick=PICK, hog_ms=st.sampled_from([0, 0, 0, 20, 50, 120]))
    def body_done(self, pick: int, hog_ms: int) -> None:
        """The body returns (its time is up) or, cancelled on loss, raises.  With
        ``hog_ms`` it first holds the event loop that long, so no timer runs (Starve): the
        overrun that only the completion-time check can see."""
        runs = [r for r in self.runs() if self._body_may_end(r)]
        run = runs[pick % len(runs)]
        s = run.section
        self._advance(self.now + hog_ms)
        deadline = s.deadline
        step = s.body_done(self.now)
        self._apply(run, step)
        run.body_done_at = self.now
        run.deadline_at_body_done = deadline
        run.end_at = self.now
        assert step.cancel_body is False, "a finished body is never cancelled"

    @precondition(lambda self: bool(self.live()))
    @rule(pick=PICK)
    def release(self, pick: int) -> None:
        """The driver releases after the body (or the abandoned acquire); a manual handle
        releases whenever its caller wants, again and again."""
        runs = [
            r
            for r in self.runs()
            if (r.section.config.watch and r.section.phase in (Phase.BODY_DONE, Phase.ABANDONED))
            or not r.section.config.watch
        ]
        if not runs:
            return
        run = runs[pick % len(runs)]
        s = run.section
        releasable = s.phase in _RELEASABLE
        step = s.release(self.now)
        if not releasable:
            assert step is NOTHING
            return
        assert op_of(step) is Op.RELEASE
        if run.end_at is None:
            run.end_at = self.now
        self._send(run, "release", s.config.ttl_ms)

    @precondition(lambda self: any(r.section.phase is Phase.HELD for r in self.runs()))
    @rule(pick=PICK, manual=st.sampled_from([True, True, True, False]))
    def extend(self, pick: int, manual: bool) -> None:
        """``handle.extend()``: mostly on manual handles, sometimes on a run/hold one."""
        self._extend(pick, None, manual)

    def _extend(self, pick: int, ttl: int | None, manual: bool) -> None:
        runs = [
            r
            for r in self.runs()
            if r.section.phase is Phase.HELD and r.section.config.watch is not manual
        ]
        if not runs:
            return
        run = runs[pick % len(runs)]
        s = run.section
        ttl_ms = s.config.ttl_ms if ttl is None else ttl
        was_in_flight = s.extend_in_flight
        if s.config.watch:
            # Under run/hold the heartbeat owns the TTL: extend() is refused, and changes nothing.
            with pytest.raises(UsageError):
                s.extend(self.now, ttl_ms)
            assert s.extend_in_flight == was_in_flight
            return
        step = s.extend(self.now, ttl_ms)
        if was_in_flight:
            assert step is NOTHING
            return
        assert op_of(step) is Op.EXTEND
        if ttl_ms < s.config.ttl_ms:
            run.fault("extended with a shorter TTL")
        self._send(run, "extend", ttl_ms)

    # -- invariants ---------------------------------------------------------------------------

    @invariant()
    def signal_never_unfires(self) -> None:
        for run in self.runs():
            s = run.section
            if run.first_loss is not None:
                assert s.lost is run.first_loss, "a fired signal changed or un-fired"
            run.first_loss = s.lost

    @invariant()
    def outcome_is_final(self) -> None:
        for run in self.runs():
            s = run.section
            assert (s.phase is Phase.DONE) == (s.outcome is not Outcome.NONE)
            if run.final_outcome is not Outcome.NONE:
                assert s.outcome is run.final_outcome, "an outcome changed after DONE"
            run.final_outcome = s.outcome

    @invariant()
    def ok_needs_proof(self) -> None:
        """An OK outcome: the release confirmed our token, no loss, body done in time."""
        for run in self.runs():
            s = run.section
            if s.outcome is not Outcome.OK:
                continue
            assert s.release_confirmed is True
            assert s.lost is None
            assert s.fence is not None
            if s.config.watch:
                assert run.body_done_at is not None and run.deadline_at_body_done is not None
                assert run.body_done_at < run.deadline_at_body_done

    @invariant()
    def overrun_is_loss(self) -> None:
        """A body that finished at or past its deadline is known lost (BodyDone's
        completion-time check): the step-by-step form of the spec's OkWithinLease, which
        otherwise shows only when Redis happens to keep the key until the release."""
        for run in self.runs():
            done, deadline = run.body_done_at, run.deadline_at_body_done
            if done is not None and deadline is not None and done >= deadline:
                assert run.section.lost is not None, (
                    f"{run.section.client}'s body finished at {done}, past its deadline "
                    f"{deadline}, and the lease is not known lost"
                )

    @invariant()
    def grant_within_lease(self) -> None:
        """No body starts on a lease that ran out before its grant arrived (AcquireReply:
        such a grant is known lost at once)."""
        for run in self.runs():
            granted, deadline = run.granted_at, run.deadline_at_grant
            if granted is not None and deadline is not None:
                assert granted < deadline, (
                    f"{run.section.client} was granted at {granted}, past the deadline "
                    f"{deadline} of the lease it grants, and kept it"
                )

    @invariant()
    def rejection_is_loss(self) -> None:
        """A section told while held that the key is not its own (a renewal or an extend
        answered 0) knows the lease is lost (RenewReply, ExtendReply)."""
        for run in self.runs():
            if run.rejected_at is not None:
                assert run.section.lost is not None, (
                    f"{run.section.client} was refused at {run.rejected_at} and its lease "
                    f"is not known lost"
                )

    @invariant()
    def one_renewal_in_flight(self) -> None:
        for run in self.runs():
            s = run.section
            renewals = self._pending(run, "renew")
            extends = self._pending(run, "extend")
            assert len(renewals) <= 1, "two renewals in flight"
            assert len(extends) <= 1, "two manual extends in flight"
            assert s.renew_in_flight == bool(renewals)
            assert s.extend_in_flight == bool(extends)

    @invariant()
    def holding_has_fence(self) -> None:
        for run in self.runs():
            s = run.section
            if s.phase in (Phase.HELD, Phase.BODY_DONE):
                assert s.fence is not None

    @invariant()
    def signal_sound(self) -> None:
        """While held (or the body just done), not known lost and before the deadline on the
        client clock, Redis holds our token."""
        for run in self.runs():
            s = run.section
            live = s.phase in (Phase.HELD, Phase.BODY_DONE) and s.lost is None
            if live and self.now < s.deadline and not run.key_disturbed:
                assert self.redis.get(self.now) == s.token, (
                    f"{s.client} trusts its lease until {s.deadline} at {self.now} "
                    f"but Redis holds {self.redis.value!r}"
                )
                # SignalSound must hold in the future where only time passes and Redis
                # runs nothing more: the key must outlive the deadline already.  This
                # flags a deadline set too late at once, not only if the key then expires
                # with no renewal run in between.
                expires = self.redis.expires_at / (1.0 + self.redis.rate)
                assert self.redis.expires_at >= self.redis.clock(s.deadline) - 1e-6, (
                    f"{s.client} trusts its lease until {s.deadline} but Redis drops the key "
                    f"at {expires}"
                )

    @invariant()
    def no_spurious_loss(self) -> None:
        """Renewed on time, every reply in time, no fault: no loss is reported."""
        for run in self.runs():
            if run.in_time_ms is None or run.faulted:
                continue
            assert run.section.lost is None, f"{run.section.client} lost with no fault"

    @invariant()
    def no_overlapping_success(self) -> None:
        ok = [
            r
            for r in [*self.done, *self.runs()]
            if r.section.outcome is Outcome.OK and r.granted_at is not None and r.end_at is not None
        ]
        for a, b in itertools.combinations(ok, 2):
            assert a.granted_at is not None and a.end_at is not None
            assert b.granted_at is not None and b.end_at is not None
            assert a.end_at <= b.granted_at or b.end_at <= a.granted_at, (
                f"{a.section.client} [{a.granted_at}, {a.end_at}] and "
                f"{b.section.client} [{b.granted_at}, {b.end_at}] both succeeded"
            )

    @invariant()
    def fences_increase(self) -> None:
        """Each new owner's fence is larger than every earlier one since the last restart."""
        for (ra, fa), (rb, fb) in itertools.pairwise(self.granted_fences):
            if ra == rb:
                assert fb > fa, f"fence {fb} granted after {fa}"


CoreMachine.TestCase.settings = profiles.scaled(1)
TestCoreMachine = CoreMachine.TestCase


class CoreMachineExtendTTL(CoreMachine):
    """The same world, with ``handle.extend(ttl_ms)`` given a TTL other than the lock's.

    PEXPIRE replaces the key's TTL, so an extend (or a heartbeat after a longer extend)
    can shorten the key's life; SignalSound must still hold.
    """

    @precondition(lambda self: any(r.section.phase is Phase.HELD for r in self.runs()))
    @rule(pick=PICK, ttl=st.sampled_from([10, 40, 200]), manual=st.booleans())
    def extend_with_ttl(self, pick: int, ttl: int, manual: bool) -> None:
        self._extend(pick, ttl, manual)


CoreMachineExtendTTL.TestCase.settings = profiles.scaled(1)
TestCoreMachineExtendTTL = CoreMachineExtendTTL.TestCase
