"""``inspect`` of a read-write lock's key, read from a real redis-server: its kind, its
live writer's token and fence, its live readers and its queue (each waiter's role); its
readers' set under ``--prefix distlock``; and under the read-only ACL of its prefix, which
grants nothing beside the key, the key itself without an error."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import redis

import distlock
from distlock._core.commands import Kind
from distlock._protocol import queue_keys, readers_key
from distlock.tools.inspect import (
    BESIDE_NOTE,
    QUEUE,
    READ_WRITE,
    READER_SET,
    REENTRANT,
    Held,
    format_table,
    inspect,
    read_only_acl,
)
from tests.redis_server import RedisServer
from tests.waiting import until

FOREVER_MS = 60_000
ROOT = Path(__file__).resolve().parent.parent
TOKEN = "c" * 32


def waiting(r: redis.Redis, key: str) -> int:
    """How many wait in ``key``'s one queue (readers and writers share it)."""
    return int(r.llen(queue_keys(key, Kind.READ)[0]))


def by_key(client: redis.Redis, prefix: str) -> dict[str, Held]:
    return {h.key: h for h in inspect(client, prefix).held}


def test_readers_are_counted_and_listed_with_no_writer(r: redis.Redis) -> None:
    with distlock.ReadWriteLock(r, prefix="irw", ttl_ms=FOREVER_MS) as docs, \
            distlock.ReadWriteLock(r, prefix="irw", ttl_ms=FOREVER_MS) as others:
        first, second = docs.read.acquire("k"), others.read.acquire("k")
        assert first is not None and second is not None
        [row] = inspect(r, "irw").held
        assert (row.key, row.kind, row.redis_type) == ("irw:k", READ_WRITE, "hash")
        assert (row.token_prefix, row.fence, row.depth) == (None, None, None)
        assert row.fence_counter == first.fence  # a reader's fence: the counter as it stood
        assert row.reader_count == 2 and row.readers is not None
        assert {p.token_prefix for p in row.readers} == {first.token[:8], second.token[:8]}
        assert all(p.live and 0 < p.ttl_ms <= FOREVER_MS for p in row.readers)
        assert (row.waiters, row.waiter_count) == ((), 0)
        table = format_table(inspect(r, "irw"))
        assert "irw:k: read-write, no writer; 2 live readers: " in table
        assert "no waiters" in table and "unknown" not in table
        assert first.release() and second.release()


def test_a_writer_is_shown_with_its_token_and_fence_never_as_a_reentrant_lock(
    r: redis.Redis,
) -> None:
    with distlock.ReadWriteLock(r, prefix="irw", ttl_ms=FOREVER_MS) as docs:
        writer = docs.write.acquire("k")
        assert writer is not None
        [row] = inspect(r, "irw").held
        assert row.kind == READ_WRITE and row.kind != REENTRANT
        assert (row.token_prefix, row.fence) == (writer.token[:8], writer.fence)
        assert (row.reader_count, row.waiter_count) == (0, 0)
        as_json = json.loads(json.dumps(row.as_dict()))
        assert (as_json["kind"], as_json["fence"], as_json["reader_count"]) == (
            "read-write", writer.fence, 0
        )
        assert f"read-write, writer {writer.token[:8]} fence {writer.fence}; 0 live readers" in (
            format_table(inspect(r, "irw"))
        )
        assert writer.release()


def test_a_writer_whose_lease_ended_is_no_writer(r: redis.Redis) -> None:
    # A hash left as a read-write lock's script leaves it: a writer whose instant passed
    # (scripts drop its fields only when they next run), beside a live reader.
    seconds, _ = r.time()
    r.hset("irw:old", mapping={"rw": "1", "w": TOKEN, "f": "5", "x": str(seconds * 1000 - 1)})
    r.zadd(readers_key("irw:old"), {"d" * 32: seconds * 1000 + FOREVER_MS})
    r.pexpire("irw:old", FOREVER_MS)
    [row] = inspect(r, "irw").held
    assert (row.kind, row.token_prefix, row.fence, row.reader_count) == (READ_WRITE, None, None, 1)


