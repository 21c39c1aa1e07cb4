"""The asyncio driver, the one hand-written driver source: redis-py asyncio IO around the
pure core (:mod:`distlock._core`), running the flows of :mod:`distlock._flows`.

The sync driver (:mod:`distlock._sync`) is generated from these modules by
``tools/unasync.py``; what differs between asyncio and threads goes through
:mod:`distlock._async.backend` and :mod:`distlock._async.cancellation` (hand-written in
both packages).  Timers are the event loop's own (``call_later``), so a section that
finishes before its first heartbeat starts no task.  On loss the body is cancelled
(``cancel_on_loss``) and ``run``/``hold`` raise :class:`~distlock.LockLeaseLostError`.
Releases survive cancellation: a release interrupted in flight is sent again from a
background task, so cancelling a caller never drops the token before Redis has answered.
"""

from .election import Election, Leadership
from .handles import LockGroup, LockHandle
from .lock import Lock
from .readwrite import ReadLock, ReadWriteLock, RoleHandle, WriteLock
from .reentrant import ReentrantHandle, ReentrantLock
from .semaphore import PermitHandle, Semaphore

__all__ = [
    "Election",
    "Leadership",
    "Lock",
    "LockGroup",
    "LockHandle",
    "PermitHandle",
    "ReadLock",
    "ReadWriteLock",
    "ReentrantHandle",
    "ReentrantLock",
    "RoleHandle",
    "Semaphore",
    "WriteLock",
]
