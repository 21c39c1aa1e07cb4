"""The lock's pure machine: one :class:`Section` per acquisition of one key.

A section follows one acquisition from the first request to the final verdict.  Time
(``now``, milliseconds on the client's monotonic clock) and Redis replies are inputs; the
commands to put on the wire, the moment the loss becomes known, and lifecycle events are
outputs.  Each public method named after an action is one client-side action of
``spec/DistLock.tla`` in snake case (``RenewSend`` is :meth:`Section.renew_send`), with the
same guard and the same effect.  The lease arithmetic is the shared
:class:`~distlock._core.lease.LeaseClock` and what a section keeps is
:class:`~distlock._core.state.SectionState` (its base classes, so that a held lock is one
object); this class adds the actions: acquisition with retries, waiting, renewal, the
body's end, and release.

Nothing here calls out: transitions and lifecycle events are appended to an outbox that
the driver drains (:meth:`Section.take_events`) and hands to observers outside any lock.
"""

from __future__ import annotations

from distlock._core.commands import NOTHING, Command, Kind, Op, Step
from distlock._core.config import SectionConfig
from distlock._core.state import (
    _GRANTED,
    LOCK_CLAIM,
    PERMIT_CLAIM,
    Claim,
    Outcome,
    Phase,
    SectionState,
)
from distlock._native import mypyc_attr
from distlock.errors import (
    LockNotAcquiredError,
    LossReason,
    UsageError,
)
from distlock.events import (
    Acquired,
    NotAcquired,
    Released,
    Renewed,
    RenewFailed,
)

__all__ = [
    "LOCK_CLAIM",
    "NOTHING",
    "PERMIT_CLAIM",
    "Claim",
    "Command",
    "Op",
    "Outcome",
    "Phase",
    "Section",
    "SectionConfig",
    "Step",
]

