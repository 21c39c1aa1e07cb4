"""``python -m distlock inspect --fences URL``: the newest fence per resource, as a guard of
:mod:`distlock.fencing` recorded it (read-only).

The URL says where the guard keeps its records: ``postgresql://`` (or ``postgres://``) for
:class:`~distlock.fencing.PostgresFence`'s table, ``sqlite:///path/to/file.db`` for
:class:`~distlock.fencing.SQLiteFence`'s, and ``redis://`` (``rediss://``, ``unix://``) for
:class:`~distlock.fencing.RedisFence`'s records under their prefix.  Nothing is written:
the SQL guards' tables are read in a read-only transaction, or a read-only connection for
SQLite.
"""

from __future__ import annotations

import json
import sqlite3
import sys
from typing import Any

from distlock.errors import ValidationError

POSTGRES = ("postgresql://", "postgres://")
SQLITE = "sqlite:///"
REDIS = ("redis://", "rediss://", "unix://")


def read_fences(
    url: str, *, table: str, prefix: str, limit: int
) -> list[tuple[str, int]]:
    """The resources recorded at ``url`` and their newest fences, in the resources' order."""
    if url.startswith(POSTGRES):
        return _postgres(url, table, limit)
    if url.startswith(SQLITE):
        return _sqlite(url[len(SQLITE):], table, limit)
    if url.startswith(REDIS):
        return _redis(url, prefix, limit)
    raise ValidationError(
        f"--fences reads a guard's records from a postgresql://, sqlite:/// or redis:// URL; "
        f"got {url!r}"
    )


def _postgres(url: str, table: str, limit: int) -> list[tuple[str, int]]:
    from distlock.fencing import PostgresFence

    guard = PostgresFence(table)  # checks the name before anything connects
    import psycopg

    with psycopg.connect(url, connect_timeout=10) as conn:
        conn.read_only = True
        with conn.transaction():
            return guard.fences(conn, limit)


def _sqlite(path: str, table: str, limit: int) -> list[tuple[str, int]]:
    from distlock.fencing import SQLiteFence

    guard = SQLiteFence(table)
    # mode=ro: a missing file is an error, not a new empty database
    conn = sqlite3.connect(f"file:/{path.lstrip('/')}?mode=ro", uri=True)
    try:
        return guard.fences(conn, limit)
    finally:
        conn.close()


def _redis(url: str, prefix: str, limit: int) -> list[tuple[str, int]]:
    import redis

    from distlock.fencing import RedisFence

    client: Any = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
    try:
        return RedisFence(client, prefix=prefix).fences(limit)
    finally:
        client.close()


def run(url: str, *, table: str, prefix: str, limit: int, as_json: bool) -> int:
    """Print the fences (a table, or JSON); 0 when read, 2 for a bad URL or name, 1 when
    the store could not be read."""
    try:
        fences = read_fences(url, table=table, prefix=prefix, limit=limit)
    except ValidationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # the store's own error: one line, not a traceback
        print(f"error: could not read the fences at {url!r}: {exc}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps([{"resource": r, "fence": f} for r, f in fences], indent=2))
    elif not fences:
        print("no fence recorded")
    else:
        width = max(len("resource"), *(len(r) for r, _ in fences))
        print(f"{'resource':<{width}}  newest fence")
        for resource, fence in fences:
            print(f"{resource:<{width}}  {fence}")
    if len(fences) == limit:
        print(f"stopped at --limit {limit}: more resources may be recorded", file=sys.stderr)
    return 0
