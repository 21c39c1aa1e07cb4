"""distlock: a Redis lock whose behaviour is specified in TLA+ and model-checked with TLC.

>>> from distlock import Lock, LockNotAcquiredError, LockLeaseLostError, ReentrantLock, Semaphore
"""

from distlock import events
from distlock._sync import (
    Lock,
    LockGroup,
    LockHandle,
    PermitHandle,
    ReentrantHandle,
    ReentrantLock,
    Semaphore,
)
from distlock.errors import (
    LockClosedError,
    LockError,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ProtocolError,
    UsageError,
    ValidationError,
)
from distlock.options import AcquireOptions, AsyncHoldOptions, HoldOptions, LockOptions
from distlock.signal import AsyncLeaseSignal, LeaseSignal

__all__ = [
    "AcquireOptions",
    "AsyncHoldOptions",
    "AsyncLeaseSignal",
    "HoldOptions",
    "LeaseSignal",
    "Lock",
    "LockClosedError",
    "LockError",
    "LockGroup",
    "LockHandle",
    "LockLeaseLostError",
    "LockNotAcquiredError",
    "LockOptions",
    "LossReason",
    "PermitHandle",
    "ProtocolError",
    "ReentrantHandle",
    "ReentrantLock",
    "Semaphore",
    "UsageError",
    "ValidationError",
    "events",
]
