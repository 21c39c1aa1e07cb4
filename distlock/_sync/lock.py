# Generated from distlock/_async/lock.py by tools/unasync.py: do not edit.
"""The Lock: a namespace of Redis locks (keys ``<prefix>:<id>``) and its public calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar, Unpack

from distlock._core.group import Group
from distlock._operator import LockOwner
from distlock.options import (
    HOLD_KEYS,
    AcquireOptions,
    HoldOptions,
)

from . import backend
from .handles import LockGroup, LockHandle, _Hold, _HoldMany
from .primitive import Primitive

T = TypeVar("T")


class Lock(Primitive[LockHandle]):
    """A Redis lock namespace: keys are ``<prefix>:<id>``.

    ``client`` is a Redis client of this driver (``redis.Redis`` for :class:`distlock.Lock`,
    ``redis.asyncio.Redis`` for :class:`distlock.asyncio.Lock`), a URL (the Lock then owns
    the client and closes it when closed), or a zero-argument factory called on first use
    (under asyncio it may be async).  Options (see :mod:`distlock.options`) are the defaults
    of every call.  A caller that waits (``wait_ms``) blocks on a connection of its own,
    made from the client's settings but outside its pool, so that waiters never leave a
    holder without a connection.  Under asyncio, a lost lock cancels the body of
    ``run``/``hold`` (``cancel_on_loss``), and ``run``/``hold`` raise
    :class:`~distlock.LockLeaseLostError`, the way ``asyncio.timeout`` turns its
    cancellation into ``TimeoutError``.

    >>> locks = Lock("redis://127.0.0.1:6379/0", prefix="order", ttl_ms=10_000)  # doctest: +SKIP
    """

    _handle_type = LockHandle

    # -- public API ------------------------------------------------------------------------

    def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> LockHandle | None:
        """Take the lock, or return None if another owner holds it (after any retries, or
        once ``wait_ms`` has passed without it).

        With ``wait_ms`` the caller waits in the lock's queue, in arrival order, and is
        handed the key by the release (or looks again when the holder's TTL could have
        run out); interrupted while it waits (cancelled, ``KeyboardInterrupt``), it
        withdraws its place and discards its blocked connection before the interruption
        propagates.  The handle is not renewed in the background: call
        :meth:`LockHandle.extend` if the work can outlive the TTL, and
        :meth:`LockHandle.release` when done.
        """
        return self._acquire(id, options)

    def hold(self, id: str, **options: Unpack[HoldOptions]) -> _Hold[LockHandle]:
        """Hold the lock for a ``with`` block, renewed while the block runs.

        Raises :class:`LockNotAcquiredError` if the lock is held elsewhere (and, with
        ``wait_ms``, was not released to us within it), and :class:`LockLeaseLostError` on
        exit if exclusivity was not kept for the whole block, even when the block itself
        succeeded (under asyncio the block is cancelled on loss, unless
        ``cancel_on_loss=False``).  Options are validated here, before any Redis command.
        """
        return _Hold(self, id, options)

    def run(
        self,
        id: str,
        fn: Callable[[LockHandle], T],
        **options: Unpack[HoldOptions],
    ) -> T:
        """Run ``fn(handle)`` under the lock (awaited, under asyncio), renewed while it runs,
        released even if it raises; see :meth:`hold`.

        Returns what ``fn`` returned only if the lock was held for the whole call.
        """
        return self._run_held(id, fn, options)

    def hold_many(self, ids: Sequence[str], **options: Unpack[HoldOptions]) -> _HoldMany:
        """Hold several locks for a ``with`` block, as :meth:`hold` holds one.

        The locks are taken in sorted key order whatever order ``ids`` names them in, so
        two callers wanting the same locks can never each hold one and wait for the other.
        ``wait_ms`` bounds the whole group's acquisition, not each key's.  If one cannot be
        had, those already taken are released and :class:`LockNotAcquiredError` names it.
        On exit they are released in reverse order, and :class:`LockLeaseLostError` is
        raised if any of them was lost (under asyncio, the first loss cancels the block).
        """
        return _HoldMany(self, self._group_ids(ids), options)

    def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], T],
        **options: Unpack[HoldOptions],
    ) -> T:
        """Run ``fn(group)`` holding every lock in ``ids``; see :meth:`hold_many`."""
        backend.check_body(fn)
        with self.hold_many(ids, **options) as group:
            result = backend.awaitable(fn, fn(group))
        return backend.returned(fn, result)

    # -- groups ------------------------------------------------------------------------------

    def _new_group(
        self,
        ids: Sequence[str],
        options: AcquireOptions | HoldOptions,
        *,
        watch: bool,
        keys: frozenset[str] = HOLD_KEYS,
    ) -> tuple[Group, LockGroup]:
        opts = self._options(keys, options)
        machine, sections = self._sections_for(
            ids, opts, watch=watch, cancel_on_loss=False
        )
        make = self._handle_type
        handles = tuple([make(self, s, machine) for s in sections])
        return machine, LockGroup(self.prefix, handles)

    # -- a read, outside any lock cycle --------------------------------------------------------

    def owner(self, id: str) -> LockOwner | None:
        """Who holds ``id`` now, or None if nobody does: a read-only snapshot (one script
        that reads ``TYPE``, ``PTTL`` and the key's value as fits its type, so a key held
        by another primitive is reported, never a ``WRONGTYPE`` error).  See
        :class:`~distlock.LockOwner` for what it holds, and ``handle.held`` for what a
        holder itself knows."""
        return self._owner(id)
