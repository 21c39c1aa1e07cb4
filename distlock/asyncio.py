"""The asyncio driver: redis-py asyncio IO around the pure :class:`~distlock.core.Section`.

It mirrors :mod:`distlock.lock` step for step; the differences are only how IO waits.
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
import time
from collections.abc import Awaitable, Callable, Coroutine
from types import TracebackType
from typing import Any, TypeVar, cast

import redis.asyncio as aredis
from redis.exceptions import NoScriptError

from distlock import scripts
from distlock.base import HandleBase, LockBase
from distlock.core import Op, Phase, Section, Step, Trace
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
ClientFactory = Callable[[], "aredis.Redis | Awaitable[aredis.Redis]"]


def _now() -> float:
    return time.monotonic() * 1000.0


class LockHandle(HandleBase):
    """An acquired lock (asyncio): ``key``, ``token``, ``fence`` and ``signal``."""

    __slots__ = ("_lock", "_task", "_timer", "signal")

    def __init__(self, lock: Lock, section: Section) -> None:
        super().__init__(section)
        self._lock = lock
        self.signal = AsyncLeaseSignal()
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


class _Hold:
    """``async with locks.hold(id) as handle``: see :meth:`Lock.hold`."""

    __slots__ = ("_cancelling", "_handle", "_lock", "_section")

    def __init__(self, lock: Lock, section: Section) -> None:
        self._lock = lock
        self._section = section
        self._handle: LockHandle | None = None
        self._cancelling = 0

    async def __aenter__(self) -> LockHandle:
        lock = self._lock
        handle = await lock._acquire(self._section)
        if handle.section.phase is not Phase.HELD:
            raise handle.section.not_acquired_error()
        task = asyncio.current_task()
        handle._task = task
        self._cancelling = task.cancelling() if task is not None else 0
        self._handle = handle
        lock._arm(handle)
        return handle

    async def __aexit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        handle = self._handle
        assert handle is not None
        section = handle.section
        task = handle._task
        # Consume our own cancel; one from outside on top of it stays and wins.
        outside_cancel = (
            section.cancel_requested
            and task is not None
            and task.uncancel() > self._cancelling
            and isinstance(ev, asyncio.CancelledError)
        )
        await self._lock._finish(handle)
        if outside_cancel:
            return
        verdict = section.verdict(ev)
        if verdict is ev:
            return
        assert verdict is not None
        raise verdict from ev


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
        self._client: aredis.Redis | None = None
        self._factory: ClientFactory
        if isinstance(client, str):
            url = client
            self._factory = lambda: aredis.Redis.from_url(url)
        elif isinstance(client, aredis.Redis) or not callable(client):
            self._client = client
            self._factory = lambda: client
        else:
            self._factory = client
        self._resolving: asyncio.Lock | None = None
        #: Renewals and shielded releases in flight: kept referenced, awaited by aclose().
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
        """Finish shielded releases, stop renewals and timers; close a client the Lock made."""
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
        cancel = self.cancel_on_loss if isinstance(cancel_on_loss, Unset) else bool(cancel_on_loss)
        return _Hold(self, self._section(id, opts, watch=True, cancel_on_loss=cancel))

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

    # -- IO --------------------------------------------------------------------------------

    async def _call(self, op: Op, section: Section, ttl_ms: int) -> int:
        script, keys, args = scripts.command(op, section.key, section.token, ttl_ms)
        client = self._client if self._client is not None else await self.client()
        try:
            reply = await client.evalsha(script.sha, len(keys), *keys, *args)
        except NoScriptError:
            reply = await client.eval(script.source, len(keys), *keys, *args)
        return int(cast(Any, reply))

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _acquire(self, section: Section) -> LockHandle:
        """Attempt until granted or refused for good; a grant that came too late to use is
        released and raised as the loss it is."""
        if self._closed:
            raise RuntimeError("this Lock is closed")
        handle = LockHandle(self, section)
        while True:
            section.acquire(_now())
            try:
                fence = await self._call(Op.ACQUIRE, section, section.config.ttl_ms)
            except BaseException as exc:
                section.acquire_fail(_now())
                await self._cleanup(handle, exc)
                raise
            step = section.acquire_reply(_now(), fence)
            if step.loss is not None:
                self._apply(handle, step)
                await self._release(handle)
                raise step.loss
            if section.phase is not Phase.BACKOFF:
                return handle
            await asyncio.sleep(max(0.0, section.retry_at - _now()) / 1000.0)

    async def _cleanup(self, handle: LockHandle, cause: BaseException) -> None:
        """The acquire may have run: delete the key if it holds our token, before reporting."""
        try:
            await self._release(handle)
        except Exception as exc:
            cause.add_note(
                f"distlock: the cleanup release of {handle.key!r} also failed ({exc!r}); "
                "if the acquire had run, the key expires after its TTL"
            )
        except asyncio.CancelledError:
            pass  # cancelled again: the release goes on in the background

    async def _release(self, handle: LockHandle) -> bool:
        """Release inline: no task in the common case.

        If the caller is cancelled while the round trip is in flight, the request may or may
        not have reached Redis; the same token-checked release is sent again from a
        background task, so the token is kept until Redis has answered a release.
        """
        if handle.section.release(_now()).send is None:
            return False
        try:
            return await self._release_round_trip(handle)
        except asyncio.CancelledError:
            if handle.section.phase is Phase.RELEASING:
                self._spawn(self._release_round_trip(handle), name="distlock-release")
            raise

    async def _release_round_trip(self, handle: LockHandle) -> bool:
        section = handle.section
        try:
            ok = await self._call(Op.RELEASE, section, section.config.ttl_ms) == 1
        except Exception as exc:
            step = section.release_fail(_now())
            if step.loss is not None:
                step.loss.__cause__ = exc
                self._apply(handle, step)
            if section.release_error_to_caller:
                raise
            return False
        self._apply(handle, section.release_reply(_now(), ok))
        return ok

    async def _extend(self, handle: LockHandle, ttl_ms: int) -> bool:
        section = handle.section
        step = section.extend(_now(), ttl_ms)
        if step.send is None:
            return False
        try:
            ok = await self._call(Op.EXTEND, section, ttl_ms) == 1
        except BaseException:
            section.extend_fail(_now())
            raise
        step = section.extend_reply(_now(), ok)
        self._arm(handle)
        self._apply(handle, step)
        return ok

    async def _finish(self, handle: LockHandle) -> None:
        section = handle.section
        step = section.body_done(_now())
        self._disarm(handle)
        self._handles.discard(handle)
        self._apply(handle, step)
        await self._release(handle)

    # -- renewal ---------------------------------------------------------------------------

    def _apply(self, handle: LockHandle, step: Step) -> None:
        if step.loss is not None:
            handle.signal._fire(step.loss)
            if step.cancel_body and handle._task is not None:
                handle._task.cancel()
        if step.send is Op.EXTEND:
            self._spawn(self._renew(handle), name=f"distlock-renew {handle.key}")

    def _disarm(self, handle: LockHandle) -> None:
        if handle._timer is not None:
            handle._timer.cancel()
            handle._timer = None

    def _arm(self, handle: LockHandle) -> None:
        self._disarm(handle)
        wake_at = handle.section.wake_at
        if wake_at is None or self._closed:
            self._handles.discard(handle)
            return
        self._handles.add(handle)
        delay = max(0.0, wake_at - _now()) / 1000.0
        handle._timer = asyncio.get_running_loop().call_later(delay, self._tick, handle)

    def _tick(self, handle: LockHandle) -> None:
        handle._timer = None
        step = handle.section.tick(_now())
        self._arm(handle)
        self._apply(handle, step)

    async def _renew(self, handle: LockHandle) -> None:
        section = handle.section
        try:
            ok = await self._call(Op.EXTEND, section, section.config.ttl_ms) == 1
        except asyncio.CancelledError:
            section.renew_fail(_now())
            raise
        except Exception as exc:
            step = section.renew_fail(_now())
            self._arm(handle)
            self._apply(handle, step)
            hook = section.config.on_renew_error
            if hook is not None:
                hook(exc)
            return
        step = section.renew_reply(_now(), ok)
        self._arm(handle)
        self._apply(handle, step)


__all__ = ["Lock", "LockHandle"]
