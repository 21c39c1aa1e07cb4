"""Rules of the public API that a user meets directly, for both drivers, against a real
redis-server: how a call's waiting options replace the constructor's, what a reentrant
level may do at the outermost exit, where a sync ReentrantLock may run, what ``run``
accepts as a body, and which ids and prefixes are refused before anything is sent."""

from __future__ import annotations

import asyncio
import functools
import inspect
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator
from typing import Any, TypeAlias, TypeVar

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import LockNotAcquiredError, UsageError, ValidationError
from tests.redis_server import RedisServer

T = TypeVar("T")
#: A constructor's long wait: a call that failed to replace it would block this long.
LONG_WAIT_MS = 2_000


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(30):
            return await fn()

    return asyncio.run(main())


#: Any primitive of each driver: a Semaphore or a ReentrantLock is no Lock.
SyncPrimitive: TypeAlias = distlock.Lock | distlock.ReentrantLock | distlock.Semaphore
AsyncPrimitive: TypeAlias = (
    distlock.asyncio.Lock | distlock.asyncio.ReentrantLock | distlock.asyncio.Semaphore
)


def _sync_primitive(kind: str, client: Any, **options: Any) -> SyncPrimitive:
    if kind == "semaphore":
        return distlock.Semaphore(client, limit=1, **options)
    if kind == "reentrant":
        return distlock.ReentrantLock(client, **options)
    return distlock.Lock(client, **options)


def _async_primitive(kind: str, client: Any, **options: Any) -> AsyncPrimitive:
    if kind == "semaphore":
        return distlock.asyncio.Semaphore(client, limit=1, **options)
    if kind == "reentrant":
        return distlock.asyncio.ReentrantLock(client, **options)
    return distlock.asyncio.Lock(client, **options)


KINDS = ["lock", "reentrant", "semaphore"]
#: (primitive, how the lock is taken): only a Lock takes several keys at once.
CALLS = [(kind, how) for kind in KINDS for how in ("acquire", "hold", "run")] + [
    ("lock", "run_many")
]


#: The primitives whose run takes a body, and "many": a Lock's run_many.
BODY_KINDS = [*KINDS, "many"]


def _enter(locks: SyncPrimitive, id: str) -> None:
    """Enter and leave ``locks.hold(id)``."""
    with locks.hold(id):
        pass


async def _aenter(locks: AsyncPrimitive, id: str) -> None:
    async with locks.hold(id):
        pass


def _run_body(locks: SyncPrimitive, kind: str, fn: Any) -> Any:
    """``fn`` run under ``locks`` by ``run``, or by ``run_many`` for the kind "many"."""
    if kind == "many":
        assert isinstance(locks, distlock.Lock)
        return locks.run_many(["a", "b"], fn)
    return locks.run("k", fn)


async def _arun_body(locks: AsyncPrimitive, kind: str, fn: Any) -> Any:
    if kind == "many":
        assert isinstance(locks, distlock.asyncio.Lock)
        return await locks.run_many(["a", "b"], fn)
    return await locks.run("k", fn)


class Recorder:
    """The trace of a Lock: every transition, by action."""

    def __init__(self) -> None:
        self.actions: list[str] = []

    def __call__(self, transition: dict[str, Any]) -> None:
        self.actions.append(transition["action"])

    def count(self, action: str) -> int:
        return self.actions.count(action)


@pytest.fixture
def url(redis_server: RedisServer, r: redis.Redis) -> str:
    """The server's URL, its data flushed (by ``r``)."""
    return redis_server.url


# -- 1. a call's waiting options replace the constructor's as a whole ----------------------

#: (constructor's waiting options, the call's): the call asks to fail fast each time.
FAIL_FAST_CALLS = [
    ({"retries": 3, "retry_delay_ms": 1}, {"wait_ms": 0}),
    ({"retries": 3, "retry_delay_ms": 1}, {"retry_delay_ms": 1}),
    ({"wait_ms": LONG_WAIT_MS}, {"retries": 0}),
    ({"wait_ms": LONG_WAIT_MS}, {"retry_delay_ms": 5}),
]


def _sync_try(locks: SyncPrimitive, how: str, call: dict[str, Any]) -> bool:
    """Whether the call got the lock, taken by ``how``."""
    if how == "acquire":
        handle = locks.acquire("k", **call)
        if handle is None:
            return False
        handle.release()
        return True
    try:
        if how == "hold":
            with locks.hold("k", **call):
                pass
        elif how == "run":
            locks.run("k", lambda h: None, **call)
        else:
            assert isinstance(locks, distlock.Lock)
            locks.run_many(["k", "other"], lambda g: None, **call)
    except LockNotAcquiredError:
        return False
    return True


