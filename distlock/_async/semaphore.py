"""The counting semaphore: at most ``limit`` permits of each id at once."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar, Unpack

from distlock._base import SemaphoreBase, semaphore_options
from distlock._operator import owner_call, permits_full
from distlock.options import AcquireOptions, AsyncHoldOptions, AsyncLockOptions

from . import backend, wire
from .handles import Handle, _Hold
from .primitive import Primitive

T = TypeVar("T")


class PermitHandle(Handle):
    """A permit of a :class:`Semaphore`: ``key`` (``<prefix>:<id>``, the sorted set holding
    the id's permits), ``token`` (our member of it), ``signal``, ``held``, ``extend`` and
    ``release`` as a lock handle's, and no ``fence``: a permit is one of ``limit``, so
    there is no order of holders for a resource to check."""

    __slots__ = ()

    async def extend(self, ttl_ms: int | None = None) -> bool:
        """Make our permit end ``ttl_ms`` (default: the semaphore's TTL) from now, in
        Redis's time, if it is still live.  False, and the signal, when it expired or was
        removed: a permit that lapsed is never brought back (it may have been given to
        someone else).  Connection errors propagate."""
        return await super().extend(ttl_ms)

    async def release(self) -> bool:
        """Give the permit back. True only if it was still ours (live) until now.
        Cancellation-safe under asyncio, as :meth:`LockHandle.release`."""
        return await super().release()

    async def __aenter__(self) -> PermitHandle:
        """``async with permit:`` releases on exit, and raises :class:`LockLeaseLostError`
        if the permit was no longer ours by then (it is not renewed: see ``hold``)."""
        return self


class Semaphore(SemaphoreBase, Primitive[PermitHandle]):
    """A counting semaphore: at most ``limit`` permits of each id are held at once.

    Each permit is owned (a random token), renewed while ``run``/``hold`` runs, and expires
    on its own after its TTL if its holder dies, judged by Redis's clock; a lost permit is
    surfaced as a lock's is (the signal, and :class:`LockLeaseLostError` from ``run`` and
    ``hold``; under asyncio the body is cancelled, unless ``cancel_on_loss=False``).
    ``client`` and the options are a :class:`Lock`'s (the prefix defaults to ``"sem"``);
    ``limit`` is a positive int, checked before anything is sent.  It is no ``Lock``:
    ``acquire``, ``hold`` and ``run`` take one permit at a time (no ``hold_many`` nor
    ``run_many``), and there is no ``owner`` (the permits have several holders; ``python
    -m distlock inspect`` lists them).  Each acquire compares
    the number of live permits with its caller's own ``limit``, so callers of one id should
    agree on it.  A ``Lock`` or ``ReentrantLock`` on a semaphore's key, and a semaphore on a
    lock's, is refused, never an error.

    >>> workers = Semaphore("redis://127.0.0.1:6379/0", limit=3)  # doctest: +SKIP
    """

    _PRIMITIVE = "Semaphore"  # what LockClosedError calls it

    _handle_type = PermitHandle

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        *,
        limit: int,
        **options: Unpack[AsyncLockOptions],
    ) -> None:
        self.limit, merged = semaphore_options(limit, options)
        super().__init__(client, **merged)

    async def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> PermitHandle | None:
        """Take a permit of ``id``, or return None if ``limit`` are held (after any retries).

        The permit is not renewed in the background: call :meth:`PermitHandle.extend` if
        the work can outlive the TTL, and :meth:`PermitHandle.release` when done.
        """
        return await self._acquire(id, options)

    def hold(self, id: str, **options: Unpack[AsyncHoldOptions]) -> _Hold[PermitHandle]:
        """Hold a permit of ``id`` for an ``async with`` block, renewed every heartbeat.

        Raises :class:`LockNotAcquiredError` if ``limit`` permits are held (after any
        retries), and :class:`LockLeaseLostError` on exit if the permit was not ours for the
        whole block, even when the block itself succeeded.
        """
        return _Hold(self, id, options)

    async def run(
        self,
        id: str,
        fn: Callable[[PermitHandle], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """Run ``fn(permit)`` holding a permit of ``id``; see :meth:`hold`."""
        return await self._run_held(id, fn, options)

    async def locked(self, id: str) -> bool:
        """Whether no permit of ``id`` could be taken now by this semaphore: ``limit``
        permits are live by Redis's clock (or the key is another primitive's).  One
        read-only script; a snapshot, as :meth:`Lock.locked` is."""
        key = self.key(id)
        reply = await wire.eval_script(await self.client(), *owner_call(key))
        return permits_full(reply, self.limit)
