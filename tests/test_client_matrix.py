"""The contract of every primitive, on every way users build their clients, both drivers.

Each case runs for Lock, ReentrantLock and Semaphore (limit 1), on each client of
:mod:`tests.client_matrix`, against one real redis-server: fail fast (acquire, refuse,
release), a renewal while ``hold``'s and ``run``'s body runs, a waiter blocked behind a
holder and handed the lock by its release, and a key deleted under its holder firing the
signal.  A long wait (longer than redis-py 8's hidden 5 s socket timeout) runs on the
default ``from_url`` client and on a URL handed to the Lock.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
import warnings
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError, LockNotAcquiredError
from distlock._core.commands import Kind
from distlock._protocol import queue_keys
from distlock.errors import LossReason
from distlock.events import Renewed
from tests import waiting
from tests.client_matrix import BY_NAME, CONFIGS, ClientConfig
from tests.docs_acl import documented_acl
from tests.redis_server import RedisServer


def queues(key: str) -> list[str]:
    """Every kind's queue of ``key`` (each kind waits in its own)."""
    return [queue_keys(key, kind)[0] for kind in Kind]


def queue_and_places(key: str) -> list[str]:
    return [name for kind in Kind for name in queue_keys(key, kind)[:2]]


KINDS = ("lock", "reentrant", "semaphore")
#: The prefixes the documented restricted users are given rights on; ids are unique per case.
PREFIX = {"lock": "orders", "reentrant": "orders", "semaphore": "workers"}
USER = {"lock": "locker", "reentrant": "locker", "semaphore": "worker"}
#: A short lease, so that a renewal (every ttl/4) comes within a case, with room for a
#: renewal a loaded machine sends late (at 300 ms, one 220 ms late loses the lease).
SHORT_TTL_MS = 600
#: Long enough that nothing here waits it out: only a release ends a wait.
LONG_MS = 30_000


def documented_lock_acl() -> list[str]:
    """The rules of docs/acl.md's ``ACL SETUSER locker ...`` line, exactly as documented."""
    return documented_acl("locker")


#: The semaphore's documented rights, and what waiting adds to them (the semaphore's
#: guide): the wake lists, the queue's commands and BLPOP.
SEMAPHORE_WAIT_ACL = documented_acl("worker-waits")


class Endpoint:
    """The session's redis-server, with the documented restricted users set up on it."""

    def __init__(self, server: RedisServer) -> None:
        self.server = server
        admin = redis.Redis(host=server.host, port=server.port)
        admin.acl_setuser("locker", reset=True)
        admin.execute_command("ACL", "SETUSER", "locker", *documented_lock_acl())  # type: ignore[no-untyped-call]
        admin.acl_setuser("worker", reset=True)
        admin.execute_command("ACL", "SETUSER", "worker", *SEMAPHORE_WAIT_ACL)  # type: ignore[no-untyped-call]
        admin.close()

    def url(self, config: ClientConfig, kind: str) -> str:
        if not config.restricted:
            return self.server.url
        return f"redis://{USER[kind]}:s3cret@{self.server.host}:{self.server.port}/0"


@pytest.fixture(scope="module")
def endpoint(redis_server: RedisServer) -> Iterator[Endpoint]:
    yield Endpoint(redis_server)
    admin = redis.Redis(host=redis_server.host, port=redis_server.port)
    admin.acl_deluser("locker", "worker")
    admin.close()


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


def sync_primitive(kind: str, client: Any, **options: Any) -> Any:
    if kind == "semaphore":
        return distlock.Semaphore(client, prefix=PREFIX[kind], limit=1, **options)
    cls = distlock.ReentrantLock if kind == "reentrant" else distlock.Lock
    return cls(client, prefix=PREFIX[kind], **options)


def async_primitive(kind: str, client: Any, **options: Any) -> Any:
    if kind == "semaphore":
        return distlock.asyncio.Semaphore(client, prefix=PREFIX[kind], limit=1, **options)
    cls = distlock.asyncio.ReentrantLock if kind == "reentrant" else distlock.asyncio.Lock
    return cls(client, prefix=PREFIX[kind], **options)


