"""Handles used the ways a new user reaches for: as context managers, released by hand
inside ``hold``, a ``hold()`` entered twice, a release that gets no answer."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio as aredis

import distlock
import distlock.asyncio
from distlock import LockLeaseLostError, LossReason, UsageError
from tests.failing_clients import FailsOneRenewal
from tests.redis_server import RedisServer


@pytest.fixture
def locks(redis_server: RedisServer) -> Iterator[distlock.Lock]:
    with distlock.Lock(redis.Redis.from_url(redis_server.url), prefix="h", ttl_ms=60_000) as lk:
        yield lk


def test_a_manual_handle_is_a_context_manager(locks: distlock.Lock, r: redis.Redis) -> None:
    handle = locks.acquire("k")
    assert handle is not None
    with handle as h:
        assert r.get("h:k") == h.token.encode()
    assert r.get("h:k") is None


def test_a_manual_handle_whose_key_was_taken_raises_on_exit(
    locks: distlock.Lock, r: redis.Redis
) -> None:
    handle = locks.acquire("k")
    assert handle is not None
    with pytest.raises(LockLeaseLostError) as lost, handle:
        r.set("h:k", "someone else")
    assert lost.value.reason is LossReason.RELEASE_REJECTED
    assert r.get("h:k") == b"someone else"


def test_releasing_inside_hold_is_allowed_and_the_exit_reports_it(
    locks: distlock.Lock, r: redis.Redis
) -> None:
    with locks.hold("k") as h:
        assert h.release() is True
        assert r.get("h:k") is None
    # The exit saw a section already released: its release said the key was ours.
    released: list[bool] = []

    def body(h: distlock.LockHandle) -> None:
        r.set("h:j", "someone else")
        released.append(h.release())

    with pytest.raises(LockLeaseLostError) as lost:
        locks.run("j", body)
    assert released == [False]
    assert lost.value.reason is LossReason.RELEASE_REJECTED


def test_entering_one_hold_twice_is_a_usage_error(locks: distlock.Lock, r: redis.Redis) -> None:
    holding = locks.hold("k")
    with holding:
        with pytest.raises(UsageError, match="already entered"), holding:
            pass
        assert r.get("h:k") is not None  # the first entry still holds it
    assert r.get("h:k") is None


def test_extend_under_hold_is_a_usage_error(locks: distlock.Lock, r: redis.Redis) -> None:
    with locks.hold("k") as h:
        with pytest.raises(UsageError, match="renewed for you"):
            h.extend(1_000)
        assert h.held
    assert r.get("h:k") is None


def test_an_unanswered_release_keeps_its_network_error_as_the_cause(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = redis.Redis.from_url(redis_server.url, socket_timeout=0.3)
    with distlock.Lock(client, prefix="h", ttl_ms=60_000, heartbeat_ms=False) as locks:
        try:
            with pytest.raises(LockLeaseLostError) as lost, locks.hold("k"):
                r.client_pause(60_000, all=False)  # the release will get no answer
        finally:
            r.client_unpause()
    assert lost.value.reason is LossReason.RELEASE_UNANSWERED
    assert isinstance(lost.value.__cause__, redis.RedisError), lost.value.__cause__


def test_asyncio_handles_too(redis_server: RedisServer, r: redis.Redis) -> None:
    async def main() -> None:
        async with distlock.asyncio.Lock(
            aredis.Redis.from_url(redis_server.url), prefix="h", ttl_ms=60_000
        ) as locks:
            handle = await locks.acquire("k")
            assert handle is not None
            async with handle as h:
                assert r.get("h:k") == h.token.encode()
            assert r.get("h:k") is None
            async with locks.hold("j") as h:
                assert await h.release() is True
            holding = locks.hold("i")
            async with holding:
                with pytest.raises(UsageError):
                    async with holding:
                        pass
            async with locks.hold("e") as h:
                with pytest.raises(UsageError):
                    await h.extend()

    asyncio.run(main())


def test_threads_of_a_lock_never_closed_end_when_idle(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The redis-py habit: a Lock made per use and dropped, never closed.  The timer
    # thread and the workers are the process's: they end once idle, Locks closed or not.
    from distlock import _scheduler
    from distlock._sync import backend

    monkeypatch.setattr(_scheduler, "IDLE_SECONDS", 0.1)
    monkeypatch.setattr(backend.WORKERS, "_idle_seconds", 0.1)
    client = redis.Redis.from_url(redis_server.url)

    def alive() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name.startswith("distlock-")]

    for i in range(20):
        distlock.Lock(client, prefix="drop", ttl_ms=2_000).run(str(i), lambda h: None)
    assert backend.TIMERS.running and alive()  # the renewal timers did start a thread...
    ended = threading.Event()

    def poll() -> None:
        while alive():
            if ended.wait(0.05):
                return
        ended.set()

    poller = threading.Thread(target=poll)
    poller.start()
    assert ended.wait(30), f"{alive()} still alive"
    poller.join()
    client.close()


def test_losses_and_failed_renewals_are_logged_and_the_happy_path_is_not(
    locks: distlock.Lock, r: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("DEBUG", logger="distlock")
    locks.run("quiet", lambda h: None)
    assert caplog.records == []

    def body(h: distlock.LockHandle) -> None:
        r.delete(h.key)

    with pytest.raises(LockLeaseLostError):
        locks.run("lost", body)
    (record,) = caplog.records
    assert record.levelname == "ERROR"
    assert "h:lost" in record.getMessage() and "RELEASE_REJECTED" in record.getMessage()
    assert record.distlock_key == "h:lost"  # type: ignore[attr-defined]
    assert len(record.distlock_token) == 8  # type: ignore[attr-defined]


def test_a_failed_renewal_is_a_warning(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="distlock")
    client = FailsOneRenewal(port=redis_server.port)
    renewed = threading.Event()
    locks = distlock.Lock(
        client, prefix="w", ttl_ms=60_000, heartbeat_ms=20,
        trace=lambda e: renewed.set() if e["action"] == "RenewReply" else None,
    )
    with locks:
        locks.run("k", lambda h: renewed.wait(30))  # a failed renewal, then a good one
    assert client.failed.is_set() and renewed.is_set()
    warnings = [r for r in caplog.records if r.levelname == "WARNING"]
    assert warnings and "renewal of 'w:k' failed" in warnings[0].getMessage()
    assert not [r for r in caplog.records if r.levelname == "ERROR"]


def test_an_on_renew_error_hook_that_raises_is_logged_and_renewal_goes_on(
    redis_server: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("WARNING", logger="distlock")
    client = FailsOneRenewal(port=redis_server.port)
    renewed = threading.Event()

    def hook(error: BaseException) -> None:
        raise RuntimeError("a bug in the hook")

    locks = distlock.Lock(
        client, prefix="hk", ttl_ms=60_000, heartbeat_ms=20, on_renew_error=hook,
        trace=lambda e: renewed.set() if e["action"] == "RenewReply" else None,
    )
    with locks:
        assert locks.run("k", lambda h: renewed.wait(30)) is True
    assert any(
        r.levelname == "ERROR" and r.exc_info and "a bug in the hook" in str(r.exc_info[1])
        for r in caplog.records
    )


def _types_accept_cluster_clients(
    sync: redis.RedisCluster, asyn: aredis.RedisCluster
) -> tuple[distlock.Lock, distlock.asyncio.Lock]:
    # Never called: mypy --strict checks that both drivers take RedisCluster clients.
    return distlock.Lock(sync), distlock.asyncio.Lock(asyn)


def _types_tell_the_primitives_apart(
    sem: distlock.Semaphore,
    rlocks: distlock.ReentrantLock,
    asem: distlock.asyncio.Semaphore,
    permit: distlock.PermitHandle,
) -> None:
    # Never called: mypy --strict (whose unused-ignore warning fails the run) checks that
    # each line is an error, so a Semaphore or ReentrantLock is no Lock to a type checker,
    # and what they do not offer is absent.
    def wants_lock(locks: distlock.Lock) -> None: ...

    def wants_async_lock(locks: distlock.asyncio.Lock) -> None: ...

    wants_lock(sem)  # type: ignore[arg-type]
    wants_lock(rlocks)  # type: ignore[arg-type]
    wants_async_lock(asem)  # type: ignore[arg-type]
    sem.hold_many(["a", "b"])  # type: ignore[attr-defined]
    rlocks.run_many(["a", "b"], lambda g: None)  # type: ignore[attr-defined]
    sem.owner("k")  # type: ignore[attr-defined]
    _ = permit.fence  # type: ignore[attr-defined]


def test_each_handle_says_what_it_is_in_its_repr(redis_server: RedisServer) -> None:
    """A lock's handle shows its fence, a permit none, a reentrant level its depth too; the
    asyncio handles say the same."""
    client = redis.Redis.from_url(redis_server.url)
    with distlock.Lock(client, prefix="rp", ttl_ms=60_000) as lock, lock.hold("k") as h:
        assert repr(h) == f"<LockHandle 'rp:k' fence={h.fence} phase=held lost=False>"
    with distlock.ReentrantLock(client, prefix="rp", ttl_ms=60_000) as rl, rl.hold("r") as lvl:
        assert repr(lvl) == (
            f"<ReentrantHandle 'rp:r' fence={lvl.fence} phase=held lost=False depth=1>"
        )
    with (
        distlock.Semaphore(client, prefix="rp", limit=2, ttl_ms=60_000) as sem,
        sem.hold("s") as permit,
    ):
        assert repr(permit) == "<PermitHandle 'rp:s' phase=held lost=False>"

    async def in_asyncio() -> str:
        async with (
            distlock.asyncio.Lock(aredis.Redis.from_url(redis_server.url), prefix="rp") as lk,
            lk.hold("a") as ah,
        ):
            return f"{ah!r} {ah.fence}"

    shown, fence = asyncio.run(in_asyncio()).rsplit(" ", 1)
    assert shown == f"<LockHandle 'rp:a' fence={fence} phase=held lost=False>"
    client.close()
