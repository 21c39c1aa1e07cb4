"""The asyncio Lock against a real redis-server, including cancellation at every await point."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio as aredis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

import distlock
from distlock import LockLeaseLostError, LockNotAcquiredError, LossReason, ValidationError
from distlock._protocol import fence_key
from distlock.asyncio import Lock, LockHandle, ReentrantLock, Semaphore
from tests.garbage import collector_saves_all
from tests.redis_server import RedisServer, free_port

T = TypeVar("T")
WAIT = 10.0
PACKAGE_DIR = str(Path(distlock.__file__).resolve().parent)
#: A renewal interval far below the TTL: a test that waits for a renewal's verdict gets it
#: within one heartbeat, and no stall of the machine short of the whole TTL can turn it
#: into a deadline loss instead.
QUICK_HEARTBEAT_MS = 100


def arun(fn: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        async with asyncio.timeout(60):  # no extra task, unlike wait_for on 3.11
            return await fn()

    return asyncio.run(main())


def client_for(server: RedisServer, **kw: Any) -> aredis.Redis:
    return aredis.Redis(port=server.port, **kw)


def test_run_acquire_and_release(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="order", ttl_ms=10_000) as locks:
            async def body(h: LockHandle) -> tuple[str, int]:
                assert r.get("order:42") == h.token.encode()
                return h.key, h.fence

            key, fence = await locks.run("42", body)
            # the fence the slot's counter kept (at least the floor on Redis's clock)
            assert key == "order:42" and r.get(fence_key("order:42")) == str(fence).encode()
            assert r.get("order:42") is None
            h = await locks.acquire("42")
            assert h is not None
            assert await locks.acquire("42") is None
            assert await h.extend(20_000) is True
            assert await h.release() is True
            assert await h.release() is False

    arun(main)


def test_six_callers_fail_fast_and_with_retries_all_run(redis_server: RedisServer) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="six") as locks:
            others_failed = asyncio.Event()
            failures: list[LockNotAcquiredError] = []

            async def body(h: LockHandle) -> str:
                await asyncio.wait_for(others_failed.wait(), WAIT)
                return "ran"

            async def caller() -> str:
                try:
                    return await locks.run("job", body)
                except LockNotAcquiredError as exc:
                    failures.append(exc)
                    if len(failures) == 5:
                        others_failed.set()
                    raise

            results = await asyncio.gather(*(caller() for _ in range(6)), return_exceptions=True)
            assert results.count("ran") == 1
            assert len(failures) == 5
            assert all(f.key == "six:job" for f in failures)

            inside = most = 0

            async def serial(h: LockHandle) -> None:
                nonlocal inside, most
                inside += 1
                most = max(most, inside)
                await asyncio.sleep(0.02)
                inside -= 1

            # Retries are a spin, not a queue: leave a slow machine room for an unlucky caller.
            await asyncio.gather(
                *(locks.run("job", serial, retries=1_000, retry_delay_ms=50) for _ in range(6))
            )
            assert most == 1

    arun(main)


def test_short_body_starts_no_task(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="cheap") as locks:
            await locks.run("warm", lambda h: asyncio.sleep(0))
            loop = asyncio.get_running_loop()
            created: list[str] = []

            def counting_factory(
                loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any
            ) -> asyncio.Task[Any]:
                code = getattr(coro, "cr_code", None)
                if code is not None and code.co_filename.startswith(PACKAGE_DIR):
                    created.append(coro.__qualname__)  # ours; redis-py may spawn its own
                return asyncio.Task(coro, loop=loop, **kw)

            loop.set_task_factory(counting_factory)
            r.config_resetstat()
            try:
                for _ in range(20):
                    await locks.run("k", lambda h: asyncio.sleep(0))
            finally:
                loop.set_task_factory(None)
            assert created == []
            calls = {k: int(v["calls"]) for k, v in r.info("commandstats").items()}
            assert calls["cmdstat_evalsha"] == 40

    arun(main)


def test_a_finished_hold_leaves_no_reference_cycle(redis_server: RedisServer) -> None:
    """A hold's objects are freed when it ends, by reference counting: a cycle among them
    would be freed only by the cycle collector, whose passes over every young object
    would cost each lock cycle a share (and a service holding many locks, pauses).  Each
    primitive, with the holds that fail to enter and a reentrant hold's inner level."""

    async def body(h: object) -> None:
        return None

    async def cycles(locks: Lock | ReentrantLock | Semaphore) -> None:
        await locks.run("k", body)
        async with locks.hold("k") as h:
            assert h.key == f"{locks.prefix}:k"
            if isinstance(locks, ReentrantLock):
                async with locks.hold("k") as inner:
                    assert inner.depth == 2
        if isinstance(locks, Lock):
            await locks.run_many(["a", "b"], lambda g: asyncio.sleep(0))
        if not isinstance(locks, Semaphore):
            with pytest.raises(LockNotAcquiredError):  # an enter that fails
                async with locks.hold("taken"):
                    pass

    async def main() -> None:
        client = client_for(redis_server)
        for locks in (
            Lock(client, prefix="cyc"),
            ReentrantLock(client, prefix="cyc-r"),
            Semaphore(client, prefix="cyc-s", limit=2),
        ):
            async with locks:
                await client.set(f"{locks.prefix}:taken", "another owner")
                await cycles(locks)  # connections, scripts
                with collector_saves_all() as garbage:
                    for _ in range(3):
                        await cycles(locks)
                assert garbage == [], type(locks).__name__
        await client.aclose()

    arun(main)


