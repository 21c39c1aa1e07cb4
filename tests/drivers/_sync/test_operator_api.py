# Generated from tests/drivers/_async/test_operator_api.py by tools/unasync.py: do not edit.
"""``locked``, ``owner`` and ``force_unlock``: what users of redis-py's Lock,
python-redis-lock and Redisson reach for, on both drivers, against a real redis-server.

Clients are built as users build them (``from_url`` with defaults, and with
``decode_responses=True``); waits are on events, or on Redis's own state where only
Redis knows (a waiter in the queue)."""

from __future__ import annotations

import pytest
import redis

from distlock import LockLeaseLostError, LockOwner, LossReason, ValidationError
from distlock._protocol import fence_key, queue_keys
from distlock import Lock, LockHandle, ReadWriteLock, ReentrantLock, Semaphore
from tests.docs_acl import documented_acl
from tests.redis_server import RedisServer

from .concurrency import UNCANCELLED, Event, Redis, signalled, spawn, until

FOREVER_MS = 60_000


@pytest.fixture(params=[False, True], ids=["bytes", "decoded"])
def client(request: pytest.FixtureRequest, redis_server: RedisServer, r: redis.Redis) -> Redis:
    """The driver's client, from a URL with defaults or decoding (``r`` flushed Redis)."""
    return Redis.from_url(redis_server.url, decode_responses=request.param)


# -- locked ------------------------------------------------------------------------------


def test_locked_is_whether_anyone_holds_the_key(client: Redis) -> None:
    with Lock(client, prefix="op", ttl_ms=FOREVER_MS) as mine, \
            Lock(client, prefix="op") as theirs:
        assert mine.locked("k") is False
        handle = mine.acquire("k")
        assert handle is not None
        assert mine.locked("k") is True and theirs.locked("k") is True
        assert theirs.locked("other") is False
        assert handle.release() is True
        assert mine.locked("k") is False
    client.close()


def test_semaphore_locked_is_no_permit_free_for_its_limit(client: Redis) -> None:
    with Semaphore(client, limit=2, prefix="ops", ttl_ms=FOREVER_MS) as sem, \
            Semaphore(client, limit=3, prefix="ops") as wider:
        first = sem.acquire("k")
        assert first is not None
        assert sem.locked("k") is False  # one of two taken
        second = sem.acquire("k")
        assert second is not None
        assert sem.locked("k") is True and wider.locked("k") is False
        assert first.release() is True
        assert sem.locked("k") is False
        assert not hasattr(sem, "owner")  # its permits have several holders
    client.close()


def test_bad_ids_are_refused_before_anything_is_sent(client: Redis) -> None:
    with Lock(client, prefix="op") as locks:
        with pytest.raises(ValidationError):
            locks.locked("")
        with pytest.raises(ValidationError):
            locks.owner("")
        with pytest.raises(ValidationError):
            locks.force_unlock("")
    client.close()


# -- owner --------------------------------------------------------------------------------


def test_owner_tells_its_own_holder_from_another_lock_objects(client: Redis) -> None:
    with Lock(client, prefix="op", ttl_ms=FOREVER_MS) as mine, \
            Lock(client, prefix="op") as theirs:
        assert mine.owner("k") is None
        handle = mine.acquire("k")
        assert handle is not None
        seen = mine.owner("k")
        assert isinstance(seen, LockOwner)
        assert seen.key == "op:k" and seen.token_prefix == handle.token[:8]
        assert seen.ttl_ms is not None and 0 < seen.ttl_ms <= FOREVER_MS
        assert seen.fence is None  # a Lock's fence lives in its handle only
        other = theirs.owner("k")
        assert other is not None
        assert other.token_prefix == handle.token[:8]
        with pytest.raises(AttributeError):
            seen.ttl_ms = 0  # type: ignore[misc]  # frozen
        handle.release()
        assert mine.owner("k") is None
    client.close()


def test_owner_of_a_reentrant_lock_knows_its_fence(client: Redis) -> None:
    with ReentrantLock(client, prefix="opr", ttl_ms=FOREVER_MS) as rlocks, \
            rlocks.hold("k") as outer, rlocks.hold("k"):
        seen = rlocks.owner("k")
        assert seen is not None
        assert seen.fence == outer.fence and seen.token_prefix == outer.token[:8]
        # A plain Lock on the same key (another type) reads it without a WRONGTYPE error.
        with Lock(client, prefix="opr") as plain:
            assert plain.locked("k") is True
            foreign = plain.owner("k")
            assert foreign is not None
            assert foreign.fence == outer.fence
    client.close()


def test_owner_of_a_key_held_by_a_semaphore_is_reported_without_wrongtype(
    client: Redis,
) -> None:
    with Semaphore(client, limit=2, prefix="opx", ttl_ms=FOREVER_MS) as sem, \
            Lock(client, prefix="opx") as locks, sem.hold("k"):
        seen = locks.owner("k")
        assert seen is not None
        assert seen.token_prefix is None and seen.fence is None
        assert seen.ttl_ms is not None and seen.ttl_ms > 0
        assert locks.locked("k") is True
    client.close()


def test_owner_names_the_kind_that_holds_the_key(client: Redis) -> None:
    with Lock(client, prefix="opk", ttl_ms=FOREVER_MS) as locks, \
            ReentrantLock(client, prefix="opk", ttl_ms=FOREVER_MS) as rlocks, \
            Semaphore(client, limit=2, prefix="opk", ttl_ms=FOREVER_MS) as sem, \
            locks.hold("l"), rlocks.hold("r"), sem.hold("s"):
        kinds = [locks.owner(id) for id in ("l", "r", "s")]
        assert [(k.kind, k.readers) for k in kinds if k is not None] == [
            ("lock", None), ("reentrant", None), ("semaphore", None)
        ]
    client.close()


