"""An asyncio waiter cancelled while queued withdraws, on the clients users build (a thread
cannot be cancelled, so the sync driver has no such test; the contract both drivers share
is in ``tests/drivers/_async/test_client_matrix.py``)."""

from __future__ import annotations

import asyncio
import uuid
import warnings
from collections.abc import Iterator

import pytest
import redis

from distlock.asyncio import Lock, ReentrantLock, Semaphore
from tests.client_matrix import (
    BY_NAME,
    PREFIX,
    Endpoint,
    leaves_nothing,
    queue_and_places,
    queues,
)
from tests.redis_server import RedisServer

KINDS = ("lock", "reentrant", "semaphore")
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


def primitive(kind: str, client: object) -> Lock | ReentrantLock | Semaphore:
    if kind == "semaphore":
        return Semaphore(client, prefix=PREFIX[kind], limit=1)  # type: ignore[arg-type]
    cls = ReentrantLock if kind == "reentrant" else Lock
    return cls(client, prefix=PREFIX[kind])  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", ["from_url", "acl"])
async def test_a_cancelled_waiter_withdraws(
    name: str, kind: str, endpoint: Endpoint, admin: redis.Redis
) -> None:
    """A withdrawal is one attempt on a connection of its own: it must warn of nothing
    (an application that turns warnings into errors would lose it), and it passes the
    waiting attempt's keys, which the documented ACL must allow too. Either failure
    leaves the place in the queue, holding up the next waiter, until it expires."""
    config = BY_NAME[name]
    key_id = uuid.uuid4().hex
    client, close = config.asyncio(endpoint.url(config, kind))
    try:
        async with primitive(kind, client) as mine, primitive(kind, client) as other:
            holder = await mine.acquire(key_id)
            assert holder is not None
            waiter = asyncio.create_task(other.acquire(key_id, wait_ms=LONG_MS))
            async with asyncio.timeout(30):
                while not (admin.exists(*queues(holder.key)) or waiter.done()):  # noqa: ASYNC110
                    await asyncio.sleep(0.005)  # Redis's state: it cannot call us back
            assert not waiter.done(), "the waiter returned without waiting"
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
    finally:
        await close()
