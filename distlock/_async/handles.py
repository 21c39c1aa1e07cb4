"""The handles of the primitives (what every one has, and a lock's, with its fence), a
group of lock handles, and the ``hold()`` objects that take and give back a section for an
``async with`` block."""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

from distlock import _flows as flows
from distlock._base import HandleBase
from distlock._core.group import Group
from distlock._core.section import Section
from distlock._holding import GroupBase, HoldingBase, conclude
from distlock.options import AsyncHoldOptions, check_ttl
from distlock.signal import AsyncLeaseSignal

from . import cancellation

if TYPE_CHECKING:
    from .lock import Lock
    from .primitive import Primitive


class Handle(HandleBase):
    """What the handle of every primitive has: ``key``, ``token`` (the value stored under
    the key), ``held``, ``signal``, ``extend``, ``release`` and ``async with``.  Not
    public: :class:`LockHandle` adds the fence, a semaphore's ``PermitHandle`` has none."""

    # No timer of its own: the Lock's timers keep the handle in the bucket of the instant
    # ``_armed_at`` names, and that slot alone tells a live entry from a stale one.
    __slots__ = ("_holding", "_lock")
    # unasync: begin async only

    #: Whether the section is still to be made (only an uncontended ``run()``'s handle
    #: defers it: :mod:`distlock._async.deferred`).  A class attribute: no other handle
    #: carries it.
    _deferred = False

    def _settle(self) -> None:
        """Make the section a deferred cycle left unmade (see ``_deferred``)."""

    # unasync: end

    def __init__(
        self,
        lock: Primitive[Any],
        section: Section,
        machine: Group,
    ) -> None:
        super().__init__(section, machine)
        self._lock = lock
        #: The hold() whose body this handle's loss cancels (None for acquire()).
        self._holding: _Holding | None = None

    @property
    def signal(self) -> AsyncLeaseSignal:
        """Aborts with the group's first loss.  Made on first read, once per group: most
        held locks are never asked for it, and each would otherwise carry one."""
        return self._lock._signal_of(self._machine)

    async def extend(self, ttl_ms: int | None = None) -> bool:
        """Reset the key's TTL to ``ttl_ms`` (default: the lock's TTL) if our token still owns it.

        Returns False, and fires ``signal``, when the key expired or belongs to someone else.
        Connection errors propagate: a failed round trip says nothing about ownership.
        Only for handles from :meth:`Lock.acquire`: under ``run``/``hold`` the lease is
        renewed for you.
        """
        ttl = self._section.config.ttl_ms if ttl_ms is None else check_ttl(ttl_ms)
        return await self._lock._run(flows.extend(self._lock, self, ttl))

    async def release(self) -> bool:
        """Delete the key if our token still owns it. True only if it did.

        Under asyncio, cancellation-safe: if the caller is cancelled meanwhile, the release
        is completed in the background (``Lock.aclose()`` waits for it) and the
        cancellation propagates.
        """
        return await self._lock._run(flows.release(self._lock, self))

    async def __aenter__(self) -> Self:
        """``async with handle:`` releases on exit, and raises :class:`LockLeaseLostError`
        if the key was no longer ours by then (the handle is not renewed: see ``hold``)."""
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release()
        conclude(self._machine, ev)


class LockHandle(Handle):
    """An acquired lock: ``key``, ``token`` (the value stored under the key), ``fence``,
    and ``signal``, which aborts with the :class:`LockLeaseLostError` once the loss is known.
    """

    __slots__ = ()

    @property
    def fence(self) -> int:
        """The fencing token: strictly larger for each new owner while Redis keeps its data.

        Pass it to the resource you protect and have the resource reject writes carrying a
        smaller fence than one it has already seen.
        """
        fence = self._section.fence
        if fence is None:
            raise AttributeError("this handle was never granted the lock, so it has no fence")
        return fence

    def _repr_fence(self) -> str:
        return f" fence={self._section.fence}"


#: The handle a hold() gives.
H = TypeVar("H", bound=Handle)


