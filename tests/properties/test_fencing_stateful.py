"""The fence guards against a model: the largest fence per resource, committed.

Two connections open, interleave, commit and roll back transactions that admit fences for
a few resources; a third reads the table after every step.  The model knows which
transaction holds which lock, so where the real database would make a connection wait it
makes it fail at once instead (PostgreSQL: a short ``lock_timeout``; SQLite: a busy timeout
of 0), and the model expects exactly that failure.  Each step checks: admitted or refused
as the model says (a refusal naming the model's newest fence), and the committed table
equal to the model's.  The Redis guard has no transactions: its machine checks each
admission's writes against the model instead (applied exactly when admitted).
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path
from typing import Any, Final

import psycopg
import pytest
import redis
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from distlock import StaleFenceError
from distlock.fencing import PostgresFence, RedisFence, RedisWrites, SQLiteFence
from tests.postgres_server import PostgresServer
from tests.properties import profiles
from tests.redis_server import RedisServer

RESOURCES: Final = st.sampled_from(("a", "b", "c"))
FENCES: Final = st.integers(min_value=0, max_value=8)
SIDES: Final = st.sampled_from((0, 1))


class Model:
    """Committed fences, and each side's open transaction: what it admitted and what it
    holds locked."""

    def __init__(self) -> None:
        self.committed: dict[str, int] = {}
        self.pending: list[dict[str, int]] = [{}, {}]
        self.locked: list[set[str]] = [set(), set()]

    def newest(self, side: int, resource: str) -> int | None:
        return self.pending[side].get(resource, self.committed.get(resource))

    def end(self, side: int, commit: bool) -> None:
        if commit:
            self.committed.update(self.pending[side])
        self.pending[side].clear()
        self.locked[side].clear()

    def admit(self, side: int, resource: str, fence: int, call: Any) -> None:
        """Run ``call`` (the guard's admit) and check it did what the model says."""
        newest = self.newest(side, resource)
        if newest is None or fence >= newest:
            call()
            self.pending[side][resource] = fence
        else:
            with pytest.raises(StaleFenceError) as caught:
                call()
            assert (caught.value.fence, caught.value.newest) == (fence, newest)
        self.locked[side].add(resource)


class PostgresMachine(RuleBasedStateMachine):
    #: Set by the test: the server, and a guard whose table exists.
    DSN: str
    GUARD: PostgresFence

    def __init__(self) -> None:
        super().__init__()
        dsn, guard = self.DSN, self.GUARD
        self.guard = guard
        self.observer = psycopg.connect(dsn, autocommit=True)
        self.observer.execute(f'TRUNCATE "{guard.table}"')
        self.sides = [psycopg.connect(dsn) for _ in range(2)]
        for conn in self.sides:
            conn.execute("SET lock_timeout = '20ms'")
            conn.commit()
        self.model = Model()

    @rule(side=SIDES, resource=RESOURCES, fence=FENCES)
    def admit(self, side: int, resource: str, fence: int) -> None:
        conn = self.sides[side]
        if resource in self.model.locked[1 - side]:
            with pytest.raises(psycopg.errors.LockNotAvailable):
                self.guard.admit(conn, resource, fence)
            conn.rollback()
            self.model.end(side, commit=False)
            return
        self.model.admit(side, resource, fence, lambda: self.guard.admit(conn, resource, fence))

    @rule(side=SIDES)
    def commit(self, side: int) -> None:
        self.sides[side].commit()
        self.model.end(side, commit=True)

    @rule(side=SIDES)
    def rollback(self, side: int) -> None:
        self.sides[side].rollback()
        self.model.end(side, commit=False)

    @invariant()
    def committed_as_modelled(self) -> None:
        rows = self.observer.execute(f'SELECT resource, fence FROM "{self.guard.table}"')
        assert dict(rows.fetchall()) == self.model.committed

    def teardown(self) -> None:
        for conn in (*self.sides, self.observer):
            conn.close()


def test_postgres_guard_against_the_model(postgres_server: PostgresServer) -> None:
    guard = PostgresFence(table=f"model_{uuid.uuid4().hex[:12]}")
    with psycopg.connect(postgres_server.dsn) as conn:
        guard.create_table(conn)

    class Machine(PostgresMachine):
        DSN = postgres_server.dsn
        GUARD = guard

    run_state_machine_as_test(Machine, settings=profiles.scaled(20, steps=30))


class SQLiteMachine(RuleBasedStateMachine):
    """Side 0 lets sqlite3 open its transactions (before the first write); side 1 is in
    autocommit mode and opens each with ``BEGIN IMMEDIATE``."""

    #: Set by the test: where the database file goes.
    PATH: Path

    def __init__(self) -> None:
        super().__init__()
        path = self.PATH
        path.unlink(missing_ok=True)
        self.guard = SQLiteFence()
        self.observer = sqlite3.connect(path, timeout=0, isolation_level=None)
        self.guard.create_table(self.observer)
        self.sides = [
            sqlite3.connect(path, timeout=0),
            sqlite3.connect(path, timeout=0, isolation_level=None),
        ]
        self.model = Model()
        #: The side whose transaction holds the database's write lock.
        self.writer: int | None = None

    def _admit(self, side: int, resource: str, fence: int) -> None:
        conn = self.sides[side]
        if side == 1 and not conn.in_transaction:
            conn.execute("BEGIN IMMEDIATE")
        self.guard.admit(conn, resource, fence)

    @rule(side=SIDES, resource=RESOURCES, fence=FENCES)
    def admit(self, side: int, resource: str, fence: int) -> None:
        if self.writer == 1 - side:
            with pytest.raises(sqlite3.OperationalError, match="database is locked"):
                self._admit(side, resource, fence)
            self.sides[side].rollback()
            self.model.end(side, commit=False)
            return
        self.model.admit(side, resource, fence, lambda: self._admit(side, resource, fence))
        self.writer = side

    @rule(side=SIDES)
    def commit(self, side: int) -> None:
        self.sides[side].commit()
        self.model.end(side, commit=True)
        if self.writer == side:
            self.writer = None

    @rule(side=SIDES)
    def rollback(self, side: int) -> None:
        self.sides[side].rollback()
        self.model.end(side, commit=False)
        if self.writer == side:
            self.writer = None

    @invariant()
    def committed_as_modelled(self) -> None:
        rows = self.observer.execute("SELECT resource, fence FROM distlock_fences").fetchall()
        assert dict(rows) == self.model.committed

    def teardown(self) -> None:
        for conn in (*self.sides, self.observer):
            conn.close()


def test_sqlite_guard_against_the_model(tmp_path: Path) -> None:
    class Machine(SQLiteMachine):
        PATH = tmp_path / "model.db"

    run_state_machine_as_test(Machine, settings=profiles.scaled(5, steps=40))


class RedisMachine(RuleBasedStateMachine):
    """Admissions that each append their fence to the resource's log and count its writes:
    the log is the admitted fences in order, the count their number, the record the
    largest."""

    URL: str

    def __init__(self) -> None:
        super().__init__()
        self.client = redis.Redis.from_url(self.URL)
        self.client.flushall()
        self.guard = RedisFence(self.client)
        self.newest: dict[str, int] = {}
        self.log: dict[str, list[int]] = {}

    @rule(resource=RESOURCES, fence=FENCES)
    def admit(self, resource: str, fence: int) -> None:
        writes = RedisWrites().rpush(f"log:{resource}", fence).incrby(f"count:{resource}", 1)
        newest = self.newest.get(resource)
        if newest is None or fence >= newest:
            self.guard.admit(writes, resource, fence)
            self.newest[resource] = fence
            self.log.setdefault(resource, []).append(fence)
        else:
            with pytest.raises(StaleFenceError) as caught:
                self.guard.admit(writes, resource, fence)
            assert (caught.value.fence, caught.value.newest) == (fence, newest)

    @invariant()
    def stored_as_modelled(self) -> None:
        for resource in ("a", "b", "c"):
            log = [int(x) for x in self.client.lrange(f"log:{resource}", 0, -1)]
            assert log == self.log.get(resource, [])
            assert int(self.client.get(f"count:{resource}") or 0) == len(log)
            assert self.guard.newest(resource) == self.newest.get(resource)

    def teardown(self) -> None:
        self.client.close()


def test_redis_guard_against_the_model(fresh_redis: RedisServer) -> None:
    class Machine(RedisMachine):
        URL = fresh_redis.url

    run_state_machine_as_test(Machine, settings=profiles.scaled(10, steps=40))
