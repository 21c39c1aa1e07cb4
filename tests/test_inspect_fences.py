"""``python -m distlock inspect --fences URL``: the newest fence per resource, as each guard
recorded it, read from a real PostgreSQL, a SQLite file and a real Redis."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import redis

from distlock.fencing import PostgresFence, RedisFence, SQLiteFence
from distlock.tools.cli import main
from tests.redis_server import RedisServer

if TYPE_CHECKING:
    from tests.postgres_server import PostgresServer


def _inspect(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(["inspect", "--fences", *argv])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_postgres_guards_table(
    postgres_server: PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    import psycopg

    dsn = postgres_server.dsn
    table = f"fences_{uuid.uuid4().hex[:8]}"
    guard = PostgresFence(table)
    with psycopg.connect(dsn) as conn:
        guard.create_table(conn)
        with conn.transaction():
            guard.admit(conn, "orders", 7)
            guard.admit(conn, "accounts", 3)
        with conn.transaction():
            guard.admit(conn, "orders", 9)
    status, out, _ = _inspect(capsys, dsn, "--table", table)
    assert status == 0
    assert out.split("\n")[1:3] == ["accounts  3", "orders    9"]
    status, out, _ = _inspect(capsys, dsn, "--table", table, "--json")
    assert json.loads(out) == [
        {"resource": "accounts", "fence": 3}, {"resource": "orders", "fence": 9}
    ]


def test_a_sqlite_guards_table_is_read_without_a_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "app.db"
    guard = SQLiteFence()
    conn = sqlite3.connect(path)
    guard.create_table(conn)
    guard.admit(conn, "ledger", 41)
    conn.commit()
    # The inspector's read runs while another transaction holds the write lock: a
    # read-only connection does not wait for it, and changes nothing.
    conn.execute("BEGIN IMMEDIATE")
    status, out, _ = _inspect(capsys, f"sqlite:///{path}", "--limit", "1")
    conn.rollback()
    conn.close()
    assert status == 0
    assert out.splitlines()[1:] == ["ledger    41"]


def test_a_missing_sqlite_file_is_an_error_not_a_new_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nothing.db"
    status, _, err = _inspect(capsys, f"sqlite:///{path}")
    assert status == 1 and "could not read the fences" in err
    assert not path.exists()


def test_a_redis_guards_records(
    redis_server: RedisServer, capsys: pytest.CaptureFixture[str]
) -> None:
    client = redis.Redis.from_url(redis_server.url)
    prefix = f"fenced:{uuid.uuid4().hex[:8]}:"
    guard = RedisFence(client, prefix=prefix)
    guard.admit_and_set("b", 5, f"data:{prefix}b", "x")
    guard.admit_and_set("a", 12, f"data:{prefix}a", "y")
    guard.admit_and_set("a", 13, f"data:{prefix}a", "z")
    status, out, _ = _inspect(capsys, redis_server.url, "--fence-prefix", prefix, "--json")
    client.close()
    assert status == 0
    assert json.loads(out) == [{"resource": "a", "fence": 13}, {"resource": "b", "fence": 5}]


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["mysql://localhost/db"], "postgresql://, sqlite:/// or redis://"),
        (["sqlite:////tmp/x.db", "--table", "sqlite_master"], "SQLite reserves"),
        (["postgresql://localhost/db", "--table", "bad\x00name"], "table"),
    ],
)
def test_bad_input_is_a_clear_error_before_anything_connects(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status, _, err = _inspect(capsys, *argv)
    assert status == 2
    assert says in err