@pytest.mark.parametrize(("kind", "how"), CALLS)
@pytest.mark.parametrize(("made", "call"), FAIL_FAST_CALLS)
def test_sync_call_waiting_options_replace_the_constructors(
    url: str, kind: str, how: str, made: dict[str, Any], call: dict[str, Any]
) -> None:
    trace = Recorder()
    client = redis.Redis.from_url(url)
    with _sync_primitive(kind, client, prefix="rules-wait") as holder, _sync_primitive(
        kind, client, prefix="rules-wait", trace=trace, **made
    ) as locks:
        held = holder.acquire("k")
        assert held is not None
        try:
            assert not _sync_try(locks, how, call)
        finally:
            held.release()
    # One attempt, refused; no retry and no block in the queue.
    assert trace.count("AcquireReply") == 1
    assert trace.count("Block") == 0
    client.close()


async def _async_try(locks: AsyncPrimitive, how: str, call: dict[str, Any]) -> bool:
    async def body(_: object) -> None:
        return None

    if how == "acquire":
        handle = await locks.acquire("k", **call)
        if handle is None:
            return False
        await handle.release()
        return True
    try:
        if how == "hold":
            async with locks.hold("k", **call):
                pass
        elif how == "run":
            await locks.run("k", body, **call)
        else:
            assert isinstance(locks, distlock.asyncio.Lock)
            await locks.run_many(["k", "other"], body, **call)
    except LockNotAcquiredError:
        return False
    return True


@pytest.mark.parametrize(("kind", "how"), CALLS)
@pytest.mark.parametrize(("made", "call"), FAIL_FAST_CALLS)
def test_async_call_waiting_options_replace_the_constructors(
    url: str, kind: str, how: str, made: dict[str, Any], call: dict[str, Any]
) -> None:
    trace = Recorder()

    async def main() -> bool:
        client = aredis.Redis.from_url(url)
        try:
            async with _async_primitive(
                kind, client, prefix="rules-wait"
            ) as holder, _async_primitive(
                kind, client, prefix="rules-wait", trace=trace, **made
            ) as locks:
                held = await holder.acquire("k")
                assert held is not None
                try:
                    return await _async_try(locks, how, call)
                finally:
                    await held.release()
        finally:
            await client.aclose()

    assert not arun(main)
    assert trace.count("AcquireReply") == 1
    assert trace.count("Block") == 0


def test_what_a_waiting_call_leaves_out_is_the_default_not_the_constructors(url: str) -> None:
    client = redis.Redis.from_url(url)
    with distlock.Lock(client, prefix="rules-wait", retries=5, retry_delay_ms=7) as locks:
        for _ in range(2):  # the second time from the options kept for these keywords
            handle = locks.acquire("free", retries=1)
            assert handle is not None
            config = handle._section.config
            assert (config.retries, config.retry_delay_ms, config.wait_ms) == (1, 100, 0)
            assert handle.release()
        # Options that say nothing of waiting keep the constructor's waiting.
        handle = locks.acquire("free", ttl_ms=5_000)
        assert handle is not None
        config = handle._section.config
        assert (config.retries, config.retry_delay_ms, config.ttl_ms) == (5, 7, 5_000)
        assert handle.release()
        assert (locks.defaults.retries, locks.defaults.retry_delay_ms) == (5, 7)
    client.close()


# -- 2. the outermost hold's exit with an inner level open --------------------------------


def test_sync_outermost_hold_exit_with_an_inner_level_open_is_refused(
    url: str, r: redis.Redis
) -> None:
    client = redis.Redis.from_url(url)
    with distlock.ReentrantLock(client, prefix="rules-rl") as locks:
        levels: list[distlock.ReentrantHandle] = []

        def leave_an_inner_level_open() -> None:
            with locks.hold("k") as outer:
                levels.append(outer)
                inner = locks.acquire("k")
                assert inner is not None and inner.depth == 2
                levels.append(inner)

        with pytest.raises(UsageError, match=r"level 2\b.*release the inner"):
            leave_an_inner_level_open()
        outer, inner = levels
        # Nothing was freed: the key is ours, its renewal still armed, nothing signalled.
        assert outer.held and inner.held
        assert r.hget("rules-rl:k", outer.token) == b"2"
        assert outer._armed_at is not None
        assert not outer.signal.aborted
        # Still this thread's: a re-entry, not a refusal.
        again = locks.acquire("k")
        assert again is not None and again.depth == 3
        assert again.release()
        # What the message says to do frees the key.
        assert inner.release()
        assert outer.release()
        assert r.exists("rules-rl:k") == 0
        assert outer._armed_at is None
    client.close()


