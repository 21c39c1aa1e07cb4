"""``inspect`` of what waiting and releasing leave in Redis: queues with their waiters in
order, their places, release records of either type, a semaphore's release memory, and
bookkeeping families it was not told of by name, read from a real redis-server."""

from __future__ import annotations

import json

import redis

import distlock
from distlock._protocol import permits_released_key, queue_keys, released_key
from distlock.tools.inspect import (
    LEADER_RECORD,
    LIMIT_NOTE,
    LOCK,
    QUEUE,
    QUEUE_PLACES,
    RELEASE_RECORD,
    SEMAPHORE,
    Held,
    format_table,
    inspect,
    places_key,
    read_only_acl,
)
from tests.redis_server import RedisServer, redis_ms
from tests.waiting import queue, start_waiting

TOKEN_A = "a" * 32
TOKEN_B = "b" * 32
FOREVER_MS = 60_000


def own(client: redis.Redis) -> dict[str, Held]:
    return {h.key: h for h in inspect(client, "distlock").held}



def test_a_queue_lists_its_waiters_in_order_with_the_head_and_their_places(
    r: redis.Redis,
) -> None:
    with distlock.Lock(r, prefix="iq", ttl_ms=FOREVER_MS) as locks:
        holder = locks.acquire("k")
        assert holder is not None
        first = start_waiting(r, "iq:k", lambda: locks.acquire("k", wait_ms=FOREVER_MS))
        second = start_waiting(r, "iq:k", lambda: locks.acquire("k", wait_ms=FOREVER_MS))
        order = [t.decode()[:8] for t in queue(r, "iq:k")]
        found = own(r)
        queue_key, places, _ = queue_keys("iq:k")
        row = found[queue_key]
        assert (row.kind, row.redis_type, row.waiter_count) == (QUEUE, "list", 2)
        assert row.waiters is not None
        assert [w.token_prefix for w in row.waiters] == order
        assert row.head is row.waiters[0]
        for waiter in row.waiters:
            assert waiter.live and waiter.place_ms is not None
            assert 0 < waiter.place_ms <= FOREVER_MS + 10_000
            # A manual handle is never renewed: a release wakes it rather than hand it the key.
            assert waiter.handoff_ttl_ms is None
        assert row.ttl_ms is not None and row.ttl_ms > 0
        assert found[places].kind == QUEUE_PLACES
        table = format_table(inspect(r, "distlock"))
        assert f"{queue_key}: 2 waiters, head first: {order[0]} place " in table
        assert "unknown (list)" not in table and "unknown (hash)" not in table
        as_json = json.loads(json.dumps(row.as_dict()))
        assert [w["token_prefix"] for w in as_json["waiters"]] == order
        assert as_json["waiter_count"] == 2
        assert holder.release() is True
        handed = first.outcome()
        assert isinstance(handed, distlock.LockHandle)
        assert handed.release() is True
        last = second.outcome()
        assert isinstance(last, distlock.LockHandle)
        last.release()


def test_a_waiter_whose_place_expired_is_shown_expired(r: redis.Redis) -> None:
    queue_key, places, _ = queue_keys("ix:k")
    r.rpush(queue_key, TOKEN_A, TOKEN_B)
    now = redis_ms(r)
    r.hset(places, mapping={TOKEN_A: now - 5, TOKEN_B: now + 20_000})
    r.pexpire(queue_key, 30_000)
    r.pexpire(places, 30_000)
    row = own(r)[queue_key]
    assert row.waiters is not None
    head, behind = row.waiters
    assert head.token_prefix == TOKEN_A[:8] and not head.live
    assert head.handoff_ttl_ms is None  # woken, never handed the key
    assert behind.live
    assert "aaaaaaaa place expired" in format_table(inspect(r, "distlock"))


def test_a_second_queue_family_is_recognised_by_its_name(r: redis.Redis) -> None:
    """``distlock:rqueue:{tag}:<key>`` and its ``rqueued`` places: any ``...queue`` word."""
    queue_key = queue_keys("ir:k")[0].replace("distlock:queue:", "distlock:rqueue:")
    places = places_key(queue_key)
    assert places.startswith("distlock:rqueued:{") and places.endswith("}:ir:k")
    r.rpush(queue_key, TOKEN_A)
    r.hset(places, mapping={TOKEN_A: redis_ms(r) + 20_000, ">" + TOKEN_A: 5_000})
    r.pexpire(queue_key, 30_000)
    r.pexpire(places, 30_000)
    found = own(r)
    row = found[queue_key]
    assert row.kind == QUEUE and row.waiters is not None
    [waiter] = row.waiters
    assert (waiter.token_prefix, waiter.handoff_ttl_ms) == (TOKEN_A[:8], 5_000)
    assert found[places].kind == QUEUE_PLACES


