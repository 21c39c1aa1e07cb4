"""SQLiteFence on real SQLite databases (files: two connections see one database)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from distlock import Lock, Semaphore, StaleFenceError, UsageError, ValidationError
from distlock.fencing import FenceGuard, SQLiteFence
from tests.redis_server import RedisServer

Connect = Callable[..., sqlite3.Connection]


@pytest.fixture
def connect(tmp_path: Path) -> Iterator[Connect]:
    """Connections to one database file; ``timeout=0``: a locked database fails at once."""
    opened: list[sqlite3.Connection] = []

    def new(autocommit: bool = False) -> sqlite3.Connection:
        path = tmp_path / "fences.db"
        if autocommit:  # no implicit BEGIN: the caller opens transactions itself
            opened.append(sqlite3.connect(path, timeout=0, isolation_level=None))
        else:
            opened.append(sqlite3.connect(path, timeout=0))
        return opened[-1]

    yield new
    for conn in opened:
        conn.close()


@pytest.fixture
def guard(connect: Connect) -> SQLiteFence:
    made = SQLiteFence()
    made.create_table(connect())
    return made


def test_the_guard_implements_the_protocol() -> None:
    guard: FenceGuard[sqlite3.Connection] = SQLiteFence()
    assert isinstance(guard, SQLiteFence)


def test_fences_are_admitted_in_order_and_the_same_fence_again(
    guard: SQLiteFence, connect: Connect
) -> None:
    conn = connect()
    assert guard.newest(conn, "order:1") is None
    for fence in (0, 1, 5, 5, 9):
        guard.admit(conn, "order:1", fence)
        guard.admit(conn, "order:1", fence)
        conn.commit()
        assert guard.newest(connect(), "order:1") == fence
    guard.admit(conn, "order:2", 3)
    conn.commit()
    assert conn.execute("SELECT resource, fence FROM distlock_fences ORDER BY 1").fetchall() == [
        ("order:1", 9), ("order:2", 3)
    ]


def test_a_stale_fence_is_refused_and_nothing_is_recorded(
    guard: SQLiteFence, connect: Connect
) -> None:
    conn = connect()
    guard.admit(conn, "order:1", 7)
    conn.commit()
    with pytest.raises(StaleFenceError) as caught:
        guard.admit(conn, "order:1", 6)
    assert (caught.value.resource, caught.value.fence, caught.value.newest) == ("order:1", 6, 7)
    conn.commit()
    assert guard.newest(conn, "order:1") == 7


@pytest.mark.parametrize("first_fence", [6, 4], ids=["admitted", "refused"])
def test_the_write_lock_is_held_until_the_transaction_ends(
    guard: SQLiteFence, connect: Connect, first_fence: int
) -> None:
    """SQLite locks the database: any admit, admitted or refused, holds its write lock, and
    another connection's admit (of any resource) fails with timeout=0 until it ends."""
    first, second = connect(), connect()
    guard.admit(first, "order:1", 5)
    first.commit()
    if first_fence == 6:
        guard.admit(first, "order:1", first_fence)
    else:
        with pytest.raises(StaleFenceError):
            guard.admit(first, "order:1", first_fence)
    for resource in ("order:1", "order:2"):
        with pytest.raises(sqlite3.OperationalError, match="database is locked"):
            guard.admit(second, resource, 7)
        second.rollback()
    first.commit()
    guard.admit(second, "order:1", 7)
    second.commit()
    assert guard.newest(first, "order:1") == 7


@pytest.mark.parametrize(("second_fence", "admitted"), [(2, False), (3, True), (4, True)])
def test_two_first_inserts_of_a_resource(
    guard: SQLiteFence, connect: Connect, second_fence: int, admitted: bool
) -> None:
    first, second = connect(), connect()
    guard.admit(first, "new", 3)
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        guard.admit(second, "new", second_fence)
    second.rollback()
    first.commit()
    if admitted:
        guard.admit(second, "new", second_fence)
    else:
        with pytest.raises(StaleFenceError):
            guard.admit(second, "new", second_fence)
    second.commit()
    assert guard.newest(first, "new") == max(3, second_fence)


def test_begin_immediate_in_autocommit_mode(guard: SQLiteFence, connect: Connect) -> None:
    conn = connect(autocommit=True)
    with pytest.raises(UsageError, match="BEGIN IMMEDIATE"):
        guard.admit(conn, "order:1", 1)
    assert guard.newest(conn, "order:1") is None
    conn.execute("BEGIN IMMEDIATE")
    guard.admit(conn, "order:1", 1)
    conn.execute("COMMIT")
    assert guard.newest(connect(), "order:1") == 1


