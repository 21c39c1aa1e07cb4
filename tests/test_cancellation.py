"""Interrupting a caller in its retry backoff gives back every lock it had already taken.

A group takes its keys one after another; when a later key is held by another owner the
caller sleeps between attempts.  A ``KeyboardInterrupt`` (sync) or a cancellation (asyncio:
``task.cancel()``, ``asyncio.timeout``) arriving in that sleep must leave as itself, and the
keys taken before it must be released at once, not left in Redis until their TTL.  The TTL
here is a minute, so a key found gone right after the exception was released, not expired.

The interrupt is delivered on an event, never after a sleep: the trace reports the refused
attempt on the contended key, which is the last thing the caller does before it sleeps.
"""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from distlock import Lock, LockGroup, LockHandle
from distlock.asyncio import Lock as AsyncLock
from distlock.asyncio import LockGroup as AsyncLockGroup
from distlock.asyncio import LockHandle as AsyncLockHandle
from tests.redis_server import RedisServer

WAIT = 10.0  # bound on event waits; never a timing assertion
TTL_MS = 60_000  # far beyond the test: a key that is gone was released, not expired
RETRIES = 100  # with RETRY_DELAY_MS, a bound of 30 s should the interrupt never come
RETRY_DELAY_MS = 300
PREFIX = "cx"
OTHER_OWNER = b"another-owners-token"
GENERATOR_EXIT = "generator ignored GeneratorExit"


class RefusedAttempts:
    """A ``trace=`` callable that sets ``refused`` once an attempt on ``key`` is refused."""

    def __init__(self, key: str, on_refused: Callable[[], None]) -> None:
        self.key = key
        self._on_refused = on_refused
        self._clients: dict[str, str] = {}
        self.taken: list[str] = []

    def __call__(self, event: dict[str, Any]) -> None:
        action = event["action"]
        if action == "Acquire":
            self._clients[event["client"]] = event["key"]
        elif action == "AcquireReply":
            key = self._clients.get(event["client"])
            if event["granted"] and key is not None:
                self.taken.append(key)
            elif key == self.key:
                self._on_refused()


class Leftovers:
    """Everything that may carry the "generator ignored GeneratorExit" error: unraisable
    exceptions (a generator closed by the garbage collector), warnings, and the chain of
    the exception the caller saw."""

    def __init__(self) -> None:
        self.unraisable: list[str] = []
        self.warnings: list[str] = []

    def hook(self, args: Any) -> None:
        self.unraisable.append(f"{args.exc_type.__name__}: {args.exc_value} in {args.object!r}")

    def generator_exit_errors(self, exc: BaseException | None) -> list[str]:
        found: list[str] = []
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            texts = [repr(exc), *getattr(exc, "__notes__", [])]
            found += [t for t in texts if GENERATOR_EXIT in t]
            # The traceback keeps the interrupted frames, and with them the dropped flow,
            # alive: let go of it so the collector closes the flow now, under our hook.
            exc.__traceback__ = None
            exc = exc.__cause__ or exc.__context__
        gc.collect()
        found += [u for u in self.unraisable if GENERATOR_EXIT in u]
        found += [w for w in self.warnings if GENERATOR_EXIT in w]
        return found


@pytest.fixture
def leftovers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Leftovers]:
    found = Leftovers()
    monkeypatch.setattr(sys, "unraisablehook", found.hook)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield found
        found.warnings.extend(str(w.message) for w in caught)


def still_in_redis(r: redis.Redis, keys: list[str]) -> dict[str, bytes]:
    values = {key: r.get(key) for key in keys}
    return {key: value for key, value in values.items() if isinstance(value, bytes)}


def verdict(
    r: redis.Redis, leaked: dict[str, bytes], leftovers: Leftovers, exc: BaseException | None
) -> None:
    """``leaked``: the taken keys read right after the exception.  Reported together with
    any GeneratorExit error, so one failure shows both."""
    problems = []
    if leaked:
        problems.append(f"keys taken by the interrupted call are still held: {leaked}")
    errors = leftovers.generator_exit_errors(exc)
    if errors:
        problems.append(f"the dropped flow ignored GeneratorExit: {errors}")
    assert r.get(f"{PREFIX}:b") == OTHER_OWNER, "the other owner's key was disturbed"
    assert not problems, "; ".join(problems)


@pytest.fixture
def contended(r: redis.Redis) -> redis.Redis:
    """``cx:b`` belongs to another owner for the whole test; ``cx:a`` is free."""
    r.set(f"{PREFIX}:b", OTHER_OWNER, px=TTL_MS)
    return r


# -- sync: KeyboardInterrupt in the backoff sleep ---------------------------------------------


def _sync_calls() -> dict[str, Callable[[Lock, Callable[[], None]], object]]:
    def run_many(locks: Lock, body: Callable[[], None]) -> object:
        def fn(group: LockGroup) -> None:
            body()

        return locks.run_many(["b", "a"], fn, retries=RETRIES, retry_delay_ms=RETRY_DELAY_MS)

    def hold_many(locks: Lock, body: Callable[[], None]) -> object:
        with locks.hold_many(["b", "a"], retries=RETRIES, retry_delay_ms=RETRY_DELAY_MS):
            body()
        return None

    def run(locks: Lock, body: Callable[[], None]) -> object:
        def fn(handle: LockHandle) -> None:
            body()

        return locks.run("b", fn, retries=RETRIES, retry_delay_ms=RETRY_DELAY_MS)

    def hold(locks: Lock, body: Callable[[], None]) -> object:
        with locks.hold("b", retries=RETRIES, retry_delay_ms=RETRY_DELAY_MS):
            body()
        return None

    def acquire(locks: Lock, body: Callable[[], None]) -> object:
        return locks.acquire("b", retries=RETRIES, retry_delay_ms=RETRY_DELAY_MS)

    return {"run_many": run_many, "hold_many": hold_many, "run": run, "hold": hold,
            "acquire": acquire}