def test_sync_outermost_run_exit_with_an_inner_level_open_is_refused(
    url: str, r: redis.Redis
) -> None:
    client = redis.Redis.from_url(url)
    with distlock.ReentrantLock(client, prefix="rules-rl") as locks:
        levels: list[distlock.ReentrantHandle] = []

        def body(handle: distlock.ReentrantHandle) -> None:
            levels.append(handle)
            inner = locks.acquire("k")
            assert inner is not None
            levels.append(inner)

        with pytest.raises(UsageError, match="still open"):
            locks.run("k", body)
        outer, inner = levels
        assert r.exists("rules-rl:k") == 1 and outer.held
        assert inner.release() and outer.release()
        assert r.exists("rules-rl:k") == 0
    client.close()


def test_async_outermost_hold_exit_with_an_inner_level_open_is_refused(
    url: str, r: redis.Redis
) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with distlock.asyncio.ReentrantLock(client, prefix="rules-rl") as locks:
                levels: list[distlock.asyncio.ReentrantHandle] = []

                async def leave_an_inner_level_open() -> None:
                    async with locks.hold("k") as outer:
                        levels.append(outer)
                        inner = await locks.acquire("k")
                        assert inner is not None and inner.depth == 2
                        levels.append(inner)

                with pytest.raises(UsageError, match=r"level 2\b.*release the inner"):
                    await leave_an_inner_level_open()
                outer, inner = levels
                assert outer.held and inner.held
                assert await client.hget("rules-rl:k", outer.token) == b"2"
                assert outer._armed_at is not None
                assert not outer.signal.aborted
                # The block is over: a loss now would have no body to cancel.
                assert outer._holding is None
                assert await inner.release()
                assert await outer.release()
                assert await client.exists("rules-rl:k") == 0
                assert outer._armed_at is None
        finally:
            await client.aclose()

    arun(main)


def test_async_outermost_run_exit_with_an_inner_level_open_is_refused(
    url: str, r: redis.Redis
) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with distlock.asyncio.ReentrantLock(client, prefix="rules-rl") as locks:
                levels: list[distlock.asyncio.ReentrantHandle] = []

                async def body(handle: distlock.asyncio.ReentrantHandle) -> None:
                    levels.append(handle)
                    inner = await locks.acquire("k")
                    assert inner is not None
                    levels.append(inner)

                with pytest.raises(UsageError, match="still open"):
                    await locks.run("k", body)
                outer, inner = levels
                assert await client.exists("rules-rl:k") == 1 and outer.held
                assert await inner.release() and await outer.release()
                assert await client.exists("rules-rl:k") == 0
        finally:
            await client.aclose()

    arun(main)


# -- 3. a sync ReentrantLock in an event loop's thread -------------------------------------


def test_sync_reentrant_lock_is_refused_in_an_event_loops_thread(
    url: str, r: redis.Redis
) -> None:
    client = redis.Redis.from_url(url)
    trace = Recorder()
    with distlock.ReentrantLock(client, prefix="rules-loop", trace=trace) as locks:

        async def main() -> None:
            with pytest.raises(UsageError, match=r"distlock\.asyncio\.ReentrantLock"):
                locks.acquire("k")
            with pytest.raises(UsageError, match=r"distlock\.asyncio\.ReentrantLock"):
                _enter(locks, "k")
            with pytest.raises(UsageError, match=r"distlock\.asyncio\.ReentrantLock"):
                locks.run("k", lambda h: None)
            # Off the loop's thread, the holder is that thread, as anywhere else.
            assert await asyncio.to_thread(locks.run, "k", lambda h: h.depth) == 1

        arun(main)
        assert trace.actions.count("Acquire") == 1  # the one from the worker thread
        assert r.exists("rules-loop:k") == 0
        # Outside a loop, as before.
        assert locks.run("k", lambda h: h.depth) == 1
    client.close()


def test_two_tasks_cannot_share_a_sync_reentrant_lock_through_their_thread(url: str) -> None:
    """What the refusal prevents: a second task, while the first holds the key, taken
    for a re-entry of the first and let in beside it."""
    client = redis.Redis.from_url(url)
    with distlock.ReentrantLock(client, prefix="rules-loop") as locks:
        inside = asyncio.Event()
        done = asyncio.Event()
        entered: list[tuple[str, int]] = []

        async def first() -> None:
            try:
                with locks.hold("k") as handle:
                    entered.append(("first", handle.depth))
                    inside.set()
                    await done.wait()  # holding the key while the second task tries
            finally:
                inside.set()

        async def second() -> None:
            await inside.wait()
            try:
                with locks.hold("k") as handle:
                    entered.append(("second", handle.depth))
            finally:
                done.set()

        async def main() -> list[BaseException | None]:
            results = await asyncio.gather(first(), second(), return_exceptions=True)
            return list(results)

        results = arun(main)
        assert entered == []
        assert all(isinstance(result, UsageError) for result in results)
    client.close()


