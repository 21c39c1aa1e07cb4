"""The pure lock state machine: no sockets, no clocks, no threads.

One :class:`Section` follows one acquisition from the first request to the final verdict.
Time (``now``, milliseconds on the client's monotonic clock) and Redis replies are inputs;
the commands to put on the wire and the moment the loss becomes known are outputs.  Each
public method is one client-side action of ``spec/DistLock.tla`` with the same name in
snake case (``RenewSend`` is :meth:`Section.renew_send`), the same guard and the same effect.

The sync and asyncio drivers only do IO and feed events in; every decision (when to renew,
when the lease is lost, what the caller finally sees) is made here, once.
"""

from __future__ import annotations

import enum
from asyncio import CancelledError
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from distlock.errors import LockLeaseLostError, LockNotAcquiredError, LossReason, ProtocolError

Trace = Callable[[dict[str, Any]], None]


class Phase(enum.Enum):
    IDLE = "idle"
    ACQUIRING = "acquiring"
    BACKOFF = "backoff"
    HELD = "held"
    BODY_DONE = "body_done"
    ABANDONED = "abandoned"
    RELEASING = "releasing"
    DONE = "done"


class Outcome(enum.Enum):
    NONE = "none"
    OK = "ok"
    NOT_ACQUIRED = "not_acquired"
    LOST = "lost"
    FAILED = "failed"


class Op(enum.Enum):
    """A script to run against the section's key."""

    ACQUIRE = "acquire"
    EXTEND = "extend"
    RELEASE = "release"


@dataclass(frozen=True, slots=True)
class Step:
    """What a transition asks of the driver.

    ``send``: run this script now.  ``loss``: the lease just became known lost; fire the
    signal with it (and, when ``cancel_body``, cancel the body).
    """

    send: Op | None = None
    loss: LockLeaseLostError | None = None
    cancel_body: bool = False


NOTHING: Final = Step()

_HOLDING: Final = frozenset({Phase.HELD})
_RELEASABLE: Final = frozenset({Phase.HELD, Phase.BODY_DONE, Phase.ABANDONED})


@dataclass(frozen=True, slots=True)
class SectionConfig:
    """Everything a section needs to decide, already validated by :mod:`distlock.options`."""

    ttl_ms: int
    retries: int = 0
    retry_delay_ms: float = 100.0
    #: Renewal interval while the body runs; None for a manual handle or heartbeat_ms=False.
    renew_every_ms: int | None = None
    #: Watch the deadline in the background and fire the signal when it passes (run/hold).
    watch: bool = False
    cancel_on_loss: bool = False
    drift_factor: float = 0.01
    #: Told about each failed renewal round trip (telemetry: a failed trip is not a loss).
    on_renew_error: Callable[[BaseException], object] | None = None

    def lease_ms(self, ttl_ms: int) -> float:
        """How long the client may trust a lease of ``ttl_ms`` granted at the send time."""
        return ttl_ms * (1.0 - self.drift_factor)


