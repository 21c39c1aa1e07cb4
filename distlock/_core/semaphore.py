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
  resource to check.  The acquire reply is 1 (granted) or 0 (no free permit).  The
  section supplies :data:`~distlock._core.section.PERMIT_CLAIM` as its grant's rules (no
  fence kept; events and errors say "permit") where a lock supplies ``LOCK_CLAIM``.

``Section`` is subclassed rather than copied so that a fix to a lease rule is a fix to
every primitive, and ``tests/test_parity.py`` keeps one vocabulary for both.
"""

from __future__ import annotations

from typing import Any

from distlock._core.commands import Command, Kind
from distlock._core.section import PERMIT_CLAIM, Claim, Section, SectionConfig

__all__ = ["SemaphoreSection"]


class SemaphoreSection(Section):
    """One client's permit of one semaphore id, from the first request to the verdict."""

    __slots__ = ("limit",)

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

    def _fill(self, command: Command) -> None:
        command.kind = Kind.SEMAPHORE
        command.limit = self.limit

    @property
    def kind(self) -> Kind:
        return Kind.SEMAPHORE

    @property
    def claim(self) -> Claim:
        """A permit's grant: the reply is 1, "granted", and leaves no fence."""
        return PERMIT_CLAIM

    def _record(self, action: str, now: float, **extra: Any) -> None:
        if action == "Acquire":
            # What a trace is checked against besides the lock's: the key kind and limit.
            extra["kind"] = Kind.SEMAPHORE.value
            extra["limit"] = self.limit
        super()._record(action, now, **extra)
