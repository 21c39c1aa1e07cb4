"""The sync driver: redis-py IO and threads around the pure core (:mod:`distlock._core`).

Every decision is the core's and every sequence is a flow's (:mod:`distlock._flows`).
This module runs flows with blocking calls, keeps one timer per watched section on the
process's scheduler thread (one for every Lock object: a Lock made per use costs no
thread), and runs each background round trip (a renewal) and each observer call a timer
leads to on the process's worker pool, so neither a hung connection nor a slow observer
holds up another section's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from functools import partial
from types import CoroutineType, FunctionType, TracebackType
from typing import Any, Final, Self, TypeVar, Unpack, cast

import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.exceptions import NoScriptError, ResponseError
from redis.retry import Retry

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
from distlock._operator import LockOwner, force_unlock_call, owner_call, permits_full, read_owner
from distlock._protocol import Script, decode, encode, wake_key
from distlock._replicated import call_sync
from distlock._scheduler import LockTimers, Scheduler
from distlock._waiter_connections import WaiterConnections
from distlock._workers import Workers
from distlock.errors import LockClosedError, UsageError, ValidationError
from distlock.events import Event, Transition
from distlock.options import (
    ACQUIRE_KEYS,
    HOLD_KEYS,
    LOCK_KEYS,
    AcquireOptions,
    HoldOptions,
    LockOptions,
    check_ttl,
)
from distlock.signal import LeaseSignal

T = TypeVar("T")
#: The code flags of ``async def`` functions and of async generators.
_ASYNC_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_ONE_ATTEMPT = Retry(NoBackoff(), 0)
#: What a sync Lock talks through (a Sentinel's ``master_for`` gives a redis.Redis).
Client = redis.Redis | redis.RedisCluster


def _due(handle: Any) -> None:
    """A handle's timer came up on the process's timer thread: its own Lock's tick."""
    handle._lock._tick(handle)


#: The timer thread every sync Lock of the process shares (started on the first watched
#: section, ended when idle): threads do not grow with the number of Lock objects.
_TIMERS: Final = Scheduler("distlock-timer", _due)
#: The background round trips of every sync Lock of the process, on a few threads.
_WORKERS: Final = Workers("distlock-worker", limit=8)
# A child made by os.fork has none of the parent's threads: both start afresh there.
os.register_at_fork(after_in_child=_TIMERS.after_fork)
os.register_at_fork(after_in_child=_WORKERS.after_fork)


class LockHandle(HandleBase):
    """An acquired lock: ``key``, ``token`` (the value stored under the key), ``fence``,
    and ``signal``, which aborts with the :class:`LockLeaseLostError` once the loss is known.
    """

    # No timer of its own: the scheduler keeps the handle in the bucket of the instant
    # ``_armed_at`` names, and that slot alone tells a live entry from a stale one.
    __slots__ = ("_lock",)

    def __init__(
        self,
        lock: Lock,
        section: Section,
        machine: Group,
    ) -> None:
        super().__init__(section, machine)
        self._lock = lock

    @property
    def signal(self) -> LeaseSignal:
        """Aborts with the group's first loss.  Made on first read, once per group: most
        held locks are never asked for it, and each would otherwise carry one."""
        return self._lock._signal_of(self._machine)

    def extend(self, ttl_ms: int | None = None) -> bool:
        """Reset the key's TTL to ``ttl_ms`` (default: the lock's TTL) if our token still owns it.

        Returns False, and fires ``signal``, when the key expired or belongs to someone else.
        Connection errors propagate: a failed round trip says nothing about ownership.
        Only for handles from :meth:`Lock.acquire`: under ``run``/``hold`` the lease is
        renewed for you.
        """
        ttl = self._section.config.ttl_ms if ttl_ms is None else check_ttl(ttl_ms)
        return self._lock._run(flows.extend(self._lock, self, ttl))

    def release(self) -> bool:
        """Delete the key if our token still owns it. True only if it did."""
        return self._lock._run(flows.release(self._lock, self))

    def __enter__(self) -> LockHandle:
        """``with handle:`` releases on exit, and raises :class:`LockLeaseLostError` if
        the key was no longer ours by then (the handle is not renewed: see ``hold``)."""
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
        conclude(self._machine, ev)


class LockGroup(GroupBase[LockHandle]):
    """Several locks held together (see :meth:`Lock.hold_many`): ``group[id]`` is one
    handle; ``signal`` aborts with the first loss among them."""

    __slots__ = ()

    @property
    def signal(self) -> LeaseSignal:
        """The one signal its handles share."""
        return self.handles[0].signal


class _Hold(HoldingBase):
    """Holds one lock for a ``with`` block (:meth:`Lock.hold`), and gives its handle.

    Only the handle is kept: the Lock and the core's group are the handle's, and the
    one-element sequence the flows take is made when they run, so a held lock carries no
    group object of the driver's."""

    __slots__ = ("_handle",)

    def __init__(self, lock: Lock, id: str, options: HoldOptions) -> None:
        super().__init__()
        self._handle = lock._new_handle(id, options, watch=True)

    def __enter__(self) -> LockHandle:
        handle = self._handle
        self._start(handle._lock, (handle,))
        _take(handle)
        return handle

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        _give_back(self._handle, ev)