class LockGroup(GroupBase[LockHandle]):
    """Several locks held together (see :meth:`Lock.hold_many`): ``group[id]`` is one
    handle; ``signal`` aborts with the first loss among them."""

    __slots__ = ()

    @property
    def signal(self) -> AsyncLeaseSignal:
        """The one signal its handles share."""
        return self.handles[0].signal

    @property
    def fences(self) -> dict[str, int]:
        """Each key's fencing token."""
        return {h.key: h.fence for h in self.handles}


class _Holding(HoldingBase):
    """What :meth:`Lock.hold` (one lock, gives its handle) and :meth:`Lock.hold_many`
    (several, gives the group) share: the body a loss cancels (see
    :mod:`distlock._async.cancellation`)."""

    __slots__ = ("_cancelling", "task")

    def __init__(self) -> None:
        super().__init__()
        self._cancelling = 0
        #: The task running the body: what a loss cancels (None in the sync driver).
        self.task: cancellation.Task | None = None

    async def _enter(self, lock: Primitive[Any], handles: Sequence[Handle]) -> None:
        if self._entered or lock._closed:
            self._refuse_entry(lock, handles)
        self._entered = True
        # Linked only from here to the exit: a hold never entered (a  # unasync: async only
        # reentrant re-entry's) is freed as soon as it is dropped.  # unasync: async only
        for handle in handles:  # unasync: async only
            handle._holding = self  # unasync: async only
        task = cancellation.current_task()
        try:
            await lock._run(flows.acquire_all(lock, handles), None, task)
            if lock._closed:
                await lock._refuse_granted(handles)
        except BaseException:
            _let_go(handles)
            raise
        self._cancelling = cancellation.cancelling(task)  # unasync: async only
        self.task = task  # unasync: async only

    async def _exit(
        self,
        lock: Primitive[Any],
        handles: Sequence[Handle],
        machine: Group,
        ev: BaseException | None,
    ) -> None:
        task = self.task
        # unasync: begin async only
        end, outside = ev, False
        if machine.body_cancelled:  # tested here: a lock cycle pays no call for a loss
            # The loss's cancel is taken back; one from outside wins.
            end = await cancellation.receive_loss_cancel(machine, task, ev)
            outside = cancellation.outside_cancel(machine, task, self._cancelling, end)
        # unasync: end
        try:
            await lock._run(flows.finish_all(lock, handles), None, task)
        finally:
            _let_go(handles)
        if outside:  # unasync: async only
            if end is not None and end is not ev:  # unasync: async only
                raise end  # unasync: async only
            return  # unasync: async only
        self._conclude(machine, ev)


def _let_go(handles: Sequence[Handle]) -> None:
    """The handles forget their hold once it is over: there is no body left for a loss to
    cancel, and a handle and its hold that refer to each other would be freed only by the
    cycle collector."""
    for handle in handles:
        handle._holding = None


class _Hold(_Holding, Generic[H]):
    """Holds one key of a primitive for an ``async with`` block (:meth:`Lock.hold`), and
    gives its handle.

    Only the handle is kept: the Lock and the core's group are the handle's, and the
    one-element sequence the flows take is made when they run, so a held lock carries no
    group object of the driver's."""

    __slots__ = ("_handle",)

    def __init__(self, lock: Primitive[H], id: str, options: AsyncHoldOptions) -> None:
        # _Holding's fields, set here: this is the hold every run() makes.
        self._entered = False
        self._cancelling = 0
        self.task = None
        self._handle: H = lock._new_handle(id, options, watch=True)

    async def __aenter__(self) -> H:
        handle = self._handle
        await self._enter(handle._lock, (handle,))
        return handle

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        handle = self._handle
        await self._exit(handle._lock, (handle,), handle._machine, ev)


class _HoldMany(_Holding):
    """Holds several locks for an ``async with`` block (:meth:`Lock.hold_many`), and gives
    the group."""

    __slots__ = ("_group", "_lock", "_machine")

    def __init__(self, lock: Lock, ids: Sequence[str], options: AsyncHoldOptions) -> None:
        super().__init__()
        self._lock = lock
        self._machine, self._group = lock._new_group(ids, options, watch=True)

    async def __aenter__(self) -> LockGroup:
        await self._enter(self._lock, self._group.handles)
        return self._group

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._exit(self._lock, self._group.handles, self._machine, ev)
