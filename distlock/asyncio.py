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
import contextlib
import inspect
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from types import CoroutineType, FunctionType, TracebackType
from typing import Any, Final, Self, TypeVar, Unpack, cast

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, ResponseError

from distlock import _flows as flows
from distlock import _renewals as renewals
from distlock._base import (
    GroupBase,
    HandleBase,
    Holders,
    HoldingBase,
    LockBase,
    PermitMixin,
    SemaphoreBase,
    block_seconds,
    check_cluster_client,
    conclude,
    inner_verdict,
    rides_on_waiter_connection,
    semaphore_options,
    socket_timeout_of,
    split_client,
    wake_value,
)
from distlock._clock import now_ms
from distlock._core.commands import Command, Op, Step, replicated
from distlock._core.group import Group
from distlock._core.reentrant import ReentrantSection
from distlock._core.section import Phase, Section
from distlock._direct import Route, packed_evalsha
from distlock._flows import Block, Flow, Request, Sleep
from distlock._loop_timers import LoopTimers
from distlock._operator import LockOwner, force_unlock_call, owner_call, permits_full, read_owner
from distlock._protocol import Script, decode, encode, wake_key
from distlock._replicated import call_async
from distlock._waiter_connections import WaiterConnections
from distlock.errors import LockClosedError, UsageError, ValidationError
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
#: asyncio's own Retry: given a sync one, redis-py 8 warns on every connection it makes.
_ONE_ATTEMPT = Retry(NoBackoff(), 0)
#: Requests that go on after their caller is cancelled: a release (the key is ours until
#: Redis answers one) and a withdrawal (the place would hold up the queue until it expires).
_FINISH_IN_BACKGROUND = frozenset({Op.RELEASE, Op.WITHDRAW})
#: What an asyncio Lock talks through (a Sentinel's ``master_for`` gives a redis.asyncio.Redis).
Client = aredis.Redis | aredis.RedisCluster
ClientFactory = Callable[[], "Client | Awaitable[Client]"]


class LockHandle(HandleBase):
    """An acquired lock (asyncio): ``key``, ``token``, ``fence`` and ``signal``."""

    # No timer of its own: the Lock's LoopTimers keeps the handle in the bucket of the
    # instant ``_armed_at`` names, and that slot alone tells a live entry from a stale one.
    __slots__ = ("_holding", "_lock")

    def __init__(
        self,
        lock: Lock,
        section: Section,
        machine: Group,
    ) -> None:
        super().__init__(section, machine)
        self._lock = lock
        #: The hold() whose body this handle's loss cancels (None for acquire()).
        self._holding: _Holding | None = None

    @property
    def signal(self) -> AsyncLeaseSignal:
        """Aborts with the group's first loss.  Made on first read, once per group, as a
        sync handle's (see :meth:`distlock.LockHandle.signal`)."""
        machine = self._machine
        signal = machine.signal
        if signal is None:  # one thread, the loop's: no guard needed
            signal = machine.signal = AsyncLeaseSignal()
            if machine.first_loss is not None:
                signal._fire(machine.first_loss)
        return cast(AsyncLeaseSignal, signal)

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

    __slots__ = ()

    @property
    def signal(self) -> AsyncLeaseSignal:
        """The one signal its handles share."""
        return self.handles[0].signal


class _Holding(HoldingBase):
    """What :meth:`Lock.hold` (one lock, gives its handle) and :meth:`Lock.hold_many`
    (several, gives the group) share: the task whose body a loss cancels."""

    __slots__ = ("_cancelling", "task")

    def __init__(self) -> None:
        super().__init__()
        self._cancelling = 0
        #: The task running the body: what a loss cancels.
        self.task: asyncio.Task[Any] | None = None

    async def _enter(self, lock: Lock, handles: Sequence[LockHandle]) -> None:
        self._start(lock, handles)
        # Linked only from here to the exit: a hold that is never entered (a reentrant
        # hold's, where the level re-enters) is then freed as soon as it is dropped.
        for handle in handles:
            handle._holding = self
        task = asyncio.current_task()
        try:
            await lock._run(flows.acquire_all(lock, handles), None, task)
            if lock._closed:
                await lock._refuse_granted(handles)
        except BaseException:
            _let_go(handles)
            raise
        self._cancelling = task.cancelling() if task is not None else 0
        self.task = task

    async def _exit(
        self, lock: Lock, handles: Sequence[LockHandle], machine: Group, ev: BaseException | None
    ) -> None:
        task = self.task
        # The first loss cancelled the body once: consume that cancel only; one from
        # outside on top of it stays and wins.
        outside_cancel = (
            machine.body_cancelled
            and task is not None
            and task.uncancel() > self._cancelling
            and isinstance(ev, asyncio.CancelledError)
        )
        try:
            await lock._run(flows.finish_all(lock, handles), None, task)
        finally:
            _let_go(handles)
        if outside_cancel:
            return
        self._conclude(machine, ev)


def _let_go(handles: Sequence[LockHandle]) -> None:
    """The handles forget their hold once it is over: there is no body left for a loss to
    cancel, and a handle and its hold that refer to each other would be freed only by the
    cycle collector."""
    for handle in handles:
        handle._holding = None


