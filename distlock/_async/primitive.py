"""What the three primitives (``Lock``, ``ReentrantLock``, ``Semaphore``) share: a client
and its options, the lifecycle (``aclose``, ``async with``), the machinery every
``acquire``/``hold``/``run`` goes through, and the reads and operator's tool that apply to
any key.  Each primitive composes its public API from these and offers only what it
supports: a ``Lock`` alone takes several keys at once, a ``Semaphore`` has no owner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from types import CoroutineType, TracebackType
from typing import Generic, Self, TypeVar, Unpack, cast

from distlock import _flows as flows
from distlock._core.section import Phase
from distlock._operator import LockOwner, force_unlock_call, owner_call, read_owner
from distlock.options import (
    ACQUIRE_KEYS,
    ASYNC_HOLD_KEYS,
    ASYNC_LOCK_KEYS,
    AcquireOptions,
    AsyncHoldOptions,
    AsyncLockOptions,
)

from . import backend, cancellation, wire
from .deferred import deferrable, run_deferred  # unasync: async only
from .handles import Handle, _Hold
from .runner import Runner

T = TypeVar("T")
#: The handle each acquisition of a primitive gets.
H = TypeVar("H", bound=Handle)


class Primitive(Runner, Generic[H]):
    """A namespace of keys ``<prefix>:<id>`` on one client: what every primitive is.

    Not public: ``Lock``, ``ReentrantLock`` and ``Semaphore`` each say what they offer.
    """

    #: The handle each acquisition gets.
    _handle_type: type[H]

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        **options: Unpack[AsyncLockOptions],
    ) -> None:
        super().__init__(client, ASYNC_LOCK_KEYS, options)
        # unasync: begin async only
        #: The config of a ``run()`` that may defer its section, if this one's may.
        self._deferred_config = deferrable(self)
        # unasync: end

    # unasync: begin async only
    @property
    def cancel_on_loss(self) -> bool:
        return self.defaults.cancel_on_loss

    # unasync: end
    def key(self, id: str) -> str:
        """The Redis key of lock ``id``."""
        return self._key(id)

    # -- lifecycle -------------------------------------------------------------------------

    async def aclose(self) -> None:
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
                await self._close_section(cast(Handle, handle))
            except cancellation.Cancelled as exc:
                cancelled = exc
        try:
            await self._close_background()
        except cancellation.Cancelled as exc:
            cancelled = exc
        if cancelled is not None:
            raise cancelled

    async def _close_background(self) -> None:
        await self._background.drain(self)
        for conn in self._waiter_conns.close():
            await conn.disconnect()
        if self._owns_client and self._client is not None:
            await self._client.aclose()

    async def _refuse_granted(self, handles: Sequence[Handle]) -> None:
        """Keys granted to a caller of a Lock closed meanwhile go back: a closed Lock
        hands nobody a key (its sections would run unrenewed)."""
        for handle in handles:
            await self._close_section(handle)
        raise self._closed_error(handles[0].key if len(handles) == 1 else None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- what acquire, hold and run do -------------------------------------------------------

    async def _acquire(self, id: str, options: AcquireOptions) -> H | None:
        """One section taken for a manual handle, or None (see ``Lock.acquire``)."""
        handle = self._new_handle(id, options, watch=False, keys=ACQUIRE_KEYS)
        await self._run(flows.acquire(self, handle))
        if self._closed:
            await self._refuse_granted((handle,))
        return handle if handle._section.phase is Phase.HELD else None

    def _run_held(
        self, id: str, fn: Callable[[H], Awaitable[T]], options: AsyncHoldOptions
    ) -> Awaitable[T]:
        """``fn(handle)`` run inside a :class:`_Hold` of ``id`` (see ``Lock.run``), or under
        asyncio, where it may, as a deferred cycle (:mod:`distlock._async.deferred`).  Not a
        coroutine itself: one fewer between a cycle and the socket."""
        backend.check_body(fn)
        # unasync: begin async only
        client = self._client
        if (
            not options
            and self._deferred_config is not None
            and client is not None
            and self._route.direct(client)
        ):
            return run_deferred(self, id, fn)  # type: ignore[arg-type]
        # unasync: end
        return self._run_hold(id, fn, options)

    async def _run_hold(
        self, id: str, fn: Callable[[H], Awaitable[T]], options: AsyncHoldOptions
    ) -> T:
        # What ``async with self.hold(...)`` does, without the protocol's calls (this is
        # the cycle a renewed lock pays on every use).
        hold: _Hold[H] = _Hold(self, id, options)
        handle = hold._handle
        handles = (handle,)
        await hold._enter(self, handles)
        try:
            body = fn(handle)
            if body.__class__ is not CoroutineType:  # unasync: async only
                body = backend.awaitable(fn, body)  # unasync: async only
            result = await body
        except BaseException as exc:
            await hold._exit(self, handles, handle._machine, exc)
            raise
        await hold._exit(self, handles, handle._machine, None)
        return backend.returned(fn, result)

    def _new_handle(
        self,
        id: str,
        options: AcquireOptions | AsyncHoldOptions,
        *,
        watch: bool,
        keys: frozenset[str] = ASYNC_HOLD_KEYS,
    ) -> H:
        """One section's handle, with no driver group around it (``acquire`` and ``hold``)."""
        opts = self._options(keys, options)
        machine, sections = self._sections_for(
            [id], opts, watch=watch, cancel_on_loss=watch and cancellation.cancels_body(opts)
        )
        return self._handle_type(self, sections[0], machine)

    # -- reads and an operator's tool, outside any lock cycle ----------------------------------

    async def locked(self, id: str) -> bool:
        """Whether anyone holds ``id`` now (one ``EXISTS``).

        A snapshot: the answer may be stale by the time it is returned, so never decide to
        take the lock on it; :meth:`acquire` decides and takes in one step.
        """
        key = self.key(id)
        client = self._client if self._client is not None else await self.client()
        return bool(await client.exists(key))

    async def _owner(self, id: str) -> LockOwner | None:
        """``owner``, for the primitives whose key has one holder."""
        key = self.key(id)
        return read_owner(key, await wire.eval_script(await self.client(), *owner_call(key)))

    async def force_unlock(self, id: str) -> bool:
        """For operators: delete ``id``'s key whoever holds it, and bump its slot's fence
        counter in the same step, so every later owner's fence is larger than the evicted
        holder's; the first waiter, if any, is woken.  Returns whether a key was deleted.

        Not a way to release: the evicted holder is not told now.  It learns at its next
        renewal (its lease is lost: its ``signal`` fires and ``run``/``hold`` raise
        :class:`~distlock.LockLeaseLostError`); a manual handle, at its next ``extend`` or
        ``release``.  Until then it may still act: fences are what stops its writes.
        """
        key = self.key(id)
        return bool(await wire.eval_script(await self.client(), *force_unlock_call(key)))
