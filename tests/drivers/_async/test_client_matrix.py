"""The contract of every primitive, on every way users build their clients, on both drivers.

Each case runs for Lock, ReentrantLock and Semaphore (limit 1), on each client of
:mod:`tests.client_matrix`, against one real redis-server: fail fast (acquire, refuse,
release), a renewal while ``hold``'s and ``run``'s body runs, a waiter blocked behind a
holder and handed the lock by its release, and a key deleted under its holder firing the
signal.  A long wait (longer than redis-py 8's hidden 5 s socket timeout) runs on the
default ``from_url`` client and on a URL handed to the Lock.  The ReadWriteLock runs the
same contract, for both of its sides, on the clients whose replies differ in shape (a URL
it owns, the defaults of ``from_url``, ``decode_responses``, RESP3).  A leader election
runs on every client too, its observer on a pub/sub of that client (the restricted user
is docs/acl.md's ``elector``).  (Asyncio's cancelled waiter:
``tests/drivers/test_client_matrix_asyncio.py``.)
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from distlock import Leader, LockLeaseLostError, LockNotAcquiredError
from distlock.asyncio import (
    Election,
    Leadership,
    Lock,
    LockHandle,
    ReadWriteLock,
    ReentrantLock,
    RoleHandle,
    Semaphore,
)
from distlock.errors import LossReason
from distlock.events import Renewed
from tests.client_matrix import (
    BY_NAME,
    CONFIGS,
    PREFIX,
    ClientConfig,
    Endpoint,
    leaves_nothing,
    queues,
)
from tests.redis_server import RedisServer

from .concurrency import UNCANCELLED, Event, Task, made_client, signalled, sleep, spawn, until

KINDS = ("lock", "reentrant", "semaphore")
#: A short lease, so that a renewal (every ttl/4) comes within a case, with room for a
#: renewal a loaded machine sends late (at 300 ms, one 220 ms late loses the lease).
SHORT_TTL_MS = 600
#: Long enough that nothing here waits it out: only a release ends a wait.
LONG_MS = 30_000


@pytest.fixture(scope="module")
def endpoint(redis_server: RedisServer) -> Iterator[Endpoint]:
    made = Endpoint(redis_server)
    yield made
    made.close()


@pytest.fixture
def admin(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis.Redis(host=redis_server.host, port=redis_server.port)
    yield client
    client.close()


@pytest.fixture(params=CONFIGS, ids=[c.name for c in CONFIGS])
def config(request: pytest.FixtureRequest) -> ClientConfig:
    chosen: ClientConfig = request.param
    return chosen


@pytest.fixture(params=KINDS)
def kind(request: pytest.FixtureRequest) -> str:
    chosen: str = request.param
    return chosen


@pytest.fixture
def key_id() -> str:
    return uuid.uuid4().hex


def primitive(kind: str, client: Any, **options: Any) -> Any:
    if kind == "semaphore":
        return Semaphore(client, prefix=PREFIX[kind], limit=1, **options)
    cls = ReentrantLock if kind == "reentrant" else Lock
    return cls(client, prefix=PREFIX[kind], **options)


async def start_waiting(admin: redis.Redis, key: str, fn: Any, *args: Any, **kw: Any) -> Task[Any]:
    """Start ``fn(*args, **kw)`` concurrently and return once its place is in ``key``'s
    queue; a call that ends first (an error, a grant) is reported at once, not after a
    time-out."""
    waiter = spawn(fn, *args, **kw)
    await until(lambda: admin.exists(*queues(key)) or waiter.done(), f"a waiter queued on {key}")
    if waiter.done():
        pytest.fail(f"the waiter returned without waiting: {await waiter.result()!r}")
    return waiter


def no_lock_for(outcomes: dict[str, object], handle_type: type) -> None:
    """Fail, naming each config whose waiter did not get the lock and what it got instead
    (the first error chained, for its traceback)."""
    failed = {n: o for n, o in outcomes.items() if not isinstance(o, handle_type)}
    if failed:
        said = "; ".join(
            f"{n}: {type(o).__module__}.{type(o).__name__}: {o}" for n, o in failed.items()
        )
        errors = [o for o in failed.values() if isinstance(o, BaseException)]
        raise AssertionError(f"waiters that did not get the lock: {said}") from (
            errors[0] if errors else None
        )


async def test_fail_fast(
    config: ClientConfig, kind: str, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    client, close = made_client(config, endpoint.url(config, kind))
    try:
        async with primitive(kind, client) as mine, primitive(kind, client) as other:
            handle = await mine.acquire(key_id)
            assert handle is not None and handle.held
            assert kind == "semaphore" or handle.fence >= 1
            # Another holder (another object: a reentrant lock's re-entry is per object).
            assert await other.acquire(key_id) is None
            with pytest.raises(LockNotAcquiredError) as refused:
                async with other.hold(key_id):
                    pytest.fail("the body must not run while another holds the key")
            assert refused.value.key == handle.key
            assert await handle.release() is True
            assert await handle.release() is False
            leaves_nothing(admin, handle.key)
            again = await other.acquire(key_id)
            assert again is not None and await again.release() is True
    finally:
        await close()


async def test_hold_and_run_are_renewed(
    config: ClientConfig, kind: str, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    renewed = Event()

    def observe(event: object) -> None:
        if isinstance(event, Renewed):
            renewed.set()

    async def body(handle: Any) -> str:
        await renewed.wait()  # "no renewal while the body ran" otherwise
        assert handle.held
        return str(handle.key)

    client, close = made_client(config, endpoint.url(config, kind))
    try:
        async with primitive(kind, client, ttl_ms=SHORT_TTL_MS, observers=[observe]) as p:
            async with p.hold(key_id) as handle:
                key = await body(handle)
            renewed.clear()
            assert await p.run(key_id, body) == key
        leaves_nothing(admin, key)
    finally:
        await close()


async def test_a_waiter_is_handed_the_lock(
    config: ClientConfig, kind: str, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    client, close = made_client(config, endpoint.url(config, kind))
    try:
        async with primitive(kind, client) as mine, primitive(kind, client) as other:
            holder = await mine.acquire(key_id)
            assert holder is not None
            waiter = await start_waiting(
                admin, holder.key, other.acquire, key_id, wait_ms=LONG_MS
            )
            assert await holder.release() is True
            handle = await waiter.result()
            assert handle is not None and handle.held
            assert await handle.release() is True
            leaves_nothing(admin, holder.key)
    finally:
        await close()


async def test_a_key_deleted_under_its_holder_fires_the_signal(
    config: ClientConfig, kind: str, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    client, close = made_client(config, endpoint.url(config, kind))
    try:
        async with primitive(kind, client, ttl_ms=SHORT_TTL_MS) as p:
            held: list[Any] = []

            async def section() -> None:
                async with p.hold(key_id, **UNCANCELLED) as handle:
                    held.append(handle)
                    admin.delete(handle.key)
                    await signalled(handle.signal)  # "the loss was never signalled" otherwise

            with pytest.raises(LockLeaseLostError) as lost:
                await section()
            assert lost.value.reason is LossReason.RENEW_REJECTED
            assert held[0].signal.aborted
            assert held[0].signal.reason is lost.value
    finally:
        await close()


@pytest.mark.parametrize("names", [("from_url", "url")])
async def test_a_wait_longer_than_the_default_socket_timeout(
    names: tuple[str, ...], endpoint: Endpoint, admin: redis.Redis
) -> None:
    """A waiter blocked for more than redis-py 8's default 5 s socket timeout still gets the
    lock; the two configs wait side by side, so the case costs one such wait."""
    made = {name: made_client(BY_NAME[name], endpoint.url(BY_NAME[name], "lock")) for name in names}
    key_id = uuid.uuid4().hex
    locks = {name: Lock(client, prefix="orders") for name, (client, _) in made.items()}
    holders = {}
    waiters = {}
    for name in names:
        holder = await locks[name].acquire(f"{key_id}-{name}")
        assert holder is not None
        holders[name] = holder
        waiters[name] = await start_waiting(
            admin, holder.key, locks[name].acquire, f"{key_id}-{name}", wait_ms=LONG_MS
        )
    # The scenario: the holders keep the lock 6 s while the waiters block.
    await sleep(6)
    outcomes: dict[str, object] = {}
    released: dict[str, bool] = {}
    for name in names:
        assert await holders[name].release() is True
        try:
            got = outcomes[name] = await waiters[name].result()
        except BaseException as exc:  # reported per config below
            outcomes[name] = exc
        else:
            if isinstance(got, LockHandle):
                released[name] = await got.release()
    for name, (_, close) in made.items():
        await locks[name].aclose()
        await close()
    no_lock_for(outcomes, LockHandle)
    assert released == dict.fromkeys(names, True)
    for handle in outcomes.values():
        assert isinstance(handle, LockHandle)
        leaves_nothing(admin, handle.key)


# -- the leader election ------------------------------------------------------------------


@pytest.fixture
def notifying(admin: redis.Redis) -> Iterator[None]:
    """Keyspace notifications on the server while the case runs (observe() hears them)."""
    admin.config_set("notify-keyspace-events", "Kghx")
    yield
    admin.config_set("notify-keyspace-events", "")


async def test_an_election(
    config: ClientConfig, endpoint: Endpoint, key_id: str, admin: redis.Redis, notifying: None
) -> None:
    """A campaign renewed, one refused, a waiting candidate handed the lease, leader()'s
    reply read, a deletion under the leader signalled, and observe() hearing each change
    on Redis's word (it polls once a minute), through a pub/sub of the client's kind."""
    renewed = Event()

    def renewal(event: object) -> None:
        if isinstance(event, Renewed):
            renewed.set()

    seen: list[Leader | None] = []
    news = Event()

    async def yielded(count: int) -> Leader | None:
        while len(seen) < count:
            await news.wait()
            news.clear()
        return seen[count - 1]

    client, close = made_client(config, endpoint.url(config, "election"))
    try:
        options: Any = {"ttl_ms": SHORT_TTL_MS}
        async with (
            Election(client, key_id, identity="a", observers=[renewal], **options) as a,
            Election(client, key_id, identity="b", **options) as b,
            Election(client, key_id, identity="w") as watcher,
        ):

            async def observe() -> None:
                async for now in watcher.observe(poll_ms=LONG_MS):
                    seen.append(now)
                    news.set()

            observer = spawn(observe)
            assert await yielded(1) is None
            first = await a.campaign(wait_ms=0)
            assert isinstance(first, Leadership) and first.fence >= 1
            await renewed.wait()  # "never renewed" otherwise
            assert first.is_leader
            assert await b.campaign(wait_ms=0) is None
            now = await b.leader()
            assert now is not None and (now.identity, now.fence) == ("a", first.fence)
            assert 0 < now.ttl_ms <= SHORT_TTL_MS
            now = await yielded(2)
            assert now is not None and (now.identity, now.fence) == ("a", first.fence)
            waiting = await start_waiting(admin, a.key, b.campaign, wait_ms=LONG_MS)
            assert await first.resign() is True
            second = await waiting.result()
            assert isinstance(second, Leadership) and second.fence > first.fence
            now = await yielded(3)
            assert now is not None and (now.identity, now.fence) == ("b", second.fence)
            admin.delete(a.key)  # the lease taken away under its leader
            await signalled(second.signal)
            assert not second.is_leader and await second.resign() is False
            assert await yielded(4) is None
            await watcher.aclose()
            await observer.result()
        leaves_nothing(admin, a.key)
    finally:
        await close()


# -- the read-write lock ------------------------------------------------------------------

#: The clients whose replies differ in shape, and the URL the read-write lock owns.
RW_CONFIGS = [BY_NAME[name] for name in ("url", "from_url", "decode", "resp3")]


@pytest.fixture(params=RW_CONFIGS, ids=[c.name for c in RW_CONFIGS])
def rw_config(request: pytest.FixtureRequest) -> ClientConfig:
    chosen: ClientConfig = request.param
    return chosen


async def test_readwrite_readers_share_a_writer_waits_for_them(
    rw_config: ClientConfig, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    client, close = made_client(rw_config, endpoint.url(rw_config, "lock"))
    try:
        async with (
            ReadWriteLock(client) as mine,
            ReadWriteLock(client) as other,
            ReadWriteLock(client) as writers,
        ):
            # Three objects: each is a holder of its own, on one task or thread.
            reader = await mine.read.acquire(key_id)
            shared = await other.read.acquire(key_id)
            assert isinstance(reader, RoleHandle) and isinstance(shared, RoleHandle)
            assert reader.fence == shared.fence >= 1
            assert await writers.write.acquire(key_id) is None
            with pytest.raises(LockNotAcquiredError) as refused:
                async with writers.write.hold(key_id):
                    pytest.fail("a writer's body ran beside readers")
            assert refused.value.key == reader.key
            assert await shared.release() is True
            writer = await start_waiting(
                admin, reader.key, writers.write.acquire, key_id, wait_ms=LONG_MS
            )
            assert await reader.release() is True
            assert await reader.release() is False
            written = await writer.result()
            assert isinstance(written, RoleHandle) and written.fence > reader.fence
            assert await other.read.acquire(key_id) is None
            assert await written.release() is True
            leaves_nothing(admin, reader.key)
    finally:
        await close()


async def test_readwrite_hold_and_run_are_renewed_on_both_sides(
    rw_config: ClientConfig, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    renewed = Event()

    def observe(event: object) -> None:
        if isinstance(event, Renewed):
            renewed.set()

    async def body(handle: Any) -> str:
        await renewed.wait()  # "no renewal while the body ran" otherwise
        assert handle.held
        return str(handle.key)

    client, close = made_client(rw_config, endpoint.url(rw_config, "lock"))
    try:
        async with ReadWriteLock(client, ttl_ms=SHORT_TTL_MS, observers=[observe]) as rw:
            async with rw.read.hold(key_id) as handle:
                key = await body(handle)
            renewed.clear()
            assert await rw.write.run(key_id, body) == key
        leaves_nothing(admin, key)
    finally:
        await close()


@pytest.mark.parametrize("role", ["read", "write"])
async def test_readwrite_force_unlock_fires_the_signal(
    role: str, rw_config: ClientConfig, endpoint: Endpoint, key_id: str
) -> None:
    client, close = made_client(rw_config, endpoint.url(rw_config, "lock"))
    try:
        async with ReadWriteLock(client, ttl_ms=SHORT_TTL_MS) as rw:
            side = getattr(rw, role)
            held: list[Any] = []

            async def section() -> None:
                async with side.hold(key_id, **UNCANCELLED) as handle:
                    held.append(handle)
                    assert await rw.write.force_unlock(key_id) is True
                    await signalled(handle.signal)  # "the loss was never signalled" otherwise

            with pytest.raises(LockLeaseLostError) as lost:
                await section()
            assert lost.value.reason is LossReason.RENEW_REJECTED
            assert held[0].signal.reason is lost.value
    finally:
        await close()
