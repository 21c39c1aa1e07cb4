"""distlock: a Redis lock whose behaviour is specified in TLA+ and model-checked with TLC.

>>> from distlock import Lock, LockNotAcquiredError, LockLeaseLostError
"""

from distlock._sync import Lock, LockGroup, LockHandle
from distlock.errors import (
    LockError,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    ProtocolError,
    ValidationError,
)
from distlock.signal import AsyncLeaseSignal, LeaseSignal

__all__ = [
    "AsyncLeaseSignal",
    "LeaseSignal",
    "Lock",
    "LockError",
    "LockGroup",
    "LockHandle",
    "LockLeaseLostError",
    "LockNotAcquiredError",
    "LossReason",
    "ProtocolError",
    "ValidationError",
]
