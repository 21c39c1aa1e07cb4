"""The resource side of fencing: guards that refuse a stale ex-holder's writes.

A lock hands each holder a fence (``handle.fence``) that is larger for every new holder.
A guard keeps, per protected resource, the largest fence it has admitted, and admits a
write only with a fence at least that large, atomically with the write: in the caller's
transaction (:class:`PostgresFence`, :class:`SQLiteFence`) or in one Lua script with the
writes (:class:`RedisFence`).  A holder that was paused or cut off while its lock passed to
another then gets :class:`~distlock.errors.StaleFenceError` instead of overwriting the
newer holder's work.  Re-admitting the same fence (several writes in one section) is
allowed.  Guards store nothing but the largest fence per resource.

This holds while fences increase: while the lock's fence counter survives, and when Redis
loses it (a restart without persistence, a failover to a replica that missed the last
grants) as long as Redis's clock then reads a later millisecond than the last fence stands
for, since every fence is at least a floor on Redis's clock.  A clock set back further
makes the guards refuse new holders until it catches up, and admit one whose fence equals
an old holder's (see "Fencing" in the documentation).

Every guard implements :class:`FenceGuard` (or :class:`AsyncFenceGuard`): ``admit(within,
resource, fence)``, where ``within`` is what the admission is atomic with (a connection
whose transaction is open, or a :class:`RedisWrites`) and ``fence`` an int or a handle.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from distlock._fencing.common import MAX_FENCE, Fence, HasFence
from distlock._fencing.postgres import AsyncPostgresFence, PostgresFence
from distlock._fencing.redis import AsyncRedisFence, RedisFence, RedisWrites
from distlock._fencing.sqlite import SQLiteFence
from distlock.errors import StaleFenceError

W_contra = TypeVar("W_contra", contravariant=True)


class FenceGuard(Protocol[W_contra]):
    """A resource guard: ``admit`` admits ``fence`` for ``resource`` atomically with
    ``within``, or raises :class:`StaleFenceError` having recorded and applied nothing.

    Bad arguments (a bool, a negative fence or one past ``2**63-1``, an empty resource, a
    handle with no fence) raise :class:`~distlock.errors.ValidationError` before anything
    is sent."""

    def admit(self, within: W_contra, resource: str, fence: Fence, /) -> None: ...


class AsyncFenceGuard(Protocol[W_contra]):
    """:class:`FenceGuard` for asyncio: ``admit`` is a coroutine."""

    async def admit(self, within: W_contra, resource: str, fence: Fence, /) -> None: ...


__all__ = [
    "MAX_FENCE",
    "AsyncFenceGuard",
    "AsyncPostgresFence",
    "AsyncRedisFence",
    "Fence",
    "FenceGuard",
    "HasFence",
    "PostgresFence",
    "RedisFence",
    "RedisWrites",
    "SQLiteFence",
    "StaleFenceError",
]