def _take(handle: LockHandle) -> None:
    """The start of a hold of one lock: acquired, its renewal armed by the grant."""
    lock = handle._lock
    lock._run(flows.acquire_all(lock, (handle,)))
    if lock._closed:
        lock._refuse_granted((handle,))


def _give_back(handle: LockHandle, body_error: BaseException | None) -> None:
    """The end of a hold of one lock: the completion check and the release, then what the
    caller must see (:func:`conclude`)."""
    lock = handle._lock
    lock._run(flows.finish_all(lock, (handle,)))
    conclude(handle._machine, body_error)


class _HoldMany(HoldingBase):
    """Holds several locks for a ``with`` block (:meth:`Lock.hold_many`), and gives the group."""

    __slots__ = ("_group", "_lock", "_machine")

    def __init__(self, lock: Lock, ids: Sequence[str], options: HoldOptions) -> None:
        super().__init__()
        self._lock = lock
        self._machine, self._group = lock._new_group(ids, options, watch=True)

    def __enter__(self) -> LockGroup:
        lock, group = self._lock, self._group
        self._start(lock, group.handles)
        lock._run(flows.acquire_all(lock, group.handles))
        if lock._closed:
            lock._refuse_granted(group.handles)
        return group

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock._run(flows.finish_all(self._lock, self._group.handles))
        self._conclude(self._machine, ev)