def test_a_sync_lock_in_an_event_loops_thread_is_left_alone(url: str) -> None:
    client = redis.Redis.from_url(url)
    with distlock.Lock(client, prefix="rules-loop") as locks:

        async def main() -> int:
            return locks.run("k", lambda h: 7)

        assert arun(main) == 7
    client.close()


# -- 4. a sync run whose body returns a coroutine ------------------------------------------


async def _work(handle: object) -> str:
    return "never awaited"


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_sync_run_refuses_a_body_returning_a_coroutine(
    url: str, r: redis.Redis, kind: str
) -> None:
    client = redis.Redis.from_url(url)
    made: list[Coroutine[Any, Any, str]] = []

    def body(handle: object) -> Coroutine[Any, Any, str]:
        made.append(_work(handle))
        return made[-1]

    with _sync_primitive(
        "lock" if kind == "many" else kind, client, prefix="rules-body"
    ) as locks:
        with pytest.raises(ValidationError, match="returned a coroutine"):
            _run_body(locks, kind, body)
        # Released, and the coroutine closed without running (no "never awaited").
        assert r.keys("rules-body:*") == []
        assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
        # The lock is free for the next caller.
        assert locks.run("k", lambda h: "ok") == "ok"
    client.close()


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_sync_run_refuses_an_async_def_body_before_any_command(
    url: str, kind: str
) -> None:
    client = redis.Redis.from_url(url)
    trace = Recorder()

    async def body(handle: object) -> None:
        return None

    async def agen(handle: object) -> Any:
        yield handle

    with _sync_primitive(
        "lock" if kind == "many" else kind, client, prefix="rules-body", trace=trace
    ) as locks:
        for fn in (body, functools.partial(body), agen, 42):
            with pytest.raises(ValidationError):
                _run_body(locks, kind, fn)
    assert trace.actions == []
    client.close()


# -- 5. an asyncio run given a body that gives nothing to await ----------------------------


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_async_run_refuses_what_certainly_gives_nothing_to_await_before_any_command(
    url: str, kind: str
) -> None:
    trace = Recorder()

    def gen(handle: object) -> Iterator[object]:
        yield handle

    async def agen(handle: object) -> Any:
        yield handle

    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with _async_primitive(
                "lock" if kind == "many" else kind, client, prefix="rules-abody", trace=trace
            ) as locks:
                for fn in (gen, agen, functools.partial(agen), 42):
                    with pytest.raises(ValidationError):
                        await _arun_body(locks, kind, fn)
        finally:
            await client.aclose()

    arun(main)
    assert trace.actions == []


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_async_run_refuses_a_plain_result_after_releasing(
    url: str, r: redis.Redis, kind: str
) -> None:
    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with _async_primitive(
                "lock" if kind == "many" else kind, client, prefix="rules-abody"
            ) as locks:
                with pytest.raises(ValidationError, match="not an awaitable"):
                    await _arun_body(locks, kind, lambda h: 42)
                assert await client.keys("rules-abody:*") == []
        finally:
            await client.aclose()

    arun(main)


class _Service:
    async def work(self, handle: object, suffix: str = "") -> str:
        return f"method{suffix}"


@pytest.mark.parametrize("kind", BODY_KINDS)
def test_async_run_still_takes_every_form_of_async_body(url: str, kind: str) -> None:
    async def body(handle: object, suffix: str = "") -> str:
        await asyncio.sleep(0)
        return f"body{suffix}"

    def plain_returning_a_coroutine(handle: object) -> Awaitable[str]:
        return body(handle, "+plain")

    def plain_returning_a_future(handle: object) -> Awaitable[str]:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        future.set_result("future")
        return future

    @types.coroutine
    def generator_based(handle: object) -> Generator[Any, None, str]:
        yield from ()  # a generator, made awaitable by types.coroutine
        return "legacy"

    service = _Service()
    bodies: list[tuple[Callable[[Any], Awaitable[str]], str]] = [
        (body, "body"),
        (functools.partial(body, suffix="+partial"), "body+partial"),
        (functools.partial(functools.partial(body), suffix="+2"), "body+2"),
        (lambda h: body(h, "+lambda"), "body+lambda"),
        (plain_returning_a_coroutine, "body+plain"),
        (plain_returning_a_future, "future"),
        (generator_based, "legacy"),
        (service.work, "method"),
        (functools.partial(service.work, suffix="+p"), "method+p"),
    ]

    async def main() -> list[str]:
        client = aredis.Redis.from_url(url)
        got = []
        try:
            async with _async_primitive(
                "lock" if kind == "many" else kind, client, prefix="rules-abody"
            ) as locks:
                for fn, _ in bodies:
                    got.append(await _arun_body(locks, kind, fn))
        finally:
            await client.aclose()
        return got

    assert arun(main) == [want for _, want in bodies]


