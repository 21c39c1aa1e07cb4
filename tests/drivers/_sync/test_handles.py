# Generated from tests/drivers/_async/test_handles.py by tools/unasync.py: do not edit.
"""Handles used the ways a new user reaches for, on both drivers against a real
redis-server: as context managers, released by hand inside ``hold``, a ``hold()`` entered
twice, a release that gets no answer; and what each handle's repr says."""

from __future__ import annotations

import pytest
import redis

from distlock import LockLeaseLostError, LossReason, UsageError
from distlock._sync.handles import Handle
from distlock import Lock, LockHandle, ReentrantLock, Semaphore
from tests.redis_server import RedisServer

from .concurrency import client_for, sleep


def nothing(h: object) -> None:
    return None


def handle_locks(server: RedisServer) -> Lock:
    return Lock(client_for(server), prefix="h", ttl_ms=60_000)


def test_a_manual_handle_is_a_context_manager(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with handle_locks(redis_server) as locks:
        handle = locks.acquire("k")
        assert handle is not None
        with handle as h:
            assert r.get("h:k") == h.token.encode()
        assert r.get("h:k") is None


def test_a_manual_handle_whose_key_was_taken_raises_on_exit(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with handle_locks(redis_server) as locks:
        handle = locks.acquire("k")
        assert handle is not None
        with pytest.raises(LockLeaseLostError) as lost:
            with handle:
                r.set("h:k", "someone else")
        assert lost.value.reason is LossReason.RELEASE_REJECTED
        assert r.get("h:k") == b"someone else"


def test_releasing_inside_hold_is_allowed_and_the_exit_reports_it(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with handle_locks(redis_server) as locks:
        with locks.hold("k") as h:
            assert h.release() is True
            assert r.get("h:k") is None
        # The exit saw a section already released: its release said the key was ours.
        released: list[bool] = []

        def body(h: LockHandle) -> None:
            r.set("h:j", "someone else")
            released.append(h.release())

        with pytest.raises(LockLeaseLostError) as lost:
            locks.run("j", body)
        assert released == [False]
        assert lost.value.reason is LossReason.RELEASE_REJECTED


@pytest.mark.parametrize("kind", ["lock", "reentrant", "semaphore"])
def test_a_loss_the_body_finds_by_its_own_release_leaves_no_cancel_behind(
    kind: str, redis_server: RedisServer, r: redis.Redis
) -> None:
    """The body's own release finds the key gone, and the body ends without another await:
    the loss is raised at the exit, and the caller's next is its own (under asyncio,
    the cancel the loss sent the body's task is taken back even though it never reached
    the body)."""
    client = client_for(redis_server)
    locks: Lock | ReentrantLock | Semaphore
    if kind == "lock":
        locks = Lock(client, prefix="h")
    elif kind == "reentrant":
        locks = ReentrantLock(client, prefix="h")
    else:
        locks = Semaphore(client, prefix="h", limit=1)
    released: list[bool] = []

    def body(h: Handle) -> None:
        r.delete(h.key)
        released.append(h.release())

    with locks:
        with pytest.raises(LockLeaseLostError) as lost:
            locks.run("own", body)
        assert released == [False]
        assert lost.value.reason is LossReason.RELEASE_REJECTED
        sleep(0)  # no cancel left pending for the caller
        locks.run("own", nothing)
    client.close()


def test_entering_one_hold_twice_is_a_usage_error(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with handle_locks(redis_server) as locks:
        holding = locks.hold("k")
        with holding:
            with pytest.raises(UsageError, match="already entered"):
                with holding:
                    pass
            assert r.get("h:k") is not None  # the first entry still holds it
        assert r.get("h:k") is None


def test_extend_under_hold_is_a_usage_error(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with handle_locks(redis_server) as locks:
        with locks.hold("k") as h:
            with pytest.raises(UsageError, match="renewed for you"):
                h.extend(1_000)
            with pytest.raises(UsageError, match="renewed for you"):
                h.extend()
            assert h.held
        assert r.get("h:k") is None


def test_an_unanswered_release_keeps_its_network_error_as_the_cause(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = client_for(redis_server, socket_timeout=0.3)
    with Lock(client, prefix="h", ttl_ms=60_000, heartbeat_ms=False) as locks:
        try:
            with pytest.raises(LockLeaseLostError) as lost:
                with locks.hold("k"):
                    r.client_pause(60_000, all=False)  # the release will get no answer
        finally:
            r.client_unpause()
    assert lost.value.reason is LossReason.RELEASE_UNANSWERED
    assert isinstance(lost.value.__cause__, redis.RedisError), lost.value.__cause__
    client.close()


def test_each_handle_says_what_it_is_in_its_repr(redis_server: RedisServer) -> None:
    """A lock's handle shows its fence, a permit none, a reentrant level its depth too."""
    client = client_for(redis_server)
    with Lock(client, prefix="rp", ttl_ms=60_000) as lock, lock.hold("k") as h:
        assert repr(h) == f"<LockHandle 'rp:k' fence={h.fence} phase=held lost=False>"
    with (
        ReentrantLock(client, prefix="rp", ttl_ms=60_000) as rl,
        rl.hold("r") as lvl,
    ):
        assert repr(lvl) == (
            f"<ReentrantHandle 'rp:r' fence={lvl.fence} phase=held lost=False depth=1>"
        )
    with (
        Semaphore(client, prefix="rp", limit=2, ttl_ms=60_000) as sem,
        sem.hold("s") as permit,
    ):
        assert repr(permit) == "<PermitHandle 'rp:s' phase=held lost=False>"
    client.close()
