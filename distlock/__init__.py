"""distlock: a Redis lock whose behaviour is specified in TLA+ and model-checked with TLC.

>>> from distlock import Lock, LockNotAcquiredError, LockLeaseLostError, ReentrantLock, Semaphore
"""

import logging

from distlock import events
from distlock._build import BuildInfo, build_info
from distlock._leader import Leader
from distlock._operator import LockOwner
from distlock._sync import (
    Election,
    Leadership,
    Lock,
    LockGroup,
    LockHandle,
    PermitHandle,
    ReadLock,
    ReadWriteLock,
    ReentrantHandle,
    ReentrantLock,
    RoleHandle,
    Semaphore,
    WriteLock,
)
from distlock._version import __version__ as __version__
from distlock.errors import (
    LockClosedError,
    LockError,
    LockLeaseLostError,
    LockNotAcquiredError,
    LossReason,
    NotReplicatedError,
    ProtocolError,
    ReentryError,
    StaleFenceError,
    UpgradeError,
    UsageError,
    ValidationError,
)
from distlock.options import AcquireOptions, AsyncHoldOptions, HoldOptions, LockOptions
from distlock.signal import AsyncLeaseSignal, LeaseSignal

# The library convention: the application decides where distlock's warnings go (a
# handler on the ``distlock`` logger, or ``logging.basicConfig``); without one, nothing is
# printed behind its back by Python's last-resort handler.
logging.getLogger("distlock").addHandler(logging.NullHandler())

__all__ = [
    "AcquireOptions",
    "AsyncHoldOptions",
    "AsyncLeaseSignal",
    "BuildInfo",
    "Election",
    "HoldOptions",
    "Leader",
    "Leadership",
    "LeaseSignal",
    "Lock",
    "LockClosedError",
    "LockError",
    "LockGroup",
    "LockHandle",
    "LockLeaseLostError",
    "LockNotAcquiredError",
    "LockOptions",
    "LockOwner",
    "LossReason",
    "NotReplicatedError",
    "PermitHandle",
    "ProtocolError",
    "ReadLock",
    "ReadWriteLock",
    "ReentrantHandle",
    "ReentrantLock",
    "ReentryError",
    "RoleHandle",
    "Semaphore",
    "StaleFenceError",
    "UpgradeError",
    "UsageError",
    "ValidationError",
    "WriteLock",
    "build_info",
    "events",
]
