"""What the asyncio driver does its own way: the one hand-written module (with
:mod:`distlock._async.cancellation`) that the driver modules of this package reach asyncio
and ``redis.asyncio`` through.

:mod:`distlock._sync.backend` offers the same names for threads and blocking IO; the sync
driver is generated from this package by ``tools/unasync.py``, which rewrites
``distlock._async`` to ``distlock._sync`` and drops ``await``, so every name here must
mean the same thing there.  What goes here: timers, background work, the holder of a
reentrant level, the Redis client module, a body's checks, and the few connection calls
whose signatures differ between redis-py's two APIs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from types import CoroutineType, FunctionType
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar

import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from distlock._base import block_seconds, socket_timeout_of, wake_value
from distlock._clock import now_ms
from distlock._loop_timers import LoopTimers
from distlock._protocol import wake_key
from distlock.errors import LockClosedError, UsageError, ValidationError

from . import cancellation

if TYPE_CHECKING:
    from distlock._flows import Block, Guard
    from distlock._scheduler import Armed

T = TypeVar("T")

#: The client classes this driver talks through (a Sentinel's ``master_for`` gives a Redis).
Redis = aredis.Redis
RedisCluster = aredis.RedisCluster
ConnectionPool = aredis.ConnectionPool
Client: TypeAlias = aredis.Redis | aredis.RedisCluster
ClientFactory: TypeAlias = Callable[[], "Client | Awaitable[Client]"]
#: The other driver's clients, refused with a pointer to that driver.
OTHER_CLIENTS: tuple[type, ...] = (redis.Redis, redis.RedisCluster)
DRIVER = "distlock.asyncio"
OTHER_DRIVER = "distlock"
#: redis-py's connection, whose packing a connection's is checked against (packed_evalsha).
CONNECTION = aredis.connection.AbstractConnection
#: asyncio's own Retry: given a sync one, redis-py 8 warns on every connection it makes.
ONE_ATTEMPT = Retry(NoBackoff(), 0)
#: A renewal batch met on a closed Lock is dropped: aclose() cancels the renewal tasks.
DROP_BATCH_WHEN_CLOSED = True
#: What background work is: a coroutine function (called with its arguments when spawned).
Work: TypeAlias = Callable[..., Coroutine[Any, Any, Any]]
#: A Lock's timers.
Timers: TypeAlias = LoopTimers
#: Who holds a reentrant level: the current task.
Holder: TypeAlias = "asyncio.Task[Any]"


def from_url(cluster: bool) -> Callable[..., Client]:
    return aredis.RedisCluster.from_url if cluster else aredis.Redis.from_url


async def resolved(made: Client | Awaitable[Client]) -> Client:
    """What a client factory gave: awaited if it is awaitable."""
    return await made if inspect.isawaitable(made) else made


def new_resolving_lock() -> asyncio.Lock:
    """Held while the client is made from its factory."""
    return asyncio.Lock()


def new_mutex() -> contextlib.nullcontext[None]:
    """The guard around a Lock's core state: none is needed, everything runs on the
    event loop's thread (a no-op ``with``)."""
    return contextlib.nullcontext()


def core_guard(mutex: object) -> Guard | None:
    """The flows' guard (see :class:`distlock._flows.Effects`): none on one thread."""
    return None


async def sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


# -- timers and background work ---------------------------------------------------------------


def new_timers(lock: Any) -> LoopTimers:
    """Every section's timer, on one event-loop timer."""
    return LoopTimers(lock._tick)


def close_timers(lock: Any) -> list[Armed]:
    return lock._timers.close()  # type: ignore[no-any-return]


class Background:
    """A Lock's tasks: renewals, and releases finishing after a cancel; kept referenced,
    and awaited by ``aclose()``."""

    __slots__ = ("tasks",)

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, fn: Work, *args: Any, name: str) -> None:
        task = asyncio.get_running_loop().create_task(fn(*args), name=name)
        self.tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: a background release's error has no caller

    def submit(self, fn: Callable[[], object]) -> None:
        """``fn()`` soon, on the loop (an observer call, never on the timer path here)."""
        asyncio.get_running_loop().call_soon(fn)

    def after_tick(self, fn: Callable[[], None]) -> None:
        """``fn()`` once the timers due in this loop iteration have run."""
        asyncio.get_running_loop().call_soon(fn)

    @staticmethod
    def on_timer_thread() -> bool:
        """Never: timers run on the loop, where observers may run too."""
        return False

    @staticmethod
    def batching() -> bool:
        """Renewals due together go out together (timers all run on the loop)."""
        return True

    @staticmethod
    def begin_round_trip(lock: object) -> bool:
        """A renewal may go out: aclose() cancels the tasks that send them."""
        return True

    @staticmethod
    def end_round_trip() -> None:
        pass

    async def drain(self, lock: object) -> None:
        """Stop the renewals, and let interrupted releases finish."""
        pending = list(self.tasks)
        for task in pending:
            if task.get_name().startswith("distlock-renew"):
                task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


