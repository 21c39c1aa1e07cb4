"""The asyncio driver: redis-py asyncio IO around the pure core (:mod:`distlock._core`).

It runs the same flows (:mod:`distlock._flows`) as the sync driver; the differences are
only how IO waits.  Timers are the event loop's own (``call_later``), so a section that
finishes before its first heartbeat starts no task.  On loss the body is cancelled
(``cancel_on_loss``) and ``run``/``hold`` raise :class:`~distlock.LockLeaseLostError`, the
way ``asyncio.timeout`` turns its cancellation into ``TimeoutError``.  Releases survive
cancellation: a release interrupted in flight is sent again from a background task, so
cancelling a caller never drops the token before Redis has answered a release.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import Any, TypeVar, Unpack, cast

import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError
from redis.retry import Retry

from distlock import _flows as flows
from distlock._base import (
    GroupBase,
    HandleBase,
    HoldingBase,
    LockBase,
    conclude,
    now_ms,
    split_client,
)
from distlock._core.commands import Command, Op, Step
from distlock._core.group import Group
from distlock._core.section import Phase, Section
from distlock._flows import Flow, Request, Sleep
from distlock._protocol import decode, encode
from distlock.events import Observer
from distlock.options import (
    ACQUIRE_KEYS,
    ASYNC_HOLD_KEYS,
    ASYNC_LOCK_KEYS,
    AcquireOptions,
    AsyncHoldOptions,
    AsyncLockOptions,
    check_ttl,
)
from distlock.signal import AsyncLeaseSignal

T = TypeVar("T")
_ONE_ATTEMPT = Retry(NoBackoff(), 0)
_NO_GUARD = nullcontext()
#: What an asyncio Lock talks through (a Sentinel's ``master_for`` gives a redis.asyncio.Redis).
Client = aredis.Redis | aredis.RedisCluster
ClientFactory = Callable[[], "Client | Awaitable[Client]"]


class LockHandle(HandleBase):
    """An acquired lock (asyncio): ``key``, ``token``, ``fence`` and ``signal``."""

    __slots__ = ("_holding", "_lock", "_timer", "signal")

    def __init__(
        self,
        lock: Lock,
        section: Section,
        machine: Group,
        observers: tuple[Observer, ...],
        signal: AsyncLeaseSignal,
    ) -> None:
        super().__init__(section, machine, observers)
        self._lock = lock
        self.signal = signal
        self._timer: asyncio.TimerHandle | None = None
        #: The hold() whose body this handle's loss cancels (None for acquire()).
        self._holding: _Holding | None = None

    async def extend(self, ttl_ms: int | None = None) -> bool:
        """Reset the key's TTL (default: the lock's TTL) if our token still owns it.

        False fires ``signal``. Connection errors propagate.  Only for handles from
        :meth:`Lock.acquire`: under ``run``/``hold`` the lease is renewed for you.
        """
        ttl = self._section.config.ttl_ms if ttl_ms is None else check_ttl(ttl_ms)
        return await self._lock._run(flows.extend(self._lock, self, ttl))

    async def release(self) -> bool:
        """Delete the key if our token still owns it. True only if it did.

        Cancellation-safe: if the caller is cancelled meanwhile, the release is completed
        in the background (``Lock.aclose()`` waits for it) and the cancellation propagates.
        """
        return await self._lock._run(flows.release(self._lock, self))

    async def __aenter__(self) -> LockHandle:
        """``async with handle:`` releases on exit, and raises :class:`LockLeaseLostError`
        if the key was no longer ours by then (the handle is not renewed: see ``hold``)."""
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.release()
        conclude(self._machine, ev)


class LockGroup(GroupBase[LockHandle]):
    """Several locks held together (see :meth:`Lock.hold_many`): ``group[id]`` is one
    handle; ``signal`` aborts with the first loss among them."""

    __slots__ = ("signal",)

    def __init__(
        self, prefix: str, handles: Sequence[LockHandle], signal: AsyncLeaseSignal
    ) -> None:
        super().__init__(prefix, handles)
        self.signal = signal


class _Holding(HoldingBase):
    """Holds a group of locks for an ``async with`` block: :meth:`Lock.hold` (one, gives
    its handle) and :meth:`Lock.hold_many` (several, gives the group) alike."""

    __slots__ = ("_cancelling", "_group", "_lock", "_machine", "task")

    def __init__(self, lock: Lock, ids: Sequence[str], options: AsyncHoldOptions) -> None:
        super().__init__()
        self._lock = lock
        self._machine, self._group = lock._new_group(ids, options, watch=True)
        for handle in self._group.handles:
            handle._holding = self
        self._cancelling = 0
        #: The task running the body: what a loss cancels.
        self.task: asyncio.Task[Any] | None = None

    async def _enter(self) -> LockGroup:
        lock, group = self._lock, self._group
        self._start(lock, group.handles)
        await lock._run(flows.acquire_all(lock, group.handles))
        task = asyncio.current_task()
        self._cancelling = task.cancelling() if task is not None else 0
        self.task = task
        return group

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        machine, task = self._machine, self.task
        # The first loss cancelled the body once: consume that cancel only; one from
        # outside on top of it stays and wins.
        outside_cancel = (
            machine.body_cancelled
            and task is not None
            and task.uncancel() > self._cancelling
            and isinstance(ev, asyncio.CancelledError)
        )
        await self._lock._run(flows.finish_all(self._lock, self._group.handles))
        if outside_cancel:
            return
        self._conclude(machine, ev)


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
    Options (see :class:`distlock.options.AsyncLockOptions`) are the defaults of every call.
    """

    def __init__(
        self,
        client: Client | str | ClientFactory,
        **options: Unpack[AsyncLockOptions],
    ) -> None:
        super().__init__(ASYNC_LOCK_KEYS, options)
        self._owns_client = isinstance(client, str)
        self._client: Client | None
        self._factory: ClientFactory
        self._client, self._factory = split_client(
            client,
            (aredis.Redis, aredis.RedisCluster),
            aredis.Redis.from_url,
            driver="distlock.asyncio",
            other=(redis.Redis, redis.RedisCluster),
            other_driver="distlock",
        )
        self._resolving: asyncio.Lock | None = None
        #: Renewals, and releases finishing after a cancel: kept referenced, awaited by aclose().
        self._tasks: set[asyncio.Task[Any]] = set()
        self._handles: set[LockHandle] = set()

    @property
    def cancel_on_loss(self) -> bool:
        return self.defaults.cancel_on_loss

    # -- lifecycle -------------------------------------------------------------------------

    async def client(self) -> Client:
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
        """Let interrupted releases finish, stop renewals and timers; close a client we made.
        A closed Lock takes no new locks (:class:`~distlock.LockClosedError`)."""
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

    async def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> LockHandle | None:
        """Take the lock, or return None if another owner holds it (after any retries).

        Not renewed in the background: ``await handle.extend()`` if the work can outlive
        the TTL, and ``await handle.release()`` when done.
        """
        _machine, group = self._new_group([id], options, watch=False, keys=ACQUIRE_KEYS)
        handle = group.handles[0]
        await self._run(flows.acquire(self, handle))
        return handle if handle._section.phase is Phase.HELD else None

    def hold(self, id: str, **options: Unpack[AsyncHoldOptions]) -> _Hold:
        """``async with locks.hold(id) as handle``: renewed while the block runs.

        On loss the block is cancelled (unless ``cancel_on_loss=False``) and
        :class:`LockLeaseLostError` is raised on exit, even when the block succeeded.
        Options are validated here, before any Redis command.
        """
        return _Hold(self, [id], options)

    async def run(
        self,
        id: str,
        fn: Callable[[LockHandle], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """``await fn(handle)`` under the lock; see :meth:`hold`."""
        async with self.hold(id, **options) as handle:
            return await fn(handle)

    def hold_many(self, ids: Sequence[str], **options: Unpack[AsyncHoldOptions]) -> _HoldMany:
        """``async with locks.hold_many(ids) as group``: several locks, as :meth:`hold` holds
        one, taken in sorted key order (so callers never deadlock on each other) and
        released in reverse. The block is cancelled on the first loss among them."""
        return _HoldMany(self, self._group_ids(ids), options)

    async def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """``await fn(group)`` holding every lock in ``ids``; see :meth:`hold_many`."""
        async with self.hold_many(ids, **options) as group:
            return await fn(group)

    # -- groups ------------------------------------------------------------------------------

    def _new_group(
        self,
        ids: Sequence[str],
        options: AcquireOptions | AsyncHoldOptions,
        *,
        watch: bool,
        keys: frozenset[str] = ASYNC_HOLD_KEYS,
    ) -> tuple[Group, LockGroup]:
        opts = self.defaults.override(keys, options)
        machine, sections, observers = self._sections_for(
            ids, opts, watch=watch, cancel_on_loss=watch and opts.cancel_on_loss
        )
        signal = AsyncLeaseSignal()
        handles = [LockHandle(self, s, machine, observers, signal) for s in sections]
        return machine, LockGroup(self.prefix, handles, signal)

    # -- IO: the flows of distlock._flows, run with awaits -----------------------------------

    async def _call(self, command: Command) -> int:
        client = self._client if self._client is not None else await self.client()
        script, keys, args = encode(command)
        if command.best_effort and isinstance(client, aredis.Redis):
            reply = await self._call_once(client, script.sha, script.source, keys, args)
            return decode(command, reply)
        try:
            reply = await client.evalsha(script.sha, len(keys), *keys, *args)
        except NoScriptError:
            reply = await client.eval(script.source, len(keys), *keys, *args)
        return decode(command, reply)

    @staticmethod
    async def _call_once(
        client: aredis.Redis, sha: str, source: str, keys: list[str], args: list[str | int]
    ) -> object:
        """One attempt on a connection of its own, with no retry (of the command or of
        the connect): the pool's connections retry as the client was configured."""
        # Typed Any: parts of redis-py's connection API carry no annotations.
        api: Any = client
        pool: Any = client.connection_pool
        conn: Any = pool.connection_class(**{**pool.connection_kwargs, "retry": _ONE_ATTEMPT})
        try:
            try:
                await conn.send_command("EVALSHA", sha, len(keys), *keys, *args)
                reply = await api.parse_response(conn, "EVALSHA")
            except NoScriptError:
                await conn.send_command("EVAL", source, len(keys), *keys, *args)
                reply = await api.parse_response(conn, "EVAL")
        finally:
            await conn.disconnect()
        return reply

    async def _run(self, flow: Flow[T], request: Request | None = None) -> T:
        """Run ``flow``; ``request`` resumes one whose pending request was interrupted.

        Whatever interrupts a wait (a cancellation, a timeout) is thrown into the flow, so
        it can give back what it took before the exception leaves.
        """
        try:
            if request is None:
                request = next(flow)
            while True:
                try:
                    if isinstance(request, Sleep):
                        await asyncio.sleep(max(0.0, request.until_ms - now_ms()) / 1000.0)
                        reply = 0
                    else:
                        reply = await self._call(request)
                except asyncio.CancelledError as exc:
                    if isinstance(request, Command) and request.op is Op.RELEASE:
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

    # -- Effects, for the flows --------------------------------------------------------------

    def _guard(self, handle: LockHandle) -> AbstractContextManager[object]:
        return _NO_GUARD  # one thread: the event loop's

    def _apply(self, handle: LockHandle, step: Step) -> None:
        if step.loss is not None:
            loss, cancel = handle._machine.on_loss(step)
            if loss is not None:
                handle.signal._fire(loss)
            holding = handle._holding
            if cancel and holding is not None and holding.task is not None:
                holding.task.cancel()
        command = step.send
        if command is not None and command.op is Op.RENEW:
            self._spawn(
                self._run(flows.renew(self, handle, command)), name=f"distlock-renew {handle.key}"
            )

    def _arm(self, handle: LockHandle) -> None:
        if handle._timer is not None:
            handle._timer.cancel()
            handle._timer = None
        wake_at = handle._armed_at = handle._section.wake_at
        if wake_at is None or self._closed:
            self._handles.discard(handle)
            return
        self._handles.add(handle)
        delay = max(0.0, wake_at - now_ms()) / 1000.0
        handle._timer = asyncio.get_running_loop().call_later(delay, flows.tick, self, handle)


__all__ = ["Lock", "LockGroup", "LockHandle"]