def start_waiting(admin: redis.Redis, key: str, call: Callable[[], object]) -> waiting.Waiter:
    """Start ``call`` on a thread and return once its place is in ``key``'s queue; a call
    that ends first (an error, a grant) is reported at once, not after a time-out."""
    waiter = waiting.Waiter(call)
    waiter.start()
    waiting.until(
        lambda: admin.exists(*queues(key)) or not waiter.is_alive(),
        f"a waiter queued on {key}",
    )
    if not waiter.is_alive():
        pytest.fail(f"the waiter returned without waiting: {waiter.outcome()!r}")
    return waiter


async def start_waiting_task(
    admin: aredis.Redis, key: str, call: Awaitable[object]
) -> asyncio.Task[object]:
    """The asyncio :func:`start_waiting`: ``call`` as a task, returned once it is queued."""

    async def wrapped() -> object:
        return await call

    task = asyncio.get_running_loop().create_task(wrapped())

    async def queued() -> bool:
        return task.done() or bool(await admin.exists(*queues(key)))

    await waiting.until_async(queued, f"a waiter queued on {key}")
    if task.done():
        pytest.fail(f"the waiter returned without waiting: {task.result()!r}")
    return task


def leaves_nothing(admin: redis.Redis, key: str) -> None:
    """Neither the key nor anything of its queue is left once every holder released."""
    assert admin.exists(key, *queue_and_places(key)) == 0
    assert [w for kind in Kind for w in admin.keys(queue_keys(key, kind)[2] + "*")] == []


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


# -- sync -------------------------------------------------------------------------------


@pytest.fixture
def sync_client(config: ClientConfig, kind: str, endpoint: Endpoint) -> Iterator[Any]:
    client, close = config.sync(endpoint.url(config, kind))
    yield client
    close()


def test_sync_fail_fast(sync_client: Any, kind: str, key_id: str, admin: redis.Redis) -> None:
    with sync_primitive(kind, sync_client) as mine, sync_primitive(kind, sync_client) as other:
        handle = mine.acquire(key_id)
        assert handle is not None and handle.held
        assert kind == "semaphore" or handle.fence >= 1
        # Another holder (another object: a reentrant lock's re-entry is per object).
        assert other.acquire(key_id) is None
        with pytest.raises(LockNotAcquiredError) as refused, other.hold(key_id):
            pytest.fail("the body must not run while another holds the key")
        assert refused.value.key == handle.key
        assert handle.release() is True
        assert handle.release() is False
        leaves_nothing(admin, handle.key)
        again = other.acquire(key_id)
        assert again is not None and again.release() is True


def test_sync_hold_and_run_are_renewed(
    sync_client: Any, kind: str, key_id: str, admin: redis.Redis
) -> None:
    renewed = threading.Event()

    def observe(event: object) -> None:
        if isinstance(event, Renewed):
            renewed.set()

    def body(handle: Any) -> str:
        assert renewed.wait(LONG_MS / 1000), "no renewal while the body ran"
        assert handle.held
        return str(handle.key)

    with sync_primitive(kind, sync_client, ttl_ms=SHORT_TTL_MS, observers=[observe]) as p:
        with p.hold(key_id) as handle:
            key = body(handle)
        renewed.clear()
        assert p.run(key_id, body) == key
    leaves_nothing(admin, key)


def test_sync_a_waiter_is_handed_the_lock(
    sync_client: Any, kind: str, key_id: str, admin: redis.Redis
) -> None:
    with sync_primitive(kind, sync_client) as mine, sync_primitive(kind, sync_client) as other:
        holder = mine.acquire(key_id)
        assert holder is not None
        waiter = start_waiting(
            admin, holder.key, lambda: other.acquire(key_id, wait_ms=LONG_MS)
        )
        assert holder.release() is True
        handle = waiter.outcome()
        assert handle is not None and handle.held  # type: ignore[attr-defined]
        assert handle.release() is True  # type: ignore[attr-defined]
        leaves_nothing(admin, holder.key)


def test_sync_a_key_deleted_under_its_holder_fires_the_signal(
    sync_client: Any, kind: str, key_id: str, admin: redis.Redis
) -> None:
    with sync_primitive(kind, sync_client, ttl_ms=SHORT_TTL_MS) as p:
        held: list[Any] = []

        def section() -> None:
            with p.hold(key_id) as handle:
                held.append(handle)
                admin.delete(handle.key)
                assert handle.signal.wait(LONG_MS / 1000), "the loss was never signalled"

        with pytest.raises(LockLeaseLostError) as lost:
            section()
        assert lost.value.reason is LossReason.RENEW_REJECTED
        assert held[0].signal.reason is lost.value