def test_loss_cancels_the_body_and_raises(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        # The deadline is ten seconds away: the next renewal, one short heartbeat later, is
        # what must find the key gone.
        async with Lock(client_for(redis_server), prefix="c", ttl_ms=10_000,
                        heartbeat_ms=QUICK_HEARTBEAT_MS) as locks:
            reached: list[str] = []

            async def body(h: LockHandle) -> None:
                r.delete(h.key)
                try:
                    await asyncio.sleep(WAIT)
                except asyncio.CancelledError:
                    reached.append("cancelled")
                    raise
                reached.append("finished")

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", body)
            assert reached == ["cancelled"]
            assert info.value.reason is LossReason.RENEW_REJECTED
            task = asyncio.current_task()
            assert task is not None and task.cancelling() == 0  # our cancel was consumed

    arun(main)


def test_cancel_on_loss_false_keeps_only_the_signal(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="c", ttl_ms=10_000,
                        heartbeat_ms=QUICK_HEARTBEAT_MS) as locks:
            finished: list[str] = []

            async def body(h: LockHandle) -> str:
                r.delete(h.key)
                await asyncio.wait_for(h.signal.wait(), WAIT)
                assert h.signal.reason is not None
                finished.append("finished")  # not cancelled, though the loss was known
                return "finished"

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", body, cancel_on_loss=False)
            assert finished == ["finished"]
            assert info.value.reason is LossReason.RENEW_REJECTED

    arun(main)


def test_blocked_event_loop_is_caught_at_completion(redis_server: RedisServer) -> None:
    ttl_ms = 500
    sent_at: list[float] = []

    def trace(event: dict[str, Any]) -> None:
        if event["action"] == "Acquire":
            sent_at.append(event["t"])

    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="b", ttl_ms=ttl_ms,
                        trace=trace) as locks:
            ran: list[int] = []

            async def body(h: LockHandle) -> str:
                ran.append(1)
                # The fault: the loop is blocked until the lease, counted from the acquire's
                # send, is over on the client's clock (the trace's t); no timer runs, and
                # the body ends past its deadline.  The grant and the start of the body are
                # one step of the task, so no renewal tick can run before the block either.
                left_ms = sent_at[0] + ttl_ms - time.monotonic() * 1000
                time.sleep(max(0.0, left_ms) / 1000 + 0.001)  # noqa: ASYNC251
                return "done"

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", body)
            assert ran == [1]
            assert info.value.reason is LossReason.DEADLINE_AT_COMPLETION

    arun(main)


def test_silent_redis_is_a_loss_by_the_deadline(fresh_redis: RedisServer) -> None:
    async def main() -> None:
        # A paused Redis answers nothing, so the deadline is the only way out; the TTL only
        # has to be long enough that the grant itself is never late.
        async with Lock(client_for(fresh_redis), prefix="p", ttl_ms=1_000) as locks:
            async def body(h: LockHandle) -> None:
                fresh_redis.pause()
                try:
                    await asyncio.sleep(WAIT)
                finally:
                    fresh_redis.resume()

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", body)
            assert info.value.reason is LossReason.DEADLINE_PASSED

    arun(main)


def test_body_error_and_abort_reason(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="e", ttl_ms=10_000,
                        heartbeat_ms=QUICK_HEARTBEAT_MS) as locks:
            async def plain_error(h: LockHandle) -> None:
                raise KeyError("boom")

            with pytest.raises(KeyError):
                await locks.run("k", plain_error)
            assert r.get("e:k") is None

            async def error_after_loss(h: LockHandle) -> None:
                r.delete(h.key)
                raise KeyError("boom")

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", error_after_loss)
            assert isinstance(info.value.__cause__, KeyError)

            reasons: list[BaseException] = []

            async def reraises(h: LockHandle) -> None:
                r.delete(h.key)
                await asyncio.wait_for(h.signal.wait(), WAIT)
                assert h.signal.reason is not None
                reasons.append(h.signal.reason)
                h.signal.raise_if_aborted()

            with pytest.raises(LockLeaseLostError) as info:
                await locks.run("k", reraises, cancel_on_loss=False)
            assert info.value is reasons[0]

    arun(main)


