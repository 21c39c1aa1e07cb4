"""The PostgreSQL guards (psycopg 3): one row per resource, its largest admitted fence.

``admit`` is one statement in the caller's transaction::

    INSERT INTO t AS t (resource, fence) VALUES ($1, $2)
    ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence
    WHERE t.fence <= excluded.fence
    RETURNING t.fence

A row comes back when the fence was admitted (inserted, or raised to, or equal to the
recorded one).  None comes back when it is stale; the statement changed nothing, and a
second statement reads the newest fence for the error.  Either way the row is locked until
the transaction ends: an inserted row by its insertion, an existing one because ON CONFLICT
DO UPDATE locks the conflicting row whether its WHERE holds or not.  Two transactions that
insert the first row of a resource at once do not both insert: the second waits on the
first's unique-index entry, then takes the conflict path against the committed row (or
inserts, if the first rolled back).  In REPEATABLE READ or SERIALIZABLE the second gets a
serialization failure instead, to be retried as any.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distlock._fencing.common import (
    Fence,
    check_fence,
    check_limit,
    check_resource,
    check_table,
    quote_ident,
)
from distlock.errors import StaleFenceError, UsageError

if TYPE_CHECKING:
    import psycopg
    from psycopg import sql

DEFAULT_TABLE = "distlock_fences"
# PostgreSQL truncates longer identifiers (NAMEDATALEN - 1).
_MAX_IDENT = 63

_DDL = (
    "CREATE TABLE IF NOT EXISTS {} (\n"
    "    resource text PRIMARY KEY,\n"
    "    fence bigint NOT NULL CHECK (fence >= 0)\n"
    ")"
)
_ADMIT = (
    "INSERT INTO {} AS t (resource, fence) VALUES (%s, %s::bigint)"
    " ON CONFLICT (resource) DO UPDATE SET fence = excluded.fence"
    " WHERE t.fence <= excluded.fence RETURNING t.fence"
)
_NEWEST = "SELECT fence FROM {} WHERE resource = %s"
_ALL = "SELECT resource, fence FROM {} ORDER BY resource LIMIT %s"


def _psycopg_sql() -> Any:
    try:
        from psycopg import sql
    except ImportError as exc:
        raise ImportError(
            "the PostgreSQL fence guards need psycopg 3: pip install 'distlock[postgres]'"
        ) from exc
    return sql


class _Table:
    """The table's name, its DDL and the two queries, quoted once with sql.Identifier."""

    def __init__(self, table: str = DEFAULT_TABLE, *, schema: str | None = None) -> None:
        self.table = check_table(table, max_bytes=_MAX_IDENT)
        self.schema = None if schema is None else check_table(schema, max_bytes=_MAX_IDENT)
        parts = (self.table,) if self.schema is None else (self.schema, self.table)
        psql = _psycopg_sql()
        name = psql.Identifier(*parts)
        self._create: sql.Composed = psql.SQL(_DDL).format(name)
        self._admit: sql.Composed = psql.SQL(_ADMIT).format(name)
        self._newest: sql.Composed = psql.SQL(_NEWEST).format(name)
        self._all: sql.Composed = psql.SQL(_ALL).format(name)
        self._quoted = ".".join(quote_ident(part) for part in parts)

    @property
    def ddl(self) -> str:
        """The ``CREATE TABLE IF NOT EXISTS`` statement ``create_table`` runs, for a
        migration: one row per resource, its largest admitted fence (``bigint``)."""
        return _DDL.format(self._quoted)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(table={self.table!r}, schema={self.schema!r})"


def _not_autocommitted(conn: Any) -> None:
    from psycopg.pq import TransactionStatus

    if conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        raise UsageError(
            "admit() needs a transaction: this connection is in autocommit mode with none "
            "open, so the fence check would commit on its own and the row lock end before "
            "your write; call it inside `with conn.transaction():` (or turn autocommit off)"
        )


def _row_fence(row: tuple[Any, ...] | None) -> int | None:
    return None if row is None else int(row[0])


def _stale(resource: str, fence: int, row: tuple[Any, ...] | None) -> StaleFenceError:
    # The row exists (a stale fence is refused only against one) and we hold its lock.
    if row is None:
        raise RuntimeError(f"the fence row of {resource!r} vanished under its row lock")
    return StaleFenceError(resource, fence, int(row[0]))


class PostgresFence(_Table):
    """Admits fences in the caller's psycopg transaction (see the module's docstring)."""

    def create_table(self, conn: psycopg.Connection[Any]) -> None:
        """Create the table if it does not exist: committed at once, or a savepoint of the
        transaction ``conn`` has open (then committed with it)."""
        with conn.transaction():
            conn.execute(self._create)

    def admit(self, conn: psycopg.Connection[Any], resource: str, fence: Fence) -> None:
        """Admit ``fence`` for ``resource`` in ``conn``'s transaction if it is at least the
        largest admitted so far, and record it; the row stays locked until the transaction
        ends, so make the protected writes in the same transaction, after this call.
        Raises :class:`StaleFenceError` (recording nothing) if a larger fence was admitted."""
        resource, value = check_resource(resource), check_fence(fence)
        _not_autocommitted(conn)
        if conn.execute(self._admit, (resource, value)).fetchone() is None:
            raise _stale(resource, value, conn.execute(self._newest, (resource,)).fetchone())

    def newest(self, conn: psycopg.Connection[Any], resource: str) -> int | None:
        """The largest fence admitted for ``resource`` that ``conn`` can see (None: none)."""
        return _row_fence(conn.execute(self._newest, (check_resource(resource),)).fetchone())

    def fences(self, conn: psycopg.Connection[Any], limit: int = 1000) -> list[tuple[str, int]]:
        """Every resource and the largest fence admitted for it, in the resources' order,
        at most ``limit`` of them (what ``python -m distlock inspect --fences`` shows)."""
        rows = conn.execute(self._all, (check_limit(limit),)).fetchall()
        return [(str(resource), int(fence)) for resource, fence in rows]


class AsyncPostgresFence(_Table):
    """:class:`PostgresFence` for a ``psycopg.AsyncConnection``."""

    async def create_table(self, conn: psycopg.AsyncConnection[Any]) -> None:
        """As :meth:`PostgresFence.create_table`."""
        async with conn.transaction():
            await conn.execute(self._create)

    async def admit(
        self, conn: psycopg.AsyncConnection[Any], resource: str, fence: Fence
    ) -> None:
        """As :meth:`PostgresFence.admit`."""
        resource, value = check_resource(resource), check_fence(fence)
        _not_autocommitted(conn)
        cursor = await conn.execute(self._admit, (resource, value))
        if await cursor.fetchone() is None:
            cursor = await conn.execute(self._newest, (resource,))
            raise _stale(resource, value, await cursor.fetchone())

    async def newest(self, conn: psycopg.AsyncConnection[Any], resource: str) -> int | None:
        """As :meth:`PostgresFence.newest`."""
        cursor = await conn.execute(self._newest, (check_resource(resource),))
        return _row_fence(await cursor.fetchone())
