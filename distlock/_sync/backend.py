"""What the sync driver does its own way: threads and blocking IO, under the names
:mod:`distlock._async.backend` gives asyncio (hand-written; the rest of this package is
generated from :mod:`distlock._async` by ``tools/unasync.py``).

Timers: one timer thread for every sync Lock of the process (:mod:`distlock._scheduler`,
started on the first watched section, ended when idle), so threads do not grow with the
number of Lock objects.  Background work (renewals, and each observer call a timer leads
to) runs on the process's worker pool (:mod:`distlock._workers`), so neither a hung
connection nor a slow observer holds up another section's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import threading
import time
from collections.abc import Callable
from functools import partial
from types import CoroutineType, FunctionType
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar

import redis
import redis.asyncio as aredis
from redis.backoff import NoBackoff
from redis.retry import Retry

from distlock._base import block_seconds, socket_timeout_of, wake_value
from distlock._clock import now_ms
from distlock._protocol import wake_key
from distlock._scheduler import LockTimers, Scheduler
from distlock._workers import Workers
from distlock.errors import LockClosedError, UsageError, ValidationError

if TYPE_CHECKING:
    from distlock._flows import Block
    from distlock._scheduler import Armed

T = TypeVar("T")

Redis = redis.Redis
RedisCluster = redis.RedisCluster
ConnectionPool = redis.ConnectionPool
#: What a sync Lock talks through (a Sentinel's ``master_for`` gives a redis.Redis).
Client: TypeAlias = redis.Redis | redis.RedisCluster
ClientFactory: TypeAlias = Callable[[], Client]
OTHER_CLIENTS: tuple[type, ...] = (aredis.Redis, aredis.RedisCluster)
DRIVER = "distlock"
OTHER_DRIVER = "distlock.asyncio"
CONNECTION = redis.connection.AbstractConnection
ONE_ATTEMPT = Retry(NoBackoff(), 0)
#: A renewal batch met on a closed Lock is still settled: its round trip is refused
#: (:meth:`Background.begin_round_trip`), so each renewal ends as a closed one.
DROP_BATCH_WHEN_CLOSED = False
Work: TypeAlias = Callable[..., object]
#: A Lock's timers: its share of the process's timer thread.
Timers: TypeAlias = LockTimers
#: Who holds a reentrant level: the current thread.
Holder: TypeAlias = threading.Thread
#: The code flags of ``async def`` functions and of async generators.
_ASYNC_FLAGS = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


def _due(handle: Any) -> None:
    """A handle's timer came up on the process's timer thread: its own Lock's tick."""
    handle._lock._tick(handle)


#: The timer thread every sync Lock of the process shares (started on the first watched
#: section, ended when idle): threads do not grow with the number of Lock objects.
TIMERS: Final = Scheduler("distlock-timer", _due)
#: The background round trips of every sync Lock of the process, on a few threads.
WORKERS: Final = Workers("distlock-worker", limit=8)
# A child made by os.fork has none of the parent's threads: both start afresh there.
os.register_at_fork(after_in_child=TIMERS.after_fork)
os.register_at_fork(after_in_child=WORKERS.after_fork)


def from_url(cluster: bool) -> Callable[..., Client]:
    return redis.RedisCluster.from_url if cluster else redis.Redis.from_url


def resolved(made: Client) -> Client:
    return made


def new_resolving_lock() -> threading.Lock:
    return threading.Lock()


def new_mutex() -> threading.RLock:
    """The guard of a Lock's core state: timers and renewals run on other threads."""
    return threading.RLock()


def core_guard(mutex: threading.RLock) -> threading.RLock:
    return mutex


def sleep(seconds: float) -> None:
    time.sleep(seconds)


# -- timers and background work ---------------------------------------------------------------


def new_timers(lock: Any) -> LockTimers:
    return LockTimers(TIMERS)


def close_timers(lock: Any) -> list[Armed]:
    """Only this Lock's timers are taken out: the timer thread is the process's."""
    return lock._timers.close(  # type: ignore[no-any-return]
        lambda item: getattr(item, "_lock", None) is lock
    )