def test_hold_as_async_context_manager(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with Lock(client_for(redis_server), prefix="h") as locks:
            async with locks.hold("k") as h:
                assert r.get("h:k") == h.token.encode()
                with pytest.raises(LockNotAcquiredError):
                    async with locks.hold("k"):
                        pass
            assert r.get("h:k") is None

    arun(main)


def test_validation_before_any_command() -> None:
    async def main() -> None:
        dead = aredis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0))
        async with Lock(dead) as locks:
            with pytest.raises(ValidationError):
                await locks.run("", lambda h: asyncio.sleep(0))
            with pytest.raises(ValidationError):
                locks.hold("k", ttl_ms=1_000, heartbeat_ms=600)
            with pytest.raises(ValidationError):
                await locks.acquire("k", retries=-1)
            with pytest.raises(redis.exceptions.ConnectionError):
                await locks.acquire("k")
        await dead.aclose()

    arun(main)


def test_url_and_async_factory_clients(redis_server: RedisServer) -> None:
    async def main() -> None:
        locks = Lock(redis_server.url, prefix="u")
        assert await locks.run("k", lambda h: asyncio.sleep(0, h.fence)) >= 1
        await locks.aclose()

        made: list[aredis.Redis] = []

        async def factory() -> aredis.Redis:
            made.append(client_for(redis_server))
            return made[-1]

        async with Lock(factory, prefix="f") as locks2:
            await locks2.run("a", lambda h: asyncio.sleep(0))
            await locks2.run("b", lambda h: asyncio.sleep(0))
        assert len(made) == 1
        await made[0].aclose()

    arun(main)


def test_on_renew_error_sees_failed_round_trips(fresh_redis: RedisServer) -> None:
    async def main() -> None:
        errors: list[BaseException] = []
        first = asyncio.Event()

        def hook(exc: BaseException) -> None:
            errors.append(exc)
            first.set()

        client = client_for(fresh_redis, socket_timeout=0.3, retry=Retry(NoBackoff(), 0))
        async with Lock(client, prefix="p", ttl_ms=5_000, heartbeat_ms=200,
                        on_renew_error=hook) as locks:
            async def body(h: LockHandle) -> bool:
                fresh_redis.pause()
                try:
                    await asyncio.wait_for(first.wait(), WAIT)
                    return h.signal.aborted
                finally:
                    fresh_redis.resume()

            assert await locks.run("k", body) is False
        assert isinstance(errors[0], redis.exceptions.TimeoutError)
        await client.aclose()

    arun(main)


# -- cancellation at every await point ------------------------------------------------------
#
# Each test parks a task at one await point (writes paused with CLIENT PAUSE WRITE, which
# holds scripts unexecuted, or an event never set), cancels it there, lets Redis go on, and
# checks that the key is free again and no task is left behind.
#
# The clients have no socket timeout.  With one, redis-py sends each command under
# asyncio.wait_for, which on Python 3.11 returns the send's result and drops a cancel that
# arrives after the send completed but before the task resumed: exactly when a script is
# first seen parked in Redis.  The cancel would then be lost before distlock ever saw it.


def cancellable_client(server: RedisServer) -> aredis.Redis:
    return client_for(server, socket_timeout=None)


async def settle(locks: Lock) -> None:
    """Wait for shielded releases still in flight (what aclose() does)."""
    await locks.aclose()


async def parked_scripts(r: redis.Redis, count: int) -> None:
    """Until ``count`` clients are held by the pause with a script call."""
    while True:
        blocked = [
            c for c in r.client_list() if c.get("cmd") in ("evalsha", "eval") and "b" in c["flags"]
        ]
        if len(blocked) >= count:
            return
        await asyncio.sleep(0.005)  # polling the server: it has no event to wait on


def pause_writes(r: redis.Redis) -> None:
    r.client_pause(60_000, all=False)  # writes only: scripts wait unexecuted


def unpause(r: redis.Redis) -> None:
    r.client_unpause()


def test_cancel_during_acquire_round_trip(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="x", ttl_ms=60_000)
        pause_writes(r)
        try:
            task = asyncio.create_task(locks.run("k", lambda h: asyncio.sleep(0)))
            await parked_scripts(r, 1)
            task.cancel()
            await asyncio.sleep(0)  # the shielded cleanup release is sent
        finally:
            unpause(r)
        with pytest.raises(asyncio.CancelledError):
            await task
        await settle(locks)
        assert r.get("x:k") is None  # never acquired, or acquired and released with our token

    arun(main)


