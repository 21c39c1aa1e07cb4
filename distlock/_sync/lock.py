# Generated from distlock/_async/lock.py by tools/unasync.py: do not edit.
"""The Lock: a namespace of Redis locks (keys ``<prefix>:<id>``) and its public calls."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Self, TypeVar, Unpack, cast

from distlock import _flows as flows
from distlock._core.group import Group
from distlock._core.section import Phase
from distlock._operator import LockOwner, force_unlock_call, owner_call, read_owner
from distlock.errors import LockClosedError
from distlock.options import (
    ACQUIRE_KEYS,
    HOLD_KEYS,
    LOCK_KEYS,
    AcquireOptions,
    HoldOptions,
    LockOptions,
)

from . import backend, cancellation, wire
from .handles import LockGroup, LockHandle, _Hold, _HoldMany
from .runner import Runner

T = TypeVar("T")


class Lock(Runner):
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

    #: The handle each acquisition gets.
    _handle_type: type[LockHandle] = LockHandle

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        **options: Unpack[LockOptions],
    ) -> None:
        super().__init__(client, LOCK_KEYS, options)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the Lock: every call after it raises :class:`~distlock.LockClosedError`.

        A section open now (``hold``/``run``) loses its lease as on any loss: its signal
        fires, its body is cancelled under asyncio (unless ``cancel_on_loss=False``), its
        key is released (one attempt), and its exit raises
        :class:`~distlock.LockLeaseLostError` (:attr:`~distlock.errors.LossReason.LOCK_CLOSED`).
        A caller waiting for a key raises ``LockClosedError`` at once, having withdrawn its
        place, and is never handed a key.  Then interrupted releases are let finish,
        renewals stopped (a renewal in flight is let finish: once this returns, the Lock
        sends nothing more through the client), and a client the Lock made is closed.
        """
        with self._mutex:  # no transition of this Lock arms a timer after this
            self._closed = True
            open_sections = backend.close_timers(self)
        self._blocked.interrupt()
        # Closed from inside a body: the loss cancels that body, which is this task.  The
        # cancellation is kept until the Lock is closed, then raised (the body ends on it).
        cancelled: BaseException | None = None
        for handle in open_sections:
            try:
                self._close_section(cast(LockHandle, handle))
            except cancellation.Cancelled as exc:
                cancelled = exc
        try:
            self._close_background()
        except cancellation.Cancelled as exc:
            cancelled = exc
        if cancelled is not None:
            raise cancelled

    def _close_background(self) -> None:
        self._background.drain(self)
        for conn in self._waiter_conns.close():
            conn.disconnect()
        if self._owns_client and self._client is not None:
            self._client.close()

    def _refuse_granted(self, handles: Sequence[LockHandle]) -> None:
        """Keys granted to a caller of a Lock closed meanwhile go back: a closed Lock
        hands nobody a key (its sections would run unrenewed)."""
        for handle in handles:
            self._close_section(handle)
        raise LockClosedError(handles[0].key if len(handles) == 1 else None)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

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
        handle = self._new_handle(id, options, watch=False, keys=ACQUIRE_KEYS)
        self._run(flows.acquire(self, handle))
        if self._closed:
            self._refuse_granted((handle,))
        return handle if handle._section.phase is Phase.HELD else None

    def hold(self, id: str, **options: Unpack[HoldOptions]) -> _Hold:
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
        # What ``with self.hold(...)`` does, without the protocol's calls (this is
        # the cycle a renewed lock pays on every use).
        backend.check_body(fn)
        hold = _Hold(self, id, options)
        handle = hold._handle
        handles = (handle,)
        hold._enter(self, handles)
        try:
            body = fn(handle)
            result = body
        except BaseException as exc:
            hold._exit(self, handles, handle._machine, exc)
            raise
        hold._exit(self, handles, handle._machine, None)
        return backend.returned(fn, result)

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
            ids, opts, watch=watch, cancel_on_loss=watch and cancellation.cancels_body(opts)
        )
        make = self._handle_type
        handles = tuple([make(self, s, machine) for s in sections])
        return machine, LockGroup(self.prefix, handles)

    def _new_handle(
        self,
        id: str,
        options: AcquireOptions | HoldOptions,
        *,
        watch: bool,
        keys: frozenset[str] = HOLD_KEYS,
    ) -> LockHandle:
        """One lock's handle, with no driver group around it (``acquire`` and ``hold``)."""
        opts = self._options(keys, options)
        machine, sections = self._sections_for(
            [id], opts, watch=watch, cancel_on_loss=watch and cancellation.cancels_body(opts)
        )
        return self._handle_type(self, sections[0], machine)

    # -- reads and an operator's tool, outside any lock cycle ----------------------------------

    def locked(self, id: str) -> bool:
        """Whether anyone holds ``id`` now (one ``EXISTS``).

        A snapshot: the answer may be stale by the time it is returned, so never decide to
        take the lock on it; :meth:`acquire` decides and takes in one step.
        """
        key = self.key(id)
        client = self._client if self._client is not None else self.client
        return bool(client.exists(key))

    def owner(self, id: str) -> LockOwner | None:
        """Who holds ``id`` now, or None if nobody does: a read-only snapshot (one script
        that reads ``TYPE``, ``PTTL`` and the key's value as fits its type, so a key held
        by another primitive is reported, never a ``WRONGTYPE`` error).  See
        :class:`~distlock.LockOwner` for what it holds, and ``handle.held`` for what a
        holder itself knows."""
        key = self.key(id)
        return read_owner(key, wire.eval_script(self.client, *owner_call(key)))

    def force_unlock(self, id: str) -> bool:
        """For operators: delete ``id``'s key whoever holds it, and bump its slot's fence
        counter in the same step, so every later owner's fence is larger than the evicted
        holder's; the first waiter, if any, is woken.  Returns whether a key was deleted.

        Not a way to release: the evicted holder is not told now.  It learns at its next
        renewal (its lease is lost: its ``signal`` fires and ``run``/``hold`` raise
        :class:`~distlock.LockLeaseLostError`); a manual handle, at its next ``extend`` or
        ``release``.  Until then it may still act: fences are what stops its writes.
        """
        key = self.key(id)
        return bool(wire.eval_script(self.client, *force_unlock_call(key)))
