"""The reentrant lock: the holder of a key may take it again, one level deeper."""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, TypeVar, Unpack, cast

from distlock import _flows as flows
from distlock._core.group import Group
from distlock._core.reentrant import ReentrantSection
from distlock._core.section import Section
from distlock._holding import Holders, inner_verdict
from distlock._operator import LockOwner
from distlock.errors import UsageError
from distlock.options import ACQUIRE_KEYS, AcquireOptions, AsyncHoldOptions, AsyncLockOptions

from . import backend, cancellation
from .handles import LockHandle, _Hold, _let_go
from .primitive import Primitive

T = TypeVar("T")


class ReentrantHandle(LockHandle):
    """One level of a :class:`ReentrantLock` held by the current holder (the thread, or
    under asyncio the task).

    ``depth`` is 1 for the outermost level, 2 for the one inside it, and so on.  Every level
    shares the outermost level's ``key``, ``token``, ``fence``, ``signal`` and renewal.
    """

    __slots__ = ("_depth", "_holder", "_level_open", "_root")

    def __init__(
        self,
        lock: Primitive[Any],
        section: Section,
        machine: Group,
    ) -> None:
        super().__init__(lock, section, machine)
        self._depth = 1
        #: The outermost level's handle (None: this is it).
        self._root: ReentrantHandle | None = None
        self._level_open = True
        #: The holder of the outermost level (only while registered).
        self._holder: weakref.ref[backend.Holder] | None = None

    @property
    def depth(self) -> int:
        """1 for the outermost level, 2 for a re-entry inside it, and so on."""
        return self._depth

    @property
    def held(self) -> bool:
        """This level is open and the key is held and not known lost."""
        return self._level_open and self._section.holding

    async def extend(self, ttl_ms: int | None = None) -> bool:
        """As :meth:`LockHandle.extend`: the one lease every level shares."""
        root = self._root
        if root is None:
            return await super().extend(ttl_ms)
        return await root.extend(ttl_ms)

    async def release(self) -> bool:
        """Exit this level.  An inner level writes the depth to Redis and never frees the
        key: True if our token still held it, False if the lease is known lost or the level
        was already released.  The outermost level frees the key, as
        :meth:`LockHandle.release` does, once every inner level has exited.
        """
        lock = cast(ReentrantLock, self._lock)
        if self._root is None:
            return await lock._release_outermost(self)
        return await lock._leave(self)

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._root is None:
            await super().__aexit__(et, ev, tb)
            return
        await self.release()
        inner_verdict(self._section, ev)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]} depth={self._depth}>"


class _OuterHold(_Hold[ReentrantHandle]):
    """The outermost level's ``hold()``: a lock's, except that under asyncio the cancel a
    loss sent to the body is taken back by whichever level's exit sees it first (the
    innermost open one), so that every level surfaces :class:`LockLeaseLostError`, never
    ``CancelledError`` (see :func:`cancellation.take_loss_cancel`)."""

    __slots__ = ("_consumed",)

    def __init__(self, lock: ReentrantLock, id: str, options: AsyncHoldOptions) -> None:
        super().__init__(lock, id, options)
        self._consumed = False

    def _take_loss_cancel(self, ev: BaseException | None) -> bool | None:
        return cancellation.take_loss_cancel(self, self._handle._machine, ev)

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        handle = self._handle
        end = await cancellation.receive_loss_cancel(handle._machine, self.task, ev)
        outside_cancel = self._take_loss_cancel(end) is True
        try:
            await handle._lock._run(flows.finish_all(handle._lock, (handle,)))
        finally:
            _let_go((handle,))
        if outside_cancel:
            if end is not None and end is not ev:  # unasync: async only
                raise end  # unasync: async only
            return
        self._conclude(handle._machine, ev)


class _ReentrantHold:
    """``async with locks.hold(id)`` on a :class:`ReentrantLock`: the outermost level if
    the current holder does not hold ``id`` through this lock yet, a re-entry if it does."""

    __slots__ = ("_entered", "_hold", "_inner", "_lock")

    def __init__(self, lock: ReentrantLock, id: str, options: AsyncHoldOptions) -> None:
        self._lock = lock
        #: Options are validated now, before any command; used if this is the outermost level.
        self._hold = _OuterHold(lock, id, options)
        self._inner: ReentrantHandle | None = None
        self._entered = False

    async def __aenter__(self) -> ReentrantHandle:
        if self._entered:
            raise UsageError(
                "this hold() was already entered; call hold() again for another section"
            )
        self._entered = True
        lock = self._lock
        key = self._hold._handle.key
        lock._check_open(key)
        holder = backend.holder(key)
        outer = lock._holders.get(holder, key)
        if outer is not None:
            self._inner = await lock._reenter(outer)
            return self._inner
        handle = await self._hold.__aenter__()
        lock._register(holder, handle)
        return handle

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        inner = self._inner
        if inner is None:
            handle = self._hold._handle
            try:
                # As a manual release of the outermost level: refused while an inner level
                # is open, the key still held and renewed (the core's rule, for both
                # drivers).
                cast(ReentrantSection, handle._section).check_outermost_exit()
            except UsageError:
                # The block is over, so a later loss has no body to cancel: the cancel a
                # loss already sent is taken back, and the hold lets go.
                self._hold._take_loss_cancel(ev)
                _let_go((handle,))
                raise
            try:
                await self._hold.__aexit__(et, ev, tb)
            finally:
                handle._level_open = False
                self._lock._unregister(handle)
            return
        root = inner._root
        assert root is not None
        holding = root._holding
        took = None
        if cancellation.is_cancel(ev) and isinstance(holding, _OuterHold):
            took = holding._take_loss_cancel(ev)
        # LeaveFail: not a loss (the depth in Redis is advisory); the outermost exit is
        # what frees the key and decides the verdict.
        with contextlib.suppress(Exception):
            await self._lock._leave(inner)
        if took is None and cancellation.is_cancel(ev):
            return  # a cancel from outside, not the loss's: it propagates
        if took is True:
            return
        inner_verdict(inner._section, ev)


