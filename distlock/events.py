"""Typed lifecycle events, and the observers that receive them.

Every section emits events as it goes: :class:`Acquired`, :class:`NotAcquired`,
:class:`Renewed`, :class:`RenewFailed`, :class:`Lost` and :class:`Released`.  Pass
``observers=[callable, ...]`` to a ``Lock`` to receive them.  The pure core only makes
them; the drivers hand them to observers after the transition, outside any lock, so an
observer may log, count or export without being able to corrupt a lease.  In the sync
driver no observer runs on the timer thread, so a slow one delays only the section it
observes; in asyncio observers run on the event loop like any callback, so keep them quick.

>>> from distlock.events import Lost
>>> def alert(event):
...     if isinstance(event, Lost):
...         print(f"{event.key} lost: {event.reason.name}")

:class:`Transition` is the finer grain: one per state-machine transition, named after the
TLA+ action.  ``trace=`` receives those, in the order they happened (see
:mod:`distlock.trace`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from distlock.errors import LossReason


@dataclass(frozen=True, slots=True)
class Acquired:
    """The lock was granted. ``attempts`` counts refusals too; ``waited_ms`` is from the
    first attempt's send to the grant's arrival.  A semaphore permit has no fence: its
    ``fence`` is 1, the acquire script's "granted", and ``permit`` is True (an exporter
    must not report that 1 as a fence)."""

    key: str
    client: str
    t: float
    fence: int
    attempts: int
    waited_ms: float
    permit: bool = False


@dataclass(frozen=True, slots=True)
class NotAcquired:
    """Every allowed attempt found the lock held by another owner."""

    key: str
    client: str
    t: float
    attempts: int


@dataclass(frozen=True, slots=True)
class Renewed:
    """A renewal (or a manual extend) was confirmed: ``lease_left_ms`` is how long the
    client now trusts the lease."""

    key: str
    client: str
    t: float
    rtt_ms: float
    lease_left_ms: float


@dataclass(frozen=True, slots=True)
class RenewFailed:
    """A renewal round trip failed. Not a loss: the next heartbeat retries, and the
    deadline decides. ``failures`` counts consecutive failures."""

    key: str
    client: str
    t: float
    failures: int
    error: BaseException | None


@dataclass(frozen=True, slots=True)
class Lost:
    """The lease is known lost; ``detection_delay_ms`` is the time since the send of the
    last request Redis confirmed (the last instant the key was known to be ours)."""

    key: str
    client: str
    t: float
    reason: LossReason
    detection_delay_ms: float


@dataclass(frozen=True, slots=True)
class Released:
    """The release was answered: ``ok`` is True when the key was still ours."""

    key: str
    client: str
    t: float
    ok: bool


@dataclass(frozen=True, slots=True)
class Transition:
    """One transition of a section's state machine, named after the TLA+ action."""

    action: str
    client: str
    t: float
    fields: Mapping[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The flat form written to NDJSON traces and read by trace validation."""
        out: dict[str, Any] = {"action": self.action, "client": self.client, "t": self.t}
        out.update(self.fields)
        return out


Event = Acquired | NotAcquired | Renewed | RenewFailed | Lost | Released
#: Receives lifecycle events. What it returns is ignored; what it raises is logged.
Observer = Callable[[Event], object]
#: Receives every transition, in order (``Lock(trace=...)``).
TraceObserver = Callable[[dict[str, Any]], object]

__all__ = [
    "Acquired",
    "Event",
    "Lost",
    "NotAcquired",
    "Observer",
    "Released",
    "RenewFailed",
    "Renewed",
    "TraceObserver",
    "Transition",
]
