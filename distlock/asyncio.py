"""The asyncio driver: redis-py asyncio IO around the pure core (:mod:`distlock._core`).

It runs the same flows (:mod:`distlock._flows`) as the sync driver (which is generated
from it); the differences are only how IO waits.  Timers are the event loop's own
(``call_later``), so a section that finishes before its first heartbeat starts no task.
On loss the body is cancelled (``cancel_on_loss``) and ``run``/``hold`` raise
:class:`~distlock.LockLeaseLostError`, the way ``asyncio.timeout`` turns its cancellation
into ``TimeoutError``.  Releases survive cancellation: a release interrupted in flight is
sent again from a background task, so cancelling a caller never drops the token before
Redis has answered a release.
"""

from distlock._async import (
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
