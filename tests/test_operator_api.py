"""``locked``, ``owner`` and ``force_unlock`` are offered alike by both drivers (a
Semaphore has no ``owner``: its permits have several holders).  What they do, on both
drivers against a real redis-server, is in ``tests/drivers/_async/test_operator_api.py``."""

from __future__ import annotations

import distlock
import distlock.asyncio
from distlock import Lock, ReentrantLock, Semaphore


def test_both_drivers_offer_the_same_operator_methods() -> None:
    for name in ("locked", "owner", "force_unlock"):
        for cls in (Lock, ReentrantLock, Semaphore, distlock.asyncio.Lock,
                    distlock.asyncio.ReentrantLock, distlock.asyncio.Semaphore):
            if name == "owner" and cls.__name__ == "Semaphore":
                assert not hasattr(cls, name), cls  # no one owner: several holders
            else:
                assert callable(getattr(cls, name)), (cls, name)