def test_cancel_during_retry_backoff(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        refused = asyncio.Event()

        def trace(event: dict[str, Any]) -> None:
            if event["action"] == "AcquireReply" and not event["granted"]:
                refused.set()

        locks = Lock(cancellable_client(redis_server), prefix="y", ttl_ms=60_000, trace=trace)
        holder = await locks.acquire("k")
        assert holder is not None
        task = asyncio.create_task(
            locks.run("k", lambda h: asyncio.sleep(0), retries=1000, retry_delay_ms=20)
        )
        # The refusal is traced inside the task, which then awaits its backoff: by the time
        # this wakes up, the task is parked in that sleep.
        await asyncio.wait_for(refused.wait(), WAIT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert r.get("y:k") == holder.token.encode()  # the holder was never disturbed
        assert await holder.release() is True
        await settle(locks)

    arun(main)


def test_cancel_during_body_releases(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="z", ttl_ms=60_000)
        entered = asyncio.Event()

        async def body(h: LockHandle) -> None:
            entered.set()
            await asyncio.Event().wait()

        task = asyncio.create_task(locks.run("k", body))
        await entered.wait()
        assert r.get("z:k") is not None
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert r.get("z:k") is None
        await settle(locks)

    arun(main)


def test_cancel_during_release_still_releases(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="w", ttl_ms=60_000)

        async def body(h: LockHandle) -> None:
            pause_writes(r)  # the release will be held until unpaused

        try:
            task = asyncio.create_task(locks.run("k", body))
            await parked_scripts(r, 1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert r.get("w:k") is not None  # the release has not run yet...
        finally:
            unpause(r)
        await settle(locks)
        assert r.get("w:k") is None  # ...and it still ran to the end

    arun(main)


def test_cancel_during_manual_extend_and_release(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        locks = Lock(cancellable_client(redis_server), prefix="v", ttl_ms=60_000)
        h = await locks.acquire("k")
        assert h is not None
        pause_writes(r)
        try:
            extending = asyncio.create_task(h.extend())
            await parked_scripts(r, 1)
            extending.cancel()
            with pytest.raises(asyncio.CancelledError):
                await extending
        finally:
            unpause(r)
        assert h.held  # a cancelled extend says nothing about ownership

        pause_writes(r)
        try:
            releasing = asyncio.create_task(h.release())
            await parked_scripts(r, 1)
            releasing.cancel()
            with pytest.raises(asyncio.CancelledError):
                await releasing
        finally:
            unpause(r)
        await settle(locks)
        assert r.get("v:k") is None

    arun(main)


def test_aclose_leaves_no_task(redis_server: RedisServer) -> None:
    async def main() -> None:
        renewed = asyncio.Event()
        # A renewal task must have run; the long TTL keeps the lease whatever the load.
        locks = Lock(client_for(redis_server), prefix="t", ttl_ms=2_000,
                     heartbeat_ms=QUICK_HEARTBEAT_MS,
                     trace=lambda e: renewed.set() if e["action"] == "RenewReply" else None)

        async def body(h: LockHandle) -> None:
            await asyncio.wait_for(renewed.wait(), WAIT)

        await locks.run("k", body)
        await locks.aclose()
        assert asyncio.all_tasks() == {asyncio.current_task()}

    arun(main)


@pytest.mark.parametrize("how", ["run", "acquire"])
def test_a_grant_arriving_after_its_lease_runs_no_body(
    redis_server: RedisServer, r: redis.Redis, how: str
) -> None:
    ttl_ms = 100

    async def main() -> None:
        sent = asyncio.Event()
        sent_at: list[float] = []
        released: list[bool] = []

        def trace(event: dict[str, Any]) -> None:
            if event["action"] == "Acquire":
                sent_at.append(event["t"])
                sent.set()
            elif event["action"] == "ReleaseReply":
                released.append(event["ok"])

        async with Lock(client_for(redis_server), prefix="late", ttl_ms=ttl_ms,
                        trace=trace) as locks:
            ran: list[int] = []

            async def body(h: LockHandle) -> None:
                ran.append(1)

            # Redis holds the acquire unexecuted until its whole TTL has passed on the
            # client's clock since it was sent (the trace's t): the grant then arrives after
            # the lease it grants, whatever the machine's load.
            pause_writes(r)
            try:
                call = locks.run("k", body) if how == "run" else locks.acquire("k")
                task = asyncio.ensure_future(call)
                await asyncio.wait_for(sent.wait(), WAIT)
                while (left := sent_at[0] + ttl_ms - time.monotonic() * 1000) >= 0:  # noqa: ASYNC110 -- the clock is what we wait for
                    await asyncio.sleep(left / 1000 + 0.001)
            finally:
                unpause(r)
            with pytest.raises(LockLeaseLostError) as info:
                await task
            assert info.value.reason is LossReason.GRANTED_TOO_LATE
            assert ran == []
            assert released == [True]  # released with our token, not left to expire
            assert r.get("late:k") is None

    arun(main)