class Lock(LockBase):
    """A Redis lock namespace: keys are ``<prefix>:<id>``.

    ``client`` is a ``redis.Redis``, a URL (the Lock then owns the client and closes it in
    :meth:`close`), or a zero-argument factory called on first use.  Options (see
    :class:`distlock.options.LockOptions`) are the defaults of every call.  A caller that
    waits (``wait_ms``) blocks on a connection of its own, made from the client's settings
    but outside its pool, so that waiters never leave a holder without a connection.

    >>> locks = Lock("redis://127.0.0.1:6379/0", prefix="order", ttl_ms=10_000)  # doctest: +SKIP
    >>> locks.run("42", lambda handle: charge(handle.fence))  # doctest: +SKIP
    """

    #: The handle each acquisition gets.
    _handle_type: type[LockHandle] = LockHandle

    def __init__(
        self,
        client: Client | str | Callable[[], Client],
        **options: Unpack[LockOptions],
    ) -> None:
        super().__init__(LOCK_KEYS, options)
        self._owns_client = isinstance(client, str)
        self._client: Client | None
        self._factory: Callable[[], Client]
        self._client, self._factory = split_client(
            client,
            (redis.Redis, redis.RedisCluster),
            redis.RedisCluster.from_url if self.defaults.cluster else redis.Redis.from_url,
            driver="distlock",
            other=(aredis.Redis, aredis.RedisCluster),
            other_driver="distlock.asyncio",
        )
        check_cluster_client(self._client, self.defaults.cluster, redis.RedisCluster)
        self._init_lock = threading.Lock()
        #: The guard of every handle's core calls (reentrant: a trace callback may take
        #: another lock's action from inside one).
        self._mutex = threading.RLock()
        #: The flows' guard (one for the whole Lock rather than one per handle: a core call
        #: holds it for microseconds, and thousands of held locks need no lock object each).
        self._core_guard: flows.Guard | None = self._mutex
        self._timers: LockTimers = LockTimers(_TIMERS)
        self._workers = _WORKERS
        #: Connections blocked in a waiter's BLPOP now: close() disconnects them, which
        #: wakes their waiters at once.  Guarded by _blocking (the waiting path only).
        self._blocked: set[Any] = set()
        self._blocking = threading.Lock()
        #: Renewals sent in the current tick (touched only by the timer thread).
        self._renewing: list[renewals.Renewal] = []
        self._route = Route(redis.Redis)
        self._waiter_conns = WaiterConnections()
        #: The worker threads in one of this Lock's renewal round trips now (a thread once
        #: per round trip it is in): close() waits for them, so that none reconnects
        #: through the client after close() returned (see _begin_round_trip).
        self._round_trips = threading.Condition(threading.Lock())
        self._in_round_trip: list[threading.Thread] = []

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def client(self) -> Client:
        client = self._client
        if client is None:
            with self._init_lock:
                if self._client is None:
                    self._client = self._factory()
                client = self._client
        return client

    def close(self) -> None:
        """Close the Lock: every call after it raises :class:`~distlock.LockClosedError`.

        A section open now (``hold``/``run``) loses its lease: its signal fires, its key is
        released (one attempt), and its exit raises :class:`~distlock.LockLeaseLostError`
        (:attr:`~distlock.errors.LossReason.LOCK_CLOSED`).  A caller waiting for a key
        raises ``LockClosedError`` at once, having withdrawn its place, and is never handed
        a key.  Only this Lock's timers are taken out: the timer thread and the worker pool
        are the process's.  A renewal of this Lock in flight on a worker thread is let
        finish (a hung one ends at the client's socket timeout), and none starts after
        this: once it returns, the Lock sends nothing more through the client, so closing
        the client leaves no connection open.  A client the Lock made is closed last.
        """
        with self._mutex:  # no transition of this Lock arms a timer after this
            self._closed = True
            open_sections = self._timers.close(self._owns)
        with self._blocking:  # held: a connection is not kept for another block until this is done
            for conn in self._blocked:
                # Wakes the thread blocked on it (a shutdown socket ends its read): it sees
                # the Lock closed, and withdraws.
                with contextlib.suppress(Exception):
                    conn.disconnect()
        for handle in open_sections:
            self._close_section(cast(LockHandle, handle))
        self._await_round_trips()
        for conn in self._waiter_conns.close():
            conn.disconnect()
        if self._owns_client and self._client is not None:
            self._client.close()

    def _owns(self, item: object) -> bool:
        return getattr(item, "_lock", None) is self

    def _begin_round_trip(self) -> bool:
        """Count the calling worker thread in a renewal round trip of this Lock; False,
        counting nothing, once the Lock is closed: the caller then sends nothing.

        A round trip still running when the caller closes the client is not only late:
        the client's close disconnects its connection under it, redis-py's ``Retry``
        reconnects and sends again, and the new connection goes back to the closed pool,
        open, with nobody left to close it."""
        with self._round_trips:
            if self._closed:
                return False
            self._in_round_trip.append(threading.current_thread())
            return True

    def _end_round_trip(self) -> None:
        with self._round_trips:
            self._in_round_trip.remove(threading.current_thread())
            self._round_trips.notify_all()

    def _await_round_trips(self) -> None:
        """Until no other thread is in a renewal round trip of this Lock (``_closed`` is
        set: none starts after this).  The calling thread's own is not waited for (an
        ``on_renew_error`` observer closing the Lock runs inside one), nor a thread that is
        not alive (a forked child has none of its parent's threads)."""
        me = threading.current_thread()
        with self._round_trips:
            self._round_trips.wait_for(
                lambda: all(t is me or not t.is_alive() for t in self._in_round_trip)
            )

    def _close_section(self, handle: LockHandle) -> None:
        with contextlib.suppress(Exception):
            self._run(flows.close(self, handle))

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
        run out);
        a ``KeyboardInterrupt`` while waiting withdraws its place before it propagates.
        The handle is not renewed in the background: call :meth:`LockHandle.extend` if the
        work can outlive the TTL, and :meth:`LockHandle.release` when done.
        """
        handle = self._new_handle(id, options, watch=False, keys=ACQUIRE_KEYS)
        self._run(flows.acquire(self, handle))
        if self._closed:
            self._refuse_granted((handle,))
        return handle if handle._section.phase is Phase.HELD else None

    def hold(self, id: str, **options: Unpack[HoldOptions]) -> _Hold:
        """Hold the lock for a ``with`` block, renewing it every heartbeat while the block runs.

        Raises :class:`LockNotAcquiredError` if the lock is held elsewhere (and, with
        ``wait_ms``, was not released to us within it), and :class:`LockLeaseLostError` on
        exit if exclusivity was not kept for the whole block, even when the block itself
        succeeded. Options are validated here, before any Redis command.
        """
        return _Hold(self, id, options)

    def run(self, id: str, fn: Callable[[LockHandle], T], **options: Unpack[HoldOptions]) -> T:
        """Run ``fn(handle)`` under the lock, renewed while it runs, released even if it raises.

        Returns what ``fn`` returned only if the lock was held for the whole call.
        """
        _check_body(fn)
        # What ``with self.hold(...)`` does, without the hold object and the ``with``
        # protocol's calls (this is the cycle a renewed lock pays on every use).  A
        # closed Lock was refused as the handle was made.
        handle = self._new_handle(id, options, watch=True)
        _take(handle)
        try:
            result = fn(handle)
        except BaseException as exc:
            _give_back(handle, exc)
            raise
        _give_back(handle, None)
        return _not_awaitable(fn, result)

    def hold_many(self, ids: Sequence[str], **options: Unpack[HoldOptions]) -> _HoldMany:
        """Hold several locks for a ``with`` block, as :meth:`hold` holds one.

        The locks are taken in sorted key order whatever order ``ids`` names them in, so
        two callers wanting the same locks can never each hold one and wait for the other.
        ``wait_ms`` bounds the whole group's acquisition, not each key's.  If one cannot be
        had, those already taken are released and :class:`LockNotAcquiredError` names it.
        On exit they are released in reverse order, and :class:`LockLeaseLostError` is
        raised if any of them was lost.
        """
        return _HoldMany(self, self._group_ids(ids), options)

    def run_many(
        self, ids: Sequence[str], fn: Callable[[LockGroup], T], **options: Unpack[HoldOptions]
    ) -> T:
        """Run ``fn(group)`` holding every lock in ``ids``; see :meth:`hold_many`."""
        _check_body(fn)
        with self.hold_many(ids, **options) as group:
            result = fn(group)
        return _not_awaitable(fn, result)

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
            [id], opts, watch=watch, cancel_on_loss=False
        )
        return self._handle_type(self, sections[0], machine)

    def _signal_of(self, machine: Group) -> LeaseSignal:
        # Under the mutex, as the first loss is recorded (see _apply): a signal made
        # after the loss is born fired, one made before it is fired by it, never neither.
        with self._mutex:
            signal = machine.signal
            if signal is None:
                signal = machine.signal = LeaseSignal()
                if machine.first_loss is not None:
                    signal._fire(machine.first_loss)
        return cast(LeaseSignal, signal)

    # -- IO: the flows of distlock._flows, run with blocking calls ---------------------------

    def _call(self, command: Command) -> int:
        client = self._client
        if client is None:
            client = self.client
        script, keys, args = encode(command)
        if command.replicas:
            reply, acked = call_sync(
                client, script, keys, args, command.replicas, command.replica_timeout_ms
            )
            return replicated(command, decode(command, reply), acked)
        if command.best_effort and isinstance(client, redis.Redis):
            reply = self._call_once(client, script, keys, args)
            return decode(command, reply)
        if self._route.direct(client):
            plain: Any = client  # a redis.Redis (an annotation, not a cast() call)
            return decode(command, _direct(plain, script, keys, args))
        # execute_command rather than evalsha(): the same command, without the wrapper
        # redis-py puts around its command methods (a cost paid twice per lock cycle).
        api: Any = client  # execute_command carries no annotations
        try:
            reply = api.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            reply = api.execute_command("EVAL", script.source, len(keys), *keys, *args)
        return decode(command, reply)

    @staticmethod
    def _call_once(
        client: redis.Redis, script: Script, keys: list[str], args: list[str | int]
    ) -> object:
        """One attempt on a connection of its own, with no retry (of the command or of
        the connect): the pool's connections retry as the client was configured."""
        # Typed Any: parts of redis-py's connection API carry no annotations.
        pool: Any = client.connection_pool
        conn: Any = pool.connection_class(**{**pool.connection_kwargs, "retry": _ONE_ATTEMPT})
        try:
            return _script_reply(client, conn, script, keys, args)
        finally:
            conn.disconnect()

    def _wait(self, flow: Flow[T], request: Block) -> Request:
        """Run ``request`` (a block) and the attempt a wake-up leads to; returns the flow's
        request after them.

        The ``BLPOP`` goes out on a connection of the waiter's own, outside the client's
        pool (:mod:`distlock._waiter_connections`: waiters never starve a holder of
        connections), so that whatever interrupts it (``KeyboardInterrupt``, a socket
        error) disconnects it: a connection still blocked in Redis is never kept for
        another block, and Redis forgets the blocked client when the socket closes.  The
        attempt that follows goes out on that same connection the moment the reply is in
        (see :func:`rides_on_waiter_connection`): no pool round trip between the release
        and the woken waiter's attempt.  Errors are thrown into the flow at the request
        they interrupted, as :meth:`_run` does.
        """
        if self._closed:
            return flow.throw(LockClosedError(request.key))
        client = self.client
        if not isinstance(client, redis.Redis):
            try:
                key = wake_key(request.key, request.token, request.kind)
                timeout = block_seconds(request.until_ms, socket_timeout_of(client))
                woken = wake_value(client.blpop([key], timeout=timeout))
            except BaseException as exc:
                return flow.throw(exc)
            return flow.send(woken)
        # Typed Any: parts of redis-py's connection API carry no annotations.
        api: Any = client
        try:
            conn: Any = self._waiter_connection(client.connection_pool)
            try:
                with self._blocking:
                    self._blocked.add(conn)
                    if self._closed:  # close() came before it could see this connection
                        raise LockClosedError(request.key)
                try:
                    woken = self._blpop(api, conn, request)
                finally:
                    with self._blocking:
                        self._blocked.discard(conn)
            except BaseException:
                conn.disconnect()
                raise
        except BaseException as exc:
            error: BaseException = exc
            if self._closed and isinstance(exc, Exception):
                error = LockClosedError(request.key)  # close() cut the block short
            return flow.throw(error)
        try:
            attempt = flow.send(woken)
        except BaseException:
            self._keep(conn)
            raise
        try:
            if not rides_on_waiter_connection(self._route, client, attempt):
                self._keep(conn)
                return attempt
            assert isinstance(attempt, Command)
            try:
                fence = self._attempt(conn, attempt)
            finally:
                self._keep(conn)
        except BaseException as exc:
            # At the attempt's yield: interrupted before or after it went out, the flow
            # cleans up as for any attempt whose reply never came.
            return flow.throw(exc)
        return flow.send(fence)

    def _waiter_connection(self, pool: Any) -> Any:
        """A connection to block on (see :mod:`distlock._waiter_connections`); one kept from
        an earlier block is checked first, as the pool checks its own: one the server
        closed meanwhile (its ``timeout``, a restart) is reconnected, not failed on."""
        conn, kept = self._waiter_conns.take(pool)
        if kept:
            try:
                if conn.can_read():
                    conn.disconnect()
            except (redis.ConnectionError, OSError):
                conn.disconnect()
        conn.connect()  # a no-op when connected; a failure to connect surfaces here
        return conn

    def _keep(self, conn: Any) -> None:
        if not self._waiter_conns.give_back(conn):
            conn.disconnect()

    @staticmethod
    def _blpop(api: Any, conn: Any, request: Block) -> int:
        """BLPOP the waiter's wake list until ``request.until_ms`` (see :func:`wake_value`)."""
        key = wake_key(request.key, request.token, request.kind)
        timeout = block_seconds(request.until_ms, socket_timeout_of(api, conn))
        conn.send_command("BLPOP", key, timeout)
        if request.last and not conn.can_read(timeout=max(0.0, request.until_ms - now_ms()) / 1000):
            # The deadline came first (Redis's timers end a block up to 1/hz late): the
            # socket goes, and Redis forgets the block with it.
            conn.disconnect()
            return 0
        return wake_value(api.parse_response(conn, "BLPOP"))

    def _attempt(self, conn: Any, command: Command) -> int:
        """A waiting attempt on the waiter's own connection, sent as :meth:`_call` sends
        directly (an attempt is idempotent for its token, so it is retried as any)."""
        script, keys, args = encode(command)
        return decode(command, _on_connection(self.client, conn, script, keys, args))

    def _run(self, flow: Flow[T]) -> T:
        """Run ``flow`` to its end; whatever interrupts a wait is thrown into the flow."""
        try:
            request = next(flow)
            while True:
                if isinstance(request, Block):
                    request = self._wait(flow, request)
                    continue
                try:
                    # A command first, by exact type: that is almost every request.
                    if request.__class__ is Command:
                        reply = self._call(request)
                    elif isinstance(request, Sleep):
                        time.sleep(max(0.0, request.until_ms - now_ms()) / 1000.0)
                        reply = 0
                    else:
                        reply = self._call(request)
                except BaseException as exc:
                    request = flow.throw(exc)
                else:
                    request = flow.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the flow's T (no cast() call)

    # -- Effects, for the flows --------------------------------------------------------------

    def _apply(self, handle: LockHandle, step: Step) -> None:
        if step.loss is not None:
            machine = handle._machine
            with self._mutex:  # see _signal_of
                loss, _cancel = machine.on_loss(step)  # a sync body cannot be cancelled
                signal = machine.signal
            if loss is not None and signal is not None:
                cast(LeaseSignal, signal)._fire(loss)
        command = step.send
        if command is not None and command.op is Op.RENEW:
            self._renew(handle, command)

    # -- renewals: those due in one tick go out in one pipeline per connection ---------------

    def _renew(self, handle: LockHandle, command: Command) -> None:
        renewal = renewals.begin(self, handle, command)
        if renewals.alone(self.client, command) or not self._timers.on_timer_thread():
            self._workers.submit(partial(self._renew_alone, renewal))
            return
        self._renewing.append(renewal)
        if len(self._renewing) == 1:
            self._timers.after_due(self._flush_renewals)

    def _flush_renewals(self) -> None:
        batch, self._renewing = self._renewing, []
        for group in renewals.by_connection(self.client, batch):
            self._workers.submit(partial(self._renew_batch, group))

    def _renew_batch(self, batch: list[renewals.Renewal]) -> None:
        """One round trip for ``batch`` (one connection's share), on a worker thread: a hung
        reply holds up this batch only, never a deadline (those are the timer thread's)."""
        replies = self._send_batch(batch)
        missing = renewals.unscripted(replies)
        if missing:
            again = self._send_batch([batch[i] for i in missing], source=True)
            for i, raw in zip(missing, again, strict=True):
                replies[i] = raw
        interrupt = None
        for renewal, raw in zip(batch, replies, strict=True):
            if isinstance(raw, renewals.RESEND):
                self._renew_alone(renewal)
                continue
            interrupt = renewals.settle(renewal, renewals.reply_of(renewal, raw)) or interrupt
        if interrupt is not None:
            raise interrupt

    def _send_batch(
        self, batch: list[renewals.Renewal], *, source: bool = False
    ) -> list[object]:
        """The replies of one pipeline; if it fails as a whole, its error for every member
        (on a closed Lock, without a round trip: ``LockClosedError``)."""
        if not self._begin_round_trip():
            return [LockClosedError(renewal.command.key) for renewal in batch]
        try:
            pipe = renewals.queue(renewals.pipeline(self.client), batch, source=source)
            return list(pipe.execute(raise_on_error=False))
        except BaseException as exc:
            return [exc] * len(batch)
        finally:
            self._end_round_trip()

    def _renew_alone(self, renewal: renewals.Renewal) -> None:
        reply: int | BaseException
        if not self._begin_round_trip():
            reply = LockClosedError(renewal.command.key)
        else:
            try:
                reply = self._call(renewal.command)
            except BaseException as exc:
                reply = exc
            finally:
                self._end_round_trip()
        interrupt = renewals.settle(renewal, reply)
        if interrupt is not None:
            raise interrupt

    def _tick(self, handle: LockHandle) -> None:
        flows.tick(self, handle)
        if self._closed:
            # Came up as close() ran: close() did not find it armed, so it is closed here
            # (the release on a worker: no round trip on the timer thread).
            self._workers.submit(partial(self._close_section, handle))

    def _notify(self, handle: HandleBase, events: list[Transition | Event]) -> None:
        # Ticks run on the timer thread, so that a loss is signalled the moment the thread
        # gets to run; observers do not, so that a slow one delays no other deadline.
        if self._timers.on_timer_thread():
            self._workers.submit(lambda: LockBase._notify(self, handle, events))
        else:
            LockBase._notify(self, handle, events)

    # -- reads and an operator's tool, outside any lock cycle ----------------------------------

    def locked(self, id: str) -> bool:
        """Whether anyone holds ``id`` now (one ``EXISTS``).

        A snapshot: the answer may be stale by the time it is returned, so never decide to
        take the lock on it; :meth:`acquire` decides and takes in one step.
        """
        return bool(self.client.exists(self.key(id)))

    def owner(self, id: str) -> LockOwner | None:
        """Who holds ``id`` now, or None if nobody does: a read-only snapshot (one script
        that reads ``TYPE``, ``PTTL`` and the key's value as fits its type, so a key held
        by another primitive is reported, never a ``WRONGTYPE`` error).  See
        :class:`~distlock.LockOwner` for what it holds, and ``handle.held`` for what a
        holder itself knows."""
        key = self.key(id)
        return read_owner(key, _eval(self.client, *owner_call(key)))

    def force_unlock(self, id: str) -> bool:
        """For operators: delete ``id``'s key whoever holds it, and bump its slot's fence
        counter in the same step, so every later owner's fence is larger than the evicted
        holder's; the first waiter, if any, is woken.  Returns whether a key was deleted.

        Not a way to release: the evicted holder is not told now.  It learns at its next
        renewal (its lease is lost: its ``signal`` fires and ``run``/``hold`` raise
        :class:`~distlock.LockLeaseLostError`); a manual handle, at its next ``extend`` or
        ``release``.  Until then it may still act: fences are what stops its writes.
        """
        return bool(_eval(self.client, *force_unlock_call(self.key(id))))


