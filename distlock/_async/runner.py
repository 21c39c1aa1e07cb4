"""What every Lock of the driver runs on: its client, the flows of :mod:`distlock._flows`
run against Redis (commands, backoffs, a waiter's block), the effects the flows ask for
(signals, cancels, renewals), and the renewals due together sent in one pipeline per
connection.  :class:`distlock._async.primitive.Primitive` adds the lifecycle and the rest
the primitives share, and each primitive its own public calls."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError

from distlock import _flows as flows
from distlock import _renewals as renewals
from distlock._base import (
    HandleBase,
    LockBase,
    block_seconds,
    check_cluster_client,
    rides_on_waiter_connection,
    socket_timeout_of,
    split_client,
    wake_value,
)
from distlock._clock import now_ms
from distlock._core.commands import Command, Op, Step, replicated
from distlock._core.group import Group
from distlock._direct import Route
from distlock._flows import Block, Flow, Request, Sleep
from distlock._protocol import decode, encode, wake_key
from distlock._replicated import call_async
from distlock._waiter_connections import WaiterConnections
from distlock.events import Event, Transition
from distlock.signal import AsyncLeaseSignal

from . import backend, cancellation, wire

if TYPE_CHECKING:
    from .handles import Handle

T = TypeVar("T")


class Runner(LockBase):
    """A Lock's client and IO: everything but the public calls."""

    def __init__(
        self,
        client: backend.Client | str | backend.ClientFactory,
        allowed: frozenset[str],
        options: Mapping[str, object],
    ) -> None:
        super().__init__(allowed, options)
        self._owns_client = isinstance(client, str)
        self._client: backend.Client | None
        self._factory: backend.ClientFactory
        self._client, self._factory = split_client(
            client,
            (backend.Redis, backend.RedisCluster),
            backend.from_url(self.defaults.cluster),
            driver=backend.DRIVER,
            other=backend.OTHER_CLIENTS,
            other_driver=backend.OTHER_DRIVER,
        )
        check_cluster_client(self._client, self.defaults.cluster, backend.RedisCluster)
        self._resolving = backend.new_resolving_lock()
        #: The guard of every handle's core calls where timers run on another thread
        #: (reentrant: a trace callback may take another lock's action from inside one).
        self._mutex = backend.new_mutex()
        #: The flows' guard (one for the whole Lock rather than one per handle: a core call
        #: holds it for microseconds, and thousands of held locks need no lock object each).
        self._core_guard: flows.Guard | None = backend.core_guard(self._mutex)
        #: Renewals, and releases finishing after a cancel: close waits for them.
        self._background = backend.Background()
        #: Every section's timer.
        self._timers: backend.Timers = backend.new_timers(self)
        #: Renewals sent in the current tick, flushed together at its end.
        self._renewing: list[renewals.Renewal] = []
        self._route = Route(backend.Redis)
        self._waiter_conns = WaiterConnections()
        #: Waiters blocked in a BLPOP now: close interrupts them.
        self._blocked = backend.Blocked()

    async def client(self) -> backend.Client:
        """The Redis client, created on first use when a URL or factory was given."""
        client = self._client
        if client is None:
            async with self._resolving:
                if self._client is None:
                    self._client = await backend.resolved(self._factory())
                client = self._client
        return client

    def _signal_of(self, machine: Group) -> AsyncLeaseSignal:
        # Under the mutex, as the first loss is recorded (see _apply): a signal made
        # after the loss is born fired, one made before it is fired by it, never neither.
        with self._mutex:
            signal = machine.signal
            if signal is None:
                signal = machine.signal = AsyncLeaseSignal()
                if machine.first_loss is not None:
                    signal._fire(machine.first_loss)
        return cast(AsyncLeaseSignal, signal)

    async def _close_section(self, handle: Handle) -> None:
        if handle._deferred:  # unasync: async only
            handle._settle()  # unasync: async only
        with contextlib.suppress(Exception):
            await self._run(flows.close(self, handle))

    # -- IO: the flows of distlock._flows, run against Redis ---------------------------------

    def _call(self, command: Command) -> Awaitable[int]:
        """``command``'s reply: see :meth:`_call_on`."""
        client = self._client
        if client is None:
            return self._first_call(command)
        return self._call_on(client, command)

    async def _first_call(self, command: Command) -> int:
        """The first command of a Lock made from a URL or a factory: the client first."""
        return await self._call_on(await self.client(), command)

    def _call_on(self, client: Any, command: Command) -> Awaitable[int]:
        """``command``'s reply: by the direct send when the client allows it (almost every
        command), else by :meth:`_send`.  Under asyncio the send's own coroutine is returned
        for the caller to await: a coroutine fewer between a lock cycle and the socket."""
        if not command.replicas and not command.best_effort and self._route.direct(client):
            # A Redis (route.direct says so), whose pool carries no annotations.
            return wire.send(client, command, pool=client.connection_pool)
        return self._send(client, command)

    async def _send(self, client: Any, command: Command) -> int:
        script, keys, args = encode(command)
        if command.replicas:
            reply, acked = await call_async(
                client, script, keys, args, command.replicas, command.replica_timeout_ms
            )
            return replicated(command, decode(command, reply), acked)
        if command.best_effort and isinstance(client, backend.Redis):
            return decode(command, await wire.call_once(client, script, keys, args))
        # execute_command rather than evalsha(): the same command, without the wrapper
        # redis-py puts around its command methods (a cost paid twice per lock cycle).
        api: Any = client  # execute_command carries no annotations
        try:
            reply = await api.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
        except NoScriptError:
            reply = await api.execute_command("EVAL", script.source, len(keys), *keys, *args)
        return decode(command, reply)

    async def _run(
        self,
        flow: Flow[T],
        request: Request | None = None,
        task: cancellation.Task | None = None,
    ) -> T:
        """Run ``flow``; ``request`` resumes one whose pending request was interrupted.
        ``task`` is the current task, where the caller knows it already (asking costs a
        Python call on 3.11).

        Whatever interrupts a wait (a cancellation, a timeout, ``KeyboardInterrupt``, a
        connection error) is thrown into the flow, so it can give back what it took before
        the exception leaves.  What a cancellation does at each request:
        :mod:`distlock._async.cancellation`.
        """
        if task is None:  # unasync: async only
            task = cancellation.current_task()  # unasync: async only
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
                cancels = cancellation.cancelling(task)  # unasync: async only
                try:
                    # A command first, by exact type: that is almost every request.
                    if request.__class__ is Command:
                        reply = await self._call(request)
                    elif isinstance(request, Sleep):
                        await backend.sleep(max(0.0, request.until_ms - now_ms()) / 1000.0)
                        reply = 0
                    else:
                        reply = await self._call(request)
                    cancellation.raise_swallowed(task, cancels)  # unasync: async only
                except BaseException as exc:
                    request = self._interrupted(flow, request, exc)
                else:
                    request = flow.send(reply)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]  # the flow's T (no cast() call)

    def _interrupted(self, flow: Flow[T], request: Request, exc: BaseException) -> Request:
        """What follows a ``request`` of ``flow`` that ``exc`` interrupted: the flow's next
        request, the exception thrown into it at that request (a cancellation of a release
        leaves it to finish in the background: see :mod:`distlock._async.cancellation`)."""
        if isinstance(exc, cancellation.Cancelled):
            if cancellation.finishes_in_background(request):
                # It may or may not have reached Redis: send it again, same token, and
                # let the flow run to its end in the background.
                self._background.spawn(self._run, flow, request, name="distlock-release")
                raise exc
            return flow.throw(exc)
        return flow.throw(self._cut_short(exc, request))

    async def _wait(
        self, flow: Flow[T], request: Block, task: cancellation.Task | None
    ) -> Request | StopIteration:
        """Run ``request`` (a block) and the attempt a wake-up leads to; returns the flow's
        request after them, or the flow's end (a coroutine may not let ``StopIteration``
        out).

        The ``BLPOP`` goes out on a connection of the waiter's own, outside the client's
        pool (:mod:`distlock._waiter_connections`: waiters never starve a holder of
        connections), so that whatever interrupts it (a cancellation, a socket error,
        ``KeyboardInterrupt``) disconnects it: a connection still blocked in Redis is never
        kept for another block, and Redis forgets the blocked client when the socket
        closes.  The attempt that follows goes out on that same connection the moment the
        reply is in (see :func:`rides_on_waiter_connection`): no pool round trip between
        the release and the woken waiter's attempt.  Errors are thrown into the flow at the
        request they interrupted, as :meth:`_run` does; a waiter that close interrupted
        sees :class:`LockClosedError`.
        """
        if self._closed:
            return _advance(flow.throw, self._closed_error(request.key))
        cancels = cancellation.cancelling(task)
        conn: Any = None
        blocked = self._blocked
        try:
            client = self._client if self._client is not None else await self.client()
            if not isinstance(client, backend.Redis):
                blocked.add(task, None)
                try:
                    key = wake_key(request.key, request.token, request.kind)
                    timeout = block_seconds(request.until_ms, socket_timeout_of(client))
                    woken = wake_value(await client.blpop([key], timeout=timeout))
                    cancellation.raise_swallowed(task, cancels)
                finally:
                    blocked.discard(task, None)
            else:
                conn = await self._waiter_connection(client.connection_pool)
                try:
                    blocked.add(task, conn)
                    try:
                        if self._closed:  # close came before it could see this waiter
                            raise self._closed_error(request.key)
                        woken = await backend.blpop(client, conn, request)
                        cancellation.raise_swallowed(task, cancels)
                    finally:
                        blocked.discard(task, conn)
                except BaseException:
                    await backend.drop(conn)
                    raise
        except BaseException as exc:
            closed = self._closed_error(request.key)
            return _advance(flow.throw, blocked.error_of(task, exc, self._closed, closed))
        if conn is None:
            return _advance(flow.send, woken)
        try:
            attempt = _advance(flow.send, woken)
        except BaseException:
            await self._keep(conn)
            raise
        cancels = cancellation.cancelling(task)
        try:
            if not rides_on_waiter_connection(self._route, client, attempt):
                await self._keep(conn)
                return attempt
            assert isinstance(attempt, Command)
            try:
                # Sent as _call sends directly (an attempt is idempotent for its token, so
                # it is retried as any).
                fence = await wire.send(client, attempt, conn)
            finally:
                await self._keep(conn)
            cancellation.raise_swallowed(task, cancels)
        except BaseException as exc:
            # At the attempt's yield: interrupted before or after it went out, the flow
            # cleans up as for any attempt whose reply never came.
            return _advance(flow.throw, self._cut_short(exc, attempt))
        return _advance(flow.send, fence)

    def _cut_short(self, exc: BaseException, request: object) -> BaseException:
        """What an attempt's failure is thrown into its flow as: on a Lock closed while it
        was out, the close's doing (which may have cut its connection), so the caller sees
        ``LockClosedError``, the failure as its cause, as a waiter's block cut short does."""
        if (
            self._closed
            and isinstance(exc, Exception)
            and isinstance(request, Command)
            and request.op is Op.ACQUIRE
        ):
            closed = self._closed_error(request.key)
            closed.__cause__ = exc
            return closed
        return exc

    async def _waiter_connection(self, pool: Any) -> Any:
        """A connection to block on (see :mod:`distlock._waiter_connections`); one kept from
        an earlier block is checked first, as the pool checks its own: one the server
        closed meanwhile (its ``timeout``, a restart) is reconnected, not failed on."""
        conn, kept = self._waiter_conns.take(pool)
        if kept:
            try:
                if await backend.has_unread(conn):
                    await conn.disconnect()
            except (RedisConnectionError, OSError):
                await conn.disconnect()
        await conn.connect()  # a no-op when connected; a failure to connect surfaces here
        return conn

    async def _keep(self, conn: Any) -> None:
        if not self._waiter_conns.give_back(conn):
            await conn.disconnect()

    # -- effects, for the flows --------------------------------------------------------------

    def _apply(self, handle: Handle, step: Step) -> None:
        if step.loss is not None:
            machine = handle._machine
            with self._mutex:  # see _signal_of
                loss, cancel = machine.on_loss(step)
                signal = machine.signal  # None: nobody asked for it yet, and it is born fired
            if loss is not None and signal is not None:
                cast(AsyncLeaseSignal, signal)._fire(loss)
            if cancel:
                cancellation.cancel_body(handle._holding)
        command = step.send
        if command is not None and command.op is Op.RENEW:
            self._renew(handle, command)

    def _tick(self, handle: Handle) -> None:
        if handle._deferred:  # unasync: async only
            handle._settle()  # unasync: async only
        flows.tick(self, handle)
        if self._closed:
            # Came up as close ran: close did not find it armed, so it is closed here
            # (in the background: no round trip on the timer's path).
            self._background.spawn(self._close_section, handle, name="distlock-close")

    def _notify(self, handle: HandleBase, events: list[Transition | Event]) -> None:
        # Where ticks run on a timer thread, so that a loss is signalled the moment the
        # thread gets to run, observers do not: a slow one delays no other deadline.
        if self._background.on_timer_thread():
            self._background.submit(partial(LockBase._notify, self, handle, events))
        else:
            LockBase._notify(self, handle, events)

    # -- renewals: those due in one tick go out in one pipeline per connection ---------------

    def _renew(self, handle: Handle, command: Command) -> None:
        renewal = renewals.begin(self, handle, command)
        if renewals.alone(self._client, command) or not self._background.batching():
            self._background.spawn(
                self._renew_alone, renewal, name=f"distlock-renew {handle.key}"
            )
            return
        self._renewing.append(renewal)
        if len(self._renewing) == 1:
            # Timers due together run in one tick; this runs after all of them.
            self._background.after_tick(self._flush_renewals)

    def _flush_renewals(self) -> None:
        batch, self._renewing = self._renewing, []
        if self._closed and backend.DROP_BATCH_WHEN_CLOSED:
            return
        for group in renewals.by_connection(self._client, batch):
            self._background.spawn(self._renew_batch, group, name="distlock-renew")

    async def _renew_batch(self, batch: list[renewals.Renewal]) -> None:
        """One round trip for ``batch`` (one connection's share), in the background: a hung
        reply holds up this batch only, never a deadline (those are the timers')."""
        replies = await self._send_batch(batch)
        missing = renewals.unscripted(replies)
        if missing:
            again = await self._send_batch([batch[i] for i in missing], source=True)
            for i, raw in zip(missing, again, strict=True):
                replies[i] = raw
        interrupt = None
        for renewal, raw in zip(batch, replies, strict=True):
            if isinstance(raw, renewals.RESEND):
                self._background.spawn(self._renew_alone, renewal, name="distlock-renew")
                continue
            interrupt = renewals.settle(renewal, renewals.reply_of(renewal, raw)) or interrupt
        if interrupt is not None:
            raise interrupt

    async def _send_batch(
        self, batch: list[renewals.Renewal], *, source: bool = False
    ) -> list[object]:
        """The replies of one pipeline; if it fails as a whole, its error for every member
        (on a closed Lock, without a round trip where it would outlive close:
        ``LockClosedError``)."""
        if not self._background.begin_round_trip(self):
            return [self._closed_error(renewal.command.key) for renewal in batch]
        try:
            client = self._client if self._client is not None else await self.client()
            pipe = renewals.queue(renewals.pipeline(client), batch, source=source)
            return list(await pipe.execute(raise_on_error=False))
        except BaseException as exc:
            return [exc] * len(batch)
        finally:
            self._background.end_round_trip()

    async def _renew_alone(self, renewal: renewals.Renewal) -> None:
        reply: int | BaseException
        if not self._background.begin_round_trip(self):
            reply = self._closed_error(renewal.command.key)
        else:
            try:
                reply = await self._call(renewal.command)
            except BaseException as exc:
                reply = exc
            finally:
                self._background.end_round_trip()
        interrupt = renewals.settle(renewal, reply)
        if interrupt is not None:
            raise interrupt


def _advance(step: Callable[[Any], Request], value: Any) -> Request | StopIteration:
    """``step(value)`` (a flow's ``send`` or ``throw``), with the flow's end as a value.

    The end is returned without its traceback: that holds this call's frame, and through
    it the caller's, which holds the end it was returned: a cycle that only the cycle
    collector would free."""
    try:
        return step(value)
    except StopIteration as stop:
        return stop.with_traceback(None)
