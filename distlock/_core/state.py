"""The state of the lock's machine, apart from its actions: what a section keeps.

:class:`SectionState` is the base of :class:`~distlock._core.section.Section`: the slots
of one acquisition (phase, outcome, attempts, fence, the write in flight, the signal), the
flags kept as bits of one int, the outbox of transitions and lifecycle events, the guard
every action starts with, and the commands it builds.  The actions, one per client-side
action of ``spec/DistLock.tla``, are in :mod:`distlock._core.section`; they are apart so
that each module reads as one thing, and the split costs a held lock nothing (one object,
its class's slots).
"""

from __future__ import annotations

import enum
from typing import Any, Final

from distlock._core.commands import ACKNOWLEDGED_OPS, NOTHING, Command, Op, Step
from distlock._core.config import SectionConfig
from distlock._core.lease import LeaseClock, Write
from distlock._core.waiting import Waiting
from distlock._native import mypyc_attr
from distlock.errors import LockLeaseLostError, LossReason, ProtocolError
from distlock.events import Event, Lost, Transition


class Phase(enum.Enum):
    IDLE = "idle"
    ACQUIRING = "acquiring"
    BACKOFF = "backoff"
    #: Refused while waiting: in the key's queue, blocked until a release wakes us or the
    #: refusal may have run out.
    WAITING = "waiting"
    HELD = "held"
    BODY_DONE = "body_done"
    ABANDONED = "abandoned"
    RELEASING = "releasing"
    #: A manual handle's release got no answer: the key may or may not be gone, and
    #: release() may be called again (it sends again).
    RELEASE_UNKNOWN = "release_unknown"
    DONE = "done"


class Outcome(enum.Enum):
    NONE = "none"
    OK = "ok"
    NOT_ACQUIRED = "not_acquired"
    LOST = "lost"
    FAILED = "failed"


#: Bits of ``Section._flags``.
_RECORDING: Final = 1
_FINISHED: Final = 2
_CANCEL_REQUESTED: Final = 4
_RELEASE_ANSWERED: Final = 8
_RELEASE_OK: Final = 16
_GRANTED: Final = 32


class Claim:
    """The rules of a grant that a primitive supplies to its section: what the granting
    reply leaves the section, and what its events and errors call the thing held.

    A lock's reply is its fence (> 0), kept with the section (``Section.fence``); a
    semaphore's is 1, "granted": a permit is one of ``limit`` and has no fence, so nothing
    is kept, and its events and errors say it is a permit.  Every other rule of a grant
    (the lease from the send time, the renewal schedule, a grant that outlived its lease)
    is the section's, the same for both.
    """

    __slots__ = ("fenced", "permit")

    def __init__(self, *, fenced: bool, permit: bool) -> None:
        #: A granting reply is a fence to keep.
        self.fenced = fenced
        #: What is held is a semaphore's permit (``permit=True`` on events and errors).
        self.permit = permit

    def fence(self, reply: int) -> int | None:
        """The fence a granting ``reply`` gives the section, if any."""
        return reply if self.fenced else None


#: A lock's (and a reentrant lock's) grant: the reply is the fence.
LOCK_CLAIM: Final = Claim(fenced=True, permit=False)
#: A semaphore permit's grant: the reply is 1, and no fence.
PERMIT_CLAIM: Final = Claim(fenced=False, permit=True)


