"""PostgresFence and AsyncPostgresFence on a real PostgreSQL server."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from distlock import Lock, Semaphore, StaleFenceError, UsageError, ValidationError
from distlock.fencing import AsyncFenceGuard, AsyncPostgresFence, FenceGuard, PostgresFence
from tests.postgres_server import PostgresServer
from tests.redis_server import RedisServer

Conn = psycopg.Connection[Any]


def _table() -> str:
    return f"fences_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def guard(postgres_server: PostgresServer) -> PostgresFence:
    made = PostgresFence(table=_table())
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        made.create_table(conn)
    return made


@pytest.fixture
def connect(postgres_server: PostgresServer) -> Iterator[Callable[[], Conn]]:
    opened: list[Conn] = []

    def new() -> Conn:
        opened.append(psycopg.connect(postgres_server.dsn))
        return opened[-1]

    yield new
    for conn in opened:
        conn.close()


def wait_blocked(observer: Conn, waiter: Conn, holder: Conn) -> None:
    """Until ``waiter``'s backend waits on a lock ``holder``'s backend holds (a state to
    poll: there is no event to block on)."""
    give_up = time.monotonic() + 30
    while True:
        row = observer.execute(
            "SELECT pg_blocking_pids(%s)", (waiter.info.backend_pid,)
        ).fetchone()
        observer.commit()
        if row is not None and holder.info.backend_pid in row[0]:
            return
        assert time.monotonic() < give_up, "the second admit never waited on the first"
        time.sleep(0.002)


def test_the_guards_implement_the_protocols() -> None:
    sync: FenceGuard[Conn] = PostgresFence()
    asynchronous: AsyncFenceGuard[psycopg.AsyncConnection[Any]] = AsyncPostgresFence()
    assert isinstance(sync, PostgresFence) and isinstance(asynchronous, AsyncPostgresFence)


def test_fences_are_admitted_in_order_and_the_same_fence_again(
    guard: PostgresFence, connect: Callable[[], Conn]
) -> None:
    conn = connect()
    assert guard.newest(conn, "order:1") is None
    for fence in (1, 5, 5, 9):
        guard.admit(conn, "order:1", fence)
        guard.admit(conn, "order:1", fence)  # several writes of one section
        conn.commit()
        assert guard.newest(conn, "order:1") == fence
    guard.admit(conn, "order:2", 3)  # resources are independent
    conn.commit()
    assert (guard.newest(conn, "order:1"), guard.newest(conn, "order:2")) == (9, 3)
    rows = conn.execute(f'SELECT count(*) FROM "{guard.table}"').fetchone()
    assert rows == (2,)  # nothing but the largest fence per resource


def test_a_stale_fence_is_refused_and_nothing_is_recorded(
    guard: PostgresFence, connect: Callable[[], Conn]
) -> None:
    conn = connect()
    guard.admit(conn, "order:1", 7)
    conn.commit()
    with pytest.raises(StaleFenceError) as caught:
        guard.admit(conn, "order:1", 6)
    assert (caught.value.resource, caught.value.fence, caught.value.newest) == ("order:1", 6, 7)
    message = str(caught.value)
    assert "refused fence 6" in message and "admitted fence 7" in message
    assert "re-acquire the lock" in message
    # The transaction is still usable (to roll back, or to do other work) and recorded nothing.
    assert guard.newest(conn, "order:1") == 7
    conn.commit()
    assert guard.newest(conn, "order:1") == 7


def test_the_row_stays_locked_until_the_transaction_ends(
    guard: PostgresFence, connect: Callable[[], Conn]
) -> None:
    first, second, observer = connect(), connect(), connect()
    guard.admit(first, "order:1", 5)
    first.commit()
    guard.admit(first, "order:1", 6)  # open, not committed
    with ThreadPoolExecutor(1) as pool:
        waiting: Future[None] = pool.submit(guard.admit, second, "order:1", 7)
        wait_blocked(observer, second, first)
        assert not waiting.done()
        first.commit()
        waiting.result(timeout=30)
    second.commit()
    assert guard.newest(observer, "order:1") == 7


def test_a_refused_fence_locks_the_row_too(
    guard: PostgresFence, connect: Callable[[], Conn]
) -> None:
    """A stale admit still holds the row: the holder that refused it cannot be overtaken
    by a write that starts and commits while it rolls back."""
    first, second = connect(), connect()
    guard.admit(first, "order:1", 5)
    first.commit()
    with pytest.raises(StaleFenceError):
        guard.admit(first, "order:1", 4)
    second.execute("SET lock_timeout = '20ms'")
    with pytest.raises(psycopg.errors.LockNotAvailable):
        guard.admit(second, "order:1", 6)
    second.rollback()
    first.rollback()
    guard.admit(second, "order:1", 6)
    second.commit()


@pytest.mark.parametrize(
    ("second_fence", "first_ends", "admitted", "newest"),
    [(2, "commit", False, 3), (3, "commit", True, 3), (4, "commit", True, 4),
     (2, "rollback", True, 2)],
)
def test_two_first_inserts_of_a_resource_at_once(
    guard: PostgresFence, connect: Callable[[], Conn],
    second_fence: int, first_ends: str, admitted: bool, newest: int,
) -> None:
    """The second waits for the first's uncommitted row, then compares against what it
    committed (or inserts, if it rolled back): never a unique violation, never two rows."""
    first, second, observer = connect(), connect(), connect()
    guard.admit(first, "new", 3)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(guard.admit, second, "new", second_fence)
        wait_blocked(observer, second, first)
        getattr(first, first_ends)()
        if admitted:
            waiting.result(timeout=30)
        else:
            with pytest.raises(StaleFenceError) as caught:
                waiting.result(timeout=30)
            assert (caught.value.fence, caught.value.newest) == (second_fence, 3)
    second.commit()
    assert guard.newest(observer, "new") == newest


def test_a_handle_is_taken_for_its_fence(
    guard: PostgresFence, connect: Callable[[], Conn], redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"fenced-{uuid.uuid4().hex[:8]}"
    conn = connect()
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        with locks.hold("order:1") as handle:
            guard.admit(conn, "order:1", handle)
            conn.commit()
            assert guard.newest(conn, "order:1") == handle.fence
        with locks.hold("order:1") as newer:
            assert newer.fence > handle.fence
            guard.admit(conn, "order:1", newer)
            conn.commit()
        with pytest.raises(StaleFenceError) as caught:
            guard.admit(conn, "order:1", handle)  # the ex-holder, late
        assert (caught.value.fence, caught.value.newest) == (handle.fence, newer.fence)
        conn.rollback()
    with Semaphore(client, prefix=prefix, limit=2, ttl_ms=10_000) as permits:
        permit = permits.acquire("order:1")
        assert permit is not None
        with pytest.raises(ValidationError, match="semaphore permit has no fence"):
            guard.admit(conn, "order:1", permit)  # type: ignore[arg-type]  # as mypy says
        permit.release()
    client.close()


class NoFence:
    fence = None


BAD_FENCES: list[object] = [True, -1, 2**63, "5", 5.0, None, NoFence(), object()]


@pytest.mark.parametrize("fence", BAD_FENCES, ids=repr)
def test_a_bad_fence_is_refused_before_anything_is_sent(
    guard: PostgresFence, connect: Callable[[], Conn], fence: object
) -> None:
    conn = connect()
    conn.close()  # a closed connection: sending anything would raise OperationalError
    with pytest.raises(ValidationError):
        guard.admit(conn, "order:1", fence)  # type: ignore[arg-type]


@pytest.mark.parametrize("resource", ["", "a\x00b", b"order:1", 7, None], ids=repr)
def test_a_bad_resource_is_refused_before_anything_is_sent(
    guard: PostgresFence, connect: Callable[[], Conn], resource: object
) -> None:
    conn = connect()
    conn.close()
    with pytest.raises(ValidationError):
        guard.admit(conn, resource, 1)  # type: ignore[arg-type]


def test_the_largest_fence_fits(guard: PostgresFence, connect: Callable[[], Conn]) -> None:
    conn = connect()
    guard.admit(conn, "big", 2**63 - 2)
    guard.admit(conn, "big", 2**63 - 1)
    with pytest.raises(StaleFenceError):
        guard.admit(conn, "big", 2**63 - 2)
    conn.rollback()


@pytest.mark.parametrize("table", ["", "x" * 64, "a\x00b", 5])
def test_a_bad_table_name_is_refused(table: object) -> None:
    with pytest.raises(ValidationError):
        PostgresFence(table=table)  # type: ignore[arg-type]


def test_admit_needs_a_transaction(
    guard: PostgresFence, postgres_server: PostgresServer
) -> None:
    with psycopg.connect(postgres_server.dsn, autocommit=True) as conn:
        with pytest.raises(UsageError, match="needs a transaction"):
            guard.admit(conn, "order:1", 1)
        assert guard.newest(conn, "order:1") is None
        with conn.transaction():
            guard.admit(conn, "order:1", 1)
        assert guard.newest(conn, "order:1") == 1


def test_the_ddl_is_what_create_table_runs_and_is_idempotent(
    postgres_server: PostgresServer, connect: Callable[[], Conn]
) -> None:
    odd = PostgresFence(table='We"ird fences; DROP TABLE x', schema="Fencing")
    quoted = '"Fencing"."We""ird fences; DROP TABLE x"'
    assert odd.ddl.startswith(f"CREATE TABLE IF NOT EXISTS {quoted} (")
    conn = connect()
    assert odd._create.as_string(conn) == odd.ddl
    conn.execute('CREATE SCHEMA "Fencing"')
    odd.create_table(conn)  # a savepoint of the open transaction
    odd.create_table(conn)
    odd.admit(conn, "r", 1)
    conn.commit()
    assert odd.newest(conn, "r") == 1
    plain = PostgresFence()
    assert plain.ddl == (
        'CREATE TABLE IF NOT EXISTS "distlock_fences" (\n'
        "    resource text PRIMARY KEY,\n"
        "    fence bigint NOT NULL CHECK (fence >= 0)\n"
        ")"
    )
    column = conn.execute(
        "SELECT data_type FROM information_schema.columns"
        " WHERE table_schema = 'Fencing' AND column_name = 'fence'"
    ).fetchone()
    assert column == ("bigint",)


def test_the_async_guard(postgres_server: PostgresServer) -> None:
    async def main() -> None:
        guard = AsyncPostgresFence(table=_table())
        async with await psycopg.AsyncConnection.connect(postgres_server.dsn) as conn:
            await guard.create_table(conn)
            await guard.admit(conn, "order:1", 4)
            await guard.admit(conn, "order:1", 4)
            await conn.commit()
            with pytest.raises(StaleFenceError) as caught:
                await guard.admit(conn, "order:1", 3)
            assert (caught.value.fence, caught.value.newest) == (3, 4)
            with pytest.raises(ValidationError):
                await guard.admit(conn, "order:1", -1)
            await guard.admit(conn, "order:1", 8)
            await conn.commit()
            assert await guard.newest(conn, "order:1") == 8
            await conn.rollback()
            await conn.set_autocommit(True)
            with pytest.raises(UsageError):
                await guard.admit(conn, "order:1", 9)

    asyncio.run(main())


def test_in_repeatable_read_the_second_first_insert_must_retry(
    guard: PostgresFence, connect: Callable[[], Conn]
) -> None:
    first, second, observer = connect(), connect(), connect()
    second.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    guard.admit(first, "new", 3)
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(guard.admit, second, "new", 4)
        wait_blocked(observer, second, first)
        first.commit()
        with pytest.raises(psycopg.errors.SerializationFailure):
            waiting.result(timeout=30)
    second.rollback()
    guard.admit(second, "new", 4)  # the retry, in a new transaction
    second.commit()
    assert guard.newest(observer, "new") == 4


def test_the_docs_print_the_ddl_the_guard_runs() -> None:
    page = (Path(__file__).resolve().parent.parent / "docs" / "fencing.md").read_text()
    assert f"```sql\n{PostgresFence().ddl}\n```" in page


def test_without_psycopg_only_the_postgres_guards_say_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # what an import of a missing one does
    monkeypatch.setitem(sys.modules, "psycopg.sql", None)
    with pytest.raises(ImportError, match=r"pip install 'distlock\[postgres\]'"):
        PostgresFence()