SYNC_CALLS = _sync_calls()


@pytest.mark.parametrize("call", list(SYNC_CALLS))
def test_keyboard_interrupt_in_backoff_releases_what_was_taken(
    call: str, contended: redis.Redis, leftovers: Leftovers
) -> None:
    r = contended
    main = threading.main_thread()
    assert threading.current_thread() is main, "SIGINT is delivered to the main thread"
    refused = threading.Event()
    trace = RefusedAttempts(f"{PREFIX}:b", refused.set)
    ran: list[int] = []

    def interrupter() -> None:
        # The refusal is traced on the caller's own thread just before it sleeps; a real
        # signal (not interrupt_main) also breaks the sleep itself.
        if refused.wait(WAIT):
            assert main.ident is not None
            signal.pthread_kill(main.ident, signal.SIGINT)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    thread = threading.Thread(target=interrupter, daemon=True)
    try:
        with Lock(r, prefix=PREFIX, ttl_ms=TTL_MS, trace=trace) as locks:
            thread.start()
            with pytest.raises(KeyboardInterrupt) as info:
                SYNC_CALLS[call](locks, lambda: ran.append(1))
            leaked = still_in_redis(r, trace.taken)
            caught: BaseException | None = info.value
            del info
            assert refused.is_set()
            assert ran == []
            verdict(r, leaked, leftovers, caught)
    finally:
        thread.join(WAIT)
        signal.signal(signal.SIGINT, previous)


# -- asyncio: task.cancel() and asyncio.timeout in the backoff sleep --------------------------


AsyncBody = Callable[[], Awaitable[None]]


def _async_calls() -> dict[str, Callable[[AsyncLock, AsyncBody], Awaitable[object]]]:
    def opts() -> dict[str, Any]:
        return {"retries": RETRIES, "retry_delay_ms": RETRY_DELAY_MS}

    async def run_many(locks: AsyncLock, body: AsyncBody) -> object:
        async def fn(group: AsyncLockGroup) -> None:
            await body()

        return await locks.run_many(["b", "a"], fn, **opts())

    async def hold_many(locks: AsyncLock, body: AsyncBody) -> object:
        holding: AbstractAsyncContextManager[AsyncLockGroup] = locks.hold_many(["b", "a"], **opts())
        async with holding:
            await body()
        return None

    async def run(locks: AsyncLock, body: AsyncBody) -> object:
        async def fn(handle: AsyncLockHandle) -> None:
            await body()

        return await locks.run("b", fn, **opts())

    async def hold(locks: AsyncLock, body: AsyncBody) -> object:
        async with locks.hold("b", **opts()):
            await body()
        return None

    async def acquire(locks: AsyncLock, body: AsyncBody) -> object:
        return await locks.acquire("b", **opts())

    return {"run_many": run_many, "hold_many": hold_many, "run": run, "hold": hold,
            "acquire": acquire}


ASYNC_CALLS = _async_calls()


async def _interrupted(
    redis_server: RedisServer, r: redis.Redis, call: str, how: str
) -> tuple[dict[str, bytes], BaseException | None, list[int]]:
    """Run ``call`` in a task and interrupt it (``how``) once its attempt on the contended
    key is refused; returns the keys it took that were still in Redis the moment it
    ended, what it raised, and whether the body ran."""
    refused = asyncio.Event()
    trace = RefusedAttempts(f"{PREFIX}:b", refused.set)
    ran: list[int] = []

    async def body() -> None:
        ran.append(1)

    client = aredis.Redis(port=redis_server.port)
    locks = AsyncLock(client, prefix=PREFIX, ttl_ms=TTL_MS, trace=trace)
    deadline: list[asyncio.Timeout] = []

    async def caller() -> object:
        if how == "cancel":
            return await ASYNC_CALLS[call](locks, body)
        async with asyncio.timeout(None) as cm:  # armed below, once the caller is in backoff
            deadline.append(cm)
            return await ASYNC_CALLS[call](locks, body)

    task = asyncio.create_task(caller())
    raised: BaseException | None = None
    leaked: dict[str, bytes] = {}
    try:
        # The trace runs inside the task, which then awaits its backoff sleep: by the time
        # this wakes up, the task is parked in that sleep.
        await asyncio.wait_for(refused.wait(), WAIT)
        if how == "cancel":
            task.cancel()
        else:
            deadline[0].reschedule(asyncio.get_running_loop().time())
        try:
            await asyncio.wait_for(asyncio.shield(task), WAIT)
        except BaseException as exc:  # the test inspects whatever left the task
            raised = exc
        leaked = still_in_redis(r, trace.taken)  # before aclose(), which waits for releases
    finally:
        if not task.done():
            task.cancel()
        await locks.aclose()
        await client.aclose()
    return leaked, raised, ran


@pytest.mark.parametrize("how", ["cancel", "timeout"])
@pytest.mark.parametrize("call", list(ASYNC_CALLS))
def test_cancellation_in_backoff_releases_what_was_taken(
    call: str, how: str, redis_server: RedisServer, contended: redis.Redis, leftovers: Leftovers
) -> None:
    r = contended
    leaked, raised, ran = asyncio.run(_interrupted(redis_server, r, call, how))
    expected: type[BaseException] = asyncio.CancelledError if how == "cancel" else TimeoutError
    assert type(raised) is expected, f"expected {expected.__name__}, got {raised!r}"
    assert ran == []
    verdict(r, leaked, leftovers, raised)

