"""The SQLite guard (the standard library's ``sqlite3``): one row per resource, its largest
admitted fence.

SQLite locks the database, not a row: ``admit`` is a write (an UPSERT), so it takes the
database's write lock (RESERVED) whatever its outcome, and the transaction keeps it until
it commits or rolls back.  Every other writer of the database waits for it (the
connection's busy timeout, ``sqlite3.connect(timeout=5.0)`` by default), then fails with
``sqlite3.OperationalError: database is locked``.  So make ``admit`` the first statement of
the transaction, or open it with ``BEGIN IMMEDIATE`` (a connection made with
``isolation_level=None``): a transaction that reads first and writes later can find the
database changed under its read (SQLite then fails it with "database is locked" rather
than let it write).  In Python's default mode (``isolation_level=""``) sqlite3 opens the
transaction just before ``admit``'s write, so ``admit`` first, then the reads and writes it
protects, then ``commit()``.
"""

from __future__ import annotations

import sqlite3

from distlock._fencing.common import (
    Fence,
    check_fence,
    check_limit,
    check_resource,
    check_table,
    quote_ident,
)
from distlock.errors import StaleFenceError, UsageError, ValidationError

DEFAULT_TABLE = "distlock_fences"

_DDL = (
    "CREATE TABLE IF NOT EXISTS {} (\n"
    "    resource TEXT PRIMARY KEY NOT NULL,\n"
    "    fence INTEGER NOT NULL CHECK (fence >= 0)\n"
    ") WITHOUT ROWID"
)
_ADMIT = (
    "INSERT INTO {0} (resource, fence) VALUES (?, ?)"
    " ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence"
    " WHERE {0}.fence <= excluded.fence"
)
_NEWEST = "SELECT fence FROM {} WHERE resource = ?"
_ALL = "SELECT resource, fence FROM {} ORDER BY resource LIMIT ?"


def _autocommits(conn: sqlite3.Connection) -> bool:
    """True when a statement on ``conn`` would commit on its own (no transaction open, and
    none opened implicitly before a write)."""
    if conn.in_transaction:
        return False
    mode = getattr(conn, "autocommit", None)  # Python 3.12+: True, False or LEGACY (-1)
    if mode is True:
        return True
    return mode is not False and conn.isolation_level is None


class SQLiteFence:
    """Admits fences in the caller's sqlite3 transaction (see the module's docstring)."""

    def __init__(self, table: str = DEFAULT_TABLE) -> None:
        self.table = check_table(table)
        if self.table.lower().startswith("sqlite_"):
            raise ValidationError(f"table name {table!r}: SQLite reserves names sqlite_*")
        name = quote_ident(self.table)
        self.ddl = _DDL.format(name)
        self._admit = _ADMIT.format(name)
        self._newest = _NEWEST.format(name)
        self._all = _ALL.format(name)

    def __repr__(self) -> str:
        return f"SQLiteFence(table={self.table!r})"

    def create_table(self, conn: sqlite3.Connection) -> None:
        """Create the table if it does not exist: part of the transaction ``conn`` has open
        (committed with it), else committed at once."""
        opened = not conn.in_transaction
        conn.execute(self.ddl)
        if opened and conn.in_transaction:
            conn.commit()

    def admit(self, conn: sqlite3.Connection, resource: str, fence: Fence) -> None:
        """Admit ``fence`` for ``resource`` in ``conn``'s transaction if it is at least the
        largest admitted so far, and record it; the database's write lock is held until the
        transaction ends.  Raises :class:`StaleFenceError` (recording nothing) if a larger
        fence was admitted."""
        resource, value = check_resource(resource), check_fence(fence)
        if _autocommits(conn):
            raise UsageError(
                "admit() needs a transaction: this connection autocommits "
                "(isolation_level=None) and none is open, so the fence check would commit "
                "on its own before your write; run `BEGIN IMMEDIATE` first"
            )
        if conn.execute(self._admit, (resource, value)).rowcount == 0:
            row = conn.execute(self._newest, (resource,)).fetchone()
            if row is None:  # the write lock is ours: the row cannot have gone
                raise RuntimeError(f"the fence row of {resource!r} vanished under our lock")
            raise StaleFenceError(resource, value, int(row[0]))

    def newest(self, conn: sqlite3.Connection, resource: str) -> int | None:
        """The largest fence admitted for ``resource`` that ``conn`` can see (None: none)."""
        row = conn.execute(self._newest, (check_resource(resource),)).fetchone()
        return None if row is None else int(row[0])

    def fences(self, conn: sqlite3.Connection, limit: int = 1000) -> list[tuple[str, int]]:
        """Every resource and the largest fence admitted for it, in the resources' order,
        at most ``limit`` of them (what ``python -m distlock inspect --fences`` shows)."""
        rows = conn.execute(self._all, (check_limit(limit),)).fetchall()
        return [(str(resource), int(fence)) for resource, fence in rows]