def test_release_records_of_either_type_and_a_semaphores_release_memory(
    r: redis.Redis,
) -> None:
    with distlock.Lock(r, prefix="irl", ttl_ms=FOREVER_MS) as locks:
        handle = locks.acquire("k")
        assert handle is not None and handle.release() is True
    with distlock.Semaphore(r, limit=2, prefix="irs", ttl_ms=FOREVER_MS) as sem:
        permit = sem.acquire("k")
        assert permit is not None and permit.release() is True
    # A release record kept as a sorted set (token -> forget instant), as a memory may be.
    as_zset = released_key("irz:k", TOKEN_A)
    r.zadd(as_zset, {TOKEN_A: redis_ms(r) + 30_000})
    r.pexpire(as_zset, 30_000)
    found = own(r)
    string_record = found[released_key("irl:k", handle.token)]
    assert (string_record.kind, string_record.token_prefix) == (RELEASE_RECORD, handle.token[:8])
    memory = found[permits_released_key("irs:k")]
    assert memory.kind == RELEASE_RECORD and memory.remembered_count == 1
    assert memory.remembered is not None
    [remembered] = memory.remembered
    assert remembered.token_prefix == permit.token[:8] and remembered.live
    zset_record = found[as_zset]
    assert zset_record.kind == RELEASE_RECORD  # not a semaphore: a token scored by time
    assert zset_record.remembered is not None
    assert [p.token_prefix for p in zset_record.remembered] == [TOKEN_A[:8]]
    table = format_table(inspect(r, "distlock"))
    assert f"{permits_released_key('irs:k')}: remembers 1 releases: {permit.token[:8]} for " in (
        table
    )


def test_a_semaphore_row_says_the_limit_is_not_stored(r: redis.Redis) -> None:
    with distlock.Semaphore(r, limit=3, prefix="ils", ttl_ms=FOREVER_MS) as sem, \
            sem.hold("k") as permit:
        [row] = inspect(r, "ils").held
        assert (row.kind, row.permit_count) == (SEMAPHORE, 1)
        table = format_table(inspect(r, "ils"))
        assert f"ils:k: 1 permits: {permit.token[:8]} " in table
        assert LIMIT_NOTE in table.splitlines()
    assert LIMIT_NOTE not in format_table(inspect(r, "ils"))  # said only under a semaphore


def test_the_read_only_acl_reads_queues(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    rules = ["on", ">s3cret", *read_only_acl("distlock")]
    admin.execute_command("ACL", "SETUSER", "inspector", *rules)  # type: ignore[no-untyped-call]
    reader = redis.Redis(port=fresh_redis.port, username="inspector", password="s3cret")
    queue_key, places, _ = queue_keys("ia:k")
    admin.rpush(queue_key, TOKEN_A)
    admin.hset(places, TOKEN_A, redis_ms(admin) + 20_000)
    admin.pexpire(queue_key, 30_000)
    admin.pexpire(places, 30_000)
    row = {h.key: h for h in inspect(reader, "distlock").held}[queue_key]
    assert row.kind == QUEUE and row.head is not None and row.head.live
    reader.close()
    admin.close()


def test_each_kind_s_queue_is_recognised_with_its_places() -> None:
    from distlock._core.commands import Kind
    from distlock.tools.inspect import internal_word, places_key

    for kind in Kind:
        queue_key, places, wake = queue_keys("iq:k", kind)
        assert internal_word(queue_key) == "queue" and places_key(queue_key) == places
        assert internal_word(places) == "queued" and internal_word(wake + "t") == "wake"


def test_an_election_shows_its_key_as_a_lock_and_its_leader_record(r: redis.Redis) -> None:
    from distlock._protocol import leader_key

    with distlock.Election(r, "k", prefix="ie", identity="node-1", ttl_ms=FOREVER_MS) as e:
        leadership = e.campaign(wait_ms=0)
        assert leadership is not None
        found = own(r)
        record = found[leader_key("ie:k")]
        assert record.kind == LEADER_RECORD and record.ttl_ms is not None
        held = {h.key: h for h in inspect(r, "ie").held}["ie:k"]
        assert (held.kind, held.token_prefix) == (LOCK, leadership.token[:8])