# -- 6. an id that cannot be sent ----------------------------------------------------------

BAD_IDS = ["a\ud800", "\udcff", "x\udfff\ud800y"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", BAD_IDS)
def test_sync_unencodable_id_is_a_validation_error_before_any_command(
    url: str, r: redis.Redis, kind: str, bad: str
) -> None:
    trace = Recorder()
    client = redis.Redis.from_url(url, decode_responses=True)
    with _sync_primitive(kind, client, prefix="rules-id", trace=trace) as locks:
        with pytest.raises(ValidationError, match="UTF-8"):
            locks.acquire(bad)
        with pytest.raises(ValidationError, match="UTF-8"):
            _enter(locks, bad)
        with pytest.raises(ValidationError, match="UTF-8"):
            locks.run(bad, lambda h: None)
        with pytest.raises(ValidationError, match="UTF-8"):
            locks.key(bad)
        if isinstance(locks, distlock.Lock):
            with pytest.raises(ValidationError, match="UTF-8"):
                locks.run_many(["ok", bad], lambda g: None)
        # A non-ASCII id that is valid text is a key as any other.
        assert locks.run("caf\u00e9", lambda h: h.key) == "rules-id:caf\u00e9"
    assert trace.count("Acquire") == 1  # that one lock's, the only command sent
    assert r.keys("rules-id:*") == []
    client.close()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bad", BAD_IDS)
def test_async_unencodable_id_is_a_validation_error_before_any_command(
    url: str, r: redis.Redis, kind: str, bad: str
) -> None:
    trace = Recorder()

    async def body(handle: object) -> None:
        return None

    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with _async_primitive(kind, client, prefix="rules-id", trace=trace) as locks:
                with pytest.raises(ValidationError, match="UTF-8"):
                    await locks.acquire(bad)
                with pytest.raises(ValidationError, match="UTF-8"):
                    await _aenter(locks, bad)
                with pytest.raises(ValidationError, match="UTF-8"):
                    await locks.run(bad, body)
                if isinstance(locks, distlock.asyncio.Lock):
                    with pytest.raises(ValidationError, match="UTF-8"):
                        await locks.run_many(["ok", bad], body)
        finally:
            await client.aclose()

    arun(main)
    assert trace.actions == []
    assert r.dbsize() == 0


def test_unencodable_prefix_is_refused_at_construction() -> None:
    for make in (
        lambda: distlock.Lock("redis://127.0.0.1:1", prefix="p\ud800"),
        lambda: distlock.Semaphore("redis://127.0.0.1:1", limit=1, prefix="p\ud800"),
        lambda: distlock.asyncio.ReentrantLock("redis://127.0.0.1:1", prefix="\udc80"),
    ):
        with pytest.raises(ValidationError, match="UTF-8"):
            make()


# -- 7. a prefix among distlock's own keys -------------------------------------------------

INTERNAL_PREFIXES = ["distlock", "distlock:fence", "distlock:queue:{x}", "distlock:"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("prefix", INTERNAL_PREFIXES)
def test_a_prefix_among_distlocks_own_keys_is_refused(kind: str, prefix: str) -> None:
    url = "redis://127.0.0.1:1"  # never connected to: refused before
    with pytest.raises(ValidationError, match="distlock keeps its own keys"):
        _sync_primitive(kind, url, prefix=prefix)
    with pytest.raises(ValidationError, match="distlock keeps its own keys"):
        _async_primitive(kind, url, prefix=prefix)


def test_the_default_prefix_and_lookalikes_are_accepted(url: str) -> None:
    assert distlock.Lock(url).prefix == "lock"
    assert distlock.Semaphore(url, limit=1).prefix == "sem"
    client = redis.Redis.from_url(url)
    for prefix in ("distlocks", "my-distlock", "Distlock", "app:distlock"):
        with distlock.Lock(client, prefix=prefix) as locks:
            assert locks.run("k", lambda h: h.key) == f"{prefix}:k"
    client.close()