@pytest.mark.parametrize("names", [("from_url", "url")])
def test_sync_a_wait_longer_than_the_default_socket_timeout(
    names: tuple[str, ...], endpoint: Endpoint, admin: redis.Redis
) -> None:
    """A waiter blocked for more than redis-py 8's default 5 s socket timeout still gets the
    lock; the two configs wait side by side, so the case costs one such wait."""
    made = {name: BY_NAME[name].sync(endpoint.url(BY_NAME[name], "lock")) for name in names}
    key_id = uuid.uuid4().hex
    locks = {name: distlock.Lock(client, prefix="orders") for name, (client, _) in made.items()}
    holders = {name: locks[name].acquire(f"{key_id}-{name}") for name in names}
    waiters = {}
    for name in names:
        holder = holders[name]
        assert holder is not None
        waiters[name] = start_waiting(
            admin,
            holder.key,
            lambda name=name: locks[name].acquire(f"{key_id}-{name}", wait_ms=LONG_MS),  # type: ignore[misc]
        )
    # The scenario: the holders keep the lock 6 s while the waiters block.
    threading.Event().wait(6)
    outcomes: dict[str, object] = {}
    released: dict[str, bool] = {}
    for name in names:
        holder = holders[name]
        assert holder is not None
        assert holder.release() is True
        try:
            got = outcomes[name] = waiters[name].outcome()
        except BaseException as exc:  # reported per config below
            outcomes[name] = exc
        else:
            if isinstance(got, distlock.LockHandle):
                released[name] = got.release()
    for name, (_, close) in made.items():
        locks[name].close()
        close()
    no_lock_for(outcomes, distlock.LockHandle)
    assert released == dict.fromkeys(names, True)
    for handle in outcomes.values():
        assert isinstance(handle, distlock.LockHandle)
        leaves_nothing(admin, handle.key)


# -- asyncio ----------------------------------------------------------------------------


def arun(config: ClientConfig, url: str, case: Callable[[Any], Awaitable[None]]) -> None:
    """Run ``case`` with the config's asyncio client, made and closed inside the loop."""

    async def main() -> None:
        client, close = config.asyncio(url)
        try:
            async with asyncio.timeout(60):
                await case(client)
        finally:
            await close()

    asyncio.run(main())


@pytest.fixture
def async_admin(redis_server: RedisServer) -> Callable[[], aredis.Redis]:
    return lambda: aredis.Redis(host=redis_server.host, port=redis_server.port)