class Blocked:
    """The tasks blocked in a waiter's BLPOP now: ``aclose()`` cancels them, and they raise
    :class:`LockClosedError` (the cancels it sent are in ``closing``, consumed by the
    waiter: see :func:`cancellation.closed_instead`)."""

    __slots__ = ("closing", "tasks")

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closing: set[asyncio.Task[Any]] = set()

    def add(self, task: asyncio.Task[Any] | None, conn: object) -> None:
        if task is not None:
            self.tasks.add(task)

    def discard(self, task: asyncio.Task[Any] | None, conn: object) -> None:
        if task is not None:
            self.tasks.discard(task)

    def interrupt(self) -> None:
        for task in self.tasks:
            if task not in self.closing:
                self.closing.add(task)
                task.cancel()

    def error_of(
        self,
        task: asyncio.Task[Any] | None,
        exc: BaseException,
        closed: bool,
        closed_error: LockClosedError,
    ) -> BaseException:
        """What the waiter sees for ``exc``: ``closed_error``, if ``exc`` is aclose()'s
        cancel, else ``exc`` itself."""
        return cancellation.closed_instead(self.closing, task, exc, closed_error)


# -- connections ------------------------------------------------------------------------------


def call_with_retry(conn: Any, do: Callable[[], Awaitable[object]]) -> Awaitable[object]:
    """``do()``, retried as the connection's ``Retry`` says; before a retry, as
    execute_command's: disconnected, the error going to redis-py's connection metrics.

    A plain function that returns the retry's coroutine for the caller to await, rather
    than a coroutine awaiting it: a coroutine fewer on every command's way to the wire."""
    return conn.retry.call_with_retry(  # type: ignore[no-any-return]
        do, partial(_disconnect_failed, conn), with_failure_count=True
    )


async def _disconnect_failed(conn: Any, error: BaseException, failures: int) -> None:
    await conn.disconnect(error=error, failure_count=failures)


async def drop(conn: Any) -> None:
    """Disconnect a connection interrupted mid-command, without waiting on its socket."""
    await conn.disconnect(nowait=True)


def give_back(pool: Any, conn: Any) -> Awaitable[None]:
    """Back to the pool (whose ``release`` disconnects a connection a maintenance
    notification marked, as it does after execute_command): the pool's coroutine, for the
    caller to await (as :func:`call_with_retry`)."""
    return pool.release(conn)  # type: ignore[no-any-return]


async def has_unread(conn: Any) -> bool:
    """Whether a kept connection has something to read (the server closed it)."""
    # redis-py 8 names it can_read (can_read_destructive warns there); 5.3 has the old name.
    can_read = getattr(conn, "can_read", None) or conn.can_read_destructive
    return bool(await can_read())


async def blpop(api: Any, conn: Any, request: Block) -> int:
    """BLPOP the waiter's wake list until ``request.until_ms`` (see :func:`wake_value`)."""
    key = wake_key(request.key, request.token, request.kind)
    timeout = block_seconds(request.until_ms, socket_timeout_of(api, conn))
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


# -- holders and bodies -----------------------------------------------------------------------


def holder(key: str) -> asyncio.Task[Any]:
    """The holder of a reentrant level: the current task (never a context variable: a
    child task the holder creates is another holder)."""
    task = asyncio.current_task()
    if task is None:
        raise UsageError(
            f"a ReentrantLock's holder is the current task, and there is none: take {key!r} "
            "from inside a task (a coroutine run by asyncio)",
            key,
        )
    return task


def caller() -> Holder | None:
    """Who holds a read-write lock's section, for its reentry check: the current task
    (None outside one: nothing to check against)."""
    return asyncio.current_task()


def check_body(fn: object) -> None:
    """Refuse, before any command, a body that certainly gives nothing to await.

    Only what is certain: a plain ``def`` may return a coroutine (``lambda h: work(h)``), and
    a ``functools.partial`` of an ``async def`` is one, so both pass; what they return is
    checked when they return it (:func:`awaitable`).  A generator function's generator
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


def awaitable(fn: object, body: Awaitable[T]) -> Awaitable[T]:
    """What the body returned, if it can be awaited; otherwise a ValidationError, which the
    hold releases the lock for as for any exception of the body (nothing is awaited)."""
    if body.__class__ is CoroutineType or inspect.isawaitable(body):
        return body
    raise ValidationError(
        f"the body {getattr(fn, '__name__', fn)!r} returned {type(body).__name__}, not an "
        "awaitable: the asyncio Lock awaits what the body returns; make it an async def "
        "function, or use the sync distlock.Lock for a plain function"
    )


def returned(fn: object, result: T) -> T:
    """What ``run`` returns for the body's awaited result: that result."""
    return result
