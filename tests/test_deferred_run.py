"""The deferred ``run()`` against a real Redis: each way its section comes to be made
(the renewal timer, a handle call, a close, a release answered 0, a refused acquire) ends
as the ordinary cycle would, and a cycle nothing disturbs never makes one."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
import redis.asyncio as aredis

from distlock import LockLeaseLostError, LockNotAcquiredError, UsageError
from distlock._async.deferred import DeferredHandle
from distlock.asyncio import Lock, LockHandle
from distlock.errors import LossReason
from distlock.signal import AsyncLeaseSignal
from tests.redis_server import RedisServer


@pytest.fixture
def url(redis_server: RedisServer) -> str:
    return f"redis://{redis_server.host}:{redis_server.port}/0"


async def _until(condition: object, what: str) -> None:
    """Poll ``condition()`` (an event distlock offers no hook for) for up to 30 s."""
    for _ in range(3000):
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"never: {what}")


async def an_undisturbed_cycle_never_makes_a_section(client: aredis.Redis) -> None:
    async with Lock(client, prefix="dr1") as locks:
        await locks.client()
        seen: list[LockHandle] = []

        async def body(handle: LockHandle) -> int:
            seen.append(handle)
            assert handle.held and handle.key == "dr1:a"
            assert await client.get("dr1:a") == handle.token.encode()
            return handle.fence

        fence = await locks.run("a", body)
        (handle,) = seen
        assert isinstance(handle, DeferredHandle) and isinstance(handle, LockHandle)
        assert fence > 0 and not handle._deferred
        with pytest.raises(AttributeError):
            handle._section  # noqa: B018  # never made
        assert await client.exists("dr1:a") == 0
        # Per-call options go the ordinary way.
        assert type(await locks.run("a", _handle_of, ttl_ms=5000)) is LockHandle


async def _handle_of(handle: LockHandle) -> LockHandle:
    return handle


async def a_body_past_its_first_heartbeat_is_renewed(client: aredis.Redis) -> None:
    async with Lock(client, prefix="dr2", ttl_ms=1500) as locks:
        await locks.client()

        async def body(handle: LockHandle) -> int:
            assert isinstance(handle, DeferredHandle)
            await _until(lambda: not handle._deferred, "the timer settled the cycle")
            section = handle._section
            granted_at = section.confirmed_at
            await _until(lambda: section.confirmed_at > granted_at, "a renewal confirmed")
            assert handle.held
            return handle.fence

        assert await locks.run("a", body) > 0
        assert await client.exists("dr2:a") == 0


async def the_signal_settles_the_cycle_and_fires_on_a_loss(client: aredis.Redis) -> None:
    async with Lock(client, prefix="dr3") as locks:
        await locks.client()

        async def body(handle: LockHandle) -> None:
            signal = handle.signal
            assert not handle._deferred
            assert not signal.aborted
            await locks.force_unlock("a")
            seen.append(signal)

        seen: list[AsyncLeaseSignal] = []
        with pytest.raises(LockLeaseLostError) as lost:
            await locks.run("a", body)
        assert lost.value.reason is LossReason.RELEASE_REJECTED
        assert seen[0].reason is lost.value


async def a_release_answered_0_is_the_loss_the_section_says(client: aredis.Redis) -> None:
    async with Lock(client, prefix="dr4") as locks:
        await locks.client()

        async def body(handle: LockHandle) -> None:
            await locks.force_unlock("a")
            assert handle._deferred

        with pytest.raises(LockLeaseLostError) as lost:
            await locks.run("a", body)
        assert lost.value.reason is LossReason.RELEASE_REJECTED

        async def failing(handle: LockHandle) -> None:
            await locks.force_unlock("a")
            raise KeyError("the body's own")

        with pytest.raises(LockLeaseLostError) as lost:
            await locks.run("a", failing)
        assert isinstance(lost.value.__cause__, KeyError)


async def a_body_error_leaves_as_itself_and_the_key_is_released(client: aredis.Redis) -> None:
    async with Lock(client, prefix="dr5") as locks:
        await locks.client()

        async def body(handle: LockHandle) -> None:
            raise KeyError("the body's own")

        with pytest.raises(KeyError):
            await locks.run("a", body)
        assert await client.exists("dr5:a") == 0


async def closing_mid_body_cancels_it_and_releases_the_key(client: aredis.Redis) -> None:
    locks = Lock(client, prefix="dr6")
    await locks.client()
    entered = asyncio.Event()

    async def body(handle: LockHandle) -> None:
        entered.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(locks.run("a", body))
    await entered.wait()
    await locks.aclose()
    with pytest.raises(LockLeaseLostError) as lost:
        await task
    assert lost.value.reason is LossReason.LOCK_CLOSED
    assert await client.exists("dr6:a") == 0


async def a_refused_acquire_goes_on_as_the_section_s_flow(client: aredis.Redis) -> None:
    async with Lock(client, prefix="dr7", retries=2, retry_delay_ms=1) as locks:
        await locks.client()
        await client.set("dr7:a", "someone else", px=60_000)

        async def body(handle: LockHandle) -> None:
            raise AssertionError("never run")

        with pytest.raises(LockNotAcquiredError) as refused:
            await locks.run("a", body)
        assert refused.value.attempts == 3
        assert await client.get("dr7:a") == b"someone else"


async def a_handle_after_its_cycle_says_what_an_ordinary_one_says(client: aredis.Redis) -> None:
    async with Lock(client, prefix="dr8", ttl_ms=10_000) as locks:
        await locks.client()
        # The same options, given per call: the ordinary way.
        deferred = await locks.run("a", _handle_of)
        ordinary = await locks.run("a", _handle_of, ttl_ms=10_000)
        assert type(deferred) is DeferredHandle and type(ordinary) is LockHandle
        for handle in (deferred, ordinary):
            assert handle.held is False
            assert handle.fence > 0 and len(handle.token) == 32
            assert handle.signal.aborted is False
            assert await handle.release() is False
            with pytest.raises(UsageError):
                await handle.extend()
        assert repr(deferred) == repr(ordinary).replace(
            str(ordinary.fence), str(deferred.fence)
        )
        assert deferred._section.outcome is ordinary._section.outcome
        assert deferred._section.release_confirmed is True


SCENARIOS = (
    an_undisturbed_cycle_never_makes_a_section,
    a_body_past_its_first_heartbeat_is_renewed,
    the_signal_settles_the_cycle_and_fires_on_a_loss,
    a_release_answered_0_is_the_loss_the_section_says,
    a_body_error_leaves_as_itself_and_the_key_is_released,
    closing_mid_body_cancels_it_and_releases_the_key,
    a_refused_acquire_goes_on_as_the_section_s_flow,
    a_handle_after_its_cycle_says_what_an_ordinary_one_says,
)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.__name__)
def test_the_deferred_run(
    scenario: Callable[[aredis.Redis], Awaitable[None]], url: str
) -> None:
    """Each scenario on a client built as the README builds one (``from_url``)."""

    async def main() -> None:
        client = aredis.Redis.from_url(url)
        try:
            async with asyncio.timeout(60):
                await scenario(client)
        finally:
            await client.aclose()

    asyncio.run(main())