def test_the_queue_lists_writers_and_readers_in_order_with_their_roles(r: redis.Redis) -> None:
    with distlock.ReadWriteLock(r, prefix="irq", ttl_ms=FOREVER_MS) as holder, \
            distlock.ReadWriteLock(r, prefix="irq", ttl_ms=FOREVER_MS) as writers, \
            distlock.ReadWriteLock(r, prefix="irq", ttl_ms=FOREVER_MS) as readers:
        held = holder.read.acquire("k")
        assert held is not None
        wrote: list[distlock.RoleHandle | None] = []
        read: list[distlock.RoleHandle | None] = []
        threads = [
            threading.Thread(target=lambda: wrote.append(writers.write.acquire("k", wait_ms=5000))),
            # Behind a waiting writer, a reader waits too (a writer is not starved).
            threading.Thread(target=lambda: read.append(readers.read.acquire("k", wait_ms=5000))),
        ]
        threads[0].start()
        until(lambda: waiting(r, "irq:k") == 1, "the writer queued")
        threads[1].start()
        until(lambda: waiting(r, "irq:k") == 2, "the reader queued")
        row = by_key(r, "irq")["irq:k"]
        assert row.waiter_count == 2 and row.waiters is not None
        assert [w.role for w in row.waiters] == ["write", "read"]
        assert all(w.live and w.handoff_ttl_ms is None for w in row.waiters)
        assert "2 waiters, head first: " in format_table(inspect(r, "irq"))
        assert "(write) place " in format_table(inspect(r, "irq"))
        own = by_key(r, "distlock")
        queue_key = queue_keys("irq:k", Kind.READ)[0]
        assert own[queue_key].kind == QUEUE
        assert [w.role for w in own[queue_key].waiters or ()] == ["write", "read"]
        readers_row = own[readers_key("irq:k")]
        assert (readers_row.kind, readers_row.reader_count) == (READER_SET, 1)
        assert "unknown" not in format_table(inspect(r, "distlock"))
        assert held.release()
        # The writer first, then the reader behind it.
        threads[0].join(10)
        [writer] = wrote
        assert writer is not None and writer.release()
        threads[1].join(10)
        [reader] = read
        assert reader is not None and reader.release()


def test_the_read_only_acl_reads_readers_and_queue_and_less_is_no_error(
    fresh_redis: RedisServer,
) -> None:
    admin = redis.Redis(port=fresh_redis.port)
    rules = ["on", ">s3cret", *read_only_acl("orders")]
    admin.execute_command("ACL", "SETUSER", "inspector", *rules)  # type: ignore[no-untyped-call]
    reader = redis.Redis(port=fresh_redis.port, username="inspector", password="s3cret")
    with distlock.ReadWriteLock(admin, prefix="orders", ttl_ms=FOREVER_MS) as docs:
        writer = docs.write.acquire("w")
        shared = docs.read.acquire("r")
        assert writer is not None and shared is not None
        rows = by_key(reader, "orders")
        assert (rows["orders:w"].kind, rows["orders:w"].fence) == (READ_WRITE, writer.fence)
        assert rows["orders:w"].token_prefix == writer.token[:8]
        # The readers and the queue beside the key are read too.
        assert rows["orders:r"].kind == READ_WRITE
        assert (rows["orders:r"].reader_count, rows["orders:r"].waiter_count) == (1, 0)
        assert BESIDE_NOTE not in format_table(inspect(reader, "orders"))
        # Without read access to them, they are not counted, and nothing is refused.
        admin.execute_command(  # type: ignore[no-untyped-call]
            "ACL", "SETUSER", "inspector", "resetkeys", "%R~orders:*", "%R~distlock:fence:*"
        )
        blind = by_key(reader, "orders")["orders:r"]
        assert (blind.kind, blind.reader_count, blind.waiter_count) == (READ_WRITE, None, None)
        assert BESIDE_NOTE in format_table(inspect(reader, "orders"))
        assert writer.release() and shared.release()
    reader.close()
    admin.close()


def _shape(line: str) -> str:
    """A line with its varying parts (tokens, numbers) replaced by placeholders."""
    return re.sub(r"\b[0-9a-f]{8}\b", "<token>", re.sub(r"\b\d+ ms\b", "<n> ms", line))


def test_the_inspect_page_shows_the_line_a_read_write_lock_gets(r: redis.Redis) -> None:
    page = (ROOT / "docs" / "inspect.md").read_text(encoding="utf-8")
    [sample] = [
        block.strip()
        for block in re.findall(r"^```text\n(.*?)^```", page, flags=re.S | re.M)
        if ": read-write, " in block
    ]
    with distlock.ReadWriteLock(r, prefix="doc", ttl_ms=FOREVER_MS) as docs, \
            distlock.ReadWriteLock(r, prefix="doc", ttl_ms=FOREVER_MS) as others, \
            distlock.ReadWriteLock(r, prefix="doc", ttl_ms=FOREVER_MS) as writers:
        first, second = docs.read.acquire("1"), others.read.acquire("1")
        assert first is not None and second is not None
        wrote: list[distlock.RoleHandle | None] = []
        waiter = threading.Thread(
            target=lambda: wrote.append(writers.write.acquire("1", wait_ms=5000))
        )
        waiter.start()
        until(lambda: waiting(r, "doc:1") == 1, "the writer queued")
        [line] = [
            x for x in format_table(inspect(r, "doc")).splitlines() if x.startswith("doc:1: ")
        ]
        assert _shape(line) == _shape(sample)
        assert first.release() and second.release()
        waiter.join(10)
        [writer] = wrote
        assert writer is not None and writer.release()