def _eval(client: Client, script: Script, keys: list[str], args: list[str | int]) -> Any:
    """``script``'s reply through ``execute_command`` (no lock cycle goes this way)."""
    api: Any = client
    try:
        return api.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    except NoScriptError:
        return api.execute_command("EVAL", script.source, len(keys), *keys, *args)


def _direct(client: redis.Redis, script: Script, keys: list[str], args: list[str | int]) -> object:
    """``script``'s reply, sent on a connection of the client's pool rather than through
    ``execute_command`` (see :mod:`distlock._direct` for when, and what that leaves out)."""
    # Typed Any: parts of redis-py's connection API carry no annotations.
    pool: Any = client.connection_pool
    conn: Any = pool.get_connection()
    try:
        return _on_connection(client, conn, script, keys, args)
    finally:
        try:
            # As execute_command: a connection a maintenance notification marked is
            # reconnected before it goes back.
            if conn.should_reconnect():
                conn.disconnect()
                conn.connect()
        finally:
            pool.release(conn)


def _on_connection(
    client: object, conn: Any, script: Script, keys: list[str], args: list[str | int]
) -> object:
    """``script``'s reply on ``conn``, retried as the connection's ``Retry`` says (the
    errors and backoff of execute_command's retry, disconnecting after each failure).

    A connection interrupted mid-command (``KeyboardInterrupt``, or any error but a
    reply Redis sent whole) is disconnected here, so that it goes back to the pool with
    nothing unread on it."""
    try:
        return conn.retry.call_with_retry(
            partial(_script_reply, client, conn, script, keys, args), conn.disconnect
        )
    except ResponseError:
        raise  # an error reply, read whole: the connection is clean
    except BaseException:
        conn.disconnect()
        raise