# Compiled with mypyc (the default build, see setup.py), a class is closed to Python subclasses
# unless it says otherwise; tests record and break sections by subclassing this one.
@mypyc_attr(allow_interpreted_subclasses=True)
class SectionState(LeaseClock):
    """What a section keeps, and the bookkeeping every action shares: its slots, its flags,
    the outbox of events, the guard, and the commands it puts on the wire.  The actions
    themselves are :class:`~distlock._core.section.Section`'s."""

    __slots__ = (
        "_flags",
        "_token",
        "_write",
        "attempts",
        "client",
        "events",
        "fence",
        "first_sent_at",
        "key",
        "lost",
        "outcome",
        "phase",
        "renew_failures",
        "retry_at",
        "sent_at",
        "waiting",
    )

    def __init__(
        self,
        key: str,
        token: str | int,
        config: SectionConfig,
        *,
        client: str = "c",
        record: bool = False,
    ) -> None:
        self.key = key
        #: 128 random bits as an int (a Lock's tokens: 44 B, where their 32 hex digits
        #: take 81 B and 16 raw bytes 49 B), or a str as it goes on the wire (tests name
        #: theirs).
        self._token = token
        self.config = config
        self.client = client
        #: The booleans below (``recording``, ``finished``, ``cancel_requested``,
        #: ``release_confirmed``, ``granted``), as bits of one int: a slot each cost a held
        #: lock 24 B.
        self._flags = _RECORDING if record else 0
        #: The outbox: transitions (when recorded), lifecycle events (when observed), and
        #: failures (a failed renewal, a loss) always, because they are logged.
        self.events: list[Transition | Event] | None = (
            [] if record or config.observed else None
        )
        self._init_state()

    def _init_state(self) -> None:
        config = self.config
        self._init_lease()
        self.phase = Phase.IDLE
        self.outcome = Outcome.NONE
        self.attempts = 0
        self.retry_at = 0.0
        self.sent_at = 0.0
        self.first_sent_at = 0.0
        self.fence: int | None = None
        #: The section's own lease write in flight: a renewal under run/hold, an extend
        #: for a manual handle.  Never both (extend() is refused under run/hold, and a
        #: manual handle is never renewed), so one slot holds either: see renew_write.
        self._write: Write | None = None
        self.renew_failures = 0
        # Not finished, no cancel requested, no release answered, not granted.
        self._flags &= _RECORDING
        #: The signal: set once, the moment the loss is known; never cleared.
        self.lost: LockLeaseLostError | None = None
        self.waiting = Waiting(config.wait_ms, config.ttl_ms) if config.wait_ms else None

    @property
    def token(self) -> str:
        """The owner's token as it goes on the wire: 32 hex digits of the random bits.

        Made on each use (a command, a wake-up list's name) rather than kept: a held lock
        keeps its 128 random bits as an int, not as 32 digits and a str's header.  Through
        its 16 bytes rather than a format spec: the same digits (lowercase, zero-padded) in
        less than half the time, and a cycle, which makes two, misses the instruction cache
        9% less often (valgrind: the format spec's code paths are long, and little else
        in a cycle uses them)."""
        token = self._token
        return token if isinstance(token, str) else token.to_bytes(16, "big").hex()

    def _set(self, bit: int, on: bool) -> None:
        self._flags = self._flags | bit if on else self._flags & ~bit

    @property
    def renew_write(self) -> Write | None:
        """The renewal in flight (only run/hold renews)."""
        return self._write if self.config.watch else None

    @renew_write.setter
    def renew_write(self, write: Write | None) -> None:
        self._write = write

    @property
    def extend_write(self) -> Write | None:
        """The manual extend in flight (only a handle from acquire() extends)."""
        return None if self.config.watch else self._write

    @extend_write.setter
    def extend_write(self, write: Write | None) -> None:
        self._write = write

    @property
    def recording(self) -> bool:
        """Transitions go to the outbox only when someone records them (trace=)."""
        return bool(self._flags & _RECORDING)

    @recording.setter
    def recording(self, on: bool) -> None:
        self._set(_RECORDING, on)

    @property
    def finished(self) -> bool:
        """The body is done (BodyDone ran): a loss after it cancels nothing."""
        return bool(self._flags & _FINISHED)

    @finished.setter
    def finished(self, on: bool) -> None:
        self._set(_FINISHED, on)

    @property
    def cancel_requested(self) -> bool:
        """A loss asked for the body to be cancelled."""
        return bool(self._flags & _CANCEL_REQUESTED)

    @cancel_requested.setter
    def cancel_requested(self, on: bool) -> None:
        self._set(_CANCEL_REQUESTED, on)

    @property
    def release_confirmed(self) -> bool | None:
        """The release's answer: True (the key was ours), False, or None (none yet)."""
        flags = self._flags
        return bool(flags & _RELEASE_OK) if flags & _RELEASE_ANSWERED else None

    @release_confirmed.setter
    def release_confirmed(self, ok: bool | None) -> None:
        flags = self._flags & ~(_RELEASE_ANSWERED | _RELEASE_OK)
        if ok is not None:
            flags |= _RELEASE_ANSWERED | (_RELEASE_OK if ok else 0)
        self._flags = flags

    @property
    def granted(self) -> bool:
        """Redis granted the key (or the permit) at some point."""
        return bool(self._flags & _GRANTED)

    @property
    def claim(self) -> Claim:
        """The rules of a grant this primitive supplies: the lock's, with a fence."""
        return LOCK_CLAIM

    # -- what the spec observes -------------------------------------------------------------

    @property
    def renew_in_flight(self) -> bool:
        return self.renew_write is not None

    @property
    def extend_in_flight(self) -> bool:
        return self.extend_write is not None

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
        """When the driver must next call :meth:`tick`, if ever (backoff sleeps are the
        flow's own)."""
        if self.phase is not Phase.HELD or self.lost is not None or not self.config.watch:
            return None
        return self.lease_wake_at(self.renew_write is not None)

    # -- helpers ---------------------------------------------------------------------------

    def _guard(self, action: str, ok: bool) -> None:
        if not ok:
            raise ProtocolError(
                f"{action} is not possible in phase {self.phase.value} for {self.key!r}",
                self.key,
            )

    def _record(self, action: str, now: float, **extra: Any) -> None:
        # Callers test ``self.recording`` first, so recording off costs one attribute check.
        assert self.events is not None
        fields: dict[str, Any] = {
            "phase": self.phase.value,
            "outcome": self.outcome.value,
            "lost": self.lost is not None,
            "deadline": self.deadline,
            "renew_in_flight": self.renew_write is not None,
            "fence": self.fence,
        }
        fields.update(extra)
        self.events.append(Transition(action, self.client, now, fields))

    def _loss_error(self, reason: LossReason) -> LockLeaseLostError:
        return LockLeaseLostError(self.key, reason, permit=self.claim.permit)

    @property
    def observed(self) -> bool:
        """Lifecycle events go to the outbox only for observers, and are made only then:
        building a frozen event costs an unobserved lock cycle microseconds for nothing."""
        return self.events is not None and self.config.observed

    def _emit(self, event: Event) -> None:
        """Only under :attr:`observed`."""
        assert self.events is not None
        self.events.append(event)

    def _alarm(self, event: Event) -> None:
        """A failure event: always made (they are rare, and the driver logs them)."""
        if self.events is None:
            self.events = []
        self.events.append(event)

    def take_events(self) -> list[Transition | Event]:
        """Drain the outbox, oldest first."""
        events = self.events
        if not events:
            return []
        self.events = []
        return events

    def _lose(self, now: float, reason: LossReason, *, body_running: bool = True) -> Step:
        if self.lost is not None:
            return NOTHING
        self.lost = self._loss_error(reason)
        cancel = self.config.cancel_on_loss and body_running and not self.finished
        self.cancel_requested = self.cancel_requested or cancel
        self._alarm(Lost(self.key, self.client, now, reason, now - self.confirmed_at))
        return Step(loss=self.lost, cancel_body=cancel)

    def _command(
        self,
        op: Op,
        ttl_ms: int,
        write: Write | None,
        best_effort: bool = False,
        queue_ms: int | None = None,
    ) -> Command:
        command = Command(op, self.key, self.token, ttl_ms, write, best_effort, queue_ms=queue_ms)
        self._fill(command)
        return self._acknowledged(command)

    def _fill(self, command: Command) -> None:
        """What a kind of section adds to each command it sends (a lock's add nothing)."""

    def _acknowledged(self, command: Command) -> Command:
        """Ask the driver to wait for replicas after the writes a failover must not lose."""
        config = self.config
        if config.replicas and command.op in ACKNOWLEDGED_OPS:
            command.replicas = config.replicas
            command.replica_timeout_ms = config.replica_timeout_ms
        return command