def test_create_table_joins_an_open_transaction(connect: Connect) -> None:
    conn = connect(autocommit=True)
    guard = SQLiteFence(table='my "fences"')
    conn.execute("BEGIN")
    guard.create_table(conn)
    guard.create_table(conn)
    assert conn.in_transaction
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    guard.create_table(conn)  # no transaction open: committed at once
    assert connect().execute("SELECT name FROM sqlite_master").fetchone() == ('my "fences"',)
    assert guard.ddl == (
        'CREATE TABLE IF NOT EXISTS "my ""fences""" (\n'
        "    resource TEXT PRIMARY KEY NOT NULL,\n"
        "    fence INTEGER NOT NULL CHECK (fence >= 0)\n"
        ") WITHOUT ROWID"
    )


def test_the_largest_fence_fits(guard: SQLiteFence, connect: Connect) -> None:
    conn = connect()
    guard.admit(conn, "big", 2**63 - 2)
    guard.admit(conn, "big", 2**63 - 1)
    with pytest.raises(StaleFenceError) as caught:
        guard.admit(conn, "big", 2**63 - 2)
    assert caught.value.newest == 2**63 - 1
    conn.rollback()


class OddHandle:
    def __init__(self, fence: object) -> None:
        self.fence = fence


BAD_FENCES: list[object] = [
    True, False, -1, 2**63, "5", 5.0, None, object(),
    OddHandle(None), OddHandle("5"), OddHandle(True), OddHandle(-1), OddHandle(OddHandle(5)),
]


@pytest.mark.parametrize("fence", BAD_FENCES, ids=repr)
def test_a_bad_fence_is_refused_before_anything_is_touched(
    guard: SQLiteFence, connect: Connect, fence: object
) -> None:
    conn = connect()
    conn.close()  # closed: touching it would raise sqlite3.ProgrammingError
    with pytest.raises(ValidationError):
        guard.admit(conn, "order:1", fence)  # type: ignore[arg-type]


@pytest.mark.parametrize("resource", ["", "a\x00b", b"order:1", None], ids=repr)
def test_a_bad_resource_is_refused_before_anything_is_touched(
    guard: SQLiteFence, connect: Connect, resource: object
) -> None:
    conn = connect()
    conn.close()
    with pytest.raises(ValidationError):
        guard.admit(conn, resource, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize("table", ["", "sqlite_fences", "a\x00b", None])
def test_a_bad_table_name_is_refused(table: object) -> None:
    with pytest.raises(ValidationError):
        SQLiteFence(table=table)  # type: ignore[arg-type]


def test_a_handle_is_taken_for_its_fence(
    guard: SQLiteFence, connect: Connect, redis_server: RedisServer
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"fenced-{uuid.uuid4().hex[:8]}"
    conn = connect()
    with Lock(client, prefix=prefix, ttl_ms=10_000) as locks:
        late = locks.acquire("order:1")
        assert late is not None
        assert late.release()
        with locks.hold("order:1") as handle:
            guard.admit(conn, "order:1", handle)
            conn.commit()
        with pytest.raises(StaleFenceError) as caught:
            guard.admit(conn, "order:1", late)
        assert (caught.value.fence, caught.value.newest) == (late.fence, handle.fence)
        conn.rollback()
    with (
        Semaphore(client, prefix=prefix, limit=1, ttl_ms=10_000) as permits,
        permits.hold("order:1") as permit,
        pytest.raises(ValidationError, match="permit"),
    ):
        guard.admit(conn, "order:1", permit)  # type: ignore[arg-type]  # as mypy says
    client.close()


def test_a_guard_admits_the_next_owner_after_redis_restarts(
    guard: SQLiteFence, connect: Connect, fresh_redis: RedisServer
) -> None:
    """A Redis without persistence loses its fence counter on a restart, but fences keep
    increasing (each is at least a floor on Redis's clock): the owner after the restart is
    admitted, and the last owner before it is refused from then on."""
    conn = connect()
    client = redis.Redis.from_url(fresh_redis.url)
    with Lock(client, prefix="restart", ttl_ms=10_000) as locks:
        fences = [locks.run("order:1", lambda h: h.fence) for _ in range(3)]
        guard.admit(conn, "order:1", fences[-1])
        conn.commit()
        fresh_redis.restart()
        client.connection_pool.disconnect()
        assert client.dbsize() == 0  # the counter is gone
        again = locks.run("order:1", lambda h: h.fence)
        assert again > fences[-1]
        guard.admit(conn, "order:1", again)  # the rightful holder, admitted
        conn.commit()
        with pytest.raises(StaleFenceError):
            guard.admit(conn, "order:1", fences[-1])
        conn.rollback()
        assert guard.newest(conn, "order:1") == again
    client.close()
