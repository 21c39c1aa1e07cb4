# Generated from tests/drivers/_async/test_release_resend.py by tools/unasync.py: do not edit.
"""A release sent twice (a client library retrying a release whose reply was lost), on
both drivers against a real redis-server: answered as released both times, also when
another owner took and released the key in between (a release is remembered for every
token released within the memory, not only the last); only a key another owner touched is
reported as taken.  The scripts' own memory is checked in ``tests/test_release_memory.py``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import redis

import distlock
from distlock import LockLeaseLostError, LossReason
from distlock._core.commands import Command, Kind, Op
from distlock._protocol import R_RELEASE, RELEASE, RELEASE_MEMORY_MS, encode
from distlock import Lock, LockHandle, ReentrantLock
from tests.redis_server import RedisServer

from .concurrency import Redis, client_for, no_retry

RELEASE_SHA = encode(Command(Op.RELEASE, "k", "", 1))[0].sha


class ResendingRelease(Redis):
    """Runs each release script twice, answering with the second reply: what a client
    retry does when the first attempt ran but its reply was lost."""

    # execute_command: the lock sends its scripts through it (and evalsha() does too).
    def execute_command(self, *args: Any, **options: Any) -> Any:
        send: Callable[..., Any] = super().execute_command
        reply = send(*args, **options)
        if args[:2] == ("EVALSHA", RELEASE_SHA):
            reply = send(*args, **options)
        return reply


def fence_of(h: LockHandle) -> int:
    return h.fence


def nothing(h: LockHandle) -> None:
    return None


def test_a_resent_release_is_our_own(redis_server: RedisServer, r: redis.Redis) -> None:
    client = ResendingRelease(port=redis_server.port)
    with Lock(client, prefix="rs", ttl_ms=60_000) as locks:
        assert locks.run("k", fence_of) >= 1  # not RELEASE_REJECTED
        handle = locks.acquire("m")
        assert handle is not None and handle.release() is True
        with locks.hold("k") as h:
            assert h.held
    assert r.keys("rs:*") == []
    client.close()


def test_a_key_another_owner_took_is_still_reported(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    client = ResendingRelease(port=redis_server.port)
    with Lock(client, prefix="rs", ttl_ms=60_000) as locks:

        def body(h: LockHandle) -> None:
            r.set(h.key, "someone else")

        with pytest.raises(LockLeaseLostError) as lost:
            locks.run("k", body)
        assert lost.value.reason is LossReason.RELEASE_REJECTED
    assert r.get("rs:k") == b"someone else"
    client.close()


def test_the_release_record_is_short_lived_and_the_key_is_gone(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    with Lock(client_for(redis_server), prefix="rs") as locks:
        locks.run("k", nothing)
    assert r.get("rs:k") is None
    (record,) = r.keys("distlock:released:*")
    assert 0 < r.pttl(record) <= RELEASE_MEMORY_MS


def test_a_manual_release_that_got_no_answer_can_be_called_again(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # No client retry and a short timeout: the first release times out on a paused Redis.
    client = client_for(redis_server, socket_timeout=0.3, retry=no_retry())
    with Lock(client, prefix="again", ttl_ms=60_000) as locks:
        handle = locks.acquire("k")
        assert handle is not None
        r.client_pause(60_000, all=False)
        try:
            with pytest.raises(redis.RedisError):
                handle.release()
        finally:
            r.client_unpause()
        assert handle.release() is True  # sent again, and answered
        assert r.get("again:k") is None
        assert handle.release() is False  # answered once: nothing more to send
    client.close()


class ReleaseLostThenResent(Redis):
    """Runs the first release script, then ``meanwhile`` (another client's whole section),
    then the same release again, answering with the second reply: a client retry of a
    release whose first reply was lost, with another owner's cycle in between."""

    meanwhile: Callable[[], None]
    resent = False

    def execute_command(self, *args: Any, **options: Any) -> Any:
        send: Callable[..., Any] = super().execute_command
        reply = send(*args, **options)
        if args[0] == "EVALSHA" and args[1] in (RELEASE.sha, R_RELEASE.sha) and not self.resent:
            self.resent = True
            self.meanwhile()
            reply = send(*args, **options)
        return reply


def other_owner(kind: Kind, url: str) -> Callable[[], None]:
    """B's whole section on the same key, on a client of its own, built as users build it
    (a sync one, on a thread of its own, as another process's would be)."""
    fences: list[int] = []

    def section() -> None:
        other = redis.Redis.from_url(url, decode_responses=True)
        factory = distlock.Lock if kind is Kind.LOCK else distlock.ReentrantLock
        with factory(other, prefix="mem", ttl_ms=60_000) as locks:
            fences.append(locks.run("k", lambda h: h.fence))
        other.close()

    def cycle() -> None:
        other = threading.Thread(target=section)
        other.start()
        other.join()
        assert fences.pop() >= 1

    return cycle


@pytest.mark.parametrize("kind", [Kind.LOCK, Kind.REENTRANT], ids=lambda k: k.name.lower())
def test_a_section_whose_release_was_resent_after_another_owner_is_not_reported_lost(
    redis_server: RedisServer, r: redis.Redis, kind: Kind
) -> None:
    client = ReleaseLostThenResent(host=redis_server.host, port=redis_server.port)
    client.meanwhile = other_owner(kind, redis_server.url)
    factory = Lock if kind is Kind.LOCK else ReentrantLock
    with factory(client, prefix="mem", ttl_ms=60_000) as locks:
        client.resent = True  # not yet: a first section loads the scripts (EVALSHA from then on)
        locks.run("warm", fence_of)
        client.resent = False
        assert locks.run("k", fence_of) >= 1  # not RELEASE_REJECTED
        assert client.resent
        client.resent = False
        with locks.hold("k") as h:
            assert h.held
        assert client.resent  # the hold's release too
    assert r.get("mem:k") is None
    client.close()
