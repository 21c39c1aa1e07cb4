"""The lease clock: how long a client may trust a lease it cannot see.

Every primitive that holds something in Redis under a TTL (a lock key, a reentrant
count, a semaphore permit) keeps one.  It knows the TTL-setting requests on the wire and
turns their outcomes into a deadline on the client's clock:

- a confirmed request moves the deadline to its **send time** plus its TTL, because
  Redis ran it no earlier than it was sent (the reply's arrival proves nothing sooner);
- minus a drift allowance, because the client clock may run slow against Redis's;
- counting the **shortest TTL** among the requests that may run last (one in flight, or
  one that failed but may still run), because ``PEXPIRE`` replaces a TTL rather than
  adding to it;
- a request that leaves with a shorter TTL pulls the deadline in at once.

It also keeps the renewal schedule.  It decides nothing about phases or signals: a
machine asks it whether the deadline passed and whether a renewal is due.
"""

from __future__ import annotations

import math

from distlock._core.config import SectionConfig
from distlock._native import mypyc_attr

#: Renewal wake-ups fall on a grid of the heartbeat divided by this, rounded up: sections
#: with one heartbeat that come due within one step of each other wake in the same tick,
#: so a driver can send their renewals together.  A renewal sent up to a step late is one
#: whose timer ran late (the spec's starved timer); the deadline is never rounded.  Each
#: renewal may be a step late, so the round-trip bound of NoSpuriousLoss reads
#: ``(failures + 1) * heartbeat * (1 + 1/RENEW_STEPS) + round trip < ttl - margin``.
RENEW_STEPS = 64


def trusted_ms(ttl_ms: int, drift_factor: float) -> float:
    """How long a TTL of ``ttl_ms``, set no earlier than its send time, may be trusted on
    the client's clock: less a drift allowance, since that clock may run slow."""
    return ttl_ms * (1.0 - drift_factor)


def lease_until(sent_at: float, ttl_ms: int, drift_factor: float) -> float:
    """The deadline of a lease whose TTL of ``ttl_ms`` was set by a request sent at
    ``sent_at``: Redis ran it no earlier than that, and the clock may run slow."""
    return sent_at + trusted_ms(ttl_ms, drift_factor)


def lapsed(now: float, deadline: float) -> bool:
    """Whether a lease with ``deadline`` may have lapsed in Redis by ``now`` (silence is
    loss: at the deadline itself it may already be gone)."""
    return now >= deadline


def renewal_wake(renewed_at: float, every: float, deadline: float) -> float:
    """When a lease renewed every ``every`` ms, last at ``renewed_at``, next needs a tick:
    its renewal on the grid of :data:`RENEW_STEPS`, or its deadline if that comes first."""
    step = every / RENEW_STEPS
    return min(math.ceil((renewed_at + every) / step) * step, deadline)


class Write:
    """A TTL-setting request on the wire: when it left, and the TTL it sets."""

    __slots__ = ("sent_at", "ttl_ms")

    def __init__(self, sent_at: float, ttl_ms: int) -> None:
        self.sent_at = sent_at
        self.ttl_ms = ttl_ms

    def __repr__(self) -> str:
        return f"Write(sent_at={self.sent_at}, ttl_ms={self.ttl_ms})"