class ReentrantLock(Primitive[ReentrantHandle]):
    """A reentrant Redis lock namespace: the holder of ``id`` may take it again.

    Everything a :class:`Lock` takes (client forms, options, errors, signal, renewal,
    cancellation) applies, and it offers a ``Lock``'s calls but the groups: one key at a
    time, so no ``hold_many``/``run_many`` (nest ``hold`` calls, or use ``Lock`` for
    several keys at once).  The holder is the current thread (sync), or the current task
    (asyncio: ``asyncio.current_task()``, never a context variable: a child task the
    holder creates is another holder and is refused, as it would deadlock on a key its
    parent holds only if it waited).  Re-entry is recognised per ``ReentrantLock`` object,
    so a second object for the same key is another holder and is refused.  A re-entry
    never waits, costs one round trip, and returns a handle with ``depth`` one more than
    the level it is in; the key is freed only when the outermost level exits.  The key is
    a hash (``<token>`` -> depth, ``fence``), so a :class:`Lock` and a ``ReentrantLock``
    on the same key refuse each other.

    >>> locks = ReentrantLock("redis://127.0.0.1:6379/0", prefix="cart")  # doctest: +SKIP
    """

    _PRIMITIVE = "ReentrantLock"  # what LockClosedError calls it

    _section_type = ReentrantSection
    _handle_type = ReentrantHandle

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        **options: Unpack[AsyncLockOptions],
    ) -> None:
        super().__init__(client, **options)
        self._holders: Holders[ReentrantHandle] = Holders()

    async def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> ReentrantHandle | None:
        """Take the lock, or return None if another holder has it (after any retries, or
        once ``wait_ms`` has passed without it).

        If the current holder already holds ``id`` through this lock, this is a re-entry:
        it never waits, whatever ``wait_ms`` says, and returns the next level's handle
        (release it before the outer levels).  The outermost handle is not renewed in the
        background, as for :meth:`Lock.acquire`.
        """
        key = self.key(id)
        self._check_open(key)
        holder = backend.holder(key)
        outer = self._holders.get(holder, key)
        if outer is not None:
            self._options(ACQUIRE_KEYS, options)  # validated all the same
            return await self._reenter(outer)
        handle = await self._acquire(id, options)
        if handle is not None:
            self._register(holder, handle)
        return handle

    def hold(self, id: str, **options: Unpack[AsyncHoldOptions]) -> _ReentrantHold:
        """Hold the lock for an ``async with`` block, as :meth:`Lock.hold`; inside a block
        of the same holder on the same ``id``, a re-entry (the outer level's renewal
        covers it)."""
        return _ReentrantHold(self, id, options)

    async def run(
        self,
        id: str,
        fn: Callable[[ReentrantHandle], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """Run ``fn(handle)`` under the lock, as :meth:`Lock.run`, re-entering if the
        current holder already holds ``id`` through this lock."""
        backend.check_body(fn)
        async with self.hold(id, **options) as handle:
            result = await backend.awaitable(fn, fn(handle))
        return backend.returned(fn, result)

    async def owner(self, id: str) -> LockOwner | None:
        """Who holds ``id`` now, as :meth:`Lock.owner`, with the ``fence`` Redis keeps in
        the key."""
        return await self._owner(id)

    # -- levels ------------------------------------------------------------------------------

    def _register(self, holder: backend.Holder, handle: ReentrantHandle) -> None:
        handle._holder = weakref.ref(holder)
        self._holders.add(holder, handle.key, handle)

    def _unregister(self, handle: ReentrantHandle) -> None:
        ref = handle._holder
        holder = ref() if ref is not None else None
        if holder is not None:
            self._holders.remove(holder, handle.key, handle)
        handle._holder = None

    async def _reenter(self, outer: ReentrantHandle) -> ReentrantHandle:
        await self._run(flows.reenter(self, outer))
        inner = ReentrantHandle(self, outer._section, outer._machine)
        inner._root = outer
        inner._depth = cast(ReentrantSection, outer._section).depth
        return inner

    async def _leave(self, inner: ReentrantHandle) -> bool:
        if not inner._level_open:
            return False
        cast(ReentrantSection, inner._section).check_inner_exit(inner._depth)
        inner._level_open = False
        root = inner._root
        assert root is not None
        return await self._run(flows.leave(self, root))

    async def _release_outermost(self, handle: ReentrantHandle) -> bool:
        section = cast(ReentrantSection, handle._section)
        section.check_outermost_exit()
        try:
            # After a release that got no answer, this sends again (as a Lock's handle does).
            return await LockHandle.release(handle)
        finally:
            if section.outermost_ended:
                handle._level_open = False
                self._unregister(handle)