# Compiled with mypyc (the default build, see setup.py), a class is closed to Python subclasses
# unless it says otherwise; tests record and break sections by subclassing this one.
@mypyc_attr(allow_interpreted_subclasses=True)
class Section(SectionState):
    """One client's acquisition of one key, from the first request to the verdict."""

    __slots__ = ()

    # -- replies, routed by the command they answer ------------------------------------------

    def reply(self, now: float, command: Command, value: int) -> Step:
        """The reply to ``command`` arrived: the action it completes."""
        op = command.op
        if op is Op.ACQUIRE:
            return self.acquire_reply(now, value)
        if op is Op.RENEW:
            return self.renew_reply(now, value == 1)
        if op is Op.EXTEND:
            return self.extend_reply(now, value == 1)
        if op is Op.WITHDRAW:
            return self.withdraw_reply(now)
        return self.release_reply(now, value == 1)

    def failed(self, now: float, command: Command, error: BaseException | None = None) -> Step:
        """``command``'s round trip failed (or was interrupted): the action that follows."""
        op = command.op
        if op is Op.ACQUIRE:
            return self.acquire_fail(now)
        if op is Op.RENEW:
            return self.renew_fail(now, error)
        if op is Op.EXTEND:
            return self.extend_fail(now)
        if op is Op.WITHDRAW:
            return self.withdraw_fail(now)
        return self.release_fail(now)

    # -- acquisition -----------------------------------------------------------------------

    def acquire(self, now: float) -> Step:
        """Acquire: send SET NX PX (and mint the fence) in one script."""
        self._guard(
            "Acquire",
            self.phase in (Phase.IDLE, Phase.WAITING)
            or (self.phase is Phase.BACKOFF and now >= self.retry_at),
        )
        if self.phase is Phase.IDLE:
            self.first_sent_at = now
        queue_ms = None
        waiting = self.waiting
        if waiting is not None:
            waiting.start(now)
            queue_ms = waiting.attempt(now)
        self.phase = Phase.ACQUIRING
        self.attempts += 1
        self.sent_at = now
        ttl = self.config.ttl_ms
        if self.recording:
            self._record(
                "Acquire",
                now,
                attempt=self.attempts,
                # what a trace is checked against: the key, TTL, Heartbeat, Retries and mode
                key=self.key,
                ttl_ms=ttl,
                renew_every_ms=self.config.renew_every_ms,
                watch=self.config.watch,
                retries=self.config.retries,
                **({} if waiting is None else {"wait_ms": waiting.wait_ms, "queue_ms": queue_ms}),
            )
        command = self._command(Op.ACQUIRE, ttl, None, queue_ms=queue_ms)
        if waiting is not None and self.config.renew_every_ms is not None:
            # Only a renewed section may be handed a key, which lives a short TTL until
            # its first renewal; a replica wait wants its own grant (woken instead).
            command.hand_ms = 0 if command.replicas else waiting.hand_ms(ttl)
        return Step(send=command)

    def acquire_reply(self, now: float, fence: int) -> Step:
        """AcquireReply: ``fence`` > 0 is granted; otherwise held by another owner, and a
        waiting attempt's refusal may last ``-fence`` ms at most."""
        self._guard("AcquireReply", self.phase is Phase.ACQUIRING)
        step = NOTHING
        waiting = self.waiting
        if fence > 0:
            step = self._granted(now, fence)
        elif waiting is not None:
            if waiting.refused(now, -fence):
                self.phase = Phase.WAITING
            else:
                self.phase = Phase.DONE
                self.outcome = Outcome.NOT_ACQUIRED
                if self.observed:
                    self._emit(NotAcquired(self.key, self.client, now, self.attempts))
        elif self.attempts <= self.config.retries:
            self.phase = Phase.BACKOFF
            self.retry_at = now + self.config.retry_delay_ms
        else:
            self.phase = Phase.DONE
            self.outcome = Outcome.NOT_ACQUIRED
            if self.observed:
                self._emit(NotAcquired(self.key, self.client, now, self.attempts))
        if self.recording:
            extra = {} if waiting is None or fence > 0 else {"recheck_ms": -fence}
            self._record("AcquireReply", now, granted=fence > 0, **extra)
        return step

    def _granted(self, now: float, fence: int, handed: bool = False) -> Step:
        """The key is ours with ``fence``, by the last attempt's reply or ``handed`` over by
        a release: either way Redis set its TTL after that attempt was sent, so the lease
        counts from then.  A key handed over has the short TTL the attempt offered
        (``Command.hand_ms``): it is renewed at once, to the section's own TTL."""
        waiting = self.waiting
        ttl = self.config.ttl_ms
        renew_from = self.sent_at
        if waiting is not None:
            waiting.queued = False  # the granting script took us out of the queue
            if handed:
                ttl = waiting.hand_ms(ttl)
                every = self.config.renew_every_ms
                if ttl < self.config.ttl_ms and every is not None:
                    renew_from = now - every  # due now
        claim = self.claim
        self.phase = Phase.HELD
        self.fence = claim.fence(fence)
        self._flags |= _GRANTED
        self.lease_grant(self.sent_at, ttl)
        self.schedule_renewal(renew_from)
        if self.observed:
            waited = now - self.first_sent_at
            self._emit(
                Acquired(
                    self.key, self.client, now, fence, self.attempts, waited,
                    permit=claim.permit,
                )
            )
        if self.lease_expired(now):
            # The grant outlived the lease it gives: no body may start on it.
            return self._lose(now, LossReason.GRANTED_TOO_LATE, body_running=False)
        return NOTHING

    def acquire_fail(self, now: float) -> Step:
        """AcquireFail: the reply never came; the SET may have run, so clean up with our token."""
        self._guard("AcquireFail", self.phase is Phase.ACQUIRING)
        self.phase = Phase.ABANDONED
        if self.waiting is not None:
            self.waiting.queued = True  # the attempt may have queued us: withdraw too
        if self.recording:
            self._record("AcquireFail", now)
        return NOTHING

    # -- waiting (spec/Wait.tla; WAIT_ACTIONS in distlock._core.actions) ----------------------

    @property
    def kind(self) -> Kind:
        """What the key holds: whose queue this section waits in."""
        return Kind.LOCK

    @property
    def block_until(self) -> float | None:
        """While waiting: when the current block must end at the latest."""
        if self.phase is not Phase.WAITING or self.waiting is None:
            return None
        return self.waiting.block_until

    @property
    def block_ends_wait(self) -> bool:
        """While waiting: the current block ends at the waiting deadline, which the client
        must keep itself (Redis ends a block's timeout on its own timers, late)."""
        waiting = self.waiting
        return waiting is not None and waiting.block_until == waiting.until

    @property
    def queued(self) -> bool:
        """Redis may hold a place for us in the key's queue: whoever stops waiting (an
        error, a cancellation) must withdraw it, or other waiters wait for it to expire."""
        return self.waiting is not None and self.waiting.queued

    def block(self, now: float) -> Step:
        """Block: a refused waiter waits on its wake list until ``block_until``."""
        self._guard("Block", self.phase is Phase.WAITING)
        if self.recording:
            self._record("Block", now, until=self.block_until)
        return NOTHING

    def wake(self, now: float, woken: bool, fence: int = 0) -> Step:
        """Wake: the block ended, by a release (``woken``) or at its end.  A release that
        handed us the key sent its ``fence`` (> 0): we hold it, as if our last attempt
        had been granted late.  Otherwise the next attempt follows (the last one if the
        deadline has passed)."""
        self._guard("Wake", self.phase is Phase.WAITING)
        step = NOTHING
        if fence > 0:
            step = self._granted(now, fence, handed=True)
        if self.recording:
            self._record("Wake", now, woken=woken, **({"fence": fence} if fence > 0 else {}))
        return step

    def withdraw(self, now: float) -> Step:
        """Withdraw: a waiter that stops waiting gives up its place in the queue (and
        hands a key, or a wake-up, meant for it on to the next waiter).  Best effort: a place that
        is never withdrawn expires on its own."""
        waiting = self.waiting
        if waiting is None or not waiting.queued:
            return NOTHING
        waiting.queued = False
        if self.phase is Phase.WAITING:
            self.phase = Phase.DONE
            self.outcome = Outcome.NOT_ACQUIRED
        if self.recording:
            self._record("Withdraw", now)
        return Step(send=self._command(Op.WITHDRAW, self.config.ttl_ms, None, True))

    def withdraw_reply(self, now: float) -> Step:
        """WithdrawReply: our place is gone."""
        if self.recording:
            self._record("WithdrawReply", now)
        return NOTHING

    def withdraw_fail(self, now: float) -> Step:
        """WithdrawFail: no answer; our place expires by itself at the latest."""
        if self.recording:
            self._record("WithdrawFail", now)
        return NOTHING

    # -- renewal while the body runs --------------------------------------------------------

    def tick(self, now: float) -> Step:
        """A timer fired: retire the lease if its deadline passed, else renew if due.

        Not an action of its own: it is the scheduler asking which action is enabled.
        """
        if self.phase is not Phase.HELD or self.lost is not None or not self.config.watch:
            return NOTHING
        if self.lease_expired(now):
            return self.lease_timeout(now)
        if self.renew_write is None and self.renew_due(now):
            return self.renew_send(now)
        return NOTHING

    def renew_send(self, now: float) -> Step:
        """RenewSend: the lease is valid on our clock and no renewal is in flight."""
        self._guard(
            "RenewSend",
            self.holding
            and self.config.watch
            and self.renew_write is None
            and self.renew_due(now)
            and not self.lease_expired(now),
        )
        ttl = self.config.ttl_ms
        self.renew_write = write = self.lease_send(now, ttl)
        self.schedule_renewal(now)
        if self.recording:
            self._record("RenewSend", now)
        return Step(send=self._command(Op.RENEW, ttl, write))

    def renew_reply(self, now: float, ok: bool) -> Step:
        """RenewReply: 1 moves the deadline from the send time; 0 means the key is not ours."""
        write = self.renew_write
        self._guard("RenewReply", write is not None)
        assert write is not None
        self.renew_write = None
        step = NOTHING
        # After the body is done the release reply is the authority: ignore the renewal.
        if self.phase is Phase.HELD:
            if ok:
                self.renew_failures = 0
                if self.lost is None:
                    self.lease_confirm(write)
                    left = self.lease_left_ms(now)
                    if self.observed:
                        self._emit(Renewed(self.key, self.client, now, now - write.sent_at, left))
                else:
                    self.lease_settle(write)
            else:
                self.lease_settle(write)
                step = self._lose(now, LossReason.RENEW_REJECTED)
        else:
            self.lease_settle(write)
        if self.recording:
            self._record("RenewReply", now, ok=ok)
        return step

    def renew_fail(self, now: float, error: BaseException | None = None) -> Step:
        """RenewFail: a failed round trip is not a loss; the next tick retries."""
        write = self.renew_write
        self._guard("RenewFail", write is not None)
        assert write is not None
        self.renew_write = None
        self.renew_failures += 1
        self.lease_fail(write)
        self._alarm(RenewFailed(self.key, self.client, now, self.renew_failures, error))
        if self.recording:
            self._record("RenewFail", now, failures=self.renew_failures)
        return NOTHING

    def lease_timeout(self, now: float) -> Step:
        """LeaseTimeout: the deadline passed with no successful renewal (silence is loss)."""
        self._guard(
            "LeaseTimeout", self.holding and self.config.watch and self.lease_expired(now)
        )
        step = self._lose(now, LossReason.DEADLINE_PASSED)
        if self.recording:
            self._record("LeaseTimeout", now)
        return step

    # -- manual extend ---------------------------------------------------------------------

    def extend(self, now: float, ttl_ms: int) -> Step:
        """Extend: a manual, token-checked extend. Nothing to send when no longer held.

        Only a manual handle extends: under run/hold the heartbeat owns the TTL (the spec
        has no Extend there), and a caller's extend would race it.
        """
        if self.config.watch:
            raise UsageError(
                f"extend() is for handles from acquire(); under run/hold the lease of "
                f"{self.key!r} is renewed for you every heartbeat",
                self.key,
            )
        if self.phase is not Phase.HELD or self.extend_write is not None:
            return NOTHING
        self.extend_write = write = self.lease_send(now, ttl_ms)
        if self.recording:
            self._record("Extend", now, ttl_ms=ttl_ms)
        return Step(send=self._command(Op.EXTEND, ttl_ms, write))

    def extend_reply(self, now: float, ok: bool) -> Step:
        """ExtendReply: 1 moves the deadline; 0 fires the signal."""
        write = self.extend_write
        self._guard("ExtendReply", write is not None)
        assert write is not None
        self.extend_write = None
        step = NOTHING
        if ok and self.lost is None:
            self.lease_confirm(write)
            if self.observed:
                left = self.lease_left_ms(now)
                self._emit(Renewed(self.key, self.client, now, now - write.sent_at, left))
        else:
            self.lease_settle(write)
            if not ok and self.phase is Phase.HELD:
                # After release() the release reply is the authority.
                step = self._lose(now, LossReason.EXTEND_REJECTED)
        if self.recording:
            self._record("ExtendReply", now, ok=ok)
        return step

    def extend_fail(self, now: float) -> Step:
        """ExtendFail: the error goes to the caller; the lease is not known lost."""
        write = self.extend_write
        self._guard("ExtendFail", write is not None)
        assert write is not None
        self.extend_write = None
        self.lease_fail(write)
        if self.recording:
            self._record("ExtendFail", now)
        return NOTHING

    # -- completion and release ------------------------------------------------------------

    def body_done(self, now: float) -> Step:
        """BodyDone: check the deadline in the same turn the body finished.

        A starved timer never ran LeaseTimeout; this check is what catches it.
        """
        # Only run/hold has a body the section watches; a manual handle just releases.
        self._guard("BodyDone", self.phase is Phase.HELD and self.config.watch)
        self.phase = Phase.BODY_DONE
        self.finished = True  # before _lose: a finished body is never cancelled
        step = NOTHING
        if self.lease_expired(now):
            step = self._lose(now, LossReason.DEADLINE_AT_COMPLETION)
        if self.recording:
            self._record("BodyDone", now)
        return step

    def release(self, now: float) -> Step:
        """Release: compare-and-delete with our token. Nothing to send if already released."""
        phase = self.phase
        # By identity, not ``in`` a set of phases: an enum member's hash is a Python call.
        cleanup = phase is Phase.ABANDONED
        if not (
            phase is Phase.HELD or phase is Phase.BODY_DONE or cleanup
            or phase is Phase.RELEASE_UNKNOWN
        ):
            return NOTHING
        self.phase = Phase.RELEASING
        if self.recording:
            self._record("Release", now)
        return Step(send=self._command(Op.RELEASE, self.config.ttl_ms, None, cleanup))

    def _abandoned(self) -> bool:
        return not self.granted

    def release_reply(self, now: float, ok: bool) -> Step:
        """ReleaseReply: 1 with no loss recorded is the only success."""
        self._guard("ReleaseReply", self.phase is Phase.RELEASING)
        self.phase = Phase.DONE
        self.release_confirmed = ok
        step = NOTHING
        if self._abandoned():
            self.outcome = Outcome.FAILED
        elif ok and self.lost is None:
            self.outcome = Outcome.OK
        else:
            step = self._lose(now, LossReason.RELEASE_REJECTED)
            self.outcome = Outcome.LOST
        if self.observed and not self._abandoned():
            self._emit(Released(self.key, self.client, now, ok))
        if self.recording:
            self._record("ReleaseReply", now, ok=ok)
        return self._signal_on_release(step)

    def release_fail(self, now: float) -> Step:
        """ReleaseFail: no answer, so no proof the key was ours at the end: not a success.

        A manual handle's caller gets the error and may call release() again: until a
        release is answered, the key may still be ours, and only we can free it early.
        """
        self._guard("ReleaseFail", self.phase is Phase.RELEASING)
        self.phase = Phase.DONE
        step = NOTHING
        if self._abandoned():
            self.outcome = Outcome.FAILED
        elif not self.config.watch:
            self.phase = Phase.RELEASE_UNKNOWN
        else:
            step = self._lose(now, LossReason.RELEASE_UNANSWERED)
            self.outcome = Outcome.LOST
        if self.recording:
            self._record("ReleaseFail", now)
        return self._signal_on_release(step)

    def _signal_on_release(self, step: Step) -> Step:
        # A manual handle's signal fires only from its own extend(); its release() answers
        # with a bool instead.
        return step if self.config.watch else NOTHING

    # -- verdicts --------------------------------------------------------------------------

    def not_acquired_error(self) -> LockNotAcquiredError:
        return LockNotAcquiredError(self.key, self.attempts, permit=self.claim.permit)