class _Hold(_Holding):
    """Holds one lock for an ``async with`` block, and gives its handle.  Only the handle
    is kept (the Lock and the core's group are the handle's), as a sync ``hold()``."""

    __slots__ = ("_handle",)

    def __init__(self, lock: Lock, id: str, options: AsyncHoldOptions) -> None:
        super().__init__()
        self._handle = lock._new_handle(id, options, watch=True)

    async def __aenter__(self) -> LockHandle:
        handle = self._handle
        await self._enter(handle._lock, (handle,))
        return handle

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        handle = self._handle
        await self._exit(handle._lock, (handle,), handle._machine, ev)


class _HoldMany(_Holding):
    """Holds several locks for an ``async with`` block, and gives the group."""

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


class Lock(LockBase):
    """A Redis lock namespace for asyncio: keys are ``<prefix>:<id>``.

    ``client`` is a ``redis.asyncio.Redis``, a URL (the Lock then owns the client and closes
    it in :meth:`aclose`), or a zero-argument factory, sync or async, called on first use.
    Options (see :class:`distlock.options.AsyncLockOptions`) are the defaults of every call.
    A task that waits (``wait_ms``) blocks on a connection of its own, made from the
    client's settings but outside its pool, so that waiters never leave a holder without a
    connection.
    """

    #: The handle each acquisition gets.
    _handle_type: type[LockHandle] = LockHandle
    #: No guard around the flows' core calls: they all run on the event loop's thread.
    _core_guard: flows.Guard | None = None

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
            aredis.RedisCluster.from_url if self.defaults.cluster else aredis.Redis.from_url,
            driver="distlock.asyncio",
            other=(redis.Redis, redis.RedisCluster),
            other_driver="distlock",
        )
        check_cluster_client(self._client, self.defaults.cluster, aredis.RedisCluster)
        self._resolving: asyncio.Lock | None = None
        #: Renewals, and releases finishing after a cancel: kept referenced, awaited by aclose().
        self._tasks: set[asyncio.Task[Any]] = set()
        self._route = Route(aredis.Redis)
        #: Every section's timer, on one event-loop timer.
        self._timers: LoopTimers = LoopTimers(self._tick)
        #: Renewals sent in the current loop iteration, flushed together at its end.
        self._renewing: list[renewals.Renewal] = []
        self._waiter_conns = WaiterConnections()
        #: Tasks blocked in a waiter's BLPOP now: aclose() cancels them, and they raise
        #: LockClosedError (the cancels it sent are in _closing, consumed by the waiter).
        self._blocked: set[asyncio.Task[Any]] = set()
        self._closing: set[asyncio.Task[Any]] = set()

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
        """Close the Lock: every call after it raises :class:`~distlock.LockClosedError`.

        A section open now (``hold``/``run``) loses its lease as on any loss: its signal
        fires, its body is cancelled (unless ``cancel_on_loss=False``), its key is released
        (one attempt), and its exit raises :class:`~distlock.LockLeaseLostError`
        (:attr:`~distlock.errors.LossReason.LOCK_CLOSED`).  A task waiting for a key raises
        ``LockClosedError`` at once, having withdrawn its place, and is never handed a key.
        Then interrupted releases are let finish, renewals stopped, and a client the Lock
        made is closed.
        """
        self._closed = True
        open_sections = self._timers.close()
        for task in self._blocked:
            if task not in self._closing:
                self._closing.add(task)
                task.cancel()
        # Closed from inside a body: the loss cancels that body, which is this task.  The
        # cancellation is kept until the Lock is closed, then raised (the body ends on it).
        cancelled: asyncio.CancelledError | None = None
        for handle in open_sections:
            try:
                await self._close_section(cast(LockHandle, handle))
            except asyncio.CancelledError as exc:
                cancelled = exc
        try:
            await self._close_background()
        except asyncio.CancelledError as exc:
            cancelled = exc
        if cancelled is not None:
            raise cancelled

    async def _close_background(self) -> None:
        pending = list(self._tasks)
        for task in pending:
            if task.get_name().startswith("distlock-renew"):
                task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        for conn in self._waiter_conns.close():
            await conn.disconnect()
        if self._owns_client and self._client is not None:
            await self._client.aclose()

    async def _close_section(self, handle: LockHandle) -> None:
        with contextlib.suppress(Exception):
            await self._run(flows.close(self, handle))

    async def _refuse_granted(self, handles: Sequence[LockHandle]) -> None:
        """Keys granted to a caller of a Lock closed meanwhile go back: a closed Lock
        hands nobody a key (its sections would run unrenewed)."""
        for handle in handles:
            await self._close_section(handle)
        raise LockClosedError(handles[0].key if len(handles) == 1 else None)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- public API ------------------------------------------------------------------------

    async def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> LockHandle | None:
        """Take the lock, or return None if another owner holds it (after any retries, or
        once ``wait_ms`` has passed without it).

        With ``wait_ms`` the task waits in the lock's queue, in arrival order, handed the
        key by the release; cancelling it while it waits withdraws its place and discards
        its blocked connection before the cancellation propagates.  Not renewed in the background:
        ``await handle.extend()`` if the work can outlive the TTL, and
        ``await handle.release()`` when done.
        """
        handle = self._new_handle(id, options, watch=False, keys=ACQUIRE_KEYS)
        await self._run(flows.acquire(self, handle))
        if self._closed:
            await self._refuse_granted((handle,))
        return handle if handle._section.phase is Phase.HELD else None

    def hold(self, id: str, **options: Unpack[AsyncHoldOptions]) -> _Hold:
        """``async with locks.hold(id) as handle``: renewed while the block runs.

        Raises :class:`LockNotAcquiredError` if the lock is held elsewhere (and, with
        ``wait_ms``, was not released to us within it).  On loss the block is cancelled
        (unless ``cancel_on_loss=False``) and :class:`LockLeaseLostError` is raised on exit,
        even when the block succeeded.
        Options are validated here, before any Redis command.
        """
        return _Hold(self, id, options)

    async def run(
        self,
        id: str,
        fn: Callable[[LockHandle], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """``await fn(handle)`` under the lock; see :meth:`hold`."""
        # What ``async with self.hold(...)`` does, without the two coroutines of the
        # ``async with`` protocol (this is the cycle a renewed lock pays on every use).
        _check_body(fn)
        hold = _Hold(self, id, options)
        handle = hold._handle
        handles = (handle,)
        await hold._enter(self, handles)
        try:
            body = fn(handle)
            if body.__class__ is not CoroutineType:
                body = _awaitable(fn, body)
            result = await body
        except BaseException as exc:
            await hold._exit(self, handles, handle._machine, exc)
            raise
        await hold._exit(self, handles, handle._machine, None)
        return result

    def hold_many(self, ids: Sequence[str], **options: Unpack[AsyncHoldOptions]) -> _HoldMany:
        """``async with locks.hold_many(ids) as group``: several locks, as :meth:`hold` holds
        one, taken in sorted key order (so callers never deadlock on each other) and
        released in reverse; ``wait_ms`` bounds the whole group's acquisition. The block is
        cancelled on the first loss among them."""
        return _HoldMany(self, self._group_ids(ids), options)

    async def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """``await fn(group)`` holding every lock in ``ids``; see :meth:`hold_many`."""
        _check_body(fn)
        async with self.hold_many(ids, **options) as group:
            return await _awaitable(fn, fn(group))

    # -- groups ------------------------------------------------------------------------------

    def _new_group(
        self,
        ids: Sequence[str],
        options: AcquireOptions | AsyncHoldOptions,
        *,
        watch: bool,
        keys: frozenset[str] = ASYNC_HOLD_KEYS,
    ) -> tuple[Group, LockGroup]:
        opts = self._options(keys, options)
        machine, sections = self._sections_for(
            ids, opts, watch=watch, cancel_on_loss=watch and opts.cancel_on_loss
        )
        make = self._handle_type
        handles = tuple([make(self, s, machine) for s in sections])
        return machine, LockGroup(self.prefix, handles)

    def _new_handle(
        self,
        id: str,
        options: AcquireOptions | AsyncHoldOptions,
        *,
        watch: bool,
        keys: frozenset[str] = ASYNC_HOLD_KEYS,
    ) -> LockHandle:
        """One lock's handle, with no driver group around it (``acquire`` and ``hold``)."""
        opts = self._options(keys, options)
        machine, sections = self._sections_for(
            [id], opts, watch=watch, cancel_on_loss=watch and opts.cancel_on_loss
        )
        return self._handle_type(self, sections[0], machine)

    # -- IO: the flows of distlock._flows, run with awaits -----------------------------------

    async def _call(self, command: Command) -> int:
        client = self._client if self._client is not None else await self.client()
        script, keys, args = encode(command)
        if command.replicas:
            reply, acked = await call_async(
                client, script, keys, args, command.replicas, command.replica_timeout_ms
            )
            return replicated(command, decode(command, reply), acked)
        if command.best_effort and isinstance(client, aredis.Redis):
            reply = await self._call_once(client, script, keys, args)
            return decode(command, reply)
        if self._route.direct(client):
            plain: Any = client  # an aredis.Redis (an annotation, not a cast() call)
            reply = await _direct(plain, script, keys, args)
            return decode(command, reply)
        # execute_command rather than evalsha(): the same command, without the wrapper
        # redis-py puts around its command methods (a cost paid twice per lock cycle).
        try:
            reply = await client.execute_command(
                "EVALSHA", script.sha, len(keys), *keys, *args
            )
        except NoScriptError:
            reply = await client.execute_command("EVAL", script.source, len(keys), *keys, *args)
        return decode(command, reply)

    @staticmethod
    async def _call_once(
        client: aredis.Redis, script: Script, keys: list[str], args: list[str | int]
    ) -> object:
        """One attempt on a connection of its own, with no retry (of the command or of
        the connect): the pool's connections retry as the client was configured."""
        # Typed Any: parts of redis-py's connection API carry no annotations.
        pool: Any = client.connection_pool
        conn: Any = pool.connection_class(**{**pool.connection_kwargs, "retry": _ONE_ATTEMPT})
        try:
            return await _script_reply(client, conn, script, keys, args)
        finally:
            await conn.disconnect()

    async def _run(
        self, flow: Flow[T], request: Request | None = None, task: asyncio.Task[Any] | None = None
    ) -> T:
        """Run ``flow``; ``request`` resumes one whose pending request was interrupted.
        ``task`` is the current task, where the caller knows it already (asking costs a
        Python call on 3.11).

        Whatever interrupts a wait (a cancellation, a timeout) is thrown into the flow, so
        it can give back what it took before the exception leaves.

        A cancellation that a library below us swallowed is raised where it was lost: on
        Python 3.11, ``asyncio.wait_for`` (which redis-py wraps around a send when the
        client has a socket timeout) returns normally if the send finished just before the
        cancellation reached it.  The request counts as interrupted, exactly as if the
        cancellation had been raised there.
        """
        if task is None:
            task = asyncio.current_task()
        try:
            if request is None:
                request = next(flow)
            while True:
                if isinstance(request, Block):
                    following = await self._wait(flow, request, task)
                    if isinstance(following, StopIteration):
                        return following.value  # type: ignore[no-any-return]  # the flow's T
                    request = following
                    continue
                cancels = task.cancelling() if task is not None else 0
                try:
                    # A command first, by exact type: that is almost every request.
                    if request.__class__ is Command:
                        reply = await self._call(request)
                    elif isinstance(request, Sleep):
                        await asyncio.sleep(max(0.0, request.until_ms - now_ms()) / 1000.0)
                        reply = 0
                    else:
                        reply = await self._call(request)
                    if task is not None and task.cancelling() > cancels:
                        raise asyncio.CancelledError
                except asyncio.CancelledError as exc:
                    if isinstance(request, Command) and request.op in _FINISH_IN_BACKGROUND:
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
            return stop.value  # type: ignore[no-any-return]  # the flow's T (no cast() call)

    async def _wait(
        self, flow: Flow[T], request: Block, task: asyncio.Task[Any] | None
    ) -> Request | StopIteration:
        """Run ``request`` (a block) and the attempt a wake-up leads to; returns the flow's
        request after them, or the flow's end (a coroutine may not let ``StopIteration``
        out).

        The ``BLPOP`` goes out on a connection of the waiter's own, outside the client's
        pool (:mod:`distlock._waiter_connections`: waiters never starve a holder of
        connections), so that a cancellation (or any error) disconnects it: a connection
        still blocked in Redis is never kept for another block, and Redis forgets the
        blocked client when the socket closes.  The attempt that follows goes out on that
        same connection the moment the reply is in (see
        :func:`rides_on_waiter_connection`): no pool round trip (and its lock) between the
        release and the woken waiter's attempt.  Errors, and a cancellation swallowed below
        us, are thrown into the flow at the request they interrupted, as :meth:`_run`
        does.
        """
        if self._closed:
            return _advance(flow.throw, LockClosedError(request.key))
        cancels = task.cancelling() if task is not None else 0
        conn: Any = None
        blocked = self._blocked
        try:
            client = self._client if self._client is not None else await self.client()
            if task is not None:
                blocked.add(task)  # aclose() cancels it from here to the BLPOP's reply
            try:
                if not isinstance(client, aredis.Redis):
                    key = wake_key(request.key, request.token, request.kind)
                    timeout = block_seconds(request.until_ms, socket_timeout_of(client))
                    woken = wake_value(await client.blpop([key], timeout=timeout))
                    _raise_swallowed(task, cancels)
                else:
                    conn = await self._waiter_connection(client.connection_pool)
                    try:
                        woken = await self._blpop(client, conn, request)
                        _raise_swallowed(task, cancels)
                    except BaseException:
                        await conn.disconnect(nowait=True)
                        raise
            finally:
                if task is not None:
                    blocked.discard(task)
        except BaseException as exc:
            error: BaseException = exc
            if task is not None and task in self._closing:
                # aclose()'s cancel, not the caller's: the caller sees the Lock closed.
                self._closing.discard(task)
                task.uncancel()
                error = LockClosedError(request.key)
            return _advance(flow.throw, error)
        if conn is None:
            return _advance(flow.send, woken)
        try:
            attempt = _advance(flow.send, woken)
        except BaseException:
            await self._keep(conn)
            raise
        cancels = task.cancelling() if task is not None else 0
        try:
            if not rides_on_waiter_connection(self._route, client, attempt):
                await self._keep(conn)
                return attempt
            assert isinstance(attempt, Command)
            try:
                fence = await self._attempt(client, conn, attempt)
            finally:
                await self._keep(conn)
            _raise_swallowed(task, cancels)
        except BaseException as exc:
            # At the attempt's yield: interrupted before or after it went out, the flow
            # cleans up as for any attempt whose reply never came.
            return _advance(flow.throw, exc)
        return _advance(flow.send, fence)

    async def _waiter_connection(self, pool: Any) -> Any:
        """A connection to block on (see :mod:`distlock._waiter_connections`); one kept from
        an earlier block is checked first, as the pool checks its own: one the server
        closed meanwhile (its ``timeout``, a restart) is reconnected, not failed on."""
        conn, kept = self._waiter_conns.take(pool)
        if kept:
            # redis-py 8 names it can_read (can_read_destructive warns there); 5.3 has the
            # old name only.
            can_read = getattr(conn, "can_read", None) or conn.can_read_destructive
            try:
                if await can_read():
                    await conn.disconnect()
            except (aredis.ConnectionError, OSError):
                await conn.disconnect()
        await conn.connect()  # a no-op when connected; a failure to connect surfaces here
        return conn

    async def _keep(self, conn: Any) -> None:
        if not self._waiter_conns.give_back(conn):
            await conn.disconnect()

    @staticmethod
    async def _blpop(client: aredis.Redis, conn: Any, request: Block) -> int:
        """BLPOP the waiter's wake list until ``request.until_ms`` (see :func:`wake_value`)."""
        api: Any = client
        key = wake_key(request.key, request.token, request.kind)
        timeout = block_seconds(request.until_ms, socket_timeout_of(client, conn))
        await conn.send_command("BLPOP", key, timeout)
        if not request.last:
            return wake_value(await api.parse_response(conn, "BLPOP"))
        try:
            # The deadline is ours to keep: Redis's timers end a block up to 1/hz late.
            async with asyncio.timeout(max(0.0, request.until_ms - now_ms()) / 1000):
                return wake_value(await api.parse_response(conn, "BLPOP"))
        except TimeoutError:
            await conn.disconnect(nowait=True)  # Redis forgets the block with the socket
            return 0

    @staticmethod
    async def _attempt(client: object, conn: Any, command: Command) -> int:
        """A waiting attempt on the waiter's own connection, sent as :meth:`_call` sends
        directly (an attempt is idempotent for its token, so it is retried as any)."""
        script, keys, args = encode(command)
        return decode(command, await _on_connection(client, conn, script, keys, args))

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a background release's error has no caller

    # -- Effects, for the flows --------------------------------------------------------------

    def _apply(self, handle: LockHandle, step: Step) -> None:
        if step.loss is not None:
            machine = handle._machine
            loss, cancel = machine.on_loss(step)
            signal = machine.signal  # None: nobody asked for it yet, and it is born fired
            if loss is not None and signal is not None:
                cast(AsyncLeaseSignal, signal)._fire(loss)
            holding = handle._holding
            if cancel and holding is not None and holding.task is not None:
                holding.task.cancel()
        command = step.send
        if command is not None and command.op is Op.RENEW:
            self._renew(handle, command)

    # -- renewals: those due in one tick go out in one pipeline per connection ---------------

    def _renew(self, handle: LockHandle, command: Command) -> None:
        renewal = renewals.begin(self, handle, command)
        if renewals.alone(self._client, command):
            self._spawn(self._renew_alone(renewal), name=f"distlock-renew {handle.key}")
            return
        self._renewing.append(renewal)
        if len(self._renewing) == 1:
            # Timers due together run in one loop iteration; this runs after all of them.
            asyncio.get_running_loop().call_soon(self._flush_renewals)

    def _flush_renewals(self) -> None:
        batch, self._renewing = self._renewing, []
        if self._closed:
            return
        for group in renewals.by_connection(self._client, batch):
            self._spawn(self._renew_batch(group), name="distlock-renew")

    async def _renew_batch(self, batch: list[renewals.Renewal]) -> None:
        """One round trip for ``batch`` (one connection's share), in a task of its own: a
        hung reply holds up this batch only, never a deadline (those are loop timers)."""
        replies = await self._send_batch(batch)
        missing = renewals.unscripted(replies)
        if missing:
            again = await self._send_batch([batch[i] for i in missing], source=True)
            for i, raw in zip(missing, again, strict=True):
                replies[i] = raw
        interrupt = None
        for renewal, raw in zip(batch, replies, strict=True):
            if isinstance(raw, renewals.RESEND):
                self._spawn(self._renew_alone(renewal), name="distlock-renew")
                continue
            interrupt = renewals.settle(renewal, renewals.reply_of(renewal, raw)) or interrupt
        if interrupt is not None:
            raise interrupt

    async def _send_batch(
        self, batch: list[renewals.Renewal], *, source: bool = False
    ) -> list[object]:
        """The replies of one pipeline; if it fails as a whole, its error for every member."""
        try:
            client = self._client if self._client is not None else await self.client()
            pipe = renewals.queue(renewals.pipeline(client), batch, source=source)
            return list(await pipe.execute(raise_on_error=False))
        except BaseException as exc:
            return [exc] * len(batch)

    async def _renew_alone(self, renewal: renewals.Renewal) -> None:
        reply: int | BaseException
        try:
            reply = await self._call(renewal.command)
        except BaseException as exc:
            reply = exc
        interrupt = renewals.settle(renewal, reply)
        if interrupt is not None:
            raise interrupt

    def _tick(self, handle: LockHandle) -> None:
        flows.tick(self, handle)

    # -- reads and an operator's tool, outside any lock cycle ----------------------------------

    async def locked(self, id: str) -> bool:
        """Whether anyone holds ``id`` now (one ``EXISTS``).

        A snapshot: the answer may be stale by the time it is returned, so never decide to
        take the lock on it; :meth:`acquire` decides and takes in one step.
        """
        key = self.key(id)
        client = self._client if self._client is not None else await self.client()
        return bool(await client.exists(key))

    async def owner(self, id: str) -> LockOwner | None:
        """Who holds ``id`` now, or None if nobody does: a read-only snapshot (one script
        that reads ``TYPE``, ``PTTL`` and the key's value as fits its type, so a key held
        by another primitive is reported, never a ``WRONGTYPE`` error).  See
        :class:`~distlock.LockOwner` for what it holds, and ``handle.held`` for what a
        holder itself knows."""
        key = self.key(id)
        return read_owner(key, await _eval(await self.client(), *owner_call(key)))

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
        return bool(await _eval(await self.client(), *force_unlock_call(key)))


# -- bodies ------------------------------------------------------------------------------------


def _check_body(fn: object) -> None:
    """Refuse, before any command, a body that certainly gives nothing to await.

    Only what is certain: a plain ``def`` may return a coroutine (``lambda h: work(h)``), and
    a ``functools.partial`` of an ``async def`` is one, so both pass; what they return is
    checked when they return it (:func:`_awaitable`).  A generator function's generator
    is not awaitable (unless ``types.coroutine`` made it a coroutine), nor an async
    generator function's.
    """
    code = getattr(fn, "__code__", None)
    if type(fn) is FunctionType and code is not None and code.co_flags & inspect.CO_COROUTINE:
        return  # an async def (the common case), told apart without unwrapping
    if not callable(fn):
        raise ValidationError(f"the body must be an async function, got {fn!r:.80}")
    target: object = fn
    while isinstance(target, partial):
        target = target.func
    target = getattr(target, "__func__", target)  # a bound method's function
    flags = getattr(getattr(target, "__code__", None), "co_flags", 0)
    if not isinstance(flags, int):
        return
    if flags & inspect.CO_ASYNC_GENERATOR or (
        flags & inspect.CO_GENERATOR and not flags & inspect.CO_ITERABLE_COROUTINE
    ):
        raise ValidationError(
            f"{getattr(fn, '__name__', fn)!r} is a generator function: what it returns cannot "
            "be awaited; give run an async def function (or one returning an awaitable)"
        )


def _awaitable(fn: object, body: Awaitable[T]) -> Awaitable[T]:
    """What the body returned, if it can be awaited; otherwise a ValidationError, which the
    hold releases the lock for as for any exception of the body (nothing is awaited)."""
    if body.__class__ is CoroutineType or inspect.isawaitable(body):
        return body
    raise ValidationError(
        f"the body {getattr(fn, '__name__', fn)!r} returned {type(body).__name__}, not an "
        "awaitable: the asyncio Lock awaits what the body returns; make it an async def "
        "function, or use the sync distlock.Lock for a plain function"
    )


# -- the reentrant lock ------------------------------------------------------------------------


def _current_task(key: str) -> asyncio.Task[Any]:
    task = asyncio.current_task()
    if task is None:
        raise UsageError(
            f"a ReentrantLock's holder is the current task, and there is none: take {key!r} "
            "from inside a task (a coroutine run by asyncio)",
            key,
        )
    return task


class ReentrantHandle(LockHandle):
    """One level of a :class:`ReentrantLock` held by the current task (asyncio).

    ``depth`` is 1 for the outermost level, 2 for the one inside it, and so on.  Every level
    shares the outermost level's ``key``, ``token``, ``fence``, ``signal`` and renewal.
    """

    __slots__ = ("_depth", "_holder", "_level_open", "_root")

    def __init__(
        self,
        lock: Lock,
        section: Section,
        machine: Group,
    ) -> None:
        super().__init__(lock, section, machine)
        self._depth = 1
        #: The outermost level's handle (None: this is it).
        self._root: ReentrantHandle | None = None
        self._level_open = True
        #: The task holding the outermost level (only while registered).
        self._holder: weakref.ref[asyncio.Task[Any]] | None = None

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


class _OuterHold(_Hold):
    """The outermost level's ``hold()``: a lock's, except that the cancel a loss sent to
    the body is consumed by whichever level's exit sees it first (the innermost open one),
    so that every level surfaces :class:`LockLeaseLostError`, never ``CancelledError``."""

    __slots__ = ("_consumed",)

    def __init__(self, lock: Lock, id: str, options: AsyncHoldOptions) -> None:
        super().__init__(lock, id, options)
        self._consumed = False

    def _take_loss_cancel(self, ev: BaseException | None) -> bool | None:
        """None: no loss cancel to consume (or consumed already).  Otherwise consume it:
        True if a cancel from outside came on top of it (that one propagates), else False."""
        task = self.task
        if not self._handle._machine.body_cancelled or self._consumed or task is None:
            return None
        self._consumed = True
        return task.uncancel() > self._cancelling and isinstance(ev, asyncio.CancelledError)

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        outside_cancel = self._take_loss_cancel(ev) is True
        handle = self._handle
        try:
            await handle._lock._run(flows.finish_all(handle._lock, (handle,)))
        finally:
            _let_go((handle,))
        if outside_cancel:
            return
        self._conclude(handle._machine, ev)


class _ReentrantHold:
    """``async with locks.hold(id)`` on a :class:`ReentrantLock`: the outermost level if
    the current task does not hold ``id`` through this lock yet, a re-entry if it does."""

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
        holder = _current_task(key)
        outer = lock._holders.get(holder, key)
        if outer is not None:
            self._inner = await lock._reenter(outer)
            return self._inner
        handle = cast(ReentrantHandle, await self._hold.__aenter__())
        lock._register(holder, handle)
        return handle

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        inner = self._inner
        if inner is None:
            handle = cast(ReentrantHandle, self._hold._handle)
            try:
                # As a manual release of the outermost level: refused while an inner level
                # is open, the key still held and renewed (the core's rule, for both
                # drivers).
                cast(ReentrantSection, handle._section).check_outermost_exit()
            except UsageError:
                # The block is over, so a later loss has no body to cancel: the cancel a
                # loss already sent is consumed, and the hold lets go.
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
        if isinstance(ev, asyncio.CancelledError) and isinstance(holding, _OuterHold):
            took = holding._take_loss_cancel(ev)
        # LeaveFail: not a loss (the depth in Redis is advisory); the outermost exit is
        # what frees the key and decides the verdict.
        with contextlib.suppress(Exception):
            await self._lock._leave(inner)
        if took is None and isinstance(ev, asyncio.CancelledError):
            return  # a cancel from outside, not the loss's: it propagates
        if took is True:
            return
        inner_verdict(inner._section, ev)


class ReentrantLock(Lock):
    """A reentrant Redis lock namespace for asyncio: the task holding ``id`` may take it
    again.

    Everything :class:`Lock` takes (client forms, options, errors, signal, renewal,
    cancellation) applies.  The holder is the current task (``asyncio.current_task()``,
    never a context variable: a child task the holder creates is another holder and is
    refused, as it would deadlock on a key its parent holds only if it waited).  Re-entry
    is recognised per ``ReentrantLock`` object.  A re-entry never waits, costs one round
    trip, and returns a handle with ``depth`` one more than the level it is in; the key is
    freed only when the outermost level exits.
    """

    _section_type = ReentrantSection
    _handle_type = ReentrantHandle

    def __init__(
        self,
        client: Client | str | ClientFactory,
        **options: Unpack[AsyncLockOptions],
    ) -> None:
        super().__init__(client, **options)
        self._holders: Holders[ReentrantHandle] = Holders()

    async def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> ReentrantHandle | None:
        """Take the lock, or return None if another holder has it (after any retries, or
        once ``wait_ms`` has passed without it).

        If the current task already holds ``id`` through this lock, this is a re-entry: it
        never waits, whatever ``wait_ms`` says, and returns the next level's handle
        (release it before the outer levels).  The outermost handle is not renewed in the
        background, as for :meth:`Lock.acquire`.
        """
        key = self.key(id)
        self._check_open(key)
        holder = _current_task(key)
        outer = self._holders.get(holder, key)
        if outer is not None:
            self._options(ACQUIRE_KEYS, options)  # validated all the same
            return await self._reenter(outer)
        handle = cast("ReentrantHandle | None", await super().acquire(id, **options))
        if handle is not None:
            self._register(holder, handle)
        return handle

    def hold(self, id: str, **options: Unpack[AsyncHoldOptions]) -> _ReentrantHold:  # type: ignore[override]
        """``async with locks.hold(id) as handle``, as :meth:`Lock.hold`; inside a block of
        the same task on the same ``id``, a re-entry (the outer level's renewal covers it)."""
        return _ReentrantHold(self, id, options)

    async def run(
        self,
        id: str,
        fn: Callable[[ReentrantHandle], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """``await fn(handle)`` under the lock, re-entering if the current task already
        holds ``id`` through this lock; see :meth:`hold`."""
        _check_body(fn)
        async with self.hold(id, **options) as handle:
            return await _awaitable(fn, fn(handle))

    def hold_many(self, ids: Sequence[str], **options: Unpack[AsyncHoldOptions]) -> _HoldMany:
        """Not offered: a reentrant lock is taken one key at a time (use :class:`Lock`'s
        ``hold_many`` for several keys at once)."""
        raise UsageError(
            "ReentrantLock takes one key at a time: nest hold() calls, or use Lock.hold_many"
        )

    async def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """Not offered: see :meth:`hold_many`."""
        raise UsageError(
            "ReentrantLock takes one key at a time: nest run() calls, or use Lock.run_many"
        )

    # -- levels ------------------------------------------------------------------------------

    def _register(self, holder: asyncio.Task[Any], handle: ReentrantHandle) -> None:
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


# -- the semaphore ------------------------------------------------------------------------------


class PermitHandle(PermitMixin, LockHandle):
    """A permit of a :class:`Semaphore` (asyncio): ``key``, ``token``, ``signal``,
    ``held``, ``extend`` and ``release`` as a lock handle's, and no fence."""

    __slots__ = ()

    async def extend(self, ttl_ms: int | None = None) -> bool:
        """Make our permit end ``ttl_ms`` (default: the semaphore's TTL) from now, in
        Redis's time, if it is still live.  False, and the signal, when it expired or was
        removed: a lapsed permit is never brought back.  Connection errors propagate."""
        return await super().extend(ttl_ms)

    async def release(self) -> bool:
        """Give the permit back. True only if it was still ours (live) until now.
        Cancellation-safe, as :meth:`LockHandle.release`."""
        return await super().release()

    async def __aenter__(self) -> PermitHandle:
        """``async with permit:`` releases on exit, and raises :class:`LockLeaseLostError`
        if the permit was no longer ours by then (it is not renewed: see ``hold``)."""
        return self


class _PermitHold(_Hold):
    __slots__ = ()

    async def __aenter__(self) -> PermitHandle:
        return cast(PermitHandle, await super().__aenter__())


class Semaphore(SemaphoreBase, Lock):
    """A counting semaphore for asyncio: at most ``limit`` permits of each id at once.

    As :class:`distlock.Semaphore`, with the asyncio :class:`Lock`'s client forms and
    options: a lost permit cancels the body of ``run``/``hold`` (unless
    ``cancel_on_loss=False``) and raises :class:`LockLeaseLostError` on exit.
    """

    _handle_type = PermitHandle

    def __init__(
        self,
        client: Client | str | ClientFactory,
        *,
        limit: int,
        **options: Unpack[AsyncLockOptions],
    ) -> None:
        self.limit, merged = semaphore_options(limit, options)
        super().__init__(client, **merged)

    async def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> PermitHandle | None:
        """Take a permit of ``id``, or return None if ``limit`` are held (after any retries).

        Not renewed in the background: ``await permit.extend()`` if the work can outlive the
        TTL, and ``await permit.release()`` when done.
        """
        return cast("PermitHandle | None", await super().acquire(id, **options))

    def hold(self, id: str, **options: Unpack[AsyncHoldOptions]) -> _PermitHold:
        """``async with sem.hold(id) as permit``: renewed while the block runs.

        Raises :class:`LockNotAcquiredError` if ``limit`` permits are held (after any
        retries).  On loss the block is cancelled (unless ``cancel_on_loss=False``) and
        :class:`LockLeaseLostError` is raised on exit, even when the block succeeded.
        """
        return _PermitHold(self, id, options)

    async def run(
        self,
        id: str,
        fn: Callable[[PermitHandle], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """``await fn(permit)`` holding a permit of ``id``; see :meth:`hold`."""
        _check_body(fn)
        async with self.hold(id, **options) as permit:
            return await _awaitable(fn, fn(permit))

    def hold_many(self, ids: Sequence[str], **options: Unpack[AsyncHoldOptions]) -> _HoldMany:
        """Not offered: a semaphore gives one permit of one id at a time."""
        raise UsageError("Semaphore takes one permit at a time: nest hold() calls")

    async def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], Awaitable[T]],
        **options: Unpack[AsyncHoldOptions],
    ) -> T:
        """Not offered: see :meth:`hold_many`."""
        raise UsageError("Semaphore takes one permit at a time: nest run() calls")

    async def locked(self, id: str) -> bool:
        """Whether no permit of ``id`` could be taken now by this semaphore: ``limit``
        permits are live by Redis's clock (or the key is another primitive's).  One
        read-only script; a snapshot, as :meth:`Lock.locked` is."""
        key = self.key(id)
        return permits_full(await _eval(await self.client(), *owner_call(key)), self.limit)

    async def owner(self, id: str) -> LockOwner | None:
        """Not offered: a semaphore's permits have several holders at once (``python -m
        distlock inspect`` lists them)."""
        raise UsageError("a Semaphore has no one owner: its permits have several holders")


async def _eval(client: Client, script: Script, keys: list[str], args: list[str | int]) -> Any:
    """``script``'s reply through ``execute_command`` (no lock cycle goes this way)."""
    try:
        return await client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return await client.execute_command("EVAL", script.source, len(keys), *keys, *args)


__all__ = [
    "Lock",
    "LockGroup",
    "LockHandle",
    "PermitHandle",
    "ReentrantHandle",
    "ReentrantLock",
    "Semaphore",
]


async def _direct(
    client: aredis.Redis, script: Script, keys: list[str], args: list[str | int]
) -> object:
    """``script``'s reply, sent on a connection of the client's pool rather than through
    ``execute_command`` (see :mod:`distlock._direct` for when, and what that leaves out).
    The pool's ``release`` disconnects a connection a maintenance notification marked, as
    it does after execute_command."""
    # Typed Any: parts of redis-py's connection API carry no annotations.
    pool: Any = client.connection_pool
    conn: Any = await pool.get_connection()
    try:
        return await _on_connection(client, conn, script, keys, args)
    finally:
        await pool.release(conn)


async def _on_connection(
    client: object, conn: Any, script: Script, keys: list[str], args: list[str | int]
) -> object:
    """``script``'s reply on ``conn``, retried as the connection's ``Retry`` says (the
    errors and backoff of execute_command's retry, disconnecting after each failure).

    A connection interrupted mid-command (a cancellation, or any error but a reply Redis
    sent whole) is disconnected here, so that it goes back to the pool with nothing
    unread on it and Redis forgets whatever it was still doing for it."""
    try:
        return await conn.retry.call_with_retry(
            partial(_script_reply, client, conn, script, keys, args),
            partial(_disconnect_failed, conn),
            with_failure_count=True,
        )
    except ResponseError:
        raise  # an error reply, read whole: the connection is clean
    except BaseException:
        await conn.disconnect(nowait=True)
        raise


async def _script_reply(
    client: Any, conn: Any, script: Script, keys: list[str], args: list[str | int]
) -> object:
    """One send of ``script``: by its hash, and by its source if Redis does not have it."""
    try:
        packed = packed_evalsha(conn, _CONNECTION, script, keys, args)
        if packed is None:
            await conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
        else:
            await conn.send_packed_command(packed)
        return await client.parse_response(conn, "EVALSHA")
    except NoScriptError:
        await conn.send_command("EVAL", script.source, len(keys), *keys, *args)
        return await client.parse_response(conn, "EVAL")


#: redis-py's connection, whose packing a connection's is checked against (packed_evalsha).
_CONNECTION: Final = aredis.connection.AbstractConnection


async def _disconnect_failed(conn: Any, error: BaseException, failures: int) -> None:
    """Before a retry, as execute_command's: the error goes to redis-py's connection
    metrics."""
    await conn.disconnect(error=error, failure_count=failures)


def _raise_swallowed(task: asyncio.Task[Any] | None, cancels: int) -> None:
    """Raise the cancellation a library below us swallowed (see :meth:`Lock._run`)."""
    if task is not None and task.cancelling() > cancels:
        raise asyncio.CancelledError


def _advance(step: Callable[[Any], Request], value: Any) -> Request | StopIteration:
    """``step(value)`` (a flow's ``send`` or ``throw``), with the flow's end as a value.

    The end is returned without its traceback: that holds this call's frame, and through
    it the caller's, which holds the end it was returned: a cycle that only the cycle
    collector would free."""
    try:
        return step(value)
    except StopIteration as stop:
        return stop.with_traceback(None)