class Background:
    """A Lock's share of the process's worker pool, and the worker threads in one of its
    renewal round trips now (a thread once per round trip it is in): close waits for
    them, so that none reconnects through the client after close returned."""

    __slots__ = ("_in_round_trip", "_round_trips")

    def __init__(self) -> None:
        self._round_trips = threading.Condition(threading.Lock())
        self._in_round_trip: list[threading.Thread] = []

    @staticmethod
    def spawn(fn: Work, *args: Any, name: str) -> None:
        WORKERS.submit(partial(fn, *args))

    @staticmethod
    def submit(fn: Callable[[], object]) -> None:
        WORKERS.submit(fn)

    @staticmethod
    def after_tick(fn: Callable[[], None]) -> None:
        """``fn()`` on the timer thread once the timers due now have run."""
        TIMERS.after_due(fn)

    @staticmethod
    def on_timer_thread() -> bool:
        return TIMERS.on_timer_thread()

    @staticmethod
    def batching() -> bool:
        """Renewals are batched on the timer thread only (the ticks due together)."""
        return TIMERS.on_timer_thread()

    def begin_round_trip(self, lock: Any) -> bool:
        """Count the calling worker thread in a renewal round trip of ``lock``; False,
        counting nothing, once the Lock is closed: the caller then sends nothing.

        A round trip still running when the caller closes the client is not only late:
        the client's close disconnects its connection under it, redis-py's ``Retry``
        reconnects and sends again, and the new connection goes back to the closed pool,
        open, with nobody left to close it."""
        with self._round_trips:
            if lock._closed:
                return False
            self._in_round_trip.append(threading.current_thread())
            return True

    def end_round_trip(self) -> None:
        with self._round_trips:
            self._in_round_trip.remove(threading.current_thread())
            self._round_trips.notify_all()

    def drain(self, lock: object) -> None:
        """Until no other thread is in a renewal round trip of the Lock (it is closed: none
        starts after this).  The calling thread's own is not waited for (an
        ``on_renew_error`` observer closing the Lock runs inside one), nor a thread that is
        not alive (a forked child has none of its parent's threads)."""
        me = threading.current_thread()
        with self._round_trips:
            self._round_trips.wait_for(
                lambda: all(t is me or not t.is_alive() for t in self._in_round_trip)
            )


class Blocked:
    """Connections blocked in a waiter's BLPOP now: close disconnects them, which wakes
    their waiters at once (a shut down socket ends the read)."""

    __slots__ = ("_conns", "_guard")

    def __init__(self) -> None:
        self._conns: set[Any] = set()
        self._guard = threading.Lock()

    def add(self, task: object, conn: Any) -> None:
        if conn is not None:
            with self._guard:
                self._conns.add(conn)

    def discard(self, task: object, conn: Any) -> None:
        if conn is not None:
            with self._guard:
                self._conns.discard(conn)

    def interrupt(self) -> None:
        with self._guard:  # held: a connection is not kept for another block until done
            for conn in self._conns:
                with contextlib.suppress(Exception):
                    conn.disconnect()

    @staticmethod
    def error_of(
        task: object, exc: BaseException, closed: bool, closed_error: LockClosedError
    ) -> BaseException:
        """An error on a closed Lock is close's doing (it cut the block short):
        ``closed_error``."""
        if closed and isinstance(exc, Exception):
            return closed_error
        return exc


# -- connections ------------------------------------------------------------------------------


def call_with_retry(conn: Any, do: Callable[[], object]) -> object:
    return conn.retry.call_with_retry(do, conn.disconnect)


def drop(conn: Any) -> None:
    conn.disconnect()


def give_back(pool: Any, conn: Any) -> None:
    try:
        # As execute_command: a connection a maintenance notification marked is
        # reconnected before it goes back.
        if conn.should_reconnect():
            conn.disconnect()
            conn.connect()
    finally:
        pool.release(conn)


def has_unread(conn: Any) -> bool:
    return bool(conn.can_read())


def blpop(api: Any, conn: Any, request: Block) -> int:
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


# -- holders and bodies -----------------------------------------------------------------------


def holder(key: str) -> threading.Thread:
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


def caller() -> Holder | None:
    """Who holds a read-write lock's section, for its reentry check: the current thread."""
    return threading.current_thread()


def check_body(fn: Callable[..., object]) -> None:
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


def awaitable(fn: object, body: T) -> T:
    """What the body returned, as it is (checked once the lock is released: :func:`returned`)."""
    return body


def returned(fn: object, result: T) -> T:
    """``result``, unless the body returned a coroutine (a lambda around an ``async def``,
    which :func:`check_body` cannot see through): its work would run, if ever, after the
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