# Compiled with mypyc, a class without this can only be made through its __init__, and is
# closed to Python subclasses; the guard replay (tests/guard_replay.py) copies sections
# slot by slot, and tests subclass them.
@mypyc_attr(allow_interpreted_subclasses=True)
class LeaseClock:
    """Deadline and renewal schedule of one lease, on the client's monotonic clock (ms).

    A section *is* its lease clock (:class:`~distlock._core.section.Section` subclasses
    this): the clock's state is plain slots on the one object a held lock keeps, rather
    than a second object of its own, and its terms (drift allowance, heartbeat) are read
    from the section's shared config rather than copied into every lease.  The rules stay
    here, in methods named ``lease_*``, so that they are decided in one place.
    """

    __slots__ = (
        "_in_flight",
        "config",
        "confirmed_at",
        "deadline",
        "renewed_at",
        "unconfirmed_ttl_ms",
    )

    def __init__(self, config: SectionConfig) -> None:
        self.config = config
        self._init_lease()

    def _init_lease(self) -> None:
        #: The instant after which the lease may have lapsed in Redis; 0 until granted.
        self.deadline = 0.0
        #: Send time of the latest confirmed request: the last instant the key was ours.
        self.confirmed_at = -math.inf
        #: When the heartbeat last (re)started: the next renewal is due one interval later.
        #: Kept rather than that sum because it is the send time's own float, which the
        #: section keeps anyway, so a held lock carries no float of its own for it.
        self.renewed_at = math.inf
        #: The shortest TTL among requests that failed but may still run, at any time.
        self.unconfirmed_ttl_ms: int | None = None
        #: Requests on the wire; an empty tuple (shared) while none is, which is most of
        #: the time, so a held lock carries no list of its own.
        self._in_flight: list[Write] | tuple[()] = ()

    @property
    def next_renew_at(self) -> float:
        """When the next renewal is due (never for a lease that is not renewed)."""
        every = self.config.renew_every_ms
        return math.inf if every is None else self.renewed_at + every

    # -- requests on the wire ---------------------------------------------------------------

    def lease_send(self, now: float, ttl_ms: int) -> Write:
        """A TTL-setting request leaves now. If Redis runs it at once, the key ends at
        ``now + ttl_ms``: earlier than the deadline when ``ttl_ms`` is shorter."""
        write = Write(now, ttl_ms)
        if self._in_flight:
            self._in_flight.append(write)  # non-empty: a list
        else:
            self._in_flight = [write]
        self.deadline = min(self.deadline, lease_until(now, ttl_ms, self.config.drift_factor))
        return write

    def lease_grant(self, sent_at: float, ttl_ms: int) -> None:
        """The request sent at ``sent_at`` created the lease (nothing else was on the wire)."""
        self.lease_confirm(Write(sent_at, ttl_ms))

    def lease_confirm(self, write: Write) -> None:
        """``write`` succeeded: the key lives at least until its send time plus the
        shortest TTL among it and the requests that may still run after it."""
        self._settle(write)
        shortest = write.ttl_ms
        for other in self._in_flight:
            shortest = min(shortest, other.ttl_ms)
        if self.unconfirmed_ttl_ms is not None:
            shortest = min(shortest, self.unconfirmed_ttl_ms)
        self.deadline = max(
            self.deadline, lease_until(write.sent_at, shortest, self.config.drift_factor)
        )
        self.confirmed_at = max(self.confirmed_at, write.sent_at)

    def lease_fail(self, write: Write) -> None:
        """``write``'s round trip failed: it may still run, at any later time."""
        self._settle(write)
        if self.unconfirmed_ttl_ms is None or write.ttl_ms < self.unconfirmed_ttl_ms:
            self.unconfirmed_ttl_ms = write.ttl_ms

    def lease_settle(self, write: Write) -> None:
        """``write`` was answered without extending anything (refused, or moot)."""
        self._settle(write)

    def _settle(self, write: Write) -> None:
        # At most a renewal and an extend are ever in flight: a list scan is cheapest.
        in_flight = self._in_flight
        if write in in_flight:
            if len(in_flight) == 1:
                self._in_flight = ()
            else:
                in_flight.remove(write)  # type: ignore[union-attr]  # non-empty: a list

    # -- questions a machine asks -----------------------------------------------------------

    def lease_expired(self, now: float) -> bool:
        """True once the lease may have lapsed in Redis (silence is loss)."""
        return lapsed(now, self.deadline)

    def renew_due(self, now: float) -> bool:
        every = self.config.renew_every_ms
        return every is not None and now >= self.renewed_at + every

    def schedule_renewal(self, now: float) -> None:
        """Start (or restart) the heartbeat: the next renewal is due one interval from ``now``."""
        if self.config.renew_every_ms is not None:
            self.renewed_at = now

    def lease_wake_at(self, renewing: bool) -> float:
        """When the next tick is needed: the deadline, or the renewal if one is due first."""
        every = self.config.renew_every_ms
        if renewing or every is None:
            return self.deadline
        return renewal_wake(self.renewed_at, every, self.deadline)

    def lease_left_ms(self, now: float) -> float:
        return self.deadline - now