class Section:
    """One client's acquisition of one key, from the first request to the verdict."""

    __slots__ = (
        "_trace",
        "attempts",
        "cancel_requested",
        "client",
        "config",
        "deadline",
        "extend_in_flight",
        "extend_sent_at",
        "extend_ttl_ms",
        "fence",
        "finished",
        "key",
        "lost",
        "next_renew_at",
        "outcome",
        "phase",
        "release_confirmed",
        "renew_failures",
        "renew_in_flight",
        "renew_sent_at",
        "retry_at",
        "sent_at",
        "token",
        "unconfirmed_ttl_ms",
    )

    def __init__(
        self,
        key: str,
        token: str,
        config: SectionConfig,
        *,
        client: str = "c",
        trace: Trace | None = None,
    ) -> None:
        self.key = key
        self.token = token
        self.config = config
        self.client = client
        self._trace = trace

        self.phase = Phase.IDLE
        self.outcome = Outcome.NONE
        self.attempts = 0
        self.retry_at = 0.0
        self.sent_at = 0.0
        self.fence: int | None = None
        #: Client-clock instant after which the lease may have lapsed in Redis.
        self.deadline = 0.0
        #: The shortest TTL among requests that failed but may still have run.
        self.unconfirmed_ttl_ms: int | None = None
        self.renew_in_flight = False
        self.renew_sent_at = 0.0
        self.next_renew_at = 0.0
        self.renew_failures = 0
        self.extend_in_flight = False
        self.extend_sent_at = 0.0
        self.extend_ttl_ms = config.ttl_ms
        self.finished = False
        #: The signal: set once, the moment the loss is known; never cleared.
        self.lost: LockLeaseLostError | None = None
        self.cancel_requested = False
        self.release_confirmed: bool | None = None

    # -- helpers ---------------------------------------------------------------------------

    def _guard(self, action: str, ok: bool) -> None:
        if not ok:
            raise ProtocolError(
                f"{action} is not possible in phase {self.phase.value} for {self.key!r}",
                self.key,
            )

    def _record(self, action: str, now: float, **extra: Any) -> None:
        # Callers test ``self._trace`` first, so tracing off costs one attribute check.
        assert self._trace is not None
        event: dict[str, Any] = {
            "action": action,
            "client": self.client,
            "t": now,
            "phase": self.phase.value,
            "outcome": self.outcome.value,
            "lost": self.lost is not None,
            "deadline": self.deadline,
            "renew_in_flight": self.renew_in_flight,
            "fence": self.fence,
        }
        event.update(extra)
        self._trace(event)

    def _lose(self, reason: LossReason, *, body_running: bool = True) -> Step:
        if self.lost is not None:
            return NOTHING
        self.lost = LockLeaseLostError(self.key, reason)
        cancel = self.config.cancel_on_loss and body_running and not self.finished
        self.cancel_requested = self.cancel_requested or cancel
        return Step(loss=self.lost, cancel_body=cancel)

    def _confirm(self, sent_at: float, ttl_ms: int) -> None:
        """A TTL-setting request sent at ``sent_at`` succeeded: move the deadline.

        Redis ran it no earlier than our send, so the key lives at least until
        ``sent_at + ttl_ms``, unless a request that may run after it sets a shorter TTL
        (PEXPIRE replaces, it does not extend): one still in flight, or one whose outcome
        we never learnt.  Any of those may be the last to run, so the shortest of their
        TTLs is the one we can count on.
        """
        shortest = ttl_ms
        if self.renew_in_flight:
            shortest = min(shortest, self.config.ttl_ms)
        if self.extend_in_flight:
            shortest = min(shortest, self.extend_ttl_ms)
        if self.unconfirmed_ttl_ms is not None:
            shortest = min(shortest, self.unconfirmed_ttl_ms)
        self.deadline = max(self.deadline, sent_at + self.config.lease_ms(shortest))

    def _bound(self, now: float, ttl_ms: int) -> None:
        """A TTL-setting request leaves now: if Redis runs it at once, the key ends at
        ``now + ttl_ms``, which is earlier than the deadline when ``ttl_ms`` is shorter."""
        self.deadline = min(self.deadline, now + self.config.lease_ms(ttl_ms))

    def _unconfirmed(self, ttl_ms: int) -> None:
        # A failed round trip may still have run, at any later time.
        if self.unconfirmed_ttl_ms is None or ttl_ms < self.unconfirmed_ttl_ms:
            self.unconfirmed_ttl_ms = ttl_ms

    @property
    def holding(self) -> bool:
        """Held and not known lost: the section may believe it is exclusive."""
        return self.phase is Phase.HELD and self.lost is None

    @property
    def release_error_to_caller(self) -> bool:
        """A manual release() reports a failed round trip; run/hold report it as a loss."""
        return not self.config.watch

    @property
    def wake_at(self) -> float | None:
        """When the driver must next call :meth:`tick` (or retry :meth:`acquire`), if ever."""
        if self.phase is Phase.BACKOFF:
            return self.retry_at
        if self.phase is not Phase.HELD or self.lost is not None or not self.config.watch:
            return None
        every = self.config.renew_every_ms
        if every is None or self.renew_in_flight:
            return self.deadline
        return min(self.next_renew_at, self.deadline)

    # -- acquisition -----------------------------------------------------------------------

    def acquire(self, now: float) -> Step:
        """Acquire: send SET NX PX (and mint the fence) in one script."""
        self._guard(
            "Acquire",
            self.phase is Phase.IDLE or (self.phase is Phase.BACKOFF and now >= self.retry_at),
        )
        self.phase = Phase.ACQUIRING
        self.attempts += 1
        self.sent_at = now
        if self._trace is not None:
            self._record(
                "Acquire",
                now,
                attempt=self.attempts,
                # what a trace is checked against: the key, TTL, Heartbeat, Retries and mode
                key=self.key,
                ttl_ms=self.config.ttl_ms,
                renew_every_ms=self.config.renew_every_ms,
                watch=self.config.watch,
                retries=self.config.retries,
            )
        return Step(send=Op.ACQUIRE)

    def acquire_reply(self, now: float, fence: int) -> Step:
        """AcquireReply: ``fence`` > 0 is granted, 0 is held by another owner."""
        self._guard("AcquireReply", self.phase is Phase.ACQUIRING)
        step = NOTHING
        if fence > 0:
            self.phase = Phase.HELD
            self.fence = fence
            self._confirm(self.sent_at, self.config.ttl_ms)
            if self.config.renew_every_ms is not None:
                self.next_renew_at = self.sent_at + self.config.renew_every_ms
            if now >= self.deadline:
                # The reply outlived the lease it grants: no body may start on it.
                step = self._lose(LossReason.GRANTED_TOO_LATE, body_running=False)
        elif self.attempts <= self.config.retries:
            self.phase = Phase.BACKOFF
            self.retry_at = now + self.config.retry_delay_ms
        else:
            self.phase = Phase.DONE
            self.outcome = Outcome.NOT_ACQUIRED
        if self._trace is not None:
            self._record("AcquireReply", now, granted=fence > 0)
        return step

    def acquire_fail(self, now: float) -> Step:
        """AcquireFail: the reply never came; the SET may have run, so clean up with our token."""
        self._guard("AcquireFail", self.phase is Phase.ACQUIRING)
        self.phase = Phase.ABANDONED
        if self._trace is not None:
            self._record("AcquireFail", now)
        return NOTHING

    # -- renewal while the body runs --------------------------------------------------------

    def tick(self, now: float) -> Step:
        """A timer fired: retire the lease if its deadline passed, else renew if due.

        Not an action of its own: it is the scheduler asking which action is enabled.
        """
        if self.phase is not Phase.HELD or self.lost is not None or not self.config.watch:
            return NOTHING
        if now >= self.deadline:
            return self.lease_timeout(now)
        every = self.config.renew_every_ms
        if every is not None and not self.renew_in_flight and now >= self.next_renew_at:
            return self.renew_send(now)
        return NOTHING

    def renew_send(self, now: float) -> Step:
        """RenewSend: the lease is valid on our clock and no renewal is in flight."""
        self._guard(
            "RenewSend",
            self.holding
            and self.config.renew_every_ms is not None
            and not self.renew_in_flight
            and now < self.deadline,
        )
        every = self.config.renew_every_ms
        assert every is not None
        self.renew_in_flight = True
        self.renew_sent_at = now
        self.next_renew_at = now + every
        self._bound(now, self.config.ttl_ms)
        if self._trace is not None:
            self._record("RenewSend", now)
        return Step(send=Op.EXTEND)

    def renew_reply(self, now: float, ok: bool) -> Step:
        """RenewReply: 1 moves the deadline from the send time; 0 means the key is not ours."""
        self._guard("RenewReply", self.renew_in_flight)
        self.renew_in_flight = False
        step = NOTHING
        # After the body is done the release reply is the authority: ignore the renewal.
        if self.phase is Phase.HELD:
            if ok:
                self.renew_failures = 0
                if self.lost is None:
                    self._confirm(self.renew_sent_at, self.config.ttl_ms)
            else:
                step = self._lose(LossReason.RENEW_REJECTED)
        if self._trace is not None:
            self._record("RenewReply", now, ok=ok)
        return step

    def renew_fail(self, now: float) -> Step:
        """RenewFail: a failed round trip is not a loss; the next tick retries."""
        self._guard("RenewFail", self.renew_in_flight)
        self.renew_in_flight = False
        self.renew_failures += 1
        self._unconfirmed(self.config.ttl_ms)
        if self._trace is not None:
            self._record("RenewFail", now, failures=self.renew_failures)
        return NOTHING

    def lease_timeout(self, now: float) -> Step:
        """LeaseTimeout: the deadline passed with no successful renewal (silence is loss)."""
        self._guard("LeaseTimeout", self.holding and now >= self.deadline)
        step = self._lose(LossReason.DEADLINE_PASSED)
        if self._trace is not None:
            self._record("LeaseTimeout", now)
        return step

    # -- manual extend ---------------------------------------------------------------------

    def extend(self, now: float, ttl_ms: int) -> Step:
        """Extend: a manual, token-checked extend. Nothing to send when no longer held."""
        if self.phase is not Phase.HELD or self.extend_in_flight:
            return NOTHING
        self.extend_in_flight = True
        self.extend_sent_at = now
        self.extend_ttl_ms = ttl_ms
        self._bound(now, ttl_ms)
        if self._trace is not None:
            self._record("Extend", now, ttl_ms=ttl_ms)
        return Step(send=Op.EXTEND)

    def extend_reply(self, now: float, ok: bool) -> Step:
        """ExtendReply: 1 moves the deadline; 0 fires the signal."""
        self._guard("ExtendReply", self.extend_in_flight)
        self.extend_in_flight = False
        step = NOTHING
        if ok:
            if self.lost is None:
                self._confirm(self.extend_sent_at, self.extend_ttl_ms)
        elif self.phase is Phase.HELD:  # after release() the release reply is the authority
            step = self._lose(LossReason.EXTEND_REJECTED)
        if self._trace is not None:
            self._record("ExtendReply", now, ok=ok)
        return step

    def extend_fail(self, now: float) -> Step:
        """ExtendFail: the error goes to the caller; the lease is not known lost."""
        self._guard("ExtendFail", self.extend_in_flight)
        self.extend_in_flight = False
        self._unconfirmed(self.extend_ttl_ms)
        if self._trace is not None:
            self._record("ExtendFail", now)
        return NOTHING

    # -- completion and release ------------------------------------------------------------

    def body_done(self, now: float) -> Step:
        """BodyDone: check the deadline in the same turn the body finished.

        A starved timer never ran LeaseTimeout; this check is what catches it.
        """
        self._guard("BodyDone", self.phase is Phase.HELD)
        self.phase = Phase.BODY_DONE
        self.finished = True  # before _lose: a finished body is never cancelled
        step = NOTHING
        if now >= self.deadline:
            step = self._lose(LossReason.DEADLINE_AT_COMPLETION)
        if self._trace is not None:
            self._record("BodyDone", now)
        return step

    def release(self, now: float) -> Step:
        """Release: compare-and-delete with our token. Nothing to send if already released."""
        if self.phase not in _RELEASABLE:
            return NOTHING
        self.phase = Phase.RELEASING
        if self._trace is not None:
            self._record("Release", now)
        return Step(send=Op.RELEASE)

    def _abandoned(self) -> bool:
        return self.fence is None

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
            step = self._lose(LossReason.RELEASE_REJECTED)
            self.outcome = Outcome.LOST
        if self._trace is not None:
            self._record("ReleaseReply", now, ok=ok)
        return self._signal_on_release(step)

    def release_fail(self, now: float) -> Step:
        """ReleaseFail: no answer, so no proof the key was ours at the end: not a success."""
        self._guard("ReleaseFail", self.phase is Phase.RELEASING)
        self.phase = Phase.DONE
        step = NOTHING
        if self._abandoned():
            self.outcome = Outcome.FAILED
        else:
            step = self._lose(LossReason.RELEASE_UNANSWERED)
            self.outcome = Outcome.LOST
        if self._trace is not None:
            self._record("ReleaseFail", now)
        return self._signal_on_release(step)

    def _signal_on_release(self, step: Step) -> Step:
        # A manual handle's signal fires only from its own extend(); its release() answers
        # with a bool instead.
        return step if self.config.watch else NOTHING

    # -- verdicts --------------------------------------------------------------------------

    def not_acquired_error(self) -> LockNotAcquiredError:
        return LockNotAcquiredError(self.key, self.attempts)

    def verdict(self, body_error: BaseException | None) -> BaseException | None:
        """What a ``run``/``hold`` caller sees once the section is over: see :func:`verdict`."""
        return verdict([self], self.lost, body_error)


def verdict(
    sections: Sequence[Section],
    first_loss: LockLeaseLostError | None,
    body_error: BaseException | None,
) -> BaseException | None:
    """What a ``run``/``hold`` caller sees once every section it held is over.

    ``first_loss`` is the signal's reason (for a group, the first loss among its sections).

    - success (every section ok): the body's own exception, if any, else nothing;
    - the body raised the loss itself (the signal's reason): that, unchanged;
    - the body was cancelled because of the loss: the loss;
    - the body was cancelled from outside: the cancellation, which the caller asked for;
    - any other loss: the loss, chained from the body's exception by the driver, because a
      loss is never hidden behind another error.
    """
    if all(s.outcome is Outcome.OK for s in sections):
        return body_error
    loss = first_loss
    if loss is None:
        loss = next((s.lost for s in sections if s.lost is not None), None)
    if loss is None:
        first = sections[0]
        raise ProtocolError(f"no verdict in phase {first.phase.value}", first.key)
    if body_error is loss:
        return body_error
    if isinstance(body_error, CancelledError) and not any(s.cancel_requested for s in sections):
        return body_error
    return loss
