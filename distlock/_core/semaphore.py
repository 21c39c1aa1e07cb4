"""The semaphore's pure machine: one :class:`SemaphoreSection` per permit.

A permit is a lease exactly as a lock's key is: the same client-side actions (``Acquire``,
``RenewSend``, ``LeaseTimeout``, ``BodyDone``, ``Release``, ...), the same guards, the
same :class:`~distlock._core.lease.LeaseClock` (the deadline is the send time plus the TTL,
less drift; silence past it is loss; a renewal answered 0 is loss).  Only two things
differ, and neither is a decision of the client:

- the encoding: the commands carry ``Kind.SEMAPHORE`` and the ``limit``, and
  :mod:`distlock._protocol` carries them out with the ``S_*`` scripts on a sorted set of
  token -> expiry instant, judged by Redis's clock;
- there is no fence: a permit is one of ``limit``, so no order among holders exists for a
  resource to check.  The acquire reply is 1 (granted) or 0 (no free permit).

``Section`` is subclassed rather than copied so that a fix to a lease rule is a fix to
every primitive, and ``tests/test_parity.py`` keeps one vocabulary for both.
"""

from __future__ import annotations

from typing import Any

from distlock._core.commands import Command, Kind, Op, Step
from distlock._core.lease import Write
from distlock._core.section import Section, SectionConfig
from distlock.errors import LockLeaseLostError, LockNotAcquiredError, LossReason
from distlock.events import Acquired, Event

__all__ = ["SemaphoreSection"]


class SemaphoreSection(Section):
    """One client's permit of one semaphore id, from the first request to the verdict."""

    __slots__ = ("granted", "limit")

    def __init__(
        self,
        key: str,
        token: str | int,
        config: SectionConfig,
        *,
        limit: int,
        client: str = "c",
        record: bool = False,
    ) -> None:
        #: How many permits of the key may be live at once, as this caller counts them:
        #: each acquire compares the live count with its own limit.
        self.limit = limit
        super().__init__(key, token, config, client=client, record=record)

    def _init_state(self) -> None:
        super()._init_state()
        #: Redis granted the permit at some point (what a lock learns from its fence).
        self.granted = False

    def _command(
        self,
        op: Op,
        ttl_ms: int,
        write: Write | None,
        best_effort: bool = False,
        queue_ms: int | None = None,
    ) -> Command:
        return self._acknowledged(
            Command(
                op,
                self.key,
                self.token,
                ttl_ms,
                write,
                best_effort,
                kind=Kind.SEMAPHORE,
                limit=self.limit,
                queue_ms=queue_ms,
            )
        )

    @property
    def kind(self) -> Kind:
        return Kind.SEMAPHORE

    def acquire_reply(self, now: float, granted: int) -> Step:
        """AcquireReply (the lock's): 1 is a permit, 0 is no free permit."""
        step = super().acquire_reply(now, granted)
        if granted > 0:
            self.granted = True
            # The lock's machine kept the reply as a fence; a permit has none.
            self.fence = None
        return step

    def _emit(self, event: Event) -> None:
        # The lock's grant event, marked as a permit's: its fence is the script's 1.
        if isinstance(event, Acquired):
            event = Acquired(
                event.key, event.client, event.t, event.fence, event.attempts,
                event.waited_ms, permit=True,
            )
        super()._emit(event)

    def _loss_error(self, reason: LossReason) -> LockLeaseLostError:
        return LockLeaseLostError(self.key, reason, permit=True)

    def not_acquired_error(self) -> LockNotAcquiredError:
        return LockNotAcquiredError(self.key, self.attempts, permit=True)

    def _abandoned(self) -> bool:
        return not self.granted

    def _record(self, action: str, now: float, **extra: Any) -> None:
        if action == "Acquire":
            # What a trace is checked against besides the lock's: the key kind and limit.
            extra["kind"] = Kind.SEMAPHORE.value
            extra["limit"] = self.limit
        super()._record(action, now, **{**extra, "fence": None})
