"""The sync driver: redis-py IO and threads around the pure core (:mod:`distlock._core`).

Every decision is the core's.  This module turns its ``Step`` outputs into script calls,
fires signals, and keeps one timer per watched section on the Lock's shared scheduler.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, TypeVar, cast

import redis
from redis.exceptions import NoScriptError

from distlock import _flows as flows
from distlock._base import GroupBase, HandleBase, LockBase, now_ms, split_client
from distlock._core.section import Op, Phase, Section, Step, Trace, verdict
from distlock._flows import Call, Flow, Sleep
from distlock._scheduler import Scheduler, Timer
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
from distlock.signal import LeaseSignal

T = TypeVar("T")

#: Renewal round trips run here, so a hung connection never stalls the timer thread.
RENEW_WORKERS = 4


class LockHandle(HandleBase):
    """An acquired lock: ``key``, ``token`` (the value stored under the key), ``fence``,
    and ``signal``, which aborts with the :class:`LockLeaseLostError` once the loss is known.
    """

    __slots__ = ("_lock", "_mutex", "_timer", "signal")

    def __init__(self, lock: Lock, section: Section, signal: LeaseSignal | None = None) -> None:
        super().__init__(section)
        self._lock = lock
        self.signal = LeaseSignal() if signal is None else signal
        self._mutex = threading.Lock()
        self._timer: Timer | None = None

    def extend(self, ttl_ms: int | None = None) -> bool:
        """Reset the key's TTL to ``ttl_ms`` (default: the lock's TTL) if our token still owns it.

        Returns False, and fires ``signal``, when the key expired or belongs to someone else.
        Connection errors propagate: a failed round trip says nothing about ownership.
        """
        ttl = self.section.config.ttl_ms if ttl_ms is None else check_ttl(ttl_ms)
        return self._lock._extend(self, ttl)

    def release(self) -> bool:
        """Delete the key if our token still owns it. True only if it did."""
        return self._lock._release(self)


class LockGroup(GroupBase[LockHandle]):
    """Several locks held together (see :meth:`Lock.hold_many`): ``group[id]`` is one
    handle; ``signal`` aborts with the first loss among them."""

    __slots__ = ("signal",)

    def __init__(self, prefix: str, handles: Sequence[LockHandle], signal: LeaseSignal) -> None:
        super().__init__(prefix, handles)
        self.signal = signal


class _Holding:
    """Holds the locks of ``sections`` for a ``with`` block: :meth:`Lock.hold` (one, gives
    its handle) and :meth:`Lock.hold_many` (a group, gives the group) alike."""

    __slots__ = ("_group", "_lock")

    def __init__(self, lock: Lock, sections: list[Section]) -> None:
        signal = LeaseSignal()
        self._lock = lock
        handles = [LockHandle(lock, section, signal) for section in sections]
        self._group = LockGroup(lock.prefix, handles, signal)

    def _enter(self) -> LockGroup:
        lock, group = self._lock, self._group
        lock._run(flows.acquire_all(lock, group.handles))
        for handle in group.handles:
            with handle._mutex:
                lock.arm(handle)
        return group

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        group = self._group
        self._lock._run(flows.finish_all(self._lock, group.handles))
        outcome = verdict([h.section for h in group], group.signal.reason, ev)
        if outcome is not ev:
            assert outcome is not None
            raise outcome from ev


class _Hold(_Holding):
    def __enter__(self) -> LockHandle:
        return self._enter().handles[0]


class _HoldMany(_Holding):
    def __enter__(self) -> LockGroup:
        return self._enter()


class Lock(LockBase):
    """A Redis lock namespace: keys are ``<prefix>:<id>``.

    ``client`` is a ``redis.Redis``, a URL (the Lock then owns the client and closes it in
    :meth:`close`), or a zero-argument factory called on first use.

    >>> locks = Lock("redis://127.0.0.1:6379/0", prefix="order", ttl_ms=10_000)  # doctest: +SKIP
    >>> locks.run("42", lambda handle: charge(handle.fence))  # doctest: +SKIP
    """

    def __init__(
        self,
        client: redis.Redis | str | Callable[[], redis.Redis],
        *,
        prefix: str = DEFAULT_PREFIX,
        ttl_ms: int = DEFAULT_TTL_MS,
        retries: int = DEFAULT_RETRIES,
        retry_delay_ms: float = DEFAULT_RETRY_DELAY_MS,
        heartbeat_ms: Heartbeat = None,
        on_renew_error: RenewErrorHook | None = None,
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
        self._owns_client = isinstance(client, str)
        self._client, self._factory = split_client(client, redis.Redis, redis.Redis.from_url)
        self._init_lock = threading.Lock()
        self._scheduler = Scheduler(f"distlock-{self._label}-timer")
        self._workers: ThreadPoolExecutor | None = None
        self._closed = False

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def client(self) -> redis.Redis:
        client = self._client
        if client is None:
            with self._init_lock:
                if self._client is None:
                    self._client = self._factory()
                client = self._client
        return client

    def close(self) -> None:
        """Stop the scheduler thread and renewal workers; close the client if the Lock made it."""
        self._closed = True
        self._scheduler.close()
        with self._init_lock:
            workers, self._workers = self._workers, None
        if workers is not None:
            workers.shutdown(wait=True, cancel_futures=True)
        if self._owns_client and self._client is not None:
            self._client.close()

    def __enter__(self) -> Lock:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- public API ------------------------------------------------------------------------

    def acquire(
        self,
        id: str,
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
    ) -> LockHandle | None:
        """Take the lock, or return None if another owner holds it (after any retries).

        The handle is not renewed in the background: call :meth:`LockHandle.extend` if the
        work can outlive the TTL, and :meth:`LockHandle.release` when done.
        """
        opts = self.defaults.override(ttl_ms=ttl_ms, retries=retries, retry_delay_ms=retry_delay_ms)
        handle = self._acquire(self._section(id, opts, watch=False, cancel_on_loss=False))
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
    ) -> _Hold:
        """Hold the lock for a ``with`` block, renewing it every heartbeat while the block runs.

        Raises :class:`LockNotAcquiredError` if the lock is held elsewhere, and
        :class:`LockLeaseLostError` on exit if exclusivity was not kept for the whole block,
        even when the block itself succeeded. Options are validated here, before any
        Redis command.
        """
        opts = self.defaults.override(
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
        )
        section = self._section(id, opts, watch=True, cancel_on_loss=False)
        return _Hold(self, [section])

    def run(
        self,
        id: str,
        fn: Callable[[LockHandle], T],
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
        heartbeat_ms: Heartbeat | Unset = UNSET,
        on_renew_error: RenewErrorHook | Unset | None = UNSET,
    ) -> T:
        """Run ``fn(handle)`` under the lock, renewed while it runs, released even if it raises.

        Returns what ``fn`` returned only if the lock was held for the whole call.
        """
        with self.hold(
            id,
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
        ) as handle:
            return fn(handle)

    def hold_many(
        self,
        ids: Sequence[str],
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
        heartbeat_ms: Heartbeat | Unset = UNSET,
        on_renew_error: RenewErrorHook | Unset | None = UNSET,
    ) -> _HoldMany:
        """Hold several locks for a ``with`` block, as :meth:`hold` holds one.

        The locks are taken in sorted key order whatever order ``ids`` names them in, so
        two callers wanting the same locks can never each hold one and wait for the other.
        If one cannot be had, those already taken are released and
        :class:`LockNotAcquiredError` names it. On exit they are released in reverse order,
        and :class:`LockLeaseLostError` is raised if any of them was lost.
        """
        opts = self.defaults.override(
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
        )
        return _HoldMany(self, self._group_sections(ids, opts, cancel_on_loss=False))

    def run_many(
        self,
        ids: Sequence[str],
        fn: Callable[[LockGroup], T],
        *,
        ttl_ms: int | Unset = UNSET,
        retries: int | Unset = UNSET,
        retry_delay_ms: float | Unset = UNSET,
        heartbeat_ms: Heartbeat | Unset = UNSET,
        on_renew_error: RenewErrorHook | Unset | None = UNSET,
    ) -> T:
        """Run ``fn(group)`` holding every lock in ``ids``; see :meth:`hold_many`."""
        with self.hold_many(
            ids,
            ttl_ms=ttl_ms,
            retries=retries,
            retry_delay_ms=retry_delay_ms,
            heartbeat_ms=heartbeat_ms,
            on_renew_error=on_renew_error,
        ) as group:
            return fn(group)

    # -- IO: the flows of distlock._flows, run with blocking calls ----------------------------

    def _call(self, call: Call) -> int:
        client = self.client
        script = call.script
        try:
            reply = client.evalsha(script.sha, len(call.keys), *call.keys, *call.args)
        except NoScriptError:
            reply = client.eval(script.source, len(call.keys), *call.keys, *call.args)
        return int(cast(Any, reply))

    def _run(self, flow: Flow[T]) -> T:
        try:
            request = next(flow)
            while True:
                if isinstance(request, Sleep):
                    time.sleep(max(0.0, request.until_ms - now_ms()) / 1000.0)
                    request = flow.send(0)
                    continue
                try:
                    reply = self._call(request)
                except BaseException as exc:
                    request = flow.throw(exc)
                else:
                    request = flow.send(reply)
        except StopIteration as stop:
            return cast(T, stop.value)

    def _acquire(self, section: Section) -> LockHandle:
        if self._closed:
            raise RuntimeError("this Lock is closed")
        handle = LockHandle(self, section)
        self._run(flows.acquire(self, handle))
        return handle

    def _release(self, handle: LockHandle) -> bool:
        return self._run(flows.release(self, handle))

    def _extend(self, handle: LockHandle, ttl_ms: int) -> bool:
        return self._run(flows.extend(self, handle, ttl_ms))

    # -- Effects, for the flows --------------------------------------------------------------

    def guard(self, handle: LockHandle) -> threading.Lock:
        return handle._mutex

    def apply(self, handle: LockHandle, step: Step) -> None:
        if step.loss is not None:
            handle.signal._fire(step.loss)
        if step.send is Op.EXTEND:
            self._renew_pool().submit(self._run, flows.renew(self, handle))

    def arm(self, handle: LockHandle) -> None:
        if handle._timer is not None:
            handle._timer.cancel()
            handle._timer = None
        wake_at = handle.section.wake_at
        if wake_at is not None and not self._closed:
            handle._timer = self._scheduler.call_at(
                wake_at / 1000.0, lambda: flows.tick(self, handle)
            )

    def _renew_pool(self) -> ThreadPoolExecutor:
        with self._init_lock:
            if self._workers is None:
                self._workers = ThreadPoolExecutor(
                    RENEW_WORKERS, thread_name_prefix=f"distlock-{self._label}-renew"
                )
            return self._workers


__all__ = ["Lock", "LockGroup", "LockHandle"]
