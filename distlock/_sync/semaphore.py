# Generated from distlock/_async/semaphore.py by tools/unasync.py: do not edit.
"""The counting semaphore: at most ``limit`` permits of each id at once."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, Unpack, cast

from distlock._base import PermitMixin, SemaphoreBase, semaphore_options
from distlock._operator import LockOwner, owner_call, permits_full
from distlock.errors import UsageError
from distlock.options import AcquireOptions, HoldOptions, LockOptions

from . import backend, wire
from .handles import LockGroup, LockHandle, _Hold, _HoldMany
from .lock import Lock

T = TypeVar("T")


class PermitHandle(PermitMixin, LockHandle):
    """A permit of a :class:`Semaphore`: ``key`` (``<prefix>:<id>``, the sorted set holding
    the id's permits), ``token`` (our member of it), ``signal``, ``held``, ``extend`` and
    ``release`` as a lock handle's, and no fence."""

    __slots__ = ()

    def extend(self, ttl_ms: int | None = None) -> bool:
        """Make our permit end ``ttl_ms`` (default: the semaphore's TTL) from now, in
        Redis's time, if it is still live.  False, and the signal, when it expired or was
        removed: a permit that lapsed is never brought back (it may have been given to
        someone else).  Connection errors propagate."""
        return super().extend(ttl_ms)

    def release(self) -> bool:
        """Give the permit back. True only if it was still ours (live) until now.
        Cancellation-safe under asyncio, as :meth:`LockHandle.release`."""
        return super().release()

    def __enter__(self) -> PermitHandle:
        """``with permit:`` releases on exit, and raises :class:`LockLeaseLostError`
        if the permit was no longer ours by then (it is not renewed: see ``hold``)."""
        return self


class _PermitHold(_Hold):
    __slots__ = ()

    def __enter__(self) -> PermitHandle:
        return cast(PermitHandle, super().__enter__())


class Semaphore(SemaphoreBase, Lock):
    """A counting semaphore: at most ``limit`` permits of each id are held at once.

    Each permit is owned (a random token), renewed while ``run``/``hold`` runs, and expires
    on its own after its TTL if its holder dies, judged by Redis's clock; a lost permit is
    surfaced as a lock's is (the signal, and :class:`LockLeaseLostError` from ``run`` and
    ``hold``; under asyncio the body is cancelled, unless ``cancel_on_loss=False``).
    ``client`` and the options are a :class:`Lock`'s (the prefix defaults to ``"sem"``);
    ``limit`` is a positive int, checked before anything is sent.  Each acquire compares
    the number of live permits with its caller's own ``limit``, so callers of one id should
    agree on it.  A ``Lock`` or ``ReentrantLock`` on a semaphore's key, and a semaphore on a
    lock's, is refused, never an error.

    >>> workers = Semaphore("redis://127.0.0.1:6379/0", limit=3)  # doctest: +SKIP
    """

    _handle_type = PermitHandle

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        *,
        limit: int,
        **options: Unpack[LockOptions],
    ) -> None:
        self.limit, merged = semaphore_options(limit, options)
        super().__init__(client, **merged)

    def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> PermitHandle | None:
        """Take a permit of ``id``, or return None if ``limit`` are held (after any retries).

        The permit is not renewed in the background: call :meth:`PermitHandle.extend` if
        the work can outlive the TTL, and :meth:`PermitHandle.release` when done.
        """
        return cast("PermitHandle | None", super().acquire(id, **options))

    def hold(self, id: str, **options: Unpack[HoldOptions]) -> _PermitHold:
        """Hold a permit of ``id`` for a ``with`` block, renewed every heartbeat.

        Raises :class:`LockNotAcquiredError` if ``limit`` permits are held (after any
        retries), and :class:`LockLeaseLostError` on exit if the permit was not ours for the
        whole block, even when the block itself succeeded.
        """
        return _PermitHold(self, id, options)

    def run(
        self,
        id: str,
        fn: Callable[[PermitHandle], T],
        **options: Unpack[HoldOptions],
    ) -> T:
        """Run ``fn(permit)`` holding a permit of ``id``; see :meth:`hold`."""
        backend.check_body(fn)
        with self.hold(id, **options) as permit:
            result = backend.awaitable(fn, fn(permit))
        return backend.returned(fn, result)

    def hold_many(self, ids: Sequence[str], **options: Unpack[HoldOptions]) -> _HoldMany:
        """Not offered: a semaphore gives one permit of one id at a time."""
        raise UsageError("Semaphore takes one permit at a time: nest hold() calls")

    def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], T],
        **options: Unpack[HoldOptions],
    ) -> T:
        """Not offered: see :meth:`hold_many`."""
        raise UsageError("Semaphore takes one permit at a time: nest run() calls")

    def locked(self, id: str) -> bool:
        """Whether no permit of ``id`` could be taken now by this semaphore: ``limit``
        permits are live by Redis's clock (or the key is another primitive's).  One
        read-only script; a snapshot, as :meth:`Lock.locked` is."""
        key = self.key(id)
        reply = wire.eval_script(self.client, *owner_call(key))
        return permits_full(reply, self.limit)

    def owner(self, id: str) -> LockOwner | None:
        """Not offered: a semaphore's permits have several holders at once (``python -m
        distlock inspect`` lists them)."""
        raise UsageError("a Semaphore has no one owner: its permits have several holders")