def _script_reply(
    client: Any, conn: Any, script: Script, keys: list[str], args: list[str | int]
) -> object:
    """One send of ``script``: by its hash, and by its source if Redis does not have it."""
    try:
        packed = packed_evalsha(conn, _CONNECTION, script, keys, args)
        if packed is None:
            conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
        else:
            conn.send_packed_command(packed)
        return client.parse_response(conn, "EVALSHA")
    except NoScriptError:
        conn.send_command("EVAL", script.source, len(keys), *keys, *args)
        return client.parse_response(conn, "EVAL")


#: redis-py's connection, whose packing a connection's is checked against (packed_evalsha).
_CONNECTION: Final = redis.connection.AbstractConnection


def _check_body(fn: Callable[..., object]) -> None:
    code = getattr(fn, "__code__", None)
    if type(fn) is FunctionType and code is not None and not code.co_flags & _ASYNC_FLAGS:
        return  # a plain function (the common case), told apart without inspect's unwrapping
    if not callable(fn):
        raise ValidationError(f"the body must be a function, got {fn!r:.80}")
    if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn):
        raise ValidationError(
            f"{getattr(fn, '__name__', fn)!r} is an async def function: the sync Lock would "
            "not await it; use distlock.asyncio.Lock"
        )


def _not_awaitable(fn: Callable[..., object], result: T) -> T:
    """``result``, unless the body returned a coroutine (a lambda around an ``async def``,
    which :func:`_check_body` cannot see through): its work would run, if ever, after the
    lock was released.  It is closed unstarted (nothing of it ran) and refused, after the
    release, as a body that raised would be."""
    if isinstance(result, CoroutineType):
        result.close()
        raise ValidationError(
            f"the body {getattr(fn, '__name__', fn)!r} returned a coroutine, which the sync "
            "Lock cannot await: it was closed without running, and the lock released; use "
            "distlock.asyncio.Lock for async work"
        )
    return result


