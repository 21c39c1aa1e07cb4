"""The asyncio driver: redis-py asyncio IO around the pure :class:`~distlock._core.section.Section`.

It mirrors :mod:`distlock._sync` step for step; the differences are only how IO waits.
Timers are the event loop's own (``call_later``), so a section that finishes before its
first heartbeat starts no task.  On loss the body is cancelled (``cancel_on_loss``) and
``run``/``hold`` raise :class:`~distlock.LockLeaseLostError`, the way ``asyncio.timeout``
turns its cancellation into ``TimeoutError``.  Releases survive cancellation: a release
interrupted in flight is sent again from a background task, so cancelling a caller never
drops the token before Redis has answered a release.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any, TypeVar, cast

import redis.asyncio as aredis
from redis.exceptions import NoScriptError

from distlock import _flows as flows
from distlock._base import GroupBase, HandleBase, LockBase, now_ms, split_client
from distlock._core.section import Op, Phase, Section, Step, Trace, verdict
from distlock._flows import Call, Flow, Request, Sleep
from distlock.options import (
    DEFAULT_DRIFT_FACTOR,
    DEFAULT_PREFIX,
    DEFAULT_RETRIES,
    DEFAULT_RETRY_DELAY_MS,
    DEFAULT_TTL_MS,
    UNSET,
    Heartbeat,
    RenewErrorHook,
    Unset,
    check_ttl,
)
from distlock.signal import AsyncLeaseSignal

T = TypeVar("T")
_NO_GUARD = nullcontext()
ClientFactory = Callable[[], "aredis.Redis | Awaitable[aredis.Redis]"]


class LockHandle(HandleBase):
    """An acquired lock (asyncio): ``key``, ``token``, ``fence`` and ``signal``."""

    __slots__ = ("_lock", "_task", "_timer", "signal")

    def __init__(
        self, lock: Lock, section: Section, signal: AsyncLeaseSignal | None = None
    ) -> None:
        super().__init__(section)
        self._lock = lock
        self.signal = AsyncLeaseSignal() if signal is None else signal
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[Any] | None = None

    async def extend(self, ttl_ms: int | None = None) -> bool:
        """Reset the key's TTL (default: the lock's TTL) if our token still owns it.

        False fires ``signal``. Connection errors propagate.
        """
        ttl = self.section.config.ttl_ms if ttl_ms is None else check_ttl(ttl_ms)
        return await self._lock._extend(self, ttl)

    async def release(self) -> bool:
        """Delete the key if our token still owns it. True only if it did.

        Cancellation-safe: if the caller is cancelled meanwhile, the release is completed
        in the background (``Lock.aclose()`` waits for it) and the cancellation propagates.
        """
        return await self._lock._release(self)


class LockGroup(GroupBase[LockHandle]):
    """Several locks held together (see :meth:`Lock.hold_many`): ``group[id]`` is one
    handle; ``signal`` aborts with the first loss among them."""

    __slots__ = ("signal",)

    def __init__(
        self, prefix: str, handles: Sequence[LockHandle], signal: AsyncLeaseSignal
    ) -> None:
        super().__init__(prefix, handles)
        self.signal = signal


class _Holding:
    """Holds the locks of ``sections`` for an ``async with`` block: :meth:`Lock.hold` (one,
    gives its handle) and :meth:`Lock.hold_many` (a group, gives the group) alike."""

    __slots__ = ("_cancelling", "_group", "_lock")

    def __init__(self, lock: Lock, sections: list[Section]) -> None:
        signal = AsyncLeaseSignal()
        self._lock = lock
        handles = [LockHandle(lock, section, signal) for section in sections]
        self._group = LockGroup(lock.prefix, handles, signal)
        self._cancelling = 0

    async def _enter(self) -> LockGroup:
        lock, group = self._lock, self._group
        await lock._run(flows.acquire_all(lock, group.handles))
        task = asyncio.current_task()
        self._cancelling = task.cancelling() if task is not None else 0
        for handle in group.handles:
            handle._task = task
            lock.arm(handle)
        return group

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        group = self._group
        sections = [h.section for h in group]
        task = group.handles[0]._task
        # The first loss cancelled the body once: consume that cancel only; one from
        # outside on top of it stays and wins.
        outside_cancel = (
            any(s.cancel_requested for s in sections)
            and task is not None
            and task.uncancel() > self._cancelling
            and isinstance(ev, asyncio.CancelledError)
        )
        await self._lock._run(flows.finish_all(self._lock, group.handles))
        if outside_cancel:
            return
        outcome = verdict(sections, group.signal.reason, ev)
        if outcome is ev:
            return
        assert outcome is not None
        raise outcome from ev


class _Hold(_Holding):
    async def __aenter__(self) -> LockHandle:
        return (await self._enter()).handles[0]


class _HoldMany(_Holding):
    async def __aenter__(self) -> LockGroup:
        return await self._enter()


class Lock(LockBase):
    """A Redis lock namespace for asyncio: keys are ``<prefix>:<id>``.

    ``client`` is a ``redis.asyncio.Redis``, a URL (the Lock then owns the client and closes
    it in :meth:`aclose`), or a zero-argument factory, sync or async, called on first use.
    """

    def __init__(
        self,
        client: aredis.Redis | str | ClientFactory,
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_ms: int = DEFAULT_TTL_MS,
        retries: int = DEFAULT_RETRIES,
        retry_delay_ms: float = DEFAULT_RETRY_DELAY_MS,
        heartbeat_ms: Heartbeat = None,
        on_renew_error: RenewErrorHook | None = None,
        cancel_on_loss: bool = True,
        drift_factor: float = DEFAULT_DRIFT_FACTOR,
        trace: Trace | None = None,
    ) -> None:
        super().__init__(
            prefix=prefix,
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
            drift_factor=drift_factor,
            trace=trace,
        )
        self.cancel_on_loss = bool(cancel_on_loss)
        self._owns_client = isinstance(client, str)
        self._client: aredis.Redis | None
        self._factory: ClientFactory
        self._client, self._factory = split_client(client, aredis.Redis, aredis.Redis.from_url)
        self._resolving: asyncio.Lock | None = None
        #: Renewals, and releases finishing after a cancel: kept referenced, awaited by aclose().
        self._tasks: set[asyncio.Task[Any]] = set()
        self._handles: set[LockHandle] = set()
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    async def client(self) -> aredis.Redis:
        """The Redis client, created on first use when a URL or factory was given."""
        if self._client is not None:
            return self._client
        if self._resolving is None:
            self._resolving = asyncio.Lock()
        async with self._resolving:
            if self._client is None:
                made = self._factory()
                self._client = await made if inspect.isawaitable(made) else made
            return self._client

    async def aclose(self) -> None:
        """Let interrupted releases finish, stop renewals and timers; close a client we made."""
        self._closed = True
        for handle in list(self._handles):
            if handle._timer is not None:
                handle._timer.cancel()
                handle._timer = None
        pending = list(self._tasks)
        for task in pending:
            if task.get_name().startswith("distlock-renew"):
                task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if self._owns_client and self._client is not None:
            await self._client.aclose()

    async def __aenter__(self) -> Lock:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- public API ------------------------------------------------------------------------

    async def acquire(
        self,
        id: str,
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
    ) -> LockHandle | None:
        """Take the lock, or return None if another owner holds it (after any retries).

        Not renewed in the background: ``await handle.extend()`` if the work can outlive
        the TTL, and ``await handle.release()`` when done.
        """
        opts = self.defaults.override(ttl_ms=ttl_ms, retries=retries, retry_delay_ms=retry_delay_ms)
        handle = await self._acquire(self._section(id, opts, watch=False, cancel_on_loss=False))
        return handle if handle.section.phase is Phase.HELD else None

    def hold(
        self,
        id: str,
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
        heartbeat_ms: Heartbeat | Unset = UNSET,
        on_renew_error: RenewErrorHook | Unset | None = UNSET,
        cancel_on_loss: bool | Unset = UNSET,
    ) -> _Hold:
        """``async with locks.hold(id) as handle``: renewed while the block runs.

        On loss the block is cancelled (unless ``cancel_on_loss=False``) and
        :class:`LockLeaseLostError` is raised on exit, even when the block succeeded.
        Options are validated here, before any Redis command.
        """
        opts = self.defaults.override(
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
        )
        section = self._section(id, opts, watch=True, cancel_on_loss=self._cancels(cancel_on_loss))
        return _Hold(self, [section])

    async def run(
        self,
        id: str,
        fn: Callable[[LockHandle], Awaitable[T]],
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
        heartbeat_ms: Heartbeat | Unset = UNSET,
        on_renew_error: RenewErrorHook | Unset | None = UNSET,
        cancel_on_loss: bool | Unset = UNSET,
    ) -> T:
        """``await fn(handle)`` under the lock; see :meth:`hold`."""
        async with self.hold(
            id,
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
            cancel_on_loss=cancel_on_loss,
        ) as handle:
            return await fn(handle)

    def hold_many(
        self,
        ids: Sequence[str],
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
        heartbeat_ms: Heartbeat | Unset = UNSET,
        on_renew_error: RenewErrorHook | Unset | None = UNSET,
        cancel_on_loss: bool | Unset = UNSET,
    ) -> _HoldMany:
        """``async with locks.hold_many(ids) as group``: several locks, as :meth:`hold` holds
        one, taken in sorted key order (so callers never deadlock on each other) and
        released in reverse. The block is cancelled on the first loss among them."""
        opts = self.defaults.override(
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
        )
        sections = self._group_sections(ids, opts, cancel_on_loss=self._cancels(cancel_on_loss))
        return _HoldMany(self, sections)

    async def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], Awaitable[T]],
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
        heartbeat_ms: Heartbeat | Unset = UNSET,
        on_renew_error: RenewErrorHook | Unset | None = UNSET,
        cancel_on_loss: bool | Unset = UNSET,
    ) -> T:
        """``await fn(group)`` holding every lock in ``ids``; see :meth:`hold_many`."""
        async with self.hold_many(
            ids,
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
            cancel_on_loss=cancel_on_loss,
        ) as group:
            return await fn(group)

    def _cancels(self, cancel_on_loss: bool | Unset) -> bool:
        """A call's ``cancel_on_loss``, or the Lock's when the call leaves it unset."""
        return self.cancel_on_loss if isinstance(cancel_on_loss, Unset) else bool(cancel_on_loss)

    # -- IO: the flows of distlock._flows, run with awaits -----------------------------------

    async def _call(self, call: Call) -> int:
        client = self._client if self._client is not None else await self.client()
        script = call.script
        try:
            reply = await client.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
        except NoScriptError:
            reply = await client.eval(script.source, len(call.keys), *call.keys, *call.args)
        return int(cast(Any, reply))

    async def _run(self, flow: Flow[T], request: Request | None = None) -> T:
        """Run ``flow``; ``request`` resumes one whose pending request was interrupted."""
        try:
            if request is None:
                request = next(flow)
            while True:
                if isinstance(request, Sleep):
                    await asyncio.sleep(max(0.0, request.until_ms - now_ms()) / 1000.0)
                    request = flow.send(0)
                    continue
                try:
                    reply = await self._call(request)
                except asyncio.CancelledError as exc:
                    if request.finish_on_cancel:
                        # It may or may not have reached Redis: send it again, same token,
                        # and let the flow run to its end in the background.
                        self._spawn(self._run(flow, request), name="distlock-release")
                        raise
                    request = flow.throw(exc)
                except BaseException as exc:
                    request = flow.throw(exc)
                else:
                    request = flow.send(reply)
        except StopIteration as stop:
            return cast(T, stop.value)

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a background release's error has no caller

    async def _acquire(self, section: Section) -> LockHandle:
        if self._closed:
            raise RuntimeError("this Lock is closed")
        handle = LockHandle(self, section)
        await self._run(flows.acquire(self, handle))
        return handle

    async def _release(self, handle: LockHandle) -> bool:
        return await self._run(flows.release(self, handle))

    async def _extend(self, handle: LockHandle, ttl_ms: int) -> bool:
        return await self._run(flows.extend(self, handle, ttl_ms))

    # -- Effects, for the flows --------------------------------------------------------------

    def guard(self, handle: LockHandle) -> AbstractContextManager[object]:
        return _NO_GUARD  # one thread: the event loop's

    def apply(self, handle: LockHandle, step: Step) -> None:
        if step.loss is not None:
            first = handle.signal._fire(step.loss)
            # A group's handles share one signal: its body is cancelled once, by the first.
            if step.cancel_body and first and handle._task is not None:
                handle._task.cancel()
        if step.send is Op.EXTEND:
            self._spawn(self._run(flows.renew(self, handle)), name=f"distlock-renew {handle.key}")

    def arm(self, handle: LockHandle) -> None:
        if handle._timer is not None:
            handle._timer.cancel()
            handle._timer = None
        wake_at = handle.section.wake_at
        if wake_at is None or self._closed:
            self._handles.discard(handle)
            return
        self._handles.add(handle)
        delay = max(0.0, wake_at - now_ms()) / 1000.0
        handle._timer = asyncio.get_running_loop().call_later(delay, flows.tick, self, handle)


__all__ = ["Lock", "LockGroup", "LockHandle"]