def test_owner_of_a_read_write_lock_reports_its_writer_and_its_readers(
    client: Redis,
) -> None:
    with ReadWriteLock(client, prefix="oprw", ttl_ms=FOREVER_MS) as docs, \
            ReadWriteLock(client, prefix="oprw", ttl_ms=FOREVER_MS) as others, \
            Lock(client, prefix="oprw") as plain:
        first = docs.read.acquire("k")
        second = others.read.acquire("k")
        assert first is not None and second is not None
        seen = plain.owner("k")
        assert seen is not None
        assert (seen.kind, seen.readers, seen.token_prefix, seen.fence) == (
            "read-write", 2, None, None
        )
        assert seen.ttl_ms is not None and 0 < seen.ttl_ms <= FOREVER_MS
        assert first.release() is True and second.release() is True
        assert plain.owner("k") is None
        writer = docs.write.acquire("k")
        assert writer is not None
        seen = plain.owner("k")
        assert seen is not None
        assert (seen.kind, seen.readers) == ("read-write", 0)
        assert (seen.token_prefix, seen.fence) == (writer.token[:8], writer.fence)
        assert writer.release() is True
    client.close()


def test_owner_of_a_read_write_lock_under_the_operators_acl(
    redis_server: RedisServer, r: redis.Redis
) -> None:
    # The documented operator has no rights on distlock:readers:*: the readers are not
    # counted, and nothing is refused.
    r.execute_command("ACL", "SETUSER", "operator", *documented_acl("operator"))  # type: ignore[no-untyped-call]
    admin = Redis.from_url(redis_server.url)
    operator = Redis.from_url(redis_server.url, username="operator", password="s3cret")
    try:
        with ReadWriteLock(admin, prefix="orders", ttl_ms=FOREVER_MS) as docs, \
                Lock(operator, prefix="orders") as plain:
            reader = docs.read.acquire("rw")
            assert reader is not None
            seen = plain.owner("rw")
            assert seen is not None
            assert (seen.kind, seen.readers, seen.token_prefix) == ("read-write", None, None)
            assert reader.release() is True
    finally:
        r.execute_command("ACL", "DELUSER", "operator")  # type: ignore[no-untyped-call]
        admin.close()
        operator.close()


def test_a_key_without_a_ttl_is_reported_as_such(client: Redis, r: redis.Redis) -> None:
    r.set("op:stuck", "0" * 32)
    with Lock(client, prefix="op") as locks:
        seen = locks.owner("stuck")
        assert seen is not None and seen.ttl_ms is None and seen.token_prefix == "0" * 8
    client.close()


# -- force_unlock -------------------------------------------------------------------------


def test_force_unlock_evicts_the_holder_bumps_the_fence_and_the_holder_learns_it(
    client: Redis, r: redis.Redis
) -> None:
    evicted = Event()
    fences: dict[str, int] = {}

    def body(handle: LockHandle) -> None:
        fences["evicted"] = handle.fence
        evicted.set()
        # Its next renewal finds the key gone: the signal fires.
        signalled(handle.signal)

    with Lock(client, prefix="opf", ttl_ms=FOREVER_MS, heartbeat_ms=20) as locks, \
            Lock(client, prefix="opf") as operator:
        holder = spawn(locks.run, "k", body, **UNCANCELLED)
        evicted.wait()
        counter = int(r.get(fence_key("opf:k")) or 0)
        assert operator.force_unlock("k") is True
        # The counter moved in the same step: above the evicted holder's fence already (by
        # one, or up to the floor of Redis's clock if that is further: lib/fence.lua).
        assert int(r.get(fence_key("opf:k")) or 0) > counter
        with pytest.raises(LockLeaseLostError) as lost:
            holder.result()
        assert lost.value.reason is LossReason.RENEW_REJECTED
        assert operator.force_unlock("k") is False  # nothing left to delete
        taken = operator.acquire("k")
        assert taken is not None and taken.fence > fences["evicted"] + 1
        taken.release()
    client.close()


def test_force_unlock_wakes_the_first_waiter(client: Redis, r: redis.Redis) -> None:
    with Lock(client, prefix="opw", ttl_ms=FOREVER_MS) as locks, \
            Lock(client, prefix="opw") as theirs:
        held = locks.acquire("k")
        assert held is not None
        waiter = spawn(theirs.acquire, "k", wait_ms=FOREVER_MS)
        until(lambda: r.llen(queue_keys("opw:k")[0]) == 1, "the waiter queued")
        assert locks.force_unlock("k") is True
        woken = waiter.result()
        assert isinstance(woken, LockHandle) and woken.fence > held.fence + 1
        assert held.release() is False  # the evicted handle learns at its release
        assert woken.release() is True
        assert theirs.force_unlock("k") is False  # nothing left to delete
    client.close()


def test_force_unlock_of_a_semaphore_frees_every_permit(client: Redis) -> None:
    with Semaphore(client, limit=1, prefix="opsf", ttl_ms=FOREVER_MS) as sem:
        permit = sem.acquire("k")
        assert permit is not None and sem.locked("k") is True
        assert sem.force_unlock("k") is True
        assert sem.locked("k") is False
        again = sem.acquire("k")
        assert again is not None
        again.release()
    client.close()