# -- the reentrant lock ------------------------------------------------------------------------


def _holder_thread(key: str) -> threading.Thread:
    """The holder of a sync reentrant level: the current thread, unless an event loop runs
    in it.  Every task on that loop shares the thread, so a second task would be taken for
    a re-entry and let in beside the first: refused instead."""
    if asyncio._get_running_loop() is not None:
        raise UsageError(
            f"a sync ReentrantLock's holder is the thread, and this thread runs an asyncio "
            f"event loop, whose tasks would all count as one holder of {key!r}: use "
            "distlock.asyncio.ReentrantLock, whose holder is the task",
            key,
        )
    return threading.current_thread()


class ReentrantHandle(LockHandle):
    """One level of a :class:`ReentrantLock` held by the current thread.

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
        #: The thread holding the outermost level (only while registered).
        self._holder: weakref.ref[threading.Thread] | None = None

    @property
    def depth(self) -> int:
        """1 for the outermost level, 2 for a re-entry inside it, and so on."""
        return self._depth

    @property
    def held(self) -> bool:
        """This level is open and the key is held and not known lost."""
        return self._level_open and self._section.holding

    def _outermost(self) -> ReentrantHandle:
        return self if self._root is None else self._root

    def extend(self, ttl_ms: int | None = None) -> bool:
        """As :meth:`LockHandle.extend`: the one lease every level shares."""
        root = self._outermost()
        return LockHandle.extend(root, ttl_ms) if root is not self else super().extend(ttl_ms)

    def release(self) -> bool:
        """Exit this level.  An inner level writes the depth to Redis and never frees the
        key: True if our token still held it, False if the lease is known lost or the level
        was already released.  The outermost level frees the key, as
        :meth:`LockHandle.release` does, once every inner level has exited.
        """
        lock = cast(ReentrantLock, self._lock)
        if self._root is None:
            return lock._release_outermost(self)
        return lock._leave(self)

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._root is None:
            super().__exit__(et, ev, tb)
            return
        self.release()
        inner_verdict(self._section, ev)

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]} depth={self._depth}>"


class _ReentrantHold:
    """``with locks.hold(id)`` on a :class:`ReentrantLock`: the outermost level if the
    current thread does not hold ``id`` through this lock yet, a re-entry if it does."""

    __slots__ = ("_entered", "_hold", "_inner", "_lock")

    def __init__(self, lock: ReentrantLock, id: str, options: HoldOptions) -> None:
        self._lock = lock
        #: Options are validated now, before any command; used if this is the outermost level.
        self._hold = _Hold(lock, id, options)
        self._inner: ReentrantHandle | None = None
        self._entered = False

    def __enter__(self) -> ReentrantHandle:
        if self._entered:
            raise UsageError(
                "this hold() was already entered; call hold() again for another section"
            )
        self._entered = True
        lock = self._lock
        key = self._hold._handle.key
        lock._check_open(key)
        holder = _holder_thread(key)
        outer = lock._holders.get(holder, key)
        if outer is not None:
            self._inner = lock._reenter(outer)
            return self._inner
        handle = cast(ReentrantHandle, self._hold.__enter__())
        lock._register(holder, handle)
        return handle

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        inner = self._inner
        if inner is None:
            handle = cast(ReentrantHandle, self._hold._handle)
            # As a manual release of the outermost level: refused while an inner level is
            # open, the key still held and renewed (the core's rule, for both drivers).
            cast(ReentrantSection, handle._section).check_outermost_exit()
            try:
                self._hold.__exit__(et, ev, tb)
            finally:
                handle._level_open = False
                self._lock._unregister(handle)
            return
        # LeaveFail: not a loss (the depth in Redis is advisory); the outermost exit is
        # what frees the key and decides the verdict.
        with contextlib.suppress(Exception):
            self._lock._leave(inner)
        inner_verdict(inner._section, ev)


class ReentrantLock(Lock):
    """A reentrant Redis lock namespace: the thread holding ``id`` may take it again.

    Everything a :class:`Lock` takes (client forms, options, errors, signal, renewal)
    applies.  The holder is the current thread; re-entry is recognised per
    ``ReentrantLock`` object, so a second object for the same key, like another thread, is
    another holder and is refused.  A re-entry never waits, costs one round trip, and
    returns a handle with ``depth`` one more than the level it is in; the key is freed only
    when the outermost level exits.  The key is a hash (``<token>`` -> depth, ``fence``), so
    a :class:`Lock` and a ``ReentrantLock`` on the same key refuse each other.

    >>> locks = ReentrantLock("redis://127.0.0.1:6379/0", prefix="cart")  # doctest: +SKIP
    >>> with locks.hold("7") as outer, locks.hold("7") as inner:  # doctest: +SKIP
    ...     assert (outer.depth, inner.depth) == (1, 2)
    """

    _section_type = ReentrantSection
    _handle_type = ReentrantHandle

    def __init__(
        self,
        client: Client | str | Callable[[], Client],
        **options: Unpack[LockOptions],
    ) -> None:
        super().__init__(client, **options)
        self._holders: Holders[ReentrantHandle] = Holders()

    def acquire(self, id: str, **options: Unpack[AcquireOptions]) -> ReentrantHandle | None:
        """Take the lock, or return None if another holder has it (after any retries, or
        once ``wait_ms`` has passed without it).

        If the current thread already holds ``id`` through this lock, this is a re-entry:
        it never waits, whatever ``wait_ms`` says, and returns the next level's handle
        (release it before the outer levels).  The outermost handle is not renewed in the
        background, as for :meth:`Lock.acquire`.
        """
        key = self.key(id)
        self._check_open(key)
        holder = _holder_thread(key)
        outer = self._holders.get(holder, key)
        if outer is not None:
            self._options(ACQUIRE_KEYS, options)  # validated all the same
            return self._reenter(outer)
        handle = cast("ReentrantHandle | None", super().acquire(id, **options))
        if handle is not None:
            self._register(holder, handle)
        return handle

    def hold(self, id: str, **options: Unpack[HoldOptions]) -> _ReentrantHold:  # type: ignore[override]
        """Hold the lock for a ``with`` block, as :meth:`Lock.hold`; inside a block of the
        same thread on the same ``id``, a re-entry (the outer level's renewal covers it)."""
        return _ReentrantHold(self, id, options)

    def run(
        self, id: str, fn: Callable[[ReentrantHandle], T], **options: Unpack[HoldOptions]
    ) -> T:
        """Run ``fn(handle)`` under the lock, as :meth:`Lock.run`, re-entering if the
        current thread already holds ``id`` through this lock."""
        _check_body(fn)
        with self.hold(id, **options) as handle:
            result = fn(handle)
        return _not_awaitable(fn, result)

    def hold_many(self, ids: Sequence[str], **options: Unpack[HoldOptions]) -> _HoldMany:
        """Not offered: a reentrant lock is taken one key at a time (use :class:`Lock`'s
        ``hold_many`` for several keys at once)."""
        raise UsageError(
            "ReentrantLock takes one key at a time: nest hold() calls, or use Lock.hold_many"
        )

    def run_many(
        self, ids: Sequence[str], fn: Callable[[LockGroup], T], **options: Unpack[HoldOptions]
    ) -> T:
        """Not offered: see :meth:`hold_many`."""
        raise UsageError(
            "ReentrantLock takes one key at a time: nest run() calls, or use Lock.run_many"
        )

    # -- levels ------------------------------------------------------------------------------

    def _register(self, holder: threading.Thread, handle: ReentrantHandle) -> None:
        handle._holder = weakref.ref(holder)
        self._holders.add(holder, handle.key, handle)

    def _unregister(self, handle: ReentrantHandle) -> None:
        ref = handle._holder
        holder = ref() if ref is not None else None
        if holder is not None:
            self._holders.remove(holder, handle.key, handle)
        handle._holder = None

    def _reenter(self, outer: ReentrantHandle) -> ReentrantHandle:
        self._run(flows.reenter(self, outer))
        inner = ReentrantHandle(self, outer._section, outer._machine)
        inner._root = outer
        inner._depth = cast(ReentrantSection, outer._section).depth
        return inner

    def _leave(self, inner: ReentrantHandle) -> bool:
        if not inner._level_open:
            return False
        cast(ReentrantSection, inner._section).check_inner_exit(inner._depth)
        inner._level_open = False
        root = inner._root
        assert root is not None
        return self._run(flows.leave(self, root))

    def _release_outermost(self, handle: ReentrantHandle) -> bool:
        section = cast(ReentrantSection, handle._section)
        section.check_outermost_exit()
        try:
            # After a release that got no answer, this sends again (as a Lock's handle does).
            return LockHandle.release(handle)
        finally:
            if section.outermost_ended:
                handle._level_open = False
                self._unregister(handle)


# -- the semaphore ------------------------------------------------------------------------------


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
        """Give the permit back. True only if it was still ours (live) until now."""
        return super().release()

    def __enter__(self) -> PermitHandle:
        """``with permit:`` releases on exit, and raises :class:`LockLeaseLostError` if
        the permit was no longer ours by then (it is not renewed: see ``hold``)."""
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
    ``hold``).  ``client`` and the options are a :class:`Lock`'s (the prefix defaults to
    ``"sem"``); ``limit`` is a positive int, checked before anything is sent.  Each acquire
    compares the number of live permits with its caller's own ``limit``, so callers of one
    id should agree on it.  A ``Lock`` or ``ReentrantLock`` on a semaphore's key, and a
    semaphore on a lock's, is refused, never an error.

    >>> workers = Semaphore("redis://127.0.0.1:6379/0", limit=3)  # doctest: +SKIP
    >>> workers.run("transcode", lambda permit: transcode())  # doctest: +SKIP
    """

    _handle_type = PermitHandle

    def __init__(
        self,
        client: Client | str | Callable[[], Client],
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

    def run(self, id: str, fn: Callable[[PermitHandle], T], **options: Unpack[HoldOptions]) -> T:
        """Run ``fn(permit)`` holding a permit of ``id``; see :meth:`hold`."""
        _check_body(fn)
        with self.hold(id, **options) as permit:
            result = fn(permit)
        return _not_awaitable(fn, result)

    def hold_many(self, ids: Sequence[str], **options: Unpack[HoldOptions]) -> _HoldMany:
        """Not offered: a semaphore gives one permit of one id at a time."""
        raise UsageError("Semaphore takes one permit at a time: nest hold() calls")

    def run_many(
        self, ids: Sequence[str], fn: Callable[[LockGroup], T], **options: Unpack[HoldOptions]
    ) -> T:
        """Not offered: see :meth:`hold_many`."""
        raise UsageError("Semaphore takes one permit at a time: nest run() calls")

    def locked(self, id: str) -> bool:
        """Whether no permit of ``id`` could be taken now by this semaphore: ``limit``
        permits are live by Redis's clock (or the key is another primitive's).  One
        read-only script; a snapshot, as :meth:`Lock.locked` is."""
        key = self.key(id)
        return permits_full(_eval(self.client, *owner_call(key)), self.limit)

    def owner(self, id: str) -> LockOwner | None:
        """Not offered: a semaphore's permits have several holders at once (``python -m
        distlock inspect`` lists them)."""
        raise UsageError("a Semaphore has no one owner: its permits have several holders")


__all__ = [
    "Lock",
    "LockGroup",
    "LockHandle",
    "PermitHandle",
    "ReentrantHandle",
    "ReentrantLock",
    "Semaphore",
]
