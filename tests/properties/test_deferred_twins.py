"""The deferred ``run()`` and the ordinary one are twins, against a real Redis: for any
sequence of bodies (plain, raising, deleting or force-unlocking their key, asking for the
signal, releasing by themselves, cancelled, or refused because someone else holds the
key), each run once with the Lock's defaults (deferred) and once with the same options
given per call (the ordinary way), both give the same result or error, leave Redis in the
same state, and leave a handle that answers the same afterwards."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from distlock import LockLeaseLostError, LockNotAcquiredError, UsageError
from distlock._async.deferred import DeferredHandle
from distlock.asyncio import Lock, LockHandle
from tests.properties.profiles import scaled
from tests.redis_server import RedisServer

BODIES = ("plain", "raise", "delete", "force", "signal", "release", "cancelled", "refused")
TTL_MS = 10_000


async def _run(locks: Lock, client: Any, id: str, kind: str, ordinary: bool) -> tuple[Any, ...]:
    """What one run gave, and what its handle and Redis say after it."""
    seen: list[LockHandle] = []

    async def body(handle: LockHandle) -> str:
        seen.append(handle)
        if kind == "raise":
            raise KeyError(id)
        if kind == "delete":
            await client.delete(handle.key)
        elif kind == "force":
            await locks.force_unlock(id)
        elif kind == "signal":
            assert not handle.signal.aborted
        elif kind == "release":
            assert await handle.release() is True
        elif kind == "cancelled":
            raise asyncio.CancelledError
        return "done"

    if kind == "refused":
        await client.set(locks.key(id), "someone else", px=TTL_MS)
    options: dict[str, Any] = {"ttl_ms": TTL_MS} if ordinary else {}
    try:
        result: tuple[Any, ...] = ("returned", await locks.run(id, body, **options))
    except LockLeaseLostError as lost:
        result = ("lost", lost.reason, type(lost.__cause__))
    except LockNotAcquiredError as refused:
        result = ("refused", refused.attempts)
    except (KeyError, asyncio.CancelledError) as error:
        result = ("raised", type(error))
    after: tuple[Any, ...] = ()
    if seen:
        (handle,) = seen
        assert isinstance(handle, DeferredHandle) != ordinary
        after = (handle.held, handle.signal.aborted, await handle.release())
        try:
            await handle.extend()
        except UsageError:
            after += ("extend refused",)
    state = await client.get(locks.key(id))
    await client.delete(locks.key(id))
    return result, after, state


@scaled(10, floor=30)
@given(st.lists(st.sampled_from(BODIES), min_size=1, max_size=8))
def test_a_deferred_run_and_an_ordinary_one_are_twins(
    redis_server: RedisServer, bodies: list[str]
) -> None:
    async def main() -> None:
        async with Lock(redis_server.url, prefix="twins", ttl_ms=TTL_MS) as locks:
            client = await locks.client()
            for n, kind in enumerate(bodies):
                deferred = await _run(locks, client, f"d{n}", kind, ordinary=False)
                ordinary = await _run(locks, client, f"o{n}", kind, ordinary=True)
                assert deferred == ordinary, kind

    asyncio.run(main())