def close_section(section: Section, now: float) -> Step:
    """What ``close()`` / ``aclose()`` of the Lock object means for one of its sections.

    A held section loses its lease (the signal fires with
    :attr:`~distlock.errors.LossReason.LOCK_CLOSED`, and an asyncio body is cancelled as
    on any loss): its renewals stop with the Lock, so a body that went on believing it
    held the key would outlive its TTL unrenewed.  Its key is released at once, with one
    attempt (``best_effort``); the reply or failure is the ordinary ReleaseReply or
    ReleaseFail, and the body's exit finds the section over and raises the loss.  Any
    other phase is left to its own flow: a waiter's close is its withdrawal, a body that
    already finished releases on its own.

    Not an action of the specification: nothing in Redis changes, the client gives its
    lease up early, which is always safe (a loss declared before it happens never lets
    two holders believe they are exclusive).  A function rather than a method, so the
    section's methods stay exactly the spec's actions (``tests/test_parity.py``); the
    drivers take it through :func:`distlock._flows.act` like any action.
    """
    if section.phase is not Phase.HELD:
        return NOTHING
    step = section._lose(now, LossReason.LOCK_CLOSED)
    command = section.release(now).send
    assert command is not None
    command.best_effort = True
    return Step(send=command, loss=step.loss, cancel_body=step.cancel_body)


def lock_section(
    key: str, token: int, config: SectionConfig, client: str, record: bool
) -> Section:
    """A ``Lock``'s section, as the drivers make one per lock cycle.

    The class called from interpreted code with keywords goes through the compiled
    build's generic argument parser (its ``__init__`` slot takes a tuple and a dict); a
    function called positionally does not, and makes the section with a direct call."""
    return Section(key, token, config, client=client, record=record)
