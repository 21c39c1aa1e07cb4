"""``python -m distlock inspect``: what is held under a prefix, read from a real redis-server
without changing it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import distlock
from distlock._protocol import fence_key
from distlock.tools.inspect import (
    FENCE_COUNTER,
    LOCK,
    REENTRANT,
    RELEASE_RECORD,
    UNKNOWN,
    Held,
    InspectError,
    InspectRefusedError,
    Probe,
    _read_batch,
    _read_hashes,
    format_table,
    inspect,
    match_pattern,
    read_only_acl,
)
from tests.redis_server import RedisServer, free_port

ROOT = Path(__file__).resolve().parent.parent
TOKEN = "0123456789abcdef0123456789abcdef"

#: What inspecting may send: the read commands, and what redis-py says on connecting.
READ_COMMANDS = {"scan", "type", "getrange", "pttl", "get", "hlen", "hrandfield", "hmget", "time"}
CONNECTING = {"client|setinfo", "hello", "auth", "select", "ping"}


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m distlock`` from this checkout, as an operator runs it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "distlock", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False,
    )


def by_key(client: redis.Redis, prefix: str) -> dict[str, Held]:
    return {h.key: h for h in inspect(client, prefix).held}


# -- locks taken by real Lock handles --------------------------------------------------------


def test_held_locks_show_with_key_kind_ttl_token_and_fence_counter(r: redis.Redis) -> None:
    with distlock.Lock(r, prefix="order", ttl_ms=60_000) as locks:
        first = locks.acquire("42")
        second = locks.acquire("43", ttl_ms=20_000)
        assert first is not None and second is not None
        held = by_key(r, "order")
        assert sorted(held) == ["order:42", "order:43"]
        for handle, ttl in ((first, 60_000), (second, 20_000)):
            row = held[handle.key]
            assert row.kind == LOCK
            assert row.redis_type == "string"
            assert row.ttl_ms is not None and 0 < row.ttl_ms <= ttl
            assert row.expires and not row.stuck
            assert row.token_prefix == handle.token[:8]
            # The slot's counter is an upper bound on the holder's fence, and is exactly the
            # counter the acquire script drew from.
            assert row.fence_counter is not None and row.fence_counter >= handle.fence
            assert row.fence_counter == int(r.get(fence_key(handle.key)) or 0)
        first.release()
        second.release()
        # Released locks vanish; their release records live under distlock:, not here.
        assert inspect(r, "order").held == ()


def test_a_section_running_under_run_sees_its_own_key(r: redis.Redis) -> None:
    with distlock.Lock(r, prefix="job", ttl_ms=30_000) as locks:

        def body(handle: distlock.LockHandle) -> list[Held]:
            return list(inspect(r, "job").held)

        [row] = locks.run("nightly", body)
        assert (row.key, row.kind) == ("job:nightly", LOCK)
    assert inspect(r, "job").held == ()


def test_rows_are_sorted_by_key_and_each_key_is_listed_once(r: redis.Redis) -> None:
    ids = [f"{n:03}" for n in range(60)]
    with distlock.Lock(r, prefix="many", ttl_ms=60_000) as locks:
        handles = [locks.acquire(i) for i in reversed(ids)]
        # A batch of one key per SCAN call: many round trips, one listing.
        keys = [h.key for h in inspect(r, "many", count=1).held]
        assert keys == [f"many:{i}" for i in ids]
        for handle in handles:
            assert handle is not None
            handle.release()


def test_limit_stops_early_and_says_so(r: redis.Redis) -> None:
    with distlock.Lock(r, prefix="lim", ttl_ms=60_000) as locks:
        handles = [locks.acquire(str(n)) for n in range(5)]
        cut = inspect(r, "lim", count=1, limit=2)
        assert len(cut.held) == 2 and cut.truncated
        whole = inspect(r, "lim", limit=5)
        assert len(whole.held) == 5 and not whole.truncated
        for handle in handles:
            assert handle is not None
            handle.release()


def test_a_client_that_decodes_responses_reads_the_same(redis_server: RedisServer) -> None:
    raw = redis.Redis(port=redis_server.port)
    text = redis.Redis(port=redis_server.port, decode_responses=True)
    with distlock.Lock(raw, prefix="dec", ttl_ms=60_000) as locks:
        handle = locks.acquire("x")
        assert handle is not None
        [row] = inspect(text, "dec").held
        assert (row.key, row.kind, row.token_prefix) == ("dec:x", LOCK, handle.token[:8])
        handle.release()
    raw.close()
    text.close()


# -- the reentrant lock: a hash {<token>: depth, fence: <fence>} -----------------------------


def test_a_held_reentrant_lock_shows_its_depth_fence_and_token(r: redis.Redis) -> None:
    with distlock.ReentrantLock(r, prefix="cart", ttl_ms=60_000) as locks:
        with locks.hold("7") as outer:
            [row] = inspect(r, "cart").held
            assert (row.key, row.kind, row.redis_type) == ("cart:7", REENTRANT, "hash")
            assert (row.depth, row.fence, row.token_prefix) == (1, outer.fence, outer.token[:8])
            assert row.ttl_ms is not None and 0 < row.ttl_ms <= 60_000 and not row.stuck
            # The exact fence is the hash's; the slot's counter is a plain lock's column.
            assert row.fence_counter is None
            with locks.hold("7") as inner:
                assert inner.depth == 2
                [row] = inspect(r, "cart").held
                assert (row.kind, row.depth, row.fence) == (REENTRANT, 2, outer.fence)
                assert row.token_prefix == outer.token[:8]
                assert row.as_dict()["depth"] == 2 and row.as_dict()["fence"] == outer.fence
                table = format_table(inspect(r, "cart"))
                cells = table.splitlines()[1].split()
                assert cells[:2] == ["cart:7", "reentrant"]
                assert cells[3:] == [outer.token[:8], "2", str(outer.fence), "-"]
            # The inner exit kept the key, one level down.
            [row] = inspect(r, "cart").held
            assert (row.kind, row.depth, row.fence) == (REENTRANT, 1, outer.fence)
        # The outermost exit freed it.
        assert inspect(r, "cart").held == ()


def test_the_fence_is_the_holders_own_not_its_slots_counter(r: redis.Redis) -> None:
    with distlock.ReentrantLock(r, prefix="fen", ttl_ms=60_000) as locks, locks.hold(
        "a"
    ) as first:
        # Later grants in the same slot move the counter on, never the holder's fence.
        for _ in range(3):
            r.incr(fence_key(first.key))
        [row] = inspect(r, "fen").held
        assert row.fence == first.fence < int(r.get(fence_key(first.key)) or 0)


@pytest.mark.parametrize(
    "fields",
    [
        {"fence": "1", "notatoken": "1"},  # the other field is not a token
        {TOKEN: "1", "other": "1"},  # no fence field
        {TOKEN: "0", "fence": "1"},  # depth below 1
        {TOKEN: "01", "fence": "1"},  # not a number Redis would write
        {TOKEN: "1", "fence": "-3"},
        {TOKEN: "1", "fence": "x"},
        {TOKEN: "1", "fence": "9" * 5000},  # too long for an int64 (and for int())
        {TOKEN.upper(): "1", "fence": "1"},  # tokens are lowercase
        {TOKEN + "0": "1", "fence": "1"},
        {"fence": "1"},  # one field
        {TOKEN: "1", "fence": "1", "extra": "1"},  # three fields, two of them the layout
    ],
)
def test_a_hash_that_is_not_the_layout_is_unknown(
    r: redis.Redis, fields: dict[str, str]
) -> None:
    r.hset("odd:1", items=[part for pair in fields.items() for part in pair])
    r.pexpire("odd:1", 60_000)
    [row] = inspect(r, "odd").held
    assert (row.kind, row.redis_type) == (UNKNOWN, "hash")
    assert (row.depth, row.fence, row.token_prefix, row.fence_counter) == (None,) * 4
    assert row.ttl_ms is not None and 0 < row.ttl_ms <= 60_000
    assert "unknown (hash)" in format_table(inspect(r, "odd"))


def test_a_large_foreign_hash_is_unknown_and_not_read_whole(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    fields = {f"field:{n:05}": "v" * 20 for n in range(10_000)}
    admin.hset("big:h", items=[part for pair in fields.items() for part in pair])
    size = sum(len(f) + len(v) for f, v in fields.items())  # what reading it whole would move
    with distlock.ReentrantLock(admin, prefix="big", ttl_ms=60_000) as locks:
        # A manual acquire: no renewal runs (and is counted) while the reads are counted.
        handle = locks.acquire("lock")
        assert handle is not None
        admin.config_resetstat()
        sent_before = int(admin.info("stats")["total_net_output_bytes"])
        reader = redis.Redis(port=fresh_redis.port)
        held = by_key(reader, "big")
        reader.close()
        sent = int(admin.info("stats")["total_net_output_bytes"]) - sent_before
        assert (held["big:h"].kind, held["big:h"].redis_type) == (UNKNOWN, "hash")
        assert (held["big:lock"].kind, held["big:lock"].fence) == (REENTRANT, handle.fence)
        stats = admin.info("commandstats")
        # Each hash was read by HLEN, one HRANDFIELD of two fields and one HMGET of a
        # read-write lock's four fields, and by nothing else.
        assert stats["cmdstat_hlen"]["calls"] == 2
        assert stats["cmdstat_hrandfield"]["calls"] == 2
        assert stats["cmdstat_hmget"]["calls"] == 2
        whole = {"hgetall", "hkeys", "hvals", "hscan", "dump"}
        assert not {name.removeprefix("cmdstat_") for name in stats} & whole
        # Everything the server sent while it was read is a small fraction of the hash.
        assert sent < size // 20
        assert handle.release() is True
    admin.close()


def test_a_hash_gone_or_no_longer_a_hash_after_its_type_was_read_is_skipped(
    r: redis.Redis,
) -> None:
    with distlock.ReentrantLock(r, prefix="turn", ttl_ms=60_000) as locks, locks.hold(
        "here"
    ) as handle:
        r.set("turn:string", TOKEN, px=60_000)

        def probe(key: str) -> tuple[bytes, Probe]:
            # What the first round trip saw: a hash, which has since changed or gone.
            return key.encode(), Probe(key, "hash", 60_000, None, None)

        probes = [probe("turn:gone"), probe("turn:string"), probe(handle.key)]
        [row] = _read_hashes(r, probes, match_pattern("turn"))
        assert (row.key, row.length) == (handle.key, 2)
        assert dict(row.fields) == {handle.token: "1", "fence": str(handle.fence)}
        # The string is then read as what it now is.
        assert by_key(r, "turn")["turn:string"].kind == LOCK


def test_a_batch_without_hashes_takes_one_round_trip(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    with distlock.Lock(admin, prefix="one", ttl_ms=60_000) as locks, locks.hold("1"):
        admin.config_resetstat()
        reader = redis.Redis(port=fresh_redis.port)
        assert [h.kind for h in inspect(reader, "one").held] == [LOCK]
        reader.close()
        sent = {name.removeprefix("cmdstat_") for name in admin.info("commandstats")}
        assert not {"hlen", "hrandfield"} & sent
    admin.close()


def test_a_user_without_the_hash_reads_is_told_what_it_needs(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", "nohash", "on", ">pw", *read_only_acl("cart"), "-hrandfield"
    )
    reader = redis.Redis(port=fresh_redis.port, username="nohash", password="pw")
    with distlock.ReentrantLock(admin, prefix="cart", ttl_ms=60_000) as locks, locks.hold("1"):
        with pytest.raises(InspectRefusedError) as caught:
            inspect(reader, "cart")
        assert caught.value.command == "HRANDFIELD"
        assert "+hrandfield" in caught.value.permission
    reader.close()
    admin.close()


# -- the prefix is literal -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "decoy"),
    [("a*b", "aXb"), ("a?c", "abc"), ("x[1]", "x1"), ("x[^]", "xy"), ("p\\q", "pq")],
)
def test_glob_characters_in_the_prefix_match_only_themselves(
    r: redis.Redis, prefix: str, decoy: str
) -> None:
    with distlock.Lock(r, prefix=prefix, ttl_ms=60_000) as locks, distlock.Lock(
        r, prefix=decoy, ttl_ms=60_000
    ) as decoys:
        handle = locks.acquire("1")
        other = decoys.acquire("1")
        assert handle is not None and other is not None
        # Unescaped, the pattern would have matched the decoy's key too.
        assert f"{decoy}:1".encode() in set(r.scan_iter(match=f"{prefix}:*"))
        assert [h.key for h in inspect(r, prefix).held] == [f"{prefix}:1"]
        handle.release()
        other.release()


def test_match_pattern_escapes_every_glob_character() -> None:
    assert match_pattern("lock") == "lock:*"
    assert match_pattern("a*?[]\\z") == "a\\*\\?\\[\\]\\\\z:*"


# -- what is not a lock ----------------------------------------------------------------------


def test_foreign_keys_show_as_unknown_with_their_redis_type(r: redis.Redis) -> None:
    r.hset("mix:hash", "token", 1)
    r.rpush("mix:list", "a")
    r.sadd("mix:set", "a")
    r.zadd("mix:zset", {"a": 1.0})
    r.xadd("mix:stream", {"a": "1"})
    r.set("mix:text", "not a token", px=60_000)
    r.set("mix:long", TOKEN + "0", px=60_000)  # 33 characters: a token and then some
    r.pexpire("mix:hash", 60_000)
    held = by_key(r, "mix")
    types = {key: (h.kind, h.redis_type) for key, h in held.items()}
    assert types == {
        "mix:hash": (UNKNOWN, "hash"),
        "mix:list": (UNKNOWN, "list"),
        "mix:set": (UNKNOWN, "set"),
        "mix:zset": (UNKNOWN, "zset"),
        "mix:stream": (UNKNOWN, "stream"),
        "mix:text": (UNKNOWN, "string"),
        "mix:long": (UNKNOWN, "string"),
    }
    assert all(h.token_prefix is None and h.fence_counter is None for h in held.values())
    assert all(h.depth is None and h.fence is None for h in held.values())
    hash_ttl = held["mix:hash"].ttl_ms
    assert hash_ttl is not None and 0 < hash_ttl <= 60_000
    table = format_table(inspect(r, "mix"))
    assert "unknown (hash)" in table and "unknown (stream)" in table


def test_a_key_without_ttl_is_flagged(r: redis.Redis) -> None:
    with distlock.Lock(r, prefix="stuck", ttl_ms=60_000) as locks:
        handle = locks.acquire("1")
        assert handle is not None
        r.persist(handle.key)  # someone removed its TTL: it now blocks "1" for ever
        [row] = inspect(r, "stuck").held
        assert (row.kind, row.ttl_ms, row.expires, row.stuck) == (LOCK, None, False, True)
        assert row.as_dict()["ttl_ms"] is None and row.as_dict()["stuck"] is True
        table = format_table(inspect(r, "stuck"))
        assert "none!" in table
        assert "warning: 1 key without a TTL (none!) will never expire: stuck:1" in table
        assert handle.release() is True


def test_bookkeeping_keys_are_listed_only_under_their_own_prefix(r: redis.Redis) -> None:
    with distlock.Lock(r, prefix="lock", ttl_ms=60_000) as locks:
        kept = locks.acquire("kept")
        gone = locks.acquire("gone")
        assert kept is not None and gone is not None
        assert gone.release() is True
        counters = {fence_key(kept.key), fence_key(gone.key)}
        assert all(r.exists(c) for c in counters)
        # The default prefix lists the lock only: no counter, no release record.
        assert [(h.key, h.kind) for h in inspect(r).held] == [(kept.key, LOCK)]
        # Asked for explicitly, they are labelled for what they are, never as locks (the
        # release record holds a token too).
        own = by_key(r, "distlock")
        assert {k for k, h in own.items() if h.kind == FENCE_COUNTER} == counters
        [record] = [h for h in own.values() if h.kind == RELEASE_RECORD]
        assert record.key.endswith(":" + gone.key)
        assert record.token_prefix == gone.token[:8]
        assert record.ttl_ms is not None
        assert {h.kind for h in own.values()} == {FENCE_COUNTER, RELEASE_RECORD}
        for counter in counters:
            assert own[counter].fence_counter == int(r.get(counter) or 0)
            assert not own[counter].stuck  # counters never expire, by design
        assert "warning" not in format_table(inspect(r, "distlock"))
        kept.release()


def test_a_key_gone_between_scan_and_type_is_skipped(r: redis.Redis) -> None:
    with distlock.Lock(r, prefix="race", ttl_ms=60_000) as locks:
        handle = locks.acquire("here")
        assert handle is not None
        # The keys one SCAN call returned, one of which was released before it was read.
        rows = _read_batch(r, [b"race:gone", handle.key.encode()], match_pattern("race"))
        assert [h.key for h in rows] == ["race:here"]
        handle.release()
        assert _read_batch(r, [handle.key.encode()], match_pattern("race")) == []


def test_bad_arguments_are_validation_errors(r: redis.Redis) -> None:
    for bad in ({"count": 0}, {"limit": 0}, {"count": True}):
        with pytest.raises(distlock.ValidationError):
            inspect(r, "x", **bad)
    with pytest.raises(distlock.ValidationError):
        inspect(r, "")


# -- read-only -------------------------------------------------------------------------------


def test_inspecting_sends_only_read_commands(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    with distlock.Lock(admin, prefix="ro", ttl_ms=60_000) as locks, distlock.ReentrantLock(
        admin, prefix="ro", ttl_ms=60_000
    ) as nested:
        # Manual acquires: no renewal runs (and is counted) while the reads are counted.
        handle = locks.acquire("1")
        outer = nested.acquire("2")
        inner = nested.acquire("2")
        assert handle is not None and outer is not None and inner is not None
        admin.hset("ro:foreign", "a", 1)
        before = {k: admin.dump(k) for k in admin.scan_iter()}
        admin.config_resetstat()
        reader = redis.Redis(port=fresh_redis.port)
        kinds = {h.key: h.kind for h in inspect(reader, "ro", count=1).held}
        assert kinds == {"ro:1": LOCK, "ro:2": REENTRANT, "ro:foreign": UNKNOWN}
        reader.close()
        sent = {name.removeprefix("cmdstat_") for name in admin.info("commandstats")}
        assert sent >= READ_COMMANDS  # not vacuous: the reads were counted
        assert sent - READ_COMMANDS - CONNECTING == {"config|resetstat"}
        assert {k: admin.dump(k) for k in admin.scan_iter()} == before
        assert inner.release() and outer.release() and handle.release()
    admin.close()


def test_the_read_only_acl_is_enough(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    rules = ["on", ">s3cret", *read_only_acl("orders")]
    admin.execute_command("ACL", "SETUSER", "inspector", *rules)  # type: ignore[no-untyped-call]
    reader = redis.Redis(port=fresh_redis.port, username="inspector", password="s3cret")
    with distlock.Lock(admin, prefix="orders", ttl_ms=60_000) as locks, distlock.ReentrantLock(
        admin, prefix="orders", ttl_ms=60_000
    ) as nested, nested.hold("r") as outer, nested.hold("r") as inner:
        handle = locks.acquire("1")
        assert handle is not None
        lock_row, reentrant_row = inspect(reader, "orders").held
        assert (lock_row.key, lock_row.kind, lock_row.fence_counter) == (
            "orders:1", LOCK, handle.fence
        )
        assert (reentrant_row.key, reentrant_row.kind) == ("orders:r", REENTRANT)
        assert inner.depth == 2
        assert (reentrant_row.depth, reentrant_row.fence) == (2, outer.fence)
        assert reentrant_row.token_prefix == outer.token[:8]
        # Not vacuous: the user cannot write, not even to the keys it reads.
        with pytest.raises(redis.exceptions.NoPermissionError):
            reader.delete("orders:1")
        with pytest.raises(redis.exceptions.NoPermissionError):
            reader.set("orders:2", "x")
        with pytest.raises(redis.exceptions.NoPermissionError):
            reader.hset("orders:r", "fence", 1)
        handle.release()
    reader.close()
    admin.close()


def test_a_refused_command_is_named_with_the_permission_it_needs(
    fresh_redis: RedisServer,
) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    no_getrange = [r for r in read_only_acl("orders") if r != "+getrange"]
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", "partial", "on", ">pw", *no_getrange
    )
    no_counters = [r for r in read_only_acl("orders") if r != "%R~distlock:fence:*"]
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", "blind", "on", ">pw", *no_counters
    )
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", "noscan", "on", ">pw", *read_only_acl("orders"), "-scan"
    )
    with distlock.Lock(admin, prefix="orders", ttl_ms=60_000) as locks:
        handle = locks.acquire("1")
        assert handle is not None
        cases = [("partial", "GETRANGE", "+getrange"), ("blind", "GET", "%R~distlock:fence:*"),
                 ("noscan", "SCAN", "+scan")]
        for user, command, permission in cases:
            client = redis.Redis(port=fresh_redis.port, username=user, password="pw")
            with pytest.raises(InspectRefusedError) as caught:
                inspect(client, "orders")
            assert caught.value.command == command
            assert permission in caught.value.permission
            client.close()
        # The same through the command line: one line, the command and the permission.
        url = f"redis://partial:pw@127.0.0.1:{fresh_redis.port}/0"
        done = cli("inspect", url, "--prefix", "orders")
        assert done.returncode == 1
        assert done.stdout == ""
        [line] = done.stderr.splitlines()
        assert line.startswith("error: Redis refused GETRANGE on 'orders:1'")
        assert "+getrange" in line
        handle.release()
    admin.close()


# -- the command line ------------------------------------------------------------------------


def test_cli_table_and_json(redis_server: RedisServer, r: redis.Redis) -> None:
    with distlock.Lock(r, prefix="cli", ttl_ms=60_000) as locks:
        b = locks.acquire("b")
        a = locks.acquire("a")
        assert a is not None and b is not None
        r.sadd("cli:set", "x")
        table = cli("inspect", redis_server.url, "--prefix", "cli")
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].split() == [
            "KEY", "KIND", "TTL_MS", "TOKEN", "DEPTH", "FENCE", "FENCE_COUNTER"
        ]
        assert [line.split()[0] for line in lines[1:4]] == ["cli:a", "cli:b", "cli:set"]
        assert lines[1].split()[1] == "lock" and lines[1].split()[3] == a.token[:8]
        assert lines[1].split()[4:6] == ["-", "-"]  # no depth, no fence of its own
        assert "unknown (set)" in lines[3]
        assert "fence_counter is the last fence issued in the key's slot" in table.stdout

        done = cli("inspect", redis_server.url, "--prefix", "cli", "--json")
        assert done.returncode == 0, done.stderr
        rows = json.loads(done.stdout)
        assert isinstance(rows, list)
        assert [(row["key"], row["kind"]) for row in rows] == [
            ("cli:a", "lock"), ("cli:b", "lock"), ("cli:set", "unknown")
        ]
        for row in rows:
            assert {"key", "kind", "ttl_ms", "redis_type", "expires"} <= row.keys()
        assert 0 < rows[0]["ttl_ms"] <= 60_000
        assert rows[0]["token_prefix"] == a.token[:8]
        assert rows[2]["ttl_ms"] is None and rows[2]["redis_type"] == "set"
        # A reentrant lock's fields are there for every key, null where they do not apply.
        assert all(row["depth"] is None and row["fence"] is None for row in rows)
        assert rows[0]["fence_counter"] is not None
        # A semaphore's, a queue's and a release memory's fields are null for a lock.
        assert rows[0]["permits"] is None and rows[0]["permit_count"] is None
        assert rows[0]["waiters"] is None and rows[0]["waiter_count"] is None
        assert rows[0]["remembered"] is None and rows[0]["remembered_count"] is None
        a.release()
        b.release()


def test_cli_nothing_held(redis_server: RedisServer) -> None:
    table = cli("inspect", redis_server.url, "--prefix", "vacant")
    assert (table.returncode, table.stdout) == (0, "nothing held under prefix 'vacant'\n")
    done = cli("inspect", redis_server.url, "--prefix", "vacant", "--json")
    assert (done.returncode, json.loads(done.stdout)) == (0, [])


def test_cli_default_prefix_is_the_lock_default(redis_server: RedisServer, r: redis.Redis) -> None:
    with distlock.Lock(r) as locks:
        handle = locks.acquire("default")
        assert handle is not None
        done = cli("inspect", redis_server.url, "--json")
        assert [row["key"] for row in json.loads(done.stdout)] == ["lock:default"]
        handle.release()


def test_cli_unreachable_redis_is_one_line_and_nonzero() -> None:
    done = cli("inspect", f"redis://127.0.0.1:{free_port()}/0")
    assert done.returncode == 1
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("error: cannot reach Redis")
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    "args", [["http://localhost"], ["redis://localhost:port/0"], ["redis://h", "--count", "0"], []]
)
def test_cli_bad_url_or_usage_exits_2(args: list[str]) -> None:
    done = cli("inspect", *args)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip()


def test_unreachable_redis_is_a_typed_error() -> None:
    client = redis.Redis(port=free_port(), retry=Retry(NoBackoff(), 0))
    with pytest.raises(InspectError, match="cannot reach Redis"):
        inspect(client)
    client.close()


def test_cli_wrong_credentials_are_one_line_and_nonzero(fresh_redis: RedisServer) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    admin.execute_command(  # type: ignore[no-untyped-call]
        "ACL", "SETUSER", "inspector", "on", ">right", *read_only_acl()
    )
    admin.close()
    done = cli("inspect", f"redis://inspector:wrong@127.0.0.1:{fresh_redis.port}/0")
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("error: Redis refused the credentials")
    right = cli("inspect", f"redis://inspector:right@127.0.0.1:{fresh_redis.port}/0")
    assert (right.returncode, right.stdout) == (0, "nothing held under prefix 'lock'\n")


# -- the sample on the documentation's page ----------------------------------------------------

#: The columns whose values change from run to run: a holder's TTL, token and fences.
_VARYING = {"TTL_MS", "TOKEN", "FENCE", "FENCE_COUNTER"}


def _shape(output: str) -> list[list[str]]:
    """The printed table and notes, a row per line, with each varying value (a number, or a
    token's hex digits) replaced by its column's name: what must match the page exactly."""
    lines = [line.split() for line in output.strip().splitlines()]
    header = lines[0]
    rows = []
    for words in lines:
        if len(words) == len(header) and words is not header:
            words = [
                f"<{name}>" if name in _VARYING and words[i] not in ("-", "none!") else words[i]
                for i, name in enumerate(header)
            ]
        rows.append(words)
    return rows


def test_the_inspect_page_shows_what_the_command_prints(
    r: redis.Redis, redis_server: RedisServer
) -> None:
    page = (ROOT / "docs" / "inspect.md").read_text(encoding="utf-8")
    block = page.split("```console\n", 1)[1].split("```", 1)[0]
    command, printed = block.split("\n", 1)
    assert command == "$ python -m distlock inspect redis://localhost:6379/0 --prefix order"
    # What the sample shows: two locks, a reentrant lock entered twice, and a lock whose
    # key lost its TTL (a PERSIST by hand: the stuck key the warning is about).
    with (
        distlock.Lock(r, prefix="order", ttl_ms=30_000) as locks,
        distlock.ReentrantLock(r, prefix="order", ttl_ms=30_000) as reentrant,
        reentrant.hold("7"),
        reentrant.hold("7"),
    ):
        handles = [locks.acquire(id) for id in ("1187", "42", "9")]
        assert all(h is not None for h in handles)
        assert r.persist("order:9")
        done = cli("inspect", redis_server.url, "--prefix", "order")
        for handle in handles:
            assert handle is not None
            r.delete(handle.key)  # order:9 never expires; the others go with it
    assert done.returncode == 0, done.stderr
    assert _shape(done.stdout) == _shape(printed)