def test_async_fail_fast(
    config: ClientConfig, kind: str, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    async def case(client: Any) -> None:
        async with async_primitive(kind, client) as mine, async_primitive(kind, client) as other:
            handle = await mine.acquire(key_id)
            assert handle is not None and handle.held
            assert kind == "semaphore" or handle.fence >= 1
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

    arun(config, endpoint.url(config, kind), case)


def test_async_hold_and_run_are_renewed(
    config: ClientConfig, kind: str, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    async def case(client: Any) -> None:
        renewed = asyncio.Event()

        def observe(event: object) -> None:
            if isinstance(event, Renewed):
                renewed.set()

        async def body(handle: Any) -> str:
            await asyncio.wait_for(renewed.wait(), LONG_MS / 1000)
            assert handle.held
            return str(handle.key)

        async with async_primitive(
            kind, client, ttl_ms=SHORT_TTL_MS, observers=[observe]
        ) as p:
            async with p.hold(key_id) as handle:
                key = await body(handle)
            renewed.clear()
            assert await p.run(key_id, body) == key
        leaves_nothing(admin, key)

    arun(config, endpoint.url(config, kind), case)


def test_async_a_waiter_is_handed_the_lock(
    config: ClientConfig,
    kind: str,
    endpoint: Endpoint,
    key_id: str,
    admin: redis.Redis,
    async_admin: Callable[[], aredis.Redis],
) -> None:
    async def case(client: Any) -> None:
        async with async_primitive(kind, client) as mine, async_primitive(kind, client) as other:
            holder = await mine.acquire(key_id)
            assert holder is not None
            watcher = async_admin()
            waiter = await start_waiting_task(
                watcher, holder.key, other.acquire(key_id, wait_ms=LONG_MS)
            )
            await watcher.aclose()
            assert await holder.release() is True
            handle: Any = await waiter
            assert handle is not None and handle.held
            assert await handle.release() is True
            leaves_nothing(admin, holder.key)

    arun(config, endpoint.url(config, kind), case)


def test_async_a_key_deleted_under_its_holder_fires_the_signal(
    config: ClientConfig, kind: str, endpoint: Endpoint, key_id: str, admin: redis.Redis
) -> None:
    async def case(client: Any) -> None:
        async with async_primitive(kind, client, ttl_ms=SHORT_TTL_MS) as p:
            held: list[Any] = []

            async def section() -> None:
                async with p.hold(key_id) as handle:
                    held.append(handle)
                    admin.delete(handle.key)
                    await handle.signal.wait()
                    pytest.fail("the body is cancelled when the loss is known")

            with pytest.raises(LockLeaseLostError) as lost:
                await section()
            assert lost.value.reason is LossReason.RENEW_REJECTED
            assert held[0].signal.aborted

    arun(config, endpoint.url(config, kind), case)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["from_url", "acl"])
def test_async_a_cancelled_waiter_withdraws(
    name: str,
    kind: str,
    endpoint: Endpoint,
    key_id: str,
    admin: redis.Redis,
    async_admin: Callable[[], aredis.Redis],
) -> None:
    """A withdrawal is one attempt on a connection of its own: it must warn of nothing
    (an application that turns warnings into errors would lose it), and it passes the
    waiting attempt's keys, which the documented ACL must allow too. Either failure
    leaves the place in the queue, holding up the next waiter, until it expires."""
    config = BY_NAME[name]

    async def case(client: Any) -> None:
        async with async_primitive(kind, client) as mine, async_primitive(kind, client) as other:
            holder = await mine.acquire(key_id)
            assert holder is not None
            watcher = async_admin()
            waiter = await start_waiting_task(
                watcher, holder.key, other.acquire(key_id, wait_ms=LONG_MS)
            )
            await watcher.aclose()
            with warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                waiter.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiter
            assert [str(w.message) for w in warned] == []
            # Withdrawn before the cancellation left: nothing of the waiter is left behind.
            assert admin.exists(*queue_and_places(holder.key)) == 0
            assert await holder.release() is True
            leaves_nothing(admin, holder.key)

    arun(config, endpoint.url(config, kind), case)


@pytest.mark.parametrize("names", [("from_url", "url")])
def test_async_a_wait_longer_than_the_default_socket_timeout(
    names: tuple[str, ...],
    endpoint: Endpoint,
    admin: redis.Redis,
    async_admin: Callable[[], aredis.Redis],
) -> None:
    """A waiter blocked for more than redis-py 8's default 5 s socket timeout still gets the
    lock; the two configs wait side by side, so the case costs one such wait."""
    key_id = uuid.uuid4().hex
    outcomes: dict[str, object] = {}
    released: dict[str, bool] = {}

    async def main() -> None:
        made = {n: BY_NAME[n].asyncio(endpoint.url(BY_NAME[n], "lock")) for n in names}
        locks = {n: distlock.asyncio.Lock(c, prefix="orders") for n, (c, _) in made.items()}
        watcher = async_admin()
        holders = {}
        waiters = {}
        for name in names:
            holder = await locks[name].acquire(f"{key_id}-{name}")
            assert holder is not None
            holders[name] = holder
            waiters[name] = await start_waiting_task(
                watcher, holder.key, locks[name].acquire(f"{key_id}-{name}", wait_ms=LONG_MS)
            )
        await watcher.aclose()
        # The scenario: the holders keep the lock 6 s while the waiters block.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 6)
        for name in names:
            assert await holders[name].release() is True
            try:
                got = outcomes[name] = await asyncio.wait_for(waiters[name], LONG_MS / 1000)
            except BaseException as exc:  # reported per config below
                outcomes[name] = exc
            else:
                if isinstance(got, distlock.asyncio.LockHandle):
                    released[name] = await got.release()
        for name, (_, close) in made.items():
            await locks[name].aclose()
            await close()

    asyncio.run(main())
    no_lock_for(outcomes, distlock.asyncio.LockHandle)
    assert released == dict.fromkeys(names, True)
    for handle in outcomes.values():
        assert isinstance(handle, distlock.asyncio.LockHandle)
        leaves_nothing(admin, handle.key)
