"""Typed errors. Each says what happened and what the caller can do about it."""

from __future__ import annotations

import enum


class LockError(Exception):
    """Base class of every error distlock raises. ``key`` is the Redis key involved, if any."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ValidationError(LockError, ValueError):
    """An argument is out of range or of the wrong type. Raised before any Redis command is sent."""


class LockNotAcquiredError(LockError):
    """The lock is held by another owner and every allowed attempt was refused (or
    ``wait_ms`` passed without it).  For a group, ``key`` is the key that could not be had."""

    def __init__(self, key: str, attempts: int, *, permit: bool = False) -> None:
        tries = f"{attempts} attempt{'' if attempts == 1 else 's'}"
        what = (
            f"no permit of semaphore {key!r} is free (its limit is reached, or the key is a "
            f"lock's; {tries})"
            if permit
            else f"lock {key!r} is held by another owner ({tries})"
        )
        super().__init__(
            f"{what}; back off and try later, or pass retries=N and retry_delay_ms=M to try "
            "again, or wait_ms=N to wait for its release",
            key,
        )
        self.attempts = attempts


class NotReplicatedError(LockNotAcquiredError):
    """A write was made but fewer than ``replicas`` replicas acknowledged it within
    ``replica_timeout_ms`` (Redis's ``WAIT``).

    For a grant, the key was released again and the lock counts as not acquired: a failover
    in that window could have handed the key to someone else.  For a renewal it is the
    round trip's error (``on_renew_error``): a failed renewal, not a loss.
    """

    def __init__(self, key: str, wanted: int, acknowledged: int) -> None:
        LockError.__init__(
            self,
            f"lock {key!r}: {acknowledged} of the {wanted} replica(s) required acknowledged "
            "the write in time; a failover now could lose it, so it does not count (raise "
            "replica_timeout_ms, or check the replicas' link to the primary)",
            key,
        )
        self.attempts = 1
        self.wanted = wanted
        self.acknowledged = acknowledged


class LossReason(enum.Enum):
    """Why a lease was declared lost. The value is a sentence fragment for messages."""

    GRANTED_TOO_LATE = (
        "the reply granting it arrived after the lease it granted had run out, so no "
        "section was started on it (the key was released)"
    )
    RENEW_REJECTED = "a renewal found the key expired or held by another owner"
    EXTEND_REJECTED = "extend() found the key expired or held by another owner"
    DEADLINE_PASSED = "the lease deadline passed with no successful renewal"
    DEADLINE_AT_COMPLETION = "the body finished after the lease deadline had passed"
    RELEASE_REJECTED = "the release found the key expired or held by another owner"
    RELEASE_UNANSWERED = "the release got no answer, so whether the key was still ours is unknown"
    REENTER_REJECTED = "a re-entry found the key expired or held by another owner"
    LEAVE_REJECTED = "an inner exit found the key expired or held by another owner"
    LOCK_CLOSED = (
        "the object it was taken through (its Lock, ReentrantLock, Semaphore, ReadWriteLock "
        "or Election) was closed (close() or aclose()) while the section was open: its "
        "renewals stopped and its key was released"
    )


class LockLeaseLostError(LockError):
    """Mutual exclusion was not guaranteed for the whole section.

    Raised by ``run``/``hold`` even when the body returned: the body may have completed,
    but not exclusively. Reconcile its effects instead of assuming either outcome.
    """

    def __init__(self, key: str, reason: LossReason, *, permit: bool = False) -> None:
        if permit:
            message = (
                f"a permit of semaphore {key!r} was lost: {reason.value}. The section did not "
                "hold its permit for its whole duration, so more sections than the limit may "
                "have run at once; reconcile its effects rather than assume it ran within "
                "the limit"
            )
        else:
            message = (
                f"lock {key!r} was lost: {reason.value}. The section did not run under mutual "
                "exclusion for its whole duration; reconcile its effects rather than assume "
                "it completed alone"
            )
        super().__init__(message, key)
        self.reason = reason


class UsageError(LockError, RuntimeError):
    """The call is not possible in this state: a programming error to fix, not a condition
    to retry (a closed Lock, a ``hold()`` entered twice, ``extend()`` under ``run``/``hold``)."""


class LockClosedError(UsageError):
    """The ``Lock`` (or ``ReentrantLock``, ``Semaphore``, ``ReadWriteLock``, ``Election``)
    was closed (``close()``, ``aclose()`` or the end of its ``with``): it takes no new
    locks.  Keep one open for as long as the service uses it.  ``primitive`` is the name of
    its class, which the message gives."""

    def __init__(self, key: str | None = None, primitive: str = "Lock") -> None:
        target = repr(key) if key is not None else "a lock"
        super().__init__(
            f"cannot take {target}: this {primitive} is closed; create the {primitive} once "
            "and close it when the service stops, not after each use",
            key,
        )
        #: The class of the closed object (``"Lock"``, ``"Semaphore"``, ``"Election"``...).
        self.primitive = primitive


class ReentryError(UsageError):
    """A holder (the thread, or the asyncio task) asked a :class:`~distlock.ReadWriteLock`
    for a key it already holds through that lock.  Refused before anything is sent: a
    read-write lock is not reentrant, and the second acquisition would wait for the first
    to end (a writer waiting for its own read or write, or a second read of ours queued
    behind a writer that waits for our first).  Use the handle already held."""

    def __init__(self, key: str, *, holds: str, wants: str) -> None:
        super().__init__(
            f"cannot take the {wants} lock of {key!r}: this holder holds its {holds} lock "
            "through the same ReadWriteLock, and would wait for itself; use the handle it "
            "holds, or release it first",
            key,
        )


class UpgradeError(ReentryError):
    """A holder of a read lock asked for the write lock of the same key (an upgrade).
    Refused before anything is sent: two readers upgrading would each wait, for ever, for
    the other's read to end.  Release the read lock, take the write lock, and read again
    under it what the decision rests on (or take the write lock from the start)."""

    def __init__(self, key: str) -> None:
        UsageError.__init__(
            self,
            f"cannot upgrade the read lock of {key!r} to its write lock: two readers doing "
            "so would wait for each other for ever; release the read lock, then take the "
            "write lock and read again under it what the write depends on (or take the "
            "write lock from the start)",
            key,
        )


class ProtocolError(LockError, RuntimeError):
    """An event arrived that the state machine cannot take in its current phase (a driver bug)."""


class StaleFenceError(LockError):
    """A fenced resource refused a fence smaller than one it has already admitted.

    The holder that presented ``fence`` lost its lock to a newer holder (whose ``newest``
    fence the resource has seen) at some point: nothing it asked for was recorded or
    applied.  Do not retry with the same fence: roll back, and if the work still needs
    doing, acquire the lock again (a new, larger fence) and re-read the resource first.
    """

    def __init__(self, resource: str, fence: int, newest: int) -> None:
        super().__init__(
            f"resource {resource!r} refused fence {fence}: it has already admitted fence "
            f"{newest}, so a newer holder has taken the lock since this fence was issued. "
            "Nothing was recorded or applied; roll back, and re-acquire the lock (a new "
            "fence) and re-read the resource before writing again"
        )
        self.resource = resource
        self.fence = fence
        self.newest = newest
